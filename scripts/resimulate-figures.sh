#!/usr/bin/env bash
# The simulated series of the paper's figures on the H200 (results/gpu/figures/), computed by this
# checkout's simulator against the recorded runs (no GPU needed: psw validate --measured takes
# each run's measured side as recorded and simulates the same workload here). Use it when the
# simulator's model or the adopted profiles change: the figures then show the current prediction
# beside the same measurements. The runs' own simulated values are kept in their raw folders.
#
# The runs: three device calls on one machine of 2026-12-03 (fc-v1252), every request's input in
# shared memory (psw load --shared-memory, Note [Inputs in shared memory]):
# results/gpu/raw-serve-2026-12-03-shm-all-a (stop-and-start, two processes, one process, MPS and
# the PipeSwitch family's pipelines), -shm-all-b (ready, PipeSwitch, time-sliced, unified memory,
# the memory ablations) and -shm-fig6 (Figure 6's closed loop of ready, PipeSwitch, MPS and
# stop-and-start). Each call's own request path (its serving-h200-from-load.yaml, gpu-serve.sh
# part calibrate-load: a 40 s Poisson run of its own, not a figure's; Figure 6's closed loop one
# fitted on one of its cases, below) and the adopted hardware
# profile (configs/hardware/h200-pcie5.yaml: its estimated costs fitted by
# scripts/calibrate-h200.sh on other runs, one process's partly on this one, below). A fresh
# process's start moves by up to 60% between machines (README, "A fresh process's start"):
# stop-and-start and two processes, in Figures 5, 6 and 9, are simulated with the start adopted
# from the machine's own calibrate-start run (-shm-all-a/validation/calibrate-start, a run of its
# own before the figures', Note [Adopting a worker start]) over the adopted profile. So each
# simulated value is a prediction for a run no fit saw (one process's abort and host times are
# fitted on three runs of 2026-12-04, Note [Training abort]; -shm-all-a's one-process run measured
# its last request 40-52 ms late, waiting for the regions psw load then released early, Note
# [Shared memory senders]).
# Figure 6's ready and PipeSwitch were measured again on 2026-12-04 (raw-serve-2026-12-04-fig6,
# another machine): those cases are simulated with the same closed-loop path, held out, into
# OUT/heldout-fig6-<mechanism>-<cycle_ms>/ (not drawn).
# Writes OUT/<mechanism>/ and OUT/fig6-<mechanism>-<cycle_ms>/ (validation.csv and the rest of
# psw validate's outputs) and OUT/environment.md. Then draw with
#   /usr/bin/python3 scripts/gpu_figures.py --resimulated OUT --out results/gpu/figures \
#     results/gpu/raw-serve-2026-12-03-shm-all-a results/gpu/raw-serve-2026-12-03-shm-all-b \
#     results/gpu/raw-serve-2026-12-03-shm-fig6
# (matplotlib; the CI machine has none).
#
#   scripts/resimulate-figures.sh [BUILD_DIR] [OUT]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
psw=${1:-$root/build}/cli/psw
out=${2:-$root/results/gpu/figures/resimulated}
runs=$root/results/gpu
raws=("$runs/raw-serve-2026-12-03-shm-all-a" "$runs/raw-serve-2026-12-03-shm-all-b")
fig6_run=$runs/raw-serve-2026-12-03-shm-fig6
hardware=$root/configs/hardware/h200-pcie5.yaml
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
# The machine's start (Note [Adopting a worker start]) over the adopted profile, for the mechanisms
# that start a process per task.
start_run=${raws[0]}
machine_start=$work/h200-start.yaml
"$psw" calibrate --config "$(configure_figures stop-and-start "$hardware" "$start_run/serving-h200-from-load.yaml")" \
  --measured "$start_run/validation/calibrate-start" --cost startup.worker_start --hardware "$hardware" \
  --out "$machine_start" > "$out/machine-start.txt" 2>&1 || { cat "$out/machine-start.txt"; exit 1; }
sed -i "s#$root/##g; /wrote /d" "$out/machine-start.txt"
hardware_of() {  # MECHANISM
  case $1 in stop-and-start | two-processes) echo "$machine_start" ;; *) echo "$hardware" ;; esac
}
for raw in "${raws[@]}"; do
  for measured in "$raw"/validation/figures-*; do
    mechanism=${measured##*/figures-}
    revalidate "$(configure_figures "$mechanism" "$(hardware_of "$mechanism")" "$raw/serving-h200-from-load.yaml")" \
      "$measured" "$mechanism"
  done
done
# Figure 6's closed loop sends one request at a time, back to back: its protocol is half the
# Poisson calibration's (0.44 against 1.07 ms median on this machine; the client's thread never
# sleeps between requests). Its path is fitted on one case, ready at 1 s cycles (no switch), and
# predicts the other eleven.
fig6_path_case=$fig6_run/validation/fig6-ready-1000
fig6_serving=$work/serving-h200-closed-loop.yaml
"$psw" profile-serving --from-load "$fig6_path_case/measured/requests.csv" --training-from-validation "$fig6_path_case" \
  --training-model resnet152 --training-batch 8 --name h200-serve-closed-loop --device "NVIDIA H200" \
  --out "$fig6_serving" > /dev/null
for measured in "$fig6_run"/validation/fig6-*; do
  case=${measured##*/fig6-}  # MECHANISM-CYCLE_MS
  mechanism=${case%-*} cycle_ms=${case##*-}
  rounds=$(sed -n 's/^  rounds: //p' "$measured/config.resolved.yaml")
  revalidate "$(configure_fig6 "$mechanism" "$cycle_ms" "$rounds" "$(hardware_of "$mechanism")" \
    "$fig6_serving")" "$measured" "fig6-$case"
done
for measured in "$runs"/raw-serve-2026-12-04-fig6/validation/fig6-*; do
  case=${measured##*/fig6-}
  mechanism=${case%-*} cycle_ms=${case##*-}
  rounds=$(sed -n 's/^  rounds: //p' "$measured/config.resolved.yaml")
  revalidate "$(configure_fig6 "$mechanism" "$cycle_ms" "$rounds" "$hardware" "$fig6_serving")" "$measured" \
    "heldout-fig6-$case"
done
bash "$root/scripts/environment.sh" > "$out/environment.md"
echo "resimulate-figures: wrote $out"
