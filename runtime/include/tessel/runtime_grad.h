/*===- runtime_grad.h - Tessel runtime C ABI: backward and optimizers ---===*
 *
 * The backward kernels that reverse-mode autodiff emits and the optimizers
 * (runtime.h includes this header with runtime_kernels.h, the forward
 * kernels; the shapes and views here are those of the forward kernels of
 * the same name).
 *
 *===----------------------------------------------------------------------===*/

#ifndef TESSEL_RUNTIME_GRAD_H
#define TESSEL_RUNTIME_GRAD_H

#include "runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/*===--- Backward kernels (reverse-mode autodiff) ------------------------===*
 *
 * The backward work that deserves a kernel of its own. Every gradient output
 * is overwritten (not accumulated); the autodiff pass adds contributions of
 * values used several times with tessel_binary(TESSEL_ADD). Shapes and views
 * are those of the forward kernel of the same name.
 *===----------------------------------------------------------------------===*/

/* dx[i] = dy[i] · op'(x[i]) for the float unary ops of tessel_unary_op
 * (TESSEL_GELU, TESSEL_GELU_TANH, TESSEL_SILU, TESSEL_SIGMOID, TESSEL_TANH,
 * TESSEL_RELU (0 at x = 0), TESSEL_EXP, TESSEL_LOG, TESSEL_SQRT,
 * TESSEL_RSQRT, TESSEL_NEG). ReLU as PyTorch's threshold_backward: 0 where
 * x <= 0, dy elsewhere (a NaN x passes dy). */
void tessel_unary_grad(tessel_ctx *ctx, int32_t op, int32_t dtype,
                       const void *x, const void *dy, void *dx, int64_t n);

/* Softmax over the middle dimension of [outer, dim, inner], from its output
 * y: dx = y ⊙ (dy − Σ_dim dy ⊙ y). */
void tessel_softmax_grad(tessel_ctx *ctx, int32_t dtype, const void *y,
                         const void *dy, void *dx, int64_t outer, int64_t dim,
                         int64_t inner);

/* Layer norm (or RMS norm when rms = 1) over rows of `cols`, recomputing the
 * statistics from x: dx, dgamma = Σ_rows dy ⊙ x̂ and, for layer norm,
 * dbeta = Σ_rows dy (dbeta null for RMS norm). gamma null means ones (as
 * in the forward); a null dgamma or dbeta is not computed, and a non-null
 * dbeta gets Σ_rows dy also with rms (the gradient of an RMS norm's beta). */
void tessel_layer_norm_grad(tessel_ctx *ctx, int32_t dtype, const void *x,
                            const void *gamma, const void *dy, void *dx,
                            void *dgamma, void *dbeta, int64_t rows,
                            int64_t cols, double eps, int32_t rms);

/* tessel_layer_norm_grad whose dx is added to `residual`, the gradient
 * the residual stream carries past the norm (ABI 10): dx = residual + the
 * norm's dx rounded to dtype, equal to tessel_layer_norm_grad then
 * tessel_binary TESSEL_ADD. dx may overlap none of x, dy and residual.
 * dgamma and dbeta as tessel_layer_norm_grad. */
void tessel_layer_norm_grad_add(tessel_ctx *ctx, int32_t dtype, const void *x,
                                const void *gamma, const void *dy,
                                const void *residual, void *dx, void *dgamma,
                                void *dbeta, int64_t rows, int64_t cols,
                                double eps, int32_t rms);

/* tessel_layer_norm_grad and tessel_layer_norm_grad_add of f16/bf16 x,
 * gamma and dy whose dgamma and dbeta are f32 (ABI 14): the column sums
 * rounded once, to f32, instead of to dtype. dx as those entries. */
void tessel_layer_norm_grad_f32(tessel_ctx *ctx, int32_t dtype, const void *x,
                                const void *gamma, const void *dy, void *dx,
                                void *dgamma, void *dbeta, int64_t rows,
                                int64_t cols, double eps, int32_t rms);
