//===- NNOps.h - the ops of the nn dialect -----------------------*- C++ -*-===//

#ifndef TESSEL_DIALECT_NN_NNOPS_H
#define TESSEL_DIALECT_NN_NNOPS_H

#include "dialect/NN/NNAttrs.h"
#include "dialect/NN/NNDialect.h"
#include "dialect/NN/NNInterfaces.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/Interfaces/ShardingInterface.h"
#include "mlir/Dialect/Utils/StructuredOpsUtils.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace tessel::nn::detail {
/// `rank` parallel loops.
llvm::SmallVector<mlir::utils::IteratorType> parallelLoops(int64_t rank);
/// One identity map per operand and result, over the rank of the first
/// result: the indexing maps of an elementwise op.
llvm::SmallVector<mlir::AffineMap> identityMaps(mlir::Operation *op);
} // namespace tessel::nn::detail

namespace tessel::nn {
// Names the generated upstream ShardingInterface declarations use unqualified.
using ::llvm::SmallVector;
using ::mlir::AffineMap;
using ::mlir::shard::ReductionKind;
} // namespace tessel::nn

#define GET_OP_CLASSES
#include "dialect/NN/NNOps.h.inc"

#endif // TESSEL_DIALECT_NN_NNOPS_H
