#!/usr/bin/env bash
# The CUDA backend on a GPU machine, as one prepared run (under 8 minutes on
# one H200), printing one table:
#   1. build (scripts/setup.sh: the whole project, CUDA backend included) and
#      compile the models (scripts/gpu-models.sh); with --bundle DIR, take
#      both from an archive scripts/gpu-bundle.sh packed on another machine
#      (for a GPU machine without LLVM/MLIR, OpenBLAS or MPI);
#   2. tessel-cuda-tests: every kernel against the CPU backend on the same
#      inputs (f32 tight, bf16 within stated bounds), the NCCL collectives
#      where there are two GPUs; a failing test is rerun under
#      compute-sanitizer where it is installed;
#   3. examples/gpt.mlir trained 3 steps on one GPU and on the CPU backend
#      from the same seed: losses within 1e-4 relative (GEMMs sum in another
#      order), and in bf16 within 1e-2; the step captured as a CUDA graph
#      (--graph) equal to it call by call; dp=2 and tp=2 on two GPUs against
#      one GPU where there are two;
#   4. the benchmark: a GPT-2 124M-shaped model (12 layers, width 768, 12
#      heads, context 1024, vocabulary 50304, batch 8) in bf16 on one GPU:
#      tokens/s, model FLOPs utilisation (6 N + 12 L T C flops per token over
#      989 TFLOP/s dense bf16) and the step time outside kernels; then
#      tokens/s with the step captured (--graph).
# Every step runs under a timeout, so a hang costs minutes, not the machine.
# Exits non-zero when a check fails (the table still prints).
# With --profile, the benchmark's second step runs again under Nsight Compute
# (one metric, each kernel's device time): the kernels by device time, and
# the step time outside kernels as 1 - their sum / the step's time.
#   scripts/gpu-check.sh [--bundle DIR] [--profile]   (TESSEL_BUILD_DIR as scripts/setup.sh;
#   TESSEL_GPU_LOGS: the folder for the logs, default a new one under /tmp)
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${TESSEL_BUILD_DIR:-build}
bundle=""
profile=0
while [ $# -gt 0 ]; do
  case $1 in
  --bundle) bundle=$(cd "${2:?--bundle needs a directory}" && pwd); shift 2 ;;
  --profile) profile=1; shift ;;
  *) echo "usage: scripts/gpu-check.sh [--bundle DIR] [--profile]" >&2; exit 2 ;;
  esac
done
out=${TESSEL_GPU_LOGS:-$(mktemp -d /tmp/tessel-gpu-XXXXXX)}
mkdir -p "$out"
rows=()
status=0
row() { rows+=("$(printf '%-44s %s' "$1" "$2")"); }
fail() { row "$1" "FAIL: $2"; status=1; }
summary() {
  echo
  echo "== gpu-check ($((SECONDS - start)) s; logs in $out)"
  printf '%s\n' "${rows[@]}"
}

start=$SECONDS
if [ -n "$bundle" ]; then
  bin=$bundle/bin
  models=$bundle/models
  # The bundle's libraries first; cudart, cuBLASLt and NCCL from the machine
  # (the toolkit's folders, or the pip wheels a PyTorch install brings).
  libs=$bundle/lib
  for want in libcudart.so.13 libcublasLt.so.13 libnccl.so.2; do
    LD_LIBRARY_PATH=$libs ldd "$libs/libtessel_cuda.so" | grep -q "$want => not" ||
      continue
    found=$(find /usr/local/cuda* /usr/lib /opt -name "$want" 2>/dev/null | head -1)
    [ -n "$found" ] && libs=$libs:$(dirname "$found")
  done
  export LD_LIBRARY_PATH=$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  missing=$(ldd "$bundle/lib/libtessel_cuda.so" "$bin/tessel-run" | grep "not found" | sort -u)
  [ -z "$missing" ] || echo "gpu-check: missing libraries: $missing"
  row "bundle" "$bundle"
else
  if ! scripts/setup.sh >"$out/setup.log" 2>&1; then
    tail -20 "$out/setup.log"
    echo "gpu-check: build failed (log $out/setup.log)"
    exit 1
  fi
  bin=$BUILD_DIR/bin
  models=$out
  source scripts/gpu-models.sh
  if ! compile_gpu_models "$bin/tessel-compile" "$models" >"$out/models.log" 2>&1; then
    tail -20 "$out/models.log"
    echo "gpu-check: compiling the models failed (log $out/models.log)"
    exit 1
  fi
  row "build" "$((SECONDS - start)) s"
fi
gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
row "GPUs" "$gpus ($(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1))"

# 2. Kernels against the CPU backend.
t=$(find "$bin" "$BUILD_DIR" -name tessel-cuda-tests -type f 2>/dev/null | head -1)
if [ -z "$t" ]; then
  fail "kernel tests" "tessel-cuda-tests not built (no CUDA backend?)"
