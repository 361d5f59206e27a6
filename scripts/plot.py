#!/usr/bin/env python3
"""Plots the simulated PipeSwitch figures 5-9 from `psw sweep` results.

Usage: scripts/plot.py RESULTS_DIR          (e.g. results/sim; reads RESULTS_DIR/figN/sweep.csv)

Writes RESULTS_DIR/fig5.png ... fig9.png: one panel per hardware profile (V100, T4, H200),
grouped bars per model. On the V100 panels a black tick marks the authors' artifact re-run
(PAPER.md section 10), which is client-measured latency and so includes ~37-40 ms of
client/Python/TCP overhead that the simulator does not model.

Only the standard library and matplotlib. `sim_report.py` imports the loaders from here.
"""
import csv
import os
import sys

# ---------------------------------------------------------------------------------------------
# Names and order

HARDWARE = ["v100-pcie3-x16", "t4-pcie3-x8", "h200-pcie5"]
HARDWARE_LABEL = {
    "v100-pcie3-x16": "V100 16 GB, PCIe 3.0 x16",
    "t4-pcie3-x8": "T4 16 GB, PCIe 3.0 x8",
    "h200-pcie5": "H200 141 GB, PCIe 5.0 x16",
}
HARDWARE_SHORT = {"v100-pcie3-x16": "V100", "t4-pcie3-x8": "T4", "h200-pcie5": "H200"}
MODELS = ["resnet152", "inception_v3", "bert_base"]
MODEL_LABEL = {"resnet152": "ResNet-152", "inception_v3": "Inception-v3", "bert_base": "BERT-base"}
MECH_LABEL = {
    "ready": "Ready model",
    "pipeswitch": "PipeSwitch",
    "mps": "MPS",
    "stop-and-start": "Stop-and-start",
    "per-layer-pipeline": "Per-layer pipeline",
    "grouped-transmission": "Grouped transmission",
    "no-optimization": "No optimization",
    "no-memory-management": "No memory management",
    "no-ipc-optimization": "No IPC optimization",
    "no-pinned-memory": "No pinned memory",
    "unified-memory": "CUDA unified memory",
    "one-process": "One process",
    "two-processes": "Two processes",
}
FIGURE_MECHS = {
    "fig5": ["ready", "pipeswitch", "mps", "stop-and-start"],
    "fig6": ["ready", "pipeswitch", "mps", "stop-and-start"],
    "fig7": ["pipeswitch", "per-layer-pipeline", "grouped-transmission", "no-optimization"],
    "fig8": ["pipeswitch", "no-memory-management", "no-ipc-optimization", "no-pinned-memory", "unified-memory"],
    "fig9": ["pipeswitch", "one-process", "two-processes"],
}
FIGURE_TITLE = {
    "fig5": "Figure 5 (simulated): total latency of an inference request arriving while training runs",
    "fig6": "Figure 6 (simulated): ResNet-152 under scheduling cycles (train one cycle, infer one cycle)",
    "fig7": "Figure 7 (simulated): effectiveness of pipelined model transmission",
    "fig8": "Figure 8 (simulated): effectiveness of unified memory management",
    "fig9": "Figure 9 (simulated): effectiveness of active-standby worker switching",
}
COLORS = {
    "ready": "#7f7f7f",
    "pipeswitch": "#d62728",
    "mps": "#1f77b4",
    "stop-and-start": "#2ca02c",
    "per-layer-pipeline": "#ff7f0e",
    "grouped-transmission": "#1f77b4",
    "no-optimization": "#2ca02c",
    "no-memory-management": "#1f77b4",
    "no-ipc-optimization": "#ff7f0e",
    "no-pinned-memory": "#2ca02c",
    "unified-memory": "#9467bd",
    "one-process": "#1f77b4",
    "two-processes": "#2ca02c",
}
HATCH = {"ready": "//"}

# ---------------------------------------------------------------------------------------------
# The authors' artifact re-run on AWS p3.2xlarge (V100), inference batch 8, client-measured
# send->reply latency in ms. Copied from /work/shared/reference/PAPER.md section 10 (which
# takes them from the artifact's plot scripts, github.com/baizh1994/PipeSwitch). These are NOT
# the paper's own numbers (unknown, except the abstract's ranges in PAPER.md section 11).

