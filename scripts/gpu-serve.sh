#!/usr/bin/env bash
# On a GPU host: the runtime's numbers (DESIGN.md §6) measured through `psw serve --backend
# cuda`, with `psw run`'s graph switch of the same models measured in the same session for
# the ratio. Raw JSON and logs go to OUT_DIR/raw-serve/, the report to OUT_DIR/<date>-<gpu>-serve.md.
#
#   scripts/gpu-serve.sh [OUT_DIR] [PART[,PART...]|all]
#     (parts: main staging placement lookahead pieces mechanisms dispatch engine drift gputests link calibrate calibrate-load
#      calibrate-start protocol burst validate figures fig6 replay-azure2019 replay-llm llm share; `all` is every part but
#      link, burst, calibrate-load, calibrate-start, engine, drift, share, staging, pieces, figures, fig6, the two replays and llm)
#
#   main        build, psw run --graph per model, then the server (configs/serve/
#               h200.yaml: three models, ResNet-152 training): cold requests while training,
#               training throughput alone and at 1 request/s, 10,000 consecutive switches with
#               host and device memory before and after, each process's device memory; then the
#               raw cold requests again on a server without the input staging (input_staging_slots: 0)
#   staging     main's raw cold requests only, on a server with the input staging, on one without, and
#               on one with the staging and the CPU wake-up latency held at 0 (root), then psw run's
#               switches, also held (a short call where device time is short; not with main)
#   mechanisms  one server per mechanism the server runs: cold requests while training; the
#               simulator's prediction of the same case beside them (h200-serve.yaml, psw compare-serve)
#   dispatch    pipeswitch with `dispatch: after-stop` (requests wait for training to stop; PSW_COLD_REQUESTS per model)
#   placement   the server with `placement: auto` (layers read in place): cold requests, shared
#               memory and raw inputs
#   lookahead   the training's lookahead (Note [Bounded lookahead]) at each of PSW_LOOKAHEADS
#               ("1 2 4 16"): startup, preemption and training throughput alone and under requests
#   pieces      the training's update in pieces (Note [Update in pieces]) at each of
#               PSW_UPDATE_PIECES_MIB ("0 16 64"; 0: whole operations) MiB, one server each:
#               PSW_COLD_REQUESTS (40) cold requests per model while training, then training
#               throughput alone and under one request per second (10 s windows); the preemptions
#               by place in the step (raw/pieces-MIB.json)
#   drift       the training job's rate over minutes on one server (configs/serve/h200.yaml):
#               PSW_DRIFT_PAIRS (default 12) psw bench-serve runs in a row, each 10 s of the job
#               alone then 10 s beside cold requests at PSW_DRIFT_RATE per second (default 3.6, the
#               LLM replay's; inputs in shared memory): each pair's rates, the time held and the
#               rate while not held over the rate alone (Note [Training held]), into
#               raw/drift/pair-N.json (pair-N.start: its wall clock), with nvidia-smi's SM clock,
#               power and temperature every second beside them (raw/drift/gpu.csv): whether the
#               job's rate moves by itself, and with what
#   engine      psw run of each model alone (no server) under the mechanisms the engine runs by
#               itself: pipeswitch with --graph, and eagerly pipeswitch, per-layer-pipeline,
#               no-optimization, no-memory-management and no-pinned-memory (the server runs these
#               ablations eagerly: exec/runtime/worker/src/processes.cpp, init part 1);
#               each run's switch, its eager and graph resident forward and the profile's
#               prediction, into raw/engine/ (PSW_ENGINE_REPEAT repetitions, default 30; PSW_ENGINE_MODES
#               narrows the mechanisms, `pipeswitch-graph` for the graph switch)
#   share       the training job's rate under one request per second over one unbroken stretch of
#               five minutes, against its rate alone in windows before and after it (PSW_SHARE_WINDOW_S,
#               default 150: the stretch is two of them; PSW_SHARE_ALONE_S, default 75: each window
#               alone), raw inputs; the server's preemption and startup latency over those requests;
#               the GPU (nvidia-smi) and the host (vmstat) monitored each second beside the job's rate
#               (raw-serve/share-timeline.png)
#   gputests    only the `gpu` ctest label (the engine on CUDA, training preempted bit for bit)
#   link        psw profile --link: the link fitted again into OUT_DIR/profiles/h200-pcie5.yaml, with
#               the base profile's other costs; calibrate and figures of the same call use it
#               (else PSW_HARDWARE_PROFILE, else configs/hardware/h200-pcie5.yaml)
#   calibrate   psw profile-serving against the server of configs/serve/h200.yaml: the request
#               path per model and the training step (Note [Request path]), written to
#               OUT_DIR/profiles/serving-h200.yaml; the validate and replay parts of the same call
#               simulate with it (else with the experiment's own `serving:`, if any)
#   calibrate-load
#               the request path through psw load's client instead (Note [Client connections]):
#               psw validate of configs/experiments/h200-burst.yaml (PipeSwitch, Poisson arrivals at
#               12/s, 40 s) against the server of configs/serve/h200.yaml, then psw profile-serving
#               --from-load of its requests (path, protocol quantiles and growth per request in
#               flight) with the training step from its job alone, written to
#               OUT_DIR/profiles/serving-h200-from-load.yaml; the later parts of the call simulate
#               with it rather than with calibrate's (raw-serve-2026-12-02-held-c's burst run:
#               on the two replays that followed on its machine, held out, it gave p50 -4.4%
#               and -1.8% where calibrate's gave -9.9% and -7.6%).
#               PSW_CALIBRATE_LOAD_RATE (requests/s, default 12) sets the arrivals' rate: at 12/s
#               too few requests overlap to fit the growth (raw-serve-2026-12-02-load-llm's run
#               fitted none)
#   calibrate-start
#               the worker's start on this machine: psw validate of h200-figures.yaml under
#               stop-and-start (three requests 12 s apart), then psw calibrate --cost
#               startup.worker_start on it (process, context, framework, first forwards and the
#               kill of the process replaced: Note [Worker kill]) over the call's hardware profile,
#               written to OUT_DIR/profiles/h200-start.yaml; the later parts of the call (figures,
#               fig6) run and simulate with it
#   protocol    Note [Client connections]: the request path's protocol part per model on the server
#               of configs/serve/h200.yaml, by psw profile-serving (16 connections in turn, as
#               calibrate; one connection; one connection 500 ms apart) and by psw load of
#               h200-validate.yaml's workload (16 senders with a connection each, as validate; 16
#               senders sharing one; one sender), into raw/protocol/
#   burst       psw validate of configs/experiments/h200-burst.yaml under pipeswitch (Poisson
#               arrivals at 12/s: requests in flight together, the replays' tail in a 40 s run), or
#               under each of PSW_BURST_MECHANISMS at each of PSW_BURST_RATES
#   validate    psw validate (the simulator beside the server on one workload) of
#               configs/experiments/h200-validate.yaml under pipeswitch, ready and, where the
#               hardware profile models it, time-sliced (or PSW_VALIDATE_MECHANISMS)
#   figures     the paper's Figures 5, 7, 8 and 9 through the server: psw validate of
#               configs/experiments/h200-figures.yaml under each of their mechanisms
#               (PSW_FIGURE_MECHANISMS; default their thirteen and time-sliced where the hardware
#               profile has time_slicing), with this call's calibration;
#               scripts/reproduce-gpu.sh runs it and draws the figures (scripts/gpu_figures.py)
#   fig6        the paper's Figure 6 through the server: per mechanism (PSW_FIG6_MECHANISMS,
#               default ready, pipeswitch, mps, stop-and-start) one server and one psw validate
#               of configs/experiments/h200-fig6.yaml per cycle (PSW_FIG6_CYCLES_MS, default
#               1000 2000 5000; PSW_FIG6_ROUNDS rounds, default 3), a closed loop
#   llm         the Llama decoders in bf16 served (configs/serve/h200-llm.yaml): each cold request's
#               time to first token through the server, the request path measured (psw
#               profile-serving) and psw validate of configs/experiments/h200-validate-llm.yaml
#   replay-azure2019, replay-llm
#               psw validate of a trace replay (configs/experiments/replay-*.yaml) with training
#               in the background, PSW_REPLAY_S seconds of it (default 540: a replay and the
#               server's start fit in one 10-minute device call; the cross-validation asks for
#               600)
# PSW_INPUTS=shared-memory makes every psw validate send its inputs in shared memory (psw load
# --shared-memory, Note [Inputs in shared memory]); calibrate-load's profile then says so, and a
# profile of raw inputs (PSW_SERVING_PROFILE, an experiment's own) is refused by the runs.
# PSW_TRAINING_BATCH runs every part's server with its training job at that batch (default:
# configs/serve/h200.yaml's 8); the simulator keeps batch 8's step (PSW_SERVING_PROFILE), so the
# training rows compare unlike jobs and the engines are the point (2026-12-02-h200-serve-mps-batch-*).
# PSW_TRAINING_MODEL (one of the zoo's: resnet152, inception_v3, bert_base) likewise trains that
# model instead of ResNet-152 (Note [MPS contention]: how the slowdown depends on the training
# job), in the server and in the figures' experiments; part `figures` only (the others' experiments
# train ResNet-152, and psw validate refuses a server that trains another model).
# PSW_CPU_WAKEUP_LATENCY_US runs the servers this script starts (not psw validate's) with the
# host's CPU wake-up latency held at that many microseconds (cpu_wakeup_latency_us, Note [CPU
# wake-up latency]; needs root), and every psw run under the same hold (--cpu-wakeup-latency-us).
# PSW_RAW_FROM (an earlier call's raw-serve.tar.gz on the same machine) makes this call's report
# cover that call's parts too; PSW_REPORT_NAME names the report (<date>-<gpu>-NAME.md; serve).
# Parts may be combined with commas (main,lookahead). PSW_COLD_REQUESTS (50), PSW_WINDOW_S (20)
# and PSW_SWITCHES (10000) size the main part; PSW_RUN_PLACEMENTS ("copy auto") names the
# placements its psw run switches are measured under (copy: the ratios' denominator). A device call runs 10 minutes at most: run the
# parts as several calls (the build is kept while the machine is).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/results/gpu}
part=${2:-all}
has_part() { [[ ,$part, == *,$1,* || ($part == all && $1 != replay-* && $1 != figures && $1 != fig6 && $1 != link && $1 != llm && $1 != burst && $1 != calibrate-load && $1 != calibrate-start && $1 != engine && $1 != drift && $1 != share && $1 != staging && $1 != pieces) ]]; }
known_parts=" main staging placement lookahead pieces mechanisms dispatch engine drift gputests link calibrate calibrate-load calibrate-start protocol burst validate figures fig6 replay-azure2019 replay-llm llm share all "
for p in ${part//,/ }; do
  [[ $known_parts == *" $p "* ]] || { echo "gpu-serve: part '$p' is not one of:$known_parts" >&2; exit 2; }
done
cold=${PSW_COLD_REQUESTS:-50}
# psw validate's warm-up requests per model (--warmup), sent to each fresh server before the
# workload: its first requests pay for growing its heap (Note [Message memory]).
warmup=${PSW_WARMUP:-2}
# Seconds of the training job measured alone before each validated workload and again after it
# (--training-alone; Note [Training share]: the training_share row).
training_alone=${PSW_TRAINING_ALONE:-5}
window=${PSW_WINDOW_S:-20}
case ${PSW_INPUTS:-raw} in
  raw) input_flags=() ;;
  shared-memory) input_flags=(--shared-memory) ;;
  *) echo "gpu-serve: PSW_INPUTS='$PSW_INPUTS': expected raw or shared-memory" >&2; exit 2 ;;
