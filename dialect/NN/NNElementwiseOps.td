//===- NNElementwiseOps.td - constants, casts, arithmetic -*- tablegen -*-===//
//
// Included by NNOps.td after the types and base classes it uses.
//
//===----------------------------------------------------------------------===//

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

def NN_CastOp : NN_ElementwiseOp<"cast", 1, [SameOperandsAndResultShape, NN_Differentiable,
    NN_PassesPartialSumsOf]> {
  let summary = "convert elements to another element type";
  let description = [{
    Converts every element to the result's element type (f32 ↔ bf16/f16
    rounds to nearest even; int → float exactly where representable).
    One flop per element. A widening float cast (bf16/f16 → f32 → f64) is
    exact, so it passes partial sums: the sum is completed after it, in the
    wider type (mixed precision reduces f32 gradients).

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
    `nn.broadcast`). One flop per element. Folds `x + 0` and `0 + x` to `x`,
    and canonicalizes `x + sub_label(s, labels, v)` to
    `sub_label(x + s, labels, v)` (a label logit's gradient, s zeros, added
    to the others of its logits: no tensor of zeros).

    ```mlir
    %c = nn.add %a, %b : tensor<32x1024xf32>
    ```
  }];
  let hasCanonicalizer = 1;
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
    `x * 1` and `1 * x` to `x`, and canonicalizes `broadcast(x) · c` (c a
    splat) to `broadcast(x · c)`: the product in x's smaller shape.

    ```mlir
    %c = nn.mul %a, %b : tensor<32x1024xf32>
    ```
  }];
  let hasCanonicalizer = 1;
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
