#!/usr/bin/env bash
# Prints, as a markdown table, each pipeline schedule's training step on the
# threads backend next to what the compiler predicts: examples/gpt.mlir
# with LAYERS blocks (default 8) on pp=P (default 2) with M microbatches
# (default 8), every rank a thread with one BLAS thread.
#
#   predicted = makespan (flops, tessel-compile --report-json's simulated
#               timeline) x seconds per flop, the latter measured on one
#               device running the same M microbatches back to back (all
#               of the work on one core: sum of every rank's busy flops)
#   measured  = the median step of tessel-run (steps 2..STEPS)
#
# measured / predicted near 1 says the schedule runs as its timeline says;
# the bubble columns are the report's. Needs P cores to mean anything (the
# ranks are threads): on fewer, the ranks share cores and every schedule
# looks alike. Usage: bench/run-pipeline.sh [LAYERS] [P] [M] [STEPS]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/build.sh"
LAYERS=${1:-8}
P=${2:-2}
M=${3:-8}
STEPS=${4:-6}
build_target tessel-compile
build_target tessel-run
bin="$BUILD_DIR/bin"
work=$(mktemp -d /tmp/tessel-bench-pipeline-XXXXXX)
trap 'rm -rf "$work"' EXIT
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1

sed "s/tensor<4x/tensor<${LAYERS}x/g" examples/gpt.mlir >"$work/gpt.mlir"
flags="--optimizer sgd --lr 0.01"

median_step_ms() { # metrics file -> median step_ms of steps 2..
  python3 - "$1" <<'EOF'
import json, statistics, sys
ms = [json.loads(l)["step_ms"] for l in open(sys.argv[1])][1:]
print(statistics.median(ms))
EOF
}

"$bin/tessel-compile" "$work/gpt.mlir" $flags -o "$work/one.so"
"$bin/tessel-run" "$work/one.so" --steps "$STEPS" --microbatches "$M" \
  --quiet --metrics "$work/one.jsonl"
one_ms=$(median_step_ms "$work/one.jsonl")

echo "# Pipeline schedules: gpt, $LAYERS blocks, pp=$P, $M microbatches"
echo
echo "$cores cores ($cpu); one device: $one_ms ms per step of $M microbatches."
echo
echo "| schedule | bubble (report) | predicted ms | measured ms | measured / predicted | activation bytes per rank |"
echo "| --- | --- | --- | --- | --- | --- |"
for schedule in gpipe 1f1b interleaved zb-h1; do
  extra=""
  [ "$schedule" = interleaved ] && extra="--virtual-stages 2"
  so="$work/$schedule.so"
  if ! "$bin/tessel-compile" "$work/gpt.mlir" $flags --mesh "pp=$P" \
      --microbatches "$M" --pipeline-schedule "$schedule" $extra \
      --report-json "$work/$schedule.json" -o "$so" 2>"$work/err"; then
    echo "| $schedule | $(head -1 "$work/err") | | | | |"
    continue
  fi
  "$bin/tessel-run" "$so" --steps "$STEPS" --quiet \
    --metrics "$work/$schedule.jsonl"
  measured=$(median_step_ms "$work/$schedule.jsonl")
  python3 - "$work/$schedule.json" "$one_ms" "$measured" "$schedule" <<'EOF'
import json, sys
report = json.load(open(sys.argv[1]))["pipeline"]
one_ms, measured, schedule = float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
work = sum(r["busy_flops"] for r in report["timeline"])
predicted = report["makespan_flops"] * one_ms / work
activations = ",".join(str(r["activation_bytes"]) for r in report["timeline"])
print(f"| {schedule} | {report['bubble_fraction']:.4f} | {predicted:.1f} | "
      f"{measured:.1f} | {measured / predicted:.2f} | {activations} |")
EOF
done
