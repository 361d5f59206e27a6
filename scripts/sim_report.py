#!/usr/bin/env python3
"""Writes RESULTS_DIR/README.md: the simulated PipeSwitch figures 5-9 set beside the authors'
artifact re-run (PAPER.md section 10), with relative differences, a discussion of where and
why they differ, and what the simulation predicts on the H200.

Usage: scripts/sim_report.py RESULTS_DIR       (e.g. results/sim, after scripts/run-experiments.sh)

Environment: PSW (path of the psw binary, default build/cli/psw) is used to print the plans
(group counts) the simulator's PipeSwitch uses; skipped when the binary is missing.
Only the standard library; the loaders and the artifact tables live in scripts/plot.py.
"""
import csv
import glob
import json
import os
import re
import subprocess
import sys

sys.dont_write_bytecode = True  # no scripts/__pycache__ from importing plot.py
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import plot  # noqa: E402  (same folder: loaders, names, artifact tables)
from psw_json import config_json, psw_path  # noqa: E402
from plot import (ARTIFACT, ARTIFACT_FIG6, ARTIFACT_FIG6_CYCLES_S, ARTIFACT_FIG6_READY_LATENCY_APPROX,  # noqa: E402
                  FIGURE_MECHS, HARDWARE, HARDWARE_SHORT, MECH_LABEL, MODEL_LABEL, MODELS)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
V100, T4, H200 = "v100-pcie3-x16", "t4-pcie3-x8", "h200-pcie5"

# The artifact's hand-written groupings (PAPER.md §4.4): groups per model.
ARTIFACT_GROUPS = {"resnet152": 52, "inception_v3": 17, "bert_base": 39}
# The abstract's claims (PAPER.md §11).
CLAIM_STARTUP = (3.6, 6.6)
CLAIM_TOTAL = (5.4, 34.6)
CLAIM_MPS = (10, 50)

# ---------------------------------------------------------------------------------------------
# Small helpers


def rel(sim, art):
    """Relative difference of sim to art, as text; 'n/m' where |art| < 1 ms (noise-level)."""
    if sim is None or art is None:
        return "-"
    if abs(art) < 1.0:
        return "n/m"
    return "%+.0f%%" % (100.0 * (sim - art) / abs(art))


def ms(v, digits=None):
    if v is None:
        return "-"
    if digits is not None:
        return "%.*f" % (digits, v)
    a = abs(v)
    if a >= 1000:
        return "%.0f" % v
    if a >= 100:
        return "%.1f" % v
    if a >= 1:
        return "%.2f" % v
    return "%.3f" % v


def pct_range(lo, hi):
    a, b = "%.1f" % (100 * lo), "%.1f" % (100 * hi)
    return (a if a == b else a + "–" + b) + "%"


def table(header, rows):
    numeric = re.compile(r"^[-+≈×]?[\d.,]+(\s?(%|×|s|ms))?$|^-$|^n/m$|^×[\d.]+$")
    align = ["---:" if i > 0 and all(numeric.match(str(r[i]).strip()) for r in rows) else "---"
             for i in range(len(header))]
    out = ["| " + " | ".join(header) + " |", "|" + "|".join(align) + "|"]
    for r in rows:
        out.append("| " + " | ".join(str(c) for c in r) + " |")
    return "\n".join(out)


def mps_contention(hw):
    """The (training model, training batch) pairs of a hardware profile's `mps.contention` points,
    in the profile's order."""
    pairs = []
    path = os.path.join(ROOT, "configs", "hardware", hw + ".yaml")
    if not os.path.exists(path):
        return pairs
    for point in _get(config_json("hardware", path), ["mps", "contention"]) or []:
        pair = (point["training_model"], int(point["training_batch"]))
        if pair not in pairs:
            pairs.append(pair)
    return pairs


def contention_sentence():
    """What the profiles' measured MPS contention points are beside, from the profiles."""
    parts = []
    for hw in HARDWARE:
        pairs = mps_contention(hw)
        if not pairs:
            continue
        batches = {}
        for model, batch in pairs:
            batches.setdefault(model, []).append(batch)
        groups = []  # training models with the same batches, in the profile's order
        for model, bs in batches.items():
            key = sorted(bs)
            for g in groups:
                if g[1] == key:
                    g[0].append(model)
                    break
            else:
                groups.append(([model], key))
        def words(items):
            return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]
        beside = ["beside %s training at batch %s" % (words([MODEL_LABEL.get(m, m) for m in models]),
                                                     words([str(b) for b in key])) for models, key in groups]
        parts.append(" The %s profile also has measured points per inference model %s (`mps.contention` in "
                     "`configs/hardware/%s.yaml`, Note [MPS contention]), which replace its factor for those "
                     "jobs." % (HARDWARE_SHORT.get(hw, hw), ", and ".join(beside), hw))
    return "".join(parts)


def hardware_profiles():
    out = {}
    for hw in HARDWARE:
        path = os.path.join(ROOT, "configs", "hardware", hw + ".yaml")
        if os.path.exists(path):
            out[hw] = config_json("hardware", path)
    return out


def plan(psw, model, hw_path, strategy="optimal"):
    try:
        res = subprocess.run([psw, "plan", "--model", os.path.join(ROOT, "configs", "models", model + ".yaml"),
                              "--hardware", hw_path, "--strategy", strategy, "--format", "json"],
                             capture_output=True, text=True, timeout=60, check=True)
        return json.loads(res.stdout)
    except (OSError, subprocess.SubprocessError, ValueError):
        return None


def plans(psw, profiles):
    """{(hw, model): plan json} for PipeSwitch (optimal planner, the figures' `planner:`).
    Every ablation uses the same groups: the simulator plans an ablation on PipeSwitch's own
    costs (pinned link, plain group sync; Note [Ablation grouping] in sim/src/mechanism.cpp),
    so these are also the no-IPC variant's groups, which add the IPC open to each group's sync
    (where the hardware profile has no eager host times: Note [Eager switch in the simulator])."""
    result = {}
    if not psw:
        return result
    for hw in profiles:
        hw_path = os.path.join(ROOT, "configs", "hardware", hw + ".yaml")
        for model in MODELS:
            result[(hw, model)] = plan(psw, model, hw_path)
    return result


def environment():
    try:
        res = subprocess.run(["bash", os.path.join(ROOT, "scripts", "environment.sh")], capture_output=True,
                             text=True, timeout=60)
        return res.stdout.strip() or "(scripts/environment.sh printed nothing)"
    except (OSError, subprocess.SubprocessError) as e:
        return "(scripts/environment.sh failed: %s)" % e


# ---------------------------------------------------------------------------------------------
# Data access


class Data:
    def __init__(self, results_dir):
        self.raw = plot.load_results(results_dir)
        self.idx = {fig: plot.index(rows) for fig, rows in self.raw.items() if fig != "fig6"}
        self.fig6 = {(r["hardware"], int(r["cycle_ms"]), r["mechanism"]): r for r in self.raw.get("fig6", [])}

    def row(self, fig, hw, model, mech):
        return self.idx.get(fig, {}).get((hw, model, mech))

    def mean(self, fig, hw, model, mech):
        r = self.row(fig, hw, model, mech)
        return None if r is None else r["mean_ms"]

    def ready(self, hw, model):
        """The simulated Ready latency (Figure 5's sweep) for overheads of every figure."""
        return self.mean("fig5", hw, model, "ready")

    def overhead(self, fig, hw, model, mech):
        m, r = self.mean(fig, hw, model, mech), self.ready(hw, model)
        return None if m is None or r is None else m - r

    def field(self, fig, hw, model, mech, key):
        r = self.row(fig, hw, model, mech)
        return None if r is None else r.get(key)


def art(fig, model, mech):
    return ARTIFACT.get(fig, {}).get(model, {}).get(mech)


def art_overhead(fig, model, mech):
    """Artifact mechanism latency minus the artifact's Ready (Figure 5 table, same setup)."""
    a, r = art(fig, model, mech), art("fig5", model, "ready")
    return None if a is None or r is None else a - r


# ---------------------------------------------------------------------------------------------
# Sections