ARTIFACT = {
    # PAPER.md §10, Figure 5 table (values hard-coded in the artifact's plot script)
    "fig5": {
        "resnet152": {"ready": 39.5, "pipeswitch": 43.1, "mps": 217.6, "stop-and-start": 5752.8},
        "inception_v3": {"ready": 40.5, "pipeswitch": 40.9, "mps": 177.6, "stop-and-start": 6376.5},
        "bert_base": {"ready": 40.5, "pipeswitch": 54.2, "mps": 136.0, "stop-and-start": 7442.0},
    },
    # PAPER.md §10, Figure 7 table
    "fig7": {
        "resnet152": {"pipeswitch": 41.1, "per-layer-pipeline": 76.4, "grouped-transmission": 60.1,
                      "no-optimization": 86.5},
        "inception_v3": {"pipeswitch": 39.5, "per-layer-pipeline": 53.7, "grouped-transmission": 50.4,
                         "no-optimization": 58.1},
        "bert_base": {"pipeswitch": 53.7, "per-layer-pipeline": 70.3, "grouped-transmission": 83.2,
                      "no-optimization": 89.9},
    },
    # PAPER.md §10, Figure 8 table
    "fig8": {
        "resnet152": {"pipeswitch": 42.4, "no-memory-management": 68.6, "no-ipc-optimization": 95.2,
                      "no-pinned-memory": 55.8, "unified-memory": 64.1},
        "inception_v3": {"pipeswitch": 41.2, "no-memory-management": 62.0, "no-ipc-optimization": 65.8,
                         "no-pinned-memory": 40.0, "unified-memory": 60.9},
        "bert_base": {"pipeswitch": 53.8, "no-memory-management": 66.4, "no-ipc-optimization": 88.7,
                      "no-pinned-memory": 67.7, "unified-memory": 81.2},
    },
    # PAPER.md §10, Figure 9 table
    "fig9": {
        "resnet152": {"pipeswitch": 43.3, "one-process": 224.6, "two-processes": 5681.5},
        "inception_v3": {"pipeswitch": 39.6, "one-process": 189.6, "two-processes": 6279.9},
        "bert_base": {"pipeswitch": 55.3, "one-process": 221.2, "two-processes": 7377.8},
    },
}
# PAPER.md §10, Figure 6 table: ResNet-152, cycles 1/2/5/10/30 s. Throughput in batches/s
# (inferences completed within the inference cycle / cycle length), mean latency in ms.
# Ready's latency is given only as "≈37-38 ms" (None here).
ARTIFACT_FIG6_CYCLES_S = [1, 2, 5, 10, 30]
ARTIFACT_FIG6 = {
    "throughput": {
        "ready": [26.1, 27.1, 25.9, 27.0, 26.4],
        "pipeswitch": [26.8, 27.1, 26.4, 26.6, 26.2],
        "mps": [3.5, 2.4, 3.1, 2.3, 3.0],
        "stop-and-start": [0.0, 0.0, 0.0, 11.4, 20.8],
    },
    "mean_latency": {
        "ready": [None] * 5,
        "pipeswitch": [37.8, 36.8, 37.8, 37.5, 37.9],
        "mps": [356.0, 444.0, 335.0, 447.0, 335.0],
        "stop-and-start": [5521.0, 5541.0, 5632.0, 88.0, 48.0],
    },
}
ARTIFACT_FIG6_READY_LATENCY_APPROX = 37.5  # "≈37-38 ms", PAPER.md §10 Figure 6 table

# ---------------------------------------------------------------------------------------------
# Loading


def _num(text):
    try:
        return float(text)
    except (TypeError, ValueError):
        return text


def _model_of(text):
    """`[resnet152]` -> `resnet152` (the grid value of workload.models)."""
    t = text.strip().strip("[]").strip()
    return t.split(",")[0].strip().strip("'\"")


def _hardware_of(text):
    """A profile name, or a grid value such as `../hardware/v100-pcie3-x16.yaml`."""
    base = os.path.basename(text.strip())
    return base[:-5] if base.endswith(".yaml") else base


