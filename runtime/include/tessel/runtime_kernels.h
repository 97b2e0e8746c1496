/*===- runtime_kernels.h - Tessel runtime C ABI: the forward kernels ---===*
 *
 * The runtime's C ABI in three headers (runtime.h includes the other two;
 * any one gives all three): runtime.h holds the context, its memory,
 * copies, collectives, counters and traces, and the ABI's versions; this
 * one parameter initialisation and the forward kernels; runtime_grad.h
 * the backward kernels and the optimizers. Generated code issues the
 * kernels on a context's stream.
 *
 *===----------------------------------------------------------------------===*/

#ifndef TESSEL_RUNTIME_KERNELS_H
#define TESSEL_RUNTIME_KERNELS_H

#include "runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/*===--- Parameter initialisation ----------------------------------------===*/

typedef enum tessel_init_kind {
  TESSEL_INIT_ZEROS = 0,
  TESSEL_INIT_ONES = 1,
  TESSEL_INIT_CONSTANT = 2,        /* args[0] = value */
  TESSEL_INIT_NORMAL = 3,          /* args[0] = std, args[1] = mean */
  TESSEL_INIT_TRUNCATED_NORMAL = 4,/* args[0] = std, args[1] = mean; cut at 2 std */
  TESSEL_INIT_UNIFORM = 5,         /* args[0] = low, args[1] = high */
} tessel_init_kind;

/* Fills elements [first, first + count) of the parameter called `name`,
 * stored at `dst` (device memory, `count` elements of `dtype`). Element i's
 * value is a pure function of (seed, name, first + i): the same on every
 * mesh and every backend, so any strategy starts where one device starts. */
void tessel_init_param(tessel_ctx *ctx, void *dst, int32_t dtype,
                       int64_t first, int64_t count, int32_t kind,
                       const double *args, uint64_t seed, const char *name);

/*===--- Kernels ---------------------------------------------------------===*/

/* C[b] = op(A[b]) · op(B[b]); A is [batch, M, K] ([batch, K, M] when
 * trans_a), B is [batch, K, N] ([batch, N, K] when trans_b), or one [K, N]
 * matrix for every batch when b_shared. Row-major. */
void tessel_matmul(tessel_ctx *ctx, int32_t dtype, const void *a,
                   const void *b, void *c, int64_t batch, int64_t m, int64_t n,
                   int64_t k, int32_t trans_a, int32_t trans_b,
                   int32_t b_shared);

typedef enum tessel_matmul_epilogue_kind {
  TESSEL_EPILOGUE_NONE = 0,
  TESSEL_EPILOGUE_BIAS = 1, /* + bias[j] on every row of C */
  /* C = gelu_tanh(product + bias[j]); the pre-GELU values into aux when
   * aux is not null (ABI 7). */
  TESSEL_EPILOGUE_GELU_BIAS = 2,
  /* C = product ⊙ gelu_tanh'(aux), aux the forward's pre-GELU values: the
   * gradient through the GELU (ABI 7). */
  TESSEL_EPILOGUE_DGELU = 3,
  /* C = product (+ beta·C) and aux[j] = Σ_k op(B)[k, j], the column sums of
   * op(B), N elements overwritten even with beta 1: a linear layer's bias
   * gradient beside its weight gradient dW = Xᵀ·dY (B = dY). One GEMM:
   * batch 1 (ABI 7). */
  TESSEL_EPILOGUE_BGRADB = 4,
} tessel_matmul_epilogue_kind;

/* tessel_matmul with what a GEMM library fuses into the product (ABI 6):
 *   C[b] = op(A[b]) · op(B[b]) + beta · C[b]  (+ bias[j] on every row)
 * beta is 0 (C overwritten, as tessel_matmul) or 1 (the product added to
 * C: a weight gradient summed into its buffer); `bias` has N elements of
 * dtype and is read only with TESSEL_EPILOGUE_BIAS (null otherwise). The
 * result equals tessel_matmul into a temporary followed by tessel_binary
 * TESSEL_ADD: each element's product is rounded once, then added. */
