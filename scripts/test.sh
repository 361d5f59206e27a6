#!/usr/bin/env bash
# Builds the project and runs the whole test suite through ctest, except the tests that
# need a GPU (label `gpu`; scripts/gpu-test.sh runs those on a GPU host). Then the unit tests
# again under ASan+UBSan (build-asan/) and every fuzz target briefly (scripts/fuzz.sh,
# build-fuzz/). PSW_SKIP_SANITIZE=1 skips those two for local iteration; CI (CI=true) always
# runs them.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${PSW_BUILD_DIR:-$root/build}
# With MPI (scripts/setup.sh installs OpenMPI), so that the sweep over MPI ranks is tested too.
"$root/scripts/build.sh" -DPSW_WITH_MPI=ON
# The shipped model profiles must be what their generator writes.
python3 "$root/scripts/gen_model_profiles.py" --check
python3 "$root/scripts/gen_artifact_plans.py" --check
# The h200 configs must be the profiles measured on the H200 (results/profiles/).
bash "$root/scripts/adopt-profiles.sh" --check
ctest --test-dir "$build" --label-exclude gpu --output-on-failure --parallel "$(nproc)" --timeout 600

if [[ ${CI:-} != true && -n ${PSW_SKIP_SANITIZE:-} ]]; then
  echo "test: PSW_SKIP_SANITIZE set: no sanitizer build, no fuzzing"
  exit 0
fi
start=$SECONDS
# The unit tests under ASan+UBSan (only those targets: the CLI tests are slow instrumented).
asan=${PSW_ASAN_BUILD_DIR:-$root/build-asan}
if [[ ! -f "$asan/CMakeCache.txt" ]]; then
  generator=()
  if command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi
  cmake -S "$root" -B "$asan" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DPSW_SANITIZE=address \
    -DCMAKE_DISABLE_FIND_PACKAGE_Torch=ON -DPSW_BUILD_BENCH=OFF >/dev/null
fi
cmake --build "$asan" --parallel "$(nproc)" --target psw_unit_tests psw_sim_tests
# The two binaries themselves: ctest there would also list tests whose programs this build
# leaves out (the runtime's, the CLI's).
"$asan/tests/psw_unit_tests" --gtest_brief=1
"$asan/tests/psw_sim_tests" --gtest_brief=1
asan_s=$((SECONDS - start))
# Each fuzz target for a few seconds from the shipped seeds: a regression check, not a search.
PSW_FUZZ_SECONDS=${PSW_FUZZ_SECONDS:-10} bash "$root/scripts/fuzz.sh"
echo "test: ASan unit tests ${asan_s}s, fuzzing $((SECONDS - start - asan_s))s (builds included)"