esac
# The simulator takes its training step from a serving profile whose batch must be the model
# profiles' (8): one calibrated at another batch would make every validation refuse it.
if [[ -n ${PSW_CALIBRATE_LOAD_RATE:-} && ! $PSW_CALIBRATE_LOAD_RATE =~ ^[1-9][0-9]*([.][0-9]+)?$ ]]; then
  echo "gpu-serve: PSW_CALIBRATE_LOAD_RATE='$PSW_CALIBRATE_LOAD_RATE': expected a rate of requests per second (1 or more)" >&2
  exit 2
fi
if [[ -n ${PSW_TRAINING_MODEL:-} ]]; then
  [[ $PSW_TRAINING_MODEL =~ ^(resnet152|inception_v3|bert_base)$ ]] || {
    echo "gpu-serve: PSW_TRAINING_MODEL='$PSW_TRAINING_MODEL': expected resnet152, inception_v3 or bert_base" >&2; exit 2; }
  [[ $part == figures ]] || {
    echo "gpu-serve: PSW_TRAINING_MODEL=$PSW_TRAINING_MODEL with parts '$part': only part figures trains another model" >&2; exit 2; }
fi
if [[ -n ${PSW_TRAINING_BATCH:-} && $PSW_TRAINING_BATCH != 8 ]] && { has_part calibrate || has_part calibrate-load; }; then
  echo "gpu-serve: PSW_TRAINING_BATCH=$PSW_TRAINING_BATCH with part calibrate or calibrate-load: the simulator's profiles are for a" \
    "training batch of 8; calibrate without it and pass PSW_SERVING_PROFILE=<that call's serving-h200.yaml>" >&2
  exit 2
