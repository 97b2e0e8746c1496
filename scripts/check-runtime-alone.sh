#!/usr/bin/env bash
# Configures and builds runtime/ as a CMake project of its own (the C ABI
# runtime, the shared vocabulary and the launcher library, with their
# tests), with LLVM and MLIR made unfindable, then checks that no compile
# command names an LLVM or MLIR include directory. Usage:
#   scripts/check-runtime-alone.sh [BUILD_DIR]   (default build/runtime-alone)
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build/runtime-alone}
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
cmake -G Ninja -S runtime -B "$dir" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_DISABLE_FIND_PACKAGE_LLVM=ON -DCMAKE_DISABLE_FIND_PACKAGE_MLIR=ON \
  >/dev/null
cmake --build "$dir"
if grep -E -- '-I[^ ]*(llvm|mlir)' "$dir/compile_commands.json"; then
  echo "runtime-alone: a compile command names LLVM/MLIR headers" >&2
  exit 1
fi
for target in libtessel_runtime.so libtessel_config.a libTesselLauncher.a; do
  if [ -z "$(find "$dir" -name "$target" -print -quit)" ]; then
    echo "runtime-alone: $target was not built" >&2
    exit 1
  fi
done
echo "runtime-alone: runtime, config and launcher built without LLVM/MLIR ($dir)"
