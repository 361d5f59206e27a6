#!/usr/bin/env python3
"""Draws the paper's Figures 5-9 measured on the H200 through the server, beside the simulator's
prediction of the same runs and the authors' artifact on a V100, and writes the tables.

Usage: scripts/gpu_figures.py --out OUT_DIR [--sim SIM_DIR] [--resimulated DIR] [--replacing RAW_DIR]... RAW_DIR...

Each RAW_DIR is a gpu-serve.sh raw folder whose `figures` part ran (validation/figures-<mechanism>/,
one psw validate per mechanism: the measured and simulated summaries and validation.csv, whose
relative errors psw validate computed); a run split over several device calls gives one folder
per call (a mechanism or a Figure 6 case in two folders is an error; a later run given with
--replacing replaces the same cases of the other folders, a later --replacing an earlier one, named
in the README for Figure 6 and, with --resimulated, under each table). Writes
OUT_DIR/fig5.png, fig7.png, fig8.png, fig9.png (three series per model and mechanism: measured on
the H200, simulated for the H200, the artifact's V100), fig6.png and OUT_DIR/README.md with the
tables and the environment of the run.
Figure 6 (throughput and mean latency under scheduling cycles) comes from the raw folders'
validation/fig6-<mechanism>-<cycle_ms>/ (gpu-serve.sh part `fig6`: psw validate of a closed
loop, Note [Closed-loop cycles]) where a run has them: measured on the H200 and simulated for the
same runs, beside the artifact; without them, the simulated H200 sweep SIM_DIR/fig6/sweep.csv
(default results/sim) beside the artifact.
With --resimulated DIR (scripts/resimulate-figures.sh), a mechanism's rows come from
DIR/<mechanism>/validation.csv, a Figure 6 case's from DIR/fig6-<mechanism>-<cycle_ms>/, where
they exist: the same recorded measurement beside the simulation of a later checkout. Only draws
and tabulates: every number comes from the files.
"""
import argparse
import csv
import glob
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import plot  # noqa: E402  (the figures' mechanisms, labels, colours and the artifact's numbers)

BAR_FIGURES = ["fig5", "fig7", "fig8", "fig9"]
# The paper's mechanisms per figure, and in Figure 5 today's baseline beside them: the
# model resident next to training, the GPU time-sliced between the two processes.
FIGURE_MECHS = dict(plot.FIGURE_MECHS, fig5=plot.FIGURE_MECHS["fig5"] + ["time-sliced"])
MECH_LABEL = dict(plot.MECH_LABEL, **{"time-sliced": "Time-sliced (resident)"})
SERIES = [("measured", "measured on the H200", "#d62728"),
          ("simulated", "simulated for the H200", "#1f77b4"),
          ("artifact", "artifact, V100 (PAPER.md §10)", "#7f7f7f")]
TITLE = {
    "fig5": "Figure 5: latency of a request arriving while training runs",
    "fig7": "Figure 7: pipelined model transmission",
    "fig8": "Figure 8: unified memory management",
    "fig9": "Figure 9: active-standby worker switching",
}


def read_rows(path):
    """{(scope, measure): row} of a psw validate validation.csv."""
    with open(path, newline="") as f:
        return {(r["scope"], r["measure"]): r for r in csv.DictReader(f)}


def by_precedence(raws, replacing):
    """The folders in the order their cases are taken: the --replacing ones first, a later one before
    an earlier one, then the rest as given."""
    return list(reversed(replacing)) + [r for r in raws if r not in replacing]


def read_validation(raws, mechanism, resimulated=None, replacing=()):
    """The rows of validation/figures-<mechanism>/validation.csv, or None; the resimulated
    folder's <mechanism>/validation.csv instead where there is one; a --replacing folder's case
    before the others'."""
    if resimulated is not None:
        path = os.path.join(resimulated, mechanism, "validation.csv")
        if os.path.exists(path):
            return read_rows(path)
    paths = [p for p in (os.path.join(raw, "validation", f"figures-{mechanism}", "validation.csv")
                         for raw in by_precedence(raws, replacing)) if os.path.exists(p)]
    if paths and any(paths[0].startswith(os.path.join(r, "")) for r in replacing):
        return read_rows(paths[0])
    if len(paths) > 1:
        sys.exit(f"gpu_figures: {mechanism} was run in more than one folder: {', '.join(paths)}")
    return read_rows(paths[0]) if paths else None


