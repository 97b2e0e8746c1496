//===- kernels_attention.cpp - Entry points of attention and rope --------===//
//
// The forward entries of the ops that mix positions: tessel_attention and
// its forms (lse, window, softcap, a block of the queries), and tessel_rope
// and its scalings (yarn, factors), from position 0 or from a block's
// first position. As kernels.cpp's, each counts the kernel (KernelScope),
// checks its arguments as tessel/runtime.h documents them, and hands the call
// to the context's backend; a null context does nothing.
//
//===----------------------------------------------------------------------===//

#include "core/backend.h"
#include "core/checks.h"

#include <cmath>
#include <optional>

using namespace tessel;

extern "C" {

/// The attention entries' front: the arguments checked, then the
/// backend's forward; `needsLse`: the entry's lse may not be null.
static void attentionEntry(tessel_ctx *ctx, const char *entry, int32_t dtype,
                           const void *q, const void *k, const void *v,
                           void *out, void *lse, bool needsLse, int64_t batch,
                           int64_t seq, int64_t kv_seq, int64_t heads,
                           int64_t kv_heads, int64_t head_dim,
                           int64_t value_dim, double scale, int32_t causal,
                           int64_t window, double softcap,
                           int64_t query_offset = 0) {
  if (!ctx)
    return;
  KernelScope scope(ctx, entry);
  if (!checkAttentionArgs(ctx, entry, dtype, batch, seq, kv_seq, heads,
                          kv_heads, head_dim, value_dim, causal, window,
                          softcap, query_offset))
    return;
  if (needsLse && !lse && batch * heads * seq > 0) {
    setError(ctx, "%s: lse is null", entry);
    return;
  }
  ctx->backend->attention(ctx, dtype, q, k, v, out, lse, batch, seq, kv_seq,
                          heads, kv_heads, head_dim, value_dim, scale,
                          AttnMask{causal != 0, window, softcap, query_offset});
}

void tessel_attention(tessel_ctx *ctx, int32_t dtype, const void *q,
                      const void *k, const void *v, void *out, int64_t batch,
                      int64_t seq, int64_t kv_seq, int64_t heads,
                      int64_t kv_heads, int64_t head_dim, int64_t value_dim,
                      double scale, int32_t causal) {
  attentionEntry(ctx, __func__, dtype, q, k, v, out, nullptr, false, batch, seq,
                 kv_seq, heads, kv_heads, head_dim, value_dim, scale, causal, 0,
                 0);
}

void tessel_attention_lse(tessel_ctx *ctx, int32_t dtype, const void *q,
                          const void *k, const void *v, void *out, void *lse,
                          int64_t batch, int64_t seq, int64_t kv_seq,
                          int64_t heads, int64_t kv_heads, int64_t head_dim,
                          int64_t value_dim, double scale, int32_t causal) {
  attentionEntry(ctx, __func__, dtype, q, k, v, out, lse, true, batch, seq,
                 kv_seq, heads, kv_heads, head_dim, value_dim, scale, causal, 0,
                 0);
}

void tessel_attention_window(tessel_ctx *ctx, int32_t dtype, const void *q,
                             const void *k, const void *v, void *out, void *lse,
                             int64_t batch, int64_t seq, int64_t kv_seq,
                             int64_t heads, int64_t kv_heads, int64_t head_dim,
                             int64_t value_dim, double scale, int32_t causal,
                             int64_t window) {
  attentionEntry(ctx, __func__, dtype, q, k, v, out, lse, false, batch, seq,
                 kv_seq, heads, kv_heads, head_dim, value_dim, scale, causal,
                 window, 0);
}

void tessel_attention_softcap(tessel_ctx *ctx, int32_t dtype, const void *q,
                              const void *k, const void *v, void *out,
                              void *lse, int64_t batch, int64_t seq,
                              int64_t kv_seq, int64_t heads, int64_t kv_heads,
                              int64_t head_dim, int64_t value_dim, double scale,
                              int32_t causal, int64_t window, double softcap) {
  attentionEntry(ctx, __func__, dtype, q, k, v, out, lse, false, batch, seq,
                 kv_seq, heads, kv_heads, head_dim, value_dim, scale, causal,
                 window, softcap);
}

void tessel_attention_block(tessel_ctx *ctx, int32_t dtype, const void *q,
                            const void *k, const void *v, void *out, void *lse,
                            int64_t batch, int64_t seq, int64_t kv_seq,
                            int64_t heads, int64_t kv_heads, int64_t head_dim,
                            int64_t value_dim, double scale, int32_t causal,
                            int64_t window, double softcap,
                            int64_t query_offset) {
  attentionEntry(ctx, __func__, dtype, q, k, v, out, lse, false, batch, seq,
                 kv_seq, heads, kv_heads, head_dim, value_dim, scale, causal,
                 window, softcap, query_offset);
}

} // extern "C"

