#!/usr/bin/env python3
"""Builds results/gpu/<date>-<gpu>-workloads.md from what scripts/gpu-workloads.sh collected in
RAW_DIR: `psw client --generate --repeat` (generate-*.json), `psw run --graph` (run-*.json),
`psw bench-serve` (training-*.json) and transformers' side (hf.json, prompts.json). Every number
is psw's or transformers'; this script lays them out, and draws the loss curves beside the report
(RAW_DIR/../<date>-<gpu>-workloads-<parts>-loss.png for RAW_DIR raw-workloads-<date>-<gpu>-<parts>) when matplotlib is there."""
import json
import os
import sys


def load(path):
    return json.load(open(path)) if os.path.exists(path) else None


def equal_prefix(a, b):
    k = 0
    while k < min(len(a), len(b)) and a[k] == b[k]:
        k += 1
    return k


def decoder(raw):
    hf = load(os.path.join(raw, "hf.json"))
    prompts = load(os.path.join(raw, "prompts.json"))
    if hf is None or prompts is None:
        return
    lengths = sorted(int(n) for n in prompts)
    print("## Generation: llama-1b served from transformers' weights\n")
    print(f"llama-1b's sizes (configs/zoo/llama-1b.yaml) with seeded random weights made by transformers "
          f"{hf['transformers']} on torch {hf['torch']} (scripts/hf_generate.py), saved as safetensors and served "
          f"by `psw serve --backend cuda` in bf16 and fp32 beside ResNet-152 (cache: active). Each call generates "
          f"{hf['max_new_tokens']} tokens greedily. Cold: a ResNet-152 request before each call, so the decoder "
          "is switched in; warm: calls back to back (the server's `switched` flag sorts them). The bound: every "
          "byte of llama-1b over the link fitted in the same call, plus `psw run`'s resident prefill at the "
          "bucket's length (Note [Time to first token]). transformers: its own `generate`, resident, in bf16 "
          f"({hf['attention']} attention, dynamic cache), median of {hf['repeat']} runs each. Medians in ms.\n")
    print("| prompt | bucket | served TTFT cold | psw run cold switch | bound | served cold / bound "
          "| served TTFT warm | resident prefill (psw run) | transformers TTFT | served per token "
          "| psw run per token | transformers per token | served / transformers per token |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n in lengths:
        cold = load(os.path.join(raw, f"generate-{n}-cold.json"))
        warm = load(os.path.join(raw, f"generate-{n}-warm.json"))
        if cold is None or warm is None:
            print(f"| {n} | missing | | | | | | | | | | | |")
            continue
        bucket = cold["prompt_bucket"]
        run = load(os.path.join(raw, f"run-{bucket}.json"))
        d = run["decoder"] if run else None
        ref = hf["bf16"][str(n)]
        tpot = warm["tpot_ms"]["median"]
        bound = d["first_token_bound_ms"] if d else float("nan")
        # psw run --graph --decode: its steps replay one graph as the server's (per_token_replayed).
        run_tpot = d["per_token_ms"]["median"] if d and d.get("decode_tokens") else float("nan")
        print(f"| {n} | {bucket} | {cold['ttft_cold_ms']['median']:.2f} ({cold['ttft_cold_ms']['count']}) "
              f"| {d['time_to_first_token_ms'] if d else float('nan'):.2f} | {bound:.2f} "
              f"| {cold['ttft_cold_ms']['median'] / bound:.3f} "
              f"| {warm['ttft_warm_ms']['median']:.2f} ({warm['ttft_warm_ms']['count']}) "
              f"| {d['resident_prefill_ms'] if d else float('nan'):.2f} | {ref['ttft_ms']:.2f} | {tpot:.3f} "
              f"| {run_tpot:.3f} | {ref['tpot_ms']:.3f} | {tpot / ref['tpot_ms']:.3f} |")
    print()
    print("### Token ids against transformers' greedy decoding of the same weights\n")
    print("Equal tokens: how many ids, from the first, two greedy decodings share. In fp32 the served decoder is "
          "held to transformers' fp32 ids. In bf16 both implementations round, and these weights' top logits often "
          "tie at bf16's resolution (the smallest top-two margin of transformers' own bf16 steps is shown; 0 is an "
          "exact tie), so each bf16 decoding is set against transformers' fp32 ids, the served one beside "
          "transformers' own, and against each other. 'Repeatable': every call of the server (cold and warm, "
          "either worker) answered the same ids.\n")
    print("| prompt | served fp32 = transformers fp32 | served bf16 = transformers fp32 "
          "| transformers bf16 = transformers fp32 | served bf16 = transformers bf16 "
          "| smallest bf16 margin (transformers) | repeatable fp32 | repeatable bf16 |")
    print("|---:|---:|---:|---:|---:|---:|---|---|")
    for n in lengths:
        fp32 = load(os.path.join(raw, f"generate-{n}-fp32.json"))
        bf16 = [load(os.path.join(raw, f"generate-{n}-{k}.json")) for k in ("cold", "warm")]
        if fp32 is None or None in bf16:
            continue
        ref32, ref16 = hf["fp32"][str(n)], hf["bf16"][str(n)]
        total = len(ref32["output_ids"])

        def equal(a, b):
            return f"{equal_prefix(a, b)} of {total}"

        served16 = bf16[1]["output_ids"]
        print(f"| {n} | {equal(fp32['output_ids'], ref32['output_ids'])} | {equal(served16, ref32['output_ids'])} "
              f"| {equal(ref16['output_ids'], ref32['output_ids'])} | {equal(served16, ref16['output_ids'])} "
              f"| {min(ref16['margins']):.4g} | {repeatable({'fp32': fp32})} "
              f"| {repeatable({'cold': bf16[0], 'warm': bf16[1]})} |")
    print()


def repeatable(series):
    """'yes', or 'NO' with the calls that differed from their series' first, on which worker and from
    which token (psw client's differing_calls), and where two series' first calls differ, from which
    token."""
    notes = []
    for name, run in series.items():
        for d in run.get("differing_calls", []):
            notes.append(f"{name} call {d['call']} ({'cold' if d['switched'] else 'warm'}, worker {d['worker']}) "
                         f"from token {d['from_token']}")
    firsts = [run["output_ids"] for run in series.values()]
    for name, ids in list(zip(series, firsts))[1:]:
        if ids != firsts[0]:
            notes.append(f"{name} series from token {equal_prefix(ids, firsts[0])}")
    if all(run["outputs_equal"] for run in series.values()) and not notes:
        return "yes"
    return "NO" + (f" ({'; '.join(notes)})" if notes else "")


def training(raw, figure):
    runs = {order: load(os.path.join(raw, f"training-{order}.json")) for order in ("alone-first", "requests-first")}
    if not any(runs.values()):
        return
    print("## The training job alone and under one request per second\n")
    print("ResNet-152 training (configs/serve/h200.yaml: batch 8, 224 x 224, SGD with momentum, the seeded labelled "
          "set of Note [Training objective]) on two fresh servers, measured by `psw bench-serve`: one window of the "
          "job alone, one under one request per second (the served models in turn, inputs in shared memory); "
          "`alone-first` runs them in that order, `requests-first` the other way, so each curve has the job's "
          "first steps once. The share is the window with requests' rate over the same server's rate alone.\n")
    print("| run | window s | steps/s alone | steps/s under requests | share | requests | held s "
          "| rate while not held / alone | loss at first sample | loss at last sample |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for order, r in runs.items():
        if r is None:
            print(f"| {order} | missing | | | | | | | | |")
            continue
        s = r["training_steps_per_s"]
        first = r["training_loss"]["with_requests" if order == "requests-first" else "alone"]
        last = r["training_loss"]["alone" if order == "requests-first" else "with_requests"]
        print(f"| {order} | {r['spec']['window_s']:g} | {s['alone']:.2f} | {s['with_requests']:.2f} "
              f"| {s['with_requests'] / s['alone']:.3f} | {s['requests']} | {r['training_with_requests']['held_s']:.2f} "
              f"| {r['training_with_requests']['running_share']:.3f} "
              f"| {first[0]['loss']:.4g} (step {first[0]['step']}) | {last[-1]['loss']:.4g} (step {last[-1]['step']}) |")
    print()
    print("Loss by step over the job's first window (alone in `alone-first`, under requests in `requests-first`):\n")
    alone = runs["alone-first"]["training_loss"]["alone"] if runs["alone-first"] else []
    loaded = runs["requests-first"]["training_loss"]["with_requests"] if runs["requests-first"] else []
    print("| step | loss alone | loss under requests |")
    print("|---:|---:|---:|")

    def at(samples, step):  # the last sample at or before `step`
        before = [x for x in samples if x["step"] <= step]
        return f"{before[-1]['loss']:.4g} (step {before[-1]['step']})" if before else ""

    last_step = min(alone[-1]["step"] if alone else 0, loaded[-1]["step"] if loaded else 0)
    for step in sorted({s for s in (10, 25, 50, 100, 200, 400, 800, 1200, 1600, 2000) if s <= last_step} | {last_step}):
        print(f"| {step} | {at(alone, step)} | {at(loaded, step)} |")
    print()
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("(matplotlib is not installed here: no figure)\n")
        return
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    for samples, label in ((alone, "alone"), (loaded, "under 1 request/s")):
        if samples:
            ax.plot([x["step"] for x in samples], [x["loss"] for x in samples], label=label)
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy loss")
    ax.set_yscale("log")
    ax.legend()
    ax.set_title("ResNet-152 training served by psw serve")
    fig.tight_layout()
    fig.savefig(figure, dpi=120)
    print(f"![loss curves]({os.path.basename(figure)})\n")


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit("usage: workloads_report.py RAW_DIR [REPORT.md: names the figure beside it]")
    raw = sys.argv[1].rstrip("/")
    stem = os.path.basename(raw).replace("raw-workloads-", "")  # <date>-<gpu>-<parts>
    date_gpu, parts = stem[:len("YYYY-MM-DD") + 1 + stem[len("YYYY-MM-DD") + 1:].index("-")], stem.split("-", 4)[-1]
    print(f"# The served workloads: {parts.replace('-', ' and ')} ({date_gpu})\n")
    print("Produced by `scripts/gpu-workloads.sh` (raw JSON, logs and profiles beside this file, in "
          f"`{os.path.basename(raw)}.tar.gz`); do not edit by hand.\n")
    environment = os.path.join(raw, "environment.md")
    if os.path.exists(environment):
        print(open(environment).read())
    decoder(raw)
    training(raw, os.path.join(os.path.dirname(raw), f"{date_gpu}-workloads-{parts}-loss.png"))


if __name__ == "__main__":
    main()