def load_sweep(path):
    """Rows of a psw sweep.csv as dicts. Duplicate column names (the grid's `hardware` and
    `mechanism` and the summary's) resolve to the last one, the profile/mechanism name.
    Adds `model` (from workload.models) and numeric fields."""
    with open(path, newline="") as f:
        reader = csv.reader(f)
        header = next(reader)
        rows = []
        for values in reader:
            if not values:
                continue
            row = {}
            for key, value in zip(header, values):
                row[key] = value
            rows.append(row)
    out = []
    for row in rows:
        r = {k: _num(v) for k, v in row.items()}
        r["hardware"] = _hardware_of(row["hardware"])
        r["mechanism"] = row["mechanism"].strip()
        if "workload.models" in row:
            r["model"] = _model_of(row["workload.models"])
        elif "workload.model" in row:
            r["model"] = _model_of(row["workload.model"])
        else:
            r["model"] = "resnet152"
        if "workload.cycle_ms" in row:
            r["cycle_ms"] = float(row["workload.cycle_ms"])
        out.append(r)
    return out


def load_results(results_dir):
    """{figN: rows} for every figN/sweep.csv present."""
    data = {}
    for fig in ["fig5", "fig6", "fig7", "fig8", "fig9"]:
        path = os.path.join(results_dir, fig, "sweep.csv")
        if os.path.exists(path):
            data[fig] = load_sweep(path)
    return data


def index(rows, key=("hardware", "model", "mechanism")):
    return {tuple(r[k] for k in key): r for r in rows}


def fmt_ms(v):
    if v is None:
        return "-"
    if v >= 1000:
        return "%.2f s" % (v / 1000)
    if v >= 100:
        return "%.0f" % v
    if v >= 10:
        return "%.1f" % v
    return "%.2f" % v


# ---------------------------------------------------------------------------------------------
# Plotting


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"font.size": 9, "axes.titlesize": 10, "axes.spines.top": False,
                         "axes.spines.right": False})
    return plt


def label_bars(ax, bars_and_values):
    """Writes each bar's value vertically inside the bar, from its base; above it when the
    bar is too short to hold the text. Call after the axis limits are final."""
    fig = ax.figure
    fig.canvas.draw()
    to_axes = ax.transAxes.inverted()
    height_in = ax.get_window_extent().height / fig.dpi
    for b, y in bars_and_values:
        x = b.get_x() + b.get_width() / 2
        top = to_axes.transform(ax.transData.transform((x, y)))[1]
        text = fmt_ms(y)
        needed = (len(text) * 4.3 + 6) / 72.0 / height_in  # axis fraction the text needs
        if top > needed:
            ax.annotate(text, (x, 0), xycoords=("data", "axes fraction"), xytext=(0, 3),
                        textcoords="offset points", ha="center", va="bottom", rotation=90, fontsize=7,
                        color="white", fontweight="bold")
        else:
            ax.annotate(text, (x, y), xytext=(0, 2), textcoords="offset points", ha="center", va="bottom",
                        rotation=90, fontsize=7)