/// The rope entries' front: the shape, theta, the first position and y
/// checked, then the backend's rotation under `scaling`, which
/// `makeScaling` builds once theta and head_dim are known good (and fails
/// with the error set).
template <class MakeScaling>
static void ropeEntry(tessel_ctx *ctx, const char *entry, int32_t dtype,
                      const void *x, void *y, int64_t outer, int64_t positions,
                      int64_t heads, int64_t head_dim, int64_t rotary_dim,
                      double theta, int32_t interleaved, int32_t inverse,
                      int64_t first_position, MakeScaling makeScaling) {
  if (!ctx)
    return;
  KernelScope scope(ctx, entry);
  if (!checkDtype(ctx, entry, dtype, isFloatDtype(dtype)))
    return;
  int64_t rows, bytes;
  if (outer < 0 || positions < 0 || heads < 0 || head_dim < 0 ||
      head_dim % 2 != 0 || __builtin_mul_overflow(outer, positions, &rows) ||
      __builtin_mul_overflow(rows, heads, &rows) ||
      __builtin_mul_overflow(rows, head_dim, &bytes) ||
      __builtin_mul_overflow(bytes, tessel_dtype_size(dtype), &bytes)) {
    setError(ctx,
             "%s: bad shape [%lld, %lld, %lld, %lld] (sizes >= 0, "
             "head_dim even, bytes within int64)",
             entry, (long long)outer, (long long)positions, (long long)heads,
             (long long)head_dim);
    return;
  }
  if (rotary_dim % 2 != 0 || rotary_dim > head_dim ||
      (rotary_dim <= 0 && head_dim > 0)) {
    setError(ctx, "%s: rotary_dim %lld must be even and in (0, head_dim %lld]",
             entry, (long long)rotary_dim, (long long)head_dim);
    return;
  }
  if (!std::isfinite(theta) || theta <= 0) {
    setError(ctx, "%s: theta %g must be finite and positive", entry, theta);
    return;
  }
  int64_t lastPosition;
  if (first_position < 0 ||
      __builtin_add_overflow(first_position, positions, &lastPosition)) {
    setError(ctx,
             "%s: first_position %lld must be >= 0 with %lld positions "
             "after it within int64",
             entry, (long long)first_position, (long long)positions);
    return;
  }
  std::optional<rope::Scaling> scaling = makeScaling();
  if (!scaling)
    return;
  if (bytes == 0)
    return;
  if (x != y && overlaps(x, bytes, y, bytes)) {
    setError(ctx, "%s: y overlaps x without being it", entry);
    return;
  }
  ctx->backend->rope(ctx, dtype, x, y, outer, positions, heads, head_dim,
                     rotary_dim, theta, interleaved != 0, inverse != 0,
                     *scaling, first_position);
}

