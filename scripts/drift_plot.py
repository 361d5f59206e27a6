#!/usr/bin/env python3
"""Draws part `drift` of scripts/gpu-serve.sh: the training job's steps per second in each window
(alone, beside requests) against the wall clock, above the GPU's SM clock, power and temperature
as nvidia-smi sampled them every second (its timestamps in UTC: gpu-serve.sh runs it so). Only draws: the rates are psw bench-serve's.

Usage: scripts/drift_plot.py RAW_DIR OUT.png   (RAW_DIR: a raw-serve folder with drift/)
"""
import csv
import datetime
import glob
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    drift = os.path.join(sys.argv[1], "drift")
    pairs = sorted(glob.glob(os.path.join(drift, "pair-*.json")),
                   key=lambda p: int(os.path.basename(p)[len("pair-"):-len(".json")]))
    if not pairs:
        sys.exit(f"drift_plot: no pair-*.json in {drift}")
    starts = [float(open(p[:-len(".json")] + ".start").read()) for p in pairs]
    origin = starts[0]
    fig, (rate_ax, gpu_ax) = plt.subplots(2, 1, figsize=(9, 6), sharex=True)
    for path, start in zip(pairs, starts):
        d = json.load(open(path))
        window = d["spec"]["window_s"]
        rates = d["training_steps_per_s"]
        t = start - origin
        rate_ax.plot([t, t + window], [rates["alone"]] * 2, "-", color="tab:blue")
        rate_ax.plot([t + window, t + 2 * window], [rates["with_requests"]] * 2, "-", color="tab:orange")
    rate_ax.plot([], [], "-", color="tab:blue", label="alone")
    rate_ax.plot([], [], "-", color="tab:orange", label=f"beside requests ({json.load(open(pairs[0]))['spec']['rate']}/s)")
    rate_ax.set_ylabel("training steps/s")
    rate_ax.legend(loc="lower left", fontsize=8)
    rate_ax.grid(True, alpha=0.3)
    times, clocks, power, temperature = [], [], [], []
    with open(os.path.join(drift, "gpu.csv")) as f:
        rows = csv.reader(f)
        next(rows)  # the header
        for row in rows:
            if len(row) < 5:
                continue
            try:
                when = datetime.datetime.strptime(row[0].strip(), "%Y/%m/%d %H:%M:%S.%f")
                values = [float(row[1]), float(row[3]), float(row[4])]
            except ValueError:
                continue  # a line nvidia-smi could not fill ("[N/A]")
            times.append(when.replace(tzinfo=datetime.timezone.utc).timestamp() - origin)
            clocks.append(values[0])
            power.append(values[1])
            temperature.append(values[2])
    gpu_ax.plot(times, clocks, color="tab:green", label="SM clock (MHz)")
    gpu_ax.set_ylabel("SM clock (MHz)")
    gpu_ax.set_xlabel("seconds since the first pair")
    gpu_ax.grid(True, alpha=0.3)
    second = gpu_ax.twinx()
    second.plot(times, power, color="tab:red", alpha=0.6, label="power (W)")
    second.plot(times, temperature, color="tab:purple", alpha=0.6, label="temperature (C)")
    second.set_ylabel("W, C")
    lines = gpu_ax.get_lines() + second.get_lines()
    gpu_ax.legend(lines, [line.get_label() for line in lines], loc="lower left", fontsize=8)
    fig.suptitle("The training job's rate over minutes on one server, and the GPU beside it")
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=120)
    print(sys.argv[2])


if __name__ == "__main__":
    main()