def inputs_of(raws):
    """How the runs' requests carried their inputs, as their psw load summaries say (Note [Inputs in
    shared memory]; a summary without the key is of a run before it: raw inputs)."""
    kinds = set()
    for raw in raws:
        for path in glob.glob(os.path.join(raw, "validation", "*", "measured", "summary.json")):
            with open(path) as f:
                kinds.add(json.load(f).get("inputs", "raw"))
    words = {"raw": "raw inputs in the messages", "shared-memory": "inputs in shared memory, `psw load --shared-memory`"}
    return "; ".join(words.get(k, k) for k in sorted(kinds)) or "raw inputs in the messages"


def number(text):
    return float(text) if text not in ("", None) else None


def cell(value, digits=2):
    return "" if value is None else f"{value:.{digits}f}"


def collect(raws, resimulated=None, replacing=()):
    """{mechanism: {model: {"measured", "simulated", "error", "tolerance", "status", engine...}}}"""
    data = {}
    for mechanism in {m for fig in BAR_FIGURES for m in FIGURE_MECHS[fig]}:
        rows = read_validation(raws, mechanism, resimulated, replacing)
        if rows is None:
            continue
        per_model = {}
        for model in plot.MODELS:
            row = rows.get((model, "mean_ms"))
            if row is None:
                continue
            engine = rows.get((model, "engine_mean_ms"), {})
            per_model[model] = {
                "measured": number(row["measured"]), "simulated": number(row["simulated"]),
                "error": number(row["relative_error"]), "tolerance": number(row["tolerance"]),
                "status": row["status"],
                "engine_measured": number(engine.get("measured")),
                "engine_simulated": number(engine.get("simulated")),
                "engine_error": number(engine.get("relative_error")),
            }
        data[mechanism] = per_model
    return data


def bar_figure(fig, data, out_path):
    plt = plot._plt()
    mechanisms = FIGURE_MECHS[fig]
    figure, axes = plt.subplots(1, len(plot.MODELS), figsize=(5 * len(plot.MODELS), 4.2), squeeze=False)
    width = 0.8 / len(SERIES)
    for ax, model in zip(axes[0], plot.MODELS):
        for k, (key, label, color) in enumerate(SERIES):
            xs, ys = [], []
            for i, mechanism in enumerate(mechanisms):
                if key == "artifact":
                    value = plot.ARTIFACT.get(fig, {}).get(model, {}).get(mechanism)
                else:
                    value = data.get(mechanism, {}).get(model, {}).get(key)
                if value is not None:
                    xs.append(i + (k - 1) * width)
                    ys.append(value)
            ax.bar(xs, ys, width, label=label, color=color)
        ax.set_xticks(range(len(mechanisms)))
        ax.set_xticklabels([MECH_LABEL[m] for m in mechanisms], rotation=30, ha="right", fontsize=8)
        ax.set_yscale("log")
        ax.set_title(plot.MODEL_LABEL[model])
        ax.set_ylabel("mean latency (ms, log)")
        ax.grid(axis="y", alpha=0.3)
    axes[0][0].legend(fontsize=8)
    figure.suptitle(TITLE[fig] + " (H200 measured and simulated; V100 artifact)")
    figure.tight_layout()
    figure.savefig(out_path, dpi=120)
    plt.close(figure)


