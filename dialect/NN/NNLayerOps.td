//===- NNLayerOps.td - contractions, norms, losses ---*- tablegen -*-===//
//
// Included by NNOps.td after the types and base classes it uses.
//
//===----------------------------------------------------------------------===//

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

    `sum_batch` sums over the batch too: the result is `[M, N]`, the sum of
    every batch's product. It takes the rows form of a weight gradient,
    `transpose_lhs` with both operands batched alike (`[..., K, M]ᵀ ·
    [..., K, N]`), whose batch and K dimensions are the rows: one GEMM over
    the flattened rows, but with the rows' dimensions kept, so that a split
    of any of them (a sequence over cp) is a partial sum of the weight
    gradient rather than a gather of both operands.

    ```mlir
    %h = nn.matmul %x, %w : (tensor<8x128x768xf32>, tensor<768x3072xf32>) -> tensor<8x128x3072xf32>
    %s = nn.matmul %q, %k transpose_rhs : (tensor<8x64x32xf32>, tensor<8x64x32xf32>) -> tensor<8x64x64xf32>
    %dw = nn.matmul %x, %dy transpose_lhs sum_batch : (tensor<8x128x768xf32>, tensor<8x128x3072xf32>) -> tensor<768x3072xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$lhs, NN_FloatTensor:$rhs,
                       UnitAttr:$transpose_lhs, UnitAttr:$transpose_rhs,
                       UnitAttr:$sum_batch);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs (`transpose_lhs` $transpose_lhs^)?
    (`transpose_rhs` $transpose_rhs^)? (`sum_batch` $sum_batch^)? attr-dict
    `:` functional-type(operands, results)
  }];
}

// Fused forms of matmul, which tessel-fuse-epilogues makes of a partitioned
// program (one rank's): a GEMM library does the add after the product in
// the same call (cuBLASLt's beta and epilogues). Not differentiable and not
// sharded: they exist only after partitioning.
def NN_MatmulAccumulateOp : NN_Op<"matmul_accumulate",
    [Pure, DestinationStyleOpInterface]> {
  let summary = "a matrix product added into an accumulator in place";
  let description = [{
    `acc + lhs · rhs` (operands and transposes as `nn.matmul`; `acc` has the
    product's type, or its shape in f32 for 16-bit operands), written in
    place into `acc` (destination style: the one init): a weight gradient
    summed into its buffer by the GEMM (beta = 1) instead of a product
    buffer and an `nn.accumulate`. With an f32 `acc` the product is summed
    in f32 and never rounded to 16 bits: a mixed-precision gradient added
    into its f32 buffer (Megatron's gradient-accumulation fusion) instead
    of a 16-bit product, an `nn.cast` and an `nn.accumulate`. Flops: the
    matmul's plus one per element.

    ```mlir
    %g2 = nn.matmul_accumulate %x, %dy transpose_lhs outs(%g) : (tensor<32x784xf32>, tensor<32x1024xf32>, tensor<784x1024xf32>) -> tensor<784x1024xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$lhs, NN_FloatTensor:$rhs,
                       NN_FloatTensor:$acc, UnitAttr:$transpose_lhs,
                       UnitAttr:$transpose_rhs);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs (`transpose_lhs` $transpose_lhs^)?
    (`transpose_rhs` $transpose_rhs^)? `outs` `(` $acc `)` attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::mlir::MutableOperandRange getDpsInitsMutable() { return getAccMutable(); }
  }];
}

