#!/usr/bin/env bash
# Calibrate on one run, validate on others (Note [Validating again]), from the H200
# runs already in results/gpu/, on any machine (no GPU: the measurements are recorded, the
# simulator runs here):
#  1. the request path fitted from the psw load run of h200-validate under pipeswitch in
#     raw-serve-2026-12-02-validate-fig6 (after Note [Message memory], with a warm-up; psw
#     profile-serving --from-load; the training step from raw-figures-2026-12-02-a/
#     serving-h200.yaml, measured on the same machine the same morning)
#     -> results/profiles/serving-h200-from-load.yaml
#  2. the simulator with that profile against the other recorded runs:
#       the same machine:  h200-validate under ready and time-sliced, and the Azure LLM 2023
#                          replay for 600 s (raw-serve-2026-12-02-replay-llm);
#       the afternoon's:   h200-burst (Poisson arrivals at 12/s, raw-serve-2026-12-02-burst-fig6;
#                          its p99 is the replay's miss in a controlled run, README);
#       another machine:   the 600 s Azure Functions 2019 replay (raw-serve-2026-12-02-replay,
#                          measured before Note [Message memory], so its gRPC path is the
#                          slower one of then)
#     -> results/validation/<run>-from-load/
#  and, for the record, the pipeswitch run itself (the run the profile is fitted on).
#  3. one replay's request path against the other replay on the same machine (2026-12-02,
#     13:48-14:05 UTC): fitted from the 5-minute Azure Functions replay
#     (raw-serve-2026-12-02-replay-azure2019-c) and validated on the 480 s LLM replay
#     (raw-serve-2026-12-02-replay-llm-d), and the reverse, each with the training step
#     profile-serving measured on that machine -> results/profiles/serving-h200-from-<run>.yaml,
#     results/validation/<validated run>-from-<fitted run>/ (each replay with its own path too)
#  4. the morning machine's path of 1. with the protocol's growth per request in flight fitted on
#     that LLM replay (Note [Protocol under load]) -> results/profiles/serving-h200-from-load-
#     with-growth.yaml, against the morning's LLM replay and the afternoon's burst run
#     -> results/validation/{replay-llm,h200-burst}-from-load-with-growth/
#  5. the machine of 2026-12-02 16:46-17:07 UTC: the request path, the protocol's growth and the
#     training step fitted on its 40 s burst run (raw-serve-2026-12-02-held-c: psw
#     profile-serving --from-load, the step from that run's job alone,
#     --training-from-validation), against the two replays that followed on the same machine (the
#     LLM replay's 510 s, raw-serve-2026-12-02-replay-llm-e; 8 minutes of the Functions day,
#     raw-serve-2026-12-02-replay-azure2019-d), which no fit saw
#     -> results/profiles/serving-h200-from-burst-c.yaml,
#        results/validation/{replay-llm-e,replay-azure2019-d,h200-burst-c}-from-burst-c/
#  6. the same three runs with the request path psw profile-serving measured at the start of
#     that machine's runs (raw-serve-2026-12-02-held-c/serving-h200.yaml, 60 requests per
#     model), as the device's own validations simulated them, but with the simulator as it is now
#     (theirs was the first form of Note [Paused in place])
#     -> results/validation/{h200-burst-c,replay-llm-e,replay-azure2019-d}-from-calibration-c/
#  7. the two machines of 2026-12-02 21:19-21:44 UTC: the request path gpu-serve.sh part
#     calibrate-load fitted on machine A (a 40 s burst run through psw load,
#     raw-serve-2026-12-02-load-llm), against the LLM replay that followed on A (400 s) and the
#     Functions replay on machine B (7 minutes, raw-serve-2026-12-02-replay-azure2019-e); and B's
#     own path fitted on that replay, against A's two runs, so that what moved between the
#     machines (protocol, server part, training step) is measured both ways
#     -> results/profiles/serving-h200-from-load-{f,azure2019-e}.yaml,
#        results/validation/{calibrate-load-f,replay-llm-f,replay-azure2019-e}-from-{load-f,azure2019-e}/
#  8. the third machine of that evening (22:12-22:16 UTC): calibrate-load at 30 requests/s
#     (raw-serve-2026-12-02-rate30; enough overlapping requests to fit the protocol's growth per
#     request in flight), against the 200 s of the LLM replay that followed on it; and machine
#     A's path of 7. (fitted at 12/s, no growth) with that growth, against A's 400 s LLM replay
#     (growth held out across machines)
#     -> results/profiles/serving-h200-from-rate30.yaml, serving-h200-from-load-f-with-growth.yaml,
#        results/validation/{calibrate-load-rate30,replay-llm-rate30}-from-rate30/,
#        results/validation/replay-llm-f-from-load-f-with-growth/; and A's path with the growth
#     the LLM replay of 3. fitted (raw-serve-2026-12-02-replay-llm-d)
#     -> serving-h200-from-load-f-with-llm-growth.yaml,
#        results/validation/replay-llm-f-from-load-f-with-llm-growth/
#  9. the machines of 2026-12-03 06:32-07:04 UTC: the figures' first machine
#     (raw-figures-2026-12-03-a), its ready, PipeSwitch, per-layer and grouped runs simulated
#     with the request path psw profile-serving measured in the same call (one sending thread)
#     instead of calibrate-load's, which resimulate-figures.sh uses: what the path alone moves in
#     the figures
#     -> results/validation/figures-<mechanism>-g-from-calibration-g/; and the third machine's
#     calibrate-load at 30/s (raw-serve-2026-12-03-replay-llm) against the 300 s of the LLM replay
#     that followed, with its own growth, with the growth of 3.'s LLM replay, and (for the record,
#     a bound: fitted on the run it is compared with) with the replay's own path
#     -> results/profiles/serving-h200-from-{rate30-g,rate30-g-with-llm-growth,llm-g}.yaml,
#        results/validation/{calibrate-load-g,replay-llm-g}-from-rate30-g/,
#        results/validation/replay-llm-g-from-{rate30-g-with-llm-growth,llm-g}/
#  10. the machine of 2026-12-04 05:50 UTC, every input in shared memory
#     (Note [Inputs in shared memory]): calibrate-load at 30/s (raw-serve-2026-12-04-replay-llm-shm)
#     against the 600 s of the LLM replay that followed in the same call
#     -> results/profiles/serving-h200-from-rate30-shm.yaml,
#        results/validation/replay-llm-shm-from-rate30-shm/
#  11. the machine of 2026-12-04 11:49 UTC, every input in shared memory: calibrate-load at 30/s
#     (raw-serve-2026-12-04-replay-azure2019-shm) against the 600 s of the Functions 2019 replay
#     that followed in the same call -> results/profiles/serving-h200-from-rate30-shm-b.yaml,
#        results/validation/replay-azure2019-shm-from-rate30-shm-b/
#
#   scripts/revalidate-h200.sh [BUILD_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
psw=${1:-$root/build}/cli/psw
runs=$root/results/gpu
validate_run=$runs/raw-serve-2026-12-02-validate-fig6/validation
llm_replay_run=$runs/raw-serve-2026-12-02-replay-llm/validation
replay_run=$runs/raw-serve-2026-12-02-replay/validation
burst_run=$runs/raw-serve-2026-12-02-burst-fig6/validation
profile=$root/results/profiles/serving-h200-from-load.yaml
work=$(mktemp -d)

