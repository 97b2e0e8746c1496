#!/usr/bin/env bash
# Packs what scripts/gpu-check.sh runs into one archive, for a GPU machine
# with a CUDA driver and toolkit but no LLVM/MLIR, OpenBLAS or MPI (a cloud
# image, a container): the launcher, the runtime and its CUDA plugin, the
# kernel tests, the models gpu-check trains compiled here, and the shared
# libraries they need that such a machine lacks. cuBLASLt, cudart and NCCL
# are not packed (hundreds of MB): the GPU machine's own are used.
#   scripts/gpu-bundle.sh [ARCHIVE]   (default build/gpu-bundle.tar.xz)
# On the GPU machine:
#   mkdir b && tar -xJf gpu-bundle.tar.xz -C b && scripts/gpu-check.sh --bundle b
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${TESSEL_BUILD_DIR:-build}
archive=${1:-$BUILD_DIR/gpu-bundle.tar.xz}
[ -x "$BUILD_DIR/bin/tessel-run" ] || scripts/setup.sh
cuda_tests=$(find "$BUILD_DIR" -name tessel-cuda-tests -type f | head -1)
[ -n "$cuda_tests" ] || {
  echo "gpu-bundle: tessel-cuda-tests is not built (no /usr/local/cuda?)" >&2
  exit 1
}

stage=$(mktemp -d /tmp/tessel-bundle-XXXXXX)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib" "$stage/models"
cp "$BUILD_DIR/bin/tessel-run" "$cuda_tests" "$stage/bin/"
cp "$BUILD_DIR/lib/libtessel_runtime.so" "$BUILD_DIR/lib/libtessel_cuda.so" \
  "$stage/lib/"
source scripts/gpu-models.sh
compile_gpu_models "$BUILD_DIR/bin/tessel-compile" "$stage/models"

# The libraries the binaries load, less the C/C++ runtime (every machine has
# a newer one) and CUDA's own.
for f in "$stage"/bin/* "$stage"/lib/*.so; do
  ldd "$f" | awk '$3 ~ /^\// { print $3 }'
done | sort -u | while read -r lib; do
  case "$(basename "$lib")" in
  libc.so* | libm.so* | libdl.so* | librt.so* | libpthread.so* | \
    libstdc++.so* | libgcc_s.so* | libcud* | libcublas* | libnccl* | \
    libtessel_*) ;;
  *) cp -L "$lib" "$stage/lib/" ;;
  esac
done
tar -cJf "$archive" -C "$stage" .
echo "gpu-bundle: $archive ($(du -h "$archive" | cut -f1))"