def NN_MatmulF32Op : NN_Op<"matmul_f32", [Pure, InferTypeOpAdaptor]> {
  let summary = "a matrix product of 16-bit operands written in f32";
  let description = [{
    `lhs · rhs` (operands and transposes as `nn.matmul`, both f16 or both
    bf16) summed in f32 and returned in f32, never rounded to 16 bits: a
    mixed-precision gradient's GEMM whose f32 values a data-parallel
    bucket then reduces, written so by the GEMM (cuBLASLt with an f32 D)
    instead of a 16-bit product and an `nn.cast` (tessel-fuse-epilogues
    folds the pair). Flops: the matmul's.

    ```mlir
    %dw = nn.matmul_f32 %x, %dy transpose_lhs : (tensor<32x784xbf16>, tensor<32x1024xbf16>) -> tensor<784x1024xf32>
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

def NN_MatmulBiasOp : NN_Op<"matmul_bias", [Pure, InferTypeOpAdaptor]> {
  let summary = "a matrix product plus a bias on every row";
  let description = [{
    `lhs · rhs + bias` (operands and transposes as `nn.matmul`), `bias` a
    vector of the product's last dimension N added to every row: a linear
    layer's matmul, `nn.broadcast` and `nn.add` in one GEMM with a bias
    epilogue. Flops: the matmul's plus one per element.

    ```mlir
    %h = nn.matmul_bias %x, %w, %b : (tensor<32x784xf32>, tensor<784x1024xf32>, tensor<1024xf32>) -> tensor<32x1024xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$lhs, NN_FloatTensor:$rhs,
                       NN_FloatTensor:$bias, UnitAttr:$transpose_lhs,
                       UnitAttr:$transpose_rhs);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs `,` $bias (`transpose_lhs` $transpose_lhs^)?
    (`transpose_rhs` $transpose_rhs^)? attr-dict `:`
    functional-type(operands, results)
  }];
}

def NN_MatmulBiasGeluOp : NN_Op<"matmul_bias_gelu",
    [Pure, InferTypeOpAdaptor]> {
  let summary = "a linear layer and its tanh GELU in one GEMM";
  let description = [{
    `result = gelu_tanh(pre)` with `pre = lhs · rhs + bias` (operands as
    `nn.matmul_bias`), both returned: `pre` is what the GELU's gradient
    reads in the backward (cuBLASLt's GELU_AUX_BIAS epilogue writes it
    beside the output). Only the tanh form (`nn.gelu approximate`), which is
    the one a GEMM library fuses. Flops: the matmul's, one per element for
    the bias and eight for the GELU.

    ```mlir
    %y, %pre = nn.matmul_bias_gelu %x, %w, %b : (tensor<8x64x128xf32>, tensor<128x512xf32>, tensor<512xf32>) -> (tensor<8x64x512xf32>, tensor<8x64x512xf32>)
    ```
  }];
  let arguments = (ins NN_FloatTensor:$lhs, NN_FloatTensor:$rhs,
                       NN_FloatTensor:$bias, UnitAttr:$transpose_lhs,
                       UnitAttr:$transpose_rhs);
  let results = (outs NN_FloatTensor:$result, NN_FloatTensor:$pre);
  let assemblyFormat = [{
    $lhs `,` $rhs `,` $bias (`transpose_lhs` $transpose_lhs^)?
    (`transpose_rhs` $transpose_rhs^)? attr-dict `:`
    functional-type(operands, results)
  }];
}

