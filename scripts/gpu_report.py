#!/usr/bin/env python3
"""Builds results/gpu/<date>-h200.md from the JSON files `psw run --format json` wrote."""
import glob
import json
import os
import subprocess
import sys


def where_the_time_goes(runs) -> None:
    """A few lines per model, computed from the runs: where a switched-in request spends its time."""
    by = {(r["model"], r["mode"], bool(r.get("graph"))): r for r in runs if not r.get("host_embeddings")}
    hostemb = {r["model"]: r for r in runs if r.get("host_embeddings") and r.get("graph")}
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
        h = hostemb.get(model)
        if h:
            print(f"  With its embedding tables read in place from pinned host memory ({h['param_bytes'] / 1e6:.1f} MB "
                  f"still copied), the graph switch answers in {h['latency_ms']['median']:.2f} ms "
                  f"({h['latency_ms']['median'] / h['ready_ms']['median']:.2f} x eager resident), startup "
                  f"{h['startup_ms']['median']:.3f} ms.")
        if e:
            print(f"  Eagerly, the same switch takes {e['latency_ms']['median']:.2f} ms: host dispatch of the forward, "
                  f"not the transfer, dominates, which is why the switch is replayed as one graph.")
    print("\nWhat stands between these numbers and the bound: per-group synchronisation is an event edge")
    print("inside the graph (near zero), so the remaining gap is the order of the copies. A model whose first")
    print("layers are large and cheap (BERT's 94 MB word embedding) waits for them before any compute; reading")
    print("such layers from pinned host memory instead of copying them (DESIGN.md §3 placement) is the next step.")


def main(raw_dir: str, environment_script: str) -> None:
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
        mode = r["mode"] + (" (host embeddings)" if r.get("host_embeddings") else "")
        print(f"| {r['model']} | {mode} | {'yes' if graph else 'no'} | {r['strategy']} | {r['groups']} | {lat:.3f} | "
              f"{r['latency_ms']['p99']:.3f} | {r['ready_ms']['median']:.3f} | {ready_graph:.3f} | "
              f"{r['startup_ms']['median']:.3f} | {r['predicted_ms']:.3f} | {r['bound_ms']:.3f} | "
              f"{lat / r['bound_ms']:.2f} | {lat / r['ready_ms']['median']:.2f} | "
              f"{(r['predicted_ms'] - lat) / lat * 100:+.1f}% |")
    where_the_time_goes(runs)
    print("\n`predicted` (the timeline evaluation of the plan) and `bound` (the pipeline bound of DESIGN.md §6)")
    print("come from the profiles measured in the same session by `psw profile` (per-layer forward times of")
    print("a replayed graph, and the fitted pinned and pageable links; `profile` column of the JSON). The")
    print("prediction error is (predicted - measured) / measured. The bound and the prediction assume")
    print("graph-like dispatch: eager rows pay host dispatch on top, which the model does not include.")
    print("The profiler times each layer with an event record inside the replayed graph; those records")
    print("lengthen the summed forward beyond an uninstrumented graph (compare `ready graph` with the")
    print("profile's forward), so `bound` and `predicted` run a little high and latency / bound can dip below 1.")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
