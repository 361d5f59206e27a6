#!/usr/bin/env bash
# Prints the environment a result was produced on, as a Markdown list.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cpu=$(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed 's/^ *//')
echo "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
# PSW_COMMIT names the commit where the tree was copied without its history (the GPU host).
if [[ -n "${PSW_COMMIT:-}" ]]; then
  echo "- commit: $PSW_COMMIT (given by the caller)"
else
  echo "- commit: $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$root" diff --quiet HEAD -- . ':!results' 2>/dev/null || echo ' (with uncommitted changes)')"
fi
echo "- host: $(uname -srm), $(nproc) cores, ${cpu:-unknown CPU}"
echo "- memory: $(free -g 2>/dev/null | awk '/Mem:/ {print $2 " GiB"}')"
echo "- compiler: $(c++ --version 2>/dev/null | head -1)"
if command -v nvidia-smi >/dev/null 2>&1; then
  echo "- gpu: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)"
else
  echo "- gpu: none"
fi