else
  timeout 180 "$t" >"$out/cuda-tests.log" 2>&1
  rc=$?
  passed=$(grep -Eo '\[  PASSED  \] [0-9]+' "$out/cuda-tests.log" | grep -Eo '[0-9]+$')
  skipped=$(grep -Eo '\[  SKIPPED \] [0-9]+ test' "$out/cuda-tests.log" | grep -Eo '[0-9]+' | head -1)
  if [ $rc -eq 0 ]; then
    row "kernel tests (tessel-cuda-tests)" "${passed:-0} passed, ${skipped:-0} skipped"
  else
    # gtest's summary line "[  FAILED  ] N tests, listed below" (each
    # failure is listed twice besides: after its run and in the summary).
    failed=$(grep -Eo '^\[  FAILED  \] [0-9]+ tests?, listed below' "$out/cuda-tests.log" | grep -Eo '[0-9]+')
    fail "kernel tests (tessel-cuda-tests)" "${failed:-?} failed (log $out/cuda-tests.log; exit $rc)"
    grep '^\[  FAILED  \]' "$out/cuda-tests.log" | head -20
    first=$(grep -m1 -Eo '^\[  FAILED  \] [A-Za-z0-9_.]+' "$out/cuda-tests.log" | awk '{print $NF}')
    if [ -n "$first" ] && command -v compute-sanitizer >/dev/null; then
      timeout 120 compute-sanitizer --tool memcheck "$t" --gtest_filter="$first" \
        >"$out/sanitizer.log" 2>&1
      echo "gpu-check: $first under compute-sanitizer: $(grep -c '=========' "$out/sanitizer.log") lines of findings (log $out/sanitizer.log)"
    fi
  fi
fi

if [ "$gpus" -eq 0 ]; then
  fail "GPU checks" "no GPU visible (nvidia-smi -L lists none): only the kernel tests' host parts ran"
  summary
  exit 1
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
train() { # name model backend extra...
  local name=$1 model=$2 backend=$3; shift 3
  timeout 90 "$bin/tessel-run" "$models/$model" --backend "$backend" --steps 3 \
    --quiet --data README.md --data-dtype u8 \
    --metrics "$out/$name.jsonl" "$@" >"$out/$name.log" 2>&1
}
if train cpu gpt-sgd.so cpu && train gpu1 gpt-sgd.so cuda; then
  if d=$(close "$(losses "$out/gpu1.jsonl")" "$(losses "$out/cpu.jsonl")" 1e-4); then
    row "gpt 3 steps: 1 GPU vs CPU (losses)" "max rel diff $d"
  else
    fail "gpt 3 steps: 1 GPU vs CPU (losses)" "max rel diff $d"
  fi
else
  fail "gpt 3 steps on 1 GPU" "$(tail -1 "$out/gpu1.log")"
  # The CUDA call that failed, with its host stack (API errors included).
  if command -v compute-sanitizer >/dev/null; then
    timeout 180 compute-sanitizer --tool memcheck --show-backtrace host \
      "$bin/tessel-run" "$models/gpt-sgd.so" --backend cuda --steps 1 --quiet \
      >"$out/gpu1-sanitizer.log" 2>&1
    grep -m3 -A12 '^========= [A-Z]' "$out/gpu1-sanitizer.log"
  fi
fi
# A captured step (CUDA graph) against the same steps call by call: the
# same kernels in the same order, so the same losses. Step 1 warms up; the
# graph runs steps 2 and 3.
if [ -s "$out/gpu1.jsonl" ] && train gpu1-graph gpt-sgd.so cuda --graph; then
  if d=$(close "$(losses "$out/gpu1-graph.jsonl")" "$(losses "$out/gpu1.jsonl")" 0); then
    row "gpt 3 steps: --graph vs call by call" "max rel diff $d"
  else
    fail "gpt 3 steps: --graph vs call by call" "max rel diff $d"
  fi
else
  fail "gpt 3 steps with --graph" "$(tail -1 "$out/gpu1-graph.log")"
fi
# bf16 on both: bf16 storage, f32 arithmetic; a GEMM's bf16 output may round
# the other way after another summation order, so 1e-2 relative.
if train cpu-bf16 gpt-sgd-bf16.so cpu && train gpu1-bf16 gpt-sgd-bf16.so cuda; then
  if d=$(close "$(losses "$out/gpu1-bf16.jsonl")" "$(losses "$out/cpu-bf16.jsonl")" 1e-2); then
    row "gpt bf16 3 steps: 1 GPU vs CPU (losses)" "max rel diff $d"
  else
    fail "gpt bf16 3 steps: 1 GPU vs CPU (losses)" "max rel diff $d"
  fi
else
  fail "gpt bf16 3 steps on 1 GPU" "$(tail -1 "$out/gpu1-bf16.log")"
