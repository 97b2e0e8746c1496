#!/usr/bin/env bash
# Builds tessel-bench-step if needed and prints, as one markdown table, the
# runtime's step time (tessel_forward) of the MLP and GPT examples against
# the same GEMMs called directly through OpenBLAS, then the per-kernel
# breakdown of each step. Extra arguments go to tessel-bench-step (e.g.
# --runs 11, --min-time 0.5, --no-profile).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${TESSEL_BUILD_DIR:-build}

# Builds share one lock on machines where several jobs build this tree.
locked() {
  if command -v flock >/dev/null; then
    flock /tmp/tessel-build.lock "$@"
  else
    "$@"
  fi
}
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  locked cmake -G Ninja -S . -B "$BUILD_DIR"
fi
locked ninja -C "$BUILD_DIR" tessel-bench-step >&2

cores=$(nproc 2>/dev/null || echo "?")
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -1)
echo "Tessel step vs. GEMM-only, $(date -u +%Y-%m-%d), ${cpu:-unknown CPU}," \
  "${cores} cores, one OpenBLAS thread. The machine is shared and noisy: the" \
  "figures are medians of repeated runs (step / GEMM: median of paired runs)."
echo
"$BUILD_DIR/bin/tessel-bench-step" examples/mlp.mlir examples/gpt.mlir "$@"