def latency_tables(d, fig):
    mechs = FIGURE_MECHS[fig]
    lat_rows, ovh_rows = [], []
    for model in MODELS:
        for mech in mechs:
            if d.row(fig, V100, model, mech) is None:
                continue
            sim = d.mean(fig, V100, model, mech)
            a = art(fig, model, mech)
            lat_rows.append([MODEL_LABEL[model], MECH_LABEL[mech], ms(sim), ms(a), rel(sim, a),
                             ms(d.mean(fig, T4, model, mech)), ms(d.mean(fig, H200, model, mech))])
            if mech == "ready":
                continue
            so, ao = d.overhead(fig, V100, model, mech), art_overhead(fig, model, mech)
            startup = d.field(fig, V100, model, mech, "startup_overhead_ms")
            ovh_rows.append([MODEL_LABEL[model], MECH_LABEL[mech], ms(so), ms(ao), rel(so, ao),
                             ms(startup) if mech != "mps" else "-",
                             ms(d.overhead(fig, T4, model, mech)), ms(d.overhead(fig, H200, model, mech))])
    lat = table(["model", "mechanism", "V100 sim", "V100 artifact", "sim vs artifact", "T4 sim", "H200 sim"],
                lat_rows)
    ovh = table(["model", "mechanism", "V100 sim", "V100 artifact", "sim vs artifact", "V100 sim startup",
                 "T4 sim", "H200 sim"], ovh_rows)
    return ("**Total latency (ms)**, mean of 10 requests (simulated) or of the artifact's last 10 rounds:\n\n" + lat +
            "\n\n**Overhead over Ready (ms)** = mechanism − Ready of the same model and hardware (the artifact's "
            "Ready from its Figure 5 table; the simulator's from the fig5 sweep). `sim startup` is the simulator's "
            "mean delay from dispatch to the first layer's start, the paper's *startup overhead*:\n\n" + ovh)


def sec_setup(d, profiles, plan_ok, groups, base):
    lines = []
    lines.append("## How the numbers were produced\n")
    lines.append("```sh\nbash scripts/run-experiments.sh      # all of the below\n"
                 "bash scripts/build.sh                 # build/cli/psw\n"
                 "for f in fig5 fig6 fig7 fig8 fig9; do\n"
                 "  build/cli/psw sweep --config configs/experiments/$f.yaml --out $TMP/$f --jobs $(nproc)\n"
                 "done                                  # results/sim/figN/sweep.csv\n"
                 "/usr/bin/python3 scripts/plot.py results/sim        # results/sim/fig5.png ... fig9.png\n"
                 "/usr/bin/python3 scripts/sim_report.py results/sim  # this file\n```\n")
    lines.append(
        "- **Simulator.** `psw sweep` runs the discrete-event simulator (`sim/`) on every point of the "
        "figure's grid. Each point is deterministic (seed 1); `results/sim/figN/sweep.csv` has one row per "
        "point (the per-point folders are not kept).")
    lines.append(
        "- **Figures 5, 7, 8, 9** (`configs/experiments/switch-base.yaml`): ResNet-152 training (batch %s, the "
        "model profile's) owns the GPU; one inference request (batch 8) arrives every %s s, %s requests; the "
        "grid varies hardware × model × mechanism. The artifact instead trains ResNet-152 at batch 64 "
        "and times 20 requests, keeping the last 10 (PAPER.md §8)." % (base["batch"], base["interval_s"], base["count"]))
    lines.append(
        "- **Figure 6** (`configs/experiments/cycles-base.yaml`): ResNet-152 training for one cycle, then "
        "back-to-back ResNet-152 inference for one cycle, %s rounds, cycles 1, 2, 5, 10, 30 s. "
        "**Throughput** (summary.json's `throughput_rps`, `summary()` in `sim/src/simulated_server.cpp`) = "
        "inference requests (batches of 8) completed inside an inference phase ÷ (rounds × cycle), the total "
        "length of the inference phases. A request that completes between phases (during training) does not "
        "count. This is the artifact's definition: inferences completed within the inference cycle ÷ the "
        "cycle length. Only a request answered by the end of its own inference phase (the one it was issued "
        "in) counts (`phase_end_of` and `completed_in_phase_` in `sim/src/simulated_server.cpp`): a switch begun in "
        "one phase that ends inside a later one counts in no phase, and that request issues no next one "
        "(stop-and-start, below)." % base["rounds"])
    lines.append(
        "- **What latency means here.** Simulated latency runs from the request's arrival at the controller "
        "to its reply: queueing, stopping training, the switch (process/context start, memory allocation, "
        "parameter transfer, per-group synchronisation) and the model's GPU compute. There is **no client, "
        "TCP, Python or framework-dispatch overhead on the request path** beyond the per-layer kernel overhead "
        "in the hardware profile. The artifact measures send→reply at a Python client over TCP, so its Ready "
        "model is ≈40 ms for all three models although their compute differs by about 2×: a fixed ~37–40 ms "
        "of its latency is not GPU work. Latencies are therefore compared twice: as they are, and as "
        "overheads over Ready (mechanism − Ready), which cancels that floor.")
    lines.append(
        "- **Models** (`configs/models/`): analytic per-layer profiles (parameter bytes exact, times from "
        "FLOPs and memory traffic through the hardware profile's compute model), inference batch 8, fp32. "
        "ResNet-152 at 224×224, Inception-v3 at 299×299, BERT-base at **128 tokens** (the artifact uses "
        "251 tokens, `bert-base-cased`).")
    lines.append(
        "- **Artifact numbers** are the authors' October 2021 re-run on AWS p3.2xlarge (V100), copied from "
        "`PAPER.md` §10 into `scripts/plot.py` (`ARTIFACT`, `ARTIFACT_FIG6`). They are *not* the paper's "
        "own values, which are unknown except the abstract's ranges (§11). No T4 or H200 reference exists; "
        "those columns are simulation only. Relative difference = (sim − artifact) / |artifact|; `n/m` "
        "(not meaningful) where the artifact value is under 1 ms.")
    lines.append("\n### Hardware profiles\n")
    rows = []
    for hw in HARDWARE:
        p = profiles.get(hw)
        if not p:
            continue
        link = p.get("link", {})
        mem = p.get("memory", {})
        comp = p.get("compute", {})
        start_s = new_process_s(p)
        rows.append([hw, p.get("source", {}).get("kind", "?"),
                     "%.1f" % (link.get("pinned", {}).get("bandwidth_bytes_per_s", 0) / 1e9),
                     "%.1f" % (link.get("pageable", {}).get("bandwidth_bytes_per_s", 0) / 1e9),
                     "%.0f" % (p.get("group_sync_ns", 0) / 1e3),
                     "%.0f" % (comp.get("kernel_overhead_ns", 0) / 1e3),
                     "%.0f / %.0f" % (comp.get("flops_per_s", 0) / 1e12, comp.get("conv_flops_per_s", 0) / 1e12),
                     "%.2f" % start_s,
                     "%.2f" % (mem.get("ipc_handle_open_ns", 0) / 1e6),
                     "×%.2f" % (p.get("mps", {}).get("inference_slowdown_percent", 0) / 100)])
    lines.append(table(["profile", "source", "pinned GB/s", "pageable GB/s", "group sync µs", "kernel µs/layer",
                        "TFLOP/s matmul / conv", "new process s", "IPC open ms/group", "MPS inference"], rows))
    lines.append("\n`new process` = process start + framework start + CUDA context (stop-and-start and two "
                 "processes). `MPS inference` is the factor the simulator multiplies the inference time by under "
                 "MPS while a training job shares the GPU (`mps.inference_slowdown_percent` / 100, so 550 means "
                 "×5.5, a 450% slowdown; Note [MPS slowdown] in `sim/src/mechanism.cpp`); with no training "
                 "resident an MPS inference runs at Ready speed." + contention_sentence() + " Every number carries its source in "
                 "`configs/hardware/*.yaml`. The H200 profile is `results/profiles/h200-calibrated.yaml` "
                 "(adopted by `scripts/adopt-profiles.sh`): its links as `psw profile --link` measured them on the "
                 "lent H200, the costs that `scripts/calibrate-h200.sh` fitted to the server's recorded runs "
                 "(cudaMalloc, IPC open, the pageable link's bandwidth, unified memory's page "
                 "fault, MPS's inference slowdown and its contention points, the time-sliced inference's share) "
                 "and the ones it adopted from the server's split of a stop-and-start run's process starts (process "
                 "start, CUDA context, framework start, each model's first forward in the new process) and from its "
                 "eager switches (each model's host times under no-memory-management, no-ipc-optimization and "
                 "no-pinned-memory, Note [Eager switch in the simulator], which replace the analytic costs there); "
                 "its other costs are the "
                 "estimates of `configs/hardware/h200-pcie5-base.yaml`.\n")
    lines.append(
        "**Numbers fitted to the figures they are compared with.** Three V100 numbers were calibrated on the "
        "artifact re-run itself, so agreement on them is calibration, not validation: `group_sync_ns` "
        "({V_SYNC} µs) from Figure 7 (per-layer pipeline minus PipeSwitch of ResNet-152 and Inception-v3, "
        "per extra group); `memory.ipc_handle_open_ns` ({V_IPC} ms) from Figure 8 (no IPC optimization minus "
        "PipeSwitch, divided by the artifact's group counts, ResNet-152 and BERT-base); "
        "`mps.inference_slowdown_percent` (×5.5) from Figure 5 (MPS ÷ Ready of ResNet-152, 217.6 / 39.5 ms). "
        "The T4 profile reuses the MPS factor, the group sync and the IPC cost. "
        "`framework_start_ns` comes from the paper's Table 1, not from a figure compared here.\n")
    if plan_ok:
        lines.append("### Plans the simulated PipeSwitch uses\n")
        lines.append("Figure 8's no-memory-management, no-IPC and no-pinned-memory ablations use these same groups "
                     "(unified memory is not grouped; Figure 7's variants impose their own: one group per layer, one "
                     "group, one copy per layer): the simulator plans an ablation on PipeSwitch's own "
                     "costs, pinned link and plain group sync (Note [Ablation grouping] in "
                     "`sim/src/mechanism.cpp`), as the artifact's ablations keep its hand-written groups.\n")
        rows = []
        for model in MODELS:
            row = [MODEL_LABEL[model], str(ARTIFACT_GROUPS[model])]
            for hw in HARDWARE:
                p = groups.get((hw, model))
                if p:
                    tr = p["param_bytes"] / profiles[hw]["link"]["pinned"]["bandwidth_bytes_per_s"] * 1e3
                    row.append("%d groups; transfer %.1f ms vs compute %.1f ms" % (
                        len(p["groups"]), tr, p["ready_ns"] / 1e6))
                else:
                    row.append("-")
            rows.append(row)
        lines.append(table(["model", "artifact groups"] + ["sim %s (optimal planner)" % HARDWARE_SHORT[h] for h in HARDWARE],
                           rows))
        lines.append("\n`transfer` = all parameters over the pinned link in one copy; `compute` = the Ready "
                     "(resident) inference time. Where compute exceeds transfer, pipelining can hide almost all of "
                     "the transfer; where transfer exceeds compute, PipeSwitch's latency is bounded by the "
                     "transfer.\n")
    return "\n".join(lines)


