#!/usr/bin/env bash
# A sweep on a Slurm cluster as a job array: task K of N runs shard K/N (the points i with
# i % N == K-1) into OUT/shard-K, and a last job, which waits for the whole array, joins the
# shards into OUT/merged/sweep.csv (byte-identical to a one-process `psw sweep`).
#
#   bash scripts/slurm-sweep.sh CONFIG OUT [SHARDS]       # submits both jobs (default 8 shards)
#
# OUT must be on a filesystem every node sees. Each task runs its points on the cores Slurm
# gives it (--jobs $SLURM_CPUS_PER_TASK). Adjust the #SBATCH lines to your cluster. A rerun
# replaces each shard folder whole (Note [Atomic output folders]), so a failed task can simply
# be resubmitted: sbatch --array=K ...
set -euo pipefail

if [[ "${1:-}" == "--task" ]]; then
  # Inside one array task.
  config=$2 out=$3
  psw=${PSW:-build/cli/psw}
  exec "$psw" sweep --config "$config" --jobs "${SLURM_CPUS_PER_TASK:-1}" \
    --shard "$SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT" --out "$out/shard-$SLURM_ARRAY_TASK_ID"
fi
if [[ "${1:-}" == "--merge" ]]; then
  out=$2 shards=$3
  psw=${PSW:-build/cli/psw}
  dirs=()
  for ((k = 1; k <= shards; ++k)); do dirs+=("$out/shard-$k"); done
  exec "$psw" sweep-merge --out "$out/merged" "${dirs[@]}"
fi

if (($# < 2)); then
  echo "usage: $0 CONFIG OUT [SHARDS]" >&2
  exit 2
fi
config=$1 out=$2 shards=${3:-8}
root=$(cd "$(dirname "$0")/.." && pwd)
export PSW=${PSW:-$root/build/cli/psw}
mkdir -p "$out/logs"
# --array=1-N makes SLURM_ARRAY_TASK_ID run 1..N and SLURM_ARRAY_TASK_COUNT equal N.
array=$(sbatch --parsable --job-name=psw-sweep --array="1-$shards" --cpus-per-task=8 --time=02:00:00 \
  --output="$out/logs/shard-%a.log" --export=ALL "$0" --task "$config" "$out")
sbatch --parsable --job-name=psw-sweep-merge --dependency="afterok:$array" --time=00:10:00 \
  --output="$out/logs/merge.log" --export=ALL "$0" --merge "$out" "$shards"
echo "submitted array $array ($shards shards) and its merge; sweep.csv will be $out/merged/sweep.csv"
