#!/usr/bin/env bash
# On the GPU host: the zoo's BERT-base and Llama decoders against Hugging Face transformers on
# the same weights (tests/exec_cuda/test_hf_reference.cpp, which runs tests/exec/hf_reference.py
# with the host's Python: transformers and safetensors are there, not in CI's Debian). Writes
# OUT_DIR/<date>-hf-reference.log: the environment, then ctest's verbose output with each
# case's measured difference.
#
#   scripts/gpu-hf-reference.sh [OUT_DIR]     # OUT_DIR defaults to results/gpu
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/results/gpu}
source "$root/scripts/gpu-build.sh" "$out" psw_gpu_tests
log="$out/$(date -u +%F)-hf-reference.log"
{
  echo "# scripts/gpu-hf-reference.sh; do not edit by hand."
  bash "$root/scripts/environment.sh"
  python3 -c 'import transformers, torch; print("- transformers", transformers.__version__, "on torch", torch.__version__)'
  ctest --test-dir "$build" -L gpu -R HuggingFace --verbose --timeout 600 2>&1 |
    grep -E "vs transformers|hf_reference.py:|Passed|Failed|tests passed|tests failed|Failure|Expected|Which is"
} | sed "s|$root/||g" | tee "$log"
