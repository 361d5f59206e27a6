#!/usr/bin/env bash
# On a GPU host: configure against the CUDA LibTorch of the installed PyTorch (DESIGN.md §7),
# build, run the `gpu` ctest label, profile the three models (forward and, with --train,
# backward) and the link (`psw profile`, into OUT_DIR/profiles/), then measure switches with
# `psw run` for every model and mode, predicting with the measured profiles, with one traced
# switch per model (Chrome traces, OUT_DIR/traces.tar.gz), and write OUT_DIR/<date>-h200.md
# with the environment.
#
#   scripts/gpu-test.sh [OUT_DIR]        # OUT_DIR defaults to results/gpu
#
# Dependencies the GPU image lacks (yaml-cpp, CLI11, nlohmann-json, GoogleTest) may be given
# as an unpacked Debian tree in .gpu-carry/ (scripts/gpu-carry.sh makes it).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/results/gpu}
source "$root/scripts/gpu-build.sh" "$out" psw psw-exec psw_gpu_tests psw_exec_tests psw_runtime_gpu_tests
echo "== gpu tests ($(date -u +%T))"
ctest --test-dir "$build" -L gpu --output-on-failure --timeout 600 2>&1 | sed "s|$root/||g" | tee "$out/gpu-tests.log" | tail -15
raw="$out/raw-$(date -u +%F)"
profiles="$out/profiles"
traces="$out/traces"
mkdir -p "$raw" "$profiles" "$traces"
echo "== profiles ($(date -u +%T))"
for model in resnet152 inception_v3 bert_base; do
  link=()
  if [[ $model == resnet152 ]]; then link=(--link --hardware-name h200-pcie5); fi
  # If the training iteration cannot be captured as a graph, profile it eagerly (and say so).
  # --format json: the phases as measured, for the report (scripts/gpu_report.py reads no YAML).
  (cd "$root" && "$build/cli/psw" profile --model "$model" --batch 8 --repeat 50 --train "${link[@]}" --out "$profiles" \
     --format json > "$profiles/$model.json") \
    || { echo "!! graph profile of $model training failed; profiling its training iteration eagerly";
         (cd "$root" && "$build/cli/psw" profile --model "$model" --batch 8 --repeat 50 --train --train-eager "${link[@]}" \
            --out "$profiles" --format json > "$profiles/$model.json"); }
  cat "$profiles/$model.json"
done
echo "== switches ($(date -u +%T))"
for model in resnet152 inception_v3 bert_base; do
  for mode in pipeswitch pipeswitch-graph pipeswitch-graph-placement grouped-transmission per-layer-pipeline \
              per-layer-pipeline-graph no-pinned-memory no-memory-management; do
    base=${mode%-placement}
    args=(--mode "${base%-graph}")
    if [[ $base == *-graph ]]; then args+=(--graph); fi
    if [[ $mode == *-placement ]]; then
      [[ $model == bert_base ]] || continue   # only BERT has layers worth reading in place
      args+=(--placement auto)
    fi
    if [[ $mode == pipeswitch-graph || $mode == pipeswitch ]]; then args+=(--timeline "$traces/$model-$mode.json"); fi
    (cd "$root" && "$build/cli/psw" run --model "$model" "${args[@]}" --repeat "${PSW_GPU_REPEAT:-100}" \
       --profile "$profiles/$model.yaml" --hardware "$profiles/h200-pcie5.yaml" --format json) > "$raw/$model-$mode.json"
    echo "$model $mode: $(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print("latency %.3f ms, ready eager %.3f ms, ready graph %.3f ms, startup %.3f ms" % (d["latency_ms"]["median"], d["ready_ms"]["median"], d["ready_graph_ms"]["median"], d["startup_ms"]["median"]))' "$raw/$model-$mode.json")"
  done
done
report="$out/$(date -u +%F)-h200.md"
python3 "$root/scripts/gpu_report.py" "$raw" "$root/scripts/environment.sh" "$profiles" > "$report"
# One archive each for the raw runs, the profiles and the traces (the device tool returns few files).
tar -C "$raw" -czf "$out/raw-runs.tar.gz" . && rm -rf "$raw"
tar -C "$profiles" -czf "$out/profiles.tar.gz" . && rm -rf "$profiles"
tar -C "$traces" -czf "$out/traces.tar.gz" . && rm -rf "$traces"
echo "== written $report ($(date -u +%T))"