def sec_claims(d):
    lines = ["## The abstract's headline claims against the simulation\n"]
    st, tot, ratios = [], [], []
    for hw in (V100, T4):
        for model in MODELS:
            s = d.field("fig5", hw, model, "pipeswitch", "startup_overhead_ms")
            o = d.overhead("fig5", hw, model, "pipeswitch")
            mo = d.overhead("fig5", hw, model, "mps")
            if s is not None:
                st.append((s, hw, model))
            if o is not None:
                tot.append((o, hw, model))
            if o and mo is not None and o > 0:
                ratios.append((mo / o, hw, model))
    util = []
    for (hw, c, mech), r in d.fig6.items():
        if mech == "pipeswitch":
            ready = d.fig6.get((hw, c, "ready"))
            if ready and ready["throughput_rps"] > 0:
                util.append((r["throughput_rps"] / ready["throughput_rps"], hw, c))

    def rng(values, unit, digits=2):
        if not values:
            return "-"
        lo, hi = min(values), max(values)
        return "%.*f–%.*f%s (min: %s %s, max: %s %s)" % (
            digits, lo[0], digits, hi[0], unit, MODEL_LABEL.get(lo[2], lo[2]), HARDWARE_SHORT[lo[1]],
            MODEL_LABEL.get(hi[2], hi[2]), HARDWARE_SHORT[hi[1]])

    art_st = []
    art_tot = [art_overhead("fig5", m, "pipeswitch") for m in MODELS]
    art_ratio = [art_overhead("fig5", m, "mps") / art_overhead("fig5", m, "pipeswitch") for m in MODELS]
    art_util = [p / r for p, r in zip(ARTIFACT_FIG6["throughput"]["pipeswitch"], ARTIFACT_FIG6["throughput"]["ready"])]
    rows = [
        ["startup overhead", "3.6–6.6 ms", "not measured", rng(st, " ms")],
        ["total overhead (PipeSwitch − Ready)", "5.4–34.6 ms", "%.2f–%.1f ms" % (min(art_tot), max(art_tot)),
         rng(tot, " ms")],
        ["MPS overhead ÷ PipeSwitch overhead", "10–50×", "%.0f–%.0f×" % (min(art_ratio), max(art_ratio)),
         rng(ratios, "×", 0)],
        ["PipeSwitch throughput ÷ Ready (Fig. 6)", "near 100%", "%.0f–%.0f%%" % (100 * min(art_util), 100 * max(art_util)),
         pct_range(min(util)[0], max(util)[0]) if util else "-"],
    ]
    del art_st
    lines.append(table(["claim", "paper (abstract)", "artifact re-run (V100)", "simulation (V100 + T4)"], rows))
    lines.append("")
    if st:
        below = [x for x in st if x[0] < CLAIM_STARTUP[0]]
        above = [x for x in st if x[0] > CLAIM_STARTUP[1]]
        lines.append(
            "- **Startup overhead.** %d of %d simulated V100/T4 cases fall below the paper's 3.6 ms minimum and "
            "%d above its 6.6 ms maximum. The simulated startup is only stopping training at a layer boundary, "
            "one group sync and the first group's copy; whatever the paper's 3.6 ms floor contains (waking the "
            "standby worker, Python-level signalling, stopping a batch-64 training iteration) is not modelled. "
            "The large BERT values are its first layer alone: the 94 MB word-embedding table must arrive "
            "before any compute (the planner already picks the smallest first group that keeps the total "
            "within one group's fixed costs of the optimum, Note [Early start]); reading that table in place "
            "from pinned host memory, as the executor can, is not simulated." % (
                len(below), len(st), len(above)))
    if tot:
        inside = [x for x in tot if CLAIM_TOTAL[0] <= x[0] <= CLAIM_TOTAL[1]]
        lines.append(
            "- **Total overhead.** %d of %d simulated cases lie inside 5.4–34.6 ms. The vision models' "
            "overheads are far below the paper's minimum: their analytic compute is longer than the "
            "transfer, so the pipeline hides nearly everything. Only BERT-base (transfer-bound) reaches the "
            "paper's range; the simulated maximum, %.1f ms for %s on the %s, sits near the abstract's 34.6 ms "
            "maximum, which PAPER.md §10 guesses is BERT-base on the T4." % (
                len(inside), len(tot), max(tot)[0], MODEL_LABEL[max(tot)[2]], HARDWARE_SHORT[max(tot)[1]]))
    if ratios:
        lines.append(
            "- **Better than MPS.** The simulated ratio spans %.0f–%.0f×; where PipeSwitch's simulated overhead "
            "is a fraction of a millisecond the ratio is huge and means little, as does the artifact's "
            "Inception-v3 ratio (%.0f×, from a 0.4 ms overhead). The simulated MPS overhead comes from one slowdown "
            "factor fitted to the artifact's Figure 5 (ResNet-152), so this row is not an independent check of "
            "the claim." % (min(ratios)[0], max(ratios)[0], max(art_ratio)))
    return "\n".join(lines)


def latency_section(d, fig, number, title):
    """The opening lines of Figure `number`'s section: heading, plot, latency tables."""
    return ["## Figure %d: %s\n" % (number, title), "![Figure %d](%s.png)\n" % (number, fig), latency_tables(d, fig), "",
            "### Where and why they differ\n"]


def v100_overheads(d, fig):
    """Overhead lookups (model, mechanism) -> ms on the V100: simulated, and the artifact's."""
    return (lambda m, k: d.overhead(fig, V100, m, k)), (lambda m, k: art_overhead(fig, m, k))


