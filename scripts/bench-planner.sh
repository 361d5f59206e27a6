#!/usr/bin/env bash
# Runs the planner benchmark (Google Benchmark) on one core and writes results/planner.md:
# search time of `pipeswitch` and `optimal` on the shipped models, on synthetic models of 50
# to 10,000 layers and on kernel-level models (half the layers parameterless), with the
# machine it ran on. `pipeswitch` runs only up to 1,000 layers (deeper, it takes minutes).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${PSW_BUILD_DIR:-$root/build}
"$root/scripts/build.sh" >/dev/null
json=$(mktemp)
trap 'rm -f "$json"' EXIT
# One core: pin the process when taskset exists.
pin=()
if command -v taskset >/dev/null 2>&1; then pin=(taskset -c 0); fi
"${pin[@]}" "$build/tests/psw_planner_bench" --benchmark_format=json --benchmark_out="$json" \
  --benchmark_out_format=json --benchmark_min_time=0.2 >/dev/null
{
  echo "# Planner search time"
  echo
  echo "Produced by \`scripts/bench-planner.sh\` (Google Benchmark, \`tests/bench/planner_bench.cpp\`,"
  echo "pinned to one core); do not edit by hand. Hardware profile: h200-pcie5, inference, batch 8."
  echo "Targets: \`optimal\` under 5 ms on each shipped model, under 100 ms at 1,000 layers and under"
  echo "1 s at 10,000 layers. \`pipeswitch\` (the paper's search) runs only up to 1,000 layers: it took"
  echo "82 s on the 5,000-layer transformer (this file at commit a44f8f6). The kernel-level model is the"
  echo "synthetic transformer with a parameterless elementwise kernel after every layer, as in a model"
  echo "captured from CUDA graphs."
  echo
  "$root/scripts/environment.sh"
  echo
  python3 "$root/scripts/planner_table.py" "$json"
} > "$root/results/planner.md"
cat "$root/results/planner.md"
