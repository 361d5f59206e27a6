#!/usr/bin/env python3
"""Draws the training job's rate over a `share` run beside what the machine did meanwhile: the
job's steps per second in slices of its windows (alone and under requests, as `psw bench-serve`
measured them), the GPU's SM clock and utilization (nvidia-smi, each second) and the host's CPU
use and steal time (vmstat, each second), on one time axis from the first window's start. What
moves the job's rate by itself (Note [Training windows]) shows against these.

Usage: scripts/share_timeline.py RAW_DIR [OUT.png]
  RAW_DIR  holds share.json (psw bench-serve --out), and where they were recorded share-gpu.csv
           (TZ=UTC nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,
           temperature.gpu,utilization.gpu --format=csv,noheader,nounits -l 1) and share-host.txt
           (TZ=UTC vmstat -n -t 1); OUT.png defaults to RAW_DIR/share-timeline.png.
  --summary  prints one line per monitor (min, median, max over the windows) instead of drawing.
Only draws and summarises: the rates are bench-serve's.
"""
import datetime
import json
import os
import statistics
import sys

GPU_COLUMNS = ["timestamp", "sm_mhz", "mem_mhz", "power_w", "temperature_c", "utilization_pct"]


def utc_seconds(text, fmt):
    """Seconds since the epoch of a UTC wall-clock time in the given format."""
    return datetime.datetime.strptime(text.strip(), fmt).replace(tzinfo=datetime.timezone.utc).timestamp()


def gpu_samples(path):
    """[(unix s, {column: value})] of nvidia-smi's rows; rows it could not read (a field 'N/A',
    a line cut by the monitor's stop) are left out."""
    rows = []
    if not os.path.exists(path):
        return rows
    with open(path) as f:
        for line in f:
            fields = [x.strip() for x in line.split(",")]
            if len(fields) != len(GPU_COLUMNS):
                continue
            try:
                t = utc_seconds(fields[0], "%Y/%m/%d %H:%M:%S.%f")
                rows.append((t, {k: float(v) for k, v in zip(GPU_COLUMNS[1:], fields[1:])}))
            except ValueError:
                continue
    return rows


def host_samples(path):
    """[(unix s, {'busy_pct', 'steal_pct'})] of vmstat -n -t rows (user + system, and steal)."""
    rows = []
    if not os.path.exists(path):
        return rows
    names = None
    with open(path) as f:
        for line in f:
            tokens = line.split()
            if "us" in tokens and "st" in tokens:
                names = tokens[:-1]  # the last is the timestamp's zone
                continue
            if names is None or len(tokens) != len(names) + 2 or not tokens[0].isdigit():
                continue
            try:
                values = dict(zip(names, (float(x) for x in tokens[: len(names)])))
                t = utc_seconds(tokens[-2] + " " + tokens[-1], "%Y-%m-%d %H:%M:%S")
            except ValueError:
                continue
            rows.append((t, {"busy_pct": values["us"] + values["sy"], "steal_pct": values["st"]}))
    return rows


def within_run(samples, start, end):
    """The samples taken between the first window's start and the last one's end, as (s since
    the start, values)."""
    return [(t - start, v) for t, v in samples if start <= t <= end]


class NoWindows(Exception):
    pass


def load(raw):
    path = os.path.join(raw, "share.json")
    if not os.path.exists(path):
        raise NoWindows(f"{path}: no such file (psw bench-serve --out writes it)")
    d = json.load(open(path))
    if not d.get("training_windows"):
        raise NoWindows(f"{path} has no training windows (a bench-serve run without --window)")
    start = d.get("training_started_unix_s", 0)
    windows = d["training_windows"]
    end = start + max(w["start_s"] + w["seconds"] for w in windows)
    gpu = within_run(gpu_samples(os.path.join(raw, "share-gpu.csv")), start, end) if start else []
    host = within_run(host_samples(os.path.join(raw, "share-host.txt")), start, end) if start else []
    return d, windows, gpu, host


def spread(samples, key):
    values = [v[key] for _, v in samples]
    return min(values), statistics.median(values), max(values)


