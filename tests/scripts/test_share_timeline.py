#!/usr/bin/env python3
"""scripts/share_timeline.py reads the monitors of a `share` run (nvidia-smi's CSV, vmstat's
table) and keeps what was sampled while the job's windows ran: a synthetic run, with rows before
and after the windows and rows the monitors can leave half-written, checked against its values.

Usage: test_share_timeline.py PROJECT_ROOT OUT_DIR"""
import datetime
import json
import os
import sys

root, out = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(root, "scripts"))
from share_timeline import summary  # noqa: E402

START = 1_765_044_000.0  # the first window's wall clock
WINDOWS = [{"with_requests": False, "start_s": 0.0, "seconds": 10.0, "steps": 200, "held_s": 0, "requests": 0},
           {"with_requests": True, "start_s": 10.0, "seconds": 10.0, "steps": 180, "held_s": 0.1, "requests": 10}]


def utc(t, fmt):
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime(fmt)


def write_run(raw, started=START, gpu=True, host=True):
    os.makedirs(raw, exist_ok=True)
    with open(os.path.join(raw, "share.json"), "w") as f:
        json.dump({"training_started_unix_s": started, "training_windows": WINDOWS, "training_rate_slices": []}, f)
    if gpu:
        with open(os.path.join(raw, "share-gpu.csv"), "w") as f:
            # Before the first window: a clock of 100 MHz that must not count.
            f.write(f"{utc(START - 5, '%Y/%m/%d %H:%M:%S.%f')[:-3]}, 100, 2619, 50.0, 30, 0\n")
            for s in range(21):  # the windows' 20 s: SM clock 1500 + 10 s, utilization 2 s
                f.write(f"{utc(START + s, '%Y/%m/%d %H:%M:%S.%f')[:-3]}, {1500 + 10 * s}, 2619, {100 + s}.5, "
                        f"{40 + s}, {2 * s}\n")
            f.write(f"{utc(START + 3, '%Y/%m/%d %H:%M:%S.%f')[:-3]}, [N/A], 2619, 100.5, 40, 1\n")  # unreadable
            f.write(f"{utc(START + 30, '%Y/%m/%d %H:%M:%S.%f')[:-3]}, 9999, 2619, 50.0, 99, 100\n")  # after
            f.write("2026/12/06 18:0")  # cut by the monitor's stop
    if host:
        with open(os.path.join(raw, "share-host.txt"), "w") as f:
            f.write("procs -----------memory---------- ---swap-- -----io---- -system-- ------cpu----- -----timestamp-----\n")
            f.write(" r  b   swpd   free   buff  cache   si   so    bi    bo   in   cs us sy id wa st                 UTC\n")
            for s in range(-2, 23):  # 21 rows within the windows: us = s, sy 5, steal s % 4
                f.write(f" 1  0      0 22047608  27924 849344    0    0     0     0  500  800 {max(s, 0)}  5 80  0  "
                        f"{max(s, 0) % 4} {utc(START + s, '%Y-%m-%d %H:%M:%S')}\n")
            f.write(" 1  0      0 22047608\n")  # cut


write_run(os.path.join(out, "both"))
lines = summary(os.path.join(out, "both"))
assert len(lines) == 2, lines
assert lines[0] == ("GPU each second (21 samples, min / median / max): SM clock 1500 / 1600 / 1700 MHz, "
                    "utilization 0 / 20 / 40 %, power 100 / 110 / 120 W, temperature up to 60 C."), lines[0]
assert lines[1] == ("Host CPU each second (21 samples, min / median / max): user + system 5 / 15 / 25 %, "
                    "steal 0 / 1 / 3 %."), lines[1]

# Only one monitor recorded: only its line.
write_run(os.path.join(out, "gpu-only"), host=False)
assert [x.split(" ")[0] for x in summary(os.path.join(out, "gpu-only"))] == ["GPU"]
# A bench-serve that did not say when its windows began (before the field): nothing is laid
# beside them, rather than samples from another time.
write_run(os.path.join(out, "no-start"), started=0)
assert summary(os.path.join(out, "no-start")) == []
# No share.json (bench-serve failed), or one without windows: no lines for the report, and the
# command says what is missing.
assert summary(os.path.join(out, "none")) == []
os.makedirs(os.path.join(out, "empty"))
with open(os.path.join(out, "empty", "share.json"), "w") as f:
    json.dump({"training_windows": []}, f)
assert summary(os.path.join(out, "empty")) == []
import subprocess  # noqa: E402
for folder, message in (("none", "share.json: no such file"), ("empty", "has no training windows")):
    run = subprocess.run([sys.executable, os.path.join(root, "scripts", "share_timeline.py"),
                          os.path.join(out, folder), "--summary"], capture_output=True, text=True)
    assert run.returncode != 0 and message in run.stderr and "Traceback" not in run.stderr, run
print("ok")
