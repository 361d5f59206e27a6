#!/usr/bin/env bash
# The simulated series of the paper's figures on the H200 (results/gpu/figures/), computed again by
# this checkout's simulator against the recorded runs (no GPU needed: psw validate --measured
# takes each run's measured side as recorded and simulates the same workload here). Use it when
# the simulator's model changes: the figures then show the current model beside the same
# measurements. The runs' own simulated values are kept in their raw folders.
#
# For every mechanism of the figures' runs (results/gpu/raw-figures-2026-12-01-a and -b, the
# folders results/gpu/figures/ is drawn from), with the runs' hardware profile (translated to the
# current time_slicing section: scripts/figures_lib.sh) and request path, writes
# OUT/<mechanism>/ (validation.csv and the rest of psw validate's outputs) and OUT/environment.md.
# Then draw with
#   scripts/gpu_figures.py --resimulated OUT --out results/gpu/figures RAW_A RAW_B
# (matplotlib; the CI machine has none). Before the share model of Note [Time slicing], this
# reproduced every recorded simulated value exactly; only time-sliced differs now.
#
#   scripts/resimulate-figures.sh [BUILD_DIR] [OUT]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
psw=${1:-$root/build}/cli/psw
out=${2:-$root/results/gpu/figures/resimulated}
runs=$root/results/gpu
raws=("$runs/raw-figures-2026-12-01-a" "$runs/raw-figures-2026-12-01-b")
serving=${raws[0]}/serving-h200.yaml
experiments=$root/configs/experiments
work=$(mktemp -d)
trap 'rm -rf "$work" "$experiments"/.figures-*.yaml' EXIT
source "$root/scripts/figures_lib.sh"

hardware=$work/h200-pcie5.yaml
translate_recorded_hardware "${raws[0]}/link-profile/h200-pcie5.yaml" "$hardware"
rm -rf "$out"
mkdir -p "$out"
for raw in "${raws[@]}"; do
  for measured in "$raw"/validation/figures-*; do
    mechanism=${measured##*/figures-}
    "$psw" validate --config "$(configure_figures "$mechanism" "$hardware" "$serving")" --measured "$measured" \
      --out "$out/$mechanism" > "$work/$mechanism.txt" 2>&1 || { cat "$work/$mechanism.txt"; exit 1; }
    echo "resimulate-figures: $mechanism against ${raw#"$root"/}"
  done
done
bash "$root/scripts/environment.sh" > "$out/environment.md"
echo "resimulate-figures: wrote $out"
