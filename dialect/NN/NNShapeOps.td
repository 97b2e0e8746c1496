//===- NNShapeOps.td - reductions and data movement --------*- tablegen -*-===//
//
// Included by NNOps.td after the types and base classes it uses.
//
//===----------------------------------------------------------------------===//

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

class NN_ReduceOp<string mnemonic, list<Trait> traits = [],
                  Trait inferType = InferTypeOpAdaptor>
    : NN_ShardableOp<mnemonic, !listconcat(traits,
        [Pure, inferType, NN_Differentiable])> {
  let arguments = (ins NN_Tensor:$input, DenseI64ArrayAttr:$dims,
                       UnitAttr:$keep_dims);
  let results = (outs NN_Tensor:$result);
  let assemblyFormat = [{
    $input `dims` `=` $dims (`keep_dims` $keep_dims^)? attr-dict `:`
    type($input) `->` type($result)
  }];
  let hasFolder = 1;
}

def NN_ReduceSumOp : NN_ReduceOp<"reduce_sum", [NN_PassesPartialSums],
                                  InferTypeOpAdaptorWithIsCompatible> {
  let summary = "sum over dimensions";
  let description = [{
    Sums over the listed dimensions (unique, in range), dropping them or, with
    `keep_dims`, keeping them with size 1. `N_in - N_out` flops. Reduced
    loops are `sum` reductions: a split one leaves partial sums. The sum of
    an f16 or bf16 tensor may be written in f32 (tessel-fuse-epilogues folds
    its widening into it: a bf16 bias gradient on its way to an f32 bucket
    or buffer, summed without rounding to 16 bits on a GPU).

    ```mlir
    %s = nn.reduce_sum %x dims = [1] : tensor<32x10xf32> -> tensor<32xf32>
    %w = nn.reduce_sum %h dims = [0] : tensor<8x768xbf16> -> tensor<768xf32>
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
