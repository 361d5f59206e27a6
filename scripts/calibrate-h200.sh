#!/usr/bin/env bash
# Issue 9's calibration of the estimated costs, from the H200 runs of 2026-12-01 recorded in
# results/gpu/ (no GPU needed: the measurements are recorded, the simulator runs here).
# Calibrate on one set of runs, validate on another (Note [Calibrating a cost]):
#  1. fit each cost to the run of the mechanism that pays it, in
#       raw-figures-2026-12-01-a (mps, time-sliced, stop-and-start) and
#       raw-figures-2026-12-01-b (the ablations),
#     chaining the fits into one profile: results/profiles/h200-calibrated.yaml (the link and the
#     request path as that call measured them: raw-figures-2026-12-01-a/link-profile/ and
#     serving-h200.yaml; its time_slicing translated to the current model, below);
#  2. validate it on raw-figures-2026-12-01-c, a later call on another machine of the same kind,
#     with the profile before and after calibration:
#     results/validation/calibrated/<mechanism>{,-uncalibrated}/, and a table in
#     results/validation/calibrated/README.md.
#
#   scripts/calibrate-h200.sh [BUILD_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
psw=${1:-$root/build}/cli/psw
runs=$root/results/gpu
fit_a=$runs/raw-figures-2026-12-01-a
fit_b=$runs/raw-figures-2026-12-01-b
held_out=$runs/raw-figures-2026-12-01-c
recorded_hardware=$fit_a/link-profile/h200-pcie5.yaml
serving=$fit_a/serving-h200.yaml
profile=$root/results/profiles/h200-calibrated.yaml
out=$root/results/validation/calibrated
experiments=$root/configs/experiments
work=$(mktemp -d)
trap 'rm -rf "$work" "$experiments"/.figures-*.yaml' EXIT

source "$root/scripts/figures_lib.sh"
configure() { configure_figures "$1" "$2" "$serving"; }  # MECHANISM HARDWARE

rm -rf "$out"
mkdir -p "$out"
hardware=$work/h200-pcie5.yaml
translate_recorded_hardware "$recorded_hardware" "$hardware"  # the fit below replaces its share
current=$hardware
# A cost no value of which gives the measurement (psw calibrate exits 2 and says so: another
# cost, or the mechanism's model, is wrong) stays as it was; its message goes into the table.
fit() {  # MECHANISM COST RUN_FOLDER
  local next=$work/after-$2.yaml
  if "$psw" calibrate --config "$(configure "$1" "$current")" --measured "$3/validation/figures-$1" --cost "$2" \
       --hardware "$current" --out "$next" > "$out/fit-$1.txt" 2>&1; then
    current=$next
  fi
  sed "s#$root/##g" "$out/fit-$1.txt" | grep -v "wrote " | tee "$out/fit-$1.txt.tmp"
  mv "$out/fit-$1.txt.tmp" "$out/fit-$1.txt"
}
fit no-memory-management memory.cuda_malloc_ns "$fit_b"
fit no-ipc-optimization memory.ipc_handle_open_ns "$fit_b"
fit no-pinned-memory link.pageable.bandwidth_bytes_per_s "$fit_b"
fit unified-memory unified_memory.page_fault_ns "$fit_b"
fit mps mps.inference_slowdown_percent "$fit_a"
fit time-sliced time_slicing.inference_share_percent "$fit_a"
fit stop-and-start startup.framework_start_ns "$fit_a"
mkdir -p "$(dirname "$profile")"
sed "s#$root/##g" "$current" > "$profile"  # the notes name the runs relative to the project
for mechanism in no-memory-management no-ipc-optimization no-pinned-memory unified-memory mps time-sliced stop-and-start pipeswitch; do
  "$psw" validate --config "$(configure "$mechanism" "$hardware")" --measured "$held_out/validation/figures-$mechanism" \
    --out "$out/$mechanism-uncalibrated" > /dev/null
  "$psw" validate --config "$(configure "$mechanism" "$profile")" --measured "$held_out/validation/figures-$mechanism" \
    --out "$out/$mechanism" > /dev/null
done
bash "$root/scripts/environment.sh" > "$out/environment.md"
python3 "$root/scripts/calibration_table.py" "$out" "$profile" > "$out/README.md"
echo "calibrate-h200: wrote $profile and $out/README.md"
