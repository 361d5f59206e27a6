#!/usr/bin/env python3
"""Builds results/gpu/<date>-llm.md from the JSON files scripts/gpu-llm.sh collected (`psw run
--format json`): every number is psw's; this script only lays them out."""
import glob
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from psw_json import config_json  # noqa: E402


def load(raw):
    runs = {}
    for path in sorted(glob.glob(os.path.join(raw, "*.json"))):
        runs[os.path.basename(path)[:-5]] = json.load(open(path))
    return runs


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: llm_report.py RAW_DIR scripts/environment.sh|ENVIRONMENT.md|-")
    raw, environment = sys.argv[1], sys.argv[2]
    runs = load(raw)
    print("# Cold starts of LLM decoders and of the zoo in bf16 on the H200\n")
    print("Produced by `scripts/gpu-llm.sh` (`psw profile`, then `psw run --graph` per row); do not edit by hand.\n")
    # The environment: the script's output where the runs are (the GPU host), or the file it
    # wrote there beside them; '-' when neither was kept (PSW_RUN_NOTE then says what is known).
    if environment.endswith(".sh"):
        print(subprocess.run(["bash", environment], capture_output=True, text=True).stdout)
    elif environment != "-":
        print(open(environment).read())
    if os.environ.get("PSW_RUN_NOTE"):
        print(f"- note: {os.environ['PSW_RUN_NOTE']}\n")
    print("## Time to first token of a cold decoder (bf16, batch 1)\n")
    print("Note [Time to first token] (exec/switch_benchmark.hpp): the cold switch's latency is the TTFT; "
          "the bound is every byte over the link measured in the same call plus the resident prefill; "
          "copy-then-prefill copies the same groups, then prefills. All graphs; medians.\n")
    print("| model | placement | prompt | parameters | transfer ms | resident prefill ms | TTFT ms | bound ms "
          "| TTFT / bound | copy-then-prefill ms | saved ms | predicted ms | error | decode ms/token |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name, r in runs.items():
        d = r.get("decoder")
        if d is None:
            continue
        mapped = r.get("host_mapped_layers") or []
        placement = r["placement"] + (f" ({', '.join(mapped)} in place)" if mapped else "")
        print(f"| {r['model'].split('/')[-1][:-5]} | {placement} | {d['prompt_tokens']} "
              f"| {r['param_bytes'] / 1e9:.2f} GB copied | {r['transfer_ms']:.1f} | {d['resident_prefill_ms']:.2f} "
              f"| {r['latency_ms']['median']:.1f} | {d['first_token_bound_ms']:.1f} | {d['first_token_over_bound']:.3f} "
              f"| {d['copy_then_prefill_ms']['median']:.1f} | {d['first_token_saving_ms']:.1f} "
              f"| {r['predicted_ms']:.1f} | {100 * r['prediction_error']:+.1f}% | {d['per_token_ms']['median']:.2f} |")
    curves = sorted(glob.glob(os.path.join(raw, "profiles", "bf16", "*.yaml")))
    if curves:
        print("\nRows at another prompt than the profile's are predicted through its prefill curve (Note [Prefill "
              "curve] in common/include/psw/common/model_profile.hpp: every layer's profiled time times "
              "curve(prompt) / curve(profile's prompt)). The curves of the profiles in the raw folder (`psw profile "
              "--prefill-tokens`), whole resident forward in ms:\n")
        for path in curves:
            points = config_json("model", path).get("prefill_curve", [])
            cells = ", ".join(f"{p['tokens']} tokens {p['forward_ns'] / 1e6:.2f}" for p in points)
            print(f"- {os.path.basename(path)[:-5]}: {cells}")
    zoo = {name: r for name, r in runs.items() if "decoder" not in r}
    if zoo:
        print("\n## The zoo in bf16 against fp32 (batch 8, pipeswitch, graph)\n")
        print("| model | dtype | parameters | transfer ms | resident ms | switch ms | predicted ms | error |")
        print("|---|---|---|---|---|---|---|---|")
    for name, r in zoo.items():
        print(f"| {r['model']} | {r['dtype']} | {r['param_bytes'] / 1e6:.1f} MB | {r['transfer_ms']:.2f} "
              f"| {r['ready_graph_ms']['median']:.2f} | {r['latency_ms']['median']:.2f} | {r['predicted_ms']:.2f} "
              f"| {100 * r['prediction_error']:+.1f}% |")
    tests = os.path.join(raw, "gpu-tests.log")
    if os.path.exists(tests):
        summary = [line for line in open(tests) if "tests passed" in line or "tests failed" in line]
        print("\n## GPU tests (decoders and dtypes)\n")
        print("".join(f"- {line.strip()}\n" for line in summary) or "- no summary line in gpu-tests.log\n")


if __name__ == "__main__":
    main()