def sec_fig5(d):
    L = latency_section(d, "fig5", 5, "total latency")
    ready = {m: d.ready(V100, m) for m in MODELS}
    L.append(
        "- **Ready model.** Simulated %s / %s / %s ms (ResNet-152 / Inception-v3 / BERT-base) against the artifact's "
        "%.1f / %.1f / %.1f ms. The simulator's Ready is the analytic GPU compute of batch 8 only; the artifact's is "
        "nearly the same for all three models, i.e. dominated by its client/TCP/Python floor. The raw-latency "
        "differences in every figure inherit this gap (%s to %s ms on the V100), which is why the overhead tables "
        "matter more." % (ms(ready["resnet152"]), ms(ready["inception_v3"]), ms(ready["bert_base"]),
                          art("fig5", "resnet152", "ready"), art("fig5", "inception_v3", "ready"),
                          art("fig5", "bert_base", "ready"),
                          ms(min(art("fig5", m, "ready") - ready[m] for m in MODELS)),
                          ms(max(art("fig5", m, "ready") - ready[m] for m in MODELS))))
    po = {m: d.overhead("fig5", V100, m, "pipeswitch") for m in MODELS}
    L.append(
        "- **PipeSwitch.** Simulated overhead %s / %s / %s ms against the artifact's %.2f / %.2f / %.1f ms. "
        "For the vision models the simulated compute (%s, %s ms) exceeds the parameter transfer at {V_BW} GB/s, so "
        "a handful of groups hides the transfer completely and only the first small group's copy shows. The "
        "artifact signals 52 (ResNet-152) or 17 (Inception-v3) hand-written groups from Python and preempts a "
        "batch-64 training job; those costs, and plausibly its worker's wake-up, are what its few ms contain, "
        "and the simulator models none of them beyond a {V_SYNC} µs per-group sync (fitted to Figure 7, so "
        "not independent of the artifact either). For BERT-base the simulation is transfer-bound (438 MB ≈ {V_BERT_TR} ms at {V_BW} GB/s against "
        "%s ms of compute at 128 tokens), so its overhead is %s than the artifact's; the artifact's BERT input "
        "is 251 tokens, roughly twice the compute, which hides more of the transfer." % (
            ms(po["resnet152"]), ms(po["inception_v3"]), ms(po["bert_base"]),
            art_overhead("fig5", "resnet152", "pipeswitch"), art_overhead("fig5", "inception_v3", "pipeswitch"),
            art_overhead("fig5", "bert_base", "pipeswitch"), ms(ready["resnet152"]), ms(ready["inception_v3"]),
            ms(ready["bert_base"]),
            "larger" if (po["bert_base"] or 0) > art_overhead("fig5", "bert_base", "pipeswitch") else "smaller"))
    mo = {m: d.overhead("fig5", V100, m, "mps") for m in MODELS}
    factor = {m: d.mean("fig5", V100, m, "mps") / ready[m] for m in MODELS if ready[m]}
    L.append(
        "- **MPS.** While training shares the GPU (always, in this figure) the simulator multiplies the "
        "inference time by ×%.2f, one number fitted to this very figure: the artifact's ResNet-152 ratio "
        "217.6 / 39.5 of *client* latencies. ResNet-152's MPS row is therefore calibration, not a prediction, "
        "and still misses because the factor multiplies GPU-only time rather than the client latency it "
        "was taken from. Applied to GPU-only times this gives "
        "overheads of %s / %s / %s ms against the artifact's %.0f / %.0f / %.0f ms: the artifact's MPS "
        "penalty does not scale with the model's compute (Inception-v3, the smallest, still pays 137 ms), "
        "and its own logged full run shows MPS at 659 / 464 / 522 ms, so MPS contention is both larger and "
        "far more variable than one constant factor. The V100 and T4 profiles have no contention model behind "
        "the factor; the H200's has one measured on the H200 (per inference model and training batch, Note "
        "[MPS contention]), and the T4 reuses the V100 factor." % (
            factor["resnet152"], ms(mo["resnet152"]), ms(mo["inception_v3"]), ms(mo["bert_base"]),
            art_overhead("fig5", "resnet152", "mps"), art_overhead("fig5", "inception_v3", "mps"),
            art_overhead("fig5", "bert_base", "mps")))
    ss = {m: d.mean("fig5", V100, m, "stop-and-start") for m in MODELS}
    L.append(
        "- **Stop-and-start.** Simulated %s / %s / %s ms against %.0f / %.0f / %.0f ms (%s / %s / %s). The "
        "simulator charges every model the same new-process time ({V_NEWPROC} s: the paper's Table 1 T4 "
        "initialisation, reused for the V100) plus a pageable copy of the parameters, so its three models differ "
        "by only tens of ms; the artifact's grow by 1.7 s from ResNet-152 to BERT-base (likely importing "
        "pytorch-transformers and building and loading a larger model from disk). The initialisation constant "
        "fits ResNet-152 best, which is probably the model Table 1 measured." % (
            ms(ss["resnet152"]), ms(ss["inception_v3"]), ms(ss["bert_base"]),
            art("fig5", "resnet152", "stop-and-start"), art("fig5", "inception_v3", "stop-and-start"),
            art("fig5", "bert_base", "stop-and-start"),
            rel(ss["resnet152"], art("fig5", "resnet152", "stop-and-start")),
            rel(ss["inception_v3"], art("fig5", "inception_v3", "stop-and-start")),
            rel(ss["bert_base"], art("fig5", "bert_base", "stop-and-start"))))
    tr = {k: d.field("fig5", V100, "resnet152", k, "training_iterations_per_s") for k in ("pipeswitch", "stop-and-start")}
    if None not in tr.values():
        L.append(
            "- **Training under stop-and-start.** Stopping kills the training process, so the iteration in "
            "progress is lost (`training_lost_ms` in `psw sim`'s summary.json, not a sweep.csv column; Note [Killed training] in "
            "`sim/src/simulated_server.cpp`) and switching training back in costs another new process; PipeSwitch "
            "pauses training at a layer boundary and loses nothing. With one request every %s s, simulated "
            "training runs at %.1f iterations/s under stop-and-start against %.1f under PipeSwitch "
            "(V100, ResNet-152). The artifact does not report training throughput." % (
                base_settings()["interval_s"], tr["stop-and-start"], tr["pipeswitch"]))
    return "\n".join(L)