fi
if [ "$gpus" -ge 2 ]; then
  for mesh in dp=2 tp=2; do
    if train "$mesh" "gpt-sgd-${mesh/=/}.so" cuda; then
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

# 4. The benchmark: call by call, then with the step captured (--graph).
bench_numbers() { python3 - "$1" <<'PY'
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
}
if timeout 180 "$bin/tessel-run" "$models/gpt124m-bf16.so" --backend cuda --steps 20 \
     --quiet --metrics "$out/bench.jsonl" >"$out/bench.log" 2>&1; then
  read -r tps mfu outside < <(bench_numbers "$out/bench.jsonl")
  row "gpt-124M bf16, 1 GPU: tokens/s" "$tps"
  row "  model FLOPs utilisation (goal >= 45%)" "$mfu"
  [ "$outside" = "-" ] && outside="with --profile (Nsight Compute)"
  row "  step time outside kernels (goal <= 2%)" "$outside"
  # One traced step: the kernels the host issues and its time issuing them.
  timeout 90 "$bin/tessel-run" "$models/gpt124m-bf16.so" --backend cuda --steps 3 \
    --trace "$out/bench-trace.json" >"$out/bench-trace.log" 2>&1 ||
    fail "gpt-124M bf16 traced step" "$(tail -1 "$out/bench-trace.log")"
  if timeout 180 "$bin/tessel-run" "$models/gpt124m-bf16.so" --backend cuda \
       --steps 20 --graph --quiet --metrics "$out/bench-graph.jsonl" \
       >"$out/bench-graph.log" 2>&1; then
    read -r gtps gmfu _ < <(bench_numbers "$out/bench-graph.jsonl")
    row "  with --graph: tokens/s (MFU)" "$gtps ($gmfu)"
  else
    fail "gpt-124M bf16 benchmark with --graph" "$(tail -1 "$out/bench-graph.log")"
  fi
else
  fail "gpt-124M bf16 benchmark" "$(tail -1 "$out/bench.log")"
fi

# 5. Where the step's time goes: every kernel launch of two steps timed by
# Nsight Compute, serialised; the second step's are those timed.
if [ $profile = 1 ] && [ -s "$out/bench.jsonl" ] && command -v ncu >/dev/null; then
  timeout 300 ncu --clock-control none --metrics gpu__time_duration.sum --csv \
    "$bin/tessel-run" "$models/gpt124m-bf16.so" --backend cuda --steps 2 --quiet \
    >"$out/profile.csv" 2>"$out/profile.log"
  python3 - "$out/profile.csv" "$out/bench.jsonl" >"$out/profile.txt" <<'PY'
import collections, csv, json, statistics, sys
scale = {"nsecond": 1e-6, "usecond": 1e-3, "msecond": 1.0, "second": 1e3,
         "ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}
rows = [r for r in csv.reader(l for l in open(sys.argv[1]) if l.startswith('"'))]
head, rows = rows[0], rows[1:]
name = head.index("Kernel Name" if "Kernel Name" in head else "Function Name")
unit, value = head.index("Metric Unit"), head.index("Metric Value")
launches = [(r[name], float(r[value].replace(",", "")) * scale[r[unit]]) for r in rows]
# A step's launches: the longest tail that the launches before it repeat
# (the two steps launch the same kernels; initialisation comes first).
names = [n for n, _ in launches]
per_step = max((p for p in range(1, len(names) // 2 + 1)
                if names[-p:] == names[-2 * p:-p]), default=0)
step = launches[len(launches) - per_step:]
total = sum(ms for _, ms in step)
wall = statistics.median(json.loads(l)["step_ms"] for l in list(open(sys.argv[2]))[5:])
def short(n):
    # "void ns::(anonymous namespace)::kernel<T, 64>(const T *, ...)" -> kernel
    n = n.replace("(anonymous namespace)::", "")
    if n.startswith("void "):
        n = n[5:]
    for i, ch in enumerate(n):
        if ch in "<(":
            n = n[:i]
            break
    return n.split("::")[-1][:60]
by = collections.defaultdict(lambda: [0, 0.0])
for n, ms in step:
    by[short(n)][0] += 1
    by[short(n)][1] += ms
print("launches per step %d, kernel time %.2f ms, step %.2f ms, outside kernels %.1f%%"
      % (per_step, total, wall, 100 * (1 - total / wall)))
for n, (count, ms) in sorted(by.items(), key=lambda kv: -kv[1][1])[:25]:
    print("%8.2f ms %5.1f%% %5d  %s" % (ms, 100 * ms / total, count, n))
PY
  if [ -s "$out/profile.txt" ]; then
    row "  kernels per step (Nsight Compute)" "$(head -1 "$out/profile.txt")"
    cat "$out/profile.txt"
  else
    fail "profile" "$(tail -1 "$out/profile.log")"
  fi
fi

summary
exit $status