void tessel_matmul_epilogue(tessel_ctx *ctx, int32_t dtype, const void *a,
                            const void *b, void *c, int64_t batch, int64_t m,
                            int64_t n, int64_t k, int32_t trans_a,
                            int32_t trans_b, int32_t b_shared, double beta,
                            int32_t epilogue, const void *bias);

/* tessel_matmul_epilogue with the epilogues that write or read a second
 * tensor of dtype, `aux` (ABI 7): TESSEL_EPILOGUE_GELU_BIAS (aux, [batch,
 * M, N], optional, receives product + bias), TESSEL_EPILOGUE_DGELU (aux,
 * [batch, M, N], required, is read) and TESSEL_EPILOGUE_BGRADB (aux, [N],
 * required, receives op(B)'s column sums). The GELU epilogues take beta 0
 * only; aux may not overlap C. The result equals the unfused ops:
 * tessel_matmul_epilogue with the bias then tessel_unary TESSEL_GELU_TANH;
 * tessel_matmul then tessel_unary_grad TESSEL_GELU_TANH with x = aux;
 * tessel_matmul_epilogue then tessel_reduce TESSEL_REDUCE_SUM of op(B) over
 * its rows (a GPU's fused epilogue rounds and sums in its own order, within
 * the GPU tests' bounds). */
void tessel_matmul_epilogue_aux(tessel_ctx *ctx, int32_t dtype, const void *a,
                                const void *b, void *c, int64_t batch,
                                int64_t m, int64_t n, int64_t k,
                                int32_t trans_a, int32_t trans_b,
                                int32_t b_shared, double beta, int32_t epilogue,
                                const void *bias, void *aux);

/* C[b] += op(A[b]) · op(B[b]) with A and B of dtype (TESSEL_F16 or
 * TESSEL_BF16) and C f32 (ABI 12): a mixed-precision weight gradient
 * accumulated into its f32 buffer by the GEMM (cuBLASLt with f32 C and D,
 * the product summed in f32 and never rounded to dtype: Megatron's
 * gradient-accumulation fusion) instead of a 16-bit product, a cast and an
 * add. epilogue is TESSEL_EPILOGUE_NONE (aux null) or
 * TESSEL_EPILOGUE_BGRADB (one GEMM: batch 1; aux, f32 [N], receives op(B)'s
 * column sums, overwritten); aux may not overlap C. The CPU backend
 * computes what the unfused ops do, as tessel_matmul_epilogue does: the
 * product rounded to dtype, widened and added; the column sums as
 * tessel_reduce sums them in dtype, widened (a GPU's unrounded result is
 * within the GPU tests' bounds). */
void tessel_matmul_accumulate_f32(tessel_ctx *ctx, int32_t dtype,
                                  const void *a, const void *b, void *c,
                                  int64_t batch, int64_t m, int64_t n,
                                  int64_t k, int32_t trans_a, int32_t trans_b,
                                  int32_t b_shared, int32_t epilogue,
                                  void *aux);

/* C[b] = op(A[b]) · op(B[b]) with A and B of dtype (TESSEL_F16 or
 * TESSEL_BF16) and C f32 (ABI 15): tessel_matmul_accumulate_f32 with
 * beta 0, C overwritten (a mixed-precision gradient's GEMM writing the f32
 * values a reduction then sums, never rounded to 16 bits, instead of a
 * 16-bit product and a tessel_cast). epilogue and aux as there; C is
 * neither read nor required to hold numbers. The CPU backend computes
 * what tessel_matmul then tessel_cast do: the product rounded to dtype and
 * widened (a GPU's unrounded result is within the GPU tests' bounds). */
void tessel_matmul_f32(tessel_ctx *ctx, int32_t dtype, const void *a,
                       const void *b, void *c, int64_t batch, int64_t m,
                       int64_t n, int64_t k, int32_t trans_a, int32_t trans_b,
                       int32_t b_shared, int32_t epilogue, void *aux);

