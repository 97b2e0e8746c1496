//===- NNOps.td - the ops of the nn dialect ----------------*- tablegen -*-===//
//
// Every op states its shape rule (verifier / result type inference), its cost
// (CostOpInterface) and its sharding rule (upstream shard::ShardingInterface
// plus ShardingConstraintOpInterface) next to its definition. Cost formulas
// count one flop per arithmetic operation on one element; data movement
// (reshape, transpose, slice, concat, broadcast, gather) costs no flops.
// This file holds the types and base classes; the ops are in the
// NN<Family>Ops.td files it includes at the end.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_DIALECT_NN_NNOPS_TD
#define TESSEL_DIALECT_NN_NNOPS_TD

include "dialect/NN/NNDialect.td"
include "dialect/NN/NNAttrs.td"
include "dialect/NN/NNInterfaces.td"
include "mlir/Dialect/Shard/Interfaces/ShardingInterface.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/DestinationStyleOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/IR/CommonAttrConstraints.td"

//===----------------------------------------------------------------------===//
// Types
//===----------------------------------------------------------------------===//

def NN_FloatElement : AnyTypeOf<[F16, BF16, F32, F64]>;
def NN_IndexElement : AnyTypeOf<[I32, I64]>;
// Static shapes (the memory plan is static) and no encoding: an encoded
// tensor would lose its encoding through type inference.
class NN_TensorOf<list<Type> types> : Type<
    And<[StaticShapeTensorOf<types>.predicate,
         CPred<"!::llvm::cast<::mlir::RankedTensorType>($_self).getEncoding()">]>,
    StaticShapeTensorOf<types>.summary # " without encoding",
    "::mlir::RankedTensorType">;

def NN_FloatTensor : NN_TensorOf<[F16, BF16, F32, F64]>;
def NN_IndexTensor : NN_TensorOf<[I32, I64]>;
def NN_Tensor : NN_TensorOf<[F16, BF16, F32, F64, I32, I64]>;

//===----------------------------------------------------------------------===//
// Base classes
//===----------------------------------------------------------------------===//

// The sharding hooks every op answers. Ops with loops that must stay whole
// also list NN_ShardingConstraintOpInterface.
def NN_UpstreamShardingRule : DeclareOpInterfaceMethods<ShardingInterface,
    ["getLoopIteratorTypes", "getIndexingMaps",
     "getReductionLoopIteratorKinds", "partition"]>;
def NN_LocalShardingConstraints
    : DeclareOpInterfaceMethods<NN_ShardingConstraintOpInterface,
                                ["getUnsplittableLoops"]>;

// Ops whose class or vocabulary dimension can be a rank's block of a larger
// one (`block_axes`, set by the partitioner: VocabParallel.cpp).
def NN_VocabularyBlock
    : DeclareOpInterfaceMethods<NN_ShardingConstraintOpInterface,
                                ["adjustLocalPartition"]>;

// Linear ops, which pass partial sums through (PartialSumOpInterface); the
// default: linear in all operands together. Ops linear in one factor at a
// time say which in passesPartialSums.
def NN_PassesPartialSums : DeclareOpInterfaceMethods<NN_PartialSumOpInterface>;
def NN_PassesPartialSumsOf
    : DeclareOpInterfaceMethods<NN_PartialSumOpInterface, ["passesPartialSums"]>;

// Ops with a reverse-mode derivative (VJPRules.cpp).
def NN_Differentiable : DeclareOpInterfaceMethods<NN_VJPOpInterface>;

class NN_Op<string mnemonic, list<Trait> traits = []>
    : Op<NN_Dialect, mnemonic, !listconcat(traits, [
        DeclareOpInterfaceMethods<NN_CostOpInterface>])>;

// Ops whose rule is given through upstream ShardingInterface.
class NN_ShardableOp<string mnemonic, list<Trait> traits = []>
    : NN_Op<mnemonic, !listconcat(traits, [NN_UpstreamShardingRule])> {
  let extraClassDefinition = [{
    ::llvm::LogicalResult $cppClass::partition(
        ::llvm::ArrayRef<::mlir::Value> partitionedOperands,
        ::llvm::ArrayRef<::mlir::shard::Sharding> operandShardings,
        ::llvm::ArrayRef<::mlir::shard::Sharding> resultShardings,
        ::mlir::IRMapping &partitionMap,
        ::mlir::SymbolTableCollection &symbolTable,
        ::mlir::OpBuilder &builder) {
      return ::tessel::nn::detail::partitionLocally(
          *this, partitionedOperands, operandShardings, resultShardings,
          partitionMap, symbolTable, builder);
    }
  }];
}

// Elementwise ops on one or more tensors of one type: every loop parallel,
// identity indexing maps, `flopsPerElement` flops per result element.
class NN_ElementwiseOp<string mnemonic, int flopsPerElement,
                       list<Trait> traits = []>
    : NN_Op<mnemonic, !listconcat(traits, [Pure, Elementwise,
        SameOperandsAndResultShape, NN_UpstreamShardingRule])> {
  let extraClassDefinition = [{
    int64_t $cppClass::getFlops() {
      return ::tessel::nn::detail::satMul(}] # flopsPerElement # [{,
          ::tessel::nn::detail::numElements(getType()));
    }
    ::llvm::SmallVector<::mlir::utils::IteratorType>
    $cppClass::getLoopIteratorTypes() {
      return ::tessel::nn::detail::parallelLoops(getType().getRank());
    }
    ::llvm::SmallVector<::mlir::AffineMap> $cppClass::getIndexingMaps() {
      return ::tessel::nn::detail::identityMaps(*this);
    }
    ::llvm::SmallVector<::mlir::shard::ReductionKind>
    $cppClass::getReductionLoopIteratorKinds() {
      return {};
    }
    ::llvm::LogicalResult $cppClass::partition(
        ::llvm::ArrayRef<::mlir::Value> partitionedOperands,
        ::llvm::ArrayRef<::mlir::shard::Sharding> operandShardings,
        ::llvm::ArrayRef<::mlir::shard::Sharding> resultShardings,
        ::mlir::IRMapping &partitionMap,
        ::mlir::SymbolTableCollection &symbolTable,
        ::mlir::OpBuilder &builder) {
      return ::tessel::nn::detail::partitionLocally(
          *this, partitionedOperands, operandShardings, resultShardings,
          partitionMap, symbolTable, builder);
    }
  }];
}

class NN_UnaryOp<string mnemonic, int flopsPerElement, list<Trait> traits = []>
    : NN_ElementwiseOp<mnemonic, flopsPerElement,
        !listconcat(traits, [SameOperandsAndResultType, InferTypeOpInterface,
                             NN_Differentiable])> {
  let arguments = (ins NN_FloatTensor:$input);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

class NN_BinaryOp<string mnemonic, list<Trait> traits = []>
    : NN_ElementwiseOp<mnemonic, 1,
        !listconcat(traits, [SameOperandsAndResultType, InferTypeOpInterface,
                             NN_Differentiable])> {
  let arguments = (ins NN_Tensor:$lhs, NN_Tensor:$rhs);
  let results = (outs NN_Tensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($result)";
  let hasFolder = 1;
}

include "dialect/NN/NNElementwiseOps.td"
include "dialect/NN/NNShapeOps.td"
include "dialect/NN/NNLayerOps.td"
include "dialect/NN/NNGradOps.td"
include "dialect/NN/NNTrainingOps.td"

#endif // TESSEL_DIALECT_NN_NNOPS_TD