void tessel_layer_norm_grad_add_f32(tessel_ctx *ctx, int32_t dtype,
                                    const void *x, const void *gamma,
                                    const void *dy, const void *residual,
                                    void *dx, void *dgamma, void *dbeta,
                                    int64_t rows, int64_t cols, double eps,
                                    int32_t rms);

/* Batch norm with batch statistics over [outer, channels, inner]: dx,
 * dgamma and dbeta (the full training-mode backward, through the mean and
 * variance). gamma null means ones; a null dgamma or dbeta is not computed. */
void tessel_batch_norm_grad(tessel_ctx *ctx, int32_t dtype, const void *x,
                            const void *gamma, const void *dy, void *dx,
                            void *dgamma, void *dbeta, int64_t outer,
                            int64_t channels, int64_t inner, double eps);

/* Cross-entropy: dlogits = g · (softmax(logits) − onehot(label)) per row,
 * where g is dloss[0] / rows (mean), dloss[0] (sum) or dloss[row] (none);
 * dloss has the loss's dtype and shape. A bad label records an error and
 * its row gets 0. */
void tessel_cross_entropy_grad(tessel_ctx *ctx, int32_t dtype,
                               int32_t label_dtype, const void *logits,
                               const void *labels, const void *dloss,
                               void *dlogits, int64_t rows, int64_t classes,
                               int32_t reduction);

/* tessel_cross_entropy_grad of dtype (TESSEL_F16 or TESSEL_BF16) logits
 * with dloss f32 (tessel_cross_entropy_f32's loss) and dlogits of dtype
 * (ABI 13): the f32 gradient of the widened logits rounded to dtype as
 * tessel_cast rounds it, with no f32 gradient buffer. */
void tessel_cross_entropy_grad_f32(tessel_ctx *ctx, int32_t dtype,
                                   int32_t label_dtype, const void *logits,
                                   const void *labels, const void *dloss,
                                   void *dlogits, int64_t rows, int64_t classes,
                                   int32_t reduction);

/* The gradient of tessel_cross_entropy_softcap's loss (ABI 27): with
 * y = softcap · tanh(x / softcap), dlogits = g · (softmax(y) − onehot) ·
 * (1 − (y / softcap)²); dloss of loss_dtype (dtype, or f32 for 16-bit
 * logits). */
void tessel_cross_entropy_grad_softcap(tessel_ctx *ctx, int32_t dtype,
                                       int32_t loss_dtype, int32_t label_dtype,
                                       const void *logits, const void *labels,
                                       const void *dloss, void *dlogits,
                                       int64_t rows, int64_t classes,
                                       int32_t reduction, double softcap);

/* tessel_cross_entropy's out and tessel_cross_entropy_grad's dlogits (from
 * dloss) in one call (ABI 13): on a GPU one pass, each row's statistics
 * read once (llm.c's fused classifier). loss_dtype, the type of out and
 * dloss, is dtype, or TESSEL_F32 for f16/bf16 logits (the _f32 entries'
 * arithmetic). dlogits may be logits itself (the gradient written over
 * the logits, in place) or memory apart from it; it overlaps none of
 * labels, dloss, out. A bad label records the loss's error. */
void tessel_cross_entropy_with_grad(tessel_ctx *ctx, int32_t dtype,
                                    int32_t loss_dtype, int32_t label_dtype,
                                    const void *logits, const void *labels,
                                    const void *dloss, void *out, void *dlogits,
                                    int64_t rows, int64_t classes,
                                    int32_t reduction);

/* tessel_cross_entropy_with_grad of soft-capped logits (ABI 27): the loss
 * of tessel_cross_entropy_softcap and the gradient of
 * tessel_cross_entropy_grad_softcap in one call, dlogits again the logits
 * or apart from them. */
void tessel_cross_entropy_with_grad_softcap(
    tessel_ctx *ctx, int32_t dtype, int32_t loss_dtype, int32_t label_dtype,
    const void *logits, const void *labels, const void *dloss, void *out,
    void *dlogits, int64_t rows, int64_t classes, int32_t reduction,
    double softcap);

