#!/usr/bin/env bash
# On a GPU host: the model repository's load and unload (Note [Repository load]) on a cuda server
# while its training job runs: tests/runtime/serve_repository.sh, CI's host test, with
# --backend cuda (CUDA IPC regions stored, bound, dropped and freed). Writes
# OUT_DIR/<date>-<gpu>-serve-repository.log: the environment, then the test's output (the
# client's load and unload times, the server's log of them).
#
#   scripts/gpu-serve-repository.sh [OUT_DIR]     # OUT_DIR defaults to results/gpu
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/results/gpu}
source "$root/scripts/gpu-build.sh" "$out" psw psw-exec
log="$out/$(date -u +%F)-${gpu:-gpu}-serve-repository.log"
{
  echo "# scripts/gpu-serve-repository.sh; do not edit by hand."
  bash "$root/scripts/environment.sh"
  cd "$root" && PSW_SERVE_BACKEND=cuda bash tests/runtime/serve_repository.sh "$build/cli/psw" 2>&1
} | sed "s|$root/||g" | tee "$log"
