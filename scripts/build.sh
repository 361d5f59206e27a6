#!/usr/bin/env bash
# Configures and builds the project into build/ (or $PSW_BUILD_DIR). Extra arguments go to
# the CMake configure step, e.g. scripts/build.sh -DPSW_SANITIZE=address.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${PSW_BUILD_DIR:-$root/build}
generator=()
if command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi
if [[ ! -f "$build/CMakeCache.txt" ]]; then
  cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release "$@"
elif (($# > 0)); then
  cmake -S "$root" -B "$build" "$@"
fi
cmake --build "$build" --parallel "$(nproc)"
