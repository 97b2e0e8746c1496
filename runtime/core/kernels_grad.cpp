//===- kernels_grad.cpp - Backward and optimizer entry points -------------===//
//
// As kernels.cpp: count, check, hand to the context's backend.
//
//===----------------------------------------------------------------------===//

#include "core/backend.h"
#include "core/checks.h"
#include "core/lr_schedule.h"

#include <vector>


using namespace tessel;

namespace {

/// A layer norm gradient's entry point: traced as `entry`, its shape and
/// dtype checked, then the backend's kernel, with dgamma and dbeta in f32
/// for the _f32 entries (`f32Params`, of f16/bf16 x only) and in dtype
/// otherwise. With `residual` (the _add entries) dx is added to it, unless
/// there is no element to add to: only the empty column sums are left.
void normGradEntry(tessel_ctx *ctx, const char *entry, int32_t dtype,
                   bool f32Params, const void *x, const void *gamma,
                   const void *dy, const void *residual, void *dx, void *dgamma,
                   void *dbeta, int64_t rows, int64_t cols, double eps,
                   int32_t rms) {
  if (!ctx)
    return;
  KernelScope scope(ctx, entry);
  if (!checkRows(ctx, entry, rows, cols) ||
      !checkWidenedDtype(ctx, entry, dtype, f32Params))
    return;
  int32_t paramDtype = f32Params ? int32_t(TESSEL_F32) : dtype;
  if (residual && rows != 0 && cols != 0)
    ctx->backend->layerNormGradAdd(ctx, dtype, paramDtype, x, gamma, dy,
                                   residual, dx, dgamma, dbeta, rows, cols, eps,
                                   rms != 0);
  else
    ctx->backend->layerNormGrad(ctx, dtype, paramDtype, x, gamma, dy, dx,
                                dgamma, dbeta, rows, cols, eps, rms != 0);
}

/// An embedding gradient's entry point: traced as `entry`, its arguments
/// checked, dtable in f32 for the _f32 entry (`f32Table`) and in dtype
/// otherwise.
void embeddingGradEntry(tessel_ctx *ctx, const char *entry, int32_t dtype,
                        bool f32Table, int32_t idsDtype, const void *ids,
                        const void *dout, void *dtable, int64_t numIds,
                        int64_t rows, int64_t hidden, int64_t rowOffset,
                        int64_t vocab) {
  if (!ctx)
    return;
  KernelScope scope(ctx, entry);
  if (!checkIndexDtype(ctx, entry, "ids", idsDtype))
    return;
  if (numIds < 0 || hidden < 0) {
    setError(ctx, "%s: negative shape", entry);
    return;
  }
  if (!checkBlock(ctx, entry, "rows", rows, rowOffset, vocab) ||
      !checkWidenedDtype(ctx, entry, dtype, f32Table))
    return;
  ctx->backend->embeddingGrad(
      ctx, dtype, f32Table ? int32_t(TESSEL_F32) : dtype, idsDtype, ids, dout,
      dtable, numIds, rows, hidden, rowOffset, vocab);
}

/// The vocabulary-parallel kernels' front: traced as `entry`, the block's
/// arguments checked as the label kernels' (and 16-bit logits for f32
/// statistics, `f32Stats`: the _f32 entries) and the loss's options;
/// then run(statsDtype).
template <class Run>
void vocabLossEntry(tessel_ctx *ctx, const char *entry, int32_t dtype,
                    bool f32Stats, int32_t labelDtype, int64_t rows,
                    int64_t classes, int64_t classOffset, int64_t totalClasses,
                    LossOptions options, Run &&run) {
  if (!ctx)
    return;
  KernelScope scope(ctx, entry);
  if (checkLabelArgs(ctx, entry, dtype, labelDtype, rows, classes, classOffset,
                     totalClasses) &&
      checkWidenedDtype(ctx, entry, dtype, f32Stats) &&
      checkLossOptions(ctx, entry, options))
    run(f32Stats ? int32_t(TESSEL_F32) : dtype);
}

/// tessel_vocab_loss_stats(_f32)'s body.
void vocabLossStats(tessel_ctx *ctx, const char *entry, int32_t dtype,
                    bool f32Stats, int32_t label_dtype, const void *logits,
                    const void *labels, VocabStats stats, int64_t rows,
                    int64_t classes, int64_t class_offset,
                    int64_t total_classes, double softcap) {
  vocabLossEntry(
      ctx, entry, dtype, f32Stats, label_dtype, rows, classes, class_offset,
      total_classes, LossOptions{softcap, 0.0}, [&](int32_t statsDtype) {
        ctx->backend->vocabLossStats(ctx, dtype, statsDtype, label_dtype,
                                     logits, labels, stats, rows, classes,
                                     class_offset, total_classes, softcap);
      });
}

/// tessel_vocab_loss_grad(_f32)'s body.
void vocabLossGrad(tessel_ctx *ctx, const char *entry, int32_t dtype,
                   bool f32Stats, int32_t label_dtype, const void *logits,
                   const void *labels, const void *max, const void *sum_exp,
                   const void *row_grad, void *dlogits, int64_t rows,
                   int64_t classes, int64_t class_offset, int64_t total_classes,
                   LossOptions options) {
  vocabLossEntry(ctx, entry, dtype, f32Stats, label_dtype, rows, classes,
                 class_offset, total_classes, options, [&](int32_t statsDtype) {
                   ctx->backend->vocabLossGrad(
                       ctx, dtype, statsDtype, label_dtype, logits, labels, max,
                       sum_exp, row_grad, dlogits, rows, classes, class_offset,
                       total_classes, options);
                 });
}

} // namespace

