#!/usr/bin/env python3
"""Builds results/gpu/<date>-h200.md from the JSON files `psw run --format json` and `psw profile
--format json` wrote: every number is psw's; this script only lays them out."""
import glob
import json
import os
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
    """Totals of the measured profiles, as `psw profile --format json` reported them: each phase
    timed without and with per-layer marks."""
    rows = []
    for path in sorted(glob.glob(os.path.join(profiles_dir, "*.json"))):
        d = json.load(open(path))
        phases = d["phases"]
        nan = {"ms": float("nan"), "with_marks_ms": float("nan")}
        rows.append((d["model"], phases["inference_forward"], phases.get("training_forward", nan),
                     phases.get("backward", nan)))
    if not rows:
        return
    print("\n## Measured profiles (`psw profile --train`, results/profiles)\n")
    print("Per phase, the graph timed without per-layer marks, and with them (one event record per layer or")
    print("per parameter gradient); the per-layer times in the profiles are calibrated to the unmarked time")
    print("(Note [Mark overhead] in exec/include/psw/exec/profiler.hpp). Training runs in train mode")
    print("(BatchNorm on batch statistics; Inception-v3 with its auxiliary head).\n")
    print("| model | inference forward (ms) | with marks (ms) | training forward (ms) | with marks (ms) | backward (ms) | with marks (ms) |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, inf, tf, bw in rows:
        print(f"| {name} | {inf['ms']:.3f} | {inf['with_marks_ms']:.3f} | {tf['ms']:.3f} | {tf['with_marks_ms']:.3f} | "
              f"{bw['ms']:.3f} | {bw['with_marks_ms']:.3f} |")


def trace_summary(runs) -> None:
    """From one traced switch per model: how long compute waited for copies (psw run's
    `traced_switch`, computed by psw from the measured timeline)."""
    traced = [r for r in runs if "traced_switch" in r]
    if not traced:
        return
    print("\n## One traced switch per model (`psw run --timeline`, traces.tar.gz)\n")
    print("Each trace holds the switch measured on the GPU (copy end, compute start and end of every group,")
    print("from CUDA events; one extra cold switch after the timed ones) beside the predicted timeline; open")
    print("it in chrome://tracing or Perfetto. `compute waits` sums the gaps in which the GPU had finished the")
    print("previous group and waited for the next group's copy.\n")
    print("| trace | groups | total (ms) | first compute (ms) | last copy ends (ms) | compute busy (ms) | compute waits (ms) | predicted total (ms) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in traced:
        m, p = r["traced_switch"]["measured"], r["traced_switch"]["predicted"]
        name = f"{r['model']}-{r['mode']}" + ("-graph" if r.get("graph") else "")
        print(f"| {name} | {m['groups']} | {m['total_ms']:.3f} | {m['first_compute_ms']:.3f} | "
              f"{m['last_copy_end_ms']:.3f} | {m['compute_busy_ms']:.3f} | {m['compute_waits_ms']:.3f} | "
              f"{p['total_ms']:.3f} |")


def main(raw_dir: str, environment_script: str, profiles_dir: str = "") -> None:
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
    trace_summary(runs)
    print("\n`predicted` (the timeline evaluation of the plan) and `bound` (the pipeline bound of DESIGN.md §6)")
    print("come from the profiles measured in the same session by `psw profile` (per-layer forward times of")
    print("a replayed graph, calibrated for the cost of the per-layer marks, and the fitted pinned and pageable")
    print("links; `profile` column of the JSON). The prediction error is (predicted - measured) / measured.")
    print("The bound and the prediction assume graph-like dispatch: eager rows pay host dispatch on top, which")
    print("the model does not include.")


if __name__ == "__main__":
    main(*sys.argv[1:4])