fi
if [[ -n ${PSW_RAW_FROM:-} && ! -e $PSW_RAW_FROM ]]; then  # said before the build, not after it
  echo "gpu-serve: PSW_RAW_FROM='$PSW_RAW_FROM': no such file or folder" >&2
  exit 2
fi
switches=${PSW_SWITCHES:-10000}
targets=(psw psw-exec)
if has_part gputests; then targets+=(psw_gpu_tests psw_exec_tests psw_runtime_tests psw_runtime_gpu_tests); fi
source "$root/scripts/gpu-build.sh" "$out" "${targets[@]}"
raw="$out/raw-serve"
mkdir -p "$raw"
bash "$root/scripts/environment.sh" > "$raw/environment.md"  # the report may be made elsewhere
# PSW_RAW_FROM: an earlier call's raw runs on this machine (its raw-serve.tar.gz or folder), put
# beside this call's so that one report covers the parts of both (a device call runs 10 minutes
# at most; the machine and its build stay between calls). Refused when they were made on another
# host or GPU, as far as the environment says.
if [[ -n ${PSW_RAW_FROM:-} ]]; then
  earlier=$(mktemp -d)
  if [[ -f $PSW_RAW_FROM ]]; then
    tar -C "$earlier" -xzf "$PSW_RAW_FROM"
  elif [[ -d $PSW_RAW_FROM ]]; then
    cp -r "$PSW_RAW_FROM"/. "$earlier"/
  else
    echo "gpu-serve: PSW_RAW_FROM='$PSW_RAW_FROM': no such file or folder" >&2; exit 2
  fi
  [[ -f $earlier/environment.md ]] || { echo "gpu-serve: PSW_RAW_FROM='$PSW_RAW_FROM' has no environment.md: not a raw-serve folder" >&2; exit 2; }
  for key in host gpu; do
    was=$(grep "^- $key:" "$earlier/environment.md" || true)
    now=$(grep "^- $key:" "$raw/environment.md" || true)
    [[ $was == "$now" ]] || { echo "gpu-serve: PSW_RAW_FROM='$PSW_RAW_FROM' was made on another machine ('$was', here '$now')" >&2; exit 2; }
  done
  rm "$earlier/environment.md"  # this call's stays
  cp -r "$earlier"/. "$raw"/
  export PSW_RUN_NOTE="${PSW_RUN_NOTE:+$PSW_RUN_NOTE; }with an earlier call's raw runs on this machine (PSW_RAW_FROM: $(cd "$earlier" && ls -- *.json | tr '\n' ' '| sed 's/ $//'))"
  rm -rf "$earlier"
fi
psw="$build/cli/psw"
gpu_name() { nvidia-smi --query-gpu=name --format=csv,noheader | head -1; }  # profiles' `device`
sock_dir=$(mktemp -d)
sock="$sock_dir/psw.sock"
server=
# Note [Decision log]: every server of a call logs its decisions beside its log
# (serve-NAME.decisions.jsonl); once it has stopped, psw replay-decisions feeds them to the
# scheduling policy, and its verdict (events, actions, the first action that differs if any) goes
# to serve-NAME.replay.json (scripts/decisions_table.py tabulates them).
stop_server() {
  if [[ -n $server ]]; then
    kill -TERM "$server" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
    server=
    if [[ -n ${server_decisions:-} && -f $server_decisions ]]; then
      "$psw" replay-decisions --format json "$server_decisions" > "${server_decisions%.decisions.jsonl}.replay.json" ||
        echo "!! $(basename "$server_decisions"): the server's decisions differ from the policy's"
    fi
    server_decisions=
  fi
}
# The server config every part starts from: configs/serve/h200.yaml as it is, with psw serve's
# --set for what a call changes (Note [Overridden keys in messages]; the server's processes read
# it with the same overrides): the training job at batch PSW_TRAINING_BATCH, or another model
# PSW_TRAINING_MODEL (the same runs with another training job: how MPS's and time-slicing's
# slowdown depend on it, README). No copy of a config is edited.
serve_config=$root/configs/serve/h200.yaml
serve_sets=()
if [[ -n ${PSW_TRAINING_BATCH:-} ]]; then serve_sets+=(--set "training.batch=$PSW_TRAINING_BATCH"); fi
if [[ -n ${PSW_CPU_WAKEUP_LATENCY_US:-} ]]; then
  [[ $PSW_CPU_WAKEUP_LATENCY_US =~ ^[0-9]+$ ]] || {
    echo "gpu-serve: PSW_CPU_WAKEUP_LATENCY_US='$PSW_CPU_WAKEUP_LATENCY_US': expected microseconds (0 or more)" >&2; exit 2; }
  serve_sets+=(--set "cpu_wakeup_latency_us=$PSW_CPU_WAKEUP_LATENCY_US")
fi
if [[ -n ${PSW_TRAINING_MODEL:-} ]]; then
  serve_sets+=(--set "training.model=$PSW_TRAINING_MODEL")
  # The model's own training input: Inception-v3 takes 299 x 299 images (at least 291), BERT-base
  # at most 128 tokens in the zoo; ResNet-152 keeps the config's 224.
  case $PSW_TRAINING_MODEL in
    inception_v3) serve_sets+=(--set training.input_size=299) ;;
    bert_base) serve_sets+=(--set training.input_size=128) ;;
  esac
fi
trap 'stop_server; rm -rf "$sock_dir"' EXIT

start_server() {  # CONFIG LOG [psw serve options, --set KEY=VALUE among them]
  local config=$1 log=$2
  shift 2
  server_decisions=${log%.log}.decisions.jsonl
  (cd "$root" && "$psw" serve --backend cuda --config "$config" --socket "$sock" --decisions "$server_decisions" \
     ${serve_sets[@]+"${serve_sets[@]}"} "$@") 2> "$log" &
  server=$!
  for _ in $(seq 1 600); do
    if "$psw" client --socket "$sock" --live 2>/dev/null | grep -q "ready  yes"; then return 0; fi
    kill -0 "$server" 2>/dev/null || { tail -20 "$log"; echo "!! the server exited"; server=; return 1; }
    sleep 0.5
  done
  echo "!! the server was not ready within 300 s"; return 1
}

server_processes() {  # pid, rss (KiB) and role of the server and its children
  local pids
  pids="$server $(pgrep -P "$server" | tr '\n' ' ')"
  for pid in $pids; do
    echo "$pid $(awk '/VmRSS/ {print $2}' /proc/$pid/status) $(tr '\0' ' ' < /proc/$pid/cmdline | awk '{print $2}')"
  done
}