typedef enum tessel_binary_op {
  TESSEL_ADD = 0,
  TESSEL_SUB = 1,
  TESSEL_MUL = 2,
  TESSEL_DIV = 3,
  TESSEL_EQUAL = 4, /* 1 where a[i] == b[i], else 0, in the dtype (NaN: 0) */
} tessel_binary_op;

/* out[i] = a[i] op b[i] for i < n (out may be a or b: in place). */
void tessel_binary(tessel_ctx *ctx, int32_t op, int32_t dtype, const void *a,
                   const void *b, void *out, int64_t n);

/* How tessel_binary_broadcast pairs b with the elements of a, viewed as
 * [rows, cols]: one value of b per column (b has cols elements: a bias, a
 * position table) or per row (rows elements: a row's statistic); with
 * TESSEL_BROADCAST_B_FIRST set, b is the op's left operand. */
typedef enum tessel_broadcast_layout {
  TESSEL_BROADCAST_COLS = 0,
  TESSEL_BROADCAST_ROWS = 1,
  TESSEL_BROADCAST_B_FIRST = 2,
} tessel_broadcast_layout;

/* out[r, c] = a[r, c] op b[c] (TESSEL_BROADCAST_COLS) or a[r, c] op b[r]
 * (TESSEL_BROADCAST_ROWS), b op a with TESSEL_BROADCAST_B_FIRST, for an
 * [rows, cols] view of a and out (ABI 17): b broadcast where it lies.
 * Equal to tessel_strided_copy of b (stride 0) into a temporary followed
 * by tessel_binary. out may be a, never b. */
void tessel_binary_broadcast(tessel_ctx *ctx, int32_t op, int32_t dtype,
                             const void *a, const void *b, void *out,
                             int64_t rows, int64_t cols, int32_t layout);

typedef enum tessel_unary_op {
  TESSEL_NEG = 0,
  TESSEL_EXP = 1,
  TESSEL_LOG = 2,
  TESSEL_SQRT = 3,
  TESSEL_RSQRT = 4,
  TESSEL_TANH = 5,
  TESSEL_SIGMOID = 6,
  TESSEL_RELU = 7,
  TESSEL_GELU = 8,      /* exact: x·Φ(x) with erf */
  TESSEL_GELU_TANH = 9, /* tanh approximation */
  TESSEL_SILU = 10,
} tessel_unary_op;

/* y[i] = op(x[i]) for i < n (float dtypes). */
void tessel_unary(tessel_ctx *ctx, int32_t op, int32_t dtype, const void *x,
                  void *y, int64_t n);

/* y[i] = convert(x[i]) from src_dtype to dst_dtype for i < n. */
void tessel_cast(tessel_ctx *ctx, int32_t src_dtype, int32_t dst_dtype,
                 const void *x, void *y, int64_t n);

/* Inverted dropout: y[i] = keep(i) ? x[i] / (1 - rate) : 0, where keep(i)
 * is a pure function of (seed, step, first + i, the context's random
 * stream) — counter-based, so every partition of an element draws the same
 * bit. */
void tessel_dropout(tessel_ctx *ctx, int32_t dtype, const void *x, void *y,
                    int64_t n, double rate, uint64_t seed, uint64_t step,
                    int64_t first);

/* tessel_dropout of the context's step (tessel_set_step) as it stands when
 * the kernel runs: on an asynchronous backend, the step the last
 * tessel_set_step before this call ordered on the stream, so a captured
 * graph (tessel_graph_begin) draws each launch's masks. The same bits as
 * tessel_dropout with that step. */
void tessel_dropout_current(tessel_ctx *ctx, int32_t dtype, const void *x,
                            void *y, int64_t n, double rate, uint64_t seed,
                            int64_t first);

