#!/usr/bin/env bash
# Simulated reproduction of the PipeSwitch paper's Figures 5-9: builds psw, runs the five
# figure sweeps (configs/experiments/figN.yaml) into results/sim/figN/sweep.csv, and the
# cross-validation sweep from the H200-measured profiles (h200-measured.yaml), plots
# results/sim/fig5.png ... fig9.png (scripts/plot.py) and writes results/sim/README.md
# (scripts/sim_report.py), which sets the numbers beside the authors' artifact re-run.
#
# Environment: PSW_BUILD_DIR (an existing or new build folder, built as it is configured;
# default build-sim/, configured with only what the simulator needs: no LibTorch executor,
# no tests, no benchmarks, which keeps a fresh build to a minute or two on 2 cores),
# PSW_JOBS (parallel points, default nproc), PYTHON (default /usr/bin/python3, Debian's,
# which has matplotlib).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
configure=()
if [[ -n "${PSW_BUILD_DIR:-}" ]]; then
  build=$PSW_BUILD_DIR
else
  build=$root/build-sim
  if [[ ! -f "$build/CMakeCache.txt" ]]; then
    configure=(-DCMAKE_DISABLE_FIND_PACKAGE_Torch=ON -DPSW_BUILD_TESTS=OFF -DPSW_BUILD_BENCH=OFF)
  fi
fi
jobs=${PSW_JOBS:-$(nproc)}
python=${PYTHON:-/usr/bin/python3}
[[ -x "$python" ]] || python=python3
out="$root/results/sim"
# The paper's figures, then the cross-validation against the executor's H200 measurements.
figures=(fig5 fig6 fig7 fig8 fig9 h200-measured)
start=$SECONDS
step() { printf '[%3ds] %s\n' "$((SECONDS - start))" "$*"; }

"$python" -c 'import matplotlib' 2>/dev/null ||
  { echo "run-experiments.sh: $python has no matplotlib (set PYTHON=...)" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

step "building psw into $build"
if ! PSW_BUILD_DIR="$build" "$root/scripts/build.sh" "${configure[@]}" >"$tmp/build.log" 2>&1; then
  tail -n 40 "$tmp/build.log" >&2
  echo "run-experiments.sh: build failed (full log above, last 40 lines)" >&2
  exit 1
fi
psw="$build/cli/psw"

mkdir -p "$out"
for fig in "${figures[@]}"; do
  step "sweep $fig ($jobs jobs)"
  "$psw" sweep --config "$root/configs/experiments/$fig.yaml" --out "$tmp/$fig" --jobs "$jobs" \
    >"$tmp/$fig.log" 2>&1 || { cat "$tmp/$fig.log" >&2; exit 1; }
  mkdir -p "$out/$fig"
  rm -rf "$out/$fig"/point-*
  # Keep only sweep.csv: the point folders are large.
  cp "$tmp/$fig/sweep.csv" "$out/$fig/sweep.csv"
  echo "  $(($(wc -l < "$out/$fig/sweep.csv") - 1)) points -> $out/$fig/sweep.csv"
done

step "plotting"
"$python" "$root/scripts/plot.py" "$out" | sed 's/^/  /'
step "writing the report"
PSW="$psw" "$python" "$root/scripts/sim_report.py" "$out" | sed 's/^/  /'
step "done: results/sim/{fig5..fig9}.png, results/sim/figN/sweep.csv, results/sim/README.md"
