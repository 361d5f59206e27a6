#!/usr/bin/env bash
# Builds the project and runs the whole test suite through ctest, except the tests that
# need a GPU (label `gpu`; scripts/gpu-test.sh runs those on a GPU host).
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