/* The gradient of tessel_cross_entropy_smoothed's loss (ABI 28):
 * dy = g · (softmax(y) − (1 − ε)·onehot − ε / V), times the cap's slope
 * under a soft cap; the rest as tessel_cross_entropy_grad_softcap. */
void tessel_cross_entropy_grad_smoothed(tessel_ctx *ctx, int32_t dtype,
                                        int32_t loss_dtype, int32_t label_dtype,
                                        const void *logits, const void *labels,
                                        const void *dloss, void *dlogits,
                                        int64_t rows, int64_t classes,
                                        int32_t reduction, double softcap,
                                        double label_smoothing);

/* tessel_cross_entropy_with_grad of a smoothed target (ABI 28): the loss
 * of tessel_cross_entropy_smoothed and the gradient of
 * tessel_cross_entropy_grad_smoothed in one call, dlogits again the logits
 * or apart from them. */
void tessel_cross_entropy_with_grad_smoothed(
    tessel_ctx *ctx, int32_t dtype, int32_t loss_dtype, int32_t label_dtype,
    const void *logits, const void *labels, const void *dloss, void *out,
    void *dlogits, int64_t rows, int64_t classes, int32_t reduction,
    double softcap, double label_smoothing);

/* Vocabulary-parallel cross-entropy (Megatron style): each rank holds the
 * logits of a block of the classes, and the loss is built from the
 * reductions (max, Σ exp, each all-reduced over the split) and these two
 * label kernels. Float dtypes; labels i32 or i64; a block outside
 * [0, total_classes) records an error and writes nothing. */

/* The logit of each row's label within a block of the classes: `logits`
 * [rows, classes] holds classes [class_offset, class_offset + classes) of
 * [rows, total_classes]; out[r] = logits[r, labels[r] - class_offset] when
 * the label falls in the block, else 0. A label outside [0, total_classes)
 * is an error (its out[r] is 0). (Summed over the blocks: the label's
 * logit.) */
void tessel_label_logit(tessel_ctx *ctx, int32_t dtype, int32_t label_dtype,
                        const void *logits, const void *labels, void *out,
                        int64_t rows, int64_t classes, int64_t class_offset,
                        int64_t total_classes);
/* out = x, then out[r, labels[r] - class_offset] -= values[r] for each row
 * whose label falls in the block (x, out [rows, classes]; values [rows]).
 * `out` may be `x` (in place). A label outside [0, total_classes) is an
 * error (its row of out is x's). The subtraction is in the compute type, so
 * the blocks, concatenated, are the whole rows' result bit for bit. */
void tessel_sub_label(tessel_ctx *ctx, int32_t dtype, int32_t label_dtype,
                      const void *x, const void *labels, const void *values,
                      void *out, int64_t rows, int64_t classes,
                      int64_t class_offset, int64_t total_classes);

/* The fused vocabulary-parallel loss's two kernels (ABI 29: Megatron's
 * fused vocab-parallel cross-entropy; no exponentials stored). With y the
 * block's logits soft-capped by softcap (0: none), each row's statistics
 * of the block: max[r] = max y, sum_exp[r] = Σ e^(y − max[r]) (0 when no
 * y is above -inf), label_logit[r] = y at the label when the block holds
 * it, else +0, and logit_sum[r] = Σ y; all four [rows] of dtype. The
 * caller completes them over the blocks: the whole row's max M by a max
 * all-reduce, Σ e^(y − M) by a sum all-reduce of sum_exp·e^(max − M), the
 * label's logit and Σ y by sum all-reduces. A label outside
 * [0, total_classes) is an error (its row's label_logit is 0). */
void tessel_vocab_loss_stats(tessel_ctx *ctx, int32_t dtype,
                             int32_t label_dtype, const void *logits,
                             const void *labels, void *max, void *sum_exp,
                             void *label_logit, void *logit_sum, int64_t rows,
                             int64_t classes, int64_t class_offset,
                             int64_t total_classes, double softcap);
