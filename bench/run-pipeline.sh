#!/usr/bin/env bash
# Prints, as a markdown table, each pipeline schedule's training step on the
# threads backend next to what the compiler predicts: examples/gpt.mlir
# with LAYERS blocks (default 8) on pp=P (default 2) with M microbatches
# (default 8), every rank a thread with one BLAS thread.
#
#   predicted = makespan (flops, tessel-compile --report-json's simulated
#               timeline) x seconds per flop, the latter measured on one
#               device running the same M microbatches back to back (its
#               report's flops: M backwards and the update, on one core)
#   measured  = the median step of tessel-run (steps 2..STEPS)
#
# measured / predicted near 1 says the schedule runs as its timeline says;
# the bubble columns are the report's. Each schedule runs twice: each stage
# keeping what its backward reads of its forward (the default), and with
# --stage-recompute (each backward recomputes its stage's forward, as GPipe
# does: more work for the same step). Needs P cores to mean anything (the
# ranks are threads): on fewer, the ranks share cores and every schedule
# looks alike. Usage: [SCHEDULES="zb-v dualpipev"] bench/run-pipeline.sh
# [LAYERS] [P] [M] [STEPS]
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

"$bin/tessel-compile" "$work/gpt.mlir" $flags -o "$work/one.so" \
  --report-json "$work/one.json"
"$bin/tessel-run" "$work/one.so" --steps "$STEPS" --microbatches "$M" \
  --quiet --metrics "$work/one.jsonl"
one_ms=$(median_step_ms "$work/one.jsonl")

echo "# Pipeline schedules: gpt, $LAYERS blocks, pp=$P, $M microbatches"
echo
echo "$cores cores ($cpu); one device: $one_ms ms per step of $M microbatches."
echo
echo "| schedule | stage activations | bubble (report) | predicted ms | measured ms | measured / predicted | activation bytes per rank |"
echo "| --- | --- | --- | --- | --- | --- | --- |"
for schedule in ${SCHEDULES:-gpipe 1f1b interleaved zb-h1 zb-v dualpipev}; do
  for mode in kept recomputed; do
    extra=""
    [ "$schedule" = interleaved ] && extra="--virtual-stages 2"
    [ "$mode" = recomputed ] && extra="$extra --stage-recompute"
    name="$schedule-$mode"
    so="$work/$name.so"
    if ! "$bin/tessel-compile" "$work/gpt.mlir" $flags --mesh "pp=$P" \
        --microbatches "$M" --pipeline-schedule "$schedule" $extra \
        --report-json "$work/$name.json" -o "$so" 2>"$work/err"; then
      echo "| $schedule | $mode | $(head -1 "$work/err") | | | | | |"
      continue
    fi
    "$bin/tessel-run" "$so" --steps "$STEPS" --quiet \
      --metrics "$work/$name.jsonl"
    measured=$(median_step_ms "$work/$name.jsonl")
    python3 - "$work/$name.json" "$work/one.json" "$one_ms" "$measured" \
      "$schedule" "$mode" "$M" <<'EOF'
import json, sys
report = json.load(open(sys.argv[1]))["pipeline"]
one = json.load(open(sys.argv[2]))
one_ms, measured = float(sys.argv[3]), float(sys.argv[4])
schedule, mode, m = sys.argv[5], sys.argv[6], int(sys.argv[7])
# Seconds per flop from one device: M backwards (each with its forward)
# and an update, the work of one step on one core.
flops = one["flops"]
one_work = m * flops["loss_backward"] + flops["loss_update"]
predicted = report["makespan_flops"] * one_ms / one_work
activations = ",".join(str(r["activation_bytes"]) for r in report["timeline"])
print(f"| {schedule} | {mode} | {report['bubble_fraction']:.4f} | "
      f"{predicted:.1f} | {measured:.1f} | {measured / predicted:.2f} | "
      f"{activations} |")
EOF
  done
done