def collect_fig6(raws, resimulated=None, replacing=(), replaced=None):
    """{mechanism: {cycle_s: {"throughput": (measured, simulated, error), "mean_ms": (...)}}} from
    validation/fig6-<mechanism>-<cycle_ms>/validation.csv (or the resimulated folder's
    fig6-<mechanism>-<cycle_ms>/validation.csv where it exists); a case in two folders is an error
    unless one of them is in `replacing`, whose case is taken (and noted in `replaced`: {case: (taken, dropped)})."""
    data, seen = {}, {}
    # The replacing folders first (the last given first), so that their cases are the ones kept.
    raws = by_precedence(raws, replacing)
    for raw in raws:
        folder = os.path.join(raw, "validation")
        if not os.path.isdir(folder):
            continue
        for name in sorted(os.listdir(folder)):
            if not name.startswith("fig6-"):
                continue
            mechanism, _, cycle_ms = name[len("fig6-"):].rpartition("-")
            path = os.path.join(folder, name, "validation.csv")
            if not cycle_ms.isdigit() or not os.path.exists(path):
                continue
            if resimulated is not None and os.path.exists(os.path.join(resimulated, name, "validation.csv")):
                path = os.path.join(resimulated, name, "validation.csv")
            if name in seen:
                if seen[name] in replacing:  # taken before this folder: it replaces it
                    if replaced is not None:
                        replaced[name] = (seen[name], raw)
                    continue
                sys.exit(f"gpu_figures: {name} was run in more than one folder: {seen[name]}, {raw}")
            seen[name] = raw
            rows = read_rows(path)
            case = {}
            for key, measure in (("throughput", "throughput_rps"), ("mean_ms", "mean_ms")):
                row = rows.get(("all", measure), {})
                case[key] = (number(row.get("measured")), number(row.get("simulated")), number(row.get("relative_error")))
            data.setdefault(mechanism, {})[int(cycle_ms) / 1000] = case
    return data


def fig6_measured_figure(data, out_path):
    """Measured and simulated throughput and mean latency per cycle, beside the artifact's V100."""
    plt = plot._plt()
    figure, (ax_t, ax_l) = plt.subplots(1, 2, figsize=(11, 4.2))
    for mechanism in plot.FIGURE_MECHS["fig6"]:
        cases = data.get(mechanism, {})
        color = plot.COLORS[mechanism]
        label = plot.MECH_LABEL[mechanism]
        for ax, key in ((ax_t, "throughput"), (ax_l, "mean_ms")):
            for side, style, marker, what in ((0, "-", "o", "measured H200"), (1, ":", "s", "simulated H200")):
                points = sorted((c, v[key][side]) for c, v in cases.items() if v[key][side] is not None)
                if points:
                    ax.plot([p[0] for p in points], [p[1] for p in points], linestyle=style, marker=marker,
                            color=color, label=f"{label}, {what}")
        artifact = plot.ARTIFACT_FIG6["throughput"][mechanism]
        ax_t.plot(plot.ARTIFACT_FIG6_CYCLES_S, artifact, linestyle="--", marker="x", color=color, alpha=0.5,
                  label=f"{label}, artifact V100")
        latency = [(c, v) for c, v in zip(plot.ARTIFACT_FIG6_CYCLES_S, plot.ARTIFACT_FIG6["mean_latency"][mechanism])
                   if v is not None]
        if latency:
            ax_l.plot([p[0] for p in latency], [p[1] for p in latency], linestyle="--", marker="x", color=color,
                      alpha=0.5, label=f"{label}, artifact V100")
    for ax, ylabel in ((ax_t, "inference throughput (batches/s)"), (ax_l, "mean latency (ms)")):
        ax.set_xscale("log")
        ax.set_xlabel("scheduling cycle (s)")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
    ax_l.set_yscale("log")
    ax_t.legend(fontsize=6, ncol=2)
    figure.suptitle("Figure 6: ResNet-152 under scheduling cycles (H200 measured and simulated; V100 artifact)")
    figure.tight_layout()
    figure.savefig(out_path, dpi=120)
    plt.close(figure)


