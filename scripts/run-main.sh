#!/usr/bin/env bash
# The main job: set up, build, compile the GPT example ahead of time to a
# native shared object and run it on the CPU runtime over a text corpus that
# every Debian machine has (bytes as tokens), training it: AdamW with a
# linear warm-up, cosine decay and gradient clipping, as nanoGPT does. The
# loss starts near ln 256 = 5.55 and ends near 2.4. (Every ~68 steps the
# data wraps to the start of the file, whose upper-case header and runs of
# spaces make the loss jump for a few steps.)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
BUILD_DIR=${TESSEL_BUILD_DIR:-build}
STEPS=150
"$BUILD_DIR/bin/tessel-compile" examples/gpt.mlir -o "$BUILD_DIR/gpt.so" --report \
  --optimizer adamw --lr 1e-3 --schedule warmup-cosine --warmup 20 \
  --total-steps $STEPS --min-lr 1e-4 --clip 1.0
"$BUILD_DIR/bin/tessel-run" "$BUILD_DIR/gpt.so" --steps $STEPS --log-every 20 \
  --data /usr/share/common-licenses/GPL-3 --data-dtype u8 \
  --metrics "$BUILD_DIR/gpt-metrics.jsonl" --save "$BUILD_DIR/gpt.safetensors"
echo "metrics: $BUILD_DIR/gpt-metrics.jsonl, checkpoint: $BUILD_DIR/gpt.safetensors"