def summary(raw):
    """One line per monitor, for the serve report; nothing where none was recorded (or no windows ran)."""
    try:
        _, _, gpu, host = load(raw)
    except NoWindows:
        return []
    lines = []
    if gpu:
        sm, util, power, temp = (spread(gpu, k) for k in ("sm_mhz", "utilization_pct", "power_w", "temperature_c"))
        lines.append(f"GPU each second ({len(gpu)} samples, min / median / max): SM clock {sm[0]:.0f} / {sm[1]:.0f} / "
                     f"{sm[2]:.0f} MHz, utilization {util[0]:.0f} / {util[1]:.0f} / {util[2]:.0f} %, "
                     f"power {power[0]:.0f} / {power[1]:.0f} / {power[2]:.0f} W, temperature up to {temp[2]:.0f} C.")
    if host:
        busy, steal = spread(host, "busy_pct"), spread(host, "steal_pct")
        lines.append(f"Host CPU each second ({len(host)} samples, min / median / max): user + system "
                     f"{busy[0]:.0f} / {busy[1]:.0f} / {busy[2]:.0f} %, steal {steal[0]:.0f} / {steal[1]:.0f} / "
                     f"{steal[2]:.0f} %.")
    return lines


def draw(raw, out):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    d, windows, gpu, host = load(raw)
    panels = 1 + bool(gpu) + bool(host)
    fig, axes = plt.subplots(panels, 1, figsize=(10, 2.6 * panels), sharex=True, squeeze=False)
    axes = [a[0] for a in axes]
    for ax in axes:
        for w in windows:
            if w["with_requests"]:
                ax.axvspan(w["start_s"], w["start_s"] + w["seconds"], color="tab:orange", alpha=0.08, lw=0)
    rate = axes[0]
    for kind, colour, label in ((False, "tab:blue", "alone"), (True, "tab:orange", "under requests")):
        first = True
        for x in d.get("training_rate_slices", []):
            if x["with_requests"] != kind or x["seconds"] <= 0:
                continue
            rate.hlines(x["steps"] / x["seconds"], x["start_s"], x["start_s"] + x["seconds"], colors=colour, lw=2,
                        label=label if first else None)
            first = False
        for w in windows:
            if w["with_requests"] == kind and w["seconds"] > 0:
                rate.hlines(w["steps"] / w["seconds"], w["start_s"], w["start_s"] + w["seconds"], colors=colour, lw=1,
                            linestyles="dashed")
    rate.set_ylabel("job steps/s")
    rate.set_title("training job's rate (slices solid, windows dashed; shaded: under requests)")
    rate.legend(loc="lower left", fontsize=8)
    k = 1
    if gpu:
        ax = axes[k]
        k += 1
        ts = [t for t, _ in gpu]
        ax.plot(ts, [v["sm_mhz"] for _, v in gpu], color="tab:green", lw=1, label="SM clock (MHz)")
        ax.set_ylabel("SM MHz")
        twin = ax.twinx()
        twin.plot(ts, [v["utilization_pct"] for _, v in gpu], color="tab:gray", lw=1, label="utilization (%)")
        twin.set_ylabel("GPU util %")
        twin.set_ylim(0, 105)
        ax.set_title("GPU (nvidia-smi each second)")
    if host:
        ax = axes[k]
        ts = [t for t, _ in host]
        ax.plot(ts, [v["busy_pct"] for _, v in host], color="tab:purple", lw=1, label="user + system")
        ax.plot(ts, [v["steal_pct"] for _, v in host], color="tab:red", lw=1, label="steal")
        ax.set_ylabel("host CPU %")
        ax.set_ylim(0, 105)
        ax.legend(loc="upper left", fontsize=8)
        ax.set_title("host (vmstat each second)")
    axes[-1].set_xlabel("seconds since the first window began")
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def main(argv):
    args = [a for a in argv[1:] if a != "--summary"]
    if len(args) not in (1, 2):
        sys.exit(__doc__)
    raw = args[0]
    try:
        if "--summary" in argv:
            load(raw)  # says what is missing, where summary() would print nothing
            for line in summary(raw):
                print(line)
            return
        draw(raw, args[1] if len(args) == 2 else os.path.join(raw, "share-timeline.png"))
    except NoWindows as e:
        sys.exit(f"share_timeline: {e}")


if __name__ == "__main__":
    main(sys.argv)
