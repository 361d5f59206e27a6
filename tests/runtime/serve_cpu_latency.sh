#!/usr/bin/env bash
# Note [CPU wake-up latency]: psw serve with cpu_wakeup_latency_us holds the system's limit while
# it serves and says so in its log, or, where the host does not let it open /dev/cpu_dma_latency,
# refuses to start with a message naming the key, the file and the reason (exit 1).
#
#   serve_cpu_latency.sh PSW
set -euo pipefail
psw=$1
source "$(dirname "$0")/serve_lib.sh"  # sets work (removed at exit) and sock
serve_config=configs/serve/host-tiny.yaml
if [[ -w /dev/cpu_dma_latency ]]; then
  start_ready_server --set cpu_wakeup_latency_us=0
  grep -q "CPU wake-up latency held at 0 us (in force: 0 us)" "$work/serve.log" \
    || { cat "$work/serve.log"; echo "FAIL: the hold is not in the server's log"; exit 1; }
  kill -TERM "$server"
  rc=0; wait "$server" || rc=$?
  server=
  ((rc == 0)) || { cat "$work/serve.log"; echo "FAIL: the server exited $rc after SIGTERM"; exit 1; }
  echo "held at 0 us while serving, released at exit"
else
  rc=0
  "$psw" serve --config "$serve_config" --backend host --socket "$sock" --set cpu_wakeup_latency_us=0 \
    2> "$work/serve.log" || rc=$?
  ((rc == 1)) || { cat "$work/serve.log"; echo "FAIL: exit $rc, expected 1"; exit 1; }
  grep -q "host-tiny.yaml: cpu_wakeup_latency_us: cannot hold the CPU wake-up latency at 0 us: /dev/cpu_dma_latency does not open for writing" \
    "$work/serve.log" || { cat "$work/serve.log"; echo "FAIL: the refusal does not say why"; exit 1; }
  echo "refused at start, saying why: $(grep cpu_wakeup_latency_us "$work/serve.log")"
fi