# psw run's graph switch of each model under PLACEMENT, the ratios' denominator (same session);
# with `held`, under the CPU wake-up latency held at 0 as the held server's (run-MODEL-held.json).
run_switches() {  # PLACEMENT [held]
  local placement=$1 model suffix held_flags=()
  suffix=$([[ $placement == auto ]] && echo "-auto" || true)
  if [[ ${2:-} == held ]]; then suffix+=-held; held_flags=(--cpu-wakeup-latency-us 0)
  elif [[ -n ${PSW_CPU_WAKEUP_LATENCY_US:-} ]]; then held_flags=(--cpu-wakeup-latency-us "$PSW_CPU_WAKEUP_LATENCY_US"); fi
  for model in resnet152 inception_v3 bert_base; do
    (cd "$root" && "$psw" run --model "$model" --mode pipeswitch --graph --placement "$placement" --repeat 100 \
      --format json ${held_flags[@]+"${held_flags[@]}"}) > "$raw/run-$model$suffix.json"
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(sys.argv[2], "graph switch %.3f ms" % d["latency_ms"]["median"])' \
      "$raw/run-$model$suffix.json" "$model placement $placement"
  done
}
# Part staging: main's raw cold requests alone, on a server with the input staging (bench.json,
# as main's), on one without (bench-no-staging.json) and on one with the staging and the host's
# CPU wake-up latency held at 0 (bench-held.json, Note [CPU wake-up latency]: needs root), then
# psw run's switches, also under the hold; instead of main where device time is short (no
# training windows, no shared memory, no switches).
if has_part staging && ! has_part main; then
  for variant in staging no-staging held; do
    echo "== raw cold requests, $variant ($(date -u +%T))"
    variant_sets=()
    case $variant in
      no-staging) variant_sets=(--set input_staging_slots=0) ;;
      held) variant_sets=(--set cpu_wakeup_latency_us=0) ;;
    esac
    if start_server "$serve_config" "$raw/serve-$variant.log" "${variant_sets[@]}"; then
      "$psw" bench-serve --socket "$sock" --cold-requests "$cold" --gap-ms 150 --batch 8 --window 0 \
        --switches 0 --out "$raw/$([[ $variant == staging ]] && echo bench || echo "bench-$variant").json" || true
      stop_server
    fi
  done
  echo "== psw run --graph, the same session ($(date -u +%T))"
  run_switches copy
  run_switches copy held || echo "!! psw run under the held CPU wake-up latency failed"
fi
if has_part main; then
  echo "== psw run --graph, the same session ($(date -u +%T))"
  for placement in ${PSW_RUN_PLACEMENTS:-copy auto}; do run_switches "$placement"; done
  echo "== serve ($(date -u +%T))"
  start_server "$serve_config" "$raw/serve.log" --trace "$raw/serve.trace.json"
  nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader > "$raw/device-memory.csv" || true
  server_processes > "$raw/processes-start.txt"
  "$psw" bench-serve --socket "$sock" --cold-requests "$cold" --gap-ms 150 --batch 8 --window "$window" --rate 1 \
    --switches 0 --out "$raw/bench.json"
  # The same cold requests with the inputs in shared memory (the system shared memory extension).
  "$psw" bench-serve --socket "$sock" --shared-memory --cold-requests "$cold" --gap-ms 150 --batch 8 --window 0 \
    --switches 0 --out "$raw/bench-shm.json"
  if ((switches > 0)); then
    server_processes > "$raw/processes-before-switches.txt"
    nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader > "$raw/device-memory-before-switches.csv" || true
    "$psw" bench-serve --socket "$sock" --cold-requests 0 --window 0 --batch 8 --switches "$switches" --out "$raw/switches.json"
    server_processes > "$raw/processes-after-switches.txt"
    nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader > "$raw/device-memory-after-switches.csv" || true
  fi
  stop_server
  # The same raw cold requests on a server without the front end's input staging (Note [Raw
  # inputs received in place]): each input kept in its own string and copied by the controller
  # into the worker's io segment, as before the staging; side by side in this session.
  echo "== serve without input staging ($(date -u +%T))"
  if start_server "$serve_config" "$raw/serve-no-staging.log" --set input_staging_slots=0; then
    "$psw" bench-serve --socket "$sock" --cold-requests "$cold" --gap-ms 150 --batch 8 --window 0 \
      --switches 0 --out "$raw/bench-no-staging.json" || true
    stop_server
  fi
fi

if has_part drift; then
  pairs=${PSW_DRIFT_PAIRS:-12}
  echo "== drift: $pairs pairs of 10 s windows, the job alone then beside requests ($(date -u +%T))"
  mkdir -p "$raw/drift"
  start_server "$serve_config" "$raw/serve-drift.log"
  TZ=UTC nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,utilization.gpu \
    --format=csv,nounits -lms 1000 > "$raw/drift/gpu.csv" 2>&1 &
  smi=$!
  for i in $(seq 1 "$pairs"); do
    date -u +%s.%N > "$raw/drift/pair-$i.start"
    "$psw" bench-serve --socket "$sock" --shared-memory --cold-requests 0 --window 10 --rate "${PSW_DRIFT_RATE:-3.6}" \
      --batch 8 --switches 0 --out "$raw/drift/pair-$i.json" 2>> "$raw/drift/bench.log" || echo "!! pair $i failed"
  done
  kill "$smi" 2>/dev/null || true
  stop_server
fi

if has_part share; then
  # Note [Training windows]: alone, then two windows under one request per second back to back
  # (one unbroken stretch of PSW_SHARE_WINDOW_S x 2, five minutes by default), then alone again:
  # the two windows alone bracket the stretch, so a drift of the job's rate weighs on both kinds.
  share_window=${PSW_SHARE_WINDOW_S:-150}
  share_alone=${PSW_SHARE_ALONE_S:-75}
  echo "== share: ${share_alone} s alone, $((2 * share_window)) s under one request per second, ${share_alone} s alone ($(date -u +%T))"
  start_server "$serve_config" "$raw/serve-share.log"
  # What moves the job's rate by itself: the GPU's clocks and utilization and the host's CPU use
  # and steal time, each second, beside the job's rate (scripts/share_timeline.py).
  monitors=()
  TZ=UTC nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,utilization.gpu \
    --format=csv,noheader,nounits -l 1 > "$raw/share-gpu.csv" 2> /dev/null &
  monitors+=($!)
  if command -v vmstat > /dev/null; then
    TZ=UTC vmstat -n -t 1 > "$raw/share-host.txt" 2> /dev/null &
    monitors+=($!)
  fi
  "$psw" bench-serve --socket "$sock" --cold-requests 0 --batch 8 --window "$share_window" --alone-window "$share_alone" \
    --rounds 2 --rate 1 --switches 0 --out "$raw/share.json" 2> "$raw/share.log" || echo "!! the share's windows failed"
  kill "${monitors[@]}" 2> /dev/null || true
  wait "${monitors[@]}" 2> /dev/null || true
  stop_server
  if [[ -f $raw/share.json ]]; then
    python3 "$root/scripts/share_timeline.py" "$raw" || echo "!! the share's timeline was not drawn"
  fi
