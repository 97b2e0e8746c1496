//===- NNGradOps.td - backward ops the VJP rules build -----*- tablegen -*-===//
//
// Included by NNOps.td after the types and base classes it uses.
//
//===----------------------------------------------------------------------===//

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
    [Pure, InferTypeOpAdaptorWithIsCompatible, NN_LocalShardingConstraints]> {
  let summary = "gradient of nn.layer_norm";
  let description = [{
    From the forward input `x`, `gamma` and the output gradient `dy` (the
    type of `x`), recomputes the statistics and returns `dx` (the type of
    `x`), `dgamma = Σ_rows dy ⊙ x̂` and `dbeta = Σ_rows dy` (the type of
    `gamma`, or both f32 for an f16/bf16 `gamma`: the column sums written
    unrounded, as f32 gradients of 16-bit parameters want them;
    `tessel-fuse-epilogues` folds their widening casts into the op). `15`
    flops per element of `x`. Loops are the forward's; the row loops are
    `sum` reductions for `dgamma` and `dbeta`, the normalised dimension
    must stay whole.

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
    [Pure, InferTypeOpAdaptorWithIsCompatible, NN_LocalShardingConstraints]> {
  let summary = "gradient of nn.rms_norm";
  let description = [{
    From the forward input `x`, `gamma` and `dy` (the type of `x`),
    recomputes the statistics and returns `dx` (the type of `x`) and
    `dgamma = Σ_rows dy ⊙ x̂` (the type of `gamma`, or f32 for an f16/bf16
    `gamma`, as `nn.layer_norm_grad`). `11` flops per element of `x`. Loops
    as `nn.layer_norm_grad`.

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

def NN_NormGradAddOp : NN_Op<"norm_grad_add",
    [Pure, InferTypeOpAdaptorWithIsCompatible]> {
  let summary = "a layer or RMS norm's gradient added to a residual gradient";
  let description = [{
    `dx = residual + dx'` with `dx'` the input gradient of
    `nn.layer_norm_grad` (or `nn.rms_norm_grad` with `rms`) of `input`,
    `gamma` and `dy`, and that op's parameter gradients: `dgamma`, and
    `dbeta` for layer norm, in `gamma`'s type or f32 as that op's.
    `residual` has the input's type: the gradient the residual stream
    carries past the norm. `tessel-fuse-epilogues` makes it from the
    norm's gradient and the `nn.add` of its `dx` (the only use), so the row
    pass adds as it writes instead of a second pass. `dx'` is rounded to the element type before the add, as the two ops
    do. Flops: the gradient's (15 or 11) and one per element.

    ```mlir
    %dx, %dg, %db = nn.norm_grad_add %x, %g, %dy, %dres {epsilon = 1.0e-05 : f64} : (tensor<8x768xf32>, tensor<768xf32>, tensor<8x768xf32>, tensor<8x768xf32>) -> (tensor<8x768xf32>, tensor<768xf32>, tensor<768xf32>)
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input, NN_FloatTensor:$gamma,
                       NN_FloatTensor:$dy, NN_FloatTensor:$residual,
                       F64Attr:$epsilon, UnitAttr:$rms);
  let results = (outs NN_FloatTensor:$dx, NN_FloatTensor:$dgamma,
                      Optional<NN_FloatTensor>:$dbeta);
  let assemblyFormat = [{
    $input `,` $gamma `,` $dy `,` $residual attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
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
    element type, or the labels' shape for `none`; f32 for the f32 loss of
    f16/bf16 logits, whose gradient is computed in f32 and rounded to the
    logits' type). Flops: `6·N + R` with
    `N` logits. Every loop is parallel: a split `mean` rescales `dloss` by
    the local share of the positions; a split class loop all-reduces the
    row maximum and sum of exponentials over the class blocks
    (vocabulary-parallel cross-entropy). With `logit_softcap` c, the
    gradient of nn.cross_entropy's capped loss: with `y = c·tanh(z / c)`,
    `g_i · (softmax(y) − onehot) · (1 − (y / c)²)`, `3·N` flops more. With
    `label_smoothing` ε, the gradient of nn.cross_entropy's smoothed loss:
    the one-hot becomes `(1 − ε)·onehot + ε/V` (`N` flops more), computed
    inside the kernel.

    ```mlir
    %dz = nn.cross_entropy_grad %z, %y, %dl : (tensor<32x10xf32>, tensor<32xi32>, tensor<f32>) -> tensor<32x10xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$logits, NN_IndexTensor:$labels,
      NN_FloatTensor:$dloss,
      DefaultValuedAttr<NN_LossReductionAttr, "LossReduction::mean">:$reduction,
      OptionalAttr<F64Attr>:$label_smoothing,
      OptionalAttr<F64Attr>:$logit_softcap);
  let results = (outs NN_FloatTensor:$dlogits);
  let hasVerifier = 1;
  let assemblyFormat = [{
    $logits `,` $labels `,` $dloss attr-dict `:` functional-type(operands, results)
  }];
}

def NN_CrossEntropyWithGradOp : NN_Op<"cross_entropy_with_grad", [Pure]> {
  let summary = "nn.cross_entropy and its gradient in one pass";
  let description = [{
    The results of `nn.cross_entropy %logits, %labels` (`loss`) and of
    `nn.cross_entropy_grad %logits, %labels, %dloss` (`dlogits`), the same
    `reduction`, from one reading of each row's statistics: a training
    step's loss and the seed of its backward (`tessel-fuse-epilogues` makes
    it of the two when `dloss` exists where the loss is computed). The
    types are theirs: the loss in the logits' type or, for f16/bf16
    logits, f32; `dloss` of the loss's type; `dlogits` of the logits'.
    With `in_place`, `dlogits` takes the logits' memory (llm.c's fused
    classifier): the memory plan then checks that nothing reads the logits
    afterwards. Flops: the two ops' less the row statistics the gradient
    recomputed (its max and sum, 2 per logit): `8·N + 3·R` with `N`
    logits and `R` positions. `label_smoothing` and `logit_softcap` are
    the two ops' (`2·N` and `6·N` more: the forward's and the gradient's
    share each).

    ```mlir
    %l, %dz = nn.cross_entropy_with_grad %z, %y, %dl in_place : (tensor<32x10xbf16>, tensor<32xi32>, tensor<f32>) -> (tensor<f32>, tensor<32x10xbf16>)
    ```
  }];
  let arguments = (ins NN_FloatTensor:$logits, NN_IndexTensor:$labels,
      NN_FloatTensor:$dloss,
      DefaultValuedAttr<NN_LossReductionAttr, "LossReduction::mean">:$reduction,
      UnitAttr:$in_place, OptionalAttr<F64Attr>:$label_smoothing,
      OptionalAttr<F64Attr>:$logit_softcap);
  let results = (outs NN_FloatTensor:$loss, NN_FloatTensor:$dlogits);
  let assemblyFormat = [{
    $logits `,` $labels `,` $dloss (`in_place` $in_place^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def NN_EmbeddingGradOp : NN_ShardableOp<"embedding_grad",
    [Pure, NN_VocabularyBlock]> {
  let summary = "gradient of nn.embedding with respect to the table";
  let description = [{
    Scatter-add: `dtable[r, :] = Σ_{i : ids[i] = r} dout[i, :]` (zero rows
    for ids that never occur). `dout` is `ids`' shape followed by `[H]`; the
    result `[V, H]` (its type gives the vocabulary size V) has `dout`'s
    element type, or f32 for an f16/bf16 `dout`: each row's sum rounded
    once, to f32, as an f32 gradient of a 16-bit table wants it
    (`tessel-fuse-epilogues` folds the widening cast). One flop per element
    of `dout`. Sharding: the id loops
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
    [Pure, InferTypeOpAdaptor,
     DeclareOpInterfaceMethods<NN_ShardingConstraintOpInterface,
                               ["getUnsplittableLoops", "adjustLocalPartition"]>]> {
  let summary = "gradient of nn.attention";
  let description = [{
    From `q`, `k`, `v`, the forward's output `out` and log-sum-exp `lse`
    (nn.attention's `lse` result) and `dout` (the output's type), returns
    `dq`, `dk`, `dv` (the types of `q`, `k`, `v`; with grouped-query heads
    the key/value gradients sum over the query heads that share them):
    `P = e^(scale·q·kᵀ - lse)`, `dS = P ⊙ (dout·vᵀ - rowsum(dout ⊙ out))`,
    without running the forward again. `causal`, `window`,
    `layer_windows`, `softcap` and `scale` as the forward; under a soft
    cap c the scores are capped first and dS is multiplied by the cap's
    slope `1 - (capped / c)²`. Flops: `6·B·H·S·T'·D + 4·B·H·S·T'·E +
    5·B·H·S·T' + 2·B·H·S·E` (plus `6·B·H·S·T'` under a soft cap),
    `T' = min(T, window)` as the forward's (the scores and their
    exponentials, then dV, dP, dS, dQ and dK; the row dots of dout and
    out). Loops are the forward's; batch and heads can split; S splits
    as a `sum` for dk and dv (each block of the queries adds its share of
    the keys' gradients; dq is the block's rows), with `block_axes` as the
    forward's on a causal local op; T, D and E must stay whole (each is a
    reduction for some of the three gradients).

    ```mlir
    %dq, %dk, %dv = nn.attention_grad %q, %k, %v, %o, %lse, %do causal : (tensor<2x16x4x8xf32>, tensor<2x16x4x8xf32>, tensor<2x16x4x8xf32>, tensor<2x16x4x8xf32>, tensor<2x4x16xf32>, tensor<2x16x4x8xf32>) -> (tensor<2x16x4x8xf32>, tensor<2x16x4x8xf32>, tensor<2x16x4x8xf32>)
    ```
  }];
  let arguments = (ins NN_FloatTensor:$query, NN_FloatTensor:$key,
                       NN_FloatTensor:$value, NN_FloatTensor:$out,
                       NN_FloatTensor:$lse, NN_FloatTensor:$dout,
                       UnitAttr:$causal, OptionalAttr<F64Attr>:$scale,
                       OptionalAttr<I64Attr>:$window,
                       OptionalAttr<DenseI64ArrayAttr>:$layer_windows,
                       OptionalAttr<F64Attr>:$softcap,
                       OptionalAttr<DenseI16ArrayAttr>:$block_axes);
  let results = (outs NN_FloatTensor:$dquery, NN_FloatTensor:$dkey,
                      NN_FloatTensor:$dvalue);
  let assemblyFormat = [{
    $query `,` $key `,` $value `,` $out `,` $lse `,` $dout (`causal` $causal^)?
    (`window` $window^)? (`softcap` $softcap^)? attr-dict `:`
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

def NN_VocabLossStatsOp : NN_Op<"vocab_loss_stats", [Pure]> {
  let summary = "a block's row statistics of a vocabulary-parallel loss";
  let description = [{
    For `logits: [..., C]`, a rank's block of the classes (`block_axes`, as
    nn.label_logit's), and integer `labels: [...]`: with `y` the logits
    (soft-capped by `logit_softcap`), each position's `max` of `y`,
    `sum_exp` = `Σ e^(y − max)` (0 when no `y` is above -inf), `label_logit`
    (`y` at the label when the block holds it, else 0) and `logit_sum` =
    `Σ y`, all `[...]` of one type, from one reading of the block (runtime
    ABI 29: Megatron's fused vocabulary-parallel cross-entropy). That type
    is the logits' or, for f16/bf16 logits, f32: each logit widened and
    the statistics kept in f32 (ABI 30), as the loss of 16-bit logits is.
    The partitioner writes it for nn.cross_entropy over split classes, its
    statistics of the loss's type, and completes each by an all-reduce of
    one value a position; it is never split itself. Flops: `5·N` (`8·N`
    capped) with `N` logits.

    ```mlir
    %m, %s, %zy, %zs = nn.vocab_loss_stats %z, %y {block_axes = array<i16: 0>} : (tensor<8x128x25152xf32>, tensor<8x128xi32>) -> (tensor<8x128xf32>, tensor<8x128xf32>, tensor<8x128xf32>, tensor<8x128xf32>)
    ```
  }];
  let arguments = (ins NN_FloatTensor:$logits, NN_IndexTensor:$labels,
                       OptionalAttr<DenseI16ArrayAttr>:$block_axes,
                       OptionalAttr<F64Attr>:$logit_softcap);
  let results = (outs NN_FloatTensor:$max, NN_FloatTensor:$sum_exp,
                      NN_FloatTensor:$label_logit, NN_FloatTensor:$logit_sum);
  let assemblyFormat = [{
    $logits `,` $labels attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def NN_VocabLossGradOp : NN_Op<"vocab_loss_grad", [Pure]> {
  let summary = "a block's gradient of a vocabulary-parallel loss";
  let description = [{
    The gradient of nn.cross_entropy on a rank's block of the classes
    (`block_axes`) from the whole rows' `max` and `sum_exp` (nn.vocab_loss_stats's,
    completed over the blocks) and each position's gradient `row_grad`
    (`dloss`, scaled by `1 / positions` for a mean): with `y` the logits
    (soft-capped by `logit_softcap`) and `V` the classes of all blocks,
    `row_grad · (e^(y − max) / sum_exp − (1 − ε)·onehot − ε / V)`, times
    the cap's slope `1 − (y / c)²`, ε the `label_smoothing` (0 without
    one), in one pass (runtime ABI 29). With `in_place`, `dlogits` takes
    the logits' memory (tessel-fuse-epilogues sets it when only the
    block's statistics read them before), as nn.cross_entropy_with_grad's
    does. Flops: `3·N + R` with `R` positions (`+3·N` capped, `+N`
    smoothed). `max`, `sum_exp` and `row_grad` are of the statistics' type
    (the logits' or, for f16/bf16 logits, f32: ABI 30), `dlogits` of the
    logits' type.

    ```mlir
    %dz = nn.vocab_loss_grad %z, %y, %m, %s, %g {block_axes = array<i16: 0>} : (tensor<8x128x25152xf32>, tensor<8x128xi32>, tensor<8x128xf32>, tensor<8x128xf32>, tensor<8x128xf32>) -> tensor<8x128x25152xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$logits, NN_IndexTensor:$labels,
                       NN_FloatTensor:$max, NN_FloatTensor:$sum_exp,
                       NN_FloatTensor:$row_grad, UnitAttr:$in_place,
                       OptionalAttr<DenseI16ArrayAttr>:$block_axes,
                       OptionalAttr<F64Attr>:$label_smoothing,
                       OptionalAttr<F64Attr>:$logit_softcap);
  let results = (outs NN_FloatTensor:$dlogits);
  let assemblyFormat = [{
    $logits `,` $labels `,` $max `,` $sum_exp `,` $row_grad
    (`in_place` $in_place^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}
