#!/usr/bin/env python3
"""The tables of scripts/calibrate-h200.sh: per held-out run, mechanism and model, the run's errors
with the hardware profile before and after calibration (read from psw validate's validation.csv;
the errors are psw validate's). Only tabulates.

Usage: scripts/calibration_table.py OUT_DIR CALIBRATED_PROFILE RUN... > OUT_DIR/README.md
  (RUN: a folder OUT_DIR/RUN/ of <mechanism>{,-uncalibrated}/, for results/gpu/raw-figures-RUN, or
   results/gpu/raw-RUN for a RUN named serve-*)
"""
import csv
import os
import sys

MECHANISMS = {
    # Note [Eager switch in the simulator]: the server's host times where adopted; the fitted
    # analytic cost stays the profile's for other models.
    "no-memory-management": "eager_switch.host (memory.cuda_malloc_ns fitted before)",
    "no-ipc-optimization": "eager_switch.host (memory.ipc_handle_open_ns fitted before)",
    "no-pinned-memory": "eager_switch.host (link.pageable.bandwidth_bytes_per_s fitted before)",
    # Note [Unified memory's two costs]: fitted together.
    "unified-memory": "unified_memory.page_fault_ns and migration_bandwidth_bytes_per_s",
    "mps": "mps.contention (mps.inference_slowdown_percent for other jobs)",
    "time-sliced": "time_slicing.inference_share_percent",
    "stop-and-start": "startup.worker_start",
    "two-processes": "startup.worker_start (stop-and-start's: the same fresh process per task)",
    # Note [Training abort]: its engine from its host times, the abort before it.
    "one-process": "training_abort_ns (eager_switch.host adopted before)",
    "no-optimization": "(none of its own: the link)",
    "per-layer-pipeline": "(none of its own: the link and the layers)",
    "grouped-transmission": "(none of its own: the link and the layers)",
    "pipeswitch": "(none: the check that the fits leave PipeSwitch alone)",
    "ready": "(none: the check that the fits leave Ready alone)",
}
MODELS = ["resnet152", "inception_v3", "bert_base"]
# What sets a run apart from the others, under its heading (Note [Inputs in shared memory]).
RUN_NOTES = {
    "serve-2026-12-03-raw-same-call": "Raw inputs; the request path fitted in the same call on the same machine "
                                      "(part `calibrate-load` just before).",
    "serve-2026-12-03-shm-unprimed": "Inputs in shared memory (`psw load --shared-memory`), the request path fitted in "
                                     "the same call, before each sender warmed up through its own regions: nearly "
                                     "every request here is its region's first, which costs the server 1-1.5 ms more "
                                     "than the path fitted from a burst (Note [Shared memory senders]).",
    "serve-2026-12-03-shm": "Inputs in shared memory, each sender warmed up through its own regions; the request "
                            "path fitted in the same call (part `calibrate-load` just before).",
    "serve-2026-12-03-shm-held": "Inputs in shared memory; the machine of `raw-serve-2026-12-03-shm`, one call later, "
                                 "simulated with that call's request path: held out.",
    "serve-2026-12-03-shm-figures": "Inputs in shared memory, the request path fitted in the same call; the kill of "
                                    "the process replaced adopted from its stop-and-start run, the start from "
                                    "`raw-serve-2026-12-03-fresh` (another machine): the start's rows here are held "
                                    "out across machines. Under stop-and-start and two processes no warm-up, so each "
                                    "run's first request took the process the server started with (Note [Processes "
                                    "a server starts with]).",
    "serve-2026-12-03-shm-all-a": "Inputs in shared memory; the first of two calls that measured every mechanism on "
                                  "one machine, the request path fitted in the same call. Stop-and-start and two "
                                  "processes with one warm-up request (every measured request waits for a start); the "
                                  "start simulated is the shipped profile's, of another machine. One-process's rows are "
                                  "held out; its last request waited 40-52 ms for the regions psw load then released "
                                  "early (Note [Shared memory senders]), as in every one-process run of 2026-12-03.",
    "serve-2026-12-03-shm-all-b": "Inputs in shared memory; the second call on the machine of `-shm-all-a`, the request "
                                  "path fitted in the same call.",
    "serve-2026-12-03-shm-one-process": "Inputs in shared memory; one process alone, on a machine started afresh after "
                                        "the calls of `-shm-all-a` (whether the same host is not known), simulated with "
                                        "`-shm-all-a`'s request path; held out, its last request waiting for psw load's "
                                        "released regions as `-shm-all-a`'s.",
    "serve-2026-12-03-shm-one-process-b": "As `-shm-one-process`, one call later, with PipeSwitch beside it as a "
                                          "check; held out.",
    "serve-2026-12-04-one-process-a": "Inputs in shared memory; one process alone, the first of three servers in a row "
                                      "in one call on a machine started afresh, simulated with `-shm-all-a`'s request "
                                      "path; psw load kept its regions until the last answer. The three are one "
                                      "process's fit (Note [Training abort], Note [Pooled runs]), not held out.",
    "serve-2026-12-04-one-process-b": "The second of the three: a third of one process's fit.",
    "serve-2026-12-04-one-process-c": "The third of the three: a third of one process's fit.",
    "serve-2026-12-04-held-a": "Inputs in shared memory; one process and time-sliced sharing, the first of two "
                               "pairs of servers in a row in a call after the one-process fit's, on a machine started "
                               "afresh, simulated with `-shm-all-a`'s request path: one process held out.",
    "serve-2026-12-04-held-b": "The second pair of that call: held out.",
    "serve-2026-12-04-train-inception-v3": "Inputs in shared memory; the three models served beside Inception-v3 "
                                           "training at batch 8 (299 x 299) instead of ResNet-152 (gpu-serve.sh's "
                                           "PSW_TRAINING_MODEL), simulated with `-shm-all-a`'s request path and the "
                                           "job's step from its layers (no serving profile has it). MPS's rows are "
                                           "the fit of its contention points beside this job (Note [MPS contention]); "
                                           "*before* is the one number of every other job.",
    "serve-2026-12-04-train-bert-base": "As the run above, beside BERT-base training at batch 8 (128 tokens).",
    "serve-2026-12-04-um-a": "Inputs in shared memory; unified memory alone, the first of three servers in a row on "
                             "a machine started afresh (2026-12-04), simulated with `-shm-all-a`'s request path: held "
                             "out for Note [Unified memory's two costs] (fitted on 2026-12-02-b and -c).",
    "serve-2026-12-04-um-b": "As the run above, its second server.",
    "serve-2026-12-04-um-c": "As the run above, its third server.",
    "serve-2026-12-03-shm-held-same-machine": "The eager ablations of the run above again, their host times adopted "
                                              "on its machine (from `raw-serve-2026-12-03-shm`, one call before) over "
                                              "the calibrated profile: *before* is the calibrated profile (host times "
                                              "of `raw-serve-2026-12-03-eager`, another machine), *after* this "
                                              "machine's (Note [Adopting eager host times]; the profile is not kept).",
}
# A run validated a second way: the folder of its measurement.
SAME_MACHINE = "-same-machine"