fi

if has_part engine; then
  echo "== psw run per model and mechanism, alone ($(date -u +%T))"
  mkdir -p "$raw/engine"
  for model in resnet152 inception_v3 bert_base; do
    for mode in ${PSW_ENGINE_MODES:-pipeswitch-graph pipeswitch per-layer-pipeline no-optimization no-memory-management no-pinned-memory}; do
      graph=()
      [[ $mode == *-graph ]] && graph=(--graph)
      (cd "$root" && "$psw" run --model "$model" --mode "${mode%-graph}" "${graph[@]}" --repeat "${PSW_ENGINE_REPEAT:-30}" \
        --format json) > "$raw/engine/$model-$mode.json" || { echo "!! psw run $model $mode failed"; continue; }
      python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(sys.argv[2], "switch %.3f ms (predicted %.3f), ready %.3f ms eager, %.3f graph" % (d["latency_ms"]["median"], d["predicted_ms"], d["ready_ms"]["median"], d["ready_graph_ms"]["median"]))' \
        "$raw/engine/$model-$mode.json" "$model $mode"
    done
  done
fi

if has_part placement; then
  if [[ ! -f $raw/run-resnet152-auto.json ]]; then
    echo "== psw run --graph --placement auto, the same session ($(date -u +%T))"
    run_switches auto
  fi
  echo "== placement auto ($(date -u +%T))"
  if start_server "$serve_config" "$raw/serve-placement-auto.log" --set placement=auto; then
    "$psw" bench-serve --socket "$sock" --shared-memory --cold-requests "$cold" --gap-ms 150 --batch 8 --window 0 \
      --switches 0 --out "$raw/placement-auto-shm.json" || true
    "$psw" bench-serve --socket "$sock" --cold-requests "$cold" --gap-ms 150 --batch 8 --window 0 \
      --switches 0 --out "$raw/placement-auto.json" || true
    stop_server
  fi
fi

if has_part gputests; then
  echo "== gpu tests ($(date -u +%T))"
  ctest --test-dir "$build" -L gpu --output-on-failure --timeout 600 2>&1 | sed "s|$root/||g" | tee "$raw/gpu-tests.log" | tail -25
  [[ $part == gputests ]] && exit 0
fi

# One server per value of a training setting (training.KEY): COLD cold requests per model while
# training, then the job's rate alone and under one request per second (10 s windows), into
# raw/NAME-VALUE.json.
sweep_training_setting() {
  local name=$1 key=$2 cold=$3 value
  shift 3
  for value in "$@"; do
    echo "== training.$key $value ($(date -u +%T))"
    start_server "$serve_config" "$raw/serve-$name-$value.log" --set "training.$key=$value" || continue
    "$psw" bench-serve --socket "$sock" --cold-requests "$cold" --gap-ms 150 --batch 8 --window 10 --rate 1 --switches 0 \
      --out "$raw/$name-$value.json" || true
    stop_server
  done
}
if has_part lookahead; then
  # shellcheck disable=SC2086  # a list of values
  sweep_training_setting lookahead lookahead 20 ${PSW_LOOKAHEADS:-1 2 4 16}
fi
if has_part pieces; then
  for mib in ${PSW_UPDATE_PIECES_MIB:-0 16 64}; do
    [[ $mib =~ ^[0-9]+$ ]] || { echo "gpu-serve: PSW_UPDATE_PIECES_MIB: '$mib' is not a number of MiB" >&2; exit 2; }
  done
  # shellcheck disable=SC2086
  sweep_training_setting pieces update_piece_mib "${PSW_COLD_REQUESTS:-40}" ${PSW_UPDATE_PIECES_MIB:-0 16 64}
fi
if has_part mechanisms; then
  for mechanism in pipeswitch ready per-layer-pipeline grouped-transmission no-pinned-memory no-memory-management \
                   no-optimization no-ipc-optimization unified-memory time-sliced; do
    echo "== mechanism $mechanism ($(date -u +%T))"
    start_server "$serve_config" "$raw/serve-$mechanism.log" --set "mechanism=$mechanism" || continue
    "$psw" bench-serve --socket "$sock" --cold-requests 10 --gap-ms 150 --batch 8 --window 0 --switches 0 \
      --out "$raw/mechanism-$mechanism.json" || true
    stop_server
  done
  # The mechanisms whose every task gets a fresh process (seconds per request: three each),
  # one process (workers: 1), and MPS with NVIDIA's control daemon started for it and stopped
  # after (it would change every later CUDA process on the machine).
  for mechanism in stop-and-start two-processes one-process mps; do
    echo "== mechanism $mechanism ($(date -u +%T))"
    mechanism_sets=(--set "mechanism=$mechanism")
    cold_here=10
    case $mechanism in
      stop-and-start | two-processes) cold_here=3 ;;
      one-process) mechanism_sets+=(--set workers=1) ;;
      mps)
        export CUDA_MPS_PIPE_DIRECTORY="$sock_dir/mps-pipe" CUDA_MPS_LOG_DIRECTORY="$sock_dir/mps-log"
        mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
        nvidia-cuda-mps-control -d || { echo "!! could not start the MPS control daemon"; continue; } ;;
    esac
    if start_server "$serve_config" "$raw/serve-$mechanism.log" "${mechanism_sets[@]}"; then
      "$psw" bench-serve --socket "$sock" --cold-requests "$cold_here" --gap-ms 150 --batch 8 --window 0 --switches 0 \
        --out "$raw/mechanism-$mechanism.json" || true
      stop_server
    fi
    if [[ $mechanism == mps ]]; then
      echo quit | nvidia-cuda-mps-control || true
      unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
    fi
  done
  # The simulator's prediction of the same case (cheap: seconds on the CPU), joined with the
  # measurements above; the report prints the table.
  echo "== simulator beside the mechanisms ($(date -u +%T))"
  { "$psw" sweep --config "$root/configs/experiments/h200-serve.yaml" --out "$raw/sim-h200-serve" 2> "$raw/sim-h200-serve.log" &&
    "$psw" compare-serve --measured "$raw" --predicted "$raw/sim-h200-serve" --out "$raw/mechanisms-vs-sim.csv"; } ||
    echo "!! the simulator's comparison failed (see above and $raw/sim-h200-serve.log)"
fi
if has_part dispatch; then
  echo "== dispatch after-stop ($(date -u +%T))"
  if start_server "$serve_config" "$raw/serve-after-stop.log" --set dispatch=after-stop; then
    "$psw" bench-serve --socket "$sock" --cold-requests "$cold" --gap-ms 150 --batch 8 --window 0 --switches 0 \
      --out "$raw/dispatch-after-stop.json" || true
    stop_server
  fi
