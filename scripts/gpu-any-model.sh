#!/usr/bin/env bash
# On a GPU host: build, run the `gpu` ctest label, export models that are not in the zoo with
# their usual libraries (scripts/export_models.py), switch each one cold through its captured
# graph with `psw run --graph` (Note [Graph-pipelined switch] in exec/captured_forward.hpp),
# planned for the link measured first with `psw profile --link`, and write
# OUT_DIR/<date>-<gpu>-any-model.md and OUT_DIR/any-model.json with the environment; the runs' raw
# JSON, measured profiles, captured-graph files and errors go to OUT_DIR/any-model-raw.tar.gz.
#
#   scripts/gpu-any-model.sh [OUT_DIR [MODEL ...]]   # OUT_DIR defaults to results/gpu; MODEL: all
#   PSW_GPU_SKIP_TESTS=1: without the gpu tests; PSW_GPU_REPEAT: measured switches (50)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/results/gpu}
shift || true
source "$root/scripts/gpu-build.sh" "$out" psw-exec psw_gpu_tests
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -oiE 'h100|h200|a100|l4|l40s' | head -1 \
      | tr 'A-Z' 'a-z' || true)
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
echo "== export ($(date -u +%T))"
python3 "$root/scripts/export_models.py" "$work" "$@" > "$work/models.txt" 2> "$raw/export.err" || true
cat "$work/models.txt"
while read -r name file dtype specs; do
  echo "== $name ($(date -u +%T))"
  args=()
  for spec in $specs; do args+=(--input-shape "${spec%%:*}" --input-dtype "${spec##*:}"); done
  if (cd "$root" && "$build/cli/psw-exec" run --model "$file" --dtype "$dtype" "${args[@]}" --graph --hardware "$hardware" \
        --repeat "${PSW_GPU_REPEAT:-50}" --graph-out "$raw/$name-graph.json" --profile-out "$raw/$name.yaml" \
        --format json) > "$raw/$name.json" 2> "$raw/$name.err"; then
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print("cold %.3f ms, bound %.3f ms (%.3f x), copy-then-replay %.3f ms, %d/%d equal" % (d["latency_ms"]["median"], d["bound_ms"], d["over_bound"], d["copy_then_replay_ms"]["median"], d["outputs_equal"], d["outputs_checked"]))' "$raw/$name.json"
  else
    echo "!! $name: $(tail -1 "$raw/$name.err")"
  fi
  rm -f "$file"
done < "$work/models.txt"
python3 "$root/scripts/any_model_report.py" "$raw" "$root/scripts/environment.sh" "$out/any-model.json" > "$report"
tar -C "$raw" -czf "$out/any-model-raw.tar.gz" .
rm -rf "$work"
echo "== written $report ($(date -u +%T))"
