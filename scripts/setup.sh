#!/usr/bin/env bash
# Installs every build and test dependency from Debian packages. Safe to re-run:
# apt-get skips what is already installed. Needs root (or sudo) on Debian 12.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  libyaml-cpp-dev libcli11-dev libeigen3-dev nlohmann-json3-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  python3 python3-matplotlib time
  libtorch-dev libopenblas0-pthread
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc
  python3-grpcio python3-protobuf procps
  libcpp-httplib-dev  # the REST front end (Note [REST front end])
  curl python3-requests  # docs/examples/, run by the tests against a host server
  python3-torchvision  # torchvision as the vision models' reference (tests/exec/torchvision_reference.py)
  openmpi-bin libopenmpi-dev
  clang libclang-rt-14-dev
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "setup: all ${#packages[@]} packages already installed"
  exit 0
fi

SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
echo "setup: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "setup: done"
