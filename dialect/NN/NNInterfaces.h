//===- NNInterfaces.h - cost, sharding constraints and VJP of nn ops -*- C++ -*-===//

#ifndef TESSEL_DIALECT_NN_NNINTERFACES_H
#define TESSEL_DIALECT_NN_NNINTERFACES_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "llvm/ADT/SmallVector.h"

namespace tessel::nn::detail {
/// Bytes of one element of `type` (bf16: 2, f32: 4, i64: 8, ...).
int64_t elementBytes(mlir::Type type);
/// Bytes of a ranked tensor (0 for anything else).
int64_t tensorBytes(mlir::Type type);
/// Number of elements of a ranked tensor (0 for anything else).
int64_t numElements(mlir::Type type);
/// Sum of tensorBytes over the operands and results of `op`.
int64_t operandAndResultBytes(mlir::Operation *op);
} // namespace tessel::nn::detail

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
