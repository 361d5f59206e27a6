#!/usr/bin/env bash
# Unpacks the Debian packages the GPU host's image lacks (yaml-cpp, CLI11, nlohmann-json,
# GoogleTest, Eigen) into .gpu-carry/, which the device tool carries beside the tree
# (`carry: [".gpu-carry"]`) and scripts/gpu-test.sh puts on CMAKE_PREFIX_PATH.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && apt-get download libyaml-cpp-dev libyaml-cpp0.7 libcli11-dev nlohmann-json3-dev \
  libgtest-dev libgmock-dev libeigen3-dev)
rm -rf "$root/.gpu-carry"
mkdir -p "$root/.gpu-carry"
for deb in "$tmp"/*.deb; do dpkg -x "$deb" "$root/.gpu-carry"; done
du -sh "$root/.gpu-carry"
