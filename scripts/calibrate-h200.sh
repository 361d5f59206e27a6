#!/usr/bin/env bash
# The cross-validation's calibration of the estimated costs, from the H200 runs recorded in
# results/gpu/ (no GPU needed: the measurements are recorded, the simulator runs here).
# Calibrate on one set of runs, validate on another (Note [Calibrating a cost]):
#  1. fit each cost to the run of the mechanism that pays it, chaining the fits into one profile,
#     results/profiles/h200-calibrated.yaml (the link as raw-figures-2026-12-01-a measured it, its
#     time_slicing translated to the current model, below):
#       mps, time-sliced                  in raw-figures-2026-12-01-a (MPS's one number, for
#                                         training jobs without contention points);
#       stop-and-start                    in raw-serve-2026-12-03-fresh: process start, context,
#                                         framework start and each model's first forward adopted
#                                         from the server's split of its starts (Note [Adopting a
#                                         worker start]), the figures' stop-and-start being that
#                                         run's; the kill of the process replaced (Note [Worker
#                                         kill]) from raw-serve-2026-12-03-shm-figures, the one run
#                                         that timed it; runs before 2026-12-03 started two
#                                         processes at once (before Note [Fresh processes] changed)
#                                         and are not used;
#       mps.contention                    in raw-figures-2026-12-02-mps-batch-2, -c (batch 8) and
#                                         -mps-batch-32: one point per model and batch;
#       the memory ablations              in raw-figures-2026-12-02-b: the server as it is now;
#         unified memory's page fault and migration bandwidth together over that run and -c
#         (Note [Unified memory's two costs]).
#         Their runs of 2026-12-01 (raw-figures-2026-12-01-b, -c) were measured before Note
#         [Message memory] and cost 2-5 times more (no-ipc-optimization's ResNet-152 engine:
#         87 ms then, 14 ms on 2026-12-02); a fit to them overpriced these costs for today's code.
#         Then the three the server runs eagerly (no-ipc-optimization, no-memory-management,
#         no-pinned-memory): each model's host times adopted from raw-serve-2026-12-03-eager,
#         whose server measured them (Note [Adopting eager host times]); the analytic fits stay
#         for models without an entry;
#       one-process                       in raw-serve-2026-12-04-one-process-a, -b and -c, pooled
#                                         (three servers in a row, one call; Note [Pooled runs]):
#                                         each model's host times of its
#                                         per-tensor switch adopted (as the eager ablations'), then
#                                         training_abort_ns fitted to their latency (Note [Training
#                                         abort]); the runs of 2026-12-03 (-shm-all-a,
#                                         -shm-one-process, -b, -shm-figures) hold it out: their
#                                         last request waited 40-52 ms for psw load's released
#                                         regions (Note [Shared memory senders]), these runs' did not;
#                                         and raw-serve-2026-12-04-held-a and -b (a later call, a
#                                         machine started afresh) hold it out too;
#  2. validate it, with the profile before and after calibration, on runs no fit saw:
#       mps, time-sliced, pipeswitch                  on raw-figures-2026-12-02-a (a day later,
#                                                     another machine) and raw-figures-2026-12-01-c;
#       two-processes (the same fresh process per     on raw-serve-2026-12-03-fresh (the same call
#       task as stop-and-start)                       and machine as the start's adoption); Figure
#                                                     6's stop-and-start of that call is validated
#                                                     by scripts/resimulate-figures.sh;
#       stop-and-start, two-processes                 on raw-serve-2026-12-03-fresh-b (a third
#                                                     machine, the same afternoon) and -shm-figures
#                                                     (a fourth, inputs in shared memory);
#       mps, one-process, no-optimization, per-       on raw-serve-2026-12-03-shm-figures (inputs in
#       layer-pipeline, grouped-transmission          shared memory, the path of its own call);
#       every mechanism                               on raw-serve-2026-12-03-shm-all-a and -b (inputs
#                                                     in shared memory, one machine, two calls, each
#                                                     with the path of its own call; one-process's
#                                                     rows of -a are its fit's);
#       mps, time-sliced, pipeswitch, ready and       on raw-figures-2026-12-02-c (the afternoon
#       the memory ablations                          of 2026-12-02, another machine): the held-out
#                                                     run of the ablation fits after Note [Message
#                                                     memory] (unified memory's rows there are
#                                                     its fit's); and on raw-figures-2026-12-01-c,
#                                                     from before it: that shows the change;
#       unified-memory                                on raw-serve-2026-12-04-um-a, -b and -c (three
#                                                     servers in a row, a machine started afresh,
#                                                     after the fit: Note [Unified memory's two costs]);
#       unified-memory, pipeswitch, ready             on raw-serve-2026-12-03-eager (the eager
#                                                     adoption's run, no fit of theirs);
#       the eager ablations                           on raw-serve-2026-12-03-starts (the server
#                                                     as it is now, another machine), -eager-a and
#                                                     -eager-b (two more, that afternoon); the
#                                                     resimulated figures add raw-figures-2026-12-03-b;
#       pipeswitch, ready, time-sliced, unified-     on raw-serve-2026-12-03-shm (inputs in shared
#       memory and the eager ablations                memory, its request path fitted in the same
#                                                     call) and -shm-held (the same machine, one call
#                                                     later, with -shm's path: held out); pipeswitch
#                                                     and ready on -shm-unprimed and -raw-same-call
#                                                     (another machine: before the senders' warm-up
#                                                     through their regions, and raw inputs with the
#                                                     path of the same call);
#       mps, time-sliced with the training job at     on raw-figures-2026-12-02-mps-batch-N (same
#       batch 2, 4, 16 and 32                         machine as run c; Note [MPS contention]);
#                                                     MPS's contention points are fitted on batch
#                                                     2, 8 (run c) and 32, so 4 and 16 are its
#                                                     held-out runs (and 2026-12-02-a, 2026-12-01-c
#                                                     at batch 8, other machines)
#     Each run is simulated with the request path calibrated the same day (serving-h200.yaml
#     of raw-figures-2026-12-01-a for 2026-12-01's runs, of raw-figures-2026-12-02-a for
#     2026-12-02's morning runs, of raw-figures-2026-12-02-c for its afternoon's; the batch runs
#     were simulated with batch 8's training step, as they ran; the fresh runs of 2026-12-03 with
#     the path that morning's first call fitted on its own machine, a few ms beside seconds of
#     start). Writes results/validation/calibrated/<run>/<mechanism>{,-uncalibrated}/ and a
#     table in results/validation/calibrated/README.md.
#
#   scripts/calibrate-h200.sh [BUILD_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
psw=${1:-$root/build}/cli/psw
runs=$root/results/gpu
recorded_hardware=$runs/raw-figures-2026-12-01-a/link-profile/h200-pcie5.yaml
profile=$root/results/profiles/h200-calibrated.yaml
out=$root/results/validation/calibrated
experiments=$root/configs/experiments
work=$(mktemp -d)
trap 'rm -rf "$work" "$experiments"/.figures-*.yaml' EXIT

