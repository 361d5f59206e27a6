#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz/, CMake option PSW_FUZZ, clang with ASan+UBSan) in
# build-fuzz/ (or $PSW_FUZZ_BUILD_DIR) and runs each for a bounded time, seeded from the
# shipped configs and the test data. Fails on the first finding: libFuzzer writes the input to
# build-fuzz/findings/<target>/ and prints how to reproduce it.
#
#   PSW_FUZZ_SECONDS   seconds per target (default 30)
#   PSW_FUZZ_TARGETS   the targets to run (default: all), e.g. "fuzz_traces fuzz_cli"
#   PSW_FUZZ_JOBS      build parallelism (default: nproc)
#   PSW_FUZZ_PARALLEL  targets run side by side (default: nproc)
#   PSW_FUZZ_UNIT_TESTS=1  also build the unit tests (psw_unit_tests, psw_sim_tests,
#                      psw_xval_tests) in the same build and run them first: they run under
#                      ASan+UBSan there, and the libraries compile once for both (scripts/test.sh,
#                      CI). libFuzzer's coverage hooks are inert without libFuzzer's main.
#
# Reproduce a finding:  build-fuzz/tests/fuzz/<target> build-fuzz/findings/<target>/crash-...
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${PSW_FUZZ_BUILD_DIR:-$root/build-fuzz}
seconds=${PSW_FUZZ_SECONDS:-30}
all="fuzz_model_profile fuzz_hardware_profile fuzz_serving_profile fuzz_plan fuzz_experiment_config fuzz_sweep_config
     fuzz_serve_config fuzz_traces fuzz_safetensors fuzz_cli fuzz_rest_request fuzz_kernel_graph"
targets=${PSW_FUZZ_TARGETS:-$all}

generator=()
if command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi
# -O1 and line tables only: the build is most of the time this takes, and a finding's stack
# trace needs no more than file and line.
# A unity build for the same reason (scripts/test.sh).
if [[ ! -f "$build/CMakeCache.txt" ]]; then
  CC=clang CXX=clang++ cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only -DNDEBUG" -DCMAKE_UNITY_BUILD=ON \
    -DPSW_FUZZ=ON -DPSW_BUILD_TESTS=ON -DPSW_BUILD_BENCH=OFF -DCMAKE_DISABLE_FIND_PACKAGE_Torch=ON >/dev/null
