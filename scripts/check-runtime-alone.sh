#!/usr/bin/env bash
# Configures runtime/ as a CMake project of its own, with LLVM and MLIR made
# unfindable, builds its libraries (the C ABI runtime, the vocabulary shared
# with the compiler, the launcher library), then checks that no compile
# command names an LLVM or MLIR include directory. Usage:
#   scripts/check-runtime-alone.sh [BUILD_DIR]   (default build-runtime-alone;
#   a folder beside build/ compiles with the same relative paths, so ccache
#   serves the objects the main build made)
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build-runtime-alone}
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
cmake -G Ninja -S runtime -B "$dir" -DCMAKE_BUILD_TYPE=Release \
  --no-warn-unused-cli \
  -DCMAKE_DISABLE_FIND_PACKAGE_LLVM=ON -DCMAKE_DISABLE_FIND_PACKAGE_MLIR=ON \
  >/dev/null
cmake --build "$dir" --target tessel_runtime tessel_config TesselLauncher
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
