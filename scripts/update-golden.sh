#!/usr/bin/env bash
# Golden outputs: small simulations whose requests.csv and summary.json are checked in under
# tests/data/golden/<case>/ and compared byte for byte by ctest (cli.golden).
#
#   bash scripts/update-golden.sh [PSW]          # regenerate them, after a deliberate change of behaviour
#   bash scripts/update-golden.sh --check [PSW]  # run them afresh and compare (what ctest runs)
#
# PSW defaults to build/cli/psw. summary.json has no wall-clock field (the wall time is printed,
# never written), so nothing is excluded from the comparison. Review `git diff tests/data/golden`
# before committing regenerated files: every changed number should be one the change meant.
set -euo pipefail
cd "$(dirname "$0")/.."

check=0
if [[ "${1:-}" == "--check" ]]; then
  check=1
  shift
fi
psw="${1:-build/cli/psw}"
golden=tests/data/golden

# case name | config | --set overrides (space-separated KEY=VALUE)
cases=(
  "pipeswitch|tests/data/sim/small.yaml|"
  "stop-and-start|tests/data/sim/small.yaml|mechanism=stop-and-start"
  "mps|tests/data/sim/small.yaml|mechanism=mps"
  "project-trace|tests/data/sim/project-trace.yaml|"
  "pipeswitch-parallel|tests/data/sim/parallel.yaml|"
)

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0
for entry in "${cases[@]}"; do
  IFS='|' read -r name config sets <<<"$entry"
  args=(sim --config "$config" --out "$tmp/$name")
  for s in $sets; do args+=(--set "$s"); done
  "$psw" "${args[@]}" >/dev/null
  for file in requests.csv summary.json; do
    if ((check)); then
      if ! cmp -s "$golden/$name/$file" "$tmp/$name/$file"; then
        echo "golden $name/$file differs (expected < > actual):" >&2
        diff "$golden/$name/$file" "$tmp/$name/$file" | head -20 >&2 || true
        failed=1
      fi
    else
      mkdir -p "$golden/$name"
      cp "$tmp/$name/$file" "$golden/$name/$file"
    fi
  done
done
if ((check)); then
  if ((failed)); then
    echo "golden outputs differ; if the change is deliberate, run: bash scripts/update-golden.sh" >&2
    exit 1
  fi
  echo "golden outputs match (${#cases[@]} cases)"
else
  echo "golden outputs written to $golden/"
fi
