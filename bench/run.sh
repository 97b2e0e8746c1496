#!/usr/bin/env bash
# Builds tessel-bench-step if needed and prints, as markdown tables, the
# runtime's forward (tessel_forward) and training step (zero grads,
# tessel_backward, grad_scale, tessel_update) of the MLP and GPT examples,
# each against the same GEMMs called directly through OpenBLAS, then the
# per-kernel breakdown of both. Extra arguments go to tessel-bench-step (e.g.
# --runs 11, --min-time 0.5, --no-profile, --no-train).
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
echo "Tessel forward and training step vs. GEMM-only, $(date -u +%Y-%m-%d)," \
  "${cpu:-unknown CPU}, ${cores} cores, one OpenBLAS thread. The machine is" \
  "shared and noisy: the figures are medians of repeated runs (ratios:" \
  "medians of paired runs)."
echo
"$BUILD_DIR/bin/tessel-bench-step" examples/mlp.mlir examples/gpt.mlir "$@"
