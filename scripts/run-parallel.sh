#!/usr/bin/env bash
# Parallel transmission through peer GPUs, simulated: builds psw, runs the sweep
# configs/experiments/parallel-gpus.yaml (every model with 1, 2, 4 and 8 H200s, the helpers
# idle or training) into results/sim/parallel/sweep.csv, and writes results/sim/parallel/README.md
# (scripts/parallel_report.py: the switch latency table per model, the plans beside their
# two-link pipeline bounds, and the environment).
#
# Environment: PSW_BUILD_DIR (an existing or new build folder; default build-sim/, configured
# with only what the simulator needs), PSW_JOBS (parallel points, default nproc), PYTHON
# (default /usr/bin/python3).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${PSW_BUILD_DIR:-$root/build-sim}
jobs=${PSW_JOBS:-$(nproc)}
python=${PYTHON:-/usr/bin/python3}
[[ -x "$python" ]] || python=python3
out="$root/results/sim/parallel"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if [[ ! -f "$build/CMakeCache.txt" ]]; then
  generator=()
  if command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi
  cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DCMAKE_DISABLE_FIND_PACKAGE_Torch=ON \
    -DPSW_BUILD_TESTS=OFF -DPSW_BUILD_BENCH=OFF >"$tmp/configure.log" 2>&1 || { cat "$tmp/configure.log" >&2; exit 1; }
fi
echo "building psw into $build"
cmake --build "$build" --target psw >"$tmp/build.log" 2>&1 || { tail -n 40 "$tmp/build.log" >&2; exit 1; }
psw="$build/cli/psw"

echo "sweep parallel-gpus ($jobs jobs)"
"$psw" sweep --config "$root/configs/experiments/parallel-gpus.yaml" --out "$tmp/sweep" --jobs "$jobs" \
  >"$tmp/sweep.log" 2>&1 || { cat "$tmp/sweep.log" >&2; exit 1; }
mkdir -p "$out"
cp "$tmp/sweep/sweep.csv" "$out/sweep.csv"
"$python" "$root/scripts/parallel_report.py" "$tmp/sweep" "$out"
echo "done: $out/sweep.csv, $out/README.md"