extern "C" {

void tessel_unary_grad(tessel_ctx *ctx, int32_t op, int32_t dtype,
                       const void *x, const void *dy, void *dx, int64_t n) {
  if (!ctx)
    return;
  KernelScope scope(ctx, __func__);
  if (!checkDtype(ctx, "tessel_unary_grad", dtype, isFloatDtype(dtype)))
    return;
  if (op < TESSEL_NEG || op > TESSEL_SILU) {
    setError(ctx, "tessel_unary_grad: unknown op %d", op);
    return;
  }
  ctx->backend->unaryGrad(ctx, op, dtype, x, dy, dx, n);
}

void tessel_softmax_grad(tessel_ctx *ctx, int32_t dtype, const void *y,
                         const void *dy, void *dx, int64_t outer, int64_t dim,
                         int64_t inner) {
  if (!ctx)
    return;
  KernelScope scope(ctx, __func__);
  if (!checkDtype(ctx, "tessel_softmax_grad", dtype, isFloatDtype(dtype)))
    return;
  ctx->backend->softmaxGrad(ctx, dtype, y, dy, dx, outer, dim, inner);
}

void tessel_layer_norm_grad(tessel_ctx *ctx, int32_t dtype, const void *x,
                            const void *gamma, const void *dy, void *dx,
                            void *dgamma, void *dbeta, int64_t rows,
                            int64_t cols, double eps, int32_t rms) {
  normGradEntry(ctx, __func__, dtype, false, x, gamma, dy, nullptr, dx, dgamma,
                dbeta, rows, cols, eps, rms);
}

void tessel_layer_norm_grad_add(tessel_ctx *ctx, int32_t dtype, const void *x,
                                const void *gamma, const void *dy,
                                const void *residual, void *dx, void *dgamma,
                                void *dbeta, int64_t rows, int64_t cols,
                                double eps, int32_t rms) {
  normGradEntry(ctx, __func__, dtype, false, x, gamma, dy, residual, dx, dgamma,
                dbeta, rows, cols, eps, rms);
}

void tessel_layer_norm_grad_f32(tessel_ctx *ctx, int32_t dtype, const void *x,
                                const void *gamma, const void *dy, void *dx,
                                void *dgamma, void *dbeta, int64_t rows,
                                int64_t cols, double eps, int32_t rms) {
  normGradEntry(ctx, __func__, dtype, true, x, gamma, dy, nullptr, dx, dgamma,
                dbeta, rows, cols, eps, rms);
}

void tessel_layer_norm_grad_add_f32(tessel_ctx *ctx, int32_t dtype,
                                    const void *x, const void *gamma,
                                    const void *dy, const void *residual,
                                    void *dx, void *dgamma, void *dbeta,
                                    int64_t rows, int64_t cols, double eps,
                                    int32_t rms) {
  normGradEntry(ctx, __func__, dtype, true, x, gamma, dy, residual, dx, dgamma,
                dbeta, rows, cols, eps, rms);
}

void tessel_batch_norm_grad(tessel_ctx *ctx, int32_t dtype, const void *x,
                            const void *gamma, const void *dy, void *dx,
                            void *dgamma, void *dbeta, int64_t outer,
                            int64_t channels, int64_t inner, double eps) {
  if (!ctx)
    return;
  KernelScope scope(ctx, __func__);
  if (outer < 0 || channels < 0 || inner < 0) {
    setError(ctx, "tessel_batch_norm_grad: negative shape");
    return;
  }
  if (!checkDtype(ctx, "tessel_batch_norm_grad", dtype, isFloatDtype(dtype)))
    return;
  ctx->backend->batchNormGrad(ctx, dtype, x, gamma, dy, dx, dgamma, dbeta,
                              outer, channels, inner, eps);
}

void tessel_cross_entropy_grad(tessel_ctx *ctx, int32_t dtype,
                               int32_t label_dtype, const void *logits,
                               const void *labels, const void *dloss,
                               void *dlogits, int64_t rows, int64_t classes,
                               int32_t reduction) {
  lossEntry(ctx, __func__, dtype, false, label_dtype, rows, classes, reduction,
            [&](int32_t lossDtype) {
              ctx->backend->crossEntropyGrad(
                  ctx, dtype, lossDtype, label_dtype, logits, labels, dloss,
                  dlogits, rows, classes, reduction, LossOptions{});
            });
}

void tessel_cross_entropy_grad_f32(tessel_ctx *ctx, int32_t dtype,
                                   int32_t label_dtype, const void *logits,
                                   const void *labels, const void *dloss,
                                   void *dlogits, int64_t rows,
                                   int64_t classes, int32_t reduction) {
  lossEntry(ctx, __func__, dtype, true, label_dtype, rows, classes, reduction,
            [&](int32_t lossDtype) {
              ctx->backend->crossEntropyGrad(
                  ctx, dtype, lossDtype, label_dtype, logits, labels, dloss,
                  dlogits, rows, classes, reduction, LossOptions{});
            });
}

/// The _softcap and _smoothed gradients' front and call.
static void optionsLossGrad(tessel_ctx *ctx, const char *entry, int32_t dtype,
                            int32_t loss_dtype, int32_t label_dtype,
                            const void *logits, const void *labels,
                            const void *dloss, void *dlogits, int64_t rows,
                            int64_t classes, int32_t reduction,
                            LossOptions options) {
  optionsLossEntry(ctx, entry, dtype, loss_dtype, label_dtype, rows, classes,
                   reduction, options, [&] {
                     ctx->backend->crossEntropyGrad(
                         ctx, dtype, loss_dtype, label_dtype, logits, labels,
                         dloss, dlogits, rows, classes, reduction, options);
                   });
}

void tessel_cross_entropy_grad_softcap(tessel_ctx *ctx, int32_t dtype,
                                       int32_t loss_dtype, int32_t label_dtype,
                                       const void *logits, const void *labels,
                                       const void *dloss, void *dlogits,
                                       int64_t rows, int64_t classes,
                                       int32_t reduction, double softcap) {
  optionsLossGrad(ctx, __func__, dtype, loss_dtype, label_dtype, logits, labels,
                  dloss, dlogits, rows, classes, reduction,
                  LossOptions{softcap, 0.0});
}

void tessel_cross_entropy_grad_smoothed(tessel_ctx *ctx, int32_t dtype,
                                        int32_t loss_dtype, int32_t label_dtype,
                                        const void *logits, const void *labels,
                                        const void *dloss, void *dlogits,
                                        int64_t rows, int64_t classes,
                                        int32_t reduction, double softcap,
                                        double label_smoothing) {
  optionsLossGrad(ctx, __func__, dtype, loss_dtype, label_dtype, logits, labels,
                  dloss, dlogits, rows, classes, reduction,
                  LossOptions{softcap, label_smoothing});
}

/// tessel_cross_entropy_with_grad(_softcap, _smoothed)'s front and call.
static void lossWithGrad(tessel_ctx *ctx, const char *entry, int32_t dtype,
                         int32_t loss_dtype, int32_t label_dtype,
                         const void *logits, const void *labels,
                         const void *dloss, void *out, void *dlogits,
                         int64_t rows, int64_t classes, int32_t reduction,
                         LossOptions options) {
  optionsLossEntry(
      ctx, entry, dtype, loss_dtype, label_dtype, rows, classes, reduction,
      options, [&] {
        // The gradient is the logits' memory or memory of its own.
        int64_t bytes;
        if (__builtin_mul_overflow(rows * classes, tessel_dtype_size(dtype),
                                   &bytes)) {
          setError(ctx, "%s: [%lld, %lld] logits overflow int64 bytes", entry,
                   (long long)rows, (long long)classes);
          return;
        }
        if (dlogits != logits && overlaps(dlogits, bytes, logits, bytes)) {
          setError(ctx,
                   "%s: dlogits overlaps the logits without being them (in "
                   "place is dlogits == logits)",
                   entry);
          return;
        }
        ctx->backend->crossEntropyWithGrad(ctx, dtype, loss_dtype, label_dtype,
                                           logits, labels, dloss, out, dlogits,
                                           rows, classes, reduction, options);
      });
}

void tessel_cross_entropy_with_grad(tessel_ctx *ctx, int32_t dtype,
                                    int32_t loss_dtype, int32_t label_dtype,
                                    const void *logits, const void *labels,
                                    const void *dloss, void *out, void *dlogits,
                                    int64_t rows, int64_t classes,
                                    int32_t reduction) {
  lossWithGrad(ctx, __func__, dtype, loss_dtype, label_dtype, logits, labels,
               dloss, out, dlogits, rows, classes, reduction, LossOptions{});
}

void tessel_cross_entropy_with_grad_softcap(
    tessel_ctx *ctx, int32_t dtype, int32_t loss_dtype, int32_t label_dtype,
    const void *logits, const void *labels, const void *dloss, void *out,
    void *dlogits, int64_t rows, int64_t classes, int32_t reduction,
    double softcap) {
  lossWithGrad(ctx, __func__, dtype, loss_dtype, label_dtype, logits, labels,
               dloss, out, dlogits, rows, classes, reduction,
               LossOptions{softcap, 0.0});
}

void tessel_cross_entropy_with_grad_smoothed(
    tessel_ctx *ctx, int32_t dtype, int32_t loss_dtype, int32_t label_dtype,
    const void *logits, const void *labels, const void *dloss, void *out,
    void *dlogits, int64_t rows, int64_t classes, int32_t reduction,
    double softcap, double label_smoothing) {
  lossWithGrad(ctx, __func__, dtype, loss_dtype, label_dtype, logits, labels,
               dloss, out, dlogits, rows, classes, reduction,
               LossOptions{softcap, label_smoothing});
}

void tessel_label_logit(tessel_ctx *ctx, int32_t dtype, int32_t label_dtype,
                        const void *logits, const void *labels, void *out,
                        int64_t rows, int64_t classes, int64_t class_offset,
                        int64_t total_classes) {
  if (!ctx)
    return;
  KernelScope scope(ctx, __func__);
  if (!checkLabelArgs(ctx, "tessel_label_logit", dtype, label_dtype, rows,
                      classes, class_offset, total_classes))
    return;
  ctx->backend->labelLogit(ctx, dtype, label_dtype, logits, labels, out, rows,
                           classes, class_offset, total_classes);
}

void tessel_sub_label(tessel_ctx *ctx, int32_t dtype, int32_t label_dtype,
                      const void *x, const void *labels, const void *values,
                      void *out, int64_t rows, int64_t classes,
                      int64_t class_offset, int64_t total_classes) {
  if (!ctx)
    return;
  KernelScope scope(ctx, __func__);
  if (!checkLabelArgs(ctx, "tessel_sub_label", dtype, label_dtype, rows,
                      classes, class_offset, total_classes))
    return;
  ctx->backend->subLabel(ctx, dtype, label_dtype, x, labels, values, out, rows,
                         classes, class_offset, total_classes);
}

void tessel_vocab_loss_stats(tessel_ctx *ctx, int32_t dtype,
                             int32_t label_dtype, const void *logits,
                             const void *labels, void *max, void *sum_exp,
                             void *label_logit, void *logit_sum, int64_t rows,
                             int64_t classes, int64_t class_offset,
                             int64_t total_classes, double softcap) {
  vocabLossStats(ctx, __func__, dtype, false, label_dtype, logits, labels,
                 VocabStats{max, sum_exp, label_logit, logit_sum}, rows,
                 classes, class_offset, total_classes, softcap);
}

void tessel_vocab_loss_stats_f32(tessel_ctx *ctx, int32_t dtype,
                                 int32_t label_dtype, const void *logits,
                                 const void *labels, void *max, void *sum_exp,
                                 void *label_logit, void *logit_sum,
                                 int64_t rows, int64_t classes,
                                 int64_t class_offset, int64_t total_classes,
                                 double softcap) {
  vocabLossStats(ctx, __func__, dtype, true, label_dtype, logits, labels,
                 VocabStats{max, sum_exp, label_logit, logit_sum}, rows,
                 classes, class_offset, total_classes, softcap);
}

void tessel_vocab_loss_grad(tessel_ctx *ctx, int32_t dtype, int32_t label_dtype,
                            const void *logits, const void *labels,
                            const void *max, const void *sum_exp,
                            const void *row_grad, void *dlogits, int64_t rows,
                            int64_t classes, int64_t class_offset,
                            int64_t total_classes, double softcap,
                            double label_smoothing) {
  vocabLossGrad(ctx, __func__, dtype, false, label_dtype, logits, labels, max,
                sum_exp, row_grad, dlogits, rows, classes, class_offset,
                total_classes, LossOptions{softcap, label_smoothing});
}

void tessel_vocab_loss_grad_f32(tessel_ctx *ctx, int32_t dtype,
                                int32_t label_dtype, const void *logits,
                                const void *labels, const void *max,
                                const void *sum_exp, const void *row_grad,
                                void *dlogits, int64_t rows, int64_t classes,
                                int64_t class_offset, int64_t total_classes,
                                double softcap, double label_smoothing) {
  vocabLossGrad(ctx, __func__, dtype, true, label_dtype, logits, labels, max,
                sum_exp, row_grad, dlogits, rows, classes, class_offset,
                total_classes, LossOptions{softcap, label_smoothing});
}

void tessel_mask_labels(tessel_ctx *ctx, int32_t label_dtype, int32_t dtype,
                        const void *labels, int64_t ignore_index, void *safe,
                        void *weights, int64_t n) {
  if (!ctx)
    return;
  KernelScope scope(ctx, __func__);
  if (!checkDtype(ctx, __func__, dtype, isFloatDtype(dtype)) ||
      !checkIndexDtype(ctx, __func__, "labels", label_dtype))
    return;
  int64_t labelBytes, weightBytes;
  if (n < 0 ||
      __builtin_mul_overflow(n, tessel_dtype_size(label_dtype), &labelBytes) ||
      __builtin_mul_overflow(n, tessel_dtype_size(dtype), &weightBytes)) {
    setError(ctx, "%s: bad label count %lld", __func__, (long long)n);
    return;
  }
  // safe may be the labels (in place); the weights are memory of their own.
  if ((safe != labels && overlaps(safe, labelBytes, labels, labelBytes)) ||
      overlaps(weights, weightBytes, labels, labelBytes) ||
      overlaps(weights, weightBytes, safe, labelBytes)) {
    setError(ctx, "%s: outputs overlap the labels or each other", __func__);
    return;
  }
  ctx->backend->maskLabels(ctx, label_dtype, dtype, labels, ignore_index, safe,
                           weights, n);
}

void tessel_embedding_grad(tessel_ctx *ctx, int32_t dtype, int32_t ids_dtype,
                           const void *ids, const void *dout, void *dtable,
                           int64_t num_ids, int64_t rows, int64_t hidden,
                           int64_t row_offset, int64_t vocab) {
  embeddingGradEntry(ctx, __func__, dtype, false, ids_dtype, ids, dout, dtable,
                     num_ids, rows, hidden, row_offset, vocab);
}

void tessel_embedding_grad_f32(tessel_ctx *ctx, int32_t dtype,
                               int32_t ids_dtype, const void *ids,
                               const void *dout, void *dtable, int64_t num_ids,
                               int64_t rows, int64_t hidden, int64_t row_offset,
                               int64_t vocab) {
  embeddingGradEntry(ctx, __func__, dtype, true, ids_dtype, ids, dout, dtable,
                     num_ids, rows, hidden, row_offset, vocab);
}

/// The attention gradient entries' front: the arguments checked, then the
/// backend's gradient; `savedForward`: the entry reads the forward's out
/// and lse, which may not be null (ABI 10 and older give neither).
static void attentionGradEntry(tessel_ctx *ctx, const char *entry,
                               int32_t dtype, const void *q, const void *k,
                               const void *v, const void *out, const void *lse,
                               bool savedForward, const void *dout, void *dq,
                               void *dk, void *dv, int64_t batch, int64_t seq,
                               int64_t kv_seq, int64_t heads, int64_t kv_heads,
                               int64_t head_dim, int64_t value_dim,
                               double scale, int32_t causal, int64_t window,
                               double softcap, int64_t query_offset = 0) {
  if (!ctx)
    return;
  KernelScope scope(ctx, entry);
  if (!checkAttentionArgs(ctx, entry, dtype, batch, seq, kv_seq, heads,
                          kv_heads, head_dim, value_dim, causal, window,
                          softcap, query_offset))
    return;
  if (savedForward && (!out || !lse) && batch * heads * seq * kv_seq > 0) {
    setError(ctx, "%s: %s is null", entry, out ? "lse" : "out");
    return;
  }
  ctx->backend->attentionGrad(
      ctx, dtype, q, k, v, out, lse, dout, dq, dk, dv, batch, seq, kv_seq,
      heads, kv_heads, head_dim, value_dim, scale,
      AttnMask{causal != 0, window, softcap, query_offset});
}

void tessel_attention_grad(tessel_ctx *ctx, int32_t dtype, const void *q,
                           const void *k, const void *v, const void *dout,
                           void *dq, void *dk, void *dv, int64_t batch,
                           int64_t seq, int64_t kv_seq, int64_t heads,
                           int64_t kv_heads, int64_t head_dim,
                           int64_t value_dim, double scale, int32_t causal) {
  attentionGradEntry(ctx, __func__, dtype, q, k, v, nullptr, nullptr, false,
                     dout, dq, dk, dv, batch, seq, kv_seq, heads, kv_heads,
                     head_dim, value_dim, scale, causal, 0, 0);
}

void tessel_attention_grad_lse(tessel_ctx *ctx, int32_t dtype, const void *q,
                               const void *k, const void *v, const void *out,
                               const void *lse, const void *dout, void *dq,
                               void *dk, void *dv, int64_t batch, int64_t seq,
                               int64_t kv_seq, int64_t heads, int64_t kv_heads,
                               int64_t head_dim, int64_t value_dim,
                               double scale, int32_t causal) {
  attentionGradEntry(ctx, __func__, dtype, q, k, v, out, lse, true, dout, dq,
                     dk, dv, batch, seq, kv_seq, heads, kv_heads, head_dim,
                     value_dim, scale, causal, 0, 0);
}

void tessel_attention_grad_window(tessel_ctx *ctx, int32_t dtype, const void *q,
                                  const void *k, const void *v, const void *out,
                                  const void *lse, const void *dout, void *dq,
                                  void *dk, void *dv, int64_t batch,
                                  int64_t seq, int64_t kv_seq, int64_t heads,
                                  int64_t kv_heads, int64_t head_dim,
                                  int64_t value_dim, double scale,
                                  int32_t causal, int64_t window) {
  attentionGradEntry(ctx, __func__, dtype, q, k, v, out, lse, true, dout, dq,
                     dk, dv, batch, seq, kv_seq, heads, kv_heads, head_dim,
                     value_dim, scale, causal, window, 0);
}

void tessel_attention_grad_softcap(
    tessel_ctx *ctx, int32_t dtype, const void *q, const void *k, const void *v,
    const void *out, const void *lse, const void *dout, void *dq, void *dk,
    void *dv, int64_t batch, int64_t seq, int64_t kv_seq, int64_t heads,
    int64_t kv_heads, int64_t head_dim, int64_t value_dim, double scale,
    int32_t causal, int64_t window, double softcap) {
  attentionGradEntry(ctx, __func__, dtype, q, k, v, out, lse, true, dout, dq,
                     dk, dv, batch, seq, kv_seq, heads, kv_heads, head_dim,
                     value_dim, scale, causal, window, softcap);
}

void tessel_attention_grad_block(
    tessel_ctx *ctx, int32_t dtype, const void *q, const void *k, const void *v,
    const void *out, const void *lse, const void *dout, void *dq, void *dk,
    void *dv, int64_t batch, int64_t seq, int64_t kv_seq, int64_t heads,
    int64_t kv_heads, int64_t head_dim, int64_t value_dim, double scale,
    int32_t causal, int64_t window, double softcap, int64_t query_offset) {
  attentionGradEntry(ctx, __func__, dtype, q, k, v, out, lse, true, dout, dq,
                     dk, dv, batch, seq, kv_seq, heads, kv_heads, head_dim,
                     value_dim, scale, causal, window, softcap, query_offset);
}

/// tessel_sum_squares and its f64 form: *sum is a device sumDtype.
static void sumSquares(tessel_ctx *ctx, const char *entry, int32_t dtype,
                       const void *x, int64_t n, int32_t sumDtype, void *sum) {
  if (!ctx)
    return;
  KernelScope scope(ctx, entry);
  if (!checkDtype(ctx, entry, dtype, isFloatDtype(dtype)))
    return;
  ctx->backend->sumSquares(ctx, dtype, x, n, sumDtype, sum);
}

void tessel_sum_squares(tessel_ctx *ctx, int32_t dtype, const void *x,
                        int64_t n, void *sum) {
  sumSquares(ctx, __func__, dtype, x, n, TESSEL_F32, sum);
}

void tessel_sum_squares_f64(tessel_ctx *ctx, int32_t dtype, const void *x,
                            int64_t n, void *sum) {
  sumSquares(ctx, __func__, dtype, x, n, TESSEL_F64, sum);
}

void tessel_clip_scale(tessel_ctx *ctx, const void *sum_squares,
                       double max_norm, const void *grad_scale, void *scale) {
  if (!ctx)
    return;
  KernelScope scope(ctx, __func__);
  ctx->backend->clipScale(ctx, TESSEL_F32, sum_squares, max_norm, grad_scale,
                          scale);
}

void tessel_clip_scale_f64(tessel_ctx *ctx, const void *sum_squares,
                           double max_norm, const void *grad_scale,
                           void *scale) {
  if (!ctx)
    return;
  KernelScope scope(ctx, __func__);
  ctx->backend->clipScale(ctx, TESSEL_F64, sum_squares, max_norm, grad_scale,
                          scale);
}

/// The checks both optimizer entries make: the optimizer, the size, the
/// step and the states the kind needs.
static bool checkOptimizerCall(tessel_ctx *ctx, const char *entry,
                               const tessel_optimizer *opt, int64_t n,
                               int64_t step, const void *state0,
                               const void *state1) {
  if (!opt) {
    setError(ctx, "%s: null optimizer", entry);
    return false;
  }
  if (n < 0) {
    setError(ctx, "%s: negative size", entry);
    return false;
  }
  bool adam = opt->kind == TESSEL_OPT_ADAM || opt->kind == TESSEL_OPT_ADAMW;
  if (!adam && opt->kind != TESSEL_OPT_SGD) {
    setError(ctx, "%s: unknown optimizer kind %d", entry, opt->kind);
    return false;
  }
  if (adam && step < 1) {
    setError(ctx, "%s: step %lld < 1 (bias correction counts from 1)", entry,
             (long long)step);
    return false;
  }
  if (n > 0 && ((adam && (!state0 || !state1)) ||
                (!adam && opt->momentum != 0.0 && !state0))) {
    setError(ctx, "%s: missing optimizer state", entry);
    return false;
  }
  return true;
}

/// The checks of one tensor's update (`mixed`: the master form): the
/// optimizer, size, count, schedule, states, dtypes and master weights.
static bool checkUpdate(tessel_ctx *ctx, const char *entry,
                        const tessel_optimizer *opt, const UpdateStep &at,
                        int32_t paramDtype, int32_t gradDtype, bool mixed,
                        const UpdateTensor &t) {
  // The context's count is at least 1 (step + 1); a caller's is checked.
  if (!checkOptimizerCall(ctx, entry, opt, t.n, at.current ? 1 : at.count,
                          t.state0, t.state1))
    return false;
  if (at.current && !isLrScheduleKind(at.schedule.kind)) {
    setError(ctx, "%s: unknown learning-rate schedule %d", entry,
             at.schedule.kind);
    return false;
  }
  if (!mixed)
    return checkDtype(ctx, entry, paramDtype, isFloatDtype(paramDtype));
  if (!checkDtype(ctx, entry, paramDtype, isHalfDtype(paramDtype)) ||
      !checkDtype(ctx, entry, gradDtype,
                  isHalfDtype(gradDtype) || gradDtype == TESSEL_F32))
    return false;
  if (t.n > 0 && !t.master) {
    setError(ctx, "%s: missing master weights", entry);
    return false;
  }
  return true;
}

/// The whole of the single-tensor updates (master null: the plain form).
static void optimizerUpdate(tessel_ctx *ctx, const char *entry,
                            const tessel_optimizer *opt, const UpdateStep &at,
                            int32_t paramDtype, void *param, void *master,
                            int32_t gradDtype, const void *grad,
                            const void *gradScale, void *state0, void *state1,
                            int64_t n, bool mixed) {
  UpdateTensor t{param, master, grad, state0, state1, n};
  if (!checkUpdate(ctx, entry, opt, at, paramDtype, gradDtype, mixed, t))
    return;
  if (mixed)
    ctx->backend->optimizerUpdateMaster(ctx, *opt, at, paramDtype, param,
                                        master, gradDtype, grad, gradScale,
                                        state0, state1, n);
  else
    ctx->backend->optimizerUpdate(ctx, *opt, at, paramDtype, param, grad,
                                  gradScale, state0, state1, n);
}

/// The context's step, with `schedule` (null: an error) for the rate.
static bool currentStep(tessel_ctx *ctx, const char *entry,
                        const tessel_lr_schedule *schedule, UpdateStep &at) {
  if (!schedule) {
    setError(ctx, "%s: null learning-rate schedule", entry);
    return false;
  }
  at.current = true;
  at.schedule = *schedule;
  return true;
}

void tessel_optimizer_update(tessel_ctx *ctx, const tessel_optimizer *opt,
                             int32_t dtype, void *param, const void *grad,
                             const void *grad_scale, void *state0, void *state1,
                             int64_t n, int64_t step, double lr) {
  if (!ctx)
    return;
  KernelScope scope(ctx, __func__);
  UpdateStep at;
  at.count = step;
  at.lr = lr;
  optimizerUpdate(ctx, "tessel_optimizer_update", opt, at, dtype, param,
                  nullptr, dtype, grad, grad_scale, state0, state1, n,
                  /*mixed=*/false);
}

void tessel_optimizer_update_master(tessel_ctx *ctx,
                                    const tessel_optimizer *opt,
                                    int32_t param_dtype, void *param,
                                    void *master, int32_t grad_dtype,
                                    const void *grad, const void *grad_scale,
                                    void *state0, void *state1, int64_t n,
                                    int64_t step, double lr) {
  if (!ctx)
    return;
  KernelScope scope(ctx, __func__);
  UpdateStep at;
  at.count = step;
  at.lr = lr;
  optimizerUpdate(ctx, "tessel_optimizer_update_master", opt, at, param_dtype,
                  param, master, grad_dtype, grad, grad_scale, state0, state1,
                  n, /*mixed=*/true);
}

void tessel_optimizer_update_current(tessel_ctx *ctx,
                                     const tessel_optimizer *opt,
                                     const tessel_lr_schedule *schedule,
                                     int32_t dtype, void *param,
                                     const void *grad, const void *grad_scale,
                                     void *state0, void *state1, int64_t n) {
  if (!ctx)
    return;
  KernelScope scope(ctx, __func__);
  const char *entry = "tessel_optimizer_update_current";
  UpdateStep at;
  if (currentStep(ctx, entry, schedule, at))
    optimizerUpdate(ctx, entry, opt, at, dtype, param, nullptr, dtype, grad,
                    grad_scale, state0, state1, n, /*mixed=*/false);
}

void tessel_optimizer_update_master_current(
    tessel_ctx *ctx, const tessel_optimizer *opt,
    const tessel_lr_schedule *schedule, int32_t param_dtype, void *param,
    void *master, int32_t grad_dtype, const void *grad, const void *grad_scale,
    void *state0, void *state1, int64_t n) {
  if (!ctx)
    return;
  KernelScope scope(ctx, __func__);
  const char *entry = "tessel_optimizer_update_master_current";
  UpdateStep at;
  if (currentStep(ctx, entry, schedule, at))
    optimizerUpdate(ctx, entry, opt, at, param_dtype, param, master,
                    grad_dtype, grad, grad_scale, state0, state1, n,
                    /*mixed=*/true);
}

// Host arithmetic on no context: the same for every backend.
double tessel_lr_at(int32_t kind, double lr, double min_lr, int64_t warmup,
                    int64_t total_steps, int64_t step) {
  return lrAtStep(kind, lr, min_lr, warmup, total_steps, step);
}

/// The grouped updates: `pointers` holds `stride` pointers per tensor, 5
/// (param, master, grad, state0, state1) or 4 (no master); every tensor is
/// checked before the one backend call.
static void updateGroup(tessel_ctx *ctx, const char *entry,
                        const tessel_optimizer *opt,
                        const tessel_lr_schedule *schedule, UpdateStep at,
                        int32_t paramDtype, int32_t gradDtype, bool master,
                        const void *gradScale, int64_t count,
                        void *const *pointers, const int64_t *counts,
                        int stride) {
  if (!currentStep(ctx, entry, schedule, at))
    return;
  if (count < 0 || (count > 0 && (!pointers || !counts))) {
    setError(ctx, "%s: bad tensor count %lld or null arrays", entry,
             (long long)count);
    return;
  }
  std::vector<UpdateTensor> tensors;
  tensors.reserve(size_t(count));
  for (int64_t i = 0; i < count; ++i) {
    void *const *p = pointers + stride * i;
    if (stride == 5)
      tensors.push_back({p[0], p[1], p[2], p[3], p[4], counts[i]});
    else
      tensors.push_back({p[0], nullptr, p[1], p[2], p[3], counts[i]});
    if (!checkUpdate(ctx, entry, opt, at, paramDtype, gradDtype, master,
                     tensors.back()))
      return;
  }
  ctx->backend->optimizerUpdateGroup(ctx, *opt, at, paramDtype, gradDtype,
                                     master, gradScale, tensors);
}

void tessel_optimizer_update_group_current(
    tessel_ctx *ctx, const tessel_optimizer *opt,
    const tessel_lr_schedule *schedule, int32_t param_dtype, int32_t grad_dtype,
    int32_t master, const void *grad_scale, int64_t count,
    void *const *pointers, const int64_t *counts) {
  if (!ctx)
    return;
  KernelScope scope(ctx, __func__);
  // Without master weights the gradients are of the parameters' dtype.
  updateGroup(ctx, __func__, opt, schedule, UpdateStep(), param_dtype,
              master ? grad_dtype : param_dtype, master != 0, grad_scale, count,
              pointers, counts, /*stride=*/5);
}

void tessel_optimizer_update_f64_group_current(
    tessel_ctx *ctx, const tessel_optimizer *opt,
    const tessel_lr_schedule *schedule, const void *grad_scale, int64_t count,
    void *const *pointers, const int64_t *counts) {
  if (!ctx)
    return;
  KernelScope scope(ctx, __func__);
  UpdateStep at;
  at.stateDtype = TESSEL_F64;
  updateGroup(ctx, __func__, opt, schedule, at, TESSEL_F64, TESSEL_F64,
              /*master=*/false, grad_scale, count, pointers, counts,
              /*stride=*/4);
}

} // extern "C"