fi
if has_part link; then
  # The link fitted again (psw profile --link), with the other costs of the base profile as they
  # are now (time_slicing among them): the calibration and the figures of this call use it.
  echo "== link: psw profile --link ($(date -u +%T))"
  (cd "$root" && "$psw" profile --model resnet152 --batch 8 --repeat 10 --link --hardware-name h200-pcie5 \
    --out "$raw/link-profile") > "$raw/link-profile.log" 2>&1 || { tail -5 "$raw/link-profile.log"; echo "!! psw profile --link failed"; }
  if [[ -f $raw/link-profile/h200-pcie5.yaml ]]; then mkdir -p "$out/profiles" && cp "$raw/link-profile/h200-pcie5.yaml" "$out/profiles/"; fi
fi
# The hardware profile the server and simulator of calibrate and figures use: this call's link
# part's, else PSW_HARDWARE_PROFILE (an earlier call's), else the project's.
hardware=$root/configs/hardware/h200-pcie5.yaml
if [[ -f $raw/link-profile/h200-pcie5.yaml ]]; then hardware=$raw/link-profile/h200-pcie5.yaml
elif [[ -n ${PSW_HARDWARE_PROFILE:-} ]]; then hardware=$(realpath "$PSW_HARDWARE_PROFILE"); fi
training_of() {  # SERVE_CONFIG KEY: a key of its training job, as psw reads it with this call's overrides (empty without one)
  "$psw" config-json serve "$1" ${serve_sets[@]+"${serve_sets[@]}"} |
    python3 -c 'import json, sys; print(json.load(sys.stdin).get("training", {}).get(sys.argv[1], ""))' "$2"
}
has_time_slicing() {  # HARDWARE_PROFILE: whether it models time slicing (the simulator needs it for time-sliced)
  "$psw" config-json hardware "$1" | python3 -c 'import json, sys; sys.exit(0 if "time_slicing" in json.load(sys.stdin) else 1)'
}
training_batch_of() {  # SERVE_CONFIG: its training job's batch (empty without one)
  training_of "$1" batch
}
if has_part calibrate; then
  echo "== calibrate: psw profile-serving ($(date -u +%T))"
  training_batch=$(training_batch_of "$serve_config")
  # PSW_CALIBRATE_REQUESTS per model (default 60): the protocol's quantiles (Note [Protocol
  # spread]) come from them, and with 20 the top 5% of the simulated draws rests on one request
  # (the runs of 2026-12-02 13:38-14:05 UTC: one ResNet-152 request of 16.3 ms against a median
  # of 5.6 ms, and the Functions replay raw-serve-2026-12-02-replay-azure2019-c's simulated p99
  # 27% above the measured).
  if start_server "$serve_config" "$raw/serve-calibrate.log" --set "hardware=$hardware"; then
    "$psw" profile-serving --socket "$sock" --name h200-serve --device "$(gpu_name)" \
      --requests "${PSW_CALIBRATE_REQUESTS:-60}" --gap-ms 150 --batch 8 --training-batch "${training_batch:-8}" --training-window 10 \
      --out "$raw/serving-h200.yaml" || echo "!! psw profile-serving failed"
    stop_server
    if [[ -f $raw/serving-h200.yaml ]]; then mkdir -p "$out/profiles" && cp "$raw/serving-h200.yaml" "$out/profiles/"; fi
  fi
fi
if has_part protocol; then
  echo "== protocol: one server, six ways of sending ($(date -u +%T))"
  training_batch=$(training_batch_of "$serve_config")
  mkdir -p "$raw/protocol"
  if start_server "$serve_config" "$raw/serve-protocol.log" --set "hardware=$hardware"; then
    device_name=$(gpu_name)
    for way in "16 150" "1 150" "1 500"; do
      set -- $way
      "$psw" profile-serving --socket "$sock" --name "connections-$1-gap-$2" --device "$device_name" \
        --requests 20 --gap-ms "$2" --connections "$1" --batch 8 --training-batch "${training_batch:-8}" \
        --training-window 0 --out "$raw/protocol/profile-serving-$1-connections-$2-ms.yaml" \
        --split-out "$raw/protocol/split-$1-connections-$2-ms.json" \
        || echo "!! psw profile-serving $way failed"
    done
    workload="$root/configs/experiments/h200-validate.yaml"
    for way in "16 16" "16 1" "1 1"; do
      set -- $way
      (cd "$root" && "$psw" load --config "$workload" --socket "$sock" --senders "$1" --connections "$2" \
        --out "$raw/protocol/load-$1-senders-$2-connections") > /dev/null 2> "$raw/protocol/load-$1-$2.log" \
        || { tail -3 "$raw/protocol/load-$1-$2.log"; echo "!! psw load $way failed"; }
    done
    stop_server
  fi