def bar_figure(fig_name, rows, out_path, log=False):
    plt = _plt()
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    mechs = FIGURE_MECHS[fig_name]
    idx = index(rows)
    hardware = [h for h in HARDWARE if any(r["hardware"] == h for r in rows)]
    models = [m for m in MODELS if any(r["model"] == m for r in rows)]
    artifact = ARTIFACT.get(fig_name, {})
    fig, axes = plt.subplots(1, len(hardware), figsize=(5.2 * len(hardware), 4.6), squeeze=False)
    width = 0.8 / len(mechs)
    for ax, hw in zip(axes[0], hardware):
        ymax = 0.0
        ymin = float("inf")
        labelled = []
        for j, mech in enumerate(mechs):
            xs, ys = [], []
            for i, model in enumerate(models):
                r = idx.get((hw, model, mech))
                if r is None:
                    continue
                xs.append(i + (j - (len(mechs) - 1) / 2) * width)
                ys.append(r["mean_ms"])
            bars = ax.bar(xs, ys, width * 0.95, color=COLORS.get(mech), hatch=HATCH.get(mech),
                          edgecolor="white" if mech not in HATCH else "#444444", linewidth=0.5,
                          label=MECH_LABEL[mech])
            labelled.extend(zip(bars, ys))
            if ys:
                ymax = max(ymax, max(ys))
                ymin = min(ymin, min(ys))
            if hw == "v100-pcie3-x16" and artifact:
                ax_x, ax_y = [], []
                for x, model in zip(xs, [m for m in models if idx.get((hw, m, mech))]):
                    v = artifact.get(model, {}).get(mech)
                    if v is not None:
                        ax_x.append(x)
                        ax_y.append(v)
                        ymax = max(ymax, v)
                ax.scatter(ax_x, ax_y, marker="_", s=260, linewidths=2.2, color="black", zorder=5)
        ax.set_xticks(range(len(models)))
        ax.set_xticklabels([MODEL_LABEL[m] for m in models])
        ax.set_title("%s: %s" % (fig_name.replace("fig", "Fig. "), HARDWARE_LABEL[hw]))
        ax.set_ylabel("latency (ms, %s scale)" % ("log" if log else "linear"))
        if log:
            ax.set_yscale("log")
            ax.set_ylim(max(ymin / 4.0, 0.5), ymax * 2.5)
        else:
            ax.set_ylim(0, ymax * 1.22)
        ax.grid(axis="y", alpha=0.3, which="major")
        label_bars(ax, labelled)
    handles = [Patch(facecolor=COLORS.get(m), hatch=HATCH.get(m), edgecolor="#444444" if m in HATCH else "white",
                     label=MECH_LABEL[m]) for m in mechs]
    if artifact:
        handles.append(Line2D([], [], color="black", marker="_", markersize=14, markeredgewidth=2.2,
                              linestyle="none",
                              label="artifact re-run, V100 (client latency, incl. ~38 ms client/Python/TCP)"))
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), frameon=False, fontsize=8.5,
               bbox_to_anchor=(0.5, -0.01))
    fig.suptitle(FIGURE_TITLE[fig_name] + " (mean of 10 requests; simulated latency = controller arrival to reply)",
                 fontsize=10.5)
    fig.tight_layout(rect=(0, 0.06, 1, 0.95))
    fig.savefig(out_path, dpi=150)
    plt.close(fig)