/// The three rope forms: Llama 3.1's scaling (factor 0: none), YaRN's, and
/// per-pair factors with an attention factor; each entry is one of them,
/// from position 0 or (the _block entries, ABI 31) from first_position.
static void ropeLlama(tessel_ctx *ctx, const char *entry, int32_t dtype,
                      const void *x, void *y, int64_t outer, int64_t positions,
                      int64_t heads, int64_t head_dim, double theta,
                      int32_t interleaved, int32_t inverse, double factor,
                      double low_freq_factor, double high_freq_factor,
                      double original_positions, int64_t first_position) {
  ropeEntry(ctx, entry, dtype, x, y, outer, positions, heads, head_dim,
            head_dim, theta, interleaved, inverse, first_position,
            [&]() -> std::optional<rope::Scaling> {
              rope::Scaling scaling{factor, low_freq_factor, high_freq_factor,
                                    original_positions};
              if (!scaling.none() && !scaling.valid()) {
                setError(ctx,
                         "%s: scaling [%g, %g, %g, %g] needs factor >= 1, "
                         "0 < low < high and original > 0, all finite "
                         "(factor 0: none)",
                         entry, factor, low_freq_factor, high_freq_factor,
                         original_positions);
                return std::nullopt;
              }
              return scaling;
            });
}

static void ropeYarn(tessel_ctx *ctx, const char *entry, int32_t dtype,
                     const void *x, void *y, int64_t outer, int64_t positions,
                     int64_t heads, int64_t head_dim, double theta,
                     int32_t interleaved, int32_t inverse, double factor,
                     double beta_fast, double beta_slow,
                     double original_positions, int32_t truncate,
                     int64_t first_position) {
  ropeEntry(
      ctx, entry, dtype, x, y, outer, positions, heads, head_dim, head_dim,
      theta, interleaved, inverse, first_position,
      [&]() -> std::optional<rope::Scaling> {
        bool good = factor >= 1 && beta_fast > 0 && beta_slow > 0 &&
                    original_positions > 0 && theta > 1 &&
                    std::isfinite(factor) && std::isfinite(beta_fast) &&
                    std::isfinite(beta_slow) &&
                    std::isfinite(original_positions);
        if (!good) {
          setError(ctx,
                   "%s: factor %g, beta_fast %g, beta_slow %g, original %g, "
                   "theta %g need factor >= 1, positive betas and original, "
                   "theta > 1, all finite",
                   entry, factor, beta_fast, beta_slow, original_positions,
                   theta);
          return std::nullopt;
        }
        return rope::yarn(factor, beta_fast, beta_slow, original_positions,
                          truncate != 0, head_dim, theta);
      });
}

static void ropeFactors(tessel_ctx *ctx, const char *entry, int32_t dtype,
                        const void *x, void *y, int64_t outer,
                        int64_t positions, int64_t heads, int64_t head_dim,
                        int64_t rotary_dim, double theta, int32_t interleaved,
                        int32_t inverse, const double *pair_factors,
                        double attention_factor, int64_t first_position) {
  ropeEntry(ctx, entry, dtype, x, y, outer, positions, heads, head_dim,
            rotary_dim, theta, interleaved, inverse, first_position,
            [&]() -> std::optional<rope::Scaling> {
              if (!std::isfinite(attention_factor) || attention_factor <= 0) {
                setError(ctx,
                         "%s: attention_factor %g must be finite and "
                         "positive",
                         entry, attention_factor);
                return std::nullopt;
              }
              const int64_t pairs = pair_factors ? rotary_dim / 2 : 0;
              if (pairs > rope::kMaxFactorPairs) {
                setError(ctx,
                         "%s: %lld pairs with factors, at most %lld "
                         "(rotary_dim %lld)",
                         entry, (long long)pairs,
                         (long long)rope::kMaxFactorPairs,
                         (long long)2 * rope::kMaxFactorPairs);
                return std::nullopt;
              }
              for (int64_t i = 0; i < pairs; ++i)
                if (!std::isfinite(pair_factors[i]) || pair_factors[i] <= 0) {
                  setError(ctx,
                           "%s: pair %lld's factor %g must be finite and "
                           "positive",
                           entry, (long long)i, pair_factors[i]);
                  return std::nullopt;
                }
              rope::Scaling scaling = pair_factors
                                          ? rope::perPair(pair_factors, pairs)
                                          : rope::Scaling{};
              scaling.attention = attention_factor;
              return scaling;
            });
}

