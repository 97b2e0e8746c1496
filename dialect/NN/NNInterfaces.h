//===- NNInterfaces.h - cost, sharding constraints and VJP of nn ops -*- C++ -*-===//

#ifndef TESSEL_DIALECT_NN_NNINTERFACES_H
#define TESSEL_DIALECT_NN_NNINTERFACES_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "llvm/ADT/SmallVector.h"

namespace tessel::nn::detail {
/// Sizes and flop counts saturate here instead of wrapping: a count equal to
/// it does not fit in int64 and the verifier refuses the op that has it.
inline constexpr int64_t kCountOverflow = INT64_MAX;
/// a + b, or kCountOverflow when it does not fit (counts are non-negative).
inline int64_t satAdd(int64_t a, int64_t b) {
  int64_t sum;
  return __builtin_add_overflow(a, b, &sum) || sum > kCountOverflow
             ? kCountOverflow
             : sum;
}
/// a · b, or kCountOverflow when it does not fit.
inline int64_t satMul(int64_t a, int64_t b) {
  int64_t product;
  return __builtin_mul_overflow(a, b, &product) ? kCountOverflow : product;
}
template <typename... Rest>
inline int64_t satMul(int64_t a, int64_t b, Rest... rest) {
  return satMul(satMul(a, b), rest...);
}
/// Refuses an op with a tensor or a flop count past int64 (the cost
/// interface's verifier), located on the op.
mlir::LogicalResult verifyCountsFit(mlir::Operation *op);

/// Bytes of one element of `type` (bf16: 2, f32: 4, i64: 8, ...).
int64_t elementBytes(mlir::Type type);
/// Bytes of a ranked tensor (0 for anything else; kCountOverflow past int64).
int64_t tensorBytes(mlir::Type type);
/// Number of elements of a ranked tensor (0 for anything else;
/// kCountOverflow past int64).
int64_t numElements(mlir::Type type);
/// Sum of tensorBytes over the operands and results of `op`.
int64_t operandAndResultBytes(mlir::Operation *op);
} // namespace tessel::nn::detail

namespace tessel::nn {
/// How one op is split on a rank, for ShardingConstraintOpInterface::
/// adjustLocalPartition, and what the op's own strategy built.
struct LocalSplit {
  /// The grid the op's collectives run on.
  mlir::FlatSymbolRefAttr grid;
  /// Per loop of the op (getLoopIteratorTypes' order), the grid axes that
  /// split it, outermost first.
  llvm::SmallVector<llvm::SmallVector<int16_t>> loopAxes;
  /// Batch norm keeps per-rank statistics (PyTorch's BatchNorm under DDP)
  /// instead of all-reducing them (SyncBatchNorm).
  bool localBatchStatistics = false;

  /// Out: values replacing the local op's results (empty: keep them).
  llvm::SmallVector<mlir::Value> replacements;
  /// Out: split reduction loops the op combined itself; its results are
  /// whole over their axes, not partial.
  llvm::SmallVector<int64_t> resolvedLoops;

  /// The axes splitting any of `loops`, sorted.
  llvm::SmallVector<int16_t> axesOf(llvm::ArrayRef<int64_t> loops) const;
};
} // namespace tessel::nn

#include "dialect/NN/NNInterfaces.h.inc"

namespace tessel::nn {
/// The cost of a block: the sums over its ops that have a cost model.
struct CostSummary {
  int64_t flops = 0;
  int64_t bytes = 0;
  int64_t numOps = 0; // ops with a cost model
};
CostSummary sumCost(mlir::Block &block);
} // namespace tessel::nn

#endif // TESSEL_DIALECT_NN_NNINTERFACES_H
