//===- KernelProfile.cpp - Timed definitions of the runtime kernels -------===//
//
// See KernelProfile.h. The definitions below carry the C ABI names of the
// kernels that tessel-lower-to-runtime emits; the executable exports them
// (ENABLE_EXPORTS), so a model .so opened without RTLD_DEEPBIND resolves its
// kernel calls here first. Including runtime.h makes the compiler check that
// every signature matches the runtime's.
//
//===----------------------------------------------------------------------===//

#include "bench/KernelProfile.h"

#include "tessel/runtime.h"

#include <dlfcn.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

namespace tessel_bench {
namespace {

KernelStat stats[kNumKernels];

const char *const names[] = {
    "matmul",         "attention",          "layer_norm",
    "softmax",        "binary",             "unary",
    "strided_copy",   "embedding",          "cross_entropy",
    "reduce",         "batch_norm",         "cast",
    "dropout",        "copy",               "copy_to_device",
    "matmul_epilogue", "add_layer_norm",    "fill",
    "unary_grad",     "softmax_grad",       "layer_norm_grad",
    "batch_norm_grad", "cross_entropy_grad", "embedding_grad",
    "attention_grad", "layer_norm_grad_add", "label_logit",
    "sub_label",      "sum_squares",        "clip_scale",
    "optimizer_update", "zero"};
static_assert(sizeof(names) / sizeof(names[0]) == kNumKernels,
              "a name per kernel");

/// The runtime's definition of `name`: the next one after this executable.
void *realKernel(const char *name) {
  void *fn = ::dlsym(RTLD_NEXT, name);
  if (!fn) {
    std::fprintf(stderr,
                 "tessel-bench-step: error: cannot find the runtime's %s "
                 "(is libtessel_runtime.so loaded?)\n",
                 name);
    std::abort();
  }
  return fn;
}

/// Times one forwarded call.
class Timed {
public:
  explicit Timed(Kernel k) : k(k), start(std::chrono::steady_clock::now()) {}
  ~Timed() {
    std::chrono::duration<double> elapsed =
        std::chrono::steady_clock::now() - start;
    stats[k].calls += 1;
    stats[k].seconds += elapsed.count();
  }

private:
  Kernel k;
  std::chrono::steady_clock::time_point start;
};

} // namespace

const char *kernelName(int k) {
  return k >= 0 && k < kNumKernels ? names[k] : "?";
}
const KernelStat *kernelStats() { return stats; }
void resetKernelStats() {
  for (KernelStat &s : stats)
    s = KernelStat{};
}

} // namespace tessel_bench

