#!/usr/bin/env bash
# Prints, as a markdown table, what overlapping communication with compute
# changes per rank (tessel-overlap-communication): for each strategy the
# payload bytes one step moves, how many of them start asynchronously
# (overlapping the kernels after them; exact, and equal to the runtime's
# tessel_comm_async_bytes; tessel-run --trace checks that each had a kernel
# between its start and its wait), the share of the collectives' time that
# a trace of one overlapped step saw kernels running, the arena with
# blocking and with overlapped collectives, and the measured tokens/s of a short run of each (threads as
# ranks, median of REPEATS runs; noisy on a shared machine, and on a
# machine with fewer cores than ranks + comm threads the overlap has no
# idle core to run on).
# Usage: bench/run-overlap.sh [MODEL.mlir] [STEPS] [REPEATS]
set -euo pipefail
source "$(dirname "$0")/build.sh"
build_target tessel-compile
build_target tessel-run

model=${1:-examples/gpt.mlir}
steps=${2:-5}
repeats=${3:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "Overlapped communication on $model, $(date -u +%Y-%m-%d), ${cpu:-unknown CPU}," \
  "${cores} cores. Bytes per rank and step; tokens/s: median of $repeats runs of" \
  "$steps steps, every rank a thread."
echo
echo "| strategy | payload bytes | overlapped | comm time under kernels | arena blocking | arena overlapped | tokens/s blocking | tokens/s overlapped | ratio |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"

median_rate() { # model.so mesh
  for _ in $(seq "$repeats"); do
    "$BUILD_DIR/bin/tessel-run" "$1" --mesh "$2" --steps "$steps" 2>&1 |
      sed -n 's/.*, \([0-9.]*\) tokens\/s mean.*/\1/p'
  done | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'
}

while IFS='|' read -r name mesh flags; do
  for overlap in 0 2; do
    "$BUILD_DIR/bin/tessel-compile" "$model" --mesh "$mesh" $flags \
      --overlap "$overlap" --report-json "$work/r$overlap.json" \
      -o "$work/m$overlap.so"
  done
  rate0=$(median_rate "$work/m0.so" "$mesh")
  rate2=$(median_rate "$work/m2.so" "$mesh")
  # The trace's own line: "... collectives (T s, P% of it while kernels ran)".
  hidden=$("$BUILD_DIR/bin/tessel-run" "$work/m2.so" --mesh "$mesh" --steps 2 \
    --trace "$work/trace.json" 2>&1 |
    sed -n 's/.*, \([0-9]*%\) of it while kernels ran.*/\1/p')
  python3 - "$work/r0.json" "$work/r2.json" "$name" "$rate0" "$rate2" "$hidden" <<'PY'
import json, sys
blocking, overlapped = (json.load(open(p)) for p in sys.argv[1:3])
step = overlapped["communication"]["step"]
r0, r2 = float(sys.argv[4] or 0), float(sys.argv[5] or 0)
ratio = f"{r2 / r0:.2f}x" if r0 else "-"
print(f"| {sys.argv[3]} | {step['bytes']:,} | {step['overlapped_bytes']:,} "
      f"({step['overlapped_bytes'] / max(step['bytes'], 1):.0%}) | "
      f"{sys.argv[6] or '-'} | "
      f"{blocking['arena_bytes']:,} | {overlapped['arena_bytes']:,} | "
      f"{r0:.0f} | {r2:.0f} | {ratio} |")
PY
done <<'CONFIGS'
DDP, buckets of 1 MiB|dp=2|--bucket-mb 1
ZeRO-2|dp=2|--zero 2
ZeRO-3|dp=2|--zero 3
ZeRO-3 x tp|dp=2,tp=2|--zero 3
tp with sequence parallelism|tp=2|--sequence-parallel
CONFIGS