"$psw" profile-serving --from-load "$validate_run/h200-validate-pipeswitch/measured/requests.csv" \
  --training-from "$runs/raw-figures-2026-12-02-a/serving-h200.yaml" --name h200-from-load --device "NVIDIA H200" \
  --out "$profile"

# The configs as the GPU runs had them (scripts/gpu-serve.sh: the mechanism, the replays' ten
# minutes), with this profile as `serving:`.
configure() {  # SOURCE MECHANISM OUT [sed expression]
  sed "s/^mechanism: .*/mechanism: $2/; /^serving:/d; ${4:-}" "$1" > "$3"
  echo "serving: $profile" >> "$3"
}
# Beside the originals, so that their relative paths (profiles, trace) resolve as they do there.
experiments=$root/configs/experiments
trap 'rm -rf "$work" "$experiments"/.revalidate-*.yaml "$experiments"/.figures-*.yaml' EXIT
out=$root/results/validation
# One recorded run simulated again with $profile: SOURCE_CONFIG MEASURED_FOLDER OUT_NAME [sed expression]
revalidate() {
  local config="$experiments/.revalidate-$3.yaml"
  configure "$1" pipeswitch "$config" "${4:-}"
  "$psw" validate --config "$config" --measured "$2" --out "$out/$3"
}
for mechanism in pipeswitch ready time-sliced; do
  configure "$experiments/h200-validate.yaml" "$mechanism" "$experiments/.revalidate-$mechanism.yaml"
  "$psw" validate --config "$experiments/.revalidate-$mechanism.yaml" --measured "$validate_run/h200-validate-$mechanism" \
    --out "$out/h200-validate-$mechanism-from-load"