/* The block's gradient from the whole rows' max and Σ e^(y − max) and each
 * row's gradient g (row_grad, [rows]; the mean's 1 / rows included):
 * dlogits = g · (e^(y − max) / sum_exp − (1 − ε)·onehot − ε / total_classes)
 * times the cap's slope, ε the label smoothing in [0, 1]. dlogits is the
 * logits (in place) or apart from every operand. */
void tessel_vocab_loss_grad(tessel_ctx *ctx, int32_t dtype, int32_t label_dtype,
                            const void *logits, const void *labels,
                            const void *max, const void *sum_exp,
                            const void *row_grad, void *dlogits, int64_t rows,
                            int64_t classes, int64_t class_offset,
                            int64_t total_classes, double softcap,
                            double label_smoothing);

/* The two kernels of dtype (TESSEL_F16 or TESSEL_BF16) logits with f32
 * statistics (ABI 30: Megatron's f32 loss of bf16 logits): max, sum_exp,
 * label_logit and logit_sum, and the gradient's max, sum_exp and row_grad,
 * are f32, each logit widened (exactly) and the f32 kernels' arithmetic;
 * dlogits is of dtype, each gradient rounded once. No f32 copy of the
 * block, and the statistics not rounded to 16 bits between the blocks. */
void tessel_vocab_loss_stats_f32(tessel_ctx *ctx, int32_t dtype,
                                 int32_t label_dtype, const void *logits,
                                 const void *labels, void *max, void *sum_exp,
                                 void *label_logit, void *logit_sum,
                                 int64_t rows, int64_t classes,
                                 int64_t class_offset, int64_t total_classes,
                                 double softcap);
void tessel_vocab_loss_grad_f32(tessel_ctx *ctx, int32_t dtype,
                                int32_t label_dtype, const void *logits,
                                const void *labels, const void *max,
                                const void *sum_exp, const void *row_grad,
                                void *dlogits, int64_t rows, int64_t classes,
                                int64_t class_offset, int64_t total_classes,
                                double softcap, double label_smoothing);

/* The labels of a loss that ignores some positions (ABI 21: PyTorch's
 * ignore_index): for each of `n` labels, safe[i] = 0 and weights[i] = 0
 * where labels[i] == ignore_index, else safe[i] = labels[i] and
 * weights[i] = 1. labels and safe are label_dtype (i32 or i64; safe may be
 * labels itself), weights of float dtype. The cross-entropy of the safe
 * labels, times the weights, is the loss of each position, and Σ weights
 * the positions a mean divides by; labels are not otherwise checked here
 * (the cross-entropy checks the safe ones). */
void tessel_mask_labels(tessel_ctx *ctx, int32_t label_dtype, int32_t dtype,
                        const void *labels, int64_t ignore_index, void *safe,
                        void *weights, int64_t n);

/* Embedding: dtable [rows, hidden] is the block [row_offset, row_offset +
 * rows) of the whole [vocab, hidden] table's gradient, Σ over i with
 * ids[i] = row of dout[i, :] (zero rows for ids that never occur): a
 * scatter-add of the dout rows whose id falls in the block (other ids are
 * skipped), deterministic in id order (each row sums its contributions in
 * position order in f64 and is rounded once), so the blocks of any split,
 * concatenated, are the whole table's gradient bit for bit. Float dtypes
 * only. An id outside [0, vocab) records an error and its row of dout is
 * dropped; a block outside [0, vocab) records an error and writes nothing. */
void tessel_embedding_grad(tessel_ctx *ctx, int32_t dtype, int32_t ids_dtype,
                           const void *ids, const void *dout, void *dtable,
                           int64_t num_ids, int64_t rows, int64_t hidden,
                           int64_t row_offset, int64_t vocab);
/* tessel_embedding_grad of f16/bf16 dout with dtable in f32 (ABI 14): each
 * row's f64 sum rounded once, to f32. */
