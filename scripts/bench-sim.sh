#!/usr/bin/env bash
# Simulator performance, written to results/sim/perf.md with the machine it ran on:
#  1. the event engine (Google Benchmark, one core): events per second;
#  2. `psw sim` replaying the Azure Functions 2019 sample with PipeSwitch on the H200
#     profile, for 1 hour, 6 hours and the full day: wall time, requests per second and peak
#     memory (flat in the number of requests, since results stream out).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${PSW_BUILD_DIR:-$root/build}
"$root/scripts/build.sh" >/dev/null
psw="$build/cli/psw"
pin=()
if command -v taskset >/dev/null 2>&1; then pin=(taskset -c 0); fi
config="$root/configs/experiments/azure2019-day.yaml"
out="$root/results/sim/perf.md"
mkdir -p "$root/results/sim"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

{
  echo "# Simulator performance"
  echo
  echo "Produced by \`scripts/bench-sim.sh\`; do not edit by hand. One core (\`taskset -c 0\`)."
  echo "Targets (issue 3): at least 10 million events per second; a full day of the Azure"
  echo "Functions 2019 sample (about 13 million requests) replayed with PipeSwitch in under 30 s;"
  echo "memory flat in the number of requests."
  echo
  "$root/scripts/environment.sh"
  echo
  echo "## Event engine (Google Benchmark, \`tests/bench/engine_bench.cpp\`)"
  echo
  bash "$root/scripts/bench-engine.sh" | sed -n '/^|/,$p'
  echo
  echo "## Trace replay (\`psw sim --config configs/experiments/azure2019-day.yaml\`)"
  echo
  echo "Per-request CSV off (\`outputs.requests_csv: false\`, as in the config); the last row"
  echo "writes it (about 80 bytes a request) to show the cost of streaming every result out."
  echo
  echo "| minutes of the day | requests | wall (s) | requests/s | engine events | M events/s | peak RSS (MiB) |"
  echo "|---:|---:|---:|---:|---:|---:|---:|"
  for minutes in 60 360 1440 csv; do
    args=(--set "workload.minutes=$minutes")
    label=$minutes
    if [[ $minutes == csv ]]; then
      args=(--set "outputs.requests_csv=true" --out "$tmp/run")
      label="1440 (with requests.csv)"
    fi
    /usr/bin/time -f "%M" -o "$tmp/rss" "${pin[@]}" "$psw" sim --config "$config" "${args[@]}" > "$tmp/log"
    requests=$(awk '/^requests/ {print $2}' "$tmp/log")
    wall=$(awk '/^simulation/ {print $2}' "$tmp/log")
    events=$(awk '/^simulation/ {print $5}' "$tmp/log")
    meps=$(awk '/^simulation/ {gsub(/\(/,"",$7); print $7}' "$tmp/log")
    rss=$(( $(cat "$tmp/rss") / 1024 ))
    rps=$(awk -v r="$requests" -v w="$wall" 'BEGIN {printf "%.0f", r / w}')
    echo "| $label | $requests | $wall | $rps | $events | $meps | $rss |"
  done
  echo
  echo "The full-day run's summary (latency from arrival to reply, H200 profile):"
  echo
  echo '```'
  "${pin[@]}" "$psw" sim --config "$config" | grep -v '^simulation'
  echo '```'
} > "$out"
cat "$out"
