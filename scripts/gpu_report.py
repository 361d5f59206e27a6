#!/usr/bin/env python3
"""Builds results/gpu/<date>-h200.md from the JSON files `psw run --format json` wrote."""
import glob
import json
import os
import subprocess
import sys


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
        print(f"| {r['model']} | {r['mode']} | {'yes' if graph else 'no'} | {r['strategy']} | {r['groups']} | {lat:.3f} | "
              f"{r['latency_ms']['p99']:.3f} | {r['ready_ms']['median']:.3f} | {ready_graph:.3f} | "
              f"{r['startup_ms']['median']:.3f} | {r['predicted_ms']:.3f} | {r['bound_ms']:.3f} | "
              f"{lat / r['bound_ms']:.2f} | {lat / r['ready_ms']['median']:.2f} | "
              f"{(r['predicted_ms'] - lat) / lat * 100:+.1f}% |")
    print("\n`predicted` (the timeline evaluation of the plan) and `bound` (the pipeline bound of DESIGN.md §6)")
    print("come from the profiles measured in the same session by `psw profile` (per-layer forward times of")
    print("a replayed graph, and the fitted pinned and pageable links; `profile` column of the JSON). The")
    print("prediction error is (predicted - measured) / measured. The bound and the prediction assume")
    print("graph-like dispatch: eager rows pay host dispatch on top, which the model does not include.")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