done
llm_600s="s/^  window_s: .*/  window_s: 600/"
revalidate "$experiments/h200-burst.yaml" "$burst_run/h200-burst" h200-burst-from-load
revalidate "$experiments/replay-azure-llm2023.yaml" "$llm_replay_run/replay-llm" replay-llm-from-load "$llm_600s"
revalidate "$experiments/replay-azure2019.yaml" "$replay_run/replay-azure2019" replay-azure2019-from-load \
  "s/^  minutes: .*/  minutes: 10/"
# 3. The two replays of one machine, each with the other's request path.
azure2019_c_serving=$runs/raw-serve-2026-12-02-replay-azure2019-c/serving-h200.yaml
fn_run=$runs/raw-serve-2026-12-02-replay-azure2019-c/validation/replay-azure2019
llm_run=$runs/raw-serve-2026-12-02-replay-llm-d/validation/replay-llm
for fitted in azure2019-c llm-d; do
  [[ $fitted == azure2019-c ]] && from=$fn_run || from=$llm_run
  "$psw" profile-serving --from-load "$from/measured/requests.csv" --training-from "$azure2019_c_serving" \
    --name "h200-from-$fitted" --device "NVIDIA H200" --out "$root/results/profiles/serving-h200-from-$fitted.yaml"
done
# Each replay with each path: the other's (held out) and its own (for the record: the fitted run).
for fitted in azure2019-c llm-d; do
  profile=$root/results/profiles/serving-h200-from-$fitted.yaml
  revalidate "$experiments/replay-azure-llm2023.yaml" "$llm_run" "replay-llm-d-from-$fitted" "s/^  window_s: .*/  window_s: 480/"
  revalidate "$experiments/replay-azure2019.yaml" "$fn_run" "replay-azure2019-c-from-$fitted" "s/^  minutes: .*/  minutes: 5/"
done
# 4. Note [Protocol under load] held out across machines: the morning machine's own request path
# (1.) with the protocol's growth per request in flight fitted on the LLM replay of 3.
# (raw-serve-2026-12-02-replay-llm-d),
# against the morning's LLM replay and the afternoon's burst run, which no fit of it saw.
"$psw" profile-serving --from-load "$validate_run/h200-validate-pipeswitch/measured/requests.csv" \
  --training-from "$runs/raw-figures-2026-12-02-a/serving-h200.yaml" \
  --protocol-growth-from "$root/results/profiles/serving-h200-from-llm-d.yaml" --name h200-from-load-with-growth \
  --device "NVIDIA H200" --out "$root/results/profiles/serving-h200-from-load-with-growth.yaml"
