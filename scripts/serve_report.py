#!/usr/bin/env python3
"""Tables of the runtime's measurements (scripts/gpu-serve.sh): prints Markdown.

    serve_report.py RAW_DIR      (RAW_DIR/environment.md: the environment the run had)
"""
import csv
import glob
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from psw_json import config_json  # noqa: E402
from share_timeline import summary as share_monitor_summary  # noqa: E402


def load(path):
    with open(path) as f:
        return json.load(f)


def run_median(raw, model, suffix=""):
    """`psw run --graph`'s median switch of `model` in run-MODEL{suffix}.json; NaN where not run."""
    path = os.path.join(raw, f"run-{model}{suffix}.json")
    return load(path)["latency_ms"]["median"] if os.path.exists(path) else float("nan")


def processes(path):
    rows = []
    if os.path.exists(path):
        for line in open(path):
            parts = line.split()
            if len(parts) >= 2 and parts[1].isdigit():
                rows.append((int(parts[0]), int(parts[1]), parts[2] if len(parts) > 2 else "psw serve"))
    return rows


def device_memory(path):
    used = {}
    if os.path.exists(path):
        for line in open(path):
            pid, mem = [x.strip() for x in line.split(",")[:2]]
            used[int(pid)] = mem
    return used


def print_yaml(path):
    """A YAML file the run wrote (a serving profile), fenced; nothing when it is missing."""
    if os.path.exists(path):
        print("```yaml")
        with open(path) as f:
            print(f.read().rstrip())
        print("```\n")


def print_processes(raw, processes_file, memory_file, with_rss):
    """The server's processes (server_processes in gpu-serve.sh) with their device memory."""
    memory = device_memory(os.path.join(raw, memory_file))
    print("| process | pid |" + (" host RSS (GiB) |" if with_rss else "") + " device memory |")
    print("|---|---:|" + ("---:|" if with_rss else "") + "---:|")
    for pid, rss_kib, role in processes(os.path.join(raw, processes_file)):
        rss = f" {rss_kib / 2**20:.1f} |" if with_rss else ""
        print(f"| {role} | {pid} |{rss} {memory.get(pid, '-')} |")
    print()


def print_mechanisms_vs_sim(path):
    """The table `psw compare-serve` wrote (xval/compare.hpp computes every number)."""
    def ms(v):
        return f"{float(v):.3f}" if v else "-"
    print("### Beside the simulator\n")
    print("The simulator plays the same case (`configs/experiments/h200-serve.yaml`: the H200's measured link and")
    print("per-layer profiles, ResNet-152 training, one cold request at a time). It predicts the switch and the")
    print("model's run on the GPU from the training's layer boundary on: not gRPC, the input and output copies,")
    print("nor the server's dispatch and preemption as its metrics above measure them.\n")
    print("| mechanism | model | measured median (ms) | measured p99 (ms) | predicted p50 (ms) | predicted p99 (ms) | error of p50 |")
    print("|---|---|---:|---:|---:|---:|---:|")
    with open(path) as f:
        for r in csv.DictReader(f):
            error = f"{100 * float(r['p50_relative_error']):+.1f}%" if r["p50_relative_error"] else r["status"]
            print(f"| {r['mechanism']} | {r['model']} | {ms(r['measured_median_ms'])} | {ms(r['measured_p99_ms'])} | "
                  f"{ms(r['predicted_p50_ms'])} | {ms(r['predicted_p99_ms'])} | {error} |")
    print()


def print_decoders_served(raw):
    print("## Decoders served (configs/serve/h200-llm.yaml)\n")
    print("llama-1b and llama-8b (configs/zoo/) in bf16 served with PipeSwitch while ResNet-152 trains (batch 8,")
    print("224 x 224); ResNet-152 is served too but not requested. A request is a 512-token prompt (batch 1),")
    print("answered with the logits of its last position (Note [Decoder in the pipeline]): its latency is the")
    print("time to first token of a cold decoder switched in from pinned host memory, training preempted.")
    print("The request path was measured first on this server (`psw profile-serving --model llama-1b --model")
    print("llama-8b`, 10 cold requests each); then `psw validate` of `configs/experiments/h200-validate-llm.yaml`")
    print("(the decoders in turn, one request a second for 40 s) on the same server, simulated with that")
    print("serving profile and the decoders' measured bf16 profiles (configs/models/h200/bf16/): its table is")
    print("`h200-validate-llm` below.\n")
    print_yaml(os.path.join(raw, "serving-llm.yaml"))
    if os.path.exists(os.path.join(raw, "processes-llm.txt")):
        print("Each process at start: host memory (RSS) and device memory (nvidia-smi; a worker's count is about")
        print("the size of the daemon's regions it maps, which nvidia-smi appears to count in the worker too).")
        print("RSS counts the shared segments a process maps (the packed parameters in pinned host memory are")
        print("one, mapped by every process), so the rows do not add up to the host memory used.\n")
        print_processes(raw, "processes-llm.txt", "device-memory-llm.csv", with_rss=True)


