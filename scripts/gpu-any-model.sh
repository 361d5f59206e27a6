#!/usr/bin/env bash
# On a GPU host: build, run the `gpu` ctest label, export models that are not in the zoo with
# their usual libraries (scripts/export_models.py), switch each one cold through its captured
# graph with `psw run --graph` (Note [Graph-pipelined switch] in exec/captured_forward.hpp),
# planned for the link measured first with `psw profile --link`, then serve it alone with
# `psw serve --backend cuda` (cache off: every request a cold switch through its captured graph,
# Note [TorchScript served through its graph]) and measure the client's latency with inputs in
# shared memory (`psw client --shared-memory`), and write
# OUT_DIR/<date>-<gpu>-any-model.md and OUT_DIR/any-model.json with the environment; the runs' raw
# JSON, measured profiles, captured-graph files and errors go to OUT_DIR/any-model-raw.tar.gz.
#
#   scripts/gpu-any-model.sh [OUT_DIR [MODEL ...]]   # OUT_DIR defaults to results/gpu; MODEL: all; NAME:aoti an
#                                                    # AOTInductor package of NAME (export_models.py)
#   PSW_GPU_SKIP_TESTS=1: without the gpu tests; PSW_GPU_REPEAT: measured switches (50) and requests
#   PSW_GPU_SKIP_SERVE=1: without serving the models
#   PSW_GPU_DEADLINE=EPOCH_SECONDS: models not started by then are skipped (a device call's limit)
#   PSW_CPU_WAKEUP_LATENCY_US: the servers and psw run with the host's CPU wake-up latency held there
#     (Note [CPU wake-up latency]; needs root)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/results/gpu}
shift || true
targets=(psw psw-exec)
held_config= held_flags=()
if [[ -n ${PSW_CPU_WAKEUP_LATENCY_US:-} ]]; then
  [[ $PSW_CPU_WAKEUP_LATENCY_US =~ ^[0-9]+$ ]] || {
    echo "gpu-any-model: PSW_CPU_WAKEUP_LATENCY_US='$PSW_CPU_WAKEUP_LATENCY_US': expected microseconds (0 or more)" >&2; exit 2; }
  held_config="cpu_wakeup_latency_us: $PSW_CPU_WAKEUP_LATENCY_US"
  held_flags=(--cpu-wakeup-latency-us "$PSW_CPU_WAKEUP_LATENCY_US")
fi
[[ -z ${PSW_GPU_SKIP_TESTS:-} ]] && targets+=(psw_gpu_tests)  # the gpu tests only where they run
source "$root/scripts/gpu-build.sh" "$out" "${targets[@]}"
report="$out/$(date -u +%F)-${gpu:-gpu}-any-model.md"
if [[ -n ${PSW_GPU_SKIP_TESTS:-} ]]; then
  echo "== gpu tests skipped (PSW_GPU_SKIP_TESTS)"
elif echo "== gpu tests ($(date -u +%T))"; ctest --test-dir "$build" -L gpu --output-on-failure --timeout 600 2>&1 | sed "s|$root/||g" > "$out/gpu-tests.log"; then
  tail -4 "$out/gpu-tests.log"
else
  echo "!! gpu tests failed:"; grep -E "Failed|\*\*\*" "$out/gpu-tests.log" | head -20
fi
work=$(mktemp -d)
raw="$work/any-model-raw"
mkdir -p "$raw"
# The link of this GPU, for the plans and the bounds (a zoo model's profile comes with it).
echo "== link ($(date -u +%T))"
(cd "$root" && "$build/cli/psw-exec" profile --model resnet152 --batch 8 --repeat 5 --link --hardware-name measured-link \
   --out "$raw/link" > /dev/null)
