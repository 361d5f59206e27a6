#!/usr/bin/env bash
# Runs the protocol benchmark (Google Benchmark, tests/bench/protocol_bench.cpp) and writes
# results/protocol.md: one raw-input ModelInfer through psw's gRPC front end and client on a Unix
# socket, split where its time goes (Note [Protocol split]), beside the same bytes there and back
# through a plain Unix socket pair and a memcpy, at BERT-base's, ResNet-152's and Inception-v3's
# input sizes, with the machine it ran on (scripts/protocol_report.sh). On this host: the gRPC
# path's cost, not the GPU's; scripts/gpu-protocol.sh measures it on a GPU host.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${PSW_BUILD_DIR:-$root/build}
"$root/scripts/build.sh" >/dev/null
json=$(mktemp)
environment=$(mktemp)
trap 'rm -f "$json" "$environment"' EXIT
"$build/tests/psw_protocol_bench" --benchmark_format=json --benchmark_out="$json" \
  --benchmark_out_format=json --benchmark_min_time=1 >/dev/null
"$root/scripts/environment.sh" > "$environment"
"$root/scripts/protocol_report.sh" "$json" "$environment" > "$root/results/protocol.md"
cat "$root/results/protocol.md"
