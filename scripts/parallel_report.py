#!/usr/bin/env python3
"""Writes results/sim/parallel/README.md from a `psw sweep` of configs/experiments/parallel-gpus.yaml.

Usage: parallel_report.py SWEEP_DIR OUT_DIR
SWEEP_DIR is the sweep's output folder (sweep.csv and point-NNNN/summary.json); OUT_DIR gets
README.md. Run by scripts/run-parallel.sh; every number comes from the simulator's outputs.
"""
import csv
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = [("resnet152", "ResNet-152"), ("inception_v3", "Inception-v3"), ("bert_base", "BERT-base")]


def environment():
    try:
        res = subprocess.run(["bash", os.path.join(ROOT, "scripts", "environment.sh")], capture_output=True,
                             text=True, check=True)
        return res.stdout.strip() or "(scripts/environment.sh printed nothing)"
    except (OSError, subprocess.CalledProcessError) as e:
        return "(scripts/environment.sh failed: %s)" % e


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sweep_dir, out_dir = sys.argv[1], sys.argv[2]
    points = {}  # (model, gpus, helpers) -> (sweep row, per-model summary)
    with open(os.path.join(sweep_dir, "sweep.csv"), newline="") as f:
        for row in csv.DictReader(f):
            model = row["workload.models"].strip("[]")
            summary_path = os.path.join(sweep_dir, "point-%04d" % int(row["point"]), "summary.json")
            with open(summary_path) as s:
                summary = json.load(s)
            points[(model, int(row["parallel.gpus"]), row["parallel.helpers"])] = (row, summary["models"][model])
    if not points:
        sys.exit("parallel_report.py: the sweep has no points")

    lines = [
        "<!-- produced by scripts/parallel_report.py; do not edit -->",
        "# Parallel transmission through peer GPUs, simulated",
        "",
        "*Produced by `scripts/parallel_report.py` (run by `scripts/run-parallel.sh`); do not edit by hand.*",
        "",
        "The `pipeswitch-parallel` mechanism of the simulator on `configs/hardware/h200-pcie5-nvlink.yaml` (the "
        "measured H200 profile plus its `multi_gpu` section: NVLink peer copies at 360 GB/s, each GPU its own "
        "54.3 GB/s host link; Note [Parallel paths] in `common/include/psw/common/hardware_profile.hpp`), in the "
        "paper's switching experiment (`configs/experiments/parallel-base.yaml`, as `switch-base.yaml`: ResNet-152 training owns the GPU, "
        "one inference request every 25 s, 10 requests). Sweep: `configs/experiments/parallel-gpus.yaml`; one "
        "row per point in `sweep.csv`. Only the 1- and 2-GPU links were measured (a quick probe on a lent two-H200 machine); 4 and 8 GPUs "
        "assume more GPUs like them, each with its own host link, the helpers sharing the target's NVLink ingress "
        "evenly (`peer_ingress_bandwidth_bytes_per_s`: the measured pair rate, 360 GB/s, so 51 GB/s per helper at "
        "8 GPUs). One GPU is PipeSwitch exactly.",
        "",
        "- **latency**: mean request latency (arrival to reply: stopping training at a layer boundary, the switch, "
        "the inference), ms.",
        "- **switch**: the plan's timeline total with the GPU free at once (transfer and compute of the switched-in "
        "model); **bound**: the multi-link pipeline bound (`parallel_pipeline_bound`: every path at once, the least "
        "fixed cost); **÷ bound**: switch over bound (the target on two GPUs: at most 1.10); **× 1 GPU**: "
        "switch over the one-GPU switch.",
        "- **via helpers**: the share of the model's bytes that the plan sends through helper GPUs.",
        "- **helpers training**: every helper runs its own training job and forwards at "
        "`helper_busy_share_percent` (50%, an estimate) of its host link.",
        "",
        "At batch 8 (the shipped analytic profiles) ResNet-152 and Inception-v3 are compute-bound on one H200: "
        "one GPU's switch is already within 0.5% of its bound, and helpers can only shorten the first groups' "
        "arrival. BERT-base's copy (8.1 ms) exceeds its compute (7.1 ms), so a second GPU takes about a millisecond "
        "off, and more GPUs bring it toward its compute. A transfer-bound switch (the target: at most 0.55 x one link "
        "on two GPUs) is checked by `ParallelPlanner.TransferBoundSwitchOnTwoH200s` in "
        "`tests/common/test_parallel.cpp` (BERT-base's bytes, its compute divided by 50).",
        "",
    ]
    for model, title in MODELS:
        if not any(k[0] == model for k in points):
            continue
        lines += ["## " + title, "",
                  "| GPUs | latency ms | switch ms | bound ms | ÷ bound | × 1 GPU | via helpers | groups "
                  "| training helpers: latency ms | switch ms | × 1 GPU |",
                  "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        one = points.get((model, 1, "idle"))
        one_switch = one[1]["parallel"]["switch_ms"] if one else None
        for gpus in sorted({k[1] for k in points if k[0] == model}):
            idle = points.get((model, gpus, "idle"))
            busy = points.get((model, gpus, "training"))
            cells = [str(gpus)]
            if idle:
                p = idle[1]["parallel"]
                cells += ["%.3f" % float(idle[0]["mean_ms"]), "%.3f" % p["switch_ms"], "%.3f" % p["bound_ms"],
                          "%.3f" % (p["switch_ms"] / p["bound_ms"]),
                          "%.3f" % (p["switch_ms"] / one_switch) if one_switch else "–",
                          "%.0f%%" % (100.0 * p["via_helpers_bytes"] / p["bytes"]) if p["bytes"] else "–",
                          str(p["groups"])]
            else:
                cells += ["–"] * 7
            if busy:
                q = busy[1]["parallel"]
                cells += ["%.3f" % float(busy[0]["mean_ms"]), "%.3f" % q["switch_ms"],
                          "%.3f" % (q["switch_ms"] / one_switch) if one_switch else "–"]
            else:
                cells += ["–"] * 3
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    lines += ["## Environment", "", environment(), ""]
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "README.md"), "w") as f:
        f.write("\n".join(lines))
    print("wrote " + os.path.join(out_dir, "README.md"))


if __name__ == "__main__":
    main()