hardware="$raw/link/measured-link.yaml"
# The model served alone, cold every request: its module-level profile (psw serve's plan packs
# the store by it), a config, the server, the client's latencies with inputs in shared memory.
serve_model() {  # NAME FILE DTYPE OUTPUT SPEC (one input: SHAPE:DTYPE; OUTPUT: one sample's, comma-separated)
  local name=$1 file=$2 dtype=$3 output=$4 spec=$5 dir="$work/serve-$1"
  local shape=${spec%%:*}
  local batch=${shape%%,*} rest=${shape#*,}
  mkdir -p "$dir"
  if ! (cd "$root" && "$build/cli/psw-exec" profile --model "$file" --dtype "$dtype" --input-shape "$shape" \
          --input-dtype "${spec##*:}" --repeat 5 --out "$dir/profiles") > /dev/null 2> "$raw/$name-served.err"; then
    echo "!! $name served: $(tail -1 "$raw/$name-served.err")"; return 0
  fi
  cat > "$dir/serve.yaml" <<YAML
workers: 1
cache: off
hardware: $hardware
profiles: $dir/profiles
request_timeout_ms: 120000
$held_config
models:
  - name: $name
    torchscript: $file
    dtype: $dtype
    batch: $batch
    input_shape: [${rest}]
    input_dtype: ${spec##*:}
    output_shape: [${output}]
YAML
  local sock="$dir/serve.sock"
  (cd "$root" && "$build/cli/psw" serve --backend cuda --config "$dir/serve.yaml" --socket "$sock") 2> "$raw/$name-serve.log" &
  local server=$! ready=
  for _ in $(seq 1 600); do
    if "$build/cli/psw" client --socket "$sock" --live 2>/dev/null | grep -q "ready  yes"; then ready=1; break; fi
    kill -0 "$server" 2>/dev/null || break
    sleep 0.5
  done
  if [[ -n $ready ]] && "$build/cli/psw" client --socket "$sock" --model "$name" --random --batch "$batch" --shared-memory \
        --repeat "${PSW_GPU_REPEAT:-50}" --format json > "$raw/$name-served.json" 2>> "$raw/$name-served.err"; then
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print("served (shared memory): median %.3f ms" % d["latency_ms"]["median"])' "$raw/$name-served.json"
    # Where the requests' time went at the server (Note [Request phases]).
    "$build/cli/psw" client --socket "$sock" --metrics > "$raw/$name-served-metrics.txt" 2>&1 || true
    grep -E '^psw_(request_phase|server_latency)_seconds.*quantile="0.5"' "$raw/$name-served-metrics.txt" \
      | sed -E -e 's/^psw_server_latency_seconds\{quantile="0.5"\}/server/' \
               -e 's/^psw_request_phase_seconds\{phase="([a-z_]*)",quantile="0.5"\}/\1/' \
      | awk '{printf "%s %.3f ms  ", $1, $2 * 1e3} END {print ""}' || true
  else
    echo "!! $name served: $(tail -2 "$raw/$name-serve.log" "$raw/$name-served.err" | tr '\n' ' ')"
  fi
  kill "$server" 2>/dev/null; wait "$server" 2>/dev/null || true
}
echo "== export ($(date -u +%T))"
python3 "$root/scripts/export_models.py" "$work" "$@" > "$work/models.txt" 2> "$raw/export.err" || true
cat "$work/models.txt"
while read -r name file dtype output specs; do
  if [[ -n ${PSW_GPU_DEADLINE:-} ]] && (($(date +%s) > PSW_GPU_DEADLINE)); then
    echo "!! $name: not run, past PSW_GPU_DEADLINE"; rm -f "$file"; continue
  fi
  echo "== $name ($(date -u +%T))"
  args=()
  for spec in $specs; do args+=(--input-shape "${spec%%:*}" --input-dtype "${spec##*:}"); done
  if (cd "$root" && "$build/cli/psw-exec" run --model "$file" --dtype "$dtype" "${args[@]}" --graph --hardware "$hardware" \
        --repeat "${PSW_GPU_REPEAT:-50}" --graph-out "$raw/$name-graph.json" --profile-out "$raw/$name.yaml" \
        --format json ${held_flags[@]+"${held_flags[@]}"}) > "$raw/$name.json" 2> "$raw/$name.err"; then
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print("cold %.3f ms, bound %.3f ms (%.3f x), copy-then-replay %.3f ms, %d/%d equal" % (d["latency_ms"]["median"], d["bound_ms"], d["over_bound"], d["copy_then_replay_ms"]["median"], d["outputs_equal"], d["outputs_checked"]))' "$raw/$name.json"
  else
    echo "!! $name: $(tail -1 "$raw/$name.err")"
  fi
  [[ -z ${PSW_GPU_SKIP_SERVE:-} ]] && serve_model "$name" "$file" "$dtype" "$output" $specs
  rm -f "$file"
done < "$work/models.txt"
python3 "$root/scripts/any_model_report.py" "$raw" "$root/scripts/environment.sh" "$out/any-model.json" > "$report"
tar -C "$raw" -czf "$out/any-model-raw.tar.gz" .
rm -rf "$work"
echo "== written $report ($(date -u +%T))"
