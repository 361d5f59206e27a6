#!/usr/bin/env python3
"""The table of scripts/calibrate-h200.sh: per mechanism and model, the held-out run's errors with
the hardware profile before and after calibration (read from psw validate's validation.csv; the
errors are psw validate's). Only tabulates.

Usage: scripts/calibration_table.py OUT_DIR CALIBRATED_PROFILE > OUT_DIR/README.md
"""
import csv
import os
import sys

MECHANISMS = {
    "no-memory-management": "memory.cuda_malloc_ns",
    "no-ipc-optimization": "memory.ipc_handle_open_ns",
    "no-pinned-memory": "link.pageable.bandwidth_bytes_per_s",
    "unified-memory": "unified_memory.page_fault_ns",
    "mps": "mps.inference_slowdown_percent",
    "time-sliced": "time_slicing.inference_share_percent",
    "stop-and-start": "startup.framework_start_ns",
    "pipeswitch": "(none: the check that the fits leave PipeSwitch alone)",
}
MODELS = ["resnet152", "inception_v3", "bert_base"]


def rows(folder):
    with open(os.path.join(folder, "validation.csv"), newline="") as f:
        return {(r["scope"], r["measure"]): r for r in csv.DictReader(f)}


def error(table, scope, measure):
    row = table.get((scope, measure))
    if row is None or row["relative_error"] == "":
        return "-"
    mark = "" if row["status"] == "within" else " (outside)"
    return f"{100 * float(row['relative_error']):+.1f}%{mark}"


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    out, profile = argv[1], argv[2]
    print("# The estimated costs calibrated on the H200\n")
    env = os.path.join(out, "environment.md")
    if os.path.exists(env):
        print("Where the simulator ran (the measurements' machines are in each run's environment.md):\n")
        print(open(env).read().strip() + "\n")
    print("Produced by `scripts/calibrate-h200.sh` (`psw calibrate`, Note [Calibrating a cost]). Each cost is")
    print("fitted to the run of the mechanism that pays it (`results/gpu/raw-figures-2026-12-01-a` and `-b`),")
    print("chained into `results/profiles/h200-calibrated.yaml`, then validated with `psw validate --measured`")
    print("on `results/gpu/raw-figures-2026-12-01-c`, a later call on another machine of the same kind, which")
    print("no fit saw. Errors are (simulated - measured) / measured; engine = the input on the device to the")
    print("forward's end, latency = the client's; the tolerance is issue 9's (5%; 15% for MPS, time-sliced")
    print("and unified memory).\n")
    with open(profile) as f:
        for line in f:
            if line.strip().startswith("note:"):
                notes = line.split("note:", 1)[1].strip().strip('"').split("; ")
                print("The fits, as the profile's source note records them:\n")
                for note in notes:
                    if "psw calibrate" in note:
                        print(f"- {note}")
                print()
    failed = []
    for mechanism in MECHANISMS:
        path = os.path.join(out, f"fit-{mechanism}.txt")
        if os.path.exists(path):
            text = open(path).read().strip()
            if text.startswith("psw: error:"):
                failed.append((mechanism, text[len("psw: error:"):].strip()))
    if failed:
        print("Not fitted (no value gives the measurement; the cost stays as it was):\n")
        for mechanism, message in failed:
            print(f"- {mechanism}: {message}")
        print()
    print("| mechanism | cost fitted | model | engine error, before | engine error, after | latency error, before | latency error, after |")
    print("|---|---|---|---:|---:|---:|---:|")
    for mechanism, cost in MECHANISMS.items():
        before_dir, after_dir = os.path.join(out, f"{mechanism}-uncalibrated"), os.path.join(out, mechanism)
        if not os.path.exists(os.path.join(after_dir, "validation.csv")):
            continue
        before, after = rows(before_dir), rows(after_dir)
        for model in MODELS:
            print(f"| {mechanism} | {cost} | {model} | {error(before, model, 'engine_mean_ms')} | "
                  f"{error(after, model, 'engine_mean_ms')} | {error(before, model, 'mean_ms')} | "
                  f"{error(after, model, 'mean_ms')} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
