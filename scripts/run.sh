#!/usr/bin/env bash
# The main job: builds psw and prints the plans of every shipped model on every shipped
# hardware profile (inference and training), one table, with every planner side by side.
# The same table is written to results/plans.md with the environment it ran on.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${PSW_BUILD_DIR:-$root/build}
"$root/scripts/build.sh" >/dev/null
psw="$build/cli/psw"
models=("$root"/configs/models/*.yaml)
# The shipped hardware profiles, without the base the H200 profile was measured from.
hardware=()
for f in "$root"/configs/hardware/*.yaml; do [[ $f == *-base.yaml ]] || hardware+=("$f"); done
# Profiles measured on the H200 (configs/models/h200/, adopted from results/profiles/).
measured=("$root"/configs/models/h200/*.yaml)

echo "Plans of ${#models[@]} models on ${#hardware[@]} hardware profiles (times in ms; bound = pipeline bound)"
echo
"$psw" compare --model "${models[@]}" --hardware "${hardware[@]}" --task inference training
echo
echo "Plans from the profiles measured on the H200 (forward and backward per layer, fitted link)"
echo
"$psw" compare --model "${measured[@]}" --hardware "$root/configs/hardware/h200-pcie5.yaml" --task inference training

mkdir -p "$root/results"
{
  echo "# Plans of the shipped models on the shipped hardware profiles"
  echo
  echo "Produced by \`scripts/run.sh\`; do not edit by hand. Times in ms from the timeline"
  echo "evaluation of each plan (analytic compute costs for the first table, measured ones for the second)."
  echo "\`bound\` is the pipeline bound of DESIGN.md §6; \`optimal\` the exact optimum; \`early_start\` the plan the executor"
  echo "and the simulator run (Note [Early start] in planner.hpp: the smallest first group among 1, 2, 4, ... layers"
  echo "within one group's fixed costs of the optimum), whose \`groups\`, \`startup\` and \`overhead\` are shown."
  echo
  "$root/scripts/environment.sh"
  echo
  "$psw" compare --model "${models[@]}" --hardware "${hardware[@]}" --task inference training --format markdown
  echo
  echo "## From the profiles measured on the H200"
  echo
  echo "configs/models/h200/ and configs/hardware/h200-pcie5.yaml, measured by \`psw profile --train --link\`"
  echo "(results/profiles/, results/gpu/): per-layer forward and backward times of replayed CUDA graphs."
  echo
  "$psw" compare --model "${measured[@]}" --hardware "$root/configs/hardware/h200-pcie5.yaml" --task inference training --format markdown
} > "$root/results/plans.md"
echo
echo "written: results/plans.md"

echo
echo "The paper's Figures 5-9 in simulation (results/sim/):"
PSW_BUILD_DIR="$build" bash "$root/scripts/run-experiments.sh"