void tessel_embedding_grad_f32(tessel_ctx *ctx, int32_t dtype,
                               int32_t ids_dtype, const void *ids,
                               const void *dout, void *dtable, int64_t num_ids,
                               int64_t rows, int64_t hidden, int64_t row_offset,
                               int64_t vocab);

/* Attention (shapes as tessel_attention): dq, dk, dv from q, k, v and dout,
 * recomputing the probabilities; with grouped-query heads the kv gradients
 * sum over the query heads that share them. dq, dk and dv are all
 * overwritten. */
void tessel_attention_grad(tessel_ctx *ctx, int32_t dtype, const void *q,
                           const void *k, const void *v, const void *dout,
                           void *dq, void *dk, void *dv, int64_t batch,
                           int64_t seq, int64_t kv_seq, int64_t heads,
                           int64_t kv_heads, int64_t head_dim,
                           int64_t value_dim, double scale, int32_t causal);

/* Attention's gradient from the forward's out and lse (tessel_attention_lse,
 * ABI 11), which it reads instead of running the forward again:
 * P = e^(scale · q·kᵀ - lse), D = rowsum(dout ⊙ out), dS = P ⊙ (dout·vᵀ - D).
 * dq, dk, dv as tessel_attention_grad, and none overlaps an input. */
void tessel_attention_grad_lse(tessel_ctx *ctx, int32_t dtype, const void *q,
                               const void *k, const void *v, const void *out,
                               const void *lse, const void *dout, void *dq,
                               void *dk, void *dv, int64_t batch, int64_t seq,
                               int64_t kv_seq, int64_t heads, int64_t kv_heads,
                               int64_t head_dim, int64_t value_dim,
                               double scale, int32_t causal);

/* tessel_attention_grad_lse under tessel_attention_window's mask (ABI 20). */
void tessel_attention_grad_window(tessel_ctx *ctx, int32_t dtype, const void *q,
                                  const void *k, const void *v, const void *out,
                                  const void *lse, const void *dout, void *dq,
                                  void *dk, void *dv, int64_t batch,
                                  int64_t seq, int64_t kv_seq, int64_t heads,
                                  int64_t kv_heads, int64_t head_dim,
                                  int64_t value_dim, double scale,
                                  int32_t causal, int64_t window);

/* tessel_attention_grad_window under tessel_attention_softcap's capped
 * scores (ABI 24): P = e^(cap(scale · q·kᵀ) - lse), and dS is
 * P ⊙ (dout·vᵀ - D) times the cap's slope 1 - (cap(s) / softcap)². */
void tessel_attention_grad_softcap(
    tessel_ctx *ctx, int32_t dtype, const void *q, const void *k, const void *v,
    const void *out, const void *lse, const void *dout, void *dq, void *dk,
    void *dv, int64_t batch, int64_t seq, int64_t kv_seq, int64_t heads,
    int64_t kv_heads, int64_t head_dim, int64_t value_dim, double scale,
    int32_t causal, int64_t window, double softcap);

/* tessel_attention_grad_softcap of tessel_attention_block's block of the
 * queries (ABI 31): dq of the block's rows, and dk and dv the block's share
 * of the keys' gradients (the blocks' dk and dv sum to the whole
 * sequence's). */
void tessel_attention_grad_block(
    tessel_ctx *ctx, int32_t dtype, const void *q, const void *k, const void *v,
    const void *out, const void *lse, const void *dout, void *dq, void *dk,
    void *dv, int64_t batch, int64_t seq, int64_t kv_seq, int64_t heads,
    int64_t kv_heads, int64_t head_dim, int64_t value_dim, double scale,
    int32_t causal, int64_t window, double softcap, int64_t query_offset);

/*===--- Optimizers ------------------------------------------------------===*
 *
 * Updates run on the device with device-side scalars, so a step can be
 * captured once (CUDA graphs) and replayed.
 *===----------------------------------------------------------------------===*/

/* *sum += Σ x[i]² over n elements (sum is one device f32; accumulation in
 * f64 inside the call): the pieces of a global gradient norm. */
