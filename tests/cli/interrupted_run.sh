#!/usr/bin/env bash
# Note [Interrupted runs]: SIGTERM to a running `psw sim --out DIR` (as `timeout` or a batch
# system's time limit sends it) ends it as killed by the signal and leaves no DIR.tmp-<pid>
# (nor DIR); the same for `psw sweep`. A DIR.tmp-<pid> of a run killed with SIGKILL is removed
# by the next run into DIR.
#
#   bash tests/cli/interrupted_run.sh PSW   (from the project root)
set -uo pipefail
psw=$1
out=$(mktemp -d "${TMPDIR:-/tmp}/psw-interrupted.XXXXXX")
trap 'rm -rf "$out"' EXIT
failed=0

# Starts `psw ARGS...` in the background, waits until its staging folder DIR.tmp-* exists and
# has grown, then sends SIGNAL; checks the exit status and that nothing of DIR remains.
interrupt() {
  local signal=$1 dir=$2
  shift 2
  "$psw" "$@" >"$out/log" 2>&1 &
  local pid=$!
  local staged=""
  for _ in $(seq 200); do
    staged=$(ls -d "$dir".tmp-* 2>/dev/null | head -1)
    [[ -n $staged ]] && break
    sleep 0.05
  done
  if [[ -z $staged ]]; then
    echo "FAIL: $*: no staging folder $dir.tmp-* appeared"; cat "$out/log"; kill -KILL $pid; failed=1; return
  fi
  sleep 0.5
  kill -"$signal" $pid
  wait $pid
  local rc=$?
  if [[ $signal == KILL ]]; then return; fi
  local expected=$((128 + $(kill -l "$signal")))
  if ((rc != expected)); then echo "FAIL: $*: exit status $rc after SIG$signal, expected $expected"; cat "$out/log"; failed=1; fi
  local left
  left=$(ls -d "$dir"* 2>/dev/null)
  if [[ -n $left ]]; then echo "FAIL: $*: SIG$signal left $left"; failed=1; fi
}

# About 10^10 requests: runs far longer than the test waits.
long=(sim --config tests/data/sim/small.yaml --set workload.interval_ms=1 --set workload.count=10000000000)
interrupt TERM "$out/run" "${long[@]}" --out "$out/run"
interrupt HUP "$out/run" "${long[@]}" --out "$out/run"
interrupt TERM "$out/sweep" sweep --config tests/data/sim/sweep-long.yaml --jobs 2 --out "$out/sweep"

# SIGKILL cannot be caught: the folder stays, and the next run into the same DIR removes it.
interrupt KILL "$out/run" "${long[@]}" --out "$out/run"
if [[ -z $(ls -d "$out"/run.tmp-* 2>/dev/null) ]]; then echo "FAIL: SIGKILL left no staging folder to test with"; failed=1; fi
if ! "$psw" sim --config tests/data/sim/small.yaml --out "$out/run" >"$out/log" 2>&1; then cat "$out/log"; failed=1; fi
left=$(ls -d "$out"/run.* 2>/dev/null)
if [[ -n $left ]]; then echo "FAIL: the run after a SIGKILL left $left"; failed=1; fi
if ((failed == 0)); then echo "ok: interrupted runs leave no staging folder"; fi
exit $failed
