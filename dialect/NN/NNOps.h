//===- NNOps.h - the ops of the nn dialect -----------------------*- C++ -*-===//

#ifndef TESSEL_DIALECT_NN_NNOPS_H
#define TESSEL_DIALECT_NN_NNOPS_H

#include "dialect/NN/NNAttrs.h"
#include "dialect/NN/NNDialect.h"
#include "dialect/NN/NNInterfaces.h"
#include "dialect/NN/NormRules.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/Interfaces/ShardingInterface.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Dialect/Utils/StructuredOpsUtils.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/DestinationStyleOpInterface.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace tessel::nn::detail {
/// `rank` parallel loops.
llvm::SmallVector<mlir::utils::IteratorType> parallelLoops(int64_t rank);
/// One identity map per operand and result, over the rank of the first
/// result: the indexing maps of an elementwise op.
llvm::SmallVector<mlir::AffineMap> identityMaps(mlir::Operation *op);
/// The `partition` hook of upstream shard-partition for nn ops: the op runs
/// on its local shards when only parallel, splittable loops are split;
/// anything else (a split reduction, a loop that must stay whole, a split
/// dimension that is not one loop) is a located error, never a wrong result.
llvm::LogicalResult partitionLocally(
    mlir::Operation *op, llvm::ArrayRef<mlir::Value> partitionedOperands,
    llvm::ArrayRef<mlir::shard::Sharding> operandShardings,
    llvm::ArrayRef<mlir::shard::Sharding> resultShardings,
    mlir::IRMapping &partitionMap, mlir::SymbolTableCollection &symbolTable,
    mlir::OpBuilder &builder);
} // namespace tessel::nn::detail

namespace tessel::nn {
// Names the generated upstream ShardingInterface declarations use unqualified.
using ::llvm::SmallVector;
using ::mlir::AffineMap;
using ::llvm::ArrayRef;
using ::llvm::LogicalResult;
using ::mlir::IRMapping;
using ::mlir::OpBuilder;
using ::mlir::SymbolTableCollection;
using ::mlir::Value;
using ::mlir::shard::ReductionKind;
using ::mlir::shard::Sharding;

/// custom<OptimizerKind>: the optimizer of nn.optimizer_step as a bare
/// keyword (`adamw`).
mlir::ParseResult parseOptimizerKind(mlir::OpAsmParser &parser,
                                     OptimizerKindAttr &optimizer);
void printOptimizerKind(mlir::OpAsmPrinter &printer, mlir::Operation *op,
                        OptimizerKindAttr optimizer);
/// nn.optimizer_step's scale type for its gradient's: tensor<f64> beside
/// an f64 gradient (f64 states), tensor<f32> otherwise.
mlir::Type updateScalarType(mlir::Type gradType);
/// `value` [d..., C] as its rows [prod(d), C]: every dimension but the last
/// collapsed into one (a weight gradient's GEMM operand).
mlir::Value flattenRows(mlir::OpBuilder &b, mlir::Location loc,
                        mlir::Value value);
} // namespace tessel::nn

#define GET_OP_CLASSES
#include "dialect/NN/NNOps.h.inc"

#endif // TESSEL_DIALECT_NN_NNOPS_H