def rows(folder):
    with open(os.path.join(folder, "validation.csv"), newline="") as f:
        return {(r["scope"], r["measure"]): r for r in csv.DictReader(f)}


def error(table, scope, measure):
    row = table.get((scope, measure))
    if row is None or row["relative_error"] == "":
        return "-"
    mark = "" if row["status"] == "within" else " (outside)"
    return f"{100 * float(row['relative_error']):+.1f}%{mark}"


def fitted_on(notes, cost, mechanism):
    """The run folders a cost was fitted to, as the profile's notes name them; None when not fitted.
    MPS's contention (Note [MPS contention]) is fitted per training batch, one run each; eager host
    times are adopted per mechanism."""
    runs = []
    for note in notes:
        if note.startswith(cost.split(" ")[0] + " ") and " fitted by psw calibrate to " in note:
            # Note [Pooled runs]: several folders, joined by " and ".
            for folder in note.split(" fitted by psw calibrate to ", 1)[1].split(" (")[0].split(" and "):
                runs.append(folder.split("/validation/")[0].split("/")[-1])
        # Note [Adopting a worker start]: adopted, not fitted.
        if cost.startswith("startup.worker_start") and " adopted by psw calibrate " in note and " worker starts in " in note:
            runs.append(note.split(" worker starts in ", 1)[1].split("/validation/")[0].split("/")[-1])
        # Note [Adopting eager host times]: adopted per mechanism; the note names it.
        if cost.startswith("eager_switch.host") and note.startswith(f"eager_switch.host under {mechanism} ") \
                and " adopted by psw calibrate from " in note:
            for folder in note.split(" adopted by psw calibrate from ", 1)[1].split(" (")[0].split(" and "):
                run = folder.split("/validation/")[0].split("/")[-1]
                if run not in runs:
                    runs.append(run)
    return ", ".join(runs) or None


def main(argv):
    if len(argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    out, profile, runs = argv[1], argv[2], argv[3:]
    print("# The estimated costs calibrated on the H200\n")
    env = os.path.join(out, "environment.md")
    if os.path.exists(env):
        print("Where the simulator ran (the measurements' machines are in each run's environment.md):\n")
        print(open(env).read().strip() + "\n")
    print("Produced by `scripts/calibrate-h200.sh` (`psw calibrate`, Note [Calibrating a cost]). Each cost is")
    print("fitted to the run of the mechanism that pays it (the note below names the run), the fits chained into")
    print("`results/profiles/h200-calibrated.yaml`, which is then validated with `psw validate --measured` on")
    print("runs no fit saw, with the profile before and after calibration. Errors are (simulated - measured) /")
    print("measured; engine = the input on the device to the forward's end, latency = the client's; the")
    print("tolerance is `psw validate`'s (5%; 15% for MPS, time-sliced and unified memory). Each run is simulated")
    print("with the request path calibrated on the same machine as the run, in the same device call.\n")
    notes = []
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
    for run in runs:
        measured = run.removesuffix(SAME_MACHINE)
        folder = f"raw-{measured}" if measured.startswith("serve-") else f"raw-figures-{measured}"
        print(f"## Validated on `results/gpu/{folder}`\n")
        if run in RUN_NOTES:
            print(RUN_NOTES[run] + "\n")
        print("| mechanism | cost fitted | fitted on | model | engine error, before | engine error, after | latency error, before | latency error, after |")
        print("|---|---|---|---|---:|---:|---:|---:|")
        for mechanism, cost in MECHANISMS.items():
            before_dir = os.path.join(out, run, f"{mechanism}-uncalibrated")
            after_dir = os.path.join(out, run, mechanism)
            if not os.path.exists(os.path.join(after_dir, "validation.csv")):
                continue
            before, after = rows(before_dir), rows(after_dir)
            source = fitted_on(notes, cost, mechanism) or "-"
            # A fresh process per task, or the abort (Note [Training abort]): every request
            # together too, the fit being over all of them.
            scopes = MODELS + ["all"] if cost.startswith(("startup.worker_start", "training_abort")) else MODELS
            for model in scopes:
                print(f"| {mechanism} | {cost} | {source} | {model} | {error(before, model, 'engine_mean_ms')} | "
                      f"{error(after, model, 'engine_mean_ms')} | {error(before, model, 'mean_ms')} | "
                      f"{error(after, model, 'mean_ms')} |")
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