source "$root/scripts/figures_lib.sh"
# The request path a run is simulated with: serving-h200.yaml of the first call of its day (or
# of its afternoon).
serving_of() {  # RUN_FOLDER
  case ${1##*/} in
    raw-figures-2026-12-01-*) echo "$runs/raw-figures-2026-12-01-a/serving-h200.yaml" ;;
    raw-figures-2026-12-02-[ab]) echo "$runs/raw-figures-2026-12-02-a/serving-h200.yaml" ;;
    raw-figures-2026-12-02-c) echo "$runs/raw-figures-2026-12-02-c/serving-h200.yaml" ;;
    raw-figures-2026-12-02-mps-batch-*) serving_at_batch "$(batch_of "$1")" "$1" ;;
    # Its request path was not measured in that call: the morning's first call's (calibrate-load).
    raw-serve-2026-12-03-fresh*) echo "$1/serving-h200-from-load-starts.yaml" ;;
    raw-serve-2026-12-03-eager | raw-serve-2026-12-03-eager-a | raw-serve-2026-12-03-starts)
      echo "$1/serving-h200-from-load.yaml" ;;
    # Its request path was not measured in that call: the previous call's (calibrate-load).
    raw-serve-2026-12-03-eager-b) echo "$1/serving-h200-from-load-a.yaml" ;;
    # Note [Inputs in shared memory]: the path of the call's own calibrate-load, of the inputs it sent.
    raw-serve-2026-12-03-shm | raw-serve-2026-12-03-shm-unprimed | raw-serve-2026-12-03-raw-same-call | \
      raw-serve-2026-12-03-shm-figures | raw-serve-2026-12-03-shm-all-a | raw-serve-2026-12-03-shm-all-b)
      echo "$1/serving-h200-from-load.yaml" ;;
    # Held out: the same machine, one call later, with the path of the call before.
    raw-serve-2026-12-03-shm-held) echo "$1/serving-h200-from-load-shm.yaml" ;;
    # Later calls on the machine of -shm-all-a, simulated (PSW_SERVING_PROFILE) with its path.
    raw-serve-2026-12-03-shm-one-process | raw-serve-2026-12-03-shm-one-process-b | raw-serve-2026-12-04-one-process-* | \
      raw-serve-2026-12-04-held-* | raw-serve-2026-12-04-train-* | raw-serve-2026-12-04-um-*)
      echo "$runs/raw-serve-2026-12-03-shm-all-a/serving-h200-from-load.yaml" ;;
    *) echo "calibrate-h200: no request path known for $1" >&2; exit 1 ;;
  esac
}