profile=$root/results/profiles/serving-h200-from-load-with-growth.yaml
revalidate "$experiments/replay-azure-llm2023.yaml" "$llm_replay_run/replay-llm" replay-llm-from-load-with-growth "$llm_600s"
revalidate "$experiments/h200-burst.yaml" "$burst_run/h200-burst" h200-burst-from-load-with-growth
# 5. Calibrated on a short controlled run, validated on the long replays of the same machine.
burst_c=$runs/raw-serve-2026-12-02-held-c/validation/h200-burst
"$psw" profile-serving --from-load "$burst_c/measured/requests.csv" --training-from-validation "$burst_c" \
  --training-model resnet152 --name h200-from-burst-c --device "NVIDIA H200" \
  --out "$root/results/profiles/serving-h200-from-burst-c.yaml"
# The three runs of raw-serve-2026-12-02-held-c's machine with $profile: SUFFIX of the output
# folders.
held_c_machine_runs() {
  revalidate "$experiments/replay-azure-llm2023.yaml" "$runs/raw-serve-2026-12-02-replay-llm-e/validation/replay-llm" \
    "replay-llm-e-from-$1" "s/^  window_s: .*/  window_s: 510/"
  revalidate "$experiments/replay-azure2019.yaml" "$runs/raw-serve-2026-12-02-replay-azure2019-d/validation/replay-azure2019" \
    "replay-azure2019-d-from-$1" "s/^  minutes: .*/  minutes: 8/"
  revalidate "$experiments/h200-burst.yaml" "$burst_c" "h200-burst-c-from-$1"
}
profile=$root/results/profiles/serving-h200-from-burst-c.yaml
held_c_machine_runs burst-c
# 6. The same runs with the profile-serving calibration of their machine's first call.
profile=$runs/raw-serve-2026-12-02-held-c/serving-h200.yaml
held_c_machine_runs calibration-c
# 7. The evening of 2026-12-02: machine A's burst path against A's LLM replay and B's Functions
# replay, and B's replay's own path (its step from that run's alone windows) against A's runs.
machine_a=$runs/raw-serve-2026-12-02-load-llm/validation
machine_b=$runs/raw-serve-2026-12-02-replay-azure2019-e/validation/replay-azure2019
for fitted in load-f azure2019-e; do
  [[ $fitted == load-f ]] && from=$machine_a/calibrate-load || from=$machine_b
  "$psw" profile-serving --from-load "$from/measured/requests.csv" --training-from-validation "$from" \
    --training-model resnet152 --name "h200-from-$fitted" --device "NVIDIA H200" \
    --out "$root/results/profiles/serving-h200-from-$fitted.yaml"
  profile=$root/results/profiles/serving-h200-from-$fitted.yaml
  revalidate "$experiments/h200-burst.yaml" "$machine_a/calibrate-load" "calibrate-load-f-from-$fitted"
  revalidate "$experiments/replay-azure-llm2023.yaml" "$machine_a/replay-llm" "replay-llm-f-from-$fitted" \
    "s/^  window_s: .*/  window_s: 400/"
  revalidate "$experiments/replay-azure2019.yaml" "$machine_b" "replay-azure2019-e-from-$fitted" "s/^  minutes: .*/  minutes: 7/"
done
# 8. The growth fitted where requests overlap: machine C's calibration at 30/s against its own
# LLM replay, and its growth with machine A's path against A's replay.
rate30=$runs/raw-serve-2026-12-02-rate30/validation
"$psw" profile-serving --from-load "$rate30/calibrate-load/measured/requests.csv" \
  --training-from-validation "$rate30/calibrate-load" --training-model resnet152 --name h200-from-rate30 \
  --device "NVIDIA H200" --out "$root/results/profiles/serving-h200-from-rate30.yaml"
