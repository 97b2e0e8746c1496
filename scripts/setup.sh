#!/usr/bin/env bash
# Installs what is missing on Debian 12, configures and builds Tessel.
# Idempotent: a second run installs nothing and only rebuilds what changed.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${TESSEL_BUILD_DIR:-build}
# Paths under the checkout hash relative: a second build folder (or a
# second clone) reuses the compiled objects.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
PACKAGES=(
  cmake ninja-build ccache g++ clang python3
  llvm-22-dev libmlir-22-dev mlir-22-tools llvm-22-tools
  zlib1g-dev libzstd-dev libedit-dev
  libopenblas-dev libopenmpi-dev openmpi-bin nlohmann-json3-dev
  libgtest-dev libgmock-dev libbenchmark-dev
)

missing=()
for pkg in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" ||
    missing+=("$pkg")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq \
    --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  cmake -G Ninja -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release
fi
start=$(date +%s)
cmake --build "$BUILD_DIR"
echo "setup: build up to date in $(($(date +%s) - start)) s ($BUILD_DIR)"
