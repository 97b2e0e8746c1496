#!/usr/bin/env bash
# Prints, as a markdown table, what ZeRO saves per rank on a data-parallel
# mesh (default: examples/gpt.mlir on dp=4, AdamW in f32): for each stage
# the training state a rank holds (params + grads + optimizer states) next
# to the ZeRO paper's formula, the activation scratch, the whole arena (what
# the runtime allocates per rank), the ring bytes one step sends, and the
# measured tokens/s of a short run (threads as ranks; noisy on a shared
# machine). Usage: bench/run-zero.sh [MODEL.mlir] [MESH] [STEPS] [FLAGS]
# FLAGS go to tessel-compile, e.g. '--precision bf16 --grad-precision bf16'
# for the ZeRO paper's mixed-precision layout (16Ψ, 4Ψ+12Ψ/N, ...).
set -euo pipefail
source "$(dirname "$0")/build.sh"
build_target tessel-compile
build_target tessel-run

model=${1:-examples/gpt.mlir}
mesh=${2:-dp=4}
steps=${3:-5}
flags=${4:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "ZeRO on $model${flags:+ ($flags)}, mesh $mesh, $(date -u +%Y-%m-%d), ${cpu:-unknown CPU}," \
  "${cores} cores. Bytes per rank; Ψ = parameters a rank holds before ZeRO," \
  "N = dp ranks. tokens/s: $steps steps, every rank a thread."
echo
echo "| stage | formula | training state | formula bytes | scratch | arena | ring bytes / step | tokens/s |"
echo "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"
for variant in 0 1 2 3 "3 --no-reshard-after-forward"; do
  read -r stage extra <<<"$variant"
  json="$work/report-$stage${extra:+-keep}.json"
  "$BUILD_DIR/bin/tessel-compile" "$model" --mesh "$mesh" --zero "$stage" \
    ${extra:-} ${flags} --report-json "$json" -o "$work/model.so"
  rate=$("$BUILD_DIR/bin/tessel-run" "$work/model.so" --mesh "$mesh" \
           --steps "$steps" 2>&1 | sed -n 's/.*, \([0-9.]*\) tokens\/s mean.*/\1/p')
  python3 - "$json" "$stage${extra:+ (keep params)}" "${rate:--}" <<'EOF'
import json, sys
report = json.load(open(sys.argv[1]))
state = report["training_state"]["total"]
scratch = report["regions"]["scratch"]["bytes"]
ring = report["communication"]["step"]["ring_bytes"]
print(f"| {sys.argv[2]} | {state['formula']} | {state['bytes']:,} | "
      f"{state['formula_bytes']:,.0f} | {scratch:,} | {report['arena_bytes']:,} | "
      f"{ring:,} | {sys.argv[3]} |")
EOF
done
