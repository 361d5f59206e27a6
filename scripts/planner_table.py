#!/usr/bin/env python3
"""Turns the planner benchmark's JSON (Google Benchmark) into the tables of results/planner.md."""
import json
import sys

# Benchmark family (BM_Optimal<family>, BM_PipeSwitch<family>) -> the model column.
MODELS = {
    "Transformer": "synthetic transformer",
    "Cnn": "synthetic cnn",
    "KernelLevel": "kernel-level (half parameterless)",
}


def main(path: str) -> None:
    with open(path) as f:
        data = json.load(f)
    rows = {}
    for b in data["benchmarks"]:
        name = b["name"]  # e.g. BM_OptimalShipped/resnet152, BM_PipeSwitchTransformer/1000
        kind, _, arg = name.partition("/")
        planner = "optimal" if kind.startswith("BM_Optimal") else "pipeswitch"
        family = kind.replace("BM_Optimal", "").replace("BM_PipeSwitch", "")
        unit = {"ms": 1.0, "us": 1e-3, "ns": 1e-6}[b["time_unit"]]
        key = (family, arg)
        rows.setdefault(key, {})[planner] = (b["real_time"] * unit, b.get("groups"), b.get("nodes"), b.get("total_ms"))
    print("| model | layers | pipeswitch search (ms) | optimal search (ms) | groups | plan total (ms), both planners |")
    print("|---|---:|---:|---:|---:|---|")
    for (family, arg), r in rows.items():
        model = arg if family == "Shipped" else MODELS.get(family, f"synthetic {family.lower()}")
        layers = "" if family == "Shipped" else f"{int(arg):,}"
        p = r.get("pipeswitch")
        o = r.get("optimal")
        if p is None:
            # bench-planner.sh: pipeswitch runs only up to 1,000 layers.
            print(f"| {model} | {layers} | not run | {o[0]:.3f} | {int(o[1])} | {o[3]:.3f} (optimal only) |")
            continue
        same = "equal" if abs(p[3] - o[3]) < 1e-9 else "DIFFER"
        print(f"| {model} | {layers} | {p[0]:.3f} | {o[0]:.3f} | {int(o[1])} | {o[3]:.3f} ({same}) |")


if __name__ == "__main__":
    main(sys.argv[1])