def sec_fig6(d):
    L = ["## Figure 6: throughput and latency under scheduling cycles (ResNet-152)\n", "![Figure 6](fig6.png)\n"]
    if not d.fig6:
        return "\n".join(L + ["(no fig6 results)"])
    cycles = sorted({c for (_, c, _) in d.fig6})
    mechs = FIGURE_MECHS["fig6"]

    def art6(key, mech, c):
        s = c // 1000
        if s not in ARTIFACT_FIG6_CYCLES_S:
            return None
        return ARTIFACT_FIG6[key][mech][ARTIFACT_FIG6_CYCLES_S.index(s)]

    rows = []
    for mech in mechs:
        for c in cycles:
            r = d.fig6.get((V100, c, mech))
            if r is None:
                continue
            a = art6("throughput", mech, c)
            t4 = d.fig6.get((T4, c, mech))
            h2 = d.fig6.get((H200, c, mech))
            rows.append([MECH_LABEL[mech], "%g s" % (c / 1000), "%.1f" % r["throughput_rps"],
                         "-" if a is None else "%.1f" % a,
                         "n/m" if a == 0 else rel(r["throughput_rps"], a) if a is not None else "-",
                         "%.1f" % t4["throughput_rps"] if t4 else "-", "%.1f" % h2["throughput_rps"] if h2 else "-"])
    L.append("**Throughput (batches of 8 per second of inference phase):**\n")
    L.append(table(["mechanism", "cycle", "V100 sim", "V100 artifact", "sim vs artifact", "T4 sim", "H200 sim"], rows))
    rows = []
    for mech in mechs:
        for c in cycles:
            r = d.fig6.get((V100, c, mech))
            if r is None:
                continue
            a = art6("mean_latency", mech, c)
            if mech == "ready":
                a_txt = "≈37–38"
                a = None
            else:
                a_txt = ms(a)
            ready = d.fig6.get((V100, c, "ready"))
            so = r["mean_ms"] - ready["mean_ms"] if ready else None
            ao = a - ARTIFACT_FIG6_READY_LATENCY_APPROX if a is not None else None
            rows.append([MECH_LABEL[mech], "%g s" % (c / 1000), ms(r["mean_ms"]),
                         "%s–%s" % (ms(r.get("min_ms")), ms(r["max_ms"])), a_txt, rel(r["mean_ms"], a),
                         ms(so) if mech != "ready" else "-", ms(ao) if mech != "ready" else "-",
                         rel(so, ao) if mech != "ready" else "-"])
    L.append("\n**Mean inference latency (ms), V100.** Overheads use Ready's latency of the same cycle (simulated) "
             "or ≈37.5 ms (the artifact's Ready is given only as ≈37–38 ms):\n")
    L.append(table(["mechanism", "cycle", "sim mean", "sim min–max", "artifact mean", "sim vs artifact",
                    "sim − Ready", "artifact − Ready", "overhead sim vs artifact"], rows))
    rows = []
    for hw in (T4, H200):
        for mech in mechs:
            vals = []
            for c in cycles:
                r = d.fig6.get((hw, c, mech))
                vals.append(ms(r["mean_ms"]) if r else "-")
            rows.append([HARDWARE_SHORT[hw], MECH_LABEL[mech]] + vals)
    L.append("\n**Mean inference latency (ms), T4 and H200 (simulation only):**\n")
    L.append(table(["hardware", "mechanism"] + ["%g s" % (c / 1000) for c in cycles], rows))
    L.append("\n### Where and why they differ\n")
    rv = [d.fig6[(V100, c, "ready")]["throughput_rps"] for c in cycles if (V100, c, "ready") in d.fig6]
    pv = [d.fig6[(V100, c, "pipeswitch")]["throughput_rps"] / d.fig6[(V100, c, "ready")]["throughput_rps"]
          for c in cycles if (V100, c, "pipeswitch") in d.fig6 and (V100, c, "ready") in d.fig6]
    ready_ms = d.fig6[(V100, cycles[0], "ready")]["mean_ms"]
    L.append(
        "- **Ready and PipeSwitch.** Simulated Ready throughput %.1f–%.1f batches/s = 1000 / %s ms of GPU time "
        "per batch, against the artifact's 25.9–27.1 (≈1000 / 37.5 ms, the client floor again). PipeSwitch "
        "reaches %s of Ready in simulation and 99–103%% in the artifact: both support *near 100%% "
        "utilisation*. PipeSwitch's simulated maximum latency is %s ms (the first request after a switch) "
        "against the artifact's 47–55 ms, the same small-overhead story as Figure 5." % (
            min(rv), max(rv), ms(ready_ms), pct_range(min(pv), max(pv)),
            ms(max(d.fig6[(V100, c, "pipeswitch")]["max_ms"] for c in cycles))))
    mps = [d.fig6[(V100, c, "mps")] for c in cycles if (V100, c, "mps") in d.fig6]
    L.append(
        "- **MPS.** Simulated %.1f–%.1f batches/s at %s ms against 2.3–3.5 at 335–447 ms: the constant "
        "slowdown factor (fitted to Figure 5, and applied throughout because training shares the GPU in "
        "every inference phase) is applied to the shorter simulated GPU time, so simulated MPS delivers %.1f–%.1f× the "
        "artifact's throughput and does not vary with the cycle, where the artifact's swings by ±20%%." % (
            min(r["throughput_rps"] for r in mps), max(r["throughput_rps"] for r in mps), ms(mps[0]["mean_ms"]),
            min(r["throughput_rps"] / art6("throughput", "mps", c) for c, r in zip(cycles, mps)),
            max(r["throughput_rps"] / art6("throughput", "mps", c) for c, r in zip(cycles, mps))))
    ss = {c: d.fig6.get((V100, c, "stop-and-start")) for c in cycles}
    ss_txt = " / ".join("%.2f" % ss[c]["throughput_rps"] if ss[c] else "-" for c in cycles)
    switch_s = d.mean("fig5", V100, "resnet152", "stop-and-start") / 1000
    zero = [c for c in cycles if ss.get(c) and ss[c]["throughput_rps"] == 0]
    spill = [c for c in cycles if ss.get(c) and ss[c]["throughput_rps"] > 0 and c / 1000 < switch_s]
    fits = [c for c in cycles if ss.get(c) and c / 1000 >= switch_s]
    text = ("- **Stop-and-start.** The simulator counts what the artifact counts (inferences completed inside the "
            "inference phases), so a %.1f s switch longer than the cycle gives 0 batches/s: simulated %s "
            "batches/s for cycles %s against the artifact's %s." % (
                switch_s, ss_txt, ", ".join("%g s" % (c / 1000) for c in cycles),
                " / ".join("%.1f" % v for v in ARTIFACT_FIG6["throughput"]["stop-and-start"])))
    if zero:
        text += " Zero at %s, as in the artifact." % ", ".join("%g s" % (c / 1000) for c in zero)
    if spill:
        text += (" Not zero at %s although the switch is longer than the cycle: the switch begun at the start "
                 "of one phase can end inside a later one (phases start every 2 × cycle). The request that began "
                 "it is answered after its own phase and counts in none; the later phase's first request, queued "
                 "behind the switch, runs resident once it ends and counts in its own phase, with the "
                 "back-to-back requests it issues. The artifact reports 0 there." % ", ".join(
                     "%g s" % (c / 1000) for c in spill))
    if fits:
        text += (" Where the switch fits in the cycle (%s) the simulation is higher (%s against %s) because its "
                 "switch and compute are shorter; mean latencies there (%s ms against %s) differ for the same "
                 "reason." % (
                     ", ".join("%g s" % (c / 1000) for c in fits),
                     " / ".join("%.1f" % ss[c]["throughput_rps"] for c in fits),
                     " / ".join("%.1f" % art6("throughput", "stop-and-start", c) for c in fits),
                     " / ".join(ms(ss[c]["mean_ms"]) for c in fits),
                     " / ".join(ms(art6("mean_latency", "stop-and-start", c)) for c in fits)))
    L.append(text)
    return "\n".join(L)


def sec_fig7(d):
    L = latency_section(d, "fig7", 7, "pipelined model transmission")
    o, a = v100_overheads(d, "fig7")
    L.append(
        "- **Grouped transmission** (one copy, then compute) is the closest match in the whole study: simulated "
        "overheads %s / %s / %s ms against %.1f / %.1f / %.1f ms. It is pure PCIe transfer of 241 / 109 / 438 MB, "
        "which the {V_BW} GB/s pinned-bandwidth figure of the V100 profile predicts well; the artifact's BERT copy "
        "is slower (≈10 GB/s effective)." % (
            ms(o("resnet152", "grouped-transmission")), ms(o("inception_v3", "grouped-transmission")),
            ms(o("bert_base", "grouped-transmission")), a("resnet152", "grouped-transmission"),
            a("inception_v3", "grouped-transmission"), a("bert_base", "grouped-transmission")))
    per_layer = {m: o(m, "per-layer-pipeline") for m in MODELS}
    L.append(
        "- **Per-layer pipeline.** Simulated overheads %s / %s / %s ms against %.1f / %.1f / %.1f ms. The "
        "simulator charges {V_SYNC} µs per group (311 / 194 / 101 layers), and that number was **fitted to this "
        "comparison**: the V100 profile's `group_sync_ns` is the artifact's per-layer pipeline minus its "
        "PipeSwitch over the extra groups (ResNet-152 ≈%.0f µs, Inception-v3 ≈%.0f µs per group, less the "
        "copy's fixed cost; one number for both, so ResNet-152 comes out low and Inception-v3 high). The "
        "comparison for ResNet-152 and Inception-v3 is calibration, not validation; "
        "BERT-base, left out of the fit, is the one out-of-sample check (%s)." % (
            ms(per_layer["resnet152"]), ms(per_layer["inception_v3"]), ms(per_layer["bert_base"]),
            a("resnet152", "per-layer-pipeline"), a("inception_v3", "per-layer-pipeline"),
            a("bert_base", "per-layer-pipeline"),
            1000 * (art("fig7", "resnet152", "per-layer-pipeline") - art("fig7", "resnet152", "pipeswitch")) / (311 - 52),
            1000 * (art("fig7", "inception_v3", "per-layer-pipeline") - art("fig7", "inception_v3", "pipeswitch")) / (194 - 18),
            rel(per_layer["bert_base"], a("bert_base", "per-layer-pipeline"))))
    L.append(
        "- **No optimization** (per-layer copies, compute only after all arrived). Simulated %s / %s / %s ms "
        "against %.1f / %.1f / %.1f ms: the simulator makes it grouped transmission plus {V_COPY} µs per copy, so it "
        "is barely worse than grouped; the artifact pays 20–26 ms more than grouped, again per-layer "
        "Python/driver cost the profile does not carry." % (
            ms(o("resnet152", "no-optimization")), ms(o("inception_v3", "no-optimization")),
            ms(o("bert_base", "no-optimization")), a("resnet152", "no-optimization"),
            a("inception_v3", "no-optimization"), a("bert_base", "no-optimization")))
    orders = []
    for m in MODELS:
        s_pl, s_g = d.mean("fig7", V100, m, "per-layer-pipeline"), d.mean("fig7", V100, m, "grouped-transmission")
        a_pl, a_g = art("fig7", m, "per-layer-pipeline"), art("fig7", m, "grouped-transmission")
        if None in (s_pl, s_g):
            continue
        same = (s_pl > s_g) == (a_pl > a_g)
        orders.append("%s: %s (sim per-layer %s grouped, artifact %s)" % (
            MODEL_LABEL[m], "same" if same else "**reversed**", "worse than" if s_pl > s_g else "better than",
            "worse" if a_pl > a_g else "better"))
    not_best = []
    for hw in HARDWARE:
        for m in MODELS:
            vals = {k: d.mean("fig7", hw, m, k) for k in FIGURE_MECHS["fig7"]}
            if None not in vals.values() and min(vals, key=vals.get) != "pipeswitch":
                not_best.append("%s on %s (best: %s)" % (MODEL_LABEL[m], HARDWARE_SHORT[hw],
                                                          MECH_LABEL[min(vals, key=vals.get)]))
    best = ("PipeSwitch is the fastest variant for every model on every simulated profile, as in the artifact"
            if not not_best else "PipeSwitch is not the fastest simulated variant for " + ", ".join(not_best))
    reversed_any = any("reversed" in o for o in orders)
    L.append("- **Ranking.** " + best + ". Per-layer pipeline against grouped transmission: " + "; ".join(orders) +
             "." + (" Where it is reversed, the simulated per-group sync makes the per-layer pipeline look "
                    "better than it was." if reversed_any else "") + " The per-group sync that orders the two "
             "variants was fitted to this figure (above), so the ranking is not an independent check either.")
    return "\n".join(L)


