#!/usr/bin/env bash
# Fails when a checked-in result is older than the code it describes: for each result below,
# the commit it records (its `- commit: <hash>` line, written by scripts/environment.sh) and the
# paths whose code it describes; if any commit after the recorded one changed those paths, the
# result is stale, and the message names the file and the command that regenerates it.
#
#   bash scripts/check-results-fresh.sh
#
# The list is explicit: a result is checked only once it is listed here, with the paths it
# describes (be precise: every commit to them makes the result stale) and its command. A result
# whose recorded commit is marked "(with uncommitted changes)" is checked from that commit all
# the same: what was uncommitted then is either in a later commit (which shows as a change) or
# nowhere. Needs the repository's history (a shallow clone that lacks the recorded commit fails,
# naming it).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
# Without history there is nothing to compare with: said, not failed (a CI that clones shallowly
# would otherwise fail on every result).
if [[ $(git rev-parse --is-shallow-repository 2>/dev/null || echo no-git) != false ]]; then
  echo "check-results-fresh: not a full git clone here: the results' freshness is not checked" >&2
  exit 0
fi

# result | paths it describes (space-separated) | the command that regenerates it
results=(
  "results/planner.md|common/src/planner.cpp common/include/psw/common/planner.hpp tests/bench/planner_bench.cpp scripts/bench-planner.sh|bash scripts/bench-planner.sh (a timing benchmark: on a quiet machine)"
  "results/protocol.md|tests/bench/protocol_bench.cpp scripts/bench-protocol.sh scripts/protocol_report.sh scripts/protocol_table.py exec/runtime/server/src/grpc_server.cpp exec/runtime/server/src/http_server.cpp exec/runtime/client/src/client.cpp|bash scripts/bench-protocol.sh (a timing benchmark: on a quiet machine)"
  "results/sim/perf.md|sim/src sim/include common/src common/include tests/bench/engine_bench.cpp scripts/bench-sim.sh scripts/bench-engine.sh configs/experiments/azure2019-day.yaml|bash scripts/bench-sim.sh (a timing benchmark: on a quiet machine)"
)

status=0
for entry in "${results[@]}"; do
  IFS='|' read -r file paths command <<<"$entry"
  if [[ ! -f "$file" ]]; then
    echo "check-results-fresh: $file is missing; regenerate it with: $command" >&2
    status=1
    continue
  fi
  recorded=$(sed -n 's/^- commit: \([0-9a-f]\{7,40\}\).*/\1/p' "$file" | head -n 1)
  if [[ -z "$recorded" ]]; then
    echo "check-results-fresh: $file records no commit (no '- commit: <hash>' line); regenerate it with: $command" >&2
    status=1
    continue
  fi
  if ! git rev-parse --quiet --verify "$recorded^{commit}" >/dev/null; then
    echo "check-results-fresh: $file records commit $recorded, which this repository does not have (a shallow clone?)" >&2
    status=1
    continue
  fi
  # shellcheck disable=SC2086  # the paths are words
  changed=$(git log --format='%h %s' "$recorded..HEAD" -- $paths)
  if [[ -n "$changed" ]]; then
    count=$(printf '%s\n' "$changed" | wc -l)
    echo "check-results-fresh: $file is stale: it records commit $recorded, and $count later commits changed what it describes ($paths), the latest:" >&2
    printf '%s\n' "$changed" | head -n 5 | sed 's/^/  /' >&2
    echo "  regenerate it with: $command" >&2
    status=1
  fi
done
if ((status == 0)); then echo "check-results-fresh: ${#results[@]} results are as new as the code they describe"; fi
exit $status
