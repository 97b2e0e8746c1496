//===- NNOps.td - the ops of the nn dialect ----------------*- tablegen -*-===//
//
// Every op states its shape rule (verifier / result type inference), its cost
// (CostOpInterface) and its sharding rule (upstream shard::ShardingInterface
// plus ShardingConstraintOpInterface) next to its definition. Cost formulas
// count one flop per arithmetic operation on one element; data movement
// (reshape, transpose, slice, concat, broadcast, gather) costs no flops.
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
      return }] # flopsPerElement # [{ * ::tessel::nn::detail::numElements(getType());
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

//===----------------------------------------------------------------------===//
// Constants and type changes
//===----------------------------------------------------------------------===//

def NN_ConstantOp : NN_ShardableOp<"constant",
    [ConstantLike, Pure, AllTypesMatch<["value", "result"]>,
     DeclareOpInterfaceMethods<NN_ShardingConstraintOpInterface,
                               ["adjustLocalPartition"]>]> {
  let summary = "a constant tensor";
  let description = [{
    A tensor whose value is known at compile time. Costs no flops.

    ```mlir
    %zero = nn.constant dense<0.0> : tensor<4x8xf32>
    ```
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs NN_Tensor:$result);
  let assemblyFormat = "attr-dict $value";
  let hasFolder = 1;
}

def NN_CastOp : NN_ElementwiseOp<"cast", 1, [SameOperandsAndResultShape, NN_Differentiable]> {
  let summary = "convert elements to another element type";
  let description = [{
    Converts every element to the result's element type (f32 ↔ bf16/f16
    rounds to nearest even; int → float exactly where representable).
    One flop per element.

    ```mlir
    %h = nn.cast %x : tensor<4x8xf32> to tensor<4x8xbf16>
    ```
  }];
  let arguments = (ins NN_Tensor:$input);
  let results = (outs NN_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `to` type($result)";
  let hasFolder = 1;
}

def NN_BroadcastOp : NN_ShardableOp<"broadcast", [Pure, NN_Differentiable,
    NN_PassesPartialSums]> {
  let summary = "explicit broadcast of a tensor to a larger shape";
  let description = [{
    Operand dimension `i` becomes result dimension `dims[i]` (strictly
    increasing); its size equals that result dimension or is 1 (then the
    value repeats). Result dimensions not named in `dims` are new. Binary ops
    never broadcast implicitly: a bias add is written with `nn.broadcast`.
    Costs no flops.

    ```mlir
    %bb = nn.broadcast %b dims = [1] : tensor<1024xf32> -> tensor<32x1024xf32>
    ```
  }];
  let arguments = (ins NN_Tensor:$input, DenseI64ArrayAttr:$dims);
  let results = (outs NN_Tensor:$result);
  let assemblyFormat = [{
    $input `dims` `=` $dims attr-dict `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
  let hasFolder = 1;
  let hasCanonicalizer = 1;
}

//===----------------------------------------------------------------------===//
// Elementwise arithmetic
//===----------------------------------------------------------------------===//

def NN_AddOp : NN_BinaryOp<"add", [Commutative, NN_PassesPartialSums]> {
  let summary = "elementwise addition";
  let description = [{
    `lhs + rhs` on operands of the same type (broadcast explicitly with
    `nn.broadcast`). One flop per element. Folds `x + 0` and `0 + x` to `x`.

    ```mlir
    %c = nn.add %a, %b : tensor<32x1024xf32>
    ```
  }];
}

def NN_SubOp : NN_BinaryOp<"sub", [NN_PassesPartialSums]> {
  let summary = "elementwise subtraction";
  let description = [{
    `lhs - rhs` on operands of the same type. One flop per element. Folds
    `x - 0` to `x`.

    ```mlir
    %c = nn.sub %a, %b : tensor<32x1024xf32>
    ```
  }];
}

def NN_MulOp : NN_BinaryOp<"mul", [Commutative, NN_PassesPartialSumsOf]> {
  let summary = "elementwise multiplication";
  let description = [{
    `lhs * rhs` on operands of the same type. One flop per element. Folds
    `x * 1` and `1 * x` to `x`.

    ```mlir
    %c = nn.mul %a, %b : tensor<32x1024xf32>
    ```
  }];
}

def NN_DivOp : NN_BinaryOp<"div", [NN_PassesPartialSumsOf]> {
  let summary = "elementwise division";
  let description = [{
    `lhs / rhs` on operands of the same type. One flop per element. Folds
    `x / 1` to `x`.

    ```mlir
    %c = nn.div %a, %b : tensor<32x1024xf32>
    ```
  }];
}

def NN_NegOp : NN_UnaryOp<"neg", 1, [NN_PassesPartialSums]> {
  let summary = "elementwise negation";
  let description = [{
    `-x`. One flop per element. `neg(neg(x))` folds to `x`.

    ```mlir
    %y = nn.neg %x : tensor<8xf32>
    ```
  }];
  let hasFolder = 1;
}

def NN_ExpOp : NN_UnaryOp<"exp", 1> {
  let summary = "elementwise e^x";
  let description = [{
    One flop per element.

    ```mlir
    %y = nn.exp %x : tensor<8xf32>
    ```
  }];
}

def NN_LogOp : NN_UnaryOp<"log", 1> {
  let summary = "elementwise natural logarithm";
  let description = [{
    One flop per element.

    ```mlir
    %y = nn.log %x : tensor<8xf32>
    ```
  }];
}

def NN_SqrtOp : NN_UnaryOp<"sqrt", 1> {
  let summary = "elementwise square root";
  let description = [{
    One flop per element.

    ```mlir
    %y = nn.sqrt %x : tensor<8xf32>
    ```
  }];
}

def NN_RsqrtOp : NN_UnaryOp<"rsqrt", 2> {
  let summary = "elementwise reciprocal square root";
  let description = [{
    `1 / sqrt(x)`. Two flops per element.

    ```mlir
    %y = nn.rsqrt %x : tensor<8xf32>
    ```
  }];
}

def NN_TanhOp : NN_UnaryOp<"tanh", 1> {
  let summary = "elementwise hyperbolic tangent";
  let description = [{
    One flop per element.

    ```mlir
    %y = nn.tanh %x : tensor<8xf32>
    ```
  }];
}

def NN_SigmoidOp : NN_UnaryOp<"sigmoid", 3> {
  let summary = "elementwise logistic function";
  let description = [{
    `1 / (1 + exp(-x))`. Three flops per element (exp, add, divide).

    ```mlir
    %y = nn.sigmoid %x : tensor<8xf32>
    ```
  }];
}

def NN_ReluOp : NN_UnaryOp<"relu", 1> {
  let summary = "elementwise max(x, 0)";
  let description = [{
    One flop per element.

    ```mlir
    %y = nn.relu %x : tensor<8xf32>
    ```
  }];
}

def NN_GeluOp : NN_UnaryOp<"gelu", 8> {
  let summary = "elementwise Gaussian error linear unit";
  let description = [{
    `x * Φ(x)` with the exact erf form, or with the tanh approximation
    `0.5 x (1 + tanh(√(2/π) (x + 0.044715 x³)))` when `approximate` is set
    (GPT-2, PyTorch's `approximate="tanh"`). Eight flops per element.

    ```mlir
    %y = nn.gelu %x : tensor<8xf32>
    %z = nn.gelu %x approximate : tensor<8xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input, UnitAttr:$approximate);
  let assemblyFormat = [{
    $input (`approximate` $approximate^)? attr-dict `:` type($result)
  }];
}

def NN_SiluOp : NN_UnaryOp<"silu", 4> {
  let summary = "elementwise x * sigmoid(x)";
  let description = [{
    Four flops per element.

    ```mlir
    %y = nn.silu %x : tensor<8xf32>
    ```
  }];
}

def NN_DropoutOp : NN_UnaryOp<"dropout", 2,
    [DeclareOpInterfaceMethods<NN_ShardingConstraintOpInterface,
                               ["adjustLocalPartition"]>]> {
  let summary = "inverted dropout with a counter-based random mask";
  let description = [{
    Zeroes each element with probability `rate` and scales the others by
    `1 / (1 - rate)`. The mask bit of an element is a pure function of
    (`seed`, training step, the element's index in the full, unpartitioned
    tensor), so every partition of the same element draws the same bit and
    any parallel strategy drops exactly what one device drops. Two flops per
    element. `rate = 0` folds to the input. Every loop can split: the
    partitioner's local op records the whole tensor's shape
    (`global_shape`) and the grid axes splitting each dimension
    (`split_axes`, ascending), from which the runtime finds each local
    element's index in the whole tensor (the sequence split of Megatron's
    sequence parallelism, the batch split of data parallelism).

    ```mlir
    %y = nn.dropout %x rate = 0.1 seed = 7 : tensor<32x1024xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input, F64Attr:$rate, I64Attr:$seed,
                       OptionalAttr<DenseI64ArrayAttr>:$global_shape,
                       OptionalAttr<ArrayAttr>:$split_axes);
  let assemblyFormat = [{
    $input `rate` `=` $rate `seed` `=` $seed attr-dict `:` type($result)
  }];
  let hasVerifier = 1;
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

class NN_ReduceOp<string mnemonic, list<Trait> traits = []>
    : NN_ShardableOp<mnemonic, !listconcat(traits,
        [Pure, InferTypeOpAdaptor, NN_Differentiable])> {
  let arguments = (ins NN_Tensor:$input, DenseI64ArrayAttr:$dims,
                       UnitAttr:$keep_dims);
  let results = (outs NN_Tensor:$result);
  let assemblyFormat = [{
    $input `dims` `=` $dims (`keep_dims` $keep_dims^)? attr-dict `:`
    type($input) `->` type($result)
  }];
  let hasFolder = 1;
}

def NN_ReduceSumOp : NN_ReduceOp<"reduce_sum", [NN_PassesPartialSums]> {
  let summary = "sum over dimensions";
  let description = [{
    Sums over the listed dimensions (unique, in range), dropping them or, with
    `keep_dims`, keeping them with size 1. `N_in - N_out` flops. Reduced
    loops are `sum` reductions: a split one leaves partial sums.

    ```mlir
    %s = nn.reduce_sum %x dims = [1] : tensor<32x10xf32> -> tensor<32xf32>
    ```
  }];
}

def NN_ReduceMeanOp : NN_ReduceOp<"reduce_mean"> {
  let summary = "arithmetic mean over dimensions";
  let description = [{
    Like `nn.reduce_sum`, then divides by the number of reduced elements:
    `N_in` flops. A split reduced loop leaves partial means (kind `average`).
    Float tensors only.

    ```mlir
    %m = nn.reduce_mean %x dims = [0, 1] : tensor<32x10xf32> -> tensor<f32>
    ```
  }];
  let hasVerifier = 1;
}

def NN_ReduceMaxOp : NN_ReduceOp<"reduce_max"> {
  let summary = "maximum over dimensions";
  let description = [{
    `N_in - N_out` flops (comparisons). Reduced loops are `max` reductions.

    ```mlir
    %m = nn.reduce_max %x dims = [1] keep_dims : tensor<32x10xf32> -> tensor<32x1xf32>
    ```
  }];
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

def NN_ReshapeOp : NN_ShardableOp<"reshape", [Pure, NN_LocalShardingConstraints, NN_Differentiable,
    NN_PassesPartialSums]> {
  let summary = "same elements, row-major, in another shape";
  let description = [{
    The number of elements and the element type stay the same. The sharding
    rule splits the reshape into groups of dimensions that merge or split
    (e.g. `[b, s, h*d] <-> [b, s, h, d]`); the leading dimension of a split
    or merged group can be split across ranks, the others must stay whole.
    Costs no flops. `reshape(reshape(x))` folds to one reshape and a reshape
    to the same type to `x`.

    ```mlir
    %y = nn.reshape %x : tensor<8x12x64xf32> -> tensor<8x12x4x16xf32>
    ```
  }];
  let arguments = (ins NN_Tensor:$input);
  let results = (outs NN_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def NN_TransposeOp : NN_ShardableOp<"transpose", [Pure, InferTypeOpAdaptor, NN_Differentiable,
    NN_PassesPartialSums]> {
  let summary = "permute dimensions";
  let description = [{
    Result dimension `i` is operand dimension `perm[i]`. Costs no flops.
    The identity permutation folds away; two transposes compose into one.

    ```mlir
    %t = nn.transpose %x perm = [1, 0] : tensor<4x8xf32> -> tensor<8x4xf32>
    ```
  }];
  let arguments = (ins NN_Tensor:$input, DenseI64ArrayAttr:$perm);
  let results = (outs NN_Tensor:$result);
  let assemblyFormat = [{
    $input `perm` `=` $perm attr-dict `:` type($input) `->` type($result)
  }];
  let hasFolder = 1;
}

def NN_SliceOp : NN_ShardableOp<"slice",
    [Pure, InferTypeOpAdaptor, NN_LocalShardingConstraints, NN_Differentiable,
     NN_PassesPartialSums]> {
  let summary = "a strided window of a tensor";
  let description = [{
    Along each dimension takes elements `start, start + stride, …` below
    `limit` (as Python's `x[start:limit:stride]`, with `0 <= start <= limit
    <= size` and `stride >= 1`; `strides` defaults to all ones). Sliced
    dimensions must stay whole when sharding; the others can split. Costs no
    flops. A slice of the whole tensor folds away.

    ```mlir
    %q = nn.slice %qkv start = [0, 0] limit = [8, 64] : tensor<8x192xf32> -> tensor<8x64xf32>
    ```
  }];
  let arguments = (ins NN_Tensor:$input, DenseI64ArrayAttr:$start,
                       DenseI64ArrayAttr:$limit,
                       OptionalAttr<DenseI64ArrayAttr>:$strides);
  let results = (outs NN_Tensor:$result);
  let assemblyFormat = [{
    $input `start` `=` $start `limit` `=` $limit (`strides` `=` $strides^)?
    attr-dict `:` type($input) `->` type($result)
  }];
  let hasFolder = 1;
  let extraClassDeclaration = [{
    /// The strides, all ones when the attribute is absent.
    ::llvm::SmallVector<int64_t> getStridesOrOnes();
  }];
}

def NN_ConcatOp : NN_ShardableOp<"concat",
    [Pure, InferTypeOpAdaptor, NN_LocalShardingConstraints, NN_Differentiable,
     NN_PassesPartialSums]> {
  let summary = "join tensors along one dimension";
  let description = [{
    All inputs have the same rank and element type and agree on every
    dimension but `dim`. The concatenated dimension must stay whole when
    sharding. Costs no flops. A single input folds away.

    ```mlir
    %c = nn.concat %a, %b dim = 1 : (tensor<4x3xf32>, tensor<4x5xf32>) -> tensor<4x8xf32>
    ```
  }];
  let arguments = (ins Variadic<NN_Tensor>:$inputs, I64Attr:$dim);
  let results = (outs NN_Tensor:$result);
  let assemblyFormat = [{
    $inputs `dim` `=` $dim attr-dict `:` functional-type($inputs, $result)
  }];
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Contractions
//===----------------------------------------------------------------------===//

def NN_MatmulOp : NN_ShardableOp<"matmul", [Pure, InferTypeOpAdaptor, NN_Differentiable,
    NN_PassesPartialSumsOf]> {
  let summary = "(batched) matrix product with optional transposes";
  let description = [{
    `lhs` is `[..., M, K]` (`[..., K, M]` with `transpose_lhs`); `rhs` is
    either a matrix `[K, N]` (`[N, K]` with `transpose_rhs`) shared by every
    batch, or has the same leading batch dimensions as `lhs`. The result is
    `[..., M, N]`. Element types match. `2·B·M·N·K` flops (B the product of
    the batch dimensions). Sharding: batch, M and N loops are parallel; K is
    a `sum` reduction (a split K leaves partial sums, as in Megatron's
    row-parallel linear).

    ```mlir
    %h = nn.matmul %x, %w : (tensor<8x128x768xf32>, tensor<768x3072xf32>) -> tensor<8x128x3072xf32>
    %s = nn.matmul %q, %k transpose_rhs : (tensor<8x64x32xf32>, tensor<8x64x32xf32>) -> tensor<8x64x64xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$lhs, NN_FloatTensor:$rhs,
                       UnitAttr:$transpose_lhs, UnitAttr:$transpose_rhs);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs (`transpose_lhs` $transpose_lhs^)?
    (`transpose_rhs` $transpose_rhs^)? attr-dict `:`
    functional-type(operands, results)
  }];
}

