#!/usr/bin/env bash
# Measures the simulator's event engine (tests/bench/engine_bench.cpp, Google Benchmark) on
# one core and prints a Markdown report on stdout: the environment (scripts/environment.sh),
# then events per second for each case, the median of 5 runs. Target: at least
# 10 million events per second on one core.
#
#   scripts/bench-engine.sh > results/sim/perf.md
#
# Builds with scripts/build.sh first (into build/, or $PSW_BUILD_DIR).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${PSW_BUILD_DIR:-$root/build}
"$root/scripts/build.sh" >&2
bench="$build/tests/psw_engine_bench"
if [[ ! -x "$bench" ]]; then
  echo "bench-engine.sh: $bench was not built (needs Google Benchmark and PSW_BUILD_BENCH=ON)" >&2
  exit 1
fi
json=$(mktemp)
trap 'rm -f "$json"' EXIT
# One core: pin the process when taskset exists.
pin=()
if command -v taskset >/dev/null 2>&1; then pin=(taskset -c 0); fi
"${pin[@]}" "$bench" --benchmark_format=json --benchmark_out="$json" --benchmark_out_format=json \
  --benchmark_repetitions=5 --benchmark_min_time=0.5 >/dev/null

echo "# Event engine throughput"
echo
echo "Produced by \`scripts/bench-engine.sh\` (Google Benchmark, \`tests/bench/engine_bench.cpp\`,"
echo "pinned to one core with \`${pin[*]:-no pinning}\`); do not edit by hand. Target: at"
echo "least 10 million events per second on one core."
echo
"$root/scripts/environment.sh"
echo
python3 - "$json" <<'PY'
import json
import sys

WHAT = {
    "BM_Hold": ("hold", "run; schedule its successor at now + Exp(mean) (delays from a table)"),
    "BM_HoldRng": ("hold, live RNG", "the same, drawing the delay with mt19937_64 + log"),
    "BM_ScheduleCancel": ("schedule + cancel",
                          "run; schedule its successor; cancel its previous timeout; schedule a new one"),
}


def mean_text(ns):
    return f"{ns // 1_000_000} ms" if ns % 1_000_000 == 0 else f"{ns // 1_000} us"


with open(sys.argv[1]) as f:
    data = json.load(f)
runs = {}
for b in data["benchmarks"]:
    name = b.get("run_name", b["name"])
    entry = runs.setdefault(name, {"reps": []})
    if b.get("run_type") == "aggregate":
        if b.get("aggregate_name") == "median":
            entry["median"] = b
    else:
        entry["reps"].append(b)

print("| case | events pending | mean delay | events/s (median of 5) | min .. max | events run/s | one event |")
print("|---|---:|---:|---:|---:|---:|---|")
for name, r in runs.items():
    family, n, mean = name.split("/")[:3]
    label, what = WHAT.get(family, (family, ""))
    pending = int(n) * (2 if family == "BM_ScheduleCancel" else 1)  # + a timeout per flow
    med = r["median"]["items_per_second"] / 1e6
    reps = [x["items_per_second"] / 1e6 for x in r["reps"]]
    executed = r["median"].get("executed", 0) / 1e6
    print(f"| {label} | {pending:,} | {mean_text(int(mean))} | **{med:.1f} M** "
          f"| {min(reps):.1f} .. {max(reps):.1f} M | {executed:.1f} M | {what} |")
print()
print("events/s counts the events scheduled and retired per second of one core: run, or")
print("cancelled and dropped without running. In the hold cases every event runs; in")
print("schedule + cancel half of them run (events run/s) and half are cancelled timeouts.")
PY
