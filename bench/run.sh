#!/usr/bin/env bash
# Builds tessel-bench-step if needed and prints, as markdown tables, the
# runtime's forward (tessel_forward) and training step (zero grads,
# tessel_backward, grad_scale, tessel_update) of the MLP and GPT examples,
# each against the same GEMMs called directly through OpenBLAS, then the
# per-kernel breakdown of both. Extra arguments go to tessel-bench-step (e.g.
# --runs 11, --min-time 0.5, --no-profile, --no-train).
set -euo pipefail
source "$(dirname "$0")/build.sh"
build_target tessel-bench-step

echo "Tessel forward and training step vs. GEMM-only, $(date -u +%Y-%m-%d)," \
  "${cpu:-unknown CPU}, ${cores} cores, one OpenBLAS thread. The machine is" \
  "shared and noisy: the figures are medians of repeated runs (ratios:" \
  "medians of paired runs)."
echo
"$BUILD_DIR/bin/tessel-bench-step" examples/mlp.mlir examples/gpt.mlir "$@"
