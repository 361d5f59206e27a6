#!/usr/bin/env python3
"""Draws the latency distributions of one `psw validate` run side by side: the empirical CDF of
the simulated requests and of the measured ones (the cross-validation's trace replay plot), per
model and over every request.

Usage: scripts/validation_cdf.py VALIDATION_DIR [OUT.png]
  VALIDATION_DIR  what `psw validate --out` wrote (simulated/requests.csv, measured/requests.csv,
                  validation.json); OUT.png defaults to VALIDATION_DIR/latency-cdf.png
Only draws: the comparison itself is validation.json, computed by psw validate.
"""
import csv
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import LogLocator, NullFormatter, ScalarFormatter  # noqa: E402


def latencies_ms(path, ok_column):
    """{model: [latency ms]} of the answered requests of a requests.csv (psw sim's or psw load's)."""
    out = {}
    with open(path) as f:
        for row in csv.DictReader(f):
            if row.get("task", "inference") != "inference":
                continue
            if ok_column and row.get(ok_column, "ok") != "ok":
                continue
            out.setdefault(row["model"], []).append(int(row["latency_ns"]) / 1e6)
    return out


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    folder = sys.argv[1]
    out = sys.argv[2] if len(sys.argv) == 3 else os.path.join(folder, "latency-cdf.png")
    report = json.load(open(os.path.join(folder, "validation.json")))
    simulated = latencies_ms(os.path.join(folder, "simulated", "requests.csv"), None)
    measured = latencies_ms(os.path.join(folder, "measured", "requests.csv"), "status")
    models = sorted(set(simulated) | set(measured))
    scopes = [("every request", sum(simulated.values(), []), sum(measured.values(), []))]
    scopes += [(m, simulated.get(m, []), measured.get(m, [])) for m in models]
    fig, axes = plt.subplots(1, len(scopes), figsize=(4.2 * len(scopes), 3.6), squeeze=False)
    for ax, (title, sim, meas) in zip(axes[0], scopes):
        for values, label, style in ((meas, "measured", "-"), (sim, "simulated", "--")):
            if not values:
                continue
            values = sorted(values)
            n = len(values)
            ax.step(values, [(i + 1) / n for i in range(n)], style, where="post", label=f"{label} ({n})")
        ax.set_xscale("log")
        # Plain numbers at 1, 2 and 5 of each decade; the other minor ticks unlabelled (their
        # labels overlapped where the decade is narrow).
        ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.xaxis.set_major_formatter(ScalarFormatter())
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("latency (ms)")
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].set_ylabel("fraction of requests")
    axes[0][0].legend(loc="lower right", fontsize=8)
    fig.suptitle(f"{report['experiment']} ({report['mechanism']}): simulated beside measured")
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    print(out)


if __name__ == "__main__":
    main()
