#!/usr/bin/env bash
# The main job: set up, build, then verify and cost the example models with
# tessel-opt. (It becomes a training run when the runtime lands.)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
BUILD_DIR=${TESSEL_BUILD_DIR:-build}
for model in examples/*.mlir; do
  echo "== $model"
  "$BUILD_DIR/bin/tessel-opt" "$model" -tessel-report-cost=per-op=false \
    -o /dev/null 2>&1 | grep -o "remark: .*"
done
echo "== examples/gpt.mlir, verified and printed"
"$BUILD_DIR/bin/tessel-opt" examples/gpt.mlir
