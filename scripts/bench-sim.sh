#!/usr/bin/env bash
# Simulator performance, written to results/sim/perf.md with the machine it ran on:
#  1. the event engine (Google Benchmark, one core): events per second;
#  2. `psw sim` replaying the Azure Functions 2019 sample with PipeSwitch on the H200
#     profile, for 1 hour, 6 hours and the full day: wall time, requests per second and peak
#     memory, beside the memory floor (peak RSS of `psw sim --help` and of a one-minute
#     replay), so that growth above the floor shows;
#  3. the light commands: wall time and peak RSS of `psw sim --help` (psw does not link
#     LibTorch) beside `psw-exec --help` (links LibTorch), median of 5 runs each.
# Environment: PSW_BUILD_DIR (default build/, which has psw-exec when LibTorch was found).
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
psw_exec="$build/cli/psw-exec"

# measure CMD...: runs it under /usr/bin/time, prints "WALL_MS RSS_KIB" (wall from bash's clock).
measure() {
  local t0 t1
  t0=$EPOCHREALTIME
  /usr/bin/time -f "%M" -o "$tmp/rss1" "$@" >/dev/null 2>&1 || { echo "failed: $*" >&2; return 1; }
  t1=$EPOCHREALTIME
  awk -v a="$t0" -v b="$t1" -v r="$(cat "$tmp/rss1")" 'BEGIN {printf "%.1f %d\n", (b - a) * 1000, r}'
}
# median5 CMD...: median wall (ms) and median peak RSS (MiB) of 5 runs, as "WALL_MS RSS_MIB".
median5() {
  local i
  for i in 1 2 3 4 5; do measure "$@" || return 1; done > "$tmp/runs"
  local w r
  w=$(sort -n -k1,1 "$tmp/runs" | awk 'NR == 3 {print $1}')
  r=$(sort -n -k2,2 "$tmp/runs" | awk 'NR == 3 {printf "%.1f", $2 / 1024}')
  echo "$w $r"
}

{
  echo "# Simulator performance"
  echo
  echo "Produced by \`scripts/bench-sim.sh\`; do not edit by hand. One core (\`taskset -c 0\`)."
  echo "The simulator's targets: at least 10 million events per second; a full day of the Azure"
  echo "Functions 2019 sample (about 13 million requests) replayed with PipeSwitch in under 30 s;"
  echo "memory flat in the number of requests (no growth above the floor measured below)."
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
  read -r _ floor_help < <(median5 "$psw" sim --help)
  read -r _ floor_tiny < <(median5 "${pin[@]}" "$psw" sim --config "$config" --set workload.minutes=1)
  echo "Memory floor (median peak RSS of 5 runs): \`psw sim --help\` $floor_help MiB (the binary and"
  echo "its linked libraries, nothing simulated); a one-minute replay ($floor_tiny MiB) adds the"
  echo "trace reader, model and hardware profiles and the engine's buffers. A run's growth with the"
  echo "number of requests is its peak RSS minus the one-minute replay's (last column)."
  echo
  echo "| minutes of the day | requests | wall (s) | requests/s | engine events | M events/s | peak RSS (MiB) | above the 1-minute floor (MiB) |"
  echo "|---:|---:|---:|---:|---:|---:|---:|---:|"
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
    rss=$(awk -v k="$(cat "$tmp/rss")" 'BEGIN {printf "%.1f", k / 1024}')
    above=$(awk -v a="$rss" -v b="$floor_tiny" 'BEGIN {printf "%+.1f", a - b}')
    rps=$(awk -v r="$requests" -v w="$wall" 'BEGIN {printf "%.0f", r / w}')
    echo "| $label | $requests | $wall | $rps | $events | $meps | $rss | $above |"
  done
  echo
  echo "## Light commands (\`--help\`, median of 5 runs, not pinned)"
  echo
  echo "\`psw\` does not link LibTorch; \`psw-exec\` does, and stands in for the single binary that"
  echo "every command used to start."
  echo
  echo "| command | wall (ms) | peak RSS (MiB) |"
  echo "|---|---:|---:|"
  read -r w r < <(median5 "$psw" sim --help)
  echo "| \`psw sim --help\` | $w | $r |"
  if [[ -x "$psw_exec" ]]; then
    read -r w r < <(median5 "$psw_exec" --help)
    echo "| \`psw-exec --help\` | $w | $r |"
  else
    echo "| \`psw-exec --help\` | not measured: $psw_exec was not built (needs LibTorch) | - |"
  fi
  echo
  echo "Wall time runs from starting /usr/bin/time to its exit (bash's clock), so it includes the"
  echo "fork and exec. LibTorch's libraries alone put a process at the psw-exec floor: before psw"
  echo "and psw-exec were split, every psw run carried it (the earlier perf.md's flat 165 MiB)."
  echo
  echo "The full-day run's summary (latency from arrival to reply, H200 profile):"
  echo
  echo '```'
  "${pin[@]}" "$psw" sim --config "$config" | grep -v '^simulation'
  echo '```'
} > "$out"
cat "$out"
