#!/usr/bin/env bash
# Builds the project and runs the whole test suite through ctest, except the tests that
# need a GPU (label `gpu`; scripts/gpu-test.sh runs those on a GPU host). Then the unit tests
# again under ASan+UBSan and every fuzz target briefly (scripts/fuzz.sh, one clang build in
# build-fuzz/). PSW_SKIP_SANITIZE=1 skips those two for local iteration; CI (CI=true) always
# runs them.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${PSW_BUILD_DIR:-$root/build}
# With MPI (scripts/setup.sh installs OpenMPI), so that the sweep over MPI ranks is tested too.
# As a unity build (CMake's CMAKE_UNITY_BUILD: a few sources compiled as one unit), which
# takes about half the time from scratch on two cores, LibTorch's headers being parsed once
# per unit instead of once per file. PSW_UNITY_BUILD=OFF builds file by file, which is faster
# to rebuild after a small change (scripts/gpu-test.sh builds file by file, so both compile).
"$root/scripts/build.sh" -DPSW_WITH_MPI=ON -DCMAKE_UNITY_BUILD="${PSW_UNITY_BUILD:-ON}"
echo "test: built in ${SECONDS}s"  # where CI's time goes (it should stay well under 30 minutes)
# The shipped model profiles must be what their generator writes.
python3 "$root/scripts/gen_model_profiles.py" --check
# The h200 configs must be the profiles measured on the H200 (results/profiles/).
bash "$root/scripts/adopt-profiles.sh" --check
# Checked-in results must be newer than the code they describe (scripts/check-results-fresh.sh lists them).
bash "$root/scripts/check-results-fresh.sh"
# glibc's allocator on 2 MB pages (where transparent huge pages are `madvise`, as on CI's VM),
# its blocks below 32 MB from the heap and freed memory kept for the next: page faults were the
# suite's largest single cost there (making BERT-base and loading its weights back faulted 660,000
# 4 KB pages, 7 s of system time for a 12 s test); the whole ctest run took 376 s with them
# against 561 s without on the same machine. The programs the tests start inherit it.
export GLIBC_TUNABLES=${GLIBC_TUNABLES:+$GLIBC_TUNABLES:}glibc.malloc.hugetlb=1:glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=4294967296
ctest --test-dir "$build" --label-exclude gpu --output-on-failure --parallel "$(nproc)" --timeout 600
echo "test: ctest done at ${SECONDS}s"

if [[ ${CI:-} != true && -n ${PSW_SKIP_SANITIZE:-} ]]; then
  echo "test: PSW_SKIP_SANITIZE set: no sanitizer build, no fuzzing; total ${SECONDS}s"
  exit 0
fi
start=$SECONDS
# The unit tests under ASan+UBSan, then each fuzz target for a few seconds from the shipped
# seeds (a regression check, not a search; 5 s each, two at a time, for CI's 20 minutes): one
# clang build (build-fuzz/) for both, so the libraries compile once. All but fuzz_cli: it alone
# needs the CLI's commands and the gRPC client under ASan, a minute of CI's two cores to build
# for five seconds of argument strings (scripts/fuzz.sh without PSW_FUZZ_TARGETS runs it).
fuzz_targets=${PSW_FUZZ_TARGETS:-$(sed -n '/^set(PSW_FUZZ_TARGETS/,/^)/p' "$root/tests/fuzz/CMakeLists.txt" \
  | grep -oE 'fuzz_[a-z_]+' | grep -vx fuzz_cli | tr '\n' ' ')}
PSW_FUZZ_UNIT_TESTS=1 PSW_FUZZ_SECONDS=${PSW_FUZZ_SECONDS:-5} PSW_FUZZ_TARGETS=$fuzz_targets bash "$root/scripts/fuzz.sh"
echo "test: ASan unit tests and fuzzing $((SECONDS - start))s (build included)"
# CI's budget is 20 minutes on two cores, setup (scripts/setup.sh) included: this line is what a
# fresh clone's run took here.
echo "test: total ${SECONDS}s ($((SECONDS / 60)) min $((SECONDS % 60)) s); CI's budget is 20 min"