fi
unit_tests=()
if [[ -n ${PSW_FUZZ_UNIT_TESTS:-} ]]; then unit_tests=(psw_unit_tests psw_sim_tests psw_xval_tests); fi
# shellcheck disable=SC2086
cmake --build "$build" --parallel "${PSW_FUZZ_JOBS:-$(nproc)}" --target $targets "${unit_tests[@]}"
echo "fuzz: built in ${SECONDS}s"  # where CI's time goes (scripts/test.sh prints its parts too)
if ((${#unit_tests[@]})); then
  # The binaries themselves: ctest there would also list tests whose programs this build
  # leaves out (the runtime's, the CLI's). Side by side: each is one thread.
  "$build/tests/psw_unit_tests" --gtest_brief=1 >"$build/unit_tests.log" 2>&1 &
  unit_pid=$!
  "$build/tests/psw_sim_tests" --gtest_brief=1 >"$build/sim_tests.log" 2>&1 &
  sim_pid=$!
  "$build/tests/psw_xval_tests" --gtest_brief=1 >"$build/xval_tests.log" 2>&1 &
  xval_pid=$!
  unit_status=0 sim_status=0 xval_status=0
  wait "$unit_pid" || unit_status=$?
  wait "$sim_pid" || sim_status=$?
  wait "$xval_pid" || xval_status=$?
  cat "$build/unit_tests.log" "$build/sim_tests.log" "$build/xval_tests.log"
  if ((unit_status != 0 || sim_status != 0 || xval_status != 0)); then
    echo "fuzz: the unit tests failed under ASan+UBSan (psw_unit_tests $unit_status, psw_sim_tests $sim_status," \
         "psw_xval_tests $xval_status)"
    exit 1
  fi
  echo "fuzz: unit tests under ASan+UBSan done at ${SECONDS}s"
fi

# Seed corpora: the shipped files of each kind (copied: libFuzzer adds to the first corpus
# folder, and the sources stay untouched).
corpus=$build/corpus
rm -rf "$corpus"
seed() {  # seed TARGET FILES...
  local target=$1
  shift
  mkdir -p "$corpus/$target"
  local f
  for f in "$@"; do [[ -f $f ]] && cp "$f" "$corpus/$target/$(echo "$f" | tr / _)"; done
  return 0
}
cd "$root"
seed fuzz_model_profile configs/models/*.yaml configs/models/h200/*.yaml tests/data/bad/model_*.yaml
seed fuzz_hardware_profile configs/hardware/*.yaml tests/data/sim/h200-mapped.yaml tests/data/bad/hardware_*.yaml
seed fuzz_serving_profile configs/serving/*.yaml tests/data/sim/serving-*.yaml
seed fuzz_plan configs/plans/*.yaml tests/data/plans/*.yaml tests/data/bad/groups_*.yaml
seed fuzz_experiment_config configs/experiments/*.yaml tests/data/bad-sim/*.yaml
seed fuzz_sweep_config configs/experiments/fig*.yaml configs/experiments/h200-measured.yaml
seed fuzz_serve_config configs/serve/*.yaml tests/data/bad-serve/*.yaml
seed fuzz_safetensors tests/data/safetensors/*.safetensors
# Traces: the first byte picks the reader (fuzz_traces.cpp): 0 csv, 1 and 2 Azure 2019,
# 3 Azure 2021, 4 Azure LLM 2023.
mkdir -p "$corpus/fuzz_traces"
for f in tests/data/traces/*.csv; do
  case $(basename "$f") in
    project_*) b='\x00' ;; af2019_*) b='\x01' ;; af2021_*) b='\x03' ;; llm2023_*) b='\x04' ;; *) continue ;;
  esac
  { printf "$b"; head -c 4096 "$f"; } >"$corpus/fuzz_traces/$(basename "$f")"
done
# REST bodies: the first byte picks the kind (fuzz_rest_request.cpp): an inference request whose
# Inference-Header-Content-Length is 0 none, 1 half the body, 2 the end of its JSON (the binary
# tail after it); 3 a repository load, 4 an unload, 5 a generate call.
mkdir -p "$corpus/fuzz_rest_request"
printf '\x00{"id":"a","inputs":[{"name":"x","shape":[2,2],"datatype":"FP32","data":[[1,2],[3,4.5]]}],"outputs":[{"name":"y","parameters":{"binary_data":true}}]}' >"$corpus/fuzz_rest_request/json"
printf '\x00{"inputs":[{"name":"t","shape":[3],"datatype":"INT8","data":[1,-2,3]},{"name":"b","shape":[2],"datatype":"BOOL","data":[true,false]}],"parameters":{"binary_data_output":true}}' >"$corpus/fuzz_rest_request/types"
printf '\x02{"inputs":[{"name":"x","shape":[1,2],"datatype":"FP32","parameters":{"binary_data_size":8}}]}\x00\x00\x80\x3f\x00\x00\x00\x40' >"$corpus/fuzz_rest_request/binary"
printf '\x03{"parameters":{"config":"{name: resnet50, torchscript: r.pt, inputs: [{shape: [1, 3, 224, 224]}]}"}}' >"$corpus/fuzz_rest_request/load"
printf '\x04{"parameters":{}}' >"$corpus/fuzz_rest_request/unload"
printf '\x05{"id":"g","input_ids":[1,15,43],"parameters":{"max_tokens":8}}' >"$corpus/fuzz_rest_request/generate"
# Kernel graphs: a CNN-shaped capture (tests/cli/make_kernel_graph.py), and every kind of node.
mkdir -p "$corpus/fuzz_kernel_graph"
python3 tests/cli/make_kernel_graph.py "$corpus/fuzz_kernel_graph/cnn.json" --blocks 2
printf '{"format":"psw-kernel-graph-1","device":"d","parameters":[{"name":"a.w","address":4096,"bytes":64},{"name":"b.w","address":4608,"bytes":8}],"nodes":[{"kind":"kernel","name":"k","dependencies":[],"arguments":"0010000000000000","slots":[[0,8]],"time_ns":5},{"kind":"memcpy","dependencies":[0],"address":4608,"bytes":4,"second_address":0,"second_bytes":4,"time_ns":1},{"kind":"memset","dependencies":[1],"address":4096,"bytes":2,"time_ns":1},{"kind":"opaque","dependencies":[2],"time_ns":3},{"kind":"kernel","dependencies":[3],"time_ns":2},{"kind":"empty","dependencies":[4,0]}]}' >"$corpus/fuzz_kernel_graph/kinds.json"
mkdir -p "$corpus/fuzz_cli"
printf 'psw\nplan\n--model\nconfigs/models/resnet152.yaml\n--hardware\nconfigs/hardware/h200-pcie5.yaml\n--format\njson' >"$corpus/fuzz_cli/plan"
printf 'psw\nsim\n--config\nx.yaml\n--seed\n3\n--set\nmechanism=mps' >"$corpus/fuzz_cli/sim"
printf 'psw\nsweep\n--config\nx.yaml\n--jobs\n2' >"$corpus/fuzz_cli/sweep"
printf 'psw\nsynth\n--kind\ncnn\n--layers\n10\n--batch\n4' >"$corpus/fuzz_cli/synth"
printf 'psw\nclient\n--model\nm\n--random\n--batch\n8\n--repeat\n3\n--timeout\n1.5\n--seed\n7' >"$corpus/fuzz_cli/client"
printf 'psw\nbench-serve\n--window\n2.5\n--rate\n3\n--switches\n10' >"$corpus/fuzz_cli/bench"
printf 'psw\nserve\n--config\nc.yaml\n--backend\nhost' >"$corpus/fuzz_cli/serve"

# One target: runs it and prints its result in one piece; exit status 1 on a finding.
fuzz_target() {
  local target=$1 findings=$build/findings/$1
  mkdir -p "$findings"
  local dict=()
  [[ -f $root/tests/fuzz/$target.dict ]] && dict=(-dict="$root/tests/fuzz/$target.dict")
  # Not YAML: the CLI's arguments, the traces' CSV, safetensors' binary and JSON.
  [[ $target != fuzz_cli && $target != fuzz_traces && $target != fuzz_safetensors && $target != fuzz_kernel_graph &&
     -f $root/tests/fuzz/yaml.dict ]] && dict=(-dict="$root/tests/fuzz/yaml.dict")
  # -rss_limit_mb: a target that allocates more than 2 GiB for a small input is a finding.
  if ! (cd "$findings" && "$build/tests/fuzz/$target" "$corpus/$target" "${dict[@]}" \
        -max_total_time="$seconds" -timeout=20 -rss_limit_mb=2048 -max_len=8192 \
        -print_final_stats=1 -artifact_prefix="$findings/" >"$findings/log.txt" 2>&1); then
    { echo "fuzz: $target FOUND a problem; see $findings/log.txt:"
      grep -E "ERROR|fuzz:|SUMMARY|Test unit written" "$findings/log.txt" | head -20 || true; }
    return 1
  fi
  echo "fuzz: $target ${seconds}s: $(grep -E "stat::number_of_executed_units|stat::new_units_added" "$findings/log.txt" | tr '\n' ' ')"
}

# The targets side by side, as many at a time as there are CPUs (PSW_FUZZ_PARALLEL): each
# is one process of one thread. Every target runs; the status says whether any found a problem.
parallel=${PSW_FUZZ_PARALLEL:-$(nproc)}
pids=()
for target in $targets; do
  while (($(jobs -rp | wc -l) >= parallel)); do wait -n || true; done
  fuzz_target "$target" &
  pids+=($!)
done
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=1; done
exit $status
