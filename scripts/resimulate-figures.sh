#!/usr/bin/env bash
# The simulated series of the paper's figures on the H200 (results/gpu/figures/), computed by this
# checkout's simulator against the recorded runs (no GPU needed: psw validate --measured takes
# each run's measured side as recorded and simulates the same workload here). Use it when the
# simulator's model or the adopted profiles change: the figures then show the current prediction
# beside the same measurements. The runs' own simulated values are kept in their raw folders.
#
# The runs: results/gpu/raw-figures-2026-12-03-a and -b (Figures 5, 7-9; two fresh machines of
# 2026-12-03, the second simulated with the first's request path) and
# raw-serve-2026-12-02-validate-fig6 (Figure 6's closed loop, a machine of 2026-12-02); Figure 6's
# stop-and-start from raw-serve-2026-12-02-burst-fig6 (another machine, that afternoon: the first
# run's 2 and 5 s cycles had failed). Stop-and-start and two processes (Figures 5 and 9) and Figure
# 6's stop-and-start from raw-serve-2026-12-03-fresh, after Note [Fresh processes] changed.
# The simulator's profiles: the adopted hardware profile (configs/hardware/h200-pcie5.yaml: its
# estimated costs calibrated on 2026-12-01's and 2026-12-02's runs by scripts/calibrate-h200.sh,
# which none of these runs is) and the request path measured on the figures' first machine
# through psw load's client (raw-figures-2026-12-03-a/serving-h200-from-load.yaml, gpu-serve.sh
# part calibrate-load: a 40 s Poisson run of its own, not a figure's); Figure 6 with the paths
# its own machines measured (psw profile-serving). So each simulated value is a prediction for
# runs no fit saw.
# Writes OUT/<mechanism>/ and OUT/fig6-<mechanism>-<cycle_ms>/ (validation.csv and the rest of
# psw validate's outputs) and OUT/environment.md. Then draw with
#   /usr/bin/python3 scripts/gpu_figures.py --resimulated OUT --out results/gpu/figures \
#     results/gpu/raw-figures-2026-12-03-a results/gpu/raw-figures-2026-12-03-b \
#     results/gpu/raw-serve-2026-12-02-validate-fig6 --replacing results/gpu/raw-serve-2026-12-02-burst-fig6 \
#     --replacing results/gpu/raw-serve-2026-12-03-fresh
# (matplotlib; the CI machine has none).
#
#   scripts/resimulate-figures.sh [BUILD_DIR] [OUT]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
psw=${1:-$root/build}/cli/psw
out=${2:-$root/results/gpu/figures/resimulated}
runs=$root/results/gpu
raws=("$runs/raw-figures-2026-12-03-a" "$runs/raw-figures-2026-12-03-b")
# Stop-and-start and two processes measured again after Note [Fresh processes] changed (one
# process starting at a time; the runs above started two at once), with Figure 6's stop-and-start:
# these cases replace the others'. Simulated with the request path of the morning's first call.
fresh_run=$runs/raw-serve-2026-12-03-fresh
fresh_serving=$fresh_run/serving-h200-from-load-starts.yaml
fig6_run=$runs/raw-serve-2026-12-02-validate-fig6
fig6_later_run=$runs/raw-serve-2026-12-02-burst-fig6  # stop-and-start at 1, 2 and 5 s, with the wait
fig6_later_serving=$runs/raw-figures-2026-12-02-c/serving-h200.yaml
hardware=$root/configs/hardware/h200-pcie5.yaml
serving=${raws[0]}/serving-h200-from-load.yaml
fig6_serving=$runs/raw-figures-2026-12-02-a/serving-h200.yaml  # fig6_run's machine, psw profile-serving
experiments=$root/configs/experiments
work=$(mktemp -d)
trap 'rm -rf "$work" "$experiments"/.figures-*.yaml' EXIT
source "$root/scripts/figures_lib.sh"

revalidate() {  # CONFIG MEASURED_FOLDER NAME
  "$psw" validate --config "$1" --measured "$2" --out "$out/$3" > "$work/$3.txt" 2>&1 || { cat "$work/$3.txt"; exit 1; }
  echo "${2#"$root"/}" > "$out/$3/measured-from.txt"  # gpu_figures.py names it under the tables
  echo "resimulate-figures: $3 against ${2#"$root"/}"
}
rm -rf "$out"
mkdir -p "$out"
for measured in "$fresh_run"/validation/figures-*; do
  mechanism=${measured##*/figures-}
  revalidate "$(configure_figures "$mechanism" "$hardware" "$fresh_serving")" "$measured" "$mechanism"
done
for raw in "${raws[@]}"; do
  for measured in "$raw"/validation/figures-*; do
    mechanism=${measured##*/figures-}
    [[ -e $out/$mechanism ]] && continue  # measured again later
    revalidate "$(configure_figures "$mechanism" "$hardware" "$serving")" "$measured" "$mechanism"
  done
done
# The later run's cases replace the morning's (gpu_figures.py --replacing), simulated with the
# request path of its own machine (run c's calibration, the same afternoon).
for measured in "$fresh_run"/validation/fig6-* "$fig6_later_run"/validation/fig6-* "$fig6_run"/validation/fig6-*; do
  case=${measured##*/fig6-}  # MECHANISM-CYCLE_MS
  [[ -e $out/fig6-$case ]] && continue  # measured again later
  mechanism=${case%-*} cycle_ms=${case##*-}
  rounds=$(sed -n 's/^  rounds: //p' "$measured/config.resolved.yaml")
  case_serving=$fig6_serving
  [[ $measured == "$fig6_later_run"/* ]] && case_serving=$fig6_later_serving
  [[ $measured == "$fresh_run"/* ]] && case_serving=$fresh_serving
  revalidate "$(configure_fig6 "$mechanism" "$cycle_ms" "$rounds" "$hardware" "$case_serving")" "$measured" "fig6-$case"
done
bash "$root/scripts/environment.sh" > "$out/environment.md"
echo "resimulate-figures: wrote $out"