def print_protocol_ways(folder):
    """gpu-serve.sh part `protocol` (Note [Client connections]): per model, the protocol part's
    median under each way of sending, psw profile-serving's profiles and psw load's summaries."""
    if not os.path.isdir(folder):
        return
    columns = []  # (title, {model: median ms})
    for path in sorted(glob.glob(os.path.join(folder, "profile-serving-*.yaml"))):
        profile = config_json("serving", path)
        medians = {entry["model"]: entry["protocol_ns"] / 1e6 for entry in profile.get("request_path", [])}
        # gpu-serve.sh names each file after its way: profile-serving-<connections>-connections-<gap>-ms.
        connections, _, gap, _ = os.path.basename(path)[len("profile-serving-"):-len(".yaml")].split("-")
        columns.append((f"profile-serving, {connections} conn., {gap} ms apart", medians))
    for path in sorted(glob.glob(os.path.join(folder, "load-*", "summary.json"))):
        summary = load(path)
        medians = {model: entry["protocol_latency"]["p50_ms"]
                   for model, entry in summary["models"].items() if "protocol_latency" in entry}
        columns.append((f"load, {summary['senders']} senders, {summary['connections']} conn.", medians))
    if not columns:
        return
    models = sorted({model for _, medians in columns for model in medians})
    print("## The protocol part by way of sending (Note [Client connections])\n")
    print("One server of `configs/serve/h200.yaml` (training in the background); per model the median of the")
    print("client's time less the server's time (Note [Request path]), in ms, as psw profile-serving")
    print("measures it (one thread, connections in turn) and as psw load pays it (a request every 500 ms")
    print("from a pool of sender threads; its send's lateness, ~0.2 ms, included since Note [Latency parts]).\n")
    print("| way | " + " | ".join(models) + " |")
    print("|---|" + "---:|" * len(models))
    for title, medians in columns:
        print(f"| {title} | " + " | ".join(f"{medians[m]:.3f}" if m in medians else "-" for m in models) + " |")
    print()
    splits = sorted(glob.glob(os.path.join(folder, "split-*.json")))
    if splits:
        print("Where the protocol part goes (Note [Protocol split]: the client's and the gRPC front end's stamps on the")
        print("host's steady clock; medians in ms of psw profile-serving's requests, inputs in the messages):\n")
        print("| way | model | build | to server | front end | to client |")
        print("|---|---|---:|---:|---:|---:|")
        for path in splits:
            connections, _, gap, _ = os.path.basename(path)[len("split-"):-len(".json")].split("-")
            for model, x in sorted(load(path).items()):
                print(f"| {connections} conn., {gap} ms apart | {model} | {x['build_ms']:.3f} | {x['to_server_ms']:.3f} | "
                      f"{x['front_end_ms']:.3f} | {x['to_client_ms']:.3f} |")
        print()


def print_worker_starts(raw):
    """Per case, the worker starts during its workload (Note [Worker start]), as psw load's
    summary has them (`worker_starts`: counted and split by phase by the server)."""
    rows = []
    for path in sorted(glob.glob(os.path.join(raw, "validation", "*", "measured", "summary.json"))):
        starts = load(path).get("worker_starts")
        if starts:
            rows.append((os.path.basename(os.path.dirname(os.path.dirname(path))), starts))
    if not rows:
        return
    names = list(rows[0][1]["mean_ms"])
    print("## Worker starts (Note [Worker start])\n")
    print("The worker processes started during each case's workload, as the server split their starts")
    print("(from the spawn to the Ready message): their count and mean per phase (ms). Under stop-and-start")
    print("and two processes a task waits for one of these.\n")
    print("| case | starts | total mean (ms) | " + " | ".join(names) + " |")
    print("|---|---:|---:|" + "---:|" * len(names))
    for case, starts in rows:
        print(f"| {case} | {starts['count']} | {starts['total_mean_ms']:.1f} | " +
              " | ".join(f"{starts['mean_ms'].get(n, float('nan')):.1f}" for n in names) + " |")
    print()


