#!/usr/bin/env bash
# On a GPU host: configure against the CUDA LibTorch of the installed PyTorch (DESIGN.md §7)
# and build the given targets into $PSW_GPU_BUILD_DIR (default build-gpu). Source it: it sets
# `build`, `gpu` (the card's short name for report file names: h100, h200, ...; empty for another)
# and exports LD_LIBRARY_PATH for the carried libraries (.gpu-carry, gpu-carry.sh).
#
#   source scripts/gpu-build.sh OUT_DIR TARGET...
gpu_build_out=$1
shift
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${PSW_GPU_BUILD_DIR:-$root/build-gpu}
mkdir -p "$gpu_build_out"
torch_prefix=$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)')
prefix="$torch_prefix"
if [[ -d "$root/.gpu-carry/usr" ]]; then
  prefix="$prefix;$root/.gpu-carry/usr"
  export LD_LIBRARY_PATH="$root/.gpu-carry/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
  export PATH="$root/.gpu-carry/usr/bin:$PATH"
fi
# The python that holds PyTorch, for the tests that make TorchScript files (CI's is /usr/bin/python3).
export PSW_PYTHON=${PSW_PYTHON:-$(command -v python3)}
generator=()
if command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi
echo "== configure ($(date -u +%T))"
# PSW_GPU_BENCH=1: with the benchmarks (tests/bench/; Google Benchmark from .gpu-carry), e.g. the
# protocol's on this host (psw_protocol_bench).
cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DPSW_BUILD_BENCH="$([[ -n ${PSW_GPU_BENCH:-} ]] && echo ON || echo OFF)" \
  -DCMAKE_PREFIX_PATH="$prefix" -DOPENSSL_ROOT_DIR="$root/.gpu-carry/usr" > "$gpu_build_out/configure.log" 2>&1 \
  || { tail -40 "$gpu_build_out/configure.log"; exit 1; }
grep -E "psw:" "$gpu_build_out/configure.log" || true
echo "== build ($(date -u +%T))"
cmake --build "$build" --parallel "$(nproc)" --target "$@" > "$gpu_build_out/build.log" 2>&1 \
  || { grep -E "error|Error" "$gpu_build_out/build.log" | head -40; exit 1; }
rm -f "$gpu_build_out/configure.log" "$gpu_build_out/build.log"  # kept only on failure: the device tool returns few files
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -oiE 'h100|h200|a100|l4|l40s' | head -1 \
      | tr 'A-Z' 'a-z' || true)
