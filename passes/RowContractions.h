//===- RowContractions.h - Gradients over split sequences -*- C++ -*-===//
//
// A weight's gradient is one GEMM over the flattened rows of its operands
// (autodiff's flattenRows: [B, S, K] → [B·S, K], then op(A)ᵀ · dC). A
// reshape group splits only its leading loop into contiguous blocks, so a
// sequence split over cp (an inner loop of the group) cannot reach the
// rows, and propagation gathers both operands whole: every rank would run
// the whole GEMM. The sum over the rows does not depend on their order, so
// tessel-propagate-sharding rewrites such a contraction, where an operand
// splits an inner row dimension (and the other splits it alike, or holds
// it whole: a partial sum, then reduce-scattered into the blocks), as a
// batched GEMM over the dimensions up to that dimension's blocks and a
// sum over them:
//
//   [B, S, K] → [B, n, S/n, K],  [B, S, N] → [B, n, S/n, N]
//   dW = Σ_{b, block} (A[b, block]ᵀ · C[b, block])   ([B, n, K, N] summed)
//
// Each rank then multiplies its own block and the sum is a partial sum
// over dp and cp, which the partitioner completes with one all-reduce
// (Megatron's gradient reduction over dp·cp). The cost is a [B, n, K, N]
// result before the sum: one weight per local sample (one weight under
// context parallelism's usual batch of 1 a rank).
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
    mlir::ModuleOp module, const Mesh &mesh,
    llvm::function_ref<DimSharding(mlir::Value)> shardingOf);

} // namespace tessel

#endif // TESSEL_PASSES_ROWCONTRACTIONS_H