def print_eager_switches(raw):
    """Per case, the host's time in the server's eager switches (Note [Eager switches measured])."""
    rows = []
    for path in sorted(glob.glob(os.path.join(raw, "validation", "*", "measured", "summary.json"))):
        eager = load(path).get("eager_switches")
        if not eager:
            continue
        case = os.path.basename(os.path.dirname(os.path.dirname(path)))
        engine = {}
        validation = os.path.join(os.path.dirname(os.path.dirname(path)), "validation.json")
        if os.path.exists(validation):
            for r in load(validation)["rows"]:
                if r["measure"] == "engine_mean_ms":
                    engine[r["scope"]] = r["measured"]
        for model, e in sorted(eager.items()):
            rows.append((case, model, e, engine.get(model)))
    if not rows:
        return
    print("## The host's time in eager switches (Note [Host time of an eager switch])\n")
    print("Where the server cannot replay a switch from its graph (per-group memory, per-tensor")
    print("allocations, pageable copies), the worker times its host calls: prepare (memory made ready,")
    print("copies enqueued) and the forward's calls; means over the case's switches, in ms, beside the")
    print("engine's measured mean (the device's input on it to the forward's end).\n")
    print("| case | model | switches | host prepare | host forward | host total | engine mean |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for case, model, e, engine in rows:
        total = e["prepare_mean_ms"] + e["forward_mean_ms"]
        cell = "-" if engine is None else f"{engine:.3f}"
        print(f"| {case} | {model} | {e['count']} | {e['prepare_mean_ms']:.3f} | {e['forward_mean_ms']:.3f} | "
              f"{total:.3f} | {cell} |")
    print()


def print_engine_alone(raw):
    """Part `engine`: psw run of each model by itself, per mechanism, as its JSON says."""
    paths = sorted(glob.glob(os.path.join(raw, "engine", "*.json")))
    if not paths:
        return
    print("## The engine alone, per mechanism (part `engine`)\n")
    print("`psw run` of each model in one process, no server: the switch's median, its startup, the")
    print("resident forward eagerly and as a graph, and the prediction from the model and hardware")
    print("profiles the run planned with. `-graph` replays the switch as one captured graph; the other")
    print("rows run eagerly, as the server runs its ablations.\n")
    print("Host prepare and host forward: the eager switch's host calls (Note [Host time of an eager")
    print("switch]); '-' for a graph replay or a run made before they were timed.\n")
    print("| model | mechanism | switch median (ms) | p99 (ms) | startup (ms) | host prepare (ms) | host forward (ms) | ready eager (ms) | ready graph (ms) | predicted (ms) | switch / predicted |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for path in paths:
        d = load(path)
        mode = d["mode"] + ("-graph" if d["graph"] else "")
        switch = d["latency_ms"]["median"]
        host = lambda key: f"{d[key]['median']:.3f}" if key in d else "-"
        print(f"| {d['model']} | {mode} | {switch:.3f} | {d['latency_ms']['p99']:.3f} | {d['startup_ms']['median']:.3f} | "
              f"{host('host_prepare_ms')} | {host('host_forward_ms')} | "
              f"{d['ready_ms']['median']:.3f} | {d['ready_graph_ms']['median']:.3f} | {d['predicted_ms']:.3f} | "
              f"{switch / d['predicted_ms']:.2f} |")
    print()


def print_drift(raw):
    """Part `drift`: psw bench-serve's training windows, pair by pair, as their JSON says."""
    paths = glob.glob(os.path.join(raw, "drift", "pair-*.json"))
    if not paths:
        return
    paths.sort(key=lambda p: int(os.path.basename(p)[len("pair-"):-len(".json")]))
    starts = [float(open(p[:-len(".json")] + ".start").read()) for p in paths]
    print("## The training job's rate over minutes (part `drift`)\n")
    print("One server; `psw bench-serve` runs in a row, each 10 s of the job alone, then 10 s beside")
    print("cold requests (inputs in shared memory): the job's steps per second in each window, the time")
    print("the requests held it (Note [Training held]) and its rate while not held over the rate alone")
    print("(the running share, 1 where requests cost the job only the time they hold it). The GPU's")
    print("clocks, power and temperature every second beside them: `drift/gpu.csv`, drawn by")
    print("`scripts/drift_plot.py`.\n")
    print("| pair | start (s) | alone (steps/s) | beside requests (steps/s) | requests | held (s) | running share |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for i, (path, start) in enumerate(zip(paths, starts), 1):
        d = load(path)
        rates, held = d["training_steps_per_s"], d.get("training_with_requests", {})
        print(f"| {i} | {start - starts[0]:.0f} | {rates['alone']:.2f} | {rates['with_requests']:.2f} | "
              f"{rates['requests']} | {held.get('held_s', float('nan')):.2f} | {held.get('running_share', float('nan')):.3f} |")
    print()


def rate_spread(bench):
    """The job's rate in bench-serve's slices, lowest to highest per kind; "" without slices."""
    slices = bench.get("training_rate_slices")
    if not slices:
        return ""
    words = []
    for kind, name in ((False, "alone"), (True, "under requests")):
        rates = [x["steps"] / x["seconds"] for x in slices if x["with_requests"] == kind]
        if rates:
            words.append(f"{name} {min(rates):.2f}-{max(rates):.2f}")
    return (f" In {bench['spec']['rate_slice_s']:g} s slices the rate ran {', '.join(words)} steps/s "
            "(how much it moves by itself).")


def print_preemption_split(server):
    """Note [Preemption phases]: where the preemptions' time went and where in the step the job was."""
    if server.get("preemption_drain_p99_s") is None:
        return
    print("\nWhere the preemptions' time goes (Note [Preemption phases]; p50s need not add up):\n")
    print("| phase | p50 (ms) | p99 (ms) |")
    print("|---|---:|---:|")
    for key, what in [("signal", "arrival until the controller wrote the stop flag"),
                      ("to_boundary", "the flag until the job's host thread read it at a layer boundary"),
                      ("drain", "the boundary until the device had done the training work queued before it")]:
        print(f"| {key}: {what} | {server[f'preemption_{key}_p50_s'] * 1e3:.3f} | {server[f'preemption_{key}_p99_s'] * 1e3:.3f} |")
    print("\nThe preemptions by where in its step the job read the stop:\n")
    # The largest of each place where the server gave it (quantile 1): a tail's single stops.
    with_max = server.get("preemption_at_backward_max_s") is not None
    print("| boundary | preemptions | p50 (ms) | p99 (ms) |" + (" largest (ms) |" if with_max else ""))
    print("|---|---:|---:|---:|" + ("---:|" if with_max else ""))
    for place in ("step_start", "forward", "backward", "update"):
        count = server.get(f"preemptions_at_{place}") or 0
        keys = ("p50", "p99", "max") if with_max else ("p50", "p99")
        cells = " | ".join(f"{server[f'preemption_at_{place}_{k}_s'] * 1e3:.3f}" if count else "" for k in keys)
        print(f"| {place} | {count:.0f} | {cells} |")


def numbered_runs(raw, prefix):
    """(number, path) of RAW/PREFIX-N.json, in N's order: one server per value of a setting."""
    paths = glob.glob(os.path.join(raw, f"{prefix}-*.json"))
    return sorted((int(os.path.basename(p)[len(prefix) + 1:-len(".json")]), p) for p in paths)


def print_update_pieces(raw):
    """Part `pieces`: one server per training.update_piece_mib (Note [Update in pieces])."""
    pieces = numbered_runs(raw, "pieces")
    if not pieces:
        return
    print("## The training's update in pieces\n")
    print("The same server with `training.update_piece_mib` changed (Note [Update in pieces]: the most MiB of")
    print("parameters an update operation, and of the state the step's slot copy, works on between two pause")
    print("points; 0: whole operations), one server after the other in this call; cold requests per model while")
    print("training, then training throughput alone and under one request per second (10 s windows). The")
    print("place columns: the preemptions whose stop the job read in the update, and between steps.\n")
    print("| MiB | preemptions | p50 / p99 (ms) | in the update: count, p50 / p99 (ms) | between steps: count, p50 / p99 (ms) "
          "| training alone (steps/s) | with requests (% of alone) |")
    print("|---:|---:|---:|---:|---:|---:|---:|")

    def place(s, where):
        count = s.get(f"preemptions_at_{where}") or 0
        if not count:
            return "0"
        return f"{count:.0f}, {s[f'preemption_at_{where}_p50_s'] * 1e3:.3f} / {s[f'preemption_at_{where}_p99_s'] * 1e3:.3f}"

    for name, path in pieces:
        a = load(path)
        s = a["server"]
        t = a["training_steps_per_s"]
        ratio = 100 * t["with_requests"] / t["alone"] if t["alone"] else float("nan")
        print(f"| {name} | {s['preemptions']:.0f} | {s['preemption_p50_s'] * 1e3:.3f} / {s['preemption_p99_s'] * 1e3:.3f} "
              f"| {place(s, 'update')} | {place(s, 'step_start')} | {t['alone']:.2f} | {ratio:.1f} |")
    print()


def print_split_by_model(raw, bench, run_suffix=""):
    """The client's median split at the server's own per-model medians (Note [Request phases], by model),
    against `psw run`'s switch in run-MODEL{run_suffix}.json."""
    server = bench["server"]
    models = sorted(m for m in bench["cold_latency_ms"] if server.get(f"server_latency_{m}_p50_s") is not None)
    if not models:
        return  # a server from before the per-model metrics
    print()
    print("Split at the server (its metrics by model, over every request of the model in the run; medians, so the")
    print("parts need not add up exactly): `outside` is the client's median less the server's (gRPC both ways, the")
    print("client, the front end's copy of a raw input), `server - run` the server's median less `psw run --graph`'s")
    print("switch; then the server's phases: to the worker (queue, input copy, message), device startup (of which")
    print("the input's copy to the device, and of that the worker's host time launching it: 0 where not measured),")
    print("compute (first layer to the forward's end; `psw run`'s switch is its equivalent), output and reply.\n")
    print("| model | client | server | outside | server - run | to the worker | device startup (input / launch) | compute | output + reply | startup p50 / p99 |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for model in models:
        client = bench["cold_latency_ms"][model]["median_ms"]
        at_server = server[f"server_latency_{model}_p50_s"] * 1e3
        phase = lambda name: (server.get(f"phase_{model}_{name}_p50_s") or 0) * 1e3
        print(f"| {model} | {client:.3f} | {at_server:.3f} | {client - at_server:.3f} | {at_server - run_median(raw, model, run_suffix):.3f} | "
              f"{phase('queue') + phase('input_copy') + phase('to_worker'):.3f} | "
              f"{phase('device_startup'):.3f} ({phase('input_to_device'):.3f} / {phase('input_launch'):.3f}) | {phase('compute'):.3f} | "
              f"{phase('output') + phase('reply'):.3f} | "
              f"{server[f'startup_{model}_p50_s'] * 1e3:.3f} / {server[f'startup_{model}_p99_s'] * 1e3:.3f} |")
    print("\n(ms)")


def print_share(raw):
    """Part `share`: the job's rate over a five-minute stretch under one request per second."""
    path = os.path.join(raw, "share.json")
    if not os.path.exists(path):
        return
    d = load(path)
    rates, held, server = d["training_steps_per_s"], d["training_with_requests"], d["server"]
    windows = d["training_windows"]
    loaded = [w for w in windows if w["with_requests"]]
    print("## The training job's rate under one request per second, five minutes (part `share`)\n")
    print("One server (configs/serve/h200.yaml, raw inputs); `psw bench-serve --rounds 2`: the job alone, then")
    print("two windows under one request per second back to back (one unbroken stretch), then alone again")
    print("(Note [Training windows]); each kind's rate is its steps over its windows' time.\n")
    print("| window | start (s) | seconds | steps | steps/s | requests | held (s) |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for w in windows:
        kind = "one request per second" if w["with_requests"] else "alone"
        print(f"| {kind} | {w['start_s']:.1f} | {w['seconds']:.1f} | {w['steps']} | {w['steps'] / w['seconds']:.2f} | "
              f"{w['requests']} | {w['held_s']:.2f} |")
    share = rates["with_requests"] / rates["alone"] if rates["alone"] else float("nan")
    print(f"\nAlone {rates['alone']:.2f} steps/s; under requests {rates['with_requests']:.2f} steps/s over "
          f"{sum(w['seconds'] for w in loaded):.0f} s ({rates['requests']} requests): **{100 * share:.1f}%** of alone "
          f"(target >= 95%); its rate while not held over alone (running share) {held['running_share']:.3f}.{rate_spread(d)}")
    if server.get("preemption_p99_s") is not None:
        print(f"Server, over the run: preemption p50 {server['preemption_p50_s'] * 1e3:.3f} ms, p99 "
              f"{server['preemption_p99_s'] * 1e3:.3f} ms (target p99 < 1 ms); startup p50 "
              f"{server['startup_p50_s'] * 1e3:.3f} ms, p99 {server['startup_p99_s'] * 1e3:.3f} ms.")
    print_preemption_split(server)
    # What the machine did meanwhile, where it was monitored (scripts/share_timeline.py).
    monitors = share_monitor_summary(raw)
    if monitors:
        print("\n" + "\n".join(monitors))
        if os.path.exists(os.path.join(raw, "share-timeline.png")):
            print("The job's rate in slices beside these, second by second: `share-timeline.png` in the raw folder.")
    print()


def main():
    raw = sys.argv[1]
    print("# psw serve on the GPU\n")
    print(open(os.path.join(raw, "environment.md")).read().rstrip())
    # The device's copy of the tree may carry older git metadata than the tree itself: the
    # caller names the commit the run was made from when it knows better.
    if os.environ.get("PSW_RUN_COMMIT"):
        print(f"- tree of the run: commit {os.environ['PSW_RUN_COMMIT']} (named when this report was made from the raw "
              "runs; the commit line above is not the tree's: the device host was given its copy's stale git "
              "metadata or a placeholder)")
    # What the raw folder cannot say about how the run was made (a detached run, say).
    if os.environ.get("PSW_RUN_NOTE"):
        print(f"- note: {os.environ['PSW_RUN_NOTE']}")
    print()
    print(f"Produced by `scripts/gpu-serve.sh` (raw JSON and logs in `{os.path.basename(os.path.normpath(raw))}/` beside this file).")
    logs = [os.path.basename(p) for p in glob.glob(os.path.join(raw, "serve*.log"))]
    if logs != ["serve-llm.log"]:
        print("The server runs `configs/serve/h200.yaml`: ResNet-152, Inception-v3 and BERT-base served with PipeSwitch,")
        print("batch 8, fp32, cache off (every request switches its model in from pinned host memory), while")
        print("ResNet-152 trains (batch 8, 224 x 224, SGD with momentum). Client latency is measured by `psw")
        print("bench-serve` around each gRPC call over the Unix socket, so it includes the protocol, copying the")
        print("8-image input (4.8 MB for ResNet-152) in and the output out, and stopping the training job.\n")
    else:
        print("This run is the part `llm` alone: see its section below.\n")
    if os.path.exists(os.path.join(raw, "serve-llm.log")):
        print_decoders_served(raw)
    bench_path = os.path.join(raw, "bench.json")
    if os.path.exists(bench_path):
        bench = load(bench_path)
        shm_path = os.path.join(raw, "bench-shm.json")
        shm = load(shm_path)["cold_latency_ms"] if os.path.exists(shm_path) else {}
        print("## Cold switches while training runs\n")
        print("Each request's input either in the gRPC message (raw contents) or in shared memory the client")
        print("registered once (the protocol's system shared memory extension, as Triton's clients use it).\n")
        # A part that sent no requests with inputs in shared memory (staging, say) has no such columns.
        if shm:
            print("| model | client median, raw (ms) | p99 (ms) | client median, shared memory (ms) | p99 (ms) | `psw run --graph` switch, same session (ms) | ratio raw | ratio shared memory (target <= 1.15) |")
            print("|---|---:|---:|---:|---:|---:|---:|---:|")
        else:
            print("| model | client median, raw (ms) | p99 (ms) | `psw run --graph` switch, same session (ms) | ratio raw |")
            print("|---|---:|---:|---:|---:|")
        for model, c in sorted(bench["cold_latency_ms"].items()):
            run = run_median(raw, model)
            row = f"| {model} | {c['median_ms']:.3f} | {c['p99_ms']:.3f} |"
            if shm:
                m = shm.get(model, {"median_ms": float("nan"), "p99_ms": float("nan")})
                row += f" {m['median_ms']:.3f} | {m['p99_ms']:.3f} |"
            row += f" {run:.3f} | {c['median_ms'] / run:.2f} |"
            if shm:
                row += f" {m['median_ms'] / run:.2f} |"
            print(row)
        no_staging_path = os.path.join(raw, "bench-no-staging.json")
        no_staging = load(no_staging_path)["cold_latency_ms"] if os.path.exists(no_staging_path) else None
        held_path = os.path.join(raw, "bench-held.json")
        held = load(held_path)["cold_latency_ms"] if os.path.exists(held_path) else None
        print()
        print("### The raw input's cost: client median less `psw run --graph`'s switch (ms)\n")
        print("Raw inputs as the server receives them (Note [Raw inputs received in place]: copied once from")
        print("gRPC's buffers into the front end's staging, read there by the worker)" +
              (", and on a second server of the same session without the staging (`input_staging_slots: 0`: the" if no_staging else "."))
        if no_staging:
            print("input kept in its own string, then copied by the controller into the worker's io segment).")
        if held:
            print("`held`: a server with the staging and the host's CPU wake-up latency held at 0 (`cpu_wakeup_latency_us: 0`,")
            print("Note [CPU wake-up latency]), less `psw run --graph --cpu-wakeup-latency-us 0`'s switch.")
        print()
        targets = {"resnet152": "<= 1.5", "inception_v3": "<= 2.5"}
        header = ("| model | raw |" + (" raw, no staging |" if no_staging else "") + (" raw, held |" if held else "") +
                  (" shared memory |" if shm else "") + " target, raw |")
        print(header)
        print("|---|---:|" + ("---:|" if no_staging else "") + ("---:|" if held else "") + ("---:|" if shm else "") + "---|")
        for model, c in sorted(bench["cold_latency_ms"].items()):
            run = run_median(raw, model)
            row = f"| {model} | {c['median_ms'] - run:.3f} |"
            if no_staging:
                n = no_staging.get(model, {"median_ms": float("nan")})
                row += f" {n['median_ms'] - run:.3f} |"
            if held:
                h = held.get(model, {"median_ms": float("nan")})
                row += f" {h['median_ms'] - run_median(raw, model, '-held'):.3f} |"
            if shm:
                row += f" {shm.get(model, {'median_ms': float('nan')})['median_ms'] - run:.3f} |"
            row += f" {targets.get(model, '')} |"
            print(row)
        print_split_by_model(raw, bench)
        if no_staging:
            # The controller's copy the staging removes, from each server's own phases.
            phases_of = lambda b: (b["server"].get("phase_input_copy_p50_s"), b["server"].get("phase_input_copy_p99_s"))
            with_copy, without_copy = phases_of(bench), phases_of(load(no_staging_path))
            if None not in with_copy + without_copy:
                print()
                print(f"The controller's `input_copy` phase over every request: p50 {with_copy[0] * 1e3:.3f} ms, p99 "
                      f"{with_copy[1] * 1e3:.3f} ms with the staging; p50 {without_copy[0] * 1e3:.3f} ms, p99 "
                      f"{without_copy[1] * 1e3:.3f} ms without.")
        server = bench["server"]
        print()
        print("## The server's own times (its metrics, over every request of the run)\n")
        print("| measure | p50 (ms) | p99 (ms) | target |")
        print("|---|---:|---:|---|")
        print(f"| startup: request arrival at the controller to its first layer computing | {server['startup_p50_s'] * 1e3:.3f} | {server['startup_p99_s'] * 1e3:.3f} | < 1 ms |")
        print(f"| preemption: request arrival to training stopped at a layer boundary ({server['preemptions']:.0f} preemptions) | {server['preemption_p50_s'] * 1e3:.3f} | {server['preemption_p99_s'] * 1e3:.3f} | p99 < 1 ms |")
        if server.get("server_latency_p50_s") is not None:
            print(f"| request arrival at the controller to reply ready (every model; the rest of the client's time is gRPC and copies) | {server['server_latency_p50_s'] * 1e3:.3f} | {server['server_latency_p99_s'] * 1e3:.3f} | |")
        phases = [("queue", "arrival until a worker takes it"),
                  ("input_copy", "input into the worker's io segment (0 for one read in place: shared memory, staging)"),
                  ("to_worker", "message to the worker"), ("device_startup", "worker receipt to first layer computing"),
                  ("input_to_device", "(of which: the input's copy to the device)"),
                  ("input_launch", "(of that: the worker's host time launching the copy)"),
                  ("compute", "first layer to the forward's end"), ("output", "output back to the host"),
                  ("reply", "worker's reply to the response ready")]
        if server.get("phase_queue_p50_s") is not None:
            print()
            print("Where the server's time goes (Note [Request phases]; per phase over every request; p50s of the phases")
            print("need not add up to the p50 of the total):\n")
            print("| phase | p50 (ms) | p99 (ms) |")
            print("|---|---:|---:|")
            for key, what in phases:
                if server.get(f"phase_{key}_p50_s") is None:
                    continue  # a server from before the phase was measured
                print(f"| {key}: {what} | {server[f'phase_{key}_p50_s'] * 1e3:.3f} | {server[f'phase_{key}_p99_s'] * 1e3:.3f} |")
        print_preemption_split(server)
        t = bench["training_steps_per_s"]
        # A part with no training windows (staging, dispatch: --window 0) has no throughput to say.
        if t["alone"] > 0:
            print()
            print("## Training throughput\n")
            ratio = t["with_requests"] / t["alone"] if t["alone"] else float("nan")
            spec = bench["spec"]
            windows = (f"windows of {spec['window_s']:g} s with requests and {spec.get('alone_window_s', spec['window_s']):g} s "
                       f"alone, {spec.get('rounds', 1)} pair(s)")
            print(f"ResNet-152 training alone: {t['alone']:.2f} steps/s; with one request per second ({t['requests']} requests "
                  f"in the windows): {t['with_requests']:.2f} steps/s, **{100 * ratio:.1f}%** of alone (target >= 95%; {windows}).{rate_spread(bench)}\n")
            loss = bench.get("training_loss")
            if loss and loss["alone"]:
                # psw bench-serve's samples of the job's loss (Note [Training objective]); the full
                # series is in bench.json.
                print("The job's loss (cross-entropy on its 8 seeded batches, as its status reported it, "
                      "sampled every 100 ms; the second window goes on from the first):\n")
                print("| window | samples | first step | its loss | last step | its loss | lowest loss |")
                print("|---|---:|---:|---:|---:|---:|---:|")
                for window in ("alone", "with_requests"):
                    s = loss[window]
                    if s:
                        print(f"| {window.replace('_', ' ')} | {len(s)} | {s[0]['step']} | {s[0]['loss']:.3f} | {s[-1]['step']} | "
                              f"{s[-1]['loss']:.3f} | {min(x['loss'] for x in s):.3f} |")
                print()
    switches_path = os.path.join(raw, "switches.json")
    if os.path.exists(switches_path):
        sw = load(switches_path)
        s = sw["switch_latency_ms"]
        print(f"## {s['count']:,} consecutive switches\n")
        batch = sw.get("spec", {}).get("batch", "?")
        print(f"{s['count']} requests in turn over the three models (batch {batch}, training stopped), every one a switch: "
              f"median {s['median_ms']:.3f} ms, p99 {s['p99_ms']:.3f} ms. Memory of every process of the server before and after:\n")
        before = processes(os.path.join(raw, "processes-before-switches.txt"))
        after = {pid: rss for pid, rss, _ in processes(os.path.join(raw, "processes-after-switches.txt"))}
        dev_before = device_memory(os.path.join(raw, "device-memory-before-switches.csv"))
        dev_after = device_memory(os.path.join(raw, "device-memory-after-switches.csv"))
        print("| process | pid | host RSS before (MiB) | after (MiB) | device memory before | after |")
        print("|---|---:|---:|---:|---:|---:|")
        for pid, rss, role in before:
            print(f"| {role} | {pid} | {rss / 1024:.1f} | {after.get(pid, float('nan')) / 1024:.1f} | "
                  f"{dev_before.get(pid, '-')} | {dev_after.get(pid, '-')} |")
        print()
    auto_path = os.path.join(raw, "placement-auto-shm.json")
    if os.path.exists(auto_path):
        auto = load(auto_path)
        raw_auto_path = os.path.join(raw, "placement-auto.json")
        raw_auto = load(raw_auto_path)["cold_latency_ms"] if os.path.exists(raw_auto_path) else {}
        print("## Placement auto\n")
        print("The same server with `placement: auto`: the plan leaves layers the device reads little of (BERT's")
        print("embedding tables) in the daemon's pinned host memory, read in place; compared with `psw run --graph")
        print("--placement auto` of the same session.\n")
        print("| model | client median, shared memory (ms) | p99 (ms) | client median, raw (ms) | `psw run --graph --placement auto` (ms) | ratio shared memory |")
        print("|---|---:|---:|---:|---:|---:|")
        for model, c in sorted(auto["cold_latency_ms"].items()):
            run = run_median(raw, model, "-auto")
            r = raw_auto.get(model, {"median_ms": float("nan")})
            # No `psw run` in this call (the part ran without `main`): no ratio, said as such.
            run_cell, ratio_cell = (f"{run:.3f}", f"{c['median_ms'] / run:.2f}") if run == run else ("not run", "-")
            print(f"| {model} | {c['median_ms']:.3f} | {c['p99_ms']:.3f} | {r['median_ms']:.3f} | {run_cell} | {ratio_cell} |")
        print_split_by_model(raw, auto, "-auto")
        s = auto["server"]
        print(f"\nServer (over the run's requests): startup p50 {s['startup_p50_s'] * 1e3:.3f} ms, p99 {s['startup_p99_s'] * 1e3:.3f} ms; "
              f"preemption p50 {s['preemption_p50_s'] * 1e3:.3f} ms, p99 {s['preemption_p99_s'] * 1e3:.3f} ms.\n")
    lookaheads = numbered_runs(raw, "lookahead")
    if lookaheads:
        print("## The training's lookahead\n")
        print("The same server with `training.lookahead` changed (Note [Bounded lookahead]: how many layer boundaries")
        print("of training work the host may queue ahead of the device); 20 cold requests per model while training,")
        print("then training throughput alone and under one request per second (10 s windows).\n")
        print("| lookahead | startup p50 / p99 (ms) | preemption p50 / p99 (ms) | training alone (steps/s) | with requests (% of alone) | client median resnet152 / inception_v3 / bert_base (ms) |")
        print("|---:|---:|---:|---:|---:|---:|")
        servers = []  # (lookahead, its server's metrics), for the preemption splits below the table
        for name, path in lookaheads:
            a = load(path)
            s = a["server"]
            t = a["training_steps_per_s"]
            ratio = 100 * t["with_requests"] / t["alone"] if t["alone"] else float("nan")
            cells = " / ".join(f"{a['cold_latency_ms'][k]['median_ms']:.2f}" if k in a["cold_latency_ms"] else "-"
                               for k in ("resnet152", "inception_v3", "bert_base"))
            servers.append((name, s))
            print(f"| {name} | {s['startup_p50_s'] * 1e3:.3f} / {s['startup_p99_s'] * 1e3:.3f} | "
                  f"{s['preemption_p50_s'] * 1e3:.3f} / {s['preemption_p99_s'] * 1e3:.3f} | {t['alone']:.2f} | {ratio:.1f} | {cells} |")
        for name, s in servers:
            if s.get("preemption_drain_p99_s") is not None:
                print(f"\n### Lookahead {name}: its preemptions")
                print_preemption_split(s)
        print()
    print_update_pieces(raw)
    mechanisms = sorted(glob.glob(os.path.join(raw, "mechanism-*.json")))
    if mechanisms:
        print("## The paper's mechanisms through the server\n")
        print("One server per mechanism (the same config, `mechanism:` changed; `workers: 1` for one-process); ten cold requests per model (three for stop-and-start and two-processes), each")
        print("while ResNet-152 trains. `ready` keeps every model resident after its first request.\n")
        print("| mechanism | resnet152 median (ms) | inception_v3 median (ms) | bert_base median (ms) |")
        print("|---|---:|---:|---:|")
        for path in mechanisms:
            m = load(path)
            name = os.path.basename(path)[len("mechanism-"):-len(".json")]
            cells = [f"{m['cold_latency_ms'][k]['median_ms']:.3f}" if k in m["cold_latency_ms"] else "-"
                     for k in ("resnet152", "inception_v3", "bert_base")]
            print(f"| {name} | " + " | ".join(cells) + " |")
        print()
        sim_vs = os.path.join(raw, "mechanisms-vs-sim.csv")
        if os.path.exists(sim_vs):
            print_mechanisms_vs_sim(sim_vs)
    after_stop_path = os.path.join(raw, "dispatch-after-stop.json")
    if os.path.exists(after_stop_path):
        a = load(after_stop_path)
        s = a["server"]
        print("## Dispatch after the training has stopped\n")
        print("The same server with `dispatch: after-stop`: a request goes to its worker only once the training")
        print("job has paused, instead of at once with its switch overlapping the training's last layers.\n")
        print("| model | client latency median (ms) | p99 (ms) |")
        print("|---|---:|---:|")
        for model, c in sorted(a["cold_latency_ms"].items()):
            print(f"| {model} | {c['median_ms']:.3f} | {c['p99_ms']:.3f} |")
        print(f"\nStartup p50 {s['startup_p50_s'] * 1e3:.3f} ms, p99 {s['startup_p99_s'] * 1e3:.3f} ms; preemption p50 "
              f"{s['preemption_p50_s'] * 1e3:.3f} ms, p99 {s['preemption_p99_s'] * 1e3:.3f} ms; arrival to reply p50 "
              f"{s['server_latency_p50_s'] * 1e3:.3f} ms.")
        print_preemption_split(s)
        print()
    profiles = [
        ("serving-h200.yaml", "The server's request path and training step (psw profile-serving)",
         "Measured first in this run against the server of `configs/serve/h200.yaml` (Note [Request path]):\n"
         "per model, medians over cold requests of the client's latency minus the server's time (protocol)\n"
         "and of the server's time minus the engine's (server). The simulator of the validations below adds\n"
         "them; those validations are later runs of other workloads."),
        ("serving-h200-from-load.yaml", "The request path through psw load (psw profile-serving --from-load)",
         "Fitted on this run's `calibrate-load` validation (Note [Client connections]): the requests of\n"
         "`psw load`'s senders, per model the protocol's median, quantiles and growth per request in\n"
         "flight, the server part's median, and the training step from the job alone; the later\n"
         "validations of the run simulate with this profile."),
    ]
    for name, heading, text in profiles:
        path = os.path.join(raw, name)
        if os.path.exists(path):
            print(f"## {heading}\n")
            print(f"{text}\n")
            print_yaml(path)
    print_protocol_ways(os.path.join(raw, "protocol"))
    validations = sorted(glob.glob(os.path.join(raw, "validation", "*", "validation.json")))
    if validations:
        print("## The simulator beside the server on one workload (psw validate)\n")
        print("Each case's workload sent to the server by `psw validate` and simulated from the same config")
        print("(`configs/experiments/h200-validate.yaml` per mechanism, `h200-figures.yaml` per mechanism of the")
        print("paper's figures (`figures-*`, drawn by scripts/gpu_figures.py), the trace replays `replay-*.yaml`);")
        print("the error is (simulated - measured) / measured, the tolerance that of")
        print("Note [Validation tolerances] (xval/include/psw/xval/validation.hpp).\n")
        for path in validations:
            v = load(path)
            name = os.path.basename(os.path.dirname(path))
            print(f"### {name} ({v['mechanism']}): {v['within']} within tolerance, {v['outside']} outside\n")
            measured = os.path.join(os.path.dirname(path), "measured", "summary.json")
            # Note [Inputs in shared memory]: runs before the key sent raw inputs.
            inputs = load(measured).get("inputs", "raw") if os.path.exists(measured) else "raw"
            if inputs == "shared-memory":
                print("Inputs in shared memory (psw load --shared-memory), not in the messages.\n")
            print("| scope | measure | simulated | measured | error | tolerance | status |")
            print("|---|---|---:|---:|---:|---:|---|")
            for r in v["rows"]:
                cell = lambda x: "-" if x is None else f"{x:.4f}"
                error = "-" if r["relative_error"] is None else f"{r['relative_error'] * 100:+.1f}%"
                print(f"| {r['scope']} | {r['measure']} | {cell(r['simulated'])} | {cell(r['measured'])} | {error} | "
                      f"{r['tolerance'] * 100:.0f}% | {r['status']} |")
            print()
    print_worker_starts(raw)
    print_eager_switches(raw)
    print_engine_alone(raw)
    print_drift(raw)
    print_share(raw)
    if processes(os.path.join(raw, "processes-start.txt")):
        print("## Device memory per process at start (nvidia-smi)\n")
        print_processes(raw, "processes-start.txt", "device-memory.csv", with_rss=False)


if __name__ == "__main__":
    main()
