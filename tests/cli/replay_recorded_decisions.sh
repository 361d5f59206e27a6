#!/usr/bin/env bash
# Note [Decision log]: the decision logs of the servers recorded on the H200 (results/gpu/
# raw-serve-*/*.decisions.jsonl, written by scripts/gpu-serve.sh) replay through the scheduling
# policy as built here without a difference: the GPU's servers decided what the policy decides.
#
#   replay_recorded_decisions.sh PSW
set -euo pipefail
psw=$1
shopt -s nullglob
logs=(results/gpu/raw-serve-*/*.decisions.jsonl)
((${#logs[@]} > 0)) || { echo "FAIL: no recorded decision log under results/gpu/raw-serve-*/"; exit 1; }
for log in "${logs[@]}"; do
  "$psw" replay-decisions "$log" || { echo "FAIL: $log"; exit 1; }
done
echo "PASS: ${#logs[@]} recorded decision logs"