def sec_fig8(d, groups):
    L = latency_section(d, "fig8", 8, "unified memory management")

    def inc(m, k, src):
        if src == "sim":
            x, p = d.mean("fig8", V100, m, k), d.mean("fig8", V100, m, "pipeswitch")
            return None if x is None or p is None else x - p
        return art("fig8", m, k) - art("fig8", m, "pipeswitch")

    def trio(k, src):
        return " / ".join(ms(inc(m, k, src)) for m in MODELS)

    L.append("Increments over PipeSwitch (ms, ResNet-152 / Inception-v3 / BERT-base, V100), which isolate each "
             "ablation's cost:\n")
    rows = [[MECH_LABEL[k], trio(k, "sim"), trio(k, "art")] for k in FIGURE_MECHS["fig8"][1:]]
    L.append(table(["ablation", "simulated", "artifact"], rows))
    L.append("")
    L.append(
        "- **No memory management** (cudaMalloc per layer, cudaFree of the old model): simulated %s ms against %s. "
        "The profile's {V_MALLOC} µs per cudaMalloc and {V_FREE} µs per cudaFree over ~300 layers give the right order of "
        "magnitude; the artifact additionally loses PyTorch's caching allocator warm state." % (
            trio("no-memory-management", "sim"), trio("no-memory-management", "art")))
    g = [groups.get((V100, m)) for m in MODELS] if groups else []
    groups_txt = ""
    if g and all(g):
        groups_txt = (" The simulator does not re-plan this ablation: it keeps PipeSwitch's grouping, %s groups "
                      "(ResNet-152 / Inception-v3 / BERT-base; Note [Ablation grouping] in `sim/src/mechanism.cpp`), "
                      "and adds the IPC open to each group's sync, so it adds at most about groups × {V_IPC} ms, "
                      "less what the pipeline hides; the artifact has 52 / 17 / 39 hand-written groups." %
                      " / ".join(str(len(p["groups"])) for p in g))
    L.append(
        "- **No IPC optimization** is the largest discrepancy of this figure: simulated %s ms against %s. The V100 "
        "profile's `ipc_handle_open_ns` ({V_IPC} ms per group) was **fitted to this figure**: the artifact's "
        "increments divided by its group counts (ResNet-152 and BERT-base), so the per-group cost is "
        "calibration, not a prediction.%s The gap is the group count: the simulated plans have far fewer groups "
        "than the artifact's, so the same per-group cost adds far less; with the artifact's plans the simulator "
        "would add about 52 / 17 / 39 ms by construction." % (
            trio("no-ipc-optimization", "sim"), trio("no-ipc-optimization", "art"), groups_txt))
    bert_ps, bert_np = d.overhead("fig8", V100, "bert_base", "pipeswitch"), d.overhead("fig8", V100, "bert_base",
                                                                                         "no-pinned-memory")
    L.append(
        "- **No pinned memory** (pageable copies at {V_PAGEABLE} GB/s on the V100 against {V_BW} pinned): simulated %s ms "
        "against %s. The simulated vision models still hide part of the slower transfer behind their long "
        "analytic compute, while BERT-base, already transfer-bound, goes from %s to %s ms of overhead (×%.1f). "
        "The artifact's Inception-v3 shows no cost at all (within noise) and its BERT-base much less, "
        "consistent with its larger BERT compute (251 tokens) hiding more of the slower copy." % (
            trio("no-pinned-memory", "sim"), trio("no-pinned-memory", "art"), ms(bert_ps), ms(bert_np),
            bert_np / bert_ps if bert_ps else float("nan")))
    um = [(m, inc(m, "unified-memory", "sim"), inc(m, "unified-memory", "art")) for m in MODELS]
    close = [MODEL_LABEL[m] for m, x, y in um if x is not None and abs(x - y) <= 0.25 * abs(y)]
    high = [MODEL_LABEL[m] for m, x, y in um if x is not None and x > 1.25 * y]
    L.append(
        "- **CUDA unified memory** (fault-driven migration of every parameter, 2 MiB pages, no overlap with "
        "compute): simulated %s ms against %s. The migration bandwidth ({V_UMBW} GB/s) and fault cost ({V_UMFAULT} µs per page) "
        "are estimates. Within 25%% of the artifact: %s; higher: %s. The simulated cost is the whole model's "
        "migration time, so it scales with the model's size; the artifact's does less so, which suggests its "
        "unified memory overlaps some migration with compute or prefetches." % (
            trio("unified-memory", "sim"), trio("unified-memory", "art"), ", ".join(close) or "none",
            ", ".join(high) or "none"))
    return "\n".join(L)


def sec_fig9(d):
    L = latency_section(d, "fig9", 9, "active-standby worker switching")
    o, a = v100_overheads(d, "fig9")
    L.append(
        "- **One process** (one worker; the old model is copied back and freed, the new one allocated and copied "
        "without pipelining): simulated overheads %s / %s / %s ms against %.0f / %.0f / %.0f ms, about %.1f× "
        "lower. The simulator charges a pinned copy out, a pinned copy in and per-layer malloc/free; the "
        "artifact moves the model with PyTorch's `.to()` parameter by parameter from Python, empties the "
        "cache and synchronises, which costs far more than the raw copies." % (
            ms(o("resnet152", "one-process")), ms(o("inception_v3", "one-process")), ms(o("bert_base", "one-process")),
            a("resnet152", "one-process"), a("inception_v3", "one-process"), a("bert_base", "one-process"),
            sum(a(m, "one-process") for m in MODELS) / max(1e-9, sum(o(m, "one-process") or 0 for m in MODELS))))
    L.append(
        "- **Two processes** is stop-and-start (same numbers as Figure 5): simulated %s / %s / %s ms against "
        "%.0f / %.0f / %.0f ms; see Figure 5 for why the simulated new-process time does not grow with the "
        "model." % (
            ms(d.mean("fig9", V100, "resnet152", "two-processes")), ms(d.mean("fig9", V100, "inception_v3", "two-processes")),
            ms(d.mean("fig9", V100, "bert_base", "two-processes")), art("fig9", "resnet152", "two-processes"),
            art("fig9", "inception_v3", "two-processes"), art("fig9", "bert_base", "two-processes")))
    ok = all((d.mean("fig9", hw, m, "pipeswitch") or 0) < (d.mean("fig9", hw, m, "one-process") or 0) <
             (d.mean("fig9", hw, m, "two-processes") or 0) for hw in HARDWARE for m in MODELS)
    L.append("- The ordering PipeSwitch < one process < two processes %s on every simulated profile; it holds in "
             "the artifact too." % ("holds" if ok else "does **not** hold"))
    return "\n".join(L)


