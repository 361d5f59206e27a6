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
hardware=("$root"/configs/hardware/*.yaml)

echo "Plans of ${#models[@]} models on ${#hardware[@]} hardware profiles (times in ms; bound = pipeline bound)"
echo
"$psw" compare --model "${models[@]}" --hardware "${hardware[@]}" --task inference training

mkdir -p "$root/results"
{
  echo "# Plans of the shipped models on the shipped hardware profiles"
  echo
  echo "Produced by \`scripts/run.sh\`; do not edit by hand. Times in ms from the timeline"
  echo "evaluation of each plan (analytic compute costs until measured profiles replace them)."
  echo "\`bound\` is the pipeline bound of DESIGN.md §6; \`groups\` and \`startup\`/\`overhead\` are the optimal plan's."
  echo
  "$root/scripts/environment.sh"
  echo
  "$psw" compare --model "${models[@]}" --hardware "${hardware[@]}" --task inference training --format markdown
} > "$root/results/plans.md"
echo
echo "written: results/plans.md"

echo
echo "The paper's Figures 5-9 in simulation (results/sim/):"
PSW_BUILD_DIR="$build" bash "$root/scripts/run-experiments.sh"
