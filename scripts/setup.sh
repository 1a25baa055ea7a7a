#!/usr/bin/env bash
# Installs every Debian 12 package ringmaster's build, tests, demo and benchmarks need.
# Idempotent and non-interactive; safe to run again.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config git python3
  clang libclang-rt-14-dev
  libabsl-dev
  libboost-dev libboost-system-dev
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc
  libspdlog-dev libfmt-dev
  libyaml-cpp-dev
  nlohmann-json3-dev
  libcli11-dev
  libsqlite3-dev
  libsimdjson-dev
  libgloo-dev
  libgtest-dev libgmock-dev googletest
  libbenchmark-dev
  openmpi-bin libopenmpi-dev
  python3-torch python3-numpy python3-pip
  gnuplot-nox
  wrk
  python3-yaml
  libssl-dev openssl
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]})); then
  SUDO=""
  if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -y -q
  $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
echo "setup: all ${#PACKAGES[@]} packages present"