// PARAMS is the parenthesised parameter list, ARGS the parenthesised
// argument list that forwards it.
#define TESSEL_BENCH_WRAP(KIND, NAME, PARAMS, ARGS)                            \
  extern "C" void NAME PARAMS {                                                \
    using Fn = void(*) PARAMS;                                                 \
    static Fn real = reinterpret_cast<Fn>(                                     \
        tessel_bench::realKernel(#NAME));                                      \
    tessel_bench::Timed timed(tessel_bench::KIND);                             \
    real ARGS;                                                                 \
  }

TESSEL_BENCH_WRAP(kMatmul, tessel_matmul,
                  (tessel_ctx * ctx, int32_t dtype, const void *a,
                   const void *b, void *c, int64_t batch, int64_t m, int64_t n,
                   int64_t k, int32_t trans_a, int32_t trans_b,
                   int32_t b_shared),
                  (ctx, dtype, a, b, c, batch, m, n, k, trans_a, trans_b,
                   b_shared))
TESSEL_BENCH_WRAP(kBinary, tessel_binary,
                  (tessel_ctx * ctx, int32_t op, int32_t dtype, const void *a,
                   const void *b, void *out, int64_t n),
                  (ctx, op, dtype, a, b, out, n))
// (Timed as a binary op: it replaces a broadcast copy and one.)
TESSEL_BENCH_WRAP(kBinary, tessel_binary_broadcast,
                  (tessel_ctx * ctx, int32_t op, int32_t dtype, const void *a,
                   const void *b, void *out, int64_t rows, int64_t cols,
                   int32_t layout),
                  (ctx, op, dtype, a, b, out, rows, cols, layout))
TESSEL_BENCH_WRAP(kUnary, tessel_unary,
                  (tessel_ctx * ctx, int32_t op, int32_t dtype, const void *x,
                   void *y, int64_t n),
                  (ctx, op, dtype, x, y, n))
TESSEL_BENCH_WRAP(kCast, tessel_cast,
                  (tessel_ctx * ctx, int32_t src_dtype, int32_t dst_dtype,
                   const void *x, void *y, int64_t n),
                  (ctx, src_dtype, dst_dtype, x, y, n))
TESSEL_BENCH_WRAP(kDropout, tessel_dropout,
                  (tessel_ctx * ctx, int32_t dtype, const void *x, void *y,
                   int64_t n, double rate, uint64_t seed, uint64_t step,
                   int64_t first),
                  (ctx, dtype, x, y, n, rate, seed, step, first))
TESSEL_BENCH_WRAP(kStridedCopy, tessel_strided_copy,
                  (tessel_ctx * ctx, int32_t dtype, const void *in, void *out,
                   int32_t rank, const int64_t *shape,
                   const int64_t *in_strides, const int64_t *out_strides),
                  (ctx, dtype, in, out, rank, shape, in_strides, out_strides))
TESSEL_BENCH_WRAP(kReduce, tessel_reduce,
                  (tessel_ctx * ctx, int32_t kind, int32_t dtype,
                   const void *in, void *out, int32_t rank,
                   const int64_t *shape, uint64_t reduce_mask),
                  (ctx, kind, dtype, in, out, rank, shape, reduce_mask))
TESSEL_BENCH_WRAP(kSoftmax, tessel_softmax,
                  (tessel_ctx * ctx, int32_t dtype, const void *x, void *y,
                   int64_t outer, int64_t dim, int64_t inner),
                  (ctx, dtype, x, y, outer, dim, inner))
TESSEL_BENCH_WRAP(kLayerNorm, tessel_layer_norm,
                  (tessel_ctx * ctx, int32_t dtype, const void *x,
                   const void *gamma, const void *beta, void *y, int64_t rows,
                   int64_t cols, double eps, int32_t rms),
                  (ctx, dtype, x, gamma, beta, y, rows, cols, eps, rms))
TESSEL_BENCH_WRAP(kBatchNorm, tessel_batch_norm,
                  (tessel_ctx * ctx, int32_t dtype, const void *x,
                   const void *gamma, const void *beta, void *y, int64_t outer,
                   int64_t channels, int64_t inner, double eps),
                  (ctx, dtype, x, gamma, beta, y, outer, channels, inner, eps))
TESSEL_BENCH_WRAP(kEmbedding, tessel_embedding,
                  (tessel_ctx * ctx, int32_t dtype, int32_t ids_dtype,
                   const void *table, const void *ids, void *out,
                   int64_t num_ids, int64_t rows, int64_t hidden,
                   int64_t row_offset, int64_t vocab),
                  (ctx, dtype, ids_dtype, table, ids, out, num_ids, rows,
                   hidden, row_offset, vocab))
TESSEL_BENCH_WRAP(kCrossEntropy, tessel_cross_entropy,
                  (tessel_ctx * ctx, int32_t dtype, int32_t label_dtype,
                   const void *logits, const void *labels, void *out,
                   int64_t rows, int64_t classes, int32_t reduction),
                  (ctx, dtype, label_dtype, logits, labels, out, rows, classes,
                   reduction))
TESSEL_BENCH_WRAP(kAttention, tessel_attention,
                  (tessel_ctx * ctx, int32_t dtype, const void *q,
                   const void *k, const void *v, void *out, int64_t batch,
                   int64_t seq, int64_t kv_seq, int64_t heads,
                   int64_t kv_heads, int64_t head_dim, int64_t value_dim,
                   double scale, int32_t causal),
                  (ctx, dtype, q, k, v, out, batch, seq, kv_seq, heads,
                   kv_heads, head_dim, value_dim, scale, causal))
// The fused forms (GEMM epilogues, ABI 6; residual add + norm, ABI 10;
// the step read on the device, ABI 9; attention's log-sum-exp, ABI 11, and
// sliding window, ABI 20)
// count with their kernels, or as kernels of their own.
TESSEL_BENCH_WRAP(kMatmulEpilogue, tessel_matmul_epilogue,
                  (tessel_ctx * ctx, int32_t dtype, const void *a,
                   const void *b, void *c, int64_t batch, int64_t m, int64_t n,
                   int64_t k, int32_t trans_a, int32_t trans_b,
                   int32_t b_shared, double beta, int32_t epilogue,
                   const void *bias),
                  (ctx, dtype, a, b, c, batch, m, n, k, trans_a, trans_b,
                   b_shared, beta, epilogue, bias))
TESSEL_BENCH_WRAP(kMatmulEpilogue, tessel_matmul_epilogue_aux,
                  (tessel_ctx * ctx, int32_t dtype, const void *a,
                   const void *b, void *c, int64_t batch, int64_t m, int64_t n,
                   int64_t k, int32_t trans_a, int32_t trans_b,
                   int32_t b_shared, double beta, int32_t epilogue,
                   const void *bias, void *aux),
                  (ctx, dtype, a, b, c, batch, m, n, k, trans_a, trans_b,
                   b_shared, beta, epilogue, bias, aux))
TESSEL_BENCH_WRAP(kAddLayerNorm, tessel_add_layer_norm,
                  (tessel_ctx * ctx, int32_t dtype, const void *a,
                   const void *b, const void *gamma, const void *beta,
                   void *sum, void *y, int64_t rows, int64_t cols, double eps,
                   int32_t rms),
                  (ctx, dtype, a, b, gamma, beta, sum, y, rows, cols, eps,
                   rms))
TESSEL_BENCH_WRAP(kFill, tessel_fill,
                  (tessel_ctx * ctx, int32_t dtype, void *out, int64_t count,
                   const void *value),
                  (ctx, dtype, out, count, value))
TESSEL_BENCH_WRAP(kDropout, tessel_dropout_block,
                  (tessel_ctx * ctx, int32_t dtype, const void *x, void *y,
                   int32_t rank, const int64_t *shape, const int64_t *strides,
                   double rate, uint64_t seed, uint64_t step, int64_t first),
                  (ctx, dtype, x, y, rank, shape, strides, rate, seed, step,
                   first))
TESSEL_BENCH_WRAP(kDropout, tessel_dropout_current,
                  (tessel_ctx * ctx, int32_t dtype, const void *x, void *y,
                   int64_t n, double rate, uint64_t seed, int64_t first),
                  (ctx, dtype, x, y, n, rate, seed, first))
TESSEL_BENCH_WRAP(kDropout, tessel_dropout_block_current,
                  (tessel_ctx * ctx, int32_t dtype, const void *x, void *y,
                   int32_t rank, const int64_t *shape, const int64_t *strides,
                   double rate, uint64_t seed, int64_t first),
                  (ctx, dtype, x, y, rank, shape, strides, rate, seed, first))
TESSEL_BENCH_WRAP(kAttention, tessel_attention_lse,
                  (tessel_ctx * ctx, int32_t dtype, const void *q,
                   const void *k, const void *v, void *out, void *lse,
                   int64_t batch, int64_t seq, int64_t kv_seq, int64_t heads,
                   int64_t kv_heads, int64_t head_dim, int64_t value_dim,
                   double scale, int32_t causal),
                  (ctx, dtype, q, k, v, out, lse, batch, seq, kv_seq, heads,
                   kv_heads, head_dim, value_dim, scale, causal))
TESSEL_BENCH_WRAP(kAttention, tessel_attention_window,
                  (tessel_ctx * ctx, int32_t dtype, const void *q,
                   const void *k, const void *v, void *out, void *lse,
                   int64_t batch, int64_t seq, int64_t kv_seq, int64_t heads,
                   int64_t kv_heads, int64_t head_dim, int64_t value_dim,
                   double scale, int32_t causal, int64_t window),
                  (ctx, dtype, q, k, v, out, lse, batch, seq, kv_seq, heads,
                   kv_heads, head_dim, value_dim, scale, causal, window))
TESSEL_BENCH_WRAP(kCopy, tessel_copy,
                  (tessel_ctx * ctx, void *dst, const void *src,
                   int64_t bytes),
                  (ctx, dst, src, bytes))
TESSEL_BENCH_WRAP(kCopyToDevice, tessel_copy_to_device,
                  (tessel_ctx * ctx, void *dst, const void *src,
                   int64_t bytes),
                  (ctx, dst, src, bytes))

// The training step's kernels. tessel_zero is also what the launcher's
// zeroGrads calls (linked into this executable, so that call is timed too).
TESSEL_BENCH_WRAP(kUnaryGrad, tessel_unary_grad,
                  (tessel_ctx * ctx, int32_t op, int32_t dtype, const void *x,
                   const void *dy, void *dx, int64_t n),
                  (ctx, op, dtype, x, dy, dx, n))
TESSEL_BENCH_WRAP(kSoftmaxGrad, tessel_softmax_grad,
                  (tessel_ctx * ctx, int32_t dtype, const void *y,
                   const void *dy, void *dx, int64_t outer, int64_t dim,
                   int64_t inner),
                  (ctx, dtype, y, dy, dx, outer, dim, inner))
TESSEL_BENCH_WRAP(kLayerNormGrad, tessel_layer_norm_grad,
                  (tessel_ctx * ctx, int32_t dtype, const void *x,
                   const void *gamma, const void *dy, void *dx, void *dgamma,
                   void *dbeta, int64_t rows, int64_t cols, double eps,
                   int32_t rms),
                  (ctx, dtype, x, gamma, dy, dx, dgamma, dbeta, rows, cols, eps,
                   rms))
TESSEL_BENCH_WRAP(kBatchNormGrad, tessel_batch_norm_grad,
                  (tessel_ctx * ctx, int32_t dtype, const void *x,
                   const void *gamma, const void *dy, void *dx, void *dgamma,
                   void *dbeta, int64_t outer, int64_t channels, int64_t inner,
                   double eps),
                  (ctx, dtype, x, gamma, dy, dx, dgamma, dbeta, outer, channels,
                   inner, eps))
TESSEL_BENCH_WRAP(kCrossEntropyGrad, tessel_cross_entropy_grad,
                  (tessel_ctx * ctx, int32_t dtype, int32_t label_dtype,
                   const void *logits, const void *labels, const void *dloss,
                   void *dlogits, int64_t rows, int64_t classes,
                   int32_t reduction),
                  (ctx, dtype, label_dtype, logits, labels, dloss, dlogits, rows,
                   classes, reduction))
TESSEL_BENCH_WRAP(kEmbeddingGrad, tessel_embedding_grad,
                  (tessel_ctx * ctx, int32_t dtype, int32_t ids_dtype,
                   const void *ids, const void *dout, void *dtable,
                   int64_t num_ids, int64_t rows, int64_t hidden,
                   int64_t row_offset, int64_t vocab),
                  (ctx, dtype, ids_dtype, ids, dout, dtable, num_ids, rows,
                   hidden, row_offset, vocab))
TESSEL_BENCH_WRAP(kAttentionGrad, tessel_attention_grad,
                  (tessel_ctx * ctx, int32_t dtype, const void *q,
                   const void *k, const void *v, const void *dout, void *dq,
                   void *dk, void *dv, int64_t batch, int64_t seq,
                   int64_t kv_seq, int64_t heads, int64_t kv_heads,
                   int64_t head_dim, int64_t value_dim, double scale,
                   int32_t causal),
                  (ctx, dtype, q, k, v, dout, dq, dk, dv, batch, seq, kv_seq,
                   heads, kv_heads, head_dim, value_dim, scale, causal))
TESSEL_BENCH_WRAP(kAttentionGrad, tessel_attention_grad_lse,
                  (tessel_ctx * ctx, int32_t dtype, const void *q,
                   const void *k, const void *v, const void *out,
                   const void *lse, const void *dout, void *dq, void *dk,
                   void *dv, int64_t batch, int64_t seq, int64_t kv_seq,
                   int64_t heads, int64_t kv_heads, int64_t head_dim,
                   int64_t value_dim, double scale, int32_t causal),
                  (ctx, dtype, q, k, v, out, lse, dout, dq, dk, dv, batch, seq,
                   kv_seq, heads, kv_heads, head_dim, value_dim, scale, causal))
TESSEL_BENCH_WRAP(kAttentionGrad, tessel_attention_grad_window,
                  (tessel_ctx * ctx, int32_t dtype, const void *q,
                   const void *k, const void *v, const void *out,
                   const void *lse, const void *dout, void *dq, void *dk,
                   void *dv, int64_t batch, int64_t seq, int64_t kv_seq,
                   int64_t heads, int64_t kv_heads, int64_t head_dim,
                   int64_t value_dim, double scale, int32_t causal,
                   int64_t window),
                  (ctx, dtype, q, k, v, out, lse, dout, dq, dk, dv, batch, seq,
                   kv_seq, heads, kv_heads, head_dim, value_dim, scale, causal,
                   window))
TESSEL_BENCH_WRAP(kLayerNormGradAdd, tessel_layer_norm_grad_add,
                  (tessel_ctx * ctx, int32_t dtype, const void *x,
                   const void *gamma, const void *dy, const void *residual,
                   void *dx, void *dgamma, void *dbeta, int64_t rows,
                   int64_t cols, double eps, int32_t rms),
                  (ctx, dtype, x, gamma, dy, residual, dx, dgamma, dbeta, rows,
                   cols, eps, rms))
TESSEL_BENCH_WRAP(kLabelLogit, tessel_label_logit,
                  (tessel_ctx * ctx, int32_t dtype, int32_t label_dtype,
                   const void *logits, const void *labels, void *out,
                   int64_t rows, int64_t classes, int64_t class_offset,
                   int64_t total_classes),
                  (ctx, dtype, label_dtype, logits, labels, out, rows, classes,
                   class_offset, total_classes))
TESSEL_BENCH_WRAP(kSubLabel, tessel_sub_label,
                  (tessel_ctx * ctx, int32_t dtype, int32_t label_dtype,
                   const void *x, const void *labels, const void *values,
                   void *out, int64_t rows, int64_t classes,
                   int64_t class_offset, int64_t total_classes),
                  (ctx, dtype, label_dtype, x, labels, values, out, rows,
                   classes, class_offset, total_classes))
TESSEL_BENCH_WRAP(kSumSquares, tessel_sum_squares,
                  (tessel_ctx * ctx, int32_t dtype, const void *x, int64_t n,
                   void *sum),
                  (ctx, dtype, x, n, sum))
TESSEL_BENCH_WRAP(kClipScale, tessel_clip_scale,
                  (tessel_ctx * ctx, const void *sum_squares, double max_norm,
                   const void *grad_scale, void *scale),
                  (ctx, sum_squares, max_norm, grad_scale, scale))
TESSEL_BENCH_WRAP(kOptimizerUpdate, tessel_optimizer_update,
                  (tessel_ctx * ctx, const tessel_optimizer *opt, int32_t dtype,
                   void *param, const void *grad, const void *grad_scale,
                   void *state0, void *state1, int64_t n, int64_t step,
                   double lr),
                  (ctx, opt, dtype, param, grad, grad_scale, state0, state1, n,
                   step, lr))
TESSEL_BENCH_WRAP(kOptimizerUpdate, tessel_optimizer_update_master,
                  (tessel_ctx * ctx, const tessel_optimizer *opt,
                   int32_t param_dtype, void *param, void *master,
                   int32_t grad_dtype, const void *grad,
                   const void *grad_scale, void *state0, void *state1,
                   int64_t n, int64_t step, double lr),
                  (ctx, opt, param_dtype, param, master, grad_dtype, grad,
                   grad_scale, state0, state1, n, step, lr))
TESSEL_BENCH_WRAP(kOptimizerUpdate, tessel_optimizer_update_current,
                  (tessel_ctx * ctx, const tessel_optimizer *opt,
                   const tessel_lr_schedule *schedule, int32_t dtype,
                   void *param, const void *grad, const void *grad_scale,
                   void *state0, void *state1, int64_t n),
                  (ctx, opt, schedule, dtype, param, grad, grad_scale, state0,
                   state1, n))
TESSEL_BENCH_WRAP(kOptimizerUpdate, tessel_optimizer_update_master_current,
                  (tessel_ctx * ctx, const tessel_optimizer *opt,
                   const tessel_lr_schedule *schedule, int32_t param_dtype,
                   void *param, void *master, int32_t grad_dtype,
                   const void *grad, const void *grad_scale, void *state0,
                   void *state1, int64_t n),
                  (ctx, opt, schedule, param_dtype, param, master, grad_dtype,
                   grad, grad_scale, state0, state1, n))
TESSEL_BENCH_WRAP(kOptimizerUpdate, tessel_optimizer_update_group_current,
                  (tessel_ctx * ctx, const tessel_optimizer *opt,
                   const tessel_lr_schedule *schedule, int32_t param_dtype,
                   int32_t grad_dtype, int32_t master, const void *grad_scale,
                   int64_t count, void *const *pointers, const int64_t *counts),
                  (ctx, opt, schedule, param_dtype, grad_dtype, master,
                   grad_scale, count, pointers, counts))
TESSEL_BENCH_WRAP(kZero, tessel_zero,
                  (tessel_ctx * ctx, void *dst, int64_t bytes),
                  (ctx, dst, bytes))