def fig6_table(data):
    lines = ["| mechanism | cycle (s) | throughput measured (batches/s) | simulated | error | mean latency measured (ms) | simulated | error |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for mechanism in plot.FIGURE_MECHS["fig6"]:
        for cycle, case in sorted(data.get(mechanism, {}).items()):
            cells = []
            for key in ("throughput", "mean_ms"):
                measured, simulated, error = case[key]
                cells += [cell(measured), cell(simulated), "" if error is None else f"{100 * error:+.1f}%"]
            lines.append(f"| {mechanism} | {cycle:g} | " + " | ".join(cells) + " |")
    return lines


def fig6_figure(sim_dir, out_path):
    """Simulated H200 throughput under scheduling cycles beside the artifact's V100 numbers."""
    path = os.path.join(sim_dir, "fig6", "sweep.csv")
    if not os.path.exists(path):
        return None
    rows = [r for r in plot.load_sweep(path) if r["hardware"] == "h200-pcie5"]
    plt = plot._plt()
    figure, ax = plt.subplots(figsize=(7, 4.2))
    for mechanism in plot.FIGURE_MECHS["fig6"]:
        points = sorted((r["cycle_ms"] / 1000, r["throughput_rps"]) for r in rows
                        if r["mechanism"] == mechanism and isinstance(r.get("throughput_rps"), float))
        if points:
            ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", color=plot.COLORS[mechanism],
                    label=f"{plot.MECH_LABEL[mechanism]}, simulated H200")
        ax.plot(plot.ARTIFACT_FIG6_CYCLES_S, plot.ARTIFACT_FIG6["throughput"][mechanism], linestyle="--",
                marker="x", color=plot.COLORS[mechanism], label=f"{plot.MECH_LABEL[mechanism]}, artifact V100")
    ax.set_xscale("log")
    ax.set_xlabel("scheduling cycle (s)")
    ax.set_ylabel("inference throughput (batches/s)")
    ax.set_title("Figure 6: ResNet-152 under scheduling cycles (not measured on the H200)")
    ax.legend(fontsize=7, ncol=2)
    ax.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(out_path, dpi=120)
    plt.close(figure)
    return rows