/* tessel_dropout on a block of a larger tensor (a rank's part of a split
 * one): x and y hold `rank` dims of `shape`, row-major; element
 * (i_0 .. i_{rank-1}) draws the bit of element first + sum i_d · strides[d]
 * of the whole tensor (`strides` its row-major strides in elements,
 * `first` the block's first element there). */
void tessel_dropout_block(tessel_ctx *ctx, int32_t dtype, const void *x,
                          void *y, int32_t rank, const int64_t *shape,
                          const int64_t *strides, double rate, uint64_t seed,
                          uint64_t step, int64_t first);
/* The same of the context's step when the kernel runs (as
 * tessel_dropout_current). */
void tessel_dropout_block_current(tessel_ctx *ctx, int32_t dtype,
                                  const void *x, void *y, int32_t rank,
                                  const int64_t *shape, const int64_t *strides,
                                  double rate, uint64_t seed, int64_t first);

/* out[0 .. count) = *value: a splat constant. `value` is host memory holding
 * one element of dtype (in the model's .so); out is device memory. */
void tessel_fill(tessel_ctx *ctx, int32_t dtype, void *out, int64_t count,
                 const void *value);

/* The data-movement kernel behind broadcast, transpose, slice and concat:
 * for every index (i_0 .. i_{rank-1}) < shape,
 *   out[sum i_d · out_strides[d]] = in[sum i_d · in_strides[d]]
 * (strides in elements; an input stride of 0 broadcasts). */
void tessel_strided_copy(tessel_ctx *ctx, int32_t dtype, const void *in,
                         void *out, int32_t rank, const int64_t *shape,
                         const int64_t *in_strides,
                         const int64_t *out_strides);

typedef enum tessel_reduce_kind {
  TESSEL_REDUCE_SUM = 0,
  TESSEL_REDUCE_MEAN = 1,
  TESSEL_REDUCE_MAX = 2,
} tessel_reduce_kind;

/* Reduces `in` (row-major, `shape` of `rank`) over the dimensions whose bit
 * is set in `reduce_mask` (bit d = dimension d); `out` holds the kept
 * dimensions in order. */
void tessel_reduce(tessel_ctx *ctx, int32_t kind, int32_t dtype,
                   const void *in, void *out, int32_t rank,
                   const int64_t *shape, uint64_t reduce_mask);
/* tessel_reduce of an f16/bf16 `in` into an f32 `out` (ABI 16): a GPU
 * combines in f64 and rounds once, to f32; the CPU reduces in dtype as
 * tessel_reduce does and widens (the unfused ops' values; a GPU's are
 * within the GPU tests' bounds of them). */
void tessel_reduce_f32(tessel_ctx *ctx, int32_t kind, int32_t dtype,
                       const void *in, void *out, int32_t rank,
                       const int64_t *shape, uint64_t reduce_mask);

/* Softmax over the middle dimension of an [outer, dim, inner] view. */
void tessel_softmax(tessel_ctx *ctx, int32_t dtype, const void *x, void *y,
                    int64_t outer, int64_t dim, int64_t inner);

/* Layer norm over rows of `cols`: y = (x - mean) / sqrt(var + eps) · gamma
 * + beta. With beta null and rms set: RMS norm, y = x / sqrt(mean(x²) +
 * eps) · gamma. */
void tessel_layer_norm(tessel_ctx *ctx, int32_t dtype, const void *x,
                       const void *gamma, const void *beta, void *y,
                       int64_t rows, int64_t cols, double eps, int32_t rms);

/* A residual add and the norm after it (ABI 10): sum = a + b, rounded to
 * dtype, then y = tessel_layer_norm(sum) (RMS norm with beta null and rms
 * set), in one pass over the rows. Equal to tessel_binary TESSEL_ADD then
 * tessel_layer_norm. sum may be a or b; y may overlap none of a, b, sum. */
void tessel_add_layer_norm(tessel_ctx *ctx, int32_t dtype, const void *a,
                           const void *b, const void *gamma, const void *beta,
                           void *sum, void *y, int64_t rows, int64_t cols,
                           double eps, int32_t rms);

