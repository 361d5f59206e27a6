#!/usr/bin/env bash
# Note [Resolved configs]: a run's config.resolved.yaml reruns it. For each config (and its
# --set overrides): psw sim --out A, then psw sim --config A/config.resolved.yaml --out B, and
# B/summary.json must equal A/summary.json byte for byte (and requests.csv where written).
# The resolved file must name no absolute path (it moves with its folder, Note [Resolved
# configs]); a run's folder moved to another folder at the same depth reruns as well.
#
#   bash tests/cli/resolved_rerun.sh PSW   (from the project root)
set -uo pipefail
psw=$1
work=$(mktemp -d "${TMPDIR:-/tmp}/psw-resolved.XXXXXX")
# A run inside the project, moved below (a folder of its own under tests/data).
moved_root=tests/data/.resolved-rerun-$$
trap 'rm -rf "$work" "$moved_root"' EXIT
failed=0
n=0
check() {
  local config=$1
  shift
  n=$((n + 1))
  local a=$work/a$n b=$work/b$n
  local sets=()
  for s in "$@"; do sets+=(--set "$s"); done
  if ! "$psw" sim --config "$config" "${sets[@]}" --out "$a" >"$work/log" 2>&1; then
    echo "FAIL: $config $*: the first run failed:"; cat "$work/log"; failed=1; return
  fi
  if grep -nE "(^|[ :{,])/[^ ]*" "$a/config.resolved.yaml" | grep -v '^[0-9]*:#' >"$work/abs"; then
    echo "FAIL: $config $*: an absolute path in the resolved config:"; cat "$work/abs"; failed=1
  fi
  if ! "$psw" sim --config "$a/config.resolved.yaml" --out "$b" >"$work/log" 2>&1; then
    echo "FAIL: $config $*: the rerun of the resolved config failed:"; cat "$work/log"
    cat "$a/config.resolved.yaml"; failed=1; return
  fi
  for f in summary.json requests.csv; do
    if [[ -e $a/$f || -e $b/$f ]] && ! cmp -s "$a/$f" "$b/$f"; then
      echo "FAIL: $config $*: $f differs on the rerun of the resolved config:"
      diff "$a/$f" "$b/$f" | head -20; cat "$a/config.resolved.yaml"; failed=1
    fi
  done
  # The resolved config of the rerun is the same file but for the comment naming its source:
  # nothing drifts on a second round.
  if ! diff <(grep -v '^# source: ' "$a/config.resolved.yaml") <(grep -v '^# source: ' "$b/config.resolved.yaml") >"$work/diff"; then
    echo "FAIL: $config $*: the rerun's resolved config differs:"; cat "$work/diff"; failed=1
  fi
}

check tests/data/sim/small.yaml                                   # training job, periodic
check tests/data/sim/small.yaml mechanism=mps 'workload.models=[bert_base, resnet152, resnet152]' workload.interval_ms=123.456789
check tests/data/sim/poisson.yaml                                 # weighted models, SLO
check tests/data/sim/cycles.yaml                                  # cycles
check tests/data/sim/project-trace.yaml                           # a CSV trace, by path
check tests/data/sim/parallel.yaml parallel.gpus=2                # pipeswitch-parallel
check tests/data/sim/placement.yaml                               # placement auto
check tests/data/sim/training-batch16.yaml                        # serving profile, training at batch 16, bursty
check configs/experiments/h200-validate.yaml                      # serving profile and training
check configs/experiments/replay-azure2019.yaml                   # Azure Functions: window, sample, functions
check configs/experiments/replay-azure-llm2023.yaml               # Azure LLM: buckets

# A run's folder moved with the project (a clone elsewhere) or within it at the same depth:
# the resolved config's relative paths still hold.
"$psw" sim --config tests/data/sim/project-trace.yaml --out "$moved_root/x/run" >"$work/log" 2>&1 || {
  echo "FAIL: the run into $moved_root failed:"; cat "$work/log"; exit 1; }
mkdir -p "$moved_root/y"
mv "$moved_root/x/run" "$moved_root/y/run"
if ! "$psw" sim --config "$moved_root/y/run/config.resolved.yaml" --out "$work/moved" >"$work/log" 2>&1 ||
   ! cmp -s "$moved_root/y/run/summary.json" "$work/moved/summary.json"; then
  echo "FAIL: the resolved config of a moved folder does not rerun the same:"; cat "$work/log"; failed=1
fi
if ((failed == 0)); then echo "ok: $n resolved configs rerun the same"; fi
exit $failed
