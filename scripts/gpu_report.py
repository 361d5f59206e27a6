#!/usr/bin/env python3
"""Builds results/gpu/<date>-h200.md from the JSON files `psw run --format json` wrote."""
import glob
import json
import os
import re
import subprocess
import sys


def where_the_time_goes(runs) -> None:
    """A few lines per model, computed from the runs: where a switched-in request spends its time."""
    placed = lambda r: r.get("placement") == "auto"
    by = {(r["model"], r["mode"], bool(r.get("graph"))): r for r in runs if not placed(r)}
    placed_runs = {r["model"]: r for r in runs if placed(r) and r.get("graph")}
    print("\n## Where the time goes\n")
    for model in sorted({r["model"] for r in runs}):
        g = by.get((model, "pipeswitch", True))
        e = by.get((model, "pipeswitch", False))
        if not g or "transfer_ms" not in g:
            continue
        lat = g["latency_ms"]["median"]
        transfer = g["transfer_ms"]
        graph_ready = g["ready_graph_ms"]["median"]
        eager_ready = g["ready_ms"]["median"]
        limit = "the PCIe transfer" if transfer > graph_ready else "the GPU compute"
        print(f"- **{model}**: {g['param_bytes'] / 1e6:.1f} MB of parameters take {transfer:.2f} ms over the link; "
              f"the GPU needs {graph_ready:.2f} ms for the forward (graph, resident), {eager_ready:.2f} ms when "
              f"LibTorch dispatches it eagerly. The graph switch answers in {lat:.2f} ms with {g['groups']} groups: "
              f"{limit} sets the pace ({lat / max(transfer, graph_ready):.2f} x the larger of the two). "
              f"Startup {g['startup_ms']['median']:.3f} ms (predicted {g['predicted_startup_ms']:.3f} ms: the first group's copy).")
        h = placed_runs.get(model)
        if h:
            names = ", ".join(h.get("host_mapped_layers", [])) or "nothing"
            print(f"  With `--placement auto` the planner reads {names} in place from pinned host memory "
                  f"({h['param_bytes'] / 1e6:.1f} MB still copied); the graph switch answers in {h['latency_ms']['median']:.2f} ms "
                  f"({h['latency_ms']['median'] / h['ready_ms']['median']:.2f} x eager resident), startup "
                  f"{h['startup_ms']['median']:.3f} ms.")
        if e:
            print(f"  Eagerly, the same switch takes {e['latency_ms']['median']:.2f} ms: host dispatch of the forward, "
                  f"not the transfer, dominates, which is why the switch is replayed as one graph.")
    print("\nWhat stands between these numbers and the bound: per-group synchronisation is an event edge")
    print("inside the graph (near zero), so the remaining gap is the order of the copies. A model whose first")
    print("layers are large and cheap (BERT's 94 MB word embedding) waits for them before any compute; reading")
    print("such layers from pinned host memory instead of copying them (DESIGN.md §3 placement, `--placement auto`)")
    print("removes that wait. BERT-base stays near its eager time because its remaining 343 MB of copied")
    print("parameters alone take about as long over PCIe as LibTorch's eager forward.")