/* Batch norm (training statistics) of an [outer, channels, inner] view:
 * every channel normalised with the mean and biased variance over outer and
 * inner, then scaled by gamma and shifted by beta. */
void tessel_batch_norm(tessel_ctx *ctx, int32_t dtype, const void *x,
                       const void *gamma, const void *beta, void *y,
                       int64_t outer, int64_t channels, int64_t inner,
                       double eps);

/* out[i, :] = table[ids[i], :] for i < num_ids (out [num_ids, hidden]).
 * `table` holds rows [row_offset, row_offset + rows) of a [vocab, hidden]
 * table (a rank's block under a vocabulary-parallel split); ids index the
 * whole table: an id outside [0, vocab) is an error, an id outside the block
 * gives a zero row. row_offset 0 and rows == vocab: the plain lookup.
 * Summed over the blocks of a split, the outputs are the plain lookup
 * exactly. A bad id records an error on the context and its row gets 0; a
 * block outside [0, vocab) records an error and writes nothing. */
void tessel_embedding(tessel_ctx *ctx, int32_t dtype, int32_t ids_dtype,
                      const void *table, const void *ids, void *out,
                      int64_t num_ids, int64_t rows, int64_t hidden,
                      int64_t row_offset, int64_t vocab);

typedef enum tessel_loss_reduction {
  TESSEL_LOSS_MEAN = 0,
  TESSEL_LOSS_SUM = 1,
  TESSEL_LOSS_NONE = 2,
} tessel_loss_reduction;

/* Softmax cross-entropy of `rows` logit rows of `classes` against integer
 * labels; out is one scalar (mean, sum) or `rows` values (none). A label
 * outside [0, classes) records an error on the context. */
void tessel_cross_entropy(tessel_ctx *ctx, int32_t dtype, int32_t label_dtype,
                          const void *logits, const void *labels, void *out,
                          int64_t rows, int64_t classes, int32_t reduction);

/* tessel_cross_entropy of dtype (TESSEL_F16 or TESSEL_BF16) logits with
 * out f32 (ABI 13): each logit widened (exactly) and the f32 kernel's
 * arithmetic, so the loss equals tessel_cast to f32 then
 * tessel_cross_entropy, with no f32 copy of the logits. */
void tessel_cross_entropy_f32(tessel_ctx *ctx, int32_t dtype,
                              int32_t label_dtype, const void *logits,
                              const void *labels, void *out, int64_t rows,
                              int64_t classes, int32_t reduction);

/* The cross-entropy of soft-capped logits, softcap · tanh(x / softcap)
 * (ABI 27: Gemma 2's final_logit_softcapping, fused into the loss so that
 * no capped copy of the logits is stored): tessel_cross_entropy
 * (loss_dtype dtype) or tessel_cross_entropy_f32 (loss_dtype f32 of 16-bit
 * logits) of the capped row, capped in the arithmetic type. softcap finite
 * and >= 0; 0 is no cap. */
void tessel_cross_entropy_softcap(tessel_ctx *ctx, int32_t dtype,
                                  int32_t loss_dtype, int32_t label_dtype,
                                  const void *logits, const void *labels,
                                  void *out, int64_t rows, int64_t classes,
                                  int32_t reduction, double softcap);

/* The cross-entropy of PyTorch's label-smoothed target (ABI 28:
 * label_smoothing ε, fused into the loss so that no logits-sized term is
 * stored): with y the logits (soft-capped as tessel_cross_entropy_softcap
 * caps them when softcap > 0) of a row of V classes, the row's loss is
 * lse(y) − (1 − ε)·y[label] − ε·Σy / V, then reduced. loss_dtype as
 * tessel_cross_entropy_softcap's; label_smoothing in [0, 1] (0 is the
 * plain loss, bit for bit). */