profile=$root/results/profiles/serving-h200-from-rate30.yaml
revalidate "$experiments/h200-burst.yaml" "$rate30/calibrate-load" calibrate-load-rate30-from-rate30 \
  "s/rate_per_s: 12,/rate_per_s: 30,/"
revalidate "$experiments/replay-azure-llm2023.yaml" "$rate30/replay-llm" replay-llm-rate30-from-rate30 \
  "s/^  window_s: .*/  window_s: 200/"
"$psw" profile-serving --from-load "$machine_a/calibrate-load/measured/requests.csv" \
  --training-from-validation "$machine_a/calibrate-load" --training-model resnet152 \
  --protocol-growth-from "$profile" --name h200-from-load-f-with-growth --device "NVIDIA H200" \
  --out "$root/results/profiles/serving-h200-from-load-f-with-growth.yaml"
profile=$root/results/profiles/serving-h200-from-load-f-with-growth.yaml
revalidate "$experiments/replay-azure-llm2023.yaml" "$machine_a/replay-llm" replay-llm-f-from-load-f-with-growth \
  "s/^  window_s: .*/  window_s: 400/"
# ... and the growth the LLM replay of 3. fitted (another machine, a replay's own bursts).
"$psw" profile-serving --from-load "$machine_a/calibrate-load/measured/requests.csv" \
  --training-from-validation "$machine_a/calibrate-load" --training-model resnet152 \
  --protocol-growth-from "$root/results/profiles/serving-h200-from-llm-d.yaml" --name h200-from-load-f-with-llm-growth \
  --device "NVIDIA H200" --out "$root/results/profiles/serving-h200-from-load-f-with-llm-growth.yaml"
profile=$root/results/profiles/serving-h200-from-load-f-with-llm-growth.yaml
revalidate "$experiments/replay-azure-llm2023.yaml" "$machine_a/replay-llm" replay-llm-f-from-load-f-with-llm-growth \
  "s/^  window_s: .*/  window_s: 400/"
# 9. The morning of 2026-12-03: the figures' first machine with profile-serving's path of the
# same call, and the third machine's 30/s calibration against its LLM replay.
source "$root/scripts/figures_lib.sh"
figures_g=$runs/raw-figures-2026-12-03-a
for mechanism in ready pipeswitch per-layer-pipeline grouped-transmission; do
  config=$(configure_figures "$mechanism" "$root/configs/hardware/h200-pcie5.yaml" "$figures_g/serving-h200.yaml")
  "$psw" validate --config "$config" --measured "$figures_g/validation/figures-$mechanism" \
    --out "$out/figures-$mechanism-g-from-calibration-g"
done
replay_llm_g=$runs/raw-serve-2026-12-03-replay-llm/validation
llm_300s="s/^  window_s: .*/  window_s: 300/"
for fitted in rate30-g rate30-g-with-llm-growth llm-g; do
  case $fitted in
    rate30-g) from=$replay_llm_g/calibrate-load growth=() ;;
    rate30-g-with-llm-growth)
      from=$replay_llm_g/calibrate-load growth=(--protocol-growth-from "$root/results/profiles/serving-h200-from-llm-d.yaml") ;;
    llm-g) from=$replay_llm_g/replay-llm growth=() ;;
  esac
  "$psw" profile-serving --from-load "$from/measured/requests.csv" --training-from-validation "$from" \
    --training-model resnet152 "${growth[@]}" --name "h200-from-$fitted" --device "NVIDIA H200" \
    --out "$root/results/profiles/serving-h200-from-$fitted.yaml"
  profile=$root/results/profiles/serving-h200-from-$fitted.yaml
  revalidate "$experiments/replay-azure-llm2023.yaml" "$replay_llm_g/replay-llm" "replay-llm-g-from-$fitted" "$llm_300s"