fi
# The serving profile the simulator of validate and the replays uses: this call's calibration
# if it made one (the experiment's own `serving:` replaced), else the experiment's.
# PSW_SERVING_PROFILE names one made by an earlier call (a run split over several calls).
# Adds the --set that names it to experiment_sets.
use_calibration() {
  local profile=
  if [[ -f $raw/serving-h200-from-load.yaml ]]; then profile=$raw/serving-h200-from-load.yaml
  elif [[ -f $raw/serving-h200.yaml ]]; then profile=$raw/serving-h200.yaml
  elif [[ -n ${PSW_SERVING_PROFILE:-} ]]; then profile=$(realpath "$PSW_SERVING_PROFILE"); fi
  if [[ -n $profile ]]; then experiment_sets+=(--set "serving=$profile"); fi
}
# The --set of the experiment the next psw validate runs (experiment configs are used as they
# are, with psw validate's --set for what a part changes).
experiment_sets=()
# psw validate: an experiment config's workload sent to the server and simulated, compared
# (`validation.json` per case under raw/validation/; the report prints the tables).
# With shared memory, psw load warms up each sender's regions (Note [Shared memory senders]): 16
# senders x 3 models x PSW_WARMUP requests. Under the mechanisms that give every request a fresh
# worker process (stop-and-start, two-processes) each of those costs a process start (~3 s: on
# 2026-12-03 a device call under shared memory spent five minutes warming up), so there the run
# has one sender (its requests are 12 s apart: one at a time anyway) and one warm-up request per
# model. The warm-up takes the process the server started with
# (Note [Processes a server starts with]), so that every measured request waits for a start, as
# in the paper's baseline and the raw runs.
load_flags_for() {  # MECHANISM: psw validate's warm-up (and senders) for it
  if [[ ${PSW_INPUTS:-raw} == shared-memory && ($1 == stop-and-start || $1 == two-processes) ]]; then
    echo "--warmup 1 --senders 1"
  else
    echo "--warmup $warmup"
  fi
}
# The running server's metrics (Prometheus text: preemption and startup latency, the request's
# phases; controller.cpp) as it stands after its validations, to raw/metrics-NAME.txt.
save_metrics() {  # NAME
  "$psw" client --socket "$sock" --metrics > "$raw/metrics-$1.txt" 2>&1 || echo "!! the metrics of $1 could not be read"
}
validate_on_server() {  # EXPERIMENT_CONFIG NAME [LOAD_FLAGS]: against the running server, with experiment_sets
  local experiment=$1 name=$2 load_flags
  read -ra load_flags <<< "${3:---warmup $warmup}"
  (cd "$root" && "$psw" validate --config "$experiment" ${experiment_sets[@]+"${experiment_sets[@]}"} --socket "$sock" \
    "${load_flags[@]}" \
    --training-alone "$training_alone" ${input_flags[@]+"${input_flags[@]}"} --out "$raw/validation/$name") \
    > "$raw/validate-$name.txt" 2>&1 || { tail -5 "$raw/validate-$name.txt"; echo "!! psw validate $name failed"; }
}
validate_with() {  # MECHANISM EXPERIMENT_CONFIG NAME [psw serve options]: a server of MECHANISM, then validate_on_server
  local mechanism=$1 experiment=$2 name=$3
  shift 3
  start_server "$serve_config" "$raw/serve-validate-$name.log" --set "mechanism=$mechanism" "$@" || return 0
  validate_on_server "$experiment" "$name" "$(load_flags_for "$mechanism")"
  save_metrics "$name"
  stop_server
}
# Note [Client connections]: psw profile-serving sends from one thread, and on the machine of
# raw-serve-2026-12-02-held-c its protocol came out 10-17% shorter than psw load's 16 senders'
# even for requests with nothing else in flight; this part measures the path with the client the
# validations use. Its own psw validate simulates with the experiment's `serving:` (only its
# measured side is used).
if has_part calibrate-load; then
  echo "== calibrate-load: psw validate of h200-burst, then psw profile-serving --from-load ($(date -u +%T))"
  experiment_sets=(--set name=calibrate-load --set "workload.rate_per_s=${PSW_CALIBRATE_LOAD_RATE:-12}")
  # The experiment's own profile is of raw inputs, which a shared-memory run refuses: simulate
  # without a request path (only the measured side is used here).
  if [[ ${PSW_INPUTS:-raw} == shared-memory ]]; then experiment_sets+=(--set serving=null); fi
  validate_with pipeswitch "$root/configs/experiments/h200-burst.yaml" calibrate-load
  run=$raw/validation/calibrate-load
  training_model=$(training_of "$serve_config" model)
  training_batch=$(training_batch_of "$serve_config")
  if [[ -f $run/measured/requests.csv ]]; then
    "$psw" profile-serving --from-load "$run/measured/requests.csv" --training-from-validation "$run" \
      --training-model "$training_model" --training-batch "${training_batch:-8}" --name h200-serve-from-load \
      --device "$(gpu_name)" --out "$raw/serving-h200-from-load.yaml" \
      || echo "!! psw profile-serving --from-load failed"
  fi
  if [[ -f $raw/serving-h200-from-load.yaml ]]; then mkdir -p "$out/profiles" && cp "$raw/serving-h200-from-load.yaml" "$out/profiles/"; fi
fi
# The worker's start on this machine (Note [Worker start], Note [Worker kill]): it moved by 60%
# from one lent host to another (README), so the stop-and-start and two-processes validations of
# a call are simulated with the start adopted in the same call.
if has_part calibrate-start; then
  echo "== calibrate-start: psw validate of stop-and-start, then psw calibrate --cost startup.worker_start ($(date -u +%T))"
  experiment="$root/configs/experiments/h200-figures.yaml"
  experiment_sets=(--set mechanism=stop-and-start --set "hardware=$hardware" --set workload.interval_ms=12000
                   --set workload.count=3)
  use_calibration
  validate_with stop-and-start "$experiment" calibrate-start --set "hardware=$hardware"
  if [[ -f $raw/validation/calibrate-start/measured/summary.json ]] &&
     "$psw" calibrate --config "$experiment" "${experiment_sets[@]}" --measured "$raw/validation/calibrate-start" \
       --cost startup.worker_start \
       --hardware "$hardware" --out "$raw/h200-start.yaml" > "$raw/calibrate-start.txt" 2>&1; then
    cat "$raw/calibrate-start.txt"
    hardware=$raw/h200-start.yaml
    mkdir -p "$out/profiles" && cp "$raw/h200-start.yaml" "$out/profiles/"
  else
    echo "!! calibrate-start: no start adopted (raw/calibrate-start.txt)"
  fi
fi
if has_part validate; then
  mechanisms=(pipeswitch ready)
  if has_time_slicing "$root/configs/hardware/h200-pcie5.yaml"; then mechanisms+=(time-sliced); fi
  if [[ -n ${PSW_VALIDATE_MECHANISMS:-} ]]; then read -ra mechanisms <<< "$PSW_VALIDATE_MECHANISMS"; fi
  for mechanism in "${mechanisms[@]}"; do
    echo "== validate $mechanism ($(date -u +%T))"
    experiment_sets=(--set "mechanism=$mechanism")
    use_calibration
    validate_with "$mechanism" "$root/configs/experiments/h200-validate.yaml" "h200-validate-$mechanism"
  done
fi
# h200-burst's Poisson arrivals, so that requests overlap (the replays' tail in a short run); psw
# profile-serving --from-load fits a request path from its requests.csv, its protocol's quantiles
# and growth per request in flight included (Note [Protocol under load]; part calibrate-load).
# PSW_BURST_MECHANISMS and PSW_BURST_RATES (requests/s) run it again per pair (Note [Training
# held]: the training job's hold and its rate between requests against the rate and the switch);
# the default pair, pipeswitch at 12/s, keeps the name h200-burst.
if has_part burst; then
  read -ra burst_mechanisms <<< "${PSW_BURST_MECHANISMS:-pipeswitch}"
  read -ra burst_rates <<< "${PSW_BURST_RATES:-12}"
  for mechanism in "${burst_mechanisms[@]}"; do
    for rate in "${burst_rates[@]}"; do
      name=h200-burst
      [[ $mechanism == pipeswitch && $rate == 12 ]] || name=h200-burst-$mechanism-$rate
      echo "== burst: $mechanism under Poisson arrivals at $rate/s ($(date -u +%T))"
      experiment_sets=(--set "mechanism=$mechanism" --set "workload.rate_per_s=$rate" --set "name=$name")
      use_calibration
      validate_with "$mechanism" "$root/configs/experiments/h200-burst.yaml" "$name"
    done
  done
