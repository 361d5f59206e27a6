"""The table of scripts/gpu-any-model.sh: one row per model from `psw run --graph --format json`
(Note [Graph-pipelined switch]), and where the model was also served alone, the client's latency
(`psw client --shared-memory --format json`, NAME-served.json), with the environment, as Markdown
on stdout; the rows as JSON: per model psw run's JSON with a summary beside it under flat names
(model, params_bytes, layers, groups, switch_ms, bound_ms, ratio, outputs_equal and
outputs_checked, pytorch_pinned_graph_ms: a PyTorch user's pinned copy then graph replay,
kernels_unresolved: kernels whose argument layout could not be read, which wait for every group).

    any_model_report.py RAW_DIR ENVIRONMENT JSON_OUT
ENVIRONMENT: scripts/environment.sh (run here), or a file of its output (Markdown, `.md`) from the
host the raw runs came from.
"""
import glob
import json
import os
import subprocess
import sys


def main(raw, environment, json_out):
    rows, failures = [], []
    for path in sorted(glob.glob(os.path.join(raw, "*.json"))):
        if path.endswith("-graph.json") or path.endswith("-served.json"):
            continue
        name = os.path.basename(path)[:-5]
        try:
            with open(path) as f:
                rows.append((name, json.load(f)))
        except (OSError, ValueError):
            with open(os.path.join(raw, name + ".err")) as f:
                failures.append((name, (f.read().strip().splitlines() or ["no output"])[-1]))
    export_err = os.path.join(raw, "export.err")
    if os.path.exists(export_err) and os.path.getsize(export_err) > 0:
        with open(export_err) as f:
            failures += [("export", line) for line in f.read().splitlines() if line.startswith("export of")]
    for name, d in rows:
        d["file"], d["model"] = d["model"], name
        d |= {"params_bytes": d["param_bytes"], "layers": d["graph"]["layers"], "groups": d["plan"]["groups"],
              "switch_ms": d["latency_ms"]["median"], "ratio": d["over_bound"],
              "pytorch_pinned_graph_ms": d["copy_then_replay_ms"]["median"],
              "kernels_unresolved": d["graph"]["kernels_unread"]}
    if environment.endswith(".md"):
        with open(environment) as f:
            env = f.read()
    else:
        env = subprocess.run(["bash", environment], capture_output=True, text=True).stdout
    print("# Any model: user models switched through their captured graphs\n")
    print("Written by `scripts/gpu-any-model.sh`; do not edit by hand. Each model is exported by its own library "
          "(`scripts/export_models.py`, random weights) and run with `psw run --model FILE.pt --graph`: its forward "
          "is captured with the parameters in the device region, the graph is read back (kernel arguments, "
          "`extra` buffers, memcpy nodes), the layers and their measured times come from the analysis, the "
          "planner groups them, and the switch replays the capture with one copy chain and the edges the "
          "rewrite adds. `cold`: the switch, launch to done (wall); `bound`: the pipeline bound of the measured "
          "profile and the hardware profile's link; `copy+replay`: a PyTorch user's cold start, the whole pinned "
          "copy and then the resident graph; `equal`: cold switches after the region was poisoned whose output "
          "equals the resident replay's bit for bit. Medians.\n")
    print(env)
    print("| model | MB | nodes | kernels (extra, unread) | params read | layers | groups | copies | cold ms | "
          "bound ms | cold / bound | resident ms | copy ms | copy+replay ms | speed-up | equal |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name, d in rows:
        g, p = d["graph"], d["plan"]
        print(f"| {name} | {d['param_bytes'] / 1e6:.1f} | {g['nodes']} | {g['kernels']} ({g['kernels_from_extra']}, "
              f"{g['kernels_unread']}) | {g['parameters_used']} of {g['parameters']} | {g['layers']} | {p['groups']} | "
              f"{p['copy_ranges']} | {d['latency_ms']['median']:.3f} | {d['bound_ms']:.3f} | {d['over_bound']:.3f} | "
              f"{d['resident_ms']['median']:.3f} | {d['copy_only_ms']['median']:.3f} | "
              f"{d['copy_then_replay_ms']['median']:.3f} | {d['speedup_over_copy_then_replay']:.2f} | "
              f"{d['outputs_equal']}/{d['outputs_checked']} |")
    served = []
    for name, d in rows:
        path = os.path.join(raw, name + "-served.json")
        if os.path.exists(path):
            with open(path) as f:
                served.append((name, d, json.load(f)))
        else:
            err = os.path.join(raw, name + "-served.err")
            if os.path.exists(err) and os.path.getsize(err) > 0:
                with open(err) as f:
                    failures.append((name + " served", f.read().strip().splitlines()[-1]))
    if served:
        print("\n## Served\n")
        print("Each model alone behind `psw serve --backend cuda` (one worker, `cache: off`: every request a cold "
              "switch through the captured graph the worker captured, timed and planned at its start); the client's "
              "latency per request with its input in shared memory registered once (`psw client --shared-memory`), "
              "against `psw run --graph`'s cold switch above. Medians (p99).\n")
        print("| model | requests | client ms | p99 ms | psw run cold ms | client / psw run |")
        print("|---|---|---|---|---|---|")
        for name, d, v in served:
            lat = v["latency_ms"]
            print(f"| {name} | {lat['count']} | {lat['median']:.3f} | {lat['p99']:.3f} | "
                  f"{d['latency_ms']['median']:.3f} | {lat['median'] / d['latency_ms']['median']:.2f} |")
            d["served_latency_ms"] = lat
    if failures:
        print("\nNot measured:\n")
        for name, line in failures:
            print(f"- {name}: {line}")
    with open(json_out, "w") as f:
        json.dump({"environment": env, "models": dict(rows), "failures": dict(failures)}, f, indent=2)


if __name__ == "__main__":
    main(*sys.argv[1:4])
