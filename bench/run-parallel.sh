#!/usr/bin/env bash
# Builds tessel-bench-parallel if needed and prints, as markdown tables, the
# training-step throughput of the MLP and GPT examples on one device and on
# the meshes dp=2, tp=2 and dp=2,tp=2 (every rank a thread), then the local
# communicator's all-reduce bandwidth against memcpy. Extra arguments go to
# tessel-bench-parallel (e.g. --runs 11, --min-time 0.5, --mesh dp=4,
# --sizes 4K,64K, --groups 2, --no-comm).
set -euo pipefail
source "$(dirname "$0")/build.sh"
build_target tessel-bench-parallel

load=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo "?")
echo "Tessel on a mesh of threads, $(date -u +%Y-%m-%d), ${cpu:-unknown CPU}," \
  "${cores} cores, load average ${load} before the run. Figures are medians" \
  "of repeated runs."
echo
"$BUILD_DIR/bin/tessel-bench-parallel" examples/mlp.mlir examples/gpt.mlir "$@"
