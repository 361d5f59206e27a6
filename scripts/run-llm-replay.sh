#!/usr/bin/env bash
# LLM serving in simulation: the Azure LLM 2023 replay served by llama-1b and llama-8b in
# bf16 (profiles measured on the H200), one sweep over the mechanisms
# (configs/experiments/replay-azure-llm2023-llama.yaml), into
# results/sim/replay-azure-llm2023-llama/sweep.csv and README.md (the table, with the
# environment). Uses build/ (scripts/build.sh) or PSW_BUILD_DIR.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${PSW_BUILD_DIR:-$root/build}
psw="$build/cli/psw"
[[ -x "$psw" ]] || { echo "run-llm-replay.sh: no $psw (run scripts/build.sh first)" >&2; exit 1; }
name=replay-azure-llm2023-llama
out="$root/results/sim/$name"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$psw" sweep --config "$root/configs/experiments/$name.yaml" --out "$tmp/sweep" > "$tmp/log" 2>&1 || { cat "$tmp/log" >&2; exit 1; }
mkdir -p "$out"
cp "$tmp/sweep/sweep.csv" "$out/sweep.csv"
{
  echo "# The Azure LLM 2023 replay with two Llama decoders, simulated on the H200"
  echo
  echo "Produced by \`scripts/run-llm-replay.sh\` from \`configs/experiments/$name.yaml\`; do not edit by hand."
  echo "Ten minutes of the coding trace (2,146 requests, 3.6 a second); contexts up to 2,048 tokens to"
  echo "llama-1b, longer ones to llama-8b, both bf16 with the per-layer times measured on the H200 at a"
  echo "512-token prompt and each request's prefill priced at its own ContextTokens through the profiles'"
  echo "prefill curves (Note [Prefill curve]: the whole prefill measured at 128 to 2,048 tokens, extended"
  echo "past 2,048 with the last segment's slope); a request's latency is its time to first token."
  echo "ResNet-152 trains in the background."
  echo
  bash "$root/scripts/environment.sh"
  echo
  python3 - "$out/sweep.csv" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
print("| mechanism | mean ms | p50 ms | p99 ms | within 1 s | throughput req/s | training it/s | switches |")
print("|---|---|---|---|---|---|---|---|")
for r in rows:
    print(f"| {r['mechanism']} | {float(r['mean_ms']):.1f} | {float(r['p50_ms']):.1f} | {float(r['p99_ms']):.1f} "
          f"| {100 * float(r['slo_attainment']):.1f}% | {float(r['throughput_rps']):.2f} "
          f"| {float(r['training_iterations_per_s']):.1f} | {r['switches']} |")
PY
} > "$out/README.md"
echo "run-llm-replay.sh: $(($(wc -l < "$out/sweep.csv") - 1)) points -> $out/sweep.csv, README.md"
