#!/usr/bin/env bash
# On a GPU host: the runtime's numbers (DESIGN.md §6) measured through `psw serve --backend
# cuda`, with `psw run`'s graph switch of the same models measured in the same session for
# the ratio. Raw JSON and logs go to OUT_DIR/raw-serve/, the report to OUT_DIR/<date>-h200-serve.md.
#
#   scripts/gpu-serve.sh [OUT_DIR] [main|mechanisms|all]
#
#   main        build, the gpu tests, psw run --graph per model, then the server (configs/serve/
#               h200.yaml: three models, ResNet-152 training): cold requests while training,
#               training throughput alone and at 1 request/s, 10,000 consecutive switches with
#               host and device memory before and after, each process's device memory
#   mechanisms  one server per mechanism the server runs: cold requests while training
#   dispatch    pipeswitch with `dispatch: after-stop` (requests wait for training to stop)
#   gputests    only the `gpu` ctest label (the engine on CUDA, training preempted bit for bit)
# A device call runs 10 minutes at most: run the two parts as two calls (the build is kept).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/results/gpu}
part=${2:-all}
source "$root/scripts/gpu-build.sh" "$out" psw psw-exec psw_gpu_tests psw_exec_tests psw_runtime_tests psw_runtime_gpu_tests
raw="$out/raw-serve"
mkdir -p "$raw"
bash "$root/scripts/environment.sh" > "$raw/environment.md"  # the report may be made elsewhere
psw="$build/cli/psw"
sock_dir=$(mktemp -d)
sock="$sock_dir/psw.sock"
server=
stop_server() {
  if [[ -n $server ]]; then
    kill -TERM "$server" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
    server=
  fi
}
trap 'stop_server; rm -rf "$sock_dir"' EXIT

start_server() {  # CONFIG LOG
  (cd "$root" && "$psw" serve --backend cuda --config "$1" --socket "$sock") 2> "$2" &
  server=$!
  for _ in $(seq 1 600); do
    if "$psw" client --socket "$sock" --live 2>/dev/null | grep -q "ready  yes"; then return 0; fi
    kill -0 "$server" 2>/dev/null || { tail -20 "$2"; echo "!! the server exited"; server=; return 1; }
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

if [[ $part == main || $part == all ]]; then
  echo "== psw run --graph, the same session ($(date -u +%T))"
  for model in resnet152 inception_v3 bert_base; do
    (cd "$root" && "$psw" run --model "$model" --mode pipeswitch --graph --repeat 100 --format json) > "$raw/run-$model.json"
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(sys.argv[2], "graph switch %.3f ms" % d["latency_ms"]["median"])' "$raw/run-$model.json" "$model"
  done
  echo "== serve ($(date -u +%T))"
  start_server configs/serve/h200.yaml "$raw/serve.log"
  nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader > "$raw/device-memory.csv" || true
  server_processes > "$raw/processes-start.txt"
  "$psw" bench-serve --socket "$sock" --cold-requests 50 --gap-ms 150 --batch 8 --window 20 --rate 1 --switches 0 \
    --out "$raw/bench.json"
  server_processes > "$raw/processes-before-switches.txt"
  nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader > "$raw/device-memory-before-switches.csv" || true
  "$psw" bench-serve --socket "$sock" --cold-requests 0 --window 0 --batch 1 --switches 10000 --out "$raw/switches.json"
  server_processes > "$raw/processes-after-switches.txt"
  nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader > "$raw/device-memory-after-switches.csv" || true
  stop_server
  echo "== gpu tests ($(date -u +%T))"
  ctest --test-dir "$build" -L gpu --output-on-failure --timeout 600 2>&1 | tee "$raw/gpu-tests.log" | tail -5
fi

if [[ $part == gputests ]]; then
  echo "== gpu tests ($(date -u +%T))"
  ctest --test-dir "$build" -L gpu --output-on-failure --timeout 600 2>&1 | tee "$raw/gpu-tests.log" | tail -25
  exit 0
fi

if [[ $part == mechanisms || $part == all ]]; then
  for mechanism in pipeswitch ready per-layer-pipeline grouped-transmission no-pinned-memory no-memory-management \
                   no-optimization no-ipc-optimization unified-memory; do
    echo "== mechanism $mechanism ($(date -u +%T))"
    config="$sock_dir/$mechanism.yaml"
    sed "s/^mechanism: .*/mechanism: $mechanism/; s#\.\./#$root/configs/#g" "$root/configs/serve/h200.yaml" > "$config"
    start_server "$config" "$raw/serve-$mechanism.log" || continue
    "$psw" bench-serve --socket "$sock" --cold-requests 10 --gap-ms 150 --batch 8 --window 0 --switches 0 \
      --out "$raw/mechanism-$mechanism.json" || true
    stop_server
  done
fi
if [[ $part == dispatch || $part == all ]]; then
  echo "== dispatch after-stop ($(date -u +%T))"
  config="$sock_dir/after-stop.yaml"
  { echo "dispatch: after-stop"; sed "s#\.\./#$root/configs/#g" "$root/configs/serve/h200.yaml"; } > "$config"
  if start_server "$config" "$raw/serve-after-stop.log"; then
    "$psw" bench-serve --socket "$sock" --cold-requests 30 --gap-ms 150 --batch 8 --window 0 --switches 0 \
      --out "$raw/dispatch-after-stop.json" || true
    stop_server
  fi
fi
echo "== report ($(date -u +%T))"
report="$out/$(date -u +%F)-h200-serve.md"
python3 "$root/scripts/serve_report.py" "$raw" > "$report"
# One archive of the raw runs (the device tool returns few files).
tar -C "$raw" -czf "$out/raw-serve.tar.gz" . && rm -rf "$raw"
echo "== written $report ($(date -u +%T))"