# Note [MPS contention]: a run whose server trained at batch B (raw-figures-2026-12-02-mps-batch-B)
# is simulated with its job at B: the request path of run c's MPS load (same machine, batch 8)
# and the step the run measured alone (psw profile-serving --training-from-validation).
batch_of() {  # RUN_FOLDER: its training batch (empty: the profile's, 8)
  case ${1##*/} in raw-figures-2026-12-02-mps-batch-*) echo "${1##*-batch-}" ;; esac
}
# A run whose server trained another model (gpu-serve.sh's PSW_TRAINING_MODEL) at batch 8:
# raw-serve-2026-12-04-train-MODEL (the model's name with - for _).
training_model_of() {  # RUN_FOLDER: its training model (empty: ResNet-152)
  case ${1##*/} in raw-serve-2026-12-04-train-*) local m=${1##*-train-}; echo "${m//-/_}" ;; esac
}
serving_at_batch() {  # BATCH RUN_FOLDER: prints the serving profile's path
  local serving=$work/serving-batch-$1.yaml
  [[ -f $serving ]] || "$psw" profile-serving --from-load "$runs/raw-figures-2026-12-02-c/validation/figures-mps/measured/requests.csv" \
    --training-from-validation "$2/validation/figures-mps" --training-model resnet152 --training-batch "$1" \
    --name "h200-batch-$1" --device "NVIDIA H200" --out "$serving" > /dev/null
  echo "$serving"
}

rm -rf "$out"
mkdir -p "$out"
hardware=$work/h200-pcie5.yaml
translate_recorded_hardware "$recorded_hardware" "$hardware"  # the fit below replaces its share
current=$hardware
# A cost no value of which gives the measurement (psw calibrate exits 2 and says so: another
# cost, or the mechanism's model, is wrong) stays as it was; its message goes into the table.
fit() {  # MECHANISM COST RUN_FOLDER [NAME]
  # One output per mechanism and cost (a mechanism's analytic fit, then its eager host times), or
  # per NAME where one cost is taken from two runs.
  local name=${4:-$1}
  [[ $2 == eager_switch.host ]] && name=$1-eager
  fit_over "$1" "$2" "$name" "$3"
}
fit_over() {  # MECHANISM COST NAME RUN_FOLDER...: Note [Pooled runs] (one request path: the first run's)
  local mechanism=$1 cost=$2 name=$3
  shift 3
  local next=$work/after-$name-$cost.yaml measured=()
  for run in "$@"; do measured+=(--measured "$run/validation/figures-$mechanism"); done
  if "$psw" calibrate --config "$(configure_figures "$mechanism" "$current" "$(serving_of "$1")")" \
       "${measured[@]}" --cost "$cost" --hardware "$current" --out "$next" > "$out/fit-$name.txt" 2>&1; then
    current=$next
  fi
  sed "s#$root/##g" "$out/fit-$name.txt" | grep -v "wrote " | tee "$out/fit-$name.txt.tmp"
  mv "$out/fit-$name.txt.tmp" "$out/fit-$name.txt"
}
fit no-memory-management memory.cuda_malloc_ns "$runs/raw-figures-2026-12-02-b"
fit no-ipc-optimization memory.ipc_handle_open_ns "$runs/raw-figures-2026-12-02-b"
fit no-pinned-memory link.pageable.bandwidth_bytes_per_s "$runs/raw-figures-2026-12-02-b"
# Note [Unified memory's two costs]: the page fault and the migration's bandwidth together, from
# each model's engine over the runs of two machines of 2026-12-02 (b and c) pooled.
fit_over unified-memory unified_memory unified-memory "$runs/raw-figures-2026-12-02-b" "$runs/raw-figures-2026-12-02-c"
fit mps mps.inference_slowdown_percent "$runs/raw-figures-2026-12-01-a"
fit time-sliced time_slicing.inference_share_percent "$runs/raw-figures-2026-12-01-a"
# The worker's start moves by up to 60% from one lent host to another (README); the figures'
# stop-and-start and two processes were measured on raw-serve-2026-12-03-fresh's host, so the
# start (and first forwards) are that run's. It counted no kills: the kill is taken first from
# raw-serve-2026-12-03-shm-figures, the one run that timed it (Note [Worker kill]), and kept by
# the second adoption (a run without kills keeps the profile's).
fit stop-and-start startup.worker_start "$runs/raw-serve-2026-12-03-shm-figures" stop-and-start-kill
fit stop-and-start startup.worker_start "$runs/raw-serve-2026-12-03-fresh"
# Note [MPS contention]: one point per model beside the ResNet-152 job at batch 2, 8 and 32; the
# runs at 4 and 16 are held out (validated below). Beside the Inception-v3 and BERT-base jobs at
# batch 8 (2026-12-04): one point per model each, fitted on the one run of each (no run holds them
# out). The one number above stays for other jobs.
fit_contention() {  # RUN_FOLDER
  local run=$1 batch model next=$work/after-contention-${1##*-}.yaml name
  batch=$(batch_of "$1")
  model=$(training_model_of "$1")
  name=mps-contention-${batch:-8}${model:+-$model}
  if "$psw" calibrate --config "$(configure_figures mps "$current" "$(serving_of "$run")" "$batch" "$model")" \
       --measured "$run/validation/figures-mps" --cost mps.contention --hardware "$current" --out "$next" \
       > "$out/fit-$name.txt" 2>&1; then
    current=$next
  fi
  sed -i "s#$root/##g; /wrote /d" "$out/fit-$name.txt"
  cat "$out/fit-$name.txt"
}
fit_contention "$runs/raw-figures-2026-12-02-mps-batch-2"
fit_contention "$runs/raw-figures-2026-12-02-c"
fit_contention "$runs/raw-figures-2026-12-02-mps-batch-32"
fit_contention "$runs/raw-serve-2026-12-04-train-inception-v3"
fit_contention "$runs/raw-serve-2026-12-04-train-bert-base"
# Note [Adopting eager host times]: the three ablations the server runs eagerly, each model's host
# times from the run that measured them (after the analytic fits above, which the models
# without an entry keep).
fit no-ipc-optimization eager_switch.host "$runs/raw-serve-2026-12-03-eager"
fit no-memory-management eager_switch.host "$runs/raw-serve-2026-12-03-eager"
fit no-pinned-memory eager_switch.host "$runs/raw-serve-2026-12-03-eager"
# Note [Training abort]: one process's engine from its own host times (it switches tensor by tensor,
# on the host's time), then what the request waits for the training step's abort, before the engine;
# both pooled over three servers of 2026-12-04 (Note [Pooled runs]: its host times moved by 40%
# from run to run), the first whose psw load kept its regions until the last answer (Note [Shared
# memory senders]); the four runs of 2026-12-03 held out.
one_process_runs=("$runs/raw-serve-2026-12-04-one-process-a" "$runs/raw-serve-2026-12-04-one-process-b"
                  "$runs/raw-serve-2026-12-04-one-process-c")
fit_over one-process eager_switch.host one-process-eager "${one_process_runs[@]}"
fit_over one-process training_abort_ns one-process "${one_process_runs[@]}"
mkdir -p "$(dirname "$profile")"
sed "s#$root/##g" "$current" > "$profile"  # the notes name the runs relative to the project
validate_on() {  # RUN_FOLDER MECHANISM...: before calibration (-uncalibrated) and after
  local run=$1 name=${1##*/raw-} serving batch model
  name=${name#figures-}
  serving=$(serving_of "$1")
  batch=$(batch_of "$1")
  model=$(training_model_of "$1")
  shift
  for mechanism in "$@"; do
    "$psw" validate --config "$(configure_figures "$mechanism" "$hardware" "$serving" "$batch" "$model")" \
      --measured "$run/validation/figures-$mechanism" --out "$out/$name/$mechanism-uncalibrated" > /dev/null
    "$psw" validate --config "$(configure_figures "$mechanism" "$profile" "$serving" "$batch" "$model")" \
      --measured "$run/validation/figures-$mechanism" --out "$out/$name/$mechanism" > /dev/null
  done
}
validate_on "$runs/raw-figures-2026-12-02-a" mps time-sliced pipeswitch
validate_on "$runs/raw-serve-2026-12-03-shm-figures" stop-and-start two-processes mps one-process no-optimization \
  per-layer-pipeline grouped-transmission
validate_on "$runs/raw-serve-2026-12-03-fresh" two-processes
validate_on "$runs/raw-serve-2026-12-03-shm-all-a" stop-and-start two-processes one-process mps per-layer-pipeline \
  grouped-transmission no-optimization
validate_on "$runs/raw-serve-2026-12-03-shm-all-b" ready pipeswitch no-memory-management no-ipc-optimization \
  no-pinned-memory unified-memory time-sliced
validate_on "$runs/raw-serve-2026-12-03-shm-one-process" one-process
validate_on "$runs/raw-serve-2026-12-03-shm-one-process-b" one-process pipeswitch
for run in a b c; do validate_on "$runs/raw-serve-2026-12-04-one-process-$run" one-process; done
# One process held out on another machine started afresh, with time-sliced sharing beside it.
for run in a b; do validate_on "$runs/raw-serve-2026-12-04-held-$run" one-process time-sliced; done
# Beside another training job (the contention points fitted on these runs; ready and time-sliced
# held out).
for model in inception-v3 bert-base; do validate_on "$runs/raw-serve-2026-12-04-train-$model" ready mps time-sliced; done
# Note [Unified memory's two costs] held out: three servers in a row on a machine started afresh.
for run in a b c; do validate_on "$runs/raw-serve-2026-12-04-um-$run" unified-memory; done
validate_on "$runs/raw-serve-2026-12-03-fresh-b" stop-and-start two-processes
validate_on "$runs/raw-serve-2026-12-03-eager" unified-memory pipeswitch ready
# The eager ablations held out: the same server (after Note [Fresh processes]) on another machine.
validate_on "$runs/raw-serve-2026-12-03-starts" no-ipc-optimization no-memory-management no-pinned-memory
# ... and on two more machines of the afternoon, after the adoption's.
validate_on "$runs/raw-serve-2026-12-03-eager-a" no-ipc-optimization no-memory-management no-pinned-memory
validate_on "$runs/raw-serve-2026-12-03-eager-b" no-ipc-optimization no-memory-management no-pinned-memory
# Note [Inputs in shared memory]: the request path and the runs of one machine, the inputs in
# shared memory (and, on the first machine, raw too, calibrated in the same call).
validate_on "$runs/raw-serve-2026-12-03-raw-same-call" pipeswitch ready
validate_on "$runs/raw-serve-2026-12-03-shm-unprimed" pipeswitch ready
validate_on "$runs/raw-serve-2026-12-03-shm" pipeswitch ready time-sliced unified-memory \
  no-ipc-optimization no-memory-management no-pinned-memory
validate_on "$runs/raw-serve-2026-12-03-shm-held" pipeswitch ready no-ipc-optimization no-memory-management \
  no-pinned-memory
validate_on "$runs/raw-figures-2026-12-02-c" mps time-sliced pipeswitch ready \
  no-memory-management no-ipc-optimization no-pinned-memory unified-memory
for batch in 2 4 16 32; do validate_on "$runs/raw-figures-2026-12-02-mps-batch-$batch" mps time-sliced; done
# Note [Adopting eager host times] on one machine: the host times adopted from raw-serve-2026-12-03-shm
# (over the shipped profile, into a profile of this script's alone) and validated on -shm-held, the
# same machine one call later: before = the shipped profile (host times of another machine), after =
# this machine's.
same_machine=$profile
held=$runs/raw-serve-2026-12-03-shm-held
for mechanism in no-ipc-optimization no-memory-management no-pinned-memory; do
  "$psw" calibrate --config "$(configure_figures "$mechanism" "$same_machine" "$(serving_of "$runs/raw-serve-2026-12-03-shm")")" \
    --measured "$runs/raw-serve-2026-12-03-shm/validation/figures-$mechanism" --cost eager_switch.host \
    --hardware "$same_machine" --out "$work/same-machine-$mechanism.yaml" > /dev/null
  same_machine=$work/same-machine-$mechanism.yaml
  "$psw" validate --config "$(configure_figures "$mechanism" "$profile" "$(serving_of "$held")")" \
    --measured "$held/validation/figures-$mechanism" --out "$out/serve-2026-12-03-shm-held-same-machine/$mechanism-uncalibrated" > /dev/null
done
for mechanism in no-ipc-optimization no-memory-management no-pinned-memory; do
  "$psw" validate --config "$(configure_figures "$mechanism" "$same_machine" "$(serving_of "$held")")" \
    --measured "$held/validation/figures-$mechanism" --out "$out/serve-2026-12-03-shm-held-same-machine/$mechanism" > /dev/null
done
validate_on "$runs/raw-figures-2026-12-01-c" mps time-sliced pipeswitch \
  no-memory-management no-ipc-optimization no-pinned-memory unified-memory
bash "$root/scripts/environment.sh" > "$out/environment.md"
python3 "$root/scripts/calibration_table.py" "$out" "$profile" 2026-12-02-a serve-2026-12-03-shm-all-a serve-2026-12-03-shm-all-b \
  serve-2026-12-04-one-process-a serve-2026-12-04-one-process-b serve-2026-12-04-one-process-c \
  serve-2026-12-04-held-a serve-2026-12-04-held-b serve-2026-12-04-train-inception-v3 serve-2026-12-04-train-bert-base \
  serve-2026-12-04-um-a serve-2026-12-04-um-b serve-2026-12-04-um-c \
  serve-2026-12-03-shm-one-process serve-2026-12-03-shm-one-process-b \
  serve-2026-12-03-shm-figures serve-2026-12-03-fresh serve-2026-12-03-fresh-b \
  serve-2026-12-03-eager serve-2026-12-03-starts serve-2026-12-03-eager-a serve-2026-12-03-eager-b \
  serve-2026-12-03-raw-same-call serve-2026-12-03-shm-unprimed serve-2026-12-03-shm serve-2026-12-03-shm-held \
  serve-2026-12-03-shm-held-same-machine 2026-12-02-c \
  2026-12-02-mps-batch-2 2026-12-02-mps-batch-4 2026-12-02-mps-batch-16 2026-12-02-mps-batch-32 2026-12-01-c > "$out/README.md"
echo "calibrate-h200: wrote $profile and $out/README.md"