void tessel_cross_entropy_smoothed(tessel_ctx *ctx, int32_t dtype,
                                   int32_t loss_dtype, int32_t label_dtype,
                                   const void *logits, const void *labels,
                                   void *out, int64_t rows, int64_t classes,
                                   int32_t reduction, double softcap,
                                   double label_smoothing);

/* Multi-head attention: q [B, S, H, D], k [B, T, Hkv, D], v [B, T, Hkv, E],
 * out [B, S, H, E]; query head h reads kv head h / (H / Hkv); with causal,
 * query i sees keys 0..i. */
void tessel_attention(tessel_ctx *ctx, int32_t dtype, const void *q,
                      const void *k, const void *v, void *out, int64_t batch,
                      int64_t seq, int64_t kv_seq, int64_t heads,
                      int64_t kv_heads, int64_t head_dim, int64_t value_dim,
                      double scale, int32_t causal);

/* tessel_attention that also writes lse [B, H, S] (ABI 11): the natural
 * log of each query row's softmax denominator, max + log Σ e^(s - max)
 * over the scaled scores the row sees (-inf for a row that sees none), in
 * f64 for TESSEL_F64 and f32 for every other dtype. tessel_attention_grad_lse
 * reads it with out. lse may overlap none of q, k, v, out. */
void tessel_attention_lse(tessel_ctx *ctx, int32_t dtype, const void *q,
                          const void *k, const void *v, void *out, void *lse,
                          int64_t batch, int64_t seq, int64_t kv_seq,
                          int64_t heads, int64_t kv_heads, int64_t head_dim,
                          int64_t value_dim, double scale, int32_t causal);

/* tessel_attention_lse with a sliding window (ABI 20): with causal and
 * window > 0, query i sees keys max(0, i - window + 1)..i, its last
 * `window` keys (Hugging Face's sliding_window); window 0 is no limit and
 * a window needs causal. lse may be null (the output alone). */
void tessel_attention_window(tessel_ctx *ctx, int32_t dtype, const void *q,
                             const void *k, const void *v, void *out, void *lse,
                             int64_t batch, int64_t seq, int64_t kv_seq,
                             int64_t heads, int64_t kv_heads, int64_t head_dim,
                             int64_t value_dim, double scale, int32_t causal,
                             int64_t window);

/* tessel_attention_window with soft-capped scores (ABI 24): each scaled
 * score s becomes softcap · tanh(s / softcap) before the mask and the
 * softmax (Gemma 2's attn_logit_softcapping); lse is over the capped
 * scores. softcap 0 is no cap; otherwise it is finite and positive. */
void tessel_attention_softcap(tessel_ctx *ctx, int32_t dtype, const void *q,
                              const void *k, const void *v, void *out,
                              void *lse, int64_t batch, int64_t seq,
                              int64_t kv_seq, int64_t heads, int64_t kv_heads,
                              int64_t head_dim, int64_t value_dim, double scale,
                              int32_t causal, int64_t window, double softcap);

/* tessel_attention_softcap over a block of the queries (ABI 31: context
 * parallelism, a rank's block of the sequence against every key): query
 * row i is at position i + query_offset of the kv_seq keys, where the
 * causal diagonal and the window meet it. query_offset > 0 needs causal
 * and query_offset + seq <= kv_seq; 0 is tessel_attention_softcap. */
void tessel_attention_block(tessel_ctx *ctx, int32_t dtype, const void *q,
                            const void *k, const void *v, void *out, void *lse,
                            int64_t batch, int64_t seq, int64_t kv_seq,
                            int64_t heads, int64_t kv_heads, int64_t head_dim,
                            int64_t value_dim, double scale, int32_t causal,
                            int64_t window, double softcap,
                            int64_t query_offset);