def NN_EmbeddingOp : NN_ShardableOp<"embedding", [Pure, InferTypeOpAdaptor, NN_Differentiable,
    NN_VocabularyBlock]> {
  let summary = "look up rows of a table by index";
  let description = [{
    `table` is `[V, H]`, `ids` any integer tensor `[...]` with values in
    `[0, V)`; the result is `[..., H]`. Costs no flops. Sharding: the id and
    H loops are parallel; the vocabulary loop V is a `sum` reduction, the
    one-hot view `onehot(ids) @ table` that makes a vocabulary-parallel
    embedding a lookup of local rows (zero elsewhere) followed by a sum.
    With `block_axes` (set by the partitioner on a rank's local op), the
    table is block `g` of the rows of a table `G` times larger, `g` the
    rank's index in the group of those axes of the module's grid: ids
    index the whole table and an id outside the block gives a zero row.

    ```mlir
    %e = nn.embedding %wte, %tokens : (tensor<50304x768xf32>, tensor<8x1024xi32>) -> tensor<8x1024x768xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$table, NN_IndexTensor:$ids,
                       OptionalAttr<DenseI16ArrayAttr>:$block_axes);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$table `,` $ids attr-dict `:` functional-type(operands, results)";
}

def NN_AttentionOp : NN_ShardableOp<"attention",
    [Pure, InferTypeOpAdaptor, NN_Differentiable,
     DeclareOpInterfaceMethods<NN_ShardingConstraintOpInterface,
                               ["getUnsplittableLoops", "adjustLocalPartition"]>]> {
  let summary = "multi-head scaled dot-product attention";
  let description = [{
    `softmax(q kᵀ · scale [+ causal mask]) v` per batch and head, with
    `q: [B, S, H, D]`, `k: [B, T, Hkv, D]`, `v: [B, T, Hkv, E]` and result
    `[B, S, H, E]`. `Hkv` divides `H` (grouped-query attention; query head
    `h` reads key/value head `h / (H / Hkv)`). `scale` defaults to
    `1/sqrt(D)`. With `causal`, `S == T` and query `i` sees keys `0..i`.
    Flops: `2·B·H·S·T·D + 5·B·H·S·T + 2·B·H·S·T·E` (dense count; causal
    kernels may skip the masked half). Sharding: B, S, H and E loops are
    parallel (heads split in Megatron's tensor parallelism); the key loop T
    and the head dimension D must stay whole.

    ```mlir
    %o = nn.attention %q, %k, %v causal : (tensor<8x128x12x64xf32>, tensor<8x128x12x64xf32>, tensor<8x128x12x64xf32>) -> tensor<8x128x12x64xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$query, NN_FloatTensor:$key,
                       NN_FloatTensor:$value, UnitAttr:$causal,
                       OptionalAttr<F64Attr>:$scale);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $query `,` $key `,` $value (`causal` $causal^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Normalisations
//===----------------------------------------------------------------------===//

def NN_SoftmaxOp : NN_ShardableOp<"softmax",
    [Pure, SameOperandsAndResultType, InferTypeOpInterface,
     NN_LocalShardingConstraints, NN_Differentiable]> {
  let summary = "softmax along one dimension";
  let description = [{
    `exp(x - max) / sum(exp(x - max))` along `dim` (default: the last; a
    negative value counts from the end). `5` flops per element. The softmax
    dimension must stay whole when sharding.

    ```mlir
    %p = nn.softmax %x : tensor<8x10xf32>
    %q = nn.softmax %x {dim = 0 : i64} : tensor<8x10xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input,
                       DefaultValuedAttr<I64Attr, "-1">:$dim);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// `dim` counted from the front.
    int64_t getNormalizedDim();
  }];
}

def NN_LayerNormOp : NN_ShardableOp<"layer_norm",
    [Pure, InferTypeOpAdaptor, NN_LocalShardingConstraints, NN_Differentiable]> {
  let summary = "layer normalisation over the last dimension";
  let description = [{
    `(x - mean) / sqrt(var + epsilon) * gamma + beta` over the last
    dimension `H` of `x`; `gamma` and `beta` are `[H]`. `8` flops per element.
    The normalised dimension must stay whole when sharding (Megatron's
    sequence parallelism splits the sequence instead).

    ```mlir
    %y = nn.layer_norm %x, %g, %b : (tensor<8x128x768xf32>, tensor<768xf32>, tensor<768xf32>) -> tensor<8x128x768xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input, NN_FloatTensor:$gamma,
                       NN_FloatTensor:$beta,
                       DefaultValuedAttr<F64Attr, "1e-5">:$epsilon);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $gamma `,` $beta attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The sharding rule it shares with the other norms (NormRules.h).
    ::tessel::nn::detail::NormShardingRule getNormShardingRule();
  }];
}

def NN_RmsNormOp : NN_ShardableOp<"rms_norm",
    [Pure, InferTypeOpAdaptor, NN_LocalShardingConstraints, NN_Differentiable]> {
  let summary = "root-mean-square normalisation over the last dimension";
  let description = [{
    `x / sqrt(mean(x²) + epsilon) * gamma` over the last dimension `H`;
    `gamma` is `[H]`. `4` flops per element. The normalised dimension must
    stay whole when sharding.

    ```mlir
    %y = nn.rms_norm %x, %g {epsilon = 1.0e-06 : f64} : (tensor<8x128x768xf32>, tensor<768xf32>) -> tensor<8x128x768xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input, NN_FloatTensor:$gamma,
                       DefaultValuedAttr<F64Attr, "1e-6">:$epsilon);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $gamma attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The sharding rule it shares with the other norms (NormRules.h).
    ::tessel::nn::detail::NormShardingRule getNormShardingRule();
  }];
}

def NN_BatchNormOp : NN_ShardableOp<"batch_norm",
    [Pure, InferTypeOpAdaptor, NN_Differentiable,
     DeclareOpInterfaceMethods<NN_ShardingConstraintOpInterface,
                               ["adjustLocalPartition"]>]> {
  let summary = "batch normalisation with batch statistics (training)";
  let description = [{
    Normalises every feature (dimension `feature_dim`, default 1 as in
    PyTorch's `[N, C, ...]`) with the mean and biased variance over all other
    dimensions, then scales by `gamma` and shifts by `beta` (both `[C]`).
    `8` flops per element. Every loop can split: a split of the statistics
    dimensions (the batch under data parallelism) is SyncBatchNorm, one
    all-reduce of the per-feature sum and sum of squares, or per-rank
    statistics under `tessel-partition{local-batchnorm}` (PyTorch's plain
    BatchNorm under DDP).

    ```mlir
    %y = nn.batch_norm %x, %g, %b : (tensor<32x256xf32>, tensor<256xf32>, tensor<256xf32>) -> tensor<32x256xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input, NN_FloatTensor:$gamma,
                       NN_FloatTensor:$beta,
                       DefaultValuedAttr<I64Attr, "1">:$feature_dim,
                       DefaultValuedAttr<F64Attr, "1e-5">:$epsilon);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $gamma `,` $beta attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The sharding rule it shares with the other norms (NormRules.h).
    ::tessel::nn::detail::NormShardingRule getNormShardingRule();
  }];
}

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

def NN_CrossEntropyOp : NN_ShardableOp<"cross_entropy",
    [Pure, InferTypeOpAdaptor, NN_Differentiable,
     DeclareOpInterfaceMethods<NN_ShardingConstraintOpInterface,
                               ["adjustLocalPartition"]>]> {
  let summary = "softmax cross-entropy of logits against integer labels";
  let description = [{
    `logsumexp(logits[i, :]) - logits[i, labels[i]]` for every position `i`
    of `logits: [..., V]` and `labels: [...]` (integers in `[0, V)`), then
    reduced by `reduction`: `mean` (default) or `sum` give a scalar, `none`
    keeps `[...]`. Flops: `4·N + 2·R` with `N` logits and `R` positions.
    Sharding: position loops are parallel (`none`) or `average`/`sum`
    reductions; a split vocabulary loop is Megatron's vocabulary-parallel
    cross-entropy (VocabParallel.cpp): each rank's row maximum, sum of
    exponentials and label logit over its block of classes, each completed
    by an all-reduce of one value per position.

    ```mlir
    %l = nn.cross_entropy %logits, %labels : (tensor<8x128x50304xf32>, tensor<8x128xi32>) -> tensor<f32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$logits, NN_IndexTensor:$labels,
      DefaultValuedAttr<NN_LossReductionAttr, "LossReduction::mean">:$reduction);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $logits `,` $labels attr-dict `:` functional-type(operands, results)
  }];
}

def NN_LabelLogitOp : NN_ShardableOp<"label_logit",
    [Pure, InferTypeOpAdaptor, NN_VocabularyBlock]> {
  let summary = "the logit of each position's label";
  let description = [{
    `result[i] = logits[i, labels[i]]` for `logits: [..., V]` and integer
    `labels: [...]` in `[0, V)`; the result is `[...]` of the logits'
    element type. Costs no flops. Sharding: position loops are parallel,
    the class loop a `sum` reduction (the one-hot view): with `block_axes`
    (as `nn.embedding`) the logits are the rank's block of the classes and
    a label outside it picks 0, so the blocks sum to the label's logit. The
    vocabulary-parallel cross-entropy is built from it.

    ```mlir
    %p = nn.label_logit %logits, %labels : (tensor<8x128x50304xf32>, tensor<8x128xi32>) -> tensor<8x128xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$logits, NN_IndexTensor:$labels,
                       OptionalAttr<DenseI16ArrayAttr>:$block_axes);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $logits `,` $labels attr-dict `:` functional-type(operands, results)
  }];
}

def NN_SubLabelOp : NN_ShardableOp<"sub_label",
    [Pure, InferTypeOpAdaptor, NN_VocabularyBlock]> {
  let summary = "subtract a value at each position's label";
  let description = [{
    `result = input − onehot(labels) · values`: `input: [..., V]`, integer
    `labels: [...]` in `[0, V)` and `values: [...]` of the input's element
    type; one flop per position. Every loop is parallel: with `block_axes`
    (as `nn.embedding`) the input is the rank's block of the classes and a
    label outside it changes nothing. The gradient of the
    vocabulary-parallel cross-entropy, `g · (softmax − onehot)`, ends with
    it.

    ```mlir
    %d = nn.sub_label %p, %labels, %g : (tensor<8x128x50304xf32>, tensor<8x128xi32>, tensor<8x128xf32>) -> tensor<8x128x50304xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input, NN_IndexTensor:$labels,
                       NN_FloatTensor:$values,
                       OptionalAttr<DenseI16ArrayAttr>:$block_axes);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $labels `,` $values attr-dict `:`
    functional-type(operands, results)
  }];
}

//===----------------------------------------------------------------------===//
// Backward ops (built by the VJP rules; shapes and attributes mirror the
// forward op of the same name)
//===----------------------------------------------------------------------===//

// dx = dy · f'(x) for an elementwise activation f.
class NN_ActivationGradOp<string mnemonic, int flopsPerElement,
                          list<Trait> traits = []>
    : NN_ElementwiseOp<mnemonic, flopsPerElement,
        !listconcat(traits, [SameOperandsAndResultType, InferTypeOpInterface])> {
  let arguments = (ins NN_FloatTensor:$x, NN_FloatTensor:$dy);
  let results = (outs NN_FloatTensor:$dx);
  let assemblyFormat = "$x `,` $dy attr-dict `:` type($dx)";
}

def NN_GeluGradOp : NN_ActivationGradOp<"gelu_grad", 12> {
  let summary = "gradient of nn.gelu";
  let description = [{
    `dx = dy · gelu'(x)` from the forward input `x`, with the exact erf form
    or, with `approximate`, the tanh form (as the `nn.gelu` it differentiates).
    Twelve flops per element (Φ(x) and x·φ(x), their sum, the product with
    dy).

    ```mlir
    %dx = nn.gelu_grad %x, %dy approximate : tensor<8x16xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$x, NN_FloatTensor:$dy,
                       UnitAttr:$approximate);
  let assemblyFormat = [{
    $x `,` $dy (`approximate` $approximate^)? attr-dict `:` type($dx)
  }];
}

def NN_SiluGradOp : NN_ActivationGradOp<"silu_grad", 8> {
  let summary = "gradient of nn.silu";
  let description = [{
    `dx = dy · s · (1 + x · (1 - s))` with `s = sigmoid(x)`, from the forward
    input `x`. Eight flops per element.

    ```mlir
    %dx = nn.silu_grad %x, %dy : tensor<8x16xf32>
    ```
  }];
}

def NN_ReluGradOp : NN_ActivationGradOp<"relu_grad", 1> {
  let summary = "gradient of nn.relu";
  let description = [{
    `dx = x > 0 ? dy : 0` (PyTorch's threshold_backward: 0 at x = 0), from
    the forward input `x`. One flop (a select) per element.

    ```mlir
    %dx = nn.relu_grad %x, %dy : tensor<8x16xf32>
    ```
  }];
}

def NN_EqualOp : NN_ElementwiseOp<"equal", 1,
    [Commutative, SameOperandsAndResultType, InferTypeOpInterface]> {
  let summary = "elementwise equality as 1 or 0";
  let description = [{
    `1` where `lhs == rhs`, `0` elsewhere, in the operands' own type (float
    or integer), so a mask multiplies directly (e.g. the gradient of
    `reduce_max` routes `dy` to the maxima). NaN equals nothing. One flop per
    element.

    ```mlir
    %m = nn.equal %x, %xmax : tensor<8x16xf32>
    ```
  }];
  let arguments = (ins NN_Tensor:$lhs, NN_Tensor:$rhs);
  let results = (outs NN_Tensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($result)";
}

def NN_SoftmaxGradOp : NN_ShardableOp<"softmax_grad",
    [Pure, SameOperandsAndResultType, InferTypeOpInterface,
     NN_LocalShardingConstraints]> {
  let summary = "gradient of nn.softmax from its output";
  let description = [{
    `dx = y ⊙ (dy − Σ_dim dy ⊙ y)` along `dim` (default the last; negative
    counts from the end), where `y` is the softmax's output. `4` flops per
    element. The softmax dimension must stay whole when sharding.

    ```mlir
    %dx = nn.softmax_grad %y, %dy {dim = 0 : i64} : tensor<8x10xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$y, NN_FloatTensor:$dy,
                       DefaultValuedAttr<I64Attr, "-1">:$dim);
  let results = (outs NN_FloatTensor:$dx);
  let assemblyFormat = "$y `,` $dy attr-dict `:` type($dx)";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// `dim` counted from the front.
    int64_t getNormalizedDim();
  }];
}

