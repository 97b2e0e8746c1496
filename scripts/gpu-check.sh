#!/usr/bin/env bash
# The CUDA backend on a GPU machine, as one prepared run (under 8 minutes on
# one H200), printing one table:
#   1. build (scripts/setup.sh: the whole project, CUDA backend included);
#   2. tessel-cuda-tests: every kernel against the CPU backend on the same
#      inputs (f32 tight, bf16 within stated bounds), the NCCL collectives
#      where there are two GPUs;
#   3. examples/gpt.mlir trained 3 steps on one GPU and on the CPU backend
#      from the same seed: losses within 1e-4 relative (GEMMs sum in another
#      order); dp=2 and tp=2 on two GPUs against one GPU where there are two;
#   4. the benchmark: a GPT-2 124M-shaped model (12 layers, width 768, 12
#      heads, context 1024, vocabulary 50304, batch 8) in bf16 on one GPU:
#      tokens/s, model FLOPs utilisation (6 N + 12 L T C flops per token over
#      989 TFLOP/s dense bf16) and the step time outside kernels.
# Exits non-zero when a check fails (the table still prints).
#   scripts/gpu-check.sh   (TESSEL_BUILD_DIR as scripts/setup.sh)
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${TESSEL_BUILD_DIR:-build}
out=$(mktemp -d /tmp/tessel-gpu-XXXXXX)
rows=()
status=0
row() { rows+=("$(printf '%-44s %s' "$1" "$2")"); }
fail() { row "$1" "FAIL: $2"; status=1; }

start=$SECONDS
if ! scripts/setup.sh >"$out/setup.log" 2>&1; then
  tail -20 "$out/setup.log"
  echo "gpu-check: build failed (log $out/setup.log)"
  exit 1
fi
row "build" "$((SECONDS - start)) s"
bin=$BUILD_DIR/bin
gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
row "GPUs" "$gpus ($(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1))"

# 2. Kernels against the CPU backend.
t=$(find "$BUILD_DIR" -name tessel-cuda-tests -type f | head -1)
if [ -z "$t" ]; then
  fail "kernel tests" "tessel-cuda-tests not built (no CUDA backend?)"
else
  "$t" --gtest_brief=1 >"$out/cuda-tests.log" 2>&1
  rc=$?
  passed=$(grep -Eo '\[  PASSED  \] [0-9]+' "$out/cuda-tests.log" | grep -Eo '[0-9]+$')
  skipped=$(grep -Eo '\[  SKIPPED \] [0-9]+ test' "$out/cuda-tests.log" | grep -Eo '[0-9]+' | head -1)
  if [ $rc -eq 0 ]; then
    row "kernel tests (tessel-cuda-tests)" "${passed:-0} passed, ${skipped:-0} skipped"
  else
    fail "kernel tests (tessel-cuda-tests)" "$(grep -c '^\[  FAILED  \]' "$out/cuda-tests.log") failed (log $out/cuda-tests.log)"
    grep '^\[  FAILED  \]' "$out/cuda-tests.log" | head -20
  fi
fi

# 3. GPT training steps: GPU against CPU, meshes against one GPU.
losses() { python3 -c 'import json,sys; print(" ".join("%.7g" % json.loads(l)["loss"] for l in open(sys.argv[1])))' "$1"; }
close() { python3 -c '
import sys
a = [float(x) for x in sys.argv[1].split()]; b = [float(x) for x in sys.argv[2].split()]
tol = float(sys.argv[3])
ok = len(a) == len(b) and len(a) > 0 and all(abs(x - y) <= tol * abs(y) for x, y in zip(a, b))
print("%.2e" % max((abs(x - y) / abs(y) for x, y in zip(a, b)), default=float("nan")))
sys.exit(0 if ok else 1)' "$1" "$2" "$3"; }
train() { # name backend extra...
  local name=$1 backend=$2; shift 2
  "$bin/tessel-run" examples/gpt.mlir --backend "$backend" --steps 3 --quiet \
    --optimizer sgd --lr 0.1 --momentum 0.9 --data README.md --data-dtype u8 \
    --metrics "$out/$name.jsonl" "$@" >"$out/$name.log" 2>&1
}
if train cpu cpu && train gpu1 cuda; then
  if d=$(close "$(losses "$out/gpu1.jsonl")" "$(losses "$out/cpu.jsonl")" 1e-4); then
    row "gpt 3 steps: 1 GPU vs CPU (losses)" "max rel diff $d"
  else
    fail "gpt 3 steps: 1 GPU vs CPU (losses)" "max rel diff $d"
  fi
else
  fail "gpt 3 steps on 1 GPU" "$(tail -1 "$out/gpu1.log")"
fi
if [ "$gpus" -ge 2 ]; then
  for mesh in dp=2 tp=2; do
    if train "$mesh" cuda --mesh "$mesh"; then
      if d=$(close "$(losses "$out/$mesh.jsonl")" "$(losses "$out/gpu1.jsonl")" 1e-4); then
        row "gpt 3 steps: $mesh vs 1 GPU" "max rel diff $d"
      else
        fail "gpt 3 steps: $mesh vs 1 GPU" "max rel diff $d"
      fi
    else
      fail "gpt 3 steps on $mesh" "$(tail -1 "$out/$mesh.log")"
    fi
  done
else
  row "gpt on dp=2 / tp=2" "skipped: fewer than two GPUs"
fi

# 4. The benchmark.
python3 bench/gpt-model.py --batch 8 --seq 1024 --width 768 --heads 12 \
  --layers 12 --vocab 50304 >"$out/gpt124m.mlir"
if "$bin/tessel-compile" "$out/gpt124m.mlir" --precision bf16 -o "$out/gpt124m.so" \
     >"$out/bench-compile.log" 2>&1 &&
   "$bin/tessel-run" "$out/gpt124m.so" --backend cuda --steps 20 --quiet \
     --metrics "$out/bench.jsonl" >"$out/bench.log" 2>&1; then
  read -r tps mfu outside < <(python3 - "$out/bench.jsonl" <<'PY'
import json, statistics, sys
lines = [json.loads(l) for l in open(sys.argv[1])][5:]  # after warm-up
tps = statistics.median(l["tokens_per_s"] for l in lines)
L, T, C, V = 12, 1024, 768, 50304
N = V * C + T * C + L * (12 * C * C + 13 * C) + 2 * C
flops_per_token = 6 * N + 12 * L * T * C
mfu = tps * flops_per_token / 989e12
kernel = [l.get("kernel_ms") for l in lines]
step = [l["step_ms"] for l in lines]
outside = "-" if None in kernel else "%.1f%%" % (100 * (1 - sum(kernel) / sum(step)))
print("%.0f %.1f%% %s" % (tps, 100 * mfu, outside))
PY
)
  row "gpt-124M bf16, 1 GPU: tokens/s" "$tps"
  row "  model FLOPs utilisation (goal >= 45%)" "$mfu"
  row "  step time outside kernels (goal <= 2%)" "$outside"
else
  fail "gpt-124M bf16 benchmark" "$(cat "$out/bench-compile.log" "$out/bench.log" | tail -1)"
fi

echo
echo "== gpu-check ($((SECONDS - start)) s; logs in $out)"
printf '%s\n' "${rows[@]}"
exit $status