def NN_MatmulGeluGradOp : NN_Op<"matmul_gelu_grad",
    [Pure, InferTypeOpAdaptor]> {
  let summary = "a GEMM times the tanh GELU's derivative";
  let description = [{
    `(lhs · rhs) ⊙ gelu_tanh'(pre)` (operands and transposes as
    `nn.matmul`; `pre` has the product's type): the gradient through a tanh
    GELU whose output gradient the GEMM computes, `pre` the GELU's input
    from the forward (cuBLASLt's DGELU epilogue). Flops: the matmul's plus
    twelve per element (as `nn.gelu_grad`).

    ```mlir
    %dpre = nn.matmul_gelu_grad %dy, %w, %pre transpose_rhs : (tensor<8x64x128xf32>, tensor<512x128xf32>, tensor<8x64x512xf32>) -> tensor<8x64x512xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$lhs, NN_FloatTensor:$rhs,
                       NN_FloatTensor:$pre, UnitAttr:$transpose_lhs,
                       UnitAttr:$transpose_rhs);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs `,` $pre (`transpose_lhs` $transpose_lhs^)?
    (`transpose_rhs` $transpose_rhs^)? attr-dict `:`
    functional-type(operands, results)
  }];
}

def NN_MatmulBiasGradOp : NN_Op<"matmul_bias_grad",
    [Pure, InferTypeOpAdaptorWithIsCompatible]> {
  let summary = "a weight gradient's GEMM that also sums the bias gradient";
  let description = [{
    `result = lhs · rhs` (2-D operands, transposes as `nn.matmul`) and
    `bias_grad[j] = Σ_k op(rhs)[k, j]`, the column sums of `op(rhs)`: a
    linear layer's weight gradient `dW = Xᵀ · dY` and its bias gradient
    `Σ dY` over the rows, in one GEMM (cuBLASLt's bias-gradient epilogue)
    instead of a matmul and an `nn.reduce_sum`. With `outs(%acc)` (the
    product's type, or its shape in f32 for 16-bit operands) the product
    is added into `acc` in place, as `nn.matmul_accumulate` adds it
    (beta = 1), and `result` is `acc` updated; the bias gradient is
    written, never added (cuBLASLt's epilogue overwrites it), in `acc`'s
    element type. Without `outs`, 16-bit operands may have both results in
    f32 (as `nn.matmul_f32` writes its product): a mixed-precision weight
    and bias gradient written in f32 for a data-parallel bucket. Flops: the
    matmul's plus the sum's, `(K - 1)·N`, plus one per element of the
    product with `outs`.

    ```mlir
    %dw, %db = nn.matmul_bias_grad %x, %dy transpose_lhs : (tensor<512x128xf32>, tensor<512x512xf32>) -> (tensor<128x512xf32>, tensor<512xf32>)
    %g2, %db2 = nn.matmul_bias_grad %x, %dy transpose_lhs outs(%g) : (tensor<512x128xf32>, tensor<512x512xf32>, tensor<128x512xf32>) -> (tensor<128x512xf32>, tensor<512xf32>)
    %w3, %db3 = nn.matmul_bias_grad %h, %dz transpose_lhs : (tensor<512x128xbf16>, tensor<512x512xbf16>) -> (tensor<128x512xf32>, tensor<512xf32>)
    ```
  }];
  let arguments = (ins NN_FloatTensor:$lhs, NN_FloatTensor:$rhs,
                       Optional<NN_FloatTensor>:$acc,
                       UnitAttr:$transpose_lhs, UnitAttr:$transpose_rhs);
  let results = (outs NN_FloatTensor:$result, NN_FloatTensor:$bias_grad);
  let assemblyFormat = [{
    $lhs `,` $rhs (`transpose_lhs` $transpose_lhs^)?
    (`transpose_rhs` $transpose_rhs^)? (`outs` `(` $acc^ `)`)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
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
    `1/sqrt(D)`. With `causal`, `S == T` and query `i` sees keys `0..i`;
    a sliding `window` w (causal only: Mistral's, Gemma's local layers,
    Hugging Face's `sliding_window`) narrows that to its last w keys,
    `i - w + 1..i`. In a repeated layer, `layer_windows` gives each of the
    model's layers its own (0: no window), read by the layer's index
    (tessel_get_layer): local layers alternating with global ones (Gemma 2
    and 3, Command R7B). A `softcap` c (Gemma 2's
    `attn_logit_softcapping`) caps each scaled score s to `c·tanh(s / c)`
    before the mask and the softmax. Flops: `2·B·H·S·T'·D + 5·B·H·S·T' +
    2·B·H·S·T'·E` (plus `3·B·H·S·T'` under a soft cap) with
    `T' = min(T, w)` the keys a row reads (the layers' mean with
    `layer_windows`; dense count; causal kernels may skip the masked
    half). Sharding: B, S, H and E loops are
    parallel (heads split in Megatron's tensor parallelism; queries in
    context parallelism, Llama 3's all-gather form: every rank sees every
    key); the key loop T and the head dimension D must stay whole. With
    `block_axes` (set by the partitioner on a rank's causal local op), the
    queries are block `g` of a sequence `T / S` times longer, `g` the
    rank's index in the group of those axes of the module's grid: query
    `i` is at position `g·S + i` among the keys, where the causal diagonal
    and the window meet it.

    With `lse`, a second result holds each query row's log-sum-exp of its
    scaled scores (`max + log Σ e^(s - max)`, `[B, H, S]`, f32, or f64 for
    f64 inputs): what nn.attention_grad reads with the output instead of
    running the forward again (flash-attention 2's saved statistics).
    tessel-autodiff asks for it; the canonicalizer drops an unused one.

    ```mlir
    %o = nn.attention %q, %k, %v causal : (tensor<8x128x12x64xf32>, tensor<8x128x12x64xf32>, tensor<8x128x12x64xf32>) -> tensor<8x128x12x64xf32>
    %o2, %lse = nn.attention %q, %k, %v causal lse : (tensor<8x128x12x64xbf16>, tensor<8x128x12x64xbf16>, tensor<8x128x12x64xbf16>) -> (tensor<8x128x12x64xbf16>, tensor<8x12x128xf32>)
    %o3 = nn.attention %q, %k, %v causal window 32 : (tensor<8x128x12x64xf32>, tensor<8x128x4x64xf32>, tensor<8x128x4x64xf32>) -> tensor<8x128x12x64xf32>
    %o4 = nn.attention %q, %k, %v causal {layer_windows = array<i64: 32, 32, 0>} : (tensor<8x128x12x64xf32>, tensor<8x128x4x64xf32>, tensor<8x128x4x64xf32>) -> tensor<8x128x12x64xf32>
    %o5 = nn.attention %q, %k, %v causal window 32 softcap 5.0e+01 : (tensor<8x128x12x64xf32>, tensor<8x128x4x64xf32>, tensor<8x128x4x64xf32>) -> tensor<8x128x12x64xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$query, NN_FloatTensor:$key,
                       NN_FloatTensor:$value, UnitAttr:$causal,
                       UnitAttr:$with_lse, OptionalAttr<F64Attr>:$scale,
                       OptionalAttr<I64Attr>:$window,
                       OptionalAttr<DenseI64ArrayAttr>:$layer_windows,
                       OptionalAttr<F64Attr>:$softcap,
                       OptionalAttr<DenseI16ArrayAttr>:$block_axes);
  let results = (outs NN_FloatTensor:$result, Optional<NN_FloatTensor>:$lse);
  let assemblyFormat = [{
    $query `,` $key `,` $value (`causal` $causal^)? (`window` $window^)?
    (`softcap` $softcap^)? (`lse` $with_lse^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
  let hasCanonicalizeMethod = 1;
  let extraClassDeclaration = [{
    /// This attention (operands, mask, scale and discardable attributes)
    /// built again at `b`'s insertion point, with or without its
    /// log-sum-exp result.
    AttentionOp buildAgain(::mlir::OpBuilder &b, bool withLse);
  }];
}

def NN_RopeOp : NN_ShardableOp<"rope",
    [Pure, SameOperandsAndResultType, InferTypeOpInterface,
     DeclareOpInterfaceMethods<NN_ShardingConstraintOpInterface,
                               ["getUnsplittableLoops", "adjustLocalPartition"]>,
     NN_PassesPartialSums, NN_Differentiable]> {
  let summary = "rotary position embedding of queries or keys";
  let description = [{
    Rotates pairs of the head dimension of `x: [..., S, H, D]` (the layout
    nn.attention reads) by an angle that grows with the position: for the
    position `p` along `S` and the pair `i < D/2`, the angle is
    `p · theta^(-2i/D)` and `(x_a, x_b)` becomes
    `(x_a cos − x_b sin, x_b cos + x_a sin)` (RoFormer; Llama, Mistral and
    Qwen with `theta` 10000, 500000 or 1000000). The pairs are
    `(i, i + D/2)`, the halves Hugging Face's `rotate_half` pairs; with
    `interleaved`, `(2i, 2i + 1)` (Meta's original Llama and GPT-J).
    `inverse` rotates by the negative angle: the transpose, so
    `nn.rope inverse` is the gradient of `nn.rope` and the reverse. In a
    repeated layer, `layer_thetas` gives each of the model's layers its own
    theta, read by the layer's index (Gemma 3's local layers at 10000, its
    global ones at 1000000), and `layer_scalings` each its own `scaling`
    (four values a layer; factor 0: none; Gemma 3's global layers scaled
    linearly, its local ones not). The
    angle and its sine and cosine are computed in f64 and rounded to the
    arithmetic's type (f32 for f32, f16 and bf16; f64 for f64).

    `scaling = array<f64: factor, low, high, original>` is Llama 3.1's
    frequency scaling (Hugging Face's `rope_type = "llama3"`): a pair's
    frequency `f = theta^(-2i/D)` of wavelength `w = 2π/f` stays where
    `w < original / high`, becomes `f / factor` where `w > original / low`,
    and in between `(1 − s) f / factor + s f` with
    `s = (original / w − low) / (high − low)`.

    `yarn = array<f64: factor, beta_fast, beta_slow, original, truncate>`
    is YaRN's (Hugging Face's `rope_type = "yarn"`; Qwen's long contexts):
    with `c(r) = D·ln(original / (2π r)) / (2 ln theta)` the pair that
    turns `r` times over the original context, a ramp from
    `lo = c(beta_fast)` to `hi = c(beta_slow)` (floored and ceiled when
    `truncate` is 1, clamped to `[0, D − 1]`) keeps the frequencies before
    `lo`, divides those from `hi` by the factor, and blends linearly in the
    pair between. YaRN's attention factor (`0.1 ln factor + 1` on cos and
    sin) is the model's: a scale of the attention's scores. Not with
    `scaling` or `layer_scalings`; with `layer_thetas`, each layer's theta.

    `rotary_dim = R` (even, `0 < R <= D`) turns only the first `R` elements
    of each head and passes the rest through (a partial rope: Phi-4-mini's
    `partial_rotary_factor`, GPT-NeoX's `rotary_pct`); its pairs are those
    of a head of `R`, at frequencies `theta^(-2i/R)`. Not with `scaling`,
    `layer_scalings` or `yarn`.

    `longrope = array<f64: f_0, ..., f_{R/2 − 1}>` is LongRoPE's
    (Hugging Face's `rope_type = "longrope"`; Phi-3's and Phi-3.5's 128k
    contexts): pair `i`'s frequency divided by its own factor `f_i` (the
    config's `short_factor`, or `long_factor` for a context past
    `original_max_position_embeddings`), at most 128 pairs. Not with
    `scaling`, `layer_scalings` or `yarn`; with `layer_thetas`, each
    layer's theta.

    `attention_factor = a` (finite, positive) multiplies cos and sin, so
    the turned elements, by `a` (LongRoPE's attention factor, on
    `q_rot` and `k_rot` but not on a partial rope's passed elements); the
    inverse then is the transpose, not the inverse. Not with `scaling`,
    `layer_scalings` or `yarn` (YaRN's is a scale of the scores).

    Dimensions in front of `S` are batch dimensions. `D` is even. `3` flops
    per element turned. Linear: partial sums pass through. Sharding: the
    batch, position and head loops are parallel (Megatron's tensor
    parallelism splits heads, context parallelism positions); the head
    dimension `D` stays whole. With `block_axes` (set by the partitioner on
    a rank's local op), the positions are block `g` of a sequence split
    over those axes of the module's grid, `g` the rank's index in their
    group: position `p` is turned as `g·S + p`.

    ```mlir
    %q = nn.rope %x {theta = 500000.0 : f64} : tensor<8x128x32x64xbf16>
    %dx = nn.rope %dy inverse : tensor<8x128x32x64xf32>
    %k = nn.rope %y {theta = 500000.0 : f64, scaling = array<f64: 32.0, 1.0, 4.0, 8192.0>} : tensor<1x2048x8x64xbf16>
    %l = nn.rope %z {theta = 1000000.0 : f64, yarn = array<f64: 4.0, 32.0, 1.0, 32768.0, 1.0>} : tensor<1x4096x8x128xbf16>
    %p = nn.rope %w {rotary_dim = 4 : i64, longrope = array<f64: 1.0, 1.5>, attention_factor = 1.19 : f64} : tensor<2x16x4x8xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input,
                       DefaultValuedAttr<F64Attr, "10000.0">:$theta,
                       UnitAttr:$interleaved, UnitAttr:$inverse,
                       OptionalAttr<DenseF64ArrayAttr>:$scaling,
                       OptionalAttr<DenseF64ArrayAttr>:$layer_thetas,
                       OptionalAttr<DenseF64ArrayAttr>:$layer_scalings,
                       OptionalAttr<DenseF64ArrayAttr>:$yarn,
                       OptionalAttr<I64Attr>:$rotary_dim,
                       OptionalAttr<DenseF64ArrayAttr>:$longrope,
                       OptionalAttr<F64Attr>:$attention_factor,
                       OptionalAttr<DenseI16ArrayAttr>:$block_axes);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $input (`interleaved` $interleaved^)? (`inverse` $inverse^)? attr-dict
    `:` type($result)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The position dimension (`S`): the third from the end.
    int64_t getPositionDim() { return getType().getRank() - 3; }
    /// The most pairs `longrope` gives factors (the runtime carries them
    /// by value: rope::kMaxFactorPairs).
    static constexpr int64_t kMaxLongropePairs = 128;
    /// The elements of each head turned: `rotary_dim`, or all `D`.
    int64_t getRotatedWidth() {
      return getRotaryDim() ? int64_t(*getRotaryDim())
                            : getType().getShape().back();
    }
    /// A Llama 3.1 scaling's four values (`what` names them in the error).
    ::mlir::LogicalResult verifyScaling(::llvm::ArrayRef<double> scaling,
                                        ::llvm::StringRef what);
  }];
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

def NN_AddNormOp : NN_Op<"add_norm", [Pure, InferTypeOpAdaptor]> {
  let summary = "a residual add and the layer or RMS norm of its sum";
  let description = [{
    `sum = lhs + rhs` (one type, rank >= 1) and `result` the norm of `sum`
    over its last dimension: `nn.layer_norm` with `beta`, `nn.rms_norm`
    without; both returned, since the residual stream goes on with `sum`.
    `tessel-fuse-epilogues` makes it from an `nn.add` and the norm of its
    result (a transformer block's residual add and the next norm), so one
    pass over the rows reads the two inputs and writes both results instead
    of the norm reading the sum again. The norm reads the sum rounded to the
    element type, as the two ops do. Flops: the add's one and the norm's
    (8 or 4) per element.

    ```mlir
    %h1, %y = nn.add_norm %h, %o, %g, %b {epsilon = 1.0e-05 : f64} : (tensor<8x64x128xf32>, tensor<8x64x128xf32>, tensor<128xf32>, tensor<128xf32>) -> (tensor<8x64x128xf32>, tensor<8x64x128xf32>)
    ```
  }];
  let arguments = (ins NN_FloatTensor:$lhs, NN_FloatTensor:$rhs,
                       NN_FloatTensor:$gamma, Optional<NN_FloatTensor>:$beta,
                       F64Attr:$epsilon);
  let results = (outs NN_FloatTensor:$sum, NN_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs `,` $gamma (`,` $beta^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// RMS norm: no beta.
    bool isRms() { return !getBeta(); }
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
    [Pure, InferTypeOpAdaptorWithIsCompatible, NN_Differentiable,
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

    The loss has the logits' element type, or f32 for f16/bf16 logits: each
    logit widened and the loss computed in f32, as the cast to f32 and the
    f32 loss would (tessel-fuse-epilogues folds that cast into the loss
    under bf16 mixed precision; no f32 copy of the logits).

    With `ignore_index` (PyTorch's; fine-tuning labels prompt and padding
    positions -100), a position whose label is that value adds nothing to
    the loss or its gradient (0 under `none`), and `mean` divides by the
    positions that are not ignored, counted over the whole batch on every
    mesh (a batch with none has loss 0, where PyTorch gives NaN).
    `tessel-mask-ignored-labels` writes such a loss as `nn.mask_labels`
    and the loss of each position, which the other passes know.

    With `label_smoothing` ε in [0, 1] (PyTorch's), the target is
    `(1 - ε)·onehot(label) + ε/V` everywhere: a position's loss is
    `(1 - ε)·(lse - z_label) + ε·(lse - mean(z))`, which is its plain loss
    plus `ε·(z_label - mean(z))`, and its gradient's one-hot is the same
    target. The loss kernels compute both with one more sum per row (runtime
    ABI 28; `N` flops more), so no logits-sized term is stored. With
    `ignore_index`, tessel-mask-ignored-labels keeps it on the loss of each
    position it weighs; on a split vocabulary each rank sums its block of
    the classes, completed by one more all-reduce of one value a position.

    With `logit_softcap` c > 0 (Gemma 2's `final_logit_softcapping`), the
    loss is of the capped logits `c·tanh(z / c)`, capped inside the loss
    and its gradient (runtime ABI 27): no capped copy of the logits is
    stored. Canonicalization folds `mul(tanh(div(z, c)), c)` (splat c) read
    by the loss alone into it. Flops `3·N` more. A split vocabulary caps
    each rank's block before the vocabulary-parallel statistics.

    ```mlir
    %l = nn.cross_entropy %logits, %labels : (tensor<8x128x50304xf32>, tensor<8x128xi32>) -> tensor<f32>
    %m = nn.cross_entropy %h, %labels : (tensor<8x128x50304xbf16>, tensor<8x128xi32>) -> tensor<f32>
    %s = nn.cross_entropy %logits, %labels {ignore_index = -100 : i64} : (tensor<8x128x50304xf32>, tensor<8x128xi32>) -> tensor<f32>
    %t = nn.cross_entropy %logits, %labels {label_smoothing = 0.1 : f64} : (tensor<8x128x50304xf32>, tensor<8x128xi32>) -> tensor<f32>
    %c = nn.cross_entropy %logits, %labels {logit_softcap = 30.0 : f64} : (tensor<8x128x256000xbf16>, tensor<8x128xi32>) -> tensor<f32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$logits, NN_IndexTensor:$labels,
      DefaultValuedAttr<NN_LossReductionAttr, "LossReduction::mean">:$reduction,
      OptionalAttr<I64Attr>:$ignore_index,
      OptionalAttr<F64Attr>:$label_smoothing,
      OptionalAttr<F64Attr>:$logit_softcap);
  let results = (outs NN_FloatTensor:$result);
  let hasVerifier = 1;
  let hasCanonicalizer = 1;
  let extraClassDeclaration = [{
    /// Fails, naming `pass`, for a loss with an ignore_index: `pass` sees
    /// it only as tessel-mask-ignored-labels writes it.
    ::llvm::LogicalResult refuseIgnoreIndex(::llvm::StringRef pass);
  }];
  let assemblyFormat = [{
    $logits `,` $labels attr-dict `:` functional-type(operands, results)
  }];
}

def NN_LabelLogitOp : NN_ShardableOp<"label_logit",
    [Pure, InferTypeOpAdaptor, NN_VocabularyBlock, NN_Differentiable]> {
  let summary = "the logit of each position's label";
  let description = [{
    `result[i] = logits[i, labels[i]]` for `logits: [..., V]` and integer
    `labels: [...]` in `[0, V)`; the result is `[...]` of the logits'
    element type. Costs no flops. Sharding: position loops are parallel,
    the class loop a `sum` reduction (the one-hot view): with `block_axes`
    (as `nn.embedding`) the logits are the rank's block of the classes and
    a label outside it picks 0, so the blocks sum to the label's logit. The
    vocabulary-parallel cross-entropy is built from it. Its gradient is the
    cotangent at each position's label of zeros (nn.sub_label of its
    negation).

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

def NN_MaskLabelsOp : NN_ShardableOp<"mask_labels", [Pure]> {
  let summary = "the labels a loss reads and the weight of each position";
  let description = [{
    For a loss that ignores the positions labelled `ignore_index`:
    `safe[i] = labels[i] == ignore_index ? 0 : labels[i]` (a class the
    cross-entropy can read) and `weights[i]` 0 there, else 1, of any float
    type. Every loop is parallel; one flop per position. The cross-entropy
    of `safe` times `weights` is each position's loss, `Σ weights` the
    positions a mean divides by (`tessel-mask-ignored-labels`).

    ```mlir
    %y, %w = nn.mask_labels %labels ignore_index -100 : (tensor<8x128xi32>) -> (tensor<8x128xi32>, tensor<8x128xf32>)
    ```
  }];
  let arguments = (ins NN_IndexTensor:$labels, I64Attr:$ignore_index);
  let results = (outs NN_IndexTensor:$safe, NN_FloatTensor:$weights);
  let assemblyFormat = [{
    $labels `ignore_index` $ignore_index attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
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
