#!/usr/bin/env bash
# Makes the profiles measured on the lent H200 (results/profiles/, written by `psw profile`
# through scripts/gpu-test.sh) the project's h200 configs:
#   results/profiles/h200-calibrated.yaml -> configs/hardware/h200-pcie5.yaml (the links as
#                                         `psw profile --link` measured them on the H200, and
#                                         each estimated cost that scripts/calibrate-h200.sh
#                                         fitted to a recorded run, its source in the note)
#   results/profiles/<model>.yaml     -> configs/models/h200/<model>.yaml
#   results/profiles/bf16/<model>.yaml -> configs/models/h200/bf16/<model>.yaml (scripts/gpu-llm.sh)
#   results/profiles/serving-h200-from-burst-c.yaml -> configs/serving/h200.yaml (psw profile-serving
#                                         --from-load of the burst run
#                                         raw-serve-2026-12-02-held-c, through
#                                         scripts/revalidate-h200.sh part 5: the request path of
#                                         psw load's client, with protocol quantiles and growth;
#                                         held out on two replays, README)
# Each copy gets one header line naming its source; nothing else changes. Then the several-H200
# profile, configs/hardware/h200-pcie5-nvlink.yaml, is composed from the adopted
# configs/hardware/h200-pcie5.yaml (renamed) and its multi_gpu section in
# configs/hardware/peers/h200-nvlink.yaml (Note [Parallel paths]).
#
#   scripts/adopt-profiles.sh           # copy
#   scripts/adopt-profiles.sh --check   # fail if a config differs from its measured source
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
check=false
if [[ ${1:-} == --check ]]; then check=true; elif [[ $# -gt 0 ]]; then
  echo "usage: $0 [--check]" >&2
  exit 2
fi
status=0
adopt() {
  local source=$1 target=$2
  if [[ ! -f "$root/$source" ]]; then
    echo "adopt-profiles: $source is missing (run scripts/gpu-test.sh or gpu-serve.sh on the GPU host first)" >&2
    exit 1
  fi
  local expected
  expected="# Adopted from $source by scripts/adopt-profiles.sh; do not edit by hand."$'\n'"$(cat "$root/$source")"
  if $check; then
    if [[ ! -f "$root/$target" ]] || [[ "$(cat "$root/$target")" != "$expected" ]]; then
      echo "adopt-profiles: $target is not $source (run scripts/adopt-profiles.sh)" >&2
      status=1
    fi
  else
    mkdir -p "$(dirname "$root/$target")"
    printf '%s\n' "$expected" > "$root/$target"
    echo "adopted $source -> $target"
  fi
}
adopt results/profiles/h200-calibrated.yaml configs/hardware/h200-pcie5.yaml
for model in resnet152 inception_v3 bert_base; do
  adopt "results/profiles/$model.yaml" "configs/models/h200/$model.yaml"
done
# bf16 (scripts/gpu-llm.sh): two of the zoo's models and the decoders, measured at their batch
# (8; the decoders 1 at a 512-token prompt).
for model in resnet152 bert_base llama-1b llama-8b; do
  adopt "results/profiles/bf16/$model.yaml" "configs/models/h200/bf16/$model.yaml"
done
# The request path as psw load's client pays it (Note [Client connections]): psw profile-serving's
# own (results/profiles/serving-h200.yaml) sends from one thread and its protocol came out 10-17%
# shorter on the machine of raw-serve-2026-12-02-held-c.
adopt results/profiles/serving-h200-from-burst-c.yaml configs/serving/h200.yaml
compose_peers() {
  local single=$1 section=$2 target=$3 name=$4
  local expected
  expected="# Composed by scripts/adopt-profiles.sh from $single (renamed $name) and $section; do not edit by hand."$'\n'"$(sed "s/^name: .*/name: $name/" "$root/$single")"$'\n'"$(cat "$root/$section")"
  if $check; then
    if [[ ! -f "$root/$target" ]] || [[ "$(cat "$root/$target")" != "$expected" ]]; then
      echo "adopt-profiles: $target is not $single with $section (run scripts/adopt-profiles.sh)" >&2
      status=1
    fi
  else
    printf '%s\n' "$expected" > "$root/$target"
    echo "composed $single + $section -> $target"
  fi
}
compose_peers configs/hardware/h200-pcie5.yaml configs/hardware/peers/h200-nvlink.yaml \
  configs/hardware/h200-pcie5-nvlink.yaml h200-pcie5-nvlink
exit $status