def main(argv):
    parser = argparse.ArgumentParser(description="The paper's figures measured on the GPU (see the module's doc).")
    parser.add_argument("--out", required=True, help="where the figures and README.md go")
    parser.add_argument("--sim", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "results", "sim"),
                        help="psw sweep results with fig6/sweep.csv (default results/sim)")
    parser.add_argument("--resimulated", help="scripts/resimulate-figures.sh's folder: the simulated side from there")
    parser.add_argument("--replacing", action="append", default=[], metavar="RAW_DIR",
                        help="a later run of some Figure 6 cases: they replace the same cases of the other RAW_DIRs")
    parser.add_argument("raws", nargs="+", metavar="RAW_DIR")
    args = parser.parse_args(argv[1:])
    raws, out, sim_dir = args.raws + args.replacing, args.out, args.sim
    if args.resimulated is not None and not os.path.isdir(args.resimulated):
        print(f"gpu_figures: --resimulated {args.resimulated}: no such folder", file=sys.stderr)
        return 2
    data = collect(raws, args.resimulated, args.replacing)
    if not data:
        print(f"gpu_figures: no validation/figures-*/validation.csv under {', '.join(raws)}", file=sys.stderr)
        return 2
    os.makedirs(out, exist_ok=True)
    lines = ["# The paper's figures on the H200", ""]
    for raw in raws:
        env = os.path.join(raw, "environment.md")
        if os.path.exists(env):
            lines += [f"Environment of `{os.path.basename(os.path.normpath(raw))}`:", ""]
            lines += open(env).read().strip().splitlines() + [""]
    lines += [
        "Produced by `scripts/reproduce-gpu.sh` (`scripts/gpu-serve.sh` part `figures`, then",
        "`scripts/gpu_figures.py`). Per mechanism, one `psw serve` of `configs/serve/h200.yaml` (three models",
        "at batch 8, cache off, ResNet-152 training at batch 8) and one `psw validate` of",
        "`configs/experiments/h200-figures.yaml`: a request every 500 ms, the models in turn, each a cold",
        "switch while training runs (stop-and-start and two-processes: three requests 12 s apart). The",
        "simulator plays the same workload with the H200 profiles and the request path calibrated on the GPU",
        "(`gpu-serve.sh` part `calibrate-load`: `psw profile-serving --from-load` of a 40 s Poisson run through",
        "`psw load`'s client; part `calibrate`'s `psw profile-serving` where a call has no such fit).",
        f"Latency is the client's (gRPC over the Unix socket, {inputs_of(raws)}).",
        "The artifact's numbers are the authors' V100 re-run (client-measured, PAPER.md §10), not this",
        "hardware. Error = (simulated - measured) / measured, as `psw validate` writes it; the tolerance is",
        "`psw validate`'s (5%, 15% for MPS, time-sliced and unified memory; `sim/include/psw/sim/validation.hpp`).",
        "",
    ]
    if args.resimulated is not None:
        lines += [
            f"The simulated side was computed again, after the runs, by `scripts/resimulate-figures.sh`",
            f"(`psw validate --measured`: the recorded measurements beside this simulation; the runs' own",
            f"simulated values stay in their raw folders; the script's header says which request path and",
            f"profiles each case was simulated with). Where it ran:",
            "",
        ]
        env = os.path.join(args.resimulated, "environment.md")
        lines += (open(env).read().strip().splitlines() if os.path.exists(env) else ["(no environment.md)"]) + [""]
    for fig in BAR_FIGURES:
        path = os.path.join(out, f"{fig}.png")
        try:
            bar_figure(fig, data, path)
            drawn = f"![{fig}]({fig}.png)"
        except ImportError:
            drawn = "(no plot: matplotlib missing)"
        lines += [f"## {TITLE[fig]}", "", drawn, "",
                  "| model | mechanism | measured (ms) | simulated (ms) | error | tolerance | engine measured (ms) | engine simulated (ms) | engine error | V100 artifact (ms) |",
                  "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for model in plot.MODELS:
            for mechanism in FIGURE_MECHS[fig]:
                m = data.get(mechanism, {}).get(model)
                artifact = plot.ARTIFACT.get(fig, {}).get(model, {}).get(mechanism)
                if m is None:
                    lines.append(f"| {plot.MODEL_LABEL[model]} | {mechanism} | not run | | | | | | | {cell(artifact, 1)} |")
                    continue
                error = "" if m["error"] is None else f"{100 * m['error']:+.1f}%"
                engine_error = "" if m["engine_error"] is None else f"{100 * m['engine_error']:+.1f}%"
                tolerance = "" if m["tolerance"] is None else f"{100 * m['tolerance']:.0f}% ({m['status']})"
                lines.append(f"| {plot.MODEL_LABEL[model]} | {mechanism} | {cell(m['measured'])} | {cell(m['simulated'])} | "
                             f"{error} | {tolerance} | {cell(m['engine_measured'])} | {cell(m['engine_simulated'])} | "
                             f"{engine_error} | {cell(artifact, 1)} |")
        lines.append("")
        # Which run each mechanism was measured in (scripts/resimulate-figures.sh records it).
        for mechanism in FIGURE_MECHS[fig]:
            source = os.path.join(args.resimulated or "", mechanism, "measured-from.txt")
            if args.resimulated is not None and os.path.exists(source):
                lines.append(f"- `{mechanism}` measured in `{open(source).read().strip()}`")
        lines.append("")
    lines += ["## Figure 6: ResNet-152 under scheduling cycles", ""]
    replaced = {}
    fig6 = collect_fig6(raws, args.resimulated, args.replacing, replaced)
    if fig6:
        try:
            fig6_measured_figure(fig6, os.path.join(out, "fig6.png"))
            lines += ["![fig6](fig6.png)", ""]
        except ImportError:
            lines += ["(no plot: matplotlib missing)", ""]
        lines += ["Per mechanism one `psw serve` of `configs/serve/h200.yaml` and per cycle one `psw validate` of",
                  "`configs/experiments/h200-fig6.yaml` (`gpu-serve.sh` part `fig6`): ResNet-152 training for a cycle,",
                  "then its requests back to back for a cycle, a closed loop (Note [Closed-loop cycles]); throughput",
                  "is the answers within their inference phase per second of inference phase, as the paper counts it.",
                  ""] + fig6_table(fig6) + [""]
        for name, (taken, dropped) in sorted(replaced.items()):
            lines.append(f"- `{name}`: from `{os.path.basename(os.path.normpath(taken))}`, a later run of the case than "
                         f"`{os.path.basename(os.path.normpath(dropped))}`'s (`--replacing`).")
        if replaced:
            lines.append("")
    else:
        try:
            rows = fig6_figure(sim_dir, os.path.join(out, "fig6.png"))
        except ImportError:
            rows = None
        if rows is None:
            lines += ["(not drawn: no simulated sweep or no matplotlib)", ""]
        else:
            lines += ["![fig6](fig6.png)", "",
                      "Not measured in these runs (no `validation/fig6-*` folder: `gpu-serve.sh` part `fig6` did",
                      "not run). The simulated H200 curve (`results/sim/fig6`) is beside the artifact's V100 numbers.",
                      ""]
    with open(os.path.join(out, "README.md"), "w") as f:
        f.write("\n".join(lines))
    print(f"gpu_figures: wrote {out}/README.md and the figures")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
