#!/usr/bin/env bash
# The main job: set up, build, compile the GPT example ahead of time to a
# native shared object and run it on the CPU runtime over a text corpus that
# every Debian machine has (bytes as tokens). Until autodiff lands a run
# evaluates the loss at each step; training becomes the default then.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
BUILD_DIR=${TESSEL_BUILD_DIR:-build}
"$BUILD_DIR/bin/tessel-compile" examples/gpt.mlir -o "$BUILD_DIR/gpt.so" --report
"$BUILD_DIR/bin/tessel-run" "$BUILD_DIR/gpt.so" --steps 20 --log-every 5 \
  --data /usr/share/common-licenses/GPL-3 --data-dtype u8 \
  --metrics "$BUILD_DIR/gpt-metrics.jsonl" --save "$BUILD_DIR/gpt.safetensors"
echo "metrics: $BUILD_DIR/gpt-metrics.jsonl, checkpoint: $BUILD_DIR/gpt.safetensors"