void tessel_sum_squares(tessel_ctx *ctx, int32_t dtype, const void *x,
                        int64_t n, void *sum);

/* With g = *grad_scale (grad_scale null: 1, e.g. 1 / microbatches):
 *   *scale = min(1, max_norm / (sqrt(*sum_squares) · g + 1e-6)) · g
 * (max_norm <= 0: no clipping, *scale = g). sum_squares is Σ of the
 * unscaled gradients, so clipping sees the norm of the scaled gradient, as
 * torch.nn.utils.clip_grad_norm_ after dividing the loss by M. Device f32
 * scalars. */
void tessel_clip_scale(tessel_ctx *ctx, const void *sum_squares,
                       double max_norm, const void *grad_scale, void *scale);

/* ABI 18: the norm and the clipping factor of an f64 model in f64.
 * tessel_sum_squares with *sum a device f64 (the f64 accumulation added
 * to it without rounding to f32), and tessel_clip_scale with every scalar
 * (sum_squares, grad_scale, scale) a device f64 (no rounding to f32). */
void tessel_sum_squares_f64(tessel_ctx *ctx, int32_t dtype, const void *x,
                            int64_t n, void *sum);
void tessel_clip_scale_f64(tessel_ctx *ctx, const void *sum_squares,
                           double max_norm, const void *grad_scale,
                           void *scale);

typedef enum tessel_optimizer_kind {
  TESSEL_OPT_SGD = 0,   /* momentum 0: plain SGD; nesterov optional */
  TESSEL_OPT_ADAM = 1,  /* L2 weight decay added to the gradient */
  TESSEL_OPT_ADAMW = 2, /* decoupled weight decay */
} tessel_optimizer_kind;

typedef struct tessel_optimizer {
  int32_t kind;             /* tessel_optimizer_kind */
  int32_t nesterov;         /* SGD with momentum: Nesterov's form */
  double momentum;          /* SGD */
  double beta1, beta2, eps; /* Adam, AdamW */
  double weight_decay;
} tessel_optimizer;

/* One in-place update of n parameters from their gradient, as PyTorch's
 * torch.optim.SGD / Adam / AdamW do it: g = grad · *grad_scale (grad_scale
 * null: 1); state0 is the momentum buffer (SGD) or m (Adam), state1 is v
 * (Adam); both f32, n elements, zero before the first step. `step` is the
 * 1-based update count (bias correction), `lr` this step's learning rate.
 * Parameters of any float dtype, grad of the same dtype, *grad_scale a
 * device f32; the arithmetic is f32 (f64 for f64). SGD has dampening 0 and
 * reads state0 only with momentum != 0 (it may be null otherwise); Adam's
 * m is updated as PyTorch's m.lerp_(g, 1 − beta1), and a `step` < 1 records
 * an error and changes nothing. */
void tessel_optimizer_update(tessel_ctx *ctx, const tessel_optimizer *opt,
                             int32_t dtype, void *param, const void *grad,
                             const void *grad_scale, void *state0, void *state1,
                             int64_t n, int64_t step, double lr);

/* Mixed precision (tessel-compile --precision bf16): the same update as
 * tessel_optimizer_update on the f32 master weights `master` (n elements),
 * from a gradient of dtype grad_dtype (f32, bf16 or f16; widened exactly
 * to f32), then param[i] = master[i] rounded to nearest even in
 * param_dtype (bf16 or f16): the copy the model computes with. state0 and
 * state1 as there. Bit for bit: master and states equal
 * tessel_optimizer_update(f32, master, widened grad). */
void tessel_optimizer_update_master(tessel_ctx *ctx,
                                    const tessel_optimizer *opt,
                                    int32_t param_dtype, void *param,
                                    void *master, int32_t grad_dtype,
                                    const void *grad, const void *grad_scale,
                                    void *state0, void *state1, int64_t n,
                                    int64_t step, double lr);

typedef enum tessel_lr_schedule_kind {
  TESSEL_LR_CONSTANT = 0,      /* linear warm-up (if any), then lr */
  TESSEL_LR_WARMUP_COSINE = 1, /* linear warm-up, then cosine to min_lr */
} tessel_lr_schedule_kind;

