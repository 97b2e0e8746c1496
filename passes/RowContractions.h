//===- RowContractions.h - Gradients over split sequences -*- C++ -*-===//
//
// A weight's gradient is one GEMM over the flattened rows of its operands
// (autodiff's flattenRows: [B, S, K] → [B·S, K], then op(A)ᵀ · dC). A
// reshape group splits only its leading loop into contiguous blocks, so a
// sequence split over cp (an inner loop of the group) cannot reach the
// rows, and propagation gathers both operands whole: every rank would run
// the whole GEMM. The sum over the rows does not depend on their order, so
// tessel-propagate-sharding rewrites such a contraction, where an operand
// splits an inner row dimension, over the rows' own dimensions:
//
//   dW = nn.matmul [B, S, K], [B, S, N] transpose_lhs sum_batch
//
// whose batch and K loops are all sums. Each rank then multiplies its own
// rows, and the result is a partial sum over dp and cp, which the
// partitioner completes with one all-reduce (Megatron's gradient reduction
// over dp·cp); a partial operand (dk, dv of a block) is reduce-scattered
// into the blocks first. A rank's rows are contiguous, so tessel-partition
// flattens its summed batches back into the one GEMM of the flattened rows
// (flattenSummedBatches), which the epilogue fusions (beta = 1, the bias
// gradient) then take as they take data parallelism's.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_PASSES_ROWCONTRACTIONS_H
#define TESSEL_PASSES_ROWCONTRACTIONS_H

#include "passes/Sharding.h"

#include "llvm/ADT/STLFunctionalExtras.h"

namespace tessel {

/// Rewrites every flattened-rows contraction of `module` whose operands
/// split an inner row dimension (by `shardingOf`, a propagation's result)
/// as above; true if any changed.
bool splitRowContractions(
    mlir::ModuleOp module,
    llvm::function_ref<DimSharding(mlir::Value)> shardingOf);

/// Rewrites every `sum_batch` matmul under `root` as the matmul of its
/// operands' flattened rows (a rank's local program, after partitioning).
void flattenSummedBatches(mlir::Operation *root);

} // namespace tessel

#endif // TESSEL_PASSES_ROWCONTRACTIONS_H