def profile_summary(profiles_dir: str) -> None:
    """Totals of the measured profiles: calibrated and instrumented, forward and backward."""
    rows = []
    for path in sorted(glob.glob(os.path.join(profiles_dir, "*.yaml"))):
        text = open(path).read()
        if "forward_ns:" not in text:
            continue  # the hardware profile
        name = re.search(r"^name: (\S+)", text, re.M).group(1)
        fwd = sum(int(v) for v in re.findall(r"forward_ns: (\d+)", text))
        bwd = sum(int(v) for v in re.findall(r"backward_ns: (\d+)", text))
        def phase(label):
            m = re.search(label + r" ([\d.]+) ms \(([\d.]+) ms with per-layer marks", text)
            return (float(m.group(1)), float(m.group(2))) if m else (float("nan"), float("nan"))
        inf, inf_marked = phase("inference forward")
        tf, tf_marked = phase("training forward")
        bw, bw_marked = phase("backward")
        rows.append((name, inf, inf_marked, tf, tf_marked, bw, bw_marked, fwd / 1e6, bwd / 1e6))
    if not rows:
        return
    print("\n## Measured profiles (`psw profile --train`, results/profiles)\n")
    print("Per phase, the graph timed without per-layer marks, and with them (one event record per layer or")
    print("per parameter gradient); the per-layer times in the profiles are calibrated to the unmarked time")
    print("(Note [Mark overhead] in exec/include/psw/exec/profiler.hpp). Training runs in train mode")
    print("(BatchNorm on batch statistics; Inception-v3 with its auxiliary head).\n")
    print("| model | inference forward (ms) | with marks (ms) | training forward (ms) | with marks (ms) | backward (ms) | with marks (ms) |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, inf, inf_m, tf, tf_m, bw, bw_m, _, _ in rows:
        print(f"| {name} | {inf:.3f} | {inf_m:.3f} | {tf:.3f} | {tf_m:.3f} | {bw:.3f} | {bw_m:.3f} |")


def trace_summary(traces_dir: str) -> None:
    """From one traced switch per model: how long compute waited for copies, and for what."""
    paths = sorted(glob.glob(os.path.join(traces_dir, "*.json")))
    if not paths:
        return
    print("\n## One traced switch per model (`psw run --timeline`, traces.tar.gz)\n")
    print("Each trace holds the switch measured on the GPU (copy end, compute start and end of every group,")
    print("from CUDA events; one extra cold switch after the timed ones) beside the predicted timeline; open")
    print("it in chrome://tracing or Perfetto. `compute waits` sums the gaps in which the GPU had finished the")
    print("previous group and waited for the next group's copy.\n")
    print("| trace | groups | total (ms) | first compute (ms) | last copy ends (ms) | compute busy (ms) | compute waits (ms) | predicted total (ms) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for path in paths:
        d = json.load(open(path))
        timelines = d["otherData"]["timelines"]
        measured = [e for e in d["traceEvents"] if e.get("ph") == "X" and e["pid"] == 1]
        copies = sorted((e for e in measured if e["cat"] == "transfer"), key=lambda e: e["args"]["group"])
        computes = sorted((e for e in measured if e["cat"] == "compute"), key=lambda e: e["args"]["group"])
        busy = sum(e["dur"] for e in computes) / 1e3
        waits = 0.0
        end = None
        for e in computes:
            if e["dur"] == 0:
                continue
            if end is not None:
                waits += max(0.0, e["ts"] - end)
            end = e["ts"] + e["dur"]
        first = min(e["ts"] for e in computes if e["dur"] > 0) / 1e3
        last_copy = max(e["ts"] + e["dur"] for e in copies) / 1e3
        predicted = timelines[-1]["total_ns"] / 1e6
        print(f"| {os.path.basename(path)[:-5]} | {len(copies)} | {timelines[0]['total_ns'] / 1e6:.3f} | {first:.3f} | "
              f"{last_copy:.3f} | {busy:.3f} | {waits / 1e3:.3f} | {predicted:.3f} |")


def main(raw_dir: str, environment_script: str, profiles_dir: str = "", traces_dir: str = "") -> None:
    runs = [json.load(open(p)) for p in sorted(glob.glob(os.path.join(raw_dir, "*.json")))]
    env = subprocess.run(["bash", environment_script], capture_output=True, text=True).stdout
    try:
        versions = subprocess.run(["python3", "-c", "import torch;print('PyTorch', torch.__version__, 'CUDA', torch.version.cuda)"],
                                  capture_output=True, text=True).stdout.strip()
    except OSError:
        versions = "unknown"
    print("# Switch latency on the GPU (`psw run`)\n")
    print("Produced by `scripts/gpu-test.sh` on the GPU host; do not edit by hand. Every switch starts")
    print("cold: the device parameter region is poisoned first, so all parameters cross PCIe from")
    print("pinned host memory (pageable for no-pin). Batch 8, fp32, median of the repetitions; the")
    print("ready model (parameters resident, plain forward) is measured in the same run. Latency is")
    print("host wall time from the call to the end of the forward (synchronised); startup is")
    print("device time from the switch's first operation to the first layer's start.\n")
    print(env.strip())
    print(f"- libraries: {versions}\n")
    print("`ready eager` is the resident model run eagerly by LibTorch (the PyTorch-eager reference);")
    print("`ready graph` the same forward replayed as a CUDA graph; `graph` rows replay the whole switch")
    print("(copies, group waits and kernels) as one captured graph.\n")
    print("| model | mode | graph | plan | groups | latency median (ms) | p99 (ms) | ready eager (ms) | ready graph (ms) | startup (ms) | predicted (ms) | bound (ms) | latency / bound | latency / ready eager | prediction error |")
    print("|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in runs:
        lat = r["latency_ms"]["median"]
        graph = r.get("graph", False)
        ready_graph = r.get("ready_graph_ms", {}).get("median", 0.0)
        mode = r["mode"] + (" (placement auto)" if r.get("placement") == "auto" else "")
        print(f"| {r['model']} | {mode} | {'yes' if graph else 'no'} | {r['strategy']} | {r['groups']} | {lat:.3f} | "
              f"{r['latency_ms']['p99']:.3f} | {r['ready_ms']['median']:.3f} | {ready_graph:.3f} | "
              f"{r['startup_ms']['median']:.3f} | {r['predicted_ms']:.3f} | {r['bound_ms']:.3f} | "
              f"{lat / r['bound_ms']:.2f} | {lat / r['ready_ms']['median']:.2f} | "
              f"{(r['predicted_ms'] - lat) / lat * 100:+.1f}% |")
    where_the_time_goes(runs)
    if profiles_dir:
        profile_summary(profiles_dir)
    if traces_dir:
        trace_summary(traces_dir)
    print("\n`predicted` (the timeline evaluation of the plan) and `bound` (the pipeline bound of DESIGN.md §6)")
    print("come from the profiles measured in the same session by `psw profile` (per-layer forward times of")
    print("a replayed graph, calibrated for the cost of the per-layer marks, and the fitted pinned and pageable")
    print("links; `profile` column of the JSON). The prediction error is (predicted - measured) / measured.")
    print("The bound and the prediction assume graph-like dispatch: eager rows pay host dispatch on top, which")
    print("the model does not include.")


if __name__ == "__main__":
    main(*sys.argv[1:5])