def sec_h200(d, groups, profiles):
    L = ["## What the simulation predicts on the H200 (PCIe 5.0)\n"]
    rows = []
    for m in MODELS:
        ready = d.ready(H200, m)
        ps = d.mean("fig5", H200, m, "pipeswitch")
        st = d.field("fig5", H200, m, "pipeswitch", "startup_overhead_ms")
        ss = d.mean("fig5", H200, m, "stop-and-start")
        mps = d.mean("fig5", H200, m, "mps")
        one = d.mean("fig9", H200, m, "one-process")
        v_ready = d.ready(V100, m)
        rows.append([MODEL_LABEL[m], ms(ready), "%.1f×" % (v_ready / ready) if ready and v_ready else "-", ms(ps),
                     ms(ps - ready) if ps and ready else "-", "%.1f%%" % (100 * (ps - ready) / ready) if ps and ready else "-",
                     ms(st), ms(one), ms(mps), "%.2f s" % (ss / 1000) if ss else "-",
                     "%.0f×" % (ss / ps) if ss and ps else "-"])
    L.append(table(["model", "Ready ms", "faster than V100", "PipeSwitch ms", "overhead ms", "overhead % of Ready",
                    "startup ms", "one process ms", "MPS ms", "stop-and-start", "stop-and-start ÷ PipeSwitch"],
                   rows))
    L.append("")
    h = profiles.get(H200, {})
    bw = h.get("link", {}).get("pinned", {}).get("bandwidth_bytes_per_s", 0) / 1e9
    v_bw = profiles.get(V100, {}).get("link", {}).get("pinned", {}).get("bandwidth_bytes_per_s", 0) / 1e9
    b_h = d.overhead("fig5", H200, "bert_base", "pipeswitch") / d.ready(H200, "bert_base")
    b_v = d.overhead("fig5", V100, "bert_base", "pipeswitch") / d.ready(V100, "bert_base")
    L.append(
        "- **PipeSwitch stays near Ready.** With %.1f GB/s pinned copies (measured on the lent host) the vision "
        "models switch in with a few tens of µs of overhead. BERT-base remains transfer-bound: 438 MB take "
        "≈%.1f ms on the link against %s ms of compute, so the pipeline leaves %s ms, %.0f%% of Ready (V100: "
        "%.0f%%). The link improved %.1f× over the V100 profile's %.0f GB/s while BERT's compute improved "
        "only %.1f×, so relative to compute a switch is %s on the H200." % (
            bw, 437.9 / bw if bw else float("nan"), ms(d.ready(H200, "bert_base")),
            ms(d.overhead("fig5", H200, "bert_base", "pipeswitch")), 100 * b_h, 100 * b_v,
            bw / v_bw if v_bw else float("nan"), v_bw, d.ready(V100, "bert_base") / d.ready(H200, "bert_base"),
            "cheaper" if b_h < b_v else "not cheaper"))
    ss = d.mean("fig5", H200, "resnet152", "stop-and-start")
    ss_v = d.mean("fig5", V100, "resnet152", "stop-and-start")
    new_process_h = new_process_s(h)
    h_ratio, v_ratio = ratio_range(d, H200), ratio_range(d, V100)
    L.append(
        "- **Stop-and-start: %.1f s** for ResNet-152 (V100: %.1f s). A new worker process costs %.1f s in the "
        "profile (adopted from the server's split of a stop-and-start run's starts on the H200: LibTorch's "
        "process, its context and three models built; a Python process importing PyTorch 2.11 took 9.3–9.7 s "
        "there). Stop-and-start takes %.0f–%.0f× PipeSwitch's latency on "
        "the H200 against %.0f–%.0f× on the V100: PipeSwitch gained %s than a process start did, so the case "
        "for standby workers is %s on current hardware and software." % (
            (ss / 1000 if ss else float("nan"), ss_v / 1000 if ss_v else float("nan"), new_process_h)
            + h_ratio + v_ratio + (("more", "stronger") if h_ratio[0] > v_ratio[1] else ("not more", "no stronger"))))
    sw_h = stop_start_training_switch_ins(d, H200)
    sw_v = stop_start_training_switch_ins(d, V100)
    tr_h = d.field("fig5", H200, "resnet152", "stop-and-start", "training_iterations_per_s")
    tr_p = d.field("fig5", H200, "resnet152", "pipeswitch", "training_iterations_per_s")
    if sw_h is not None and sw_v is not None and sw_h < sw_v:
        L.append(
            "- **Training never resumes between requests under stop-and-start on the H200**: %d training switch-ins against "
            "%d on the V100. Switching training back in (another %.1f s) does not finish before the next "
            "request %s s later, so the simulator abandons it; training runs at %.1f iterations/s against %.1f "
            "with PipeSwitch." % (sw_h, sw_v, new_process_h, base_settings()["interval_s"], tr_h, tr_p))
    if d.fig6:
        pv = [d.fig6[(H200, c, "pipeswitch")]["throughput_rps"] / d.fig6[(H200, c, "ready")]["throughput_rps"]
              for (hw, c, mech) in d.fig6 if hw == H200 and mech == "pipeswitch"]
        if pv:
            L.append("- **Utilisation** (Figure 6): PipeSwitch delivers %s of Ready's throughput on the "
                     "H200 for every cycle down to 1 s." % pct_range(min(pv), max(pv)))
    L.append("- The H200's group sync, worker cleanup, MPS training slowdown and unified-memory migration numbers "
             "are still estimates (see the profile); its process start, CUDA context, framework start and each "
             "model's first forward in a fresh process are adopted from the server's split of a stop-and-start "
             "run on one machine (they moved by about 60% on another).")
    return "\n".join(L)


def new_process_s(profile):
    """A new worker process in a hardware profile: process start + framework start + CUDA context, s."""
    st = profile.get("startup", {})
    return (st.get("process_start_ns", 0) + st.get("framework_start_ns", 0) + st.get("cuda_context_ns", 0)) / 1e9


def stop_start_training_switch_ins(d, hw):
    """Times training was switched back in under stop-and-start (Figure 5, ResNet-152)."""
    r = d.row("fig5", hw, "resnet152", "stop-and-start")
    if r is None:
        return None
    return int(float(r["training_switch_ins"]))


def ratio_range(d, hw):
    r = [d.mean("fig5", hw, m, "stop-and-start") / d.mean("fig5", hw, m, "pipeswitch") for m in MODELS
         if d.mean("fig5", hw, m, "stop-and-start") and d.mean("fig5", hw, m, "pipeswitch")]
    return (min(r), max(r)) if r else (float("nan"), float("nan"))


def sec_checks(d, groups):
    L = ["## Simulator behaviour worth checking\n",
         "Found while writing this report; none of these is corrected here (the numbers above are the "
         "simulator's as they are).\n"]
    spill = [c for (hw, c, mech), r in sorted(d.fig6.items())
             if hw == V100 and mech == "stop-and-start" and r["throughput_rps"] > 0 and
             c / 1000 < d.mean("fig5", V100, "resnet152", "stop-and-start") / 1000]
    if spill:
        L.append(
            "- **Figure 6 counts a request in the inference phase it completes in, not the one it arrived in.** "
            "V100 stop-and-start at the %s cycle reports %.2f batches/s although its switch is longer than the "
            "cycle: the switch begun in one phase completes inside a later one." % (
                ", ".join("%g s" % (c / 1000) for c in spill), d.fig6[(V100, spill[0], "stop-and-start")]["throughput_rps"]))
    if groups and groups.get((V100, "resnet152")):
        L.append(
            "- **`no-ipc-optimization` keeps PipeSwitch's %d groups** (ResNet-152, V100) while the profile's "
            "{V_IPC} ms per group was derived from the artifact's 52 fixed groups: the simulated ablation costs "
            "%s ms where the artifact's costs %.1f ms. Calibration (per group, on 52 groups) and use (on the "
            "simulator's own plan) do not match." % (
                len(groups[(V100, "resnet152")]["groups"]),
                ms(d.mean("fig8", V100, "resnet152", "no-ipc-optimization") - d.mean("fig8", V100, "resnet152", "pipeswitch")),
                art("fig8", "resnet152", "no-ipc-optimization") - art("fig8", "resnet152", "pipeswitch")))
    mps_tot = d.field("fig5", V100, "resnet152", "mps", "total_overhead_ms")
    if mps_tot is not None and mps_tot == 0:
        L.append(
            "- **`total_overhead_ms` is 0 for MPS** in every sweep row, because the MPS slowdown is folded into "
            "the resident time the overhead is measured against. This report uses MPS − Ready instead.")
    sw_h = stop_start_training_switch_ins(d, H200)
    n_h = d.field("fig5", H200, "resnet152", "stop-and-start", "requests")
    if sw_h is not None and n_h is not None and sw_h < int(float(n_h)):
        L.append(
            "- **`switch-base.yaml`'s %s s interval does not leave stop-and-start time to restart training on the "
            "H200** (9.5 s each way), contrary to its comment; training is switched back in %d times after %d "
            "requests." % (base_settings()["interval_s"], sw_h, int(float(n_h))))
    L.append(
        "- **The BERT-base profile is 128 tokens (`bert-base-uncased`)**, the artifact's input is 251 tokens "
        "(`bert-base-cased`): the simulated BERT compute is about half of the artifact's, which inflates "
        "BERT's simulated PipeSwitch overhead.")
    return "\n".join(L)


