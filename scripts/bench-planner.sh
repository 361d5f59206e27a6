#!/usr/bin/env bash
# Runs the planner benchmark (Google Benchmark) on one core and writes results/planner.md:
# search time of `pipeswitch` and `optimal` on the shipped models and on synthetic models
# of 50, 200, 1,000 and 5,000 layers, with the machine it ran on.
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
  echo "Targets: \`optimal\` under 5 ms on each shipped model and under 100 ms at 1,000 layers."
  echo
  "$root/scripts/environment.sh"
  echo
  python3 "$root/scripts/planner_table.py" "$json"
} > "$root/results/planner.md"
cat "$root/results/planner.md"