def NN_LayerNormGradOp : NN_ShardableOp<"layer_norm_grad",
    [Pure, InferTypeOpAdaptor, NN_LocalShardingConstraints]> {
  let summary = "gradient of nn.layer_norm";
  let description = [{
    From the forward input `x`, `gamma` and the output gradient `dy` (the
    type of `x`), recomputes the statistics and returns `dx` (the type of
    `x`), `dgamma = Σ_rows dy ⊙ x̂` and `dbeta = Σ_rows dy` (the type of
    `gamma`). `15` flops per element of `x`. Loops are the forward's; the
    row loops are `sum` reductions for `dgamma` and `dbeta`, the normalised
    dimension must stay whole.

    ```mlir
    %dx, %dg, %db = nn.layer_norm_grad %x, %g, %dy : (tensor<8x768xf32>, tensor<768xf32>, tensor<8x768xf32>) -> (tensor<8x768xf32>, tensor<768xf32>, tensor<768xf32>)
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input, NN_FloatTensor:$gamma,
                       NN_FloatTensor:$dy,
                       DefaultValuedAttr<F64Attr, "1e-5">:$epsilon);
  let results = (outs NN_FloatTensor:$dx, NN_FloatTensor:$dgamma,
                      NN_FloatTensor:$dbeta);
  let assemblyFormat = [{
    $input `,` $gamma `,` $dy attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The sharding rule it shares with the other norms (NormRules.h).
    ::tessel::nn::detail::NormShardingRule getNormShardingRule();
  }];
}

def NN_RmsNormGradOp : NN_ShardableOp<"rms_norm_grad",
    [Pure, InferTypeOpAdaptor, NN_LocalShardingConstraints]> {
  let summary = "gradient of nn.rms_norm";
  let description = [{
    From the forward input `x`, `gamma` and `dy` (the type of `x`),
    recomputes the statistics and returns `dx` (the type of `x`) and
    `dgamma = Σ_rows dy ⊙ x̂` (the type of `gamma`). `11` flops per element
    of `x`. Loops as `nn.layer_norm_grad`.

    ```mlir
    %dx, %dg = nn.rms_norm_grad %x, %g, %dy : (tensor<8x768xf32>, tensor<768xf32>, tensor<8x768xf32>) -> (tensor<8x768xf32>, tensor<768xf32>)
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input, NN_FloatTensor:$gamma,
                       NN_FloatTensor:$dy,
                       DefaultValuedAttr<F64Attr, "1e-6">:$epsilon);
  let results = (outs NN_FloatTensor:$dx, NN_FloatTensor:$dgamma);
  let assemblyFormat = [{
    $input `,` $gamma `,` $dy attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The sharding rule it shares with the other norms (NormRules.h).
    ::tessel::nn::detail::NormShardingRule getNormShardingRule();
  }];
}

def NN_BatchNormGradOp : NN_ShardableOp<"batch_norm_grad",
    [Pure, InferTypeOpAdaptor,
     DeclareOpInterfaceMethods<NN_ShardingConstraintOpInterface,
                               ["adjustLocalPartition"]>]> {
  let summary = "gradient of nn.batch_norm (batch statistics)";
  let description = [{
    The full training-mode backward of `nn.batch_norm` (through the batch
    mean and variance): from `x`, `gamma` and `dy` (the type of `x`) returns
    `dx` (the type of `x`), `dgamma` and `dbeta` (the type of `gamma`).
    `15` flops per element of `x`. The statistics loops are `sum`
    reductions for `dgamma` and `dbeta`; split, SyncBatchNorm all-reduces
    the statistics and `dgamma`, `dbeta` (which `dx` needs whole), or, with
    per-rank statistics, `dgamma` and `dbeta` stay partial sums.

    ```mlir
    %dx, %dg, %db = nn.batch_norm_grad %x, %g, %dy : (tensor<32x256xf32>, tensor<256xf32>, tensor<32x256xf32>) -> (tensor<32x256xf32>, tensor<256xf32>, tensor<256xf32>)
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input, NN_FloatTensor:$gamma,
                       NN_FloatTensor:$dy,
                       DefaultValuedAttr<I64Attr, "1">:$feature_dim,
                       DefaultValuedAttr<F64Attr, "1e-5">:$epsilon);
  let results = (outs NN_FloatTensor:$dx, NN_FloatTensor:$dgamma,
                      NN_FloatTensor:$dbeta);
  let assemblyFormat = [{
    $input `,` $gamma `,` $dy attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The sharding rule it shares with the other norms (NormRules.h).
    ::tessel::nn::detail::NormShardingRule getNormShardingRule();
  }];
}

def NN_CrossEntropyGradOp : NN_ShardableOp<"cross_entropy_grad",
    [Pure, InferTypeOpAdaptor,
     DeclareOpInterfaceMethods<NN_ShardingConstraintOpInterface,
                               ["adjustLocalPartition"]>]> {
  let summary = "gradient of nn.cross_entropy with respect to the logits";
  let description = [{
    `dlogits[i, :] = g_i · (softmax(logits[i, :]) − onehot(labels[i]))` with
    `g_i = dloss / R` (`mean`, R positions), `dloss` (`sum`) or `dloss[i]`
    (`none`); `dloss` has the forward loss's type (a scalar of the logits'
    element type, or the labels' shape for `none`). Flops: `6·N + R` with
    `N` logits. Every loop is parallel: a split `mean` rescales `dloss` by
    the local share of the positions; a split class loop all-reduces the
    row maximum and sum of exponentials over the class blocks
    (vocabulary-parallel cross-entropy).

    ```mlir
    %dz = nn.cross_entropy_grad %z, %y, %dl : (tensor<32x10xf32>, tensor<32xi32>, tensor<f32>) -> tensor<32x10xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$logits, NN_IndexTensor:$labels,
      NN_FloatTensor:$dloss,
      DefaultValuedAttr<NN_LossReductionAttr, "LossReduction::mean">:$reduction);
  let results = (outs NN_FloatTensor:$dlogits);
  let assemblyFormat = [{
    $logits `,` $labels `,` $dloss attr-dict `:` functional-type(operands, results)
  }];
}

def NN_EmbeddingGradOp : NN_ShardableOp<"embedding_grad",
    [Pure, NN_VocabularyBlock]> {
  let summary = "gradient of nn.embedding with respect to the table";
  let description = [{
    Scatter-add: `dtable[r, :] = Σ_{i : ids[i] = r} dout[i, :]` (zero rows
    for ids that never occur). `dout` is `ids`' shape followed by `[H]`; the
    result `[V, H]` (its type gives the vocabulary size V) has `dout`'s
    element type. One flop per element of `dout`. Sharding: the id loops
    are `sum` reductions (a split leaves partial tables), H and the
    vocabulary loop are parallel. With `block_axes` (as `nn.embedding`) the
    result is the block of rows of the rank: ids outside it are skipped.

    ```mlir
    %dw = nn.embedding_grad %tokens, %de : (tensor<8x128xi32>, tensor<8x128x768xf32>) -> tensor<50304x768xf32>
    ```
  }];
  let arguments = (ins NN_IndexTensor:$ids, NN_FloatTensor:$dout,
                       OptionalAttr<DenseI16ArrayAttr>:$block_axes);
  let results = (outs NN_FloatTensor:$dtable);
  let assemblyFormat = "$ids `,` $dout attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def NN_AttentionGradOp : NN_ShardableOp<"attention_grad",
    [Pure, InferTypeOpAdaptor, NN_LocalShardingConstraints]> {
  let summary = "gradient of nn.attention";
  let description = [{
    From `q`, `k`, `v` and `dout` (the forward result's type), recomputes the
    probabilities and returns `dq`, `dk`, `dv` (the types of `q`, `k`, `v`;
    with grouped-query heads the key/value gradients sum over the query
    heads that share them). `causal` and `scale` as the forward. Flops:
    `6·B·H·S·T·D + 4·B·H·S·T·E + 8·B·H·S·T` (the forward's scores and
    softmax again, then dV, dP, the softmax backward, dQ and dK). Loops are
    the forward's; batch and heads can split, S, T, D and E must stay whole
    (each is a reduction for some of the three gradients).

    ```mlir
    %dq, %dk, %dv = nn.attention_grad %q, %k, %v, %do causal : (tensor<2x16x4x8xf32>, tensor<2x16x4x8xf32>, tensor<2x16x4x8xf32>, tensor<2x16x4x8xf32>) -> (tensor<2x16x4x8xf32>, tensor<2x16x4x8xf32>, tensor<2x16x4x8xf32>)
    ```
  }];
  let arguments = (ins NN_FloatTensor:$query, NN_FloatTensor:$key,
                       NN_FloatTensor:$value, NN_FloatTensor:$dout,
                       UnitAttr:$causal, OptionalAttr<F64Attr>:$scale);
  let results = (outs NN_FloatTensor:$dquery, NN_FloatTensor:$dkey,
                      NN_FloatTensor:$dvalue);
  let assemblyFormat = [{
    $query `,` $key `,` $value `,` $dout (`causal` $causal^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def NN_SliceGradOp : NN_ShardableOp<"slice_grad",
    [Pure, NN_LocalShardingConstraints]> {
  let summary = "gradient of nn.slice: dy placed into zeros";
  let description = [{
    A tensor of the result type (the sliced tensor's type) that is zero
    except at the strided window `start, start + stride, … < limit`, which
    holds `dy`: the exact inverse placement of `nn.slice` with the same
    attributes (slicing the result with them gives `dy`'s type). Costs no
    flops. Loops are `dy`'s, as the forward's; sliced dimensions must stay
    whole.

    ```mlir
    %dx = nn.slice_grad %dq start = [0, 0] limit = [8, 64] : tensor<8x64xf32> -> tensor<8x192xf32>
    ```
  }];
  let arguments = (ins NN_Tensor:$dy, DenseI64ArrayAttr:$start,
                       DenseI64ArrayAttr:$limit,
                       OptionalAttr<DenseI64ArrayAttr>:$strides);
  let results = (outs NN_Tensor:$dx);
  let assemblyFormat = [{
    $dy `start` `=` $start `limit` `=` $limit (`strides` `=` $strides^)?
    attr-dict `:` type($dy) `->` type($dx)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The strides, all ones when the attribute is absent.
    ::llvm::SmallVector<int64_t> getStridesOrOnes();
  }];
}

//===----------------------------------------------------------------------===//
// Training ops (the update step)
//===----------------------------------------------------------------------===//

// tensor<f32>: the device scalars of the update step.
def NN_F32Scalar : Type<
    And<[NN_TensorOf<[F32]>.predicate,
         CPred<"::llvm::cast<::mlir::RankedTensorType>($_self).getRank() == 0">]>,
    "tensor<f32>", "::mlir::RankedTensorType">,
    BuildableType<"::mlir::RankedTensorType::get({}, $_builder.getF32Type())">;

def NN_SumSquaresOp : NN_ShardableOp<"sum_squares",
    [Pure, DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "sum of the squares of every element of float tensors";
  let description = [{
    `Σ x²` over every element of every operand, in f32 (the pieces of a
    global gradient norm). Two flops per element. Every loop (the operands'
    dimensions, one after the other) is a `sum` reduction.

    ```mlir
    %ss = nn.sum_squares %g1, %g2 : (tensor<8x16xf32>, tensor<16xbf16>) -> tensor<f32>
    ```
  }];
  let arguments = (ins Variadic<NN_FloatTensor>:$inputs);
  let results = (outs NN_F32Scalar:$result);
  let assemblyFormat = "$inputs attr-dict `:` functional-type($inputs, $result)";
  let hasVerifier = 1;
}

def NN_ClipScaleOp : NN_ShardableOp<"clip_scale",
    [Pure, SameOperandsAndResultType, InferTypeOpInterface]> {
  let summary = "the gradient factor of global-norm clipping";
  let description = [{
    With `g = grad_scale` and `ss = sum_squares` (of the unscaled
    gradients), `scale = min(1, max_norm / (sqrt(ss) · g + 1e-6)) · g`, or
    `g` when `max_norm <= 0` (no clipping): the clipping sees the norm of
    the scaled gradient, as torch.nn.utils.clip_grad_norm_ after `loss / M`.
    Six flops.

    ```mlir
    %scale = nn.clip_scale %ss, %gs {max_norm = 1.0 : f64} : tensor<f32>
    ```
  }];
  let arguments = (ins NN_F32Scalar:$sum_squares, NN_F32Scalar:$grad_scale,
                       DefaultValuedAttr<F64Attr, "1.0">:$max_norm);
  let results = (outs NN_F32Scalar:$result);
  let assemblyFormat = "$sum_squares `,` $grad_scale attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def NN_OptimizerStepOp : NN_ShardableOp<"optimizer_step",
    [Pure, InferTypeOpAdaptor, DestinationStyleOpInterface]> {
  let summary = "one optimizer update of a parameter and its state";
  let description = [{
    Updates `outs = (param, states...)` in place (destination style: result
    `i` is `outs[i]` updated) from `grad` (the parameter's type) times the
    device scalar `scale`, as torch.optim.SGD / Adam / AdamW do: `sgd`
    (with `momentum`, dampening 0, optionally `nesterov`), `adam` (L2
    `weight_decay` added to the gradient), `adamw` (decoupled weight decay).
    States are f32 in the parameter's shape: none for SGD without momentum,
    the momentum buffer for SGD with momentum, `m` and `v` for Adam(W).
    The learning rate of 1-based step `t` (the runtime's step + 1) follows
    `schedule`: `constant`, or `warmup_cosine` (linear warm-up over
    `warmup` steps, then cosine to `min_lr` at `total_steps`).
    Flops per element: 1 (scale) + 2 (weight decay, when nonzero) + for SGD
    2 (update), 2 (momentum), 2 (Nesterov); for Adam(W) 3 (m) + 4 (v) + 7
    (update). All loops are parallel.

    ```mlir
    %p2, %m2, %v2 = nn.optimizer_step adamw %g, %scale outs(%p, %m, %v : tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>) {lr = 3.0e-4 : f64} : tensor<8x16xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$grad, NN_F32Scalar:$scale,
      Variadic<NN_FloatTensor>:$outs,
      DefaultValuedAttr<NN_OptimizerKindAttr, "OptimizerKind::adamw">:$optimizer,
      DefaultValuedAttr<F64Attr, "1e-3">:$lr,
      DefaultValuedAttr<F64Attr, "0.9">:$beta1,
      DefaultValuedAttr<F64Attr, "0.999">:$beta2,
      DefaultValuedAttr<F64Attr, "1e-8">:$eps,
      DefaultValuedAttr<F64Attr, "0.0">:$weight_decay,
      DefaultValuedAttr<F64Attr, "0.0">:$momentum,
      DefaultValuedAttr<NN_LrScheduleAttr, "LrSchedule::constant">:$schedule,
      DefaultValuedAttr<I64Attr, "0">:$warmup,
      DefaultValuedAttr<F64Attr, "0.0">:$min_lr,
      DefaultValuedAttr<I64Attr, "0">:$total_steps,
      UnitAttr:$nesterov);
  let results = (outs Variadic<NN_FloatTensor>:$results);
  let assemblyFormat = [{
    custom<OptimizerKind>($optimizer) $grad `,` $scale
    `outs` `(` $outs `:` type($outs) `)` attr-dict `:` type($grad)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::mlir::MutableOperandRange getDpsInitsMutable() { return getOutsMutable(); }
    /// The parameter (the first of the outs) and its optimizer states.
    ::mlir::Value getParam() { return getOuts().front(); }
    ::mlir::OperandRange getStates() { return getOuts().drop_front(); }
    /// How many states `optimizer` (with `momentum`) keeps per parameter.
    static int64_t getNumStates(OptimizerKind optimizer, double momentum);
  }];
}

def NN_AccumulateOp : NN_ShardableOp<"accumulate",
    [Pure, SameOperandsAndResultType, InferTypeOpInterface,
     DestinationStyleOpInterface]> {
  let summary = "add into an accumulator in place";
  let description = [{
    `acc + value`, written in place into `acc` (destination style: the one
    init). Gradient accumulation over microbatches. One flop per element;
    all loops parallel.

    ```mlir
    %acc2 = nn.accumulate %g outs(%acc) : tensor<8x16xf32>
    ```
  }];
  let arguments = (ins NN_Tensor:$value, NN_Tensor:$acc);
  let results = (outs NN_Tensor:$result);
  let assemblyFormat = "$value `outs` `(` $acc `)` attr-dict `:` type($result)";
  let extraClassDeclaration = [{
    ::mlir::MutableOperandRange getDpsInitsMutable() { return getAccMutable(); }
  }];
}

//===----------------------------------------------------------------------===//
// Repeated layers
//===----------------------------------------------------------------------===//

def NN_RepeatOp : NN_Op<"repeat", [Pure,
    AttrSizedOperandSegments,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>,
    DeclareOpInterfaceMethods<NN_CostOpInterface, ["getBytesAccessed"]>]> {
  let summary = "apply a layer function L times over stacked parameters";
  let description = [{
    Runs `layer` L times, threading the `carried` values (the activations)
    from one application to the next, as JAX's `scan`. Each of `params` is
    stacked on a leading layer axis of size L; application `l` receives
    slice `l` of every stacked parameter. The layer function takes the
    carried values followed by one parameter slice each, and returns new
    carried values of the same types, optionally followed by per-layer
    outputs that the repeat stacks on a new leading axis of size L (JAX's
    `ys`; autodiff uses them to keep each layer's activations). With
    `reverse` the layers run from L − 1 down to 0 (the backward of a
    repeat). A 48-layer model is as short as a 1-layer one, and pipeline
    parallelism splits the layer axis.

    Cost: L times the summed cost of the layer's body. The sharding rule is
    the layer body's: propagation and partitioning look inside `layer`.

    ```mlir
    func.func private @block(%h: tensor<8x768xf32>, %w: tensor<768x768xf32>) -> tensor<8x768xf32> {
      %y = nn.matmul %h, %w : (tensor<8x768xf32>, tensor<768x768xf32>) -> tensor<8x768xf32>
      return %y : tensor<8x768xf32>
    }
    ...
    %out = nn.repeat @block(%h) params(%w_stacked) : (tensor<8x768xf32>, tensor<12x768x768xf32>) -> tensor<8x768xf32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$layer, Variadic<NN_Tensor>:$carried,
                       Variadic<NN_Tensor>:$params, UnitAttr:$reverse);
  let results = (outs Variadic<NN_Tensor>:$results);
  let assemblyFormat = [{
    $layer `(` $carried `)` `params` `(` $params `)` (`reverse` $reverse^)?
    attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// L, the size of the stacked parameters' leading axis.
    int64_t getNumLayers();
    /// The final carried values (the first results).
    ::mlir::ResultRange getCarriedResults() {
      return getResults().take_front(getCarried().size());
    }
    /// The per-layer outputs, stacked on a leading axis of size L.
    ::mlir::ResultRange getStackedResults() {
      return getResults().drop_front(getCarried().size());
    }
    /// The layer function, or null when the symbol does not resolve.
    ::mlir::func::FuncOp getLayerFunction();
  }];
}

#endif // TESSEL_DIALECT_NN_NNOPS_TD