/* Rotary position embedding (ABI 19) of x viewed as [outer, positions,
 * heads, head_dim] (head_dim even): the pair i < head_dim / 2 of position
 * p, (i, i + head_dim / 2), or (2i, 2i + 1) with interleaved, rotated by
 * p · f_i, f_i = theta^(-2i / head_dim), by the negative angle with inverse
 * (the gradient). A factor >= 1 applies Llama 3.1's frequency scaling to
 * f_i (nn.rope's `scaling`: factor, low, high, original); factor 0: none.
 * y may be x; otherwise they do not overlap. */
void tessel_rope(tessel_ctx *ctx, int32_t dtype, const void *x, void *y,
                 int64_t outer, int64_t positions, int64_t heads,
                 int64_t head_dim, double theta, int32_t interleaved,
                 int32_t inverse, double factor, double low_freq_factor,
                 double high_freq_factor, double original_positions);

/* tessel_rope under YaRN's frequency scaling (ABI 25, Hugging Face's
 * rope_type "yarn"): pair i's frequency theta^(-2i / head_dim) kept below
 * the pair that turns beta_fast times over original_positions, divided by
 * factor above the one that turns beta_slow times, blended linearly in the
 * pair between (the correction range floored and ceiled when truncate).
 * factor >= 1, positive betas and original, theta > 1. YaRN's attention
 * factor is the model's (a scale of its scores). */
void tessel_rope_yarn(tessel_ctx *ctx, int32_t dtype, const void *x, void *y,
                      int64_t outer, int64_t positions, int64_t heads,
                      int64_t head_dim, double theta, int32_t interleaved,
                      int32_t inverse, double factor, double beta_fast,
                      double beta_slow, double original_positions,
                      int32_t truncate);

/* tessel_rope over the first rotary_dim elements of each head (even, in
 * (0, head_dim]; the rest are copied: a partial rope, Phi-4-mini's
 * partial_rotary_factor, GPT-NeoX's rotary_pct), pair i's frequency
 * theta^(-2i / rotary_dim) divided by pair_factors[i] where pair_factors is
 * not null (ABI 26: LongRoPE's short or long factors, Hugging Face's
 * rope_type "longrope"; rotary_dim / 2 of them, each finite and positive,
 * at most 128 pairs), cos and sin times attention_factor (finite and
 * positive: LongRoPE's, on the turned elements only). With a factor, the
 * inverse is the transpose (the gradient). */
void tessel_rope_factors(tessel_ctx *ctx, int32_t dtype, const void *x, void *y,
                         int64_t outer, int64_t positions, int64_t heads,
                         int64_t head_dim, int64_t rotary_dim, double theta,
                         int32_t interleaved, int32_t inverse,
                         const double *pair_factors, double attention_factor);

/* tessel_rope, tessel_rope_yarn and tessel_rope_factors over a block of
 * the positions (ABI 31: context parallelism, a rank's block of the
 * sequence): position p of x is turned as position first_position + p
 * (>= 0). first_position 0 is the entry without _block. */
void tessel_rope_block(tessel_ctx *ctx, int32_t dtype, const void *x, void *y,
                       int64_t outer, int64_t positions, int64_t heads,
                       int64_t head_dim, double theta, int32_t interleaved,
                       int32_t inverse, double factor, double low_freq_factor,
                       double high_freq_factor, double original_positions,
                       int64_t first_position);
void tessel_rope_yarn_block(tessel_ctx *ctx, int32_t dtype, const void *x,
                            void *y, int64_t outer, int64_t positions,
                            int64_t heads, int64_t head_dim, double theta,
                            int32_t interleaved, int32_t inverse, double factor,
                            double beta_fast, double beta_slow,
                            double original_positions, int32_t truncate,
                            int64_t first_position);
void tessel_rope_factors_block(tessel_ctx *ctx, int32_t dtype, const void *x,
                               void *y, int64_t outer, int64_t positions,
                               int64_t heads, int64_t head_dim,
                               int64_t rotary_dim, double theta,
                               int32_t interleaved, int32_t inverse,
                               const double *pair_factors,
                               double attention_factor, int64_t first_position);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* TESSEL_RUNTIME_KERNELS_H */
