//===- checks.h - Argument checks the kernel entry points share -*- C++ -*-===//
//
// Private to the front: each check records "<kernel>: <reason>" on the
// context and fails, so every backend reports the same errors for the same
// bad call.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_RUNTIME_CORE_CHECKS_H
#define TESSEL_RUNTIME_CORE_CHECKS_H

#include "core/context.h"
#include "core/loss_options.h"

#include <climits>
#include <cmath>
#include <cstdint>

namespace tessel {

inline bool isFloatDtype(int32_t dtype) {
  return dtype == TESSEL_F32 || dtype == TESSEL_F16 || dtype == TESSEL_BF16 ||
         dtype == TESSEL_F64;
}

/// f16 or bf16: stored in 16 bits, computed in f32.
inline bool isHalfDtype(int32_t dtype) {
  return dtype == TESSEL_F16 || dtype == TESSEL_BF16;
}

inline bool isIntDtype(int32_t dtype) {
  return dtype == TESSEL_I32 || dtype == TESSEL_I64;
}

inline bool isKnownDtype(int32_t dtype) {
  return isFloatDtype(dtype) || isIntDtype(dtype);
}

/// Records "<kernel>: unsupported dtype D" unless `ok`.
inline bool checkDtype(tessel_ctx *ctx, const char *kernel, int32_t dtype,
                       bool ok) {
  if (!ok)
    setError(ctx, "%s: unsupported dtype %d", kernel, dtype);
  return ok;
}

/// checkDtype of an entry that writes some results in f32 (`widened`: the
/// _f32 entries, of f16/bf16 inputs only) or all in its inputs' float dtype.
inline bool checkWidenedDtype(tessel_ctx *ctx, const char *kernel,
                              int32_t dtype, bool widened) {
  return checkDtype(ctx, kernel, dtype,
                    widened ? isHalfDtype(dtype) : isFloatDtype(dtype));
}

/// Integer indices (labels, ids) are i32 or i64; otherwise records
/// "<kernel>: <what> must be i32 or i64" and fails.
inline bool checkIndexDtype(tessel_ctx *ctx, const char *kernel,
                            const char *what, int32_t dtype) {
  if (isIntDtype(dtype))
    return true;
  setError(ctx, "%s: %s must be i32 or i64, got dtype %d", kernel, what, dtype);
  return false;
}

/// rows × cols elements, neither negative and the count within int64;
/// otherwise records "<kernel>: ..." and fails.
inline bool checkRows(tessel_ctx *ctx, const char *kernel, int64_t rows,
                      int64_t cols) {
  int64_t count;
  if (rows < 0 || cols < 0) {
    setError(ctx, "%s: negative shape [%lld, %lld]", kernel, (long long)rows,
             (long long)cols);
    return false;
  }
  if (__builtin_mul_overflow(rows, cols, &count)) {
    setError(ctx, "%s: [%lld, %lld] elements overflow int64", kernel,
             (long long)rows, (long long)cols);
    return false;
  }
  return true;
}

/// Whether [a, a + aBytes) and [b, b + bBytes) share a byte.
inline bool overlaps(const void *a, int64_t aBytes, const void *b,
                     int64_t bBytes) {
  auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  return aBytes > 0 && bBytes > 0 && x < y + uint64_t(bBytes) &&
         y < x + uint64_t(aBytes);
}

/// A cross-entropy kernel's arguments: labels i32 or i64, a known
/// reduction, [rows, classes] logits of a float dtype, or f16/bf16 where
/// the loss is f32 (`f32Loss`: the _f32 entries).
inline bool checkLoss(tessel_ctx *ctx, const char *kernel, int32_t dtype,
                      bool f32Loss, int32_t labelDtype, int64_t rows,
                      int64_t classes, int32_t reduction) {
  if (!checkIndexDtype(ctx, kernel, "labels", labelDtype) ||
      !checkRows(ctx, kernel, rows, classes))
    return false;
  if (reduction < TESSEL_LOSS_MEAN || reduction > TESSEL_LOSS_NONE) {
    setError(ctx, "%s: unknown reduction %d", kernel, reduction);
    return false;
  }
  return checkWidenedDtype(ctx, kernel, dtype, f32Loss);
}

/// A loss's options: a logit soft cap finite and >= 0 (0: none) and a label
/// smoothing in [0, 1]; otherwise records an error naming `kernel`.
inline bool checkLossOptions(tessel_ctx *ctx, const char *kernel,
                             LossOptions options) {
  if (!std::isfinite(options.softcap) || options.softcap < 0) {
    setError(ctx, "%s: softcap %g must be finite and >= 0 (0: none)", kernel,
             options.softcap);
    return false;
  }
  if (!(options.smoothing >= 0 && options.smoothing <= 1)) {
    setError(ctx, "%s: label smoothing %g must be in [0, 1] (0: none)", kernel,
             options.smoothing);
    return false;
  }
  return true;
}

/// A cross-entropy entry point: traced as `entry`, its arguments checked
/// (checkLoss), then run(lossDtype) with the loss's dtype, f32 for the
/// _f32 entries (`f32Loss`) and the logits' otherwise.
template <class Run>
void lossEntry(tessel_ctx *ctx, const char *entry, int32_t dtype,
               bool f32Loss, int32_t labelDtype, int64_t rows,
               int64_t classes, int32_t reduction, Run &&run) {
  if (!ctx)
    return;
  KernelScope scope(ctx, entry);
  if (checkLoss(ctx, entry, dtype, f32Loss, labelDtype, rows, classes,
                reduction))
    run(f32Loss ? int32_t(TESSEL_F32) : dtype);
}

/// A cross-entropy entry point with the loss's dtype given and options
/// (tessel_cross_entropy_with_grad and the _softcap and _smoothed
/// entries): traced as `entry`, the loss dtype the logits' or f32 (for
/// 16-bit logits), then checkLoss's and checkLossOptions's checks; then
/// run().
template <class Run>
void optionsLossEntry(tessel_ctx *ctx, const char *entry, int32_t dtype,
                      int32_t lossDtype, int32_t labelDtype, int64_t rows,
                      int64_t classes, int32_t reduction, LossOptions options,
                      Run &&run) {
  if (!ctx)
    return;
  KernelScope scope(ctx, entry);
  if (lossDtype != dtype && lossDtype != TESSEL_F32) {
    setError(ctx, "%s: loss dtype %d (expected the logits' %d or f32)", entry,
             lossDtype, dtype);
    return;
  }
  if (checkLoss(ctx, entry, dtype, lossDtype != dtype, labelDtype, rows,
                classes, reduction) &&
      checkLossOptions(ctx, entry, options))
    run();
}

/// A block [offset, offset + size) of an extent `total` (a rank's rows of a
/// vocabulary-parallel table or its classes of the logits): non-negative and
/// inside [0, total]; otherwise records an error naming `kernel` and fails.
inline bool checkBlock(tessel_ctx *ctx, const char *kernel, const char *what,
                       int64_t size, int64_t offset, int64_t total) {
  if (size >= 0 && offset >= 0 && total >= 0 && size <= total - offset)
    return true;
  setError(ctx, "%s: block of %lld %s at offset %lld outside [0, %lld)", kernel,
           (long long)size, what, (long long)offset, (long long)total);
  return false;
}

/// The argument checks every attention entry shares: float dtype,
/// non-negative sizes, kv heads dividing heads, every GEMM dimension within
/// a BLAS int, a sliding window (a number of keys) on a causal mask
/// only, and a soft cap that is 0 (none) or finite and positive.
inline bool checkAttentionArgs(tessel_ctx *ctx, const char *kernel,
                               int32_t dtype, int64_t batch, int64_t seq,
                               int64_t kvSeq, int64_t heads, int64_t kvHeads,
                               int64_t headDim, int64_t valueDim,
                               int32_t causal, int64_t window,
                               double softcap = 0, int64_t queryOffset = 0) {
  if (!checkDtype(ctx, kernel, dtype, isFloatDtype(dtype)))
    return false;
  if (batch < 0 || seq < 0 || kvSeq < 0 || heads < 0 || headDim < 0 ||
      valueDim < 0 || kvHeads <= 0 || heads % kvHeads != 0) {
    setError(ctx, "%s: bad shape (heads %lld, kv_heads %lld)", kernel,
             (long long)heads, (long long)kvHeads);
    return false;
  }
  if (seq * kvSeq > INT_MAX || heads * headDim > INT_MAX ||
      heads * valueDim > INT_MAX) {
    setError(ctx, "%s: dimension beyond BLAS int range", kernel);
    return false;
  }
  if (window < 0 || (window > 0 && !causal)) {
    setError(ctx, "%s: window %lld %s", kernel, (long long)window,
             window < 0 ? "is negative" : "needs the causal mask");
    return false;
  }
  if (!(softcap >= 0) || std::isinf(softcap)) {
    setError(ctx, "%s: softcap %g is not 0 or a finite positive number", kernel,
             softcap);
    return false;
  }
  // A block of the queries is a block of the keys' sequence.
  if (queryOffset != 0 &&
      (queryOffset < 0 || !causal || queryOffset > kvSeq - seq)) {
    setError(ctx,
             "%s: query_offset %lld needs the causal mask and a block of "
             "%lld queries inside the %lld keys",
             kernel, (long long)queryOffset, (long long)seq, (long long)kvSeq);
    return false;
  }
  return true;
}

/// The checks both vocabulary-parallel label kernels share.
inline bool checkLabelArgs(tessel_ctx *ctx, const char *kernel, int32_t dtype,
                           int32_t labelDtype, int64_t rows, int64_t classes,
                           int64_t classOffset, int64_t totalClasses) {
  if (!checkDtype(ctx, kernel, dtype, isFloatDtype(dtype)) ||
      !checkIndexDtype(ctx, kernel, "labels", labelDtype))
    return false;
  if (rows < 0) {
    setError(ctx, "%s: negative shape", kernel);
    return false;
  }
  return checkBlock(ctx, kernel, "classes", classes, classOffset, totalClasses);
}

} // namespace tessel

#endif // TESSEL_RUNTIME_CORE_CHECKS_H
