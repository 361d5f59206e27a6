#!/usr/bin/env bash
# On a GPU host: the protocol benchmark of scripts/bench-protocol.sh on this host's CPUs (the
# request path that `psw serve` runs there), built with the benchmarks (PSW_GPU_BENCH=1,
# scripts/gpu-build.sh), into OUT_DIR/<date>-<gpu>-protocol.md (scripts/protocol_report.sh) with its
# Google Benchmark JSON beside it (OUT_DIR/<date>-<gpu>-protocol.json).
#
#   scripts/gpu-protocol.sh [OUT_DIR]   # OUT_DIR defaults to results/gpu
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=$(realpath -m "${1:-$root/results/gpu}")
mkdir -p "$out"
export PSW_GPU_BENCH=1
source "$root/scripts/gpu-build.sh" "$out" psw_protocol_bench
name="$out/$(date -u +%F)-${gpu:-gpu}-protocol"
environment=$(mktemp)
trap 'rm -f "$environment"' EXIT
"$root/scripts/environment.sh" > "$environment"
echo "== protocol benchmark ($(date -u +%T))"
"$build/tests/psw_protocol_bench" --benchmark_format=json --benchmark_out="$name.json" \
  --benchmark_out_format=json --benchmark_min_time=1 > /dev/null
"$root/scripts/protocol_report.sh" "$name.json" "$environment" > "$name.md"
echo "== written $name.md ($(date -u +%T))"
