#!/usr/bin/env bash
# psw serve when its memory daemon dies: the server stops by itself with exit 1 (it cannot
# serve without the daemon's memory), removes its socket and leaves no worker behind.
#
#   serve_daemon_death.sh PSW
set -euo pipefail
psw=$1
source "$(dirname "$0")/serve_lib.sh"  # sets work (removed at exit) and sock
serve_config=configs/serve/host-tiny.yaml  # any server: BERT-Tiny starts in seconds
start_ready_server
children=$(pgrep -P "$server" | tr '\n' ' ')
daemon=$(pgrep -P "$server" -f runtime-daemon)
kill -KILL "$daemon"
set +e
timeout 60 bash -c "while kill -0 $server 2>/dev/null; do sleep 0.1; done"
wait "$server"
rc=$?
set -e
server=
test $rc -eq 1 || { cat "$work/serve.log"; echo "FAIL: exit $rc, expected 1"; exit 1; }
grep -q "the memory daemon exited" "$work/serve.log" || { cat "$work/serve.log"; echo "FAIL: no message"; exit 1; }
test ! -e "$sock" || { echo "FAIL: socket left behind"; exit 1; }
for pid in $children; do
  if kill -0 "$pid" 2>/dev/null; then echo "FAIL: process $pid of the server left running"; exit 1; fi
done
echo "serve daemon death: ok"