/* The learning rate of 1-based `step`. Both schedules first warm up
 * linearly from 0 over `warmup` steps: lr·step/warmup for step <= warmup
 * (none when warmup is 0). Then the constant schedule stays at lr (as
 * transformers' constant_schedule_with_warmup), and the cosine one decays
 * to `min_lr` at `total_steps` (and stays there): min_lr + (lr −
 * min_lr)·(1 + cos(π·(step − warmup)/(total_steps − warmup)))/2.
 * An unknown kind returns NaN (there is no context to record an error). */
double tessel_lr_at(int32_t kind, double lr, double min_lr, int64_t warmup,
                    int64_t total_steps, int64_t step);

/* A learning-rate schedule: tessel_lr_at's arguments but the step. */
typedef struct tessel_lr_schedule {
  int32_t kind; /* tessel_lr_schedule_kind */
  double lr, min_lr;
  int64_t warmup, total_steps;
} tessel_lr_schedule;

/* tessel_optimizer_update and tessel_optimizer_update_master of the
 * context's step s (tessel_set_step) as it stands when the update runs: the
 * 1-based update count is s + 1 and the learning rate tessel_lr_at of
 * `schedule` (host memory) at s + 1, both worked out on the device, so a
 * captured step replays with each launch's count and rate. Equal bit for bit
 * to the explicit forms on the CPU; on a GPU the device's pow and cos may
 * differ from the host's in the last bit of the double bias corrections and
 * cosine rate. An unknown schedule kind records an error. */
void tessel_optimizer_update_current(tessel_ctx *ctx,
                                     const tessel_optimizer *opt,
                                     const tessel_lr_schedule *schedule,
                                     int32_t dtype, void *param,
                                     const void *grad, const void *grad_scale,
                                     void *state0, void *state1, int64_t n);

/* One step of `count` tensors that share the optimizer, the schedule, the
 * dtypes and the gradient scale: for each tensor i,
 * tessel_optimizer_update_current (master 0) or
 * tessel_optimizer_update_master_current (master 1) with pointers[5i ..
 * 5i + 4] its param, master weights (null when master is 0), grad, state0
 * and state1, and counts[i] its size. Equal bit for bit to those calls one
 * by one; on a GPU Adam and AdamW run as one kernel over every tensor (cut
 * into 64K-element chunks, a block per chunk) instead of a launch each.
 * pointers and counts are host memory (copied before the call returns);
 * the checks are the single calls', for every tensor, and nothing is
 * updated when one fails. */
void tessel_optimizer_update_group_current(
    tessel_ctx *ctx, const tessel_optimizer *opt,
    const tessel_lr_schedule *schedule, int32_t param_dtype, int32_t grad_dtype,
    int32_t master, const void *grad_scale, int64_t count,
    void *const *pointers, const int64_t *counts);
void tessel_optimizer_update_master_current(
    tessel_ctx *ctx, const tessel_optimizer *opt,
    const tessel_lr_schedule *schedule, int32_t param_dtype, void *param,
    void *master, int32_t grad_dtype, const void *grad, const void *grad_scale,
    void *state0, void *state1, int64_t n);

/* ABI 18: tessel_optimizer_update_group_current of f64 parameters whose
 * optimizer states and *grad_scale are f64 too: the arithmetic is f64
 * throughout, nothing is rounded to f32 (an f64 model trains as its f64
 * reference would). pointers[4i .. 4i + 3] are tensor i's param, grad,
 * state0 and state1, counts[i] its size; the checks are
 * tessel_optimizer_update_current's, for every tensor, and nothing is
 * updated when one fails. */
void tessel_optimizer_update_f64_group_current(
    tessel_ctx *ctx, const tessel_optimizer *opt,
    const tessel_lr_schedule *schedule, const void *grad_scale, int64_t count,
    void *const *pointers, const int64_t *counts);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* TESSEL_RUNTIME_GRAD_H */