extern "C" {

void tessel_rope(tessel_ctx *ctx, int32_t dtype, const void *x, void *y,
                 int64_t outer, int64_t positions, int64_t heads,
                 int64_t head_dim, double theta, int32_t interleaved,
                 int32_t inverse, double factor, double low_freq_factor,
                 double high_freq_factor, double original_positions) {
  ropeLlama(ctx, __func__, dtype, x, y, outer, positions, heads, head_dim,
            theta, interleaved, inverse, factor, low_freq_factor,
            high_freq_factor, original_positions, 0);
}

void tessel_rope_block(tessel_ctx *ctx, int32_t dtype, const void *x, void *y,
                       int64_t outer, int64_t positions, int64_t heads,
                       int64_t head_dim, double theta, int32_t interleaved,
                       int32_t inverse, double factor, double low_freq_factor,
                       double high_freq_factor, double original_positions,
                       int64_t first_position) {
  ropeLlama(ctx, __func__, dtype, x, y, outer, positions, heads, head_dim,
            theta, interleaved, inverse, factor, low_freq_factor,
            high_freq_factor, original_positions, first_position);
}

void tessel_rope_yarn(tessel_ctx *ctx, int32_t dtype, const void *x, void *y,
                      int64_t outer, int64_t positions, int64_t heads,
                      int64_t head_dim, double theta, int32_t interleaved,
                      int32_t inverse, double factor, double beta_fast,
                      double beta_slow, double original_positions,
                      int32_t truncate) {
  ropeYarn(ctx, __func__, dtype, x, y, outer, positions, heads, head_dim, theta,
           interleaved, inverse, factor, beta_fast, beta_slow,
           original_positions, truncate, 0);
}

void tessel_rope_yarn_block(tessel_ctx *ctx, int32_t dtype, const void *x,
                            void *y, int64_t outer, int64_t positions,
                            int64_t heads, int64_t head_dim, double theta,
                            int32_t interleaved, int32_t inverse, double factor,
                            double beta_fast, double beta_slow,
                            double original_positions, int32_t truncate,
                            int64_t first_position) {
  ropeYarn(ctx, __func__, dtype, x, y, outer, positions, heads, head_dim, theta,
           interleaved, inverse, factor, beta_fast, beta_slow,
           original_positions, truncate, first_position);
}

void tessel_rope_factors(tessel_ctx *ctx, int32_t dtype, const void *x, void *y,
                         int64_t outer, int64_t positions, int64_t heads,
                         int64_t head_dim, int64_t rotary_dim, double theta,
                         int32_t interleaved, int32_t inverse,
                         const double *pair_factors, double attention_factor) {
  ropeFactors(ctx, __func__, dtype, x, y, outer, positions, heads, head_dim,
              rotary_dim, theta, interleaved, inverse, pair_factors,
              attention_factor, 0);
}

void tessel_rope_factors_block(tessel_ctx *ctx, int32_t dtype, const void *x,
                               void *y, int64_t outer, int64_t positions,
                               int64_t heads, int64_t head_dim,
                               int64_t rotary_dim, double theta,
                               int32_t interleaved, int32_t inverse,
                               const double *pair_factors,
                               double attention_factor,
                               int64_t first_position) {
  ropeFactors(ctx, __func__, dtype, x, y, outer, positions, heads, head_dim,
              rotary_dim, theta, interleaved, inverse, pair_factors,
              attention_factor, first_position);
}

} // extern "C"
