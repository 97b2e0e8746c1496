#!/usr/bin/env bash
# Every test: set up, build, then the GoogleTest suite (ctest) and the lit
# suite. Exits non-zero when anything fails.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
BUILD_DIR=${TESSEL_BUILD_DIR:-build}
status=0
echo "== ctest (GoogleTest)"
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$(nproc)" || status=1
echo "== lit"
/usr/lib/llvm-22/bin/lit -sv "$BUILD_DIR/test" || status=1
echo "== runtime/ alone: the runtime and the launcher build without LLVM/MLIR"
scripts/check-runtime-alone.sh "$BUILD_DIR-runtime-alone" || status=1
# Both targets, 10 s each; the compile pipeline's compiles the dialect and
# every pass with clang first (through ccache; ~6 minutes cold on 2 cores).
# A fixed number of inputs from the fixed seed (about 10 s each here): the
# same inputs on every run, so a green run here is a green CI.
echo "== fuzz: the launcher's file readers and the compile pipeline"
FUZZ_RUNS="reader:60000 compile:1200" scripts/fuzz.sh 600 || status=1
exit $status