def fig6_figure(rows, out_path):
    plt = _plt()
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    mechs = FIGURE_MECHS["fig6"]
    hardware = [h for h in HARDWARE if any(r["hardware"] == h for r in rows)]
    cycles = sorted({r["cycle_ms"] for r in rows})
    idx = {(r["hardware"], r["cycle_ms"], r["mechanism"]): r for r in rows}
    bar_mechs = [m for m in mechs if m != "ready"]
    width = 0.8 / len(bar_mechs)
    fig, axes = plt.subplots(2, len(hardware), figsize=(5.2 * len(hardware), 8.2), squeeze=False)
    for col, hw in enumerate(hardware):
        ax_t, ax_l = axes[0][col], axes[1][col]
        xs_all = list(range(len(cycles)))
        # Ready: the bound, a dashed line across the cycles.
        ready = [idx.get((hw, c, "ready")) for c in cycles]
        if all(ready):
            ax_t.plot(xs_all, [r["throughput_rps"] for r in ready], "--", color="#444444", marker="o",
                      markersize=3, zorder=4, label="Ready model (upper bound)")
            ax_l.plot(xs_all, [r["mean_ms"] for r in ready], "--", color="#444444", marker="o",
                      markersize=3, zorder=4, label="Ready model (lower bound)")
        lat_min = float("inf")
        lat_max = 0.0
        for j, mech in enumerate(bar_mechs):
            off = (j - (len(bar_mechs) - 1) / 2) * width
            xs, thr, mean, lo, hi = [], [], [], [], []
            for i, c in enumerate(cycles):
                r = idx.get((hw, c, mech))
                if r is None:
                    continue
                xs.append(i + off)
                thr.append(r["throughput_rps"])
                mean.append(r["mean_ms"])
                mn = r.get("min_ms")
                mn = r["mean_ms"] if mn is None else mn
                lo.append(r["mean_ms"] - mn)
                hi.append(r["max_ms"] - r["mean_ms"])
                lat_min = min(lat_min, mn)
                lat_max = max(lat_max, r["max_ms"])
            ax_t.bar(xs, thr, width * 0.95, color=COLORS[mech], edgecolor="white", linewidth=0.5)
            ax_l.bar(xs, mean, width * 0.95, color=COLORS[mech], edgecolor="white", linewidth=0.5,
                     yerr=[lo, hi], capsize=2, error_kw={"elinewidth": 0.8, "ecolor": "black"})
            if hw == "v100-pcie3-x16":
                for key, ax in (("throughput", ax_t), ("mean_latency", ax_l)):
                    vals = ARTIFACT_FIG6[key].get(mech)
                    pts = [(i + off, vals[ARTIFACT_FIG6_CYCLES_S.index(int(c / 1000))])
                           for i, c in enumerate(cycles)
                           if int(c / 1000) in ARTIFACT_FIG6_CYCLES_S and vals
                           and vals[ARTIFACT_FIG6_CYCLES_S.index(int(c / 1000))] is not None]
                    if pts:
                        ax.scatter([p[0] for p in pts], [max(p[1], 1e-9) if key == "mean_latency" else p[1]
                                                         for p in pts],
                                   marker="_", s=120, linewidths=2.0, color="black", zorder=5)
        if hw == "v100-pcie3-x16":
            ready_art = ARTIFACT_FIG6["throughput"]["ready"]
            ax_t.plot(xs_all, [ready_art[ARTIFACT_FIG6_CYCLES_S.index(int(c / 1000))] for c in cycles], ":",
                      color="black", linewidth=1.0)
        labels = ["%g s" % (c / 1000) for c in cycles]
        for ax in (ax_t, ax_l):
            ax.set_xticks(xs_all)
            ax.set_xticklabels(labels)
            ax.set_xlabel("scheduling cycle length")
            ax.grid(axis="y", alpha=0.3)
        ax_t.set_ylabel("inference throughput (batches/s, batch 8)")
        ax_t.set_title("Fig. 6a throughput: %s" % HARDWARE_LABEL[hw])
        top = max(r["throughput_rps"] for r in rows if r["hardware"] == hw)
        if hw == "v100-pcie3-x16":
            top = max(top, 30)
        ax_t.set_ylim(0, top * 1.15)
        ax_l.set_yscale("log")
        ax_l.set_ylim(max(lat_min / 2, 0.5), lat_max * 3)
        ax_l.set_ylabel("inference latency (ms, log scale): mean, min-max bars")
        ax_l.set_title("Fig. 6b latency: %s" % HARDWARE_LABEL[hw])
    handles = [Line2D([], [], color="#444444", linestyle="--", marker="o", markersize=3,
                      label="Ready model (bound)")]
    handles += [Patch(facecolor=COLORS[m], label=MECH_LABEL[m]) for m in bar_mechs]
    handles.append(Line2D([], [], color="black", marker="_", markersize=12, markeredgewidth=2, linestyle="none",
                          label="artifact re-run, V100 (dotted: its Ready throughput)"))
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), frameon=False, fontsize=8.5,
               bbox_to_anchor=(0.5, -0.005))
    fig.suptitle(FIGURE_TITLE["fig6"] + "; ResNet-152 training batch 8; 10 rounds", fontsize=10.5)
    fig.text(0.5, 0.035, "Throughput, simulated and artifact alike = inferences completed inside an inference phase / "
             "(rounds x cycle); a simulated request counts in the phase it completes in (stop-and-start at 2 s: "
             "a switch ending in a later phase).", ha="center", fontsize=8, style="italic", color="#444444")
    fig.tight_layout(rect=(0, 0.05, 1, 0.97))
    fig.savefig(out_path, dpi=150)
    plt.close(fig)


def main(argv):
    if len(argv) != 2:
        print("usage: plot.py RESULTS_DIR", file=sys.stderr)
        return 2
    results = argv[1]
    data = load_results(results)
    if not data:
        print("plot.py: no figN/sweep.csv under %s" % results, file=sys.stderr)
        return 2
    for fig_name, rows in data.items():
        out = os.path.join(results, fig_name + ".png")
        if fig_name == "fig6":
            fig6_figure(rows, out)
        else:
            bar_figure(fig_name, rows, out, log=fig_name in ("fig5", "fig9"))
        print("written: %s" % out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