fi
# The paper's Figures 5, 7, 8 and 9 through the server: psw validate of h200-figures.yaml per
# mechanism (measured and simulated on one workload); scripts/gpu_figures.py draws them.
# NVIDIA's MPS control daemon, started for one server and stopped after (it would change every
# later CUDA process).
start_mps() {
  export CUDA_MPS_PIPE_DIRECTORY="$sock_dir/mps-pipe" CUDA_MPS_LOG_DIRECTORY="$sock_dir/mps-log"
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  nvidia-cuda-mps-control -d || { echo "!! could not start the MPS control daemon"; return 1; }
}
stop_mps() {
  echo quit | nvidia-cuda-mps-control || true
  unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
}
if has_part figures; then
  figure_mechanisms="ready pipeswitch mps stop-and-start per-layer-pipeline grouped-transmission no-optimization
              no-memory-management no-ipc-optimization no-pinned-memory unified-memory one-process two-processes"
  # Today's baseline: the model resident beside training, the GPU time-sliced between
  # the two processes; the simulator models it where the hardware profile has time_slicing.
  if has_time_slicing "$hardware"; then figure_mechanisms+=" time-sliced"; fi
  echo "== figures with $hardware"
  for mechanism in ${PSW_FIGURE_MECHANISMS:-$figure_mechanisms}; do
    echo "== figures: $mechanism ($(date -u +%T))"
    experiment_sets=(--set "mechanism=$mechanism" --set "hardware=$hardware")
    if [[ -n ${PSW_TRAINING_MODEL:-} ]]; then experiment_sets+=(--set "training.model=$PSW_TRAINING_MODEL"); fi
    server_options=(--set "hardware=$hardware")
    case $mechanism in
      stop-and-start | two-processes)  # seconds per switch: three requests, 12 s apart
        experiment_sets+=(--set workload.interval_ms=12000 --set workload.count=3) ;;
      one-process) server_options+=(--set workers=1) ;;
      mps) start_mps || continue ;;
    esac
    use_calibration
    validate_with "$mechanism" "$root/configs/experiments/h200-figures.yaml" "figures-$mechanism" "${server_options[@]}"
    [[ $mechanism != mps ]] || stop_mps
  done
  python3 "$root/scripts/gpu_figures.py" --out "$out/figures" "$raw" || echo "!! no figures drawn here (matplotlib?): run scripts/gpu_figures.py on the raw folder"
fi
# Figure 6 (Note [Closed-loop cycles]): per mechanism one server, and per cycle one psw validate
# of configs/experiments/h200-fig6.yaml (ResNet-152 training for a cycle, then its requests back
# to back for a cycle, PSW_FIG6_ROUNDS times) into raw/validation/fig6-<mechanism>-<cycle_ms>/.
if has_part fig6; then
  for mechanism in ${PSW_FIG6_MECHANISMS:-ready pipeswitch mps stop-and-start}; do
    echo "== fig6: $mechanism ($(date -u +%T))"
    if [[ $mechanism == mps ]]; then start_mps || continue; fi
    if start_server "$serve_config" "$raw/serve-fig6-$mechanism.log" --set "mechanism=$mechanism" --set "hardware=$hardware"; then
      for cycle_ms in ${PSW_FIG6_CYCLES_MS:-1000 2000 5000}; do
        experiment_sets=(--set "mechanism=$mechanism" --set "hardware=$hardware" --set "workload.cycle_ms=$cycle_ms"
                         --set "workload.rounds=${PSW_FIG6_ROUNDS:-3}")
        use_calibration
        validate_on_server "$root/configs/experiments/h200-fig6.yaml" "fig6-$mechanism-$cycle_ms"
      done
      save_metrics "fig6-$mechanism"
      stop_server
    fi
    [[ $mechanism != mps ]] || stop_mps
  done
  python3 "$root/scripts/gpu_figures.py" --out "$out/figures" "$raw" || echo "!! no figures drawn here (matplotlib?): run scripts/gpu_figures.py on the raw folder"
fi
# LLM decoders through the server: configs/serve/h200-llm.yaml (llama-1b and llama-8b in
# bf16, 512-token prompts, ResNet-152 training). The request path per model is measured on that
# server first (psw profile-serving, cold requests at batch 1), then psw validate of
# configs/experiments/h200-validate-llm.yaml simulates with it: calibrated on one set of runs,
# validated on another.
if has_part llm; then
  echo "== llm: the decoders served ($(date -u +%T))"
  if start_server "$root/configs/serve/h200-llm.yaml" "$raw/serve-llm.log" --set "hardware=$hardware"; then
    server_processes > "$raw/processes-llm.txt"
    nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader > "$raw/device-memory-llm.csv" || true
    "$psw" profile-serving --socket "$sock" --name h200-serve-llm --device "$(gpu_name)" \
      --model llama-1b --model llama-8b --requests 10 --gap-ms 150 --batch 1 --training-batch 8 --training-window 10 \
      --out "$raw/serving-llm.yaml" \
      || echo "!! psw profile-serving failed"
    experiment_sets=(--set "hardware=$hardware")
    if [[ -f $raw/serving-llm.yaml ]]; then experiment_sets+=(--set "serving=$raw/serving-llm.yaml"); fi
    validate_on_server "$root/configs/experiments/h200-validate-llm.yaml" h200-validate-llm
    tail -15 "$raw/validate-h200-validate-llm.txt"
    stop_server
  fi
fi
replay_s=${PSW_REPLAY_S:-540}
for replay in azure2019 llm; do
  has_part "replay-$replay" || continue
  echo "== replay $replay, $replay_s s ($(date -u +%T))"
  # The replay's length: the LLM trace's window, the Functions trace's whole minutes (at least one).
  if [[ $replay == llm ]]; then
    experiment_sets=(--set "workload.window_s=$replay_s")
  else
    experiment_sets=(--set "workload.minutes=$(( (replay_s + 59) / 60 ))")
  fi
  use_calibration
  validate_with pipeswitch "$root/configs/experiments/replay-${replay/llm/azure-llm2023}.yaml" "replay-$replay"
  # The two latency distributions side by side (beside the report: the raw folder is archived).
  python3 "$root/scripts/validation_cdf.py" "$raw/validation/replay-$replay" \
    "$out/$(date -u +%F)-replay-$replay-cdf.png" || echo "!! no CDF plot of replay-$replay (matplotlib?)"
done
echo "== report ($(date -u +%T))"
report="$out/$(date -u +%F)-${gpu:-gpu}-${PSW_REPORT_NAME:-serve}.md"
PSW="$psw" python3 "$root/scripts/serve_report.py" "$raw" > "$report"
# One archive of the raw runs (the device tool returns few files).
tar -C "$raw" -czf "$out/raw-serve.tar.gz" . && rm -rf "$raw"
echo "== written $report ($(date -u +%T))"
