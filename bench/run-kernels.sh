#!/usr/bin/env bash
# Prints, as a markdown table, what one training step of a model issues on
# rank 0 for each strategy and precision: its kernels (what a GPU launches,
# or replays from a CUDA graph), how many of them are data movement
# (tessel_strided_copy: broadcasts, slices, the unpacking of buckets) and
# widening or rounding casts (tessel_cast), its collectives, and the bytes
# of them that overlapped kernels. Counted from `tessel-run --trace` of the
# second step (threads as ranks, the CPU backend): exact, not timed, so
# the figures are the same on every machine. The arena is tessel-compile's
# (bytes of scratch, one rank).
# Usage: bench/run-kernels.sh [MODEL.mlir] [DATA]
#   MODEL: default examples/gpt.mlir; DATA: a byte file of tokens for a
#   language model (default /usr/share/common-licenses/GPL-3, as u8).
set -euo pipefail
source "$(dirname "$0")/build.sh"
build_target tessel-compile
build_target tessel-run

model=${1:-examples/gpt.mlir}
data=${2:-/usr/share/common-licenses/GPL-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

strategies=(
  "one device|"
  "DDP dp=2, 0.5 MiB buckets|--mesh dp=2 --bucket-mb 0.5"
  "ZeRO-3 dp=4|--mesh dp=4 --zero 3"
  "tp=2|--mesh tp=2"
  "dp=2, tp=2|--mesh dp=2,tp=2"
  "pp=2, 2 microbatches|--mesh pp=2 --microbatches 2"
)

echo "Kernels per training step of $model (rank 0, step 2 of tessel-run" \
  "--trace), $(date -u +%Y-%m-%d), at $(git rev-parse --short HEAD 2>/dev/null || echo '?')."
echo
echo "| strategy | precision | kernels | copies | casts | collectives | overlapped bytes | arena bytes |"
echo "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"
for entry in "${strategies[@]}"; do
  name=${entry%%|*}
  flags=${entry#*|}
  for precision in f32 bf16; do
    feed=()
    if [ -f "$data" ]; then feed=(--data "$data" --data-dtype u8); fi
    # shellcheck disable=SC2086
    if ! "$BUILD_DIR/bin/tessel-run" "$model" "${feed[@]}" --steps 2 --quiet \
        --precision "$precision" $flags --trace "$work/trace.json" \
        >"$work/run.txt" 2>&1; then
      echo "| $name | $precision | failed: $(tail -1 "$work/run.txt") | | | | | |"
      continue
    fi
    # One rank's arena; a pipeline's report gives each stage's (rank 0 runs
    # stage 0).
    # shellcheck disable=SC2086
    "$BUILD_DIR/bin/tessel-compile" "$model" --precision "$precision" $flags \
      --report -o "$work/m.so" >"$work/report.txt"
    arena=$(sed -n 's/.*arena (one rank)[[:space:]]*\([0-9]*\) bytes.*/\1/p' \
      "$work/report.txt" | head -1)
    if [ -z "$arena" ]; then
      arena=$(awk '/stage +params +grads/ { getline; print $6; exit }' \
        "$work/report.txt")
    fi
    python3 - "$work/trace.json" "$work/run.txt" "$name" "$precision" "$arena" <<'PY'
import collections, json, re, sys
trace, run, name, precision, arena = sys.argv[1:]
events = json.load(open(trace))["traceEvents"]
kinds = collections.Counter(e["name"] for e in events
                            if e.get("cat") == "kernel" and e.get("pid", 0) == 0)
text = open(run).read()
m = re.search(r"(\d+) collectives .*?; (\d+) of (\d+) started bytes", text)
collectives, overlapped, started = m.groups() if m else ("?", "?", "?")
print(f"| {name} | {precision} | {sum(kinds.values())} | "
      f"{kinds['tessel_strided_copy']} | {kinds['tessel_cast']} | {collectives} | "
      f"{overlapped} of {started} | {arena} |")
PY
  done
done