done
profile=$root/results/profiles/serving-h200-from-rate30-g.yaml
revalidate "$experiments/h200-burst.yaml" "$replay_llm_g/calibrate-load" calibrate-load-g-from-rate30-g \
  "s/rate_per_s: 12,/rate_per_s: 30,/"
# 10. The LLM replay with its inputs in shared memory, the path of the same call.
replay_llm_shm=$runs/raw-serve-2026-12-04-replay-llm-shm/validation
"$psw" profile-serving --from-load "$replay_llm_shm/calibrate-load/measured/requests.csv" \
  --training-from-validation "$replay_llm_shm/calibrate-load" --training-model resnet152 --name h200-from-rate30-shm \
  --device "NVIDIA H200" --out "$root/results/profiles/serving-h200-from-rate30-shm.yaml"
profile=$root/results/profiles/serving-h200-from-rate30-shm.yaml
revalidate "$experiments/replay-azure-llm2023.yaml" "$replay_llm_shm/replay-llm" replay-llm-shm-from-rate30-shm "$llm_600s"
# 11. The Functions replay with its inputs in shared memory, the path of the same call
# (the config's ten minutes, as the run had them).
replay_azure2019_shm=$runs/raw-serve-2026-12-04-replay-azure2019-shm/validation
"$psw" profile-serving --from-load "$replay_azure2019_shm/calibrate-load/measured/requests.csv" \
  --training-from-validation "$replay_azure2019_shm/calibrate-load" --training-model resnet152 --name h200-from-rate30-shm-b \
  --device "NVIDIA H200" --out "$root/results/profiles/serving-h200-from-rate30-shm-b.yaml"
profile=$root/results/profiles/serving-h200-from-rate30-shm-b.yaml
revalidate "$experiments/replay-azure2019.yaml" "$replay_azure2019_shm/replay-azure2019" replay-azure2019-shm-from-rate30-shm-b
# 12. The runs of 2026-12-04 18:38-18:49 UTC, one machine, psw serve driven by the scheduling
# policy (Note [Server policy]; every server's decisions logged and replayed without a
# difference: results/gpu/2026-12-04-h200-decisions.md): Figure 5's four mechanisms and a 180 s
# Functions replay, with inputs in shared memory, simulated with the request path of the same
# machine's calibrate-load (the third of its calls; the figures' own call simulated with
# serving-h200-from-rate30-shm-b, another machine's).
decisions=$runs/raw-serve-2026-12-04-decisions-replay/validation
"$psw" profile-serving --from-load "$decisions/calibrate-load/measured/requests.csv" \
  --training-from-validation "$decisions/calibrate-load" --training-model resnet152 --name h200-from-rate30-shm-c \
  --device "NVIDIA H200" --out "$root/results/profiles/serving-h200-from-rate30-shm-c.yaml"
profile=$root/results/profiles/serving-h200-from-rate30-shm-c.yaml
revalidate "$experiments/replay-azure2019.yaml" "$decisions/replay-azure2019" replay-azure2019-shm-c-from-rate30-shm-c \
  "s/^  minutes: .*/  minutes: 3/"
for mechanism in ready pipeswitch mps stop-and-start; do
  edit=
  [[ $mechanism != stop-and-start ]] || edit="s/interval_ms: [0-9]*, count: [0-9]*/interval_ms: 12000, count: 3/"
  configure "$experiments/h200-figures.yaml" "$mechanism" "$experiments/.figures-$mechanism.yaml" "$edit"
  "$psw" validate --config "$experiments/.figures-$mechanism.yaml" \
    --measured "$runs/raw-serve-2026-12-04-decisions-fig5/validation/figures-$mechanism" \
    --out "$out/figures-$mechanism-decisions-from-rate30-shm-c"
done
# Where the simulator of these comparisons ran (the measurements' machine is in each run's
# results/gpu/raw-serve-*/environment.md).
bash "$root/scripts/environment.sh" > "$out/from-load-environment.md"