def v100_values(profiles):
    """V100-profile numbers quoted in the discussion text ({V_...} placeholders)."""
    p = profiles.get(V100, {})
    g = lambda *keys: _get(p, keys)  # noqa: E731
    bw = g("link", "pinned", "bandwidth_bytes_per_s")
    st = g("startup", "process_start_ns"), g("startup", "framework_start_ns"), g("startup", "cuda_context_ns")

    def num(v, scale, fmt):
        return "?" if v is None else fmt % (v / scale)

    return {
        "V_BW": num(bw, 1e9, "%g"),
        "V_PAGEABLE": num(g("link", "pageable", "bandwidth_bytes_per_s"), 1e9, "%g"),
        "V_SYNC": num(g("group_sync_ns"), 1e3, "%g"),
        "V_COPY": num(g("link", "pinned", "copy_fixed_ns"), 1e3, "%g"),
        "V_MALLOC": num(g("memory", "cuda_malloc_ns"), 1e3, "%g"),
        "V_FREE": num(g("memory", "cuda_free_ns"), 1e3, "%g"),
        "V_IPC": num(g("memory", "ipc_handle_open_ns"), 1e6, "%g"),
        "V_UMBW": num(g("unified_memory", "migration_bandwidth_bytes_per_s"), 1e9, "%g"),
        "V_UMFAULT": num(g("unified_memory", "page_fault_ns"), 1e3, "%g"),
        "V_NEWPROC": "?" if None in st else "%.2f" % (sum(st) / 1e9),
        "V_BERT_TR": num(437928960 / bw * 1e3 if bw else None, 1, "%.1f"),
    }


def _get(d, keys):
    for k in keys:
        if not isinstance(d, dict) or k not in d:
            return None
        d = d[k]
    return d


def base_settings():
    """The figures' workload settings, from their configs as psw reads them."""
    switch = config_json("experiment", os.path.join(ROOT, "configs", "experiments", "switch-base.yaml"))
    cycles = config_json("experiment", os.path.join(ROOT, "configs", "experiments", "cycles-base.yaml"))
    model = config_json("model", os.path.join(ROOT, "configs", "models", "resnet152.yaml"))
    return {"batch": str(model["batch"]),
            "interval_s": "%g" % (switch["workload"]["interval_ms"] / 1000),
            "count": str(switch["workload"]["count"]),
            "rounds": str(cycles["workload"]["rounds"])}


def sec_xval(results):
    """Cross-validation (DESIGN.md §1): the simulator's switch from the H200-measured profiles
    (h200-measured sweep) beside the switch `psw run` measured on the H200 (results/gpu/)."""
    path = os.path.join(results, "h200-measured", "sweep.csv")
    # The newest run with `psw run` switches in it (run-<model>*.json; the mechanism runs have none).
    raw_dirs = sorted(d for d in glob.glob(os.path.join(results, "..", "gpu", "raw-*"))
                      if glob.glob(os.path.join(d, "run-*.json")))
    if not os.path.exists(path) or not raw_dirs:
        return "## Cross-validation on the H200\n\nNot run (needs results/sim/h200-measured/ and results/gpu/raw-*/)."
    sim = {}
    with open(path) as f:
        for row in csv.DictReader(f):
            model = row["workload.models"].strip("[]")
            sim[(model, row["mechanism"], row["placement"])] = float(row["mean_ms"])
    measured = {}
    for p in glob.glob(os.path.join(raw_dirs[-1], "*.json")):
        r = json.load(open(p))
        if r.get("mode") == "pipeswitch" and r.get("graph"):
            measured[(r["model"], r.get("placement", "copy"))] = r
    rows = []
    for model in MODELS:
        for placement in ("copy", "auto"):
            m = measured.get((model, placement))
            if m is None:
                continue
            sim_switch = sim.get((model, "pipeswitch", placement))
            sim_ready = sim.get((model, "ready", placement))
            lat = m["latency_ms"]["median"]
            rows.append([MODEL_LABEL.get(model, model), placement, ms(sim_ready, 3), ms(m["ready_graph_ms"]["median"], 3),
                         ms(sim_switch, 3), ms(lat, 3),
                         "%+.1f%%" % ((sim_switch - lat) / lat * 100) if sim_switch else "n/a"])
    L = ["## Cross-validation on the H200\n",
         "The simulator (sweep `configs/experiments/h200-measured.yaml`: one cold request, nothing else on the "
         "GPU) predicts from the profiles `psw profile` measured on the H200 (`configs/models/h200/`, "
         "`configs/hardware/h200-pcie5.yaml`); the executor measured the same switch with `psw run --graph` "
         "(`%s`, median of the cold switches). `sim Ready` is the summed per-layer forward; `measured Ready` "
         "the resident forward replayed as a CUDA graph (with placement auto the executor's resident model also "
         "reads its embeddings in place, hence BERT's higher number there)." % os.path.relpath(raw_dirs[-1], os.path.join(results, "..", "..")),
         "",
         table(["model", "placement", "sim Ready ms", "measured Ready ms", "sim PipeSwitch ms",
                "measured PipeSwitch ms", "sim vs measured"], rows),
         "",
         "Only BERT-base has layers placement auto reads in place (its embedding tables); the CNNs appear with "
         "every layer copied. The simulator and the executor's prediction share the timeline evaluation, so "
         "this table and the prediction-error column of results/gpu/ tell the same story from two ends."]
    return "\n".join(L)


def main(argv):
    if len(argv) != 2:
        print("usage: sim_report.py RESULTS_DIR", file=sys.stderr)
        return 2
    results = argv[1]
    d = Data(results)
    missing = [f for f in ("fig5", "fig6", "fig7", "fig8", "fig9") if f not in d.raw]
    if "fig5" in missing:
        print("sim_report.py: %s/fig5/sweep.csv is needed (Ready latencies)" % results, file=sys.stderr)
        return 2
    profiles = hardware_profiles()
    psw = psw_path()
    groups = plans(psw, profiles)
    parts = [
        "<!-- produced by scripts/sim_report.py; do not edit -->\n"
        "# PipeSwitch Figures 5–9 in simulation, beside the authors' artifact\n\n"
        "*Produced by `scripts/sim_report.py` (run by `scripts/run-experiments.sh`); do not edit by hand.*\n\n"
        "Every number below comes from the discrete-event simulator (`psw sweep`) with the analytic model "
        "profiles and the V100, T4 and H200 hardware profiles. The reference is the authors' artifact "
        "re-run on a V100 (PAPER.md §10), not the paper itself. Missing sweeps: %s." % (", ".join(missing) or "none"),
        sec_setup(d, profiles, bool(groups), groups, base_settings()),
        "## Environment\n\n" + environment(),
        sec_claims(d),
        sec_fig5(d),
    ]
    if "fig6" in d.raw:
        parts.append(sec_fig6(d))
    if "fig7" in d.raw:
        parts.append(sec_fig7(d))
    if "fig8" in d.raw:
        parts.append(sec_fig8(d, groups))
    if "fig9" in d.raw:
        parts.append(sec_fig9(d))
    parts.append(sec_h200(d, groups, profiles))
    parts.append(sec_xval(results))
    parts.append(sec_checks(d, groups))
    text = "\n\n".join(parts) + "\n"
    for key, value in v100_values(profiles).items():
        text = text.replace("{%s}" % key, value)
    out = os.path.join(results, "README.md")
    with open(out, "w") as f:
        f.write(text)
    print("written: %s" % out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
