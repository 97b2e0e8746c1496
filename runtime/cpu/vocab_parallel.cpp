//===- vocab_parallel.cpp - Label kernels of the cross-entropy ------------===//
//
// The two per-row label kernels of a cross-entropy whose classes are split
// into blocks across ranks (Megatron's vocabulary-parallel loss). Each rank
// holds logits [rows, classes] for classes [class_offset, class_offset +
// classes) of total_classes; the softmax statistics (max, Σ exp) come from
// the ordinary reduce kernels plus all-reduces, and these kernels do the
// part that needs the label:
//
//   forward:  the label's logit, as tessel_label_logit summed over the
//             blocks (an all-reduce): each row's label is in one block and
//             every other block contributes +0;
//   backward: dlogits = g·softmax − g·onehot(label), the onehot term by
//             tessel_sub_label on this rank's block.
//
// Both only move or subtract one element per row, so a row's result is the
// same bits on every split of the classes.
//
// The fused form (ABI 29, Megatron's fused vocab-parallel loss) reads the
// block once for each row's four statistics (tessel_vocab_loss_stats: max,
// Σ e^(y − max), the label's logit, Σ y, of the soft-capped y) and once
// for the gradient from the whole rows' max and sum
// (tessel_vocab_loss_grad, the label smoothing inside): no exponentials
// of the block are stored between them. The _f32 entries (ABI 30) keep
// the statistics of 16-bit logits in f32: the arithmetic is the same (f32
// for 16-bit logits), only the statistics' stores and loads differ.
//
// tessel_mask_labels prepares the labels of a loss that ignores positions
// (ignore_index): the label the cross-entropy reads and the row's weight.
//
//===----------------------------------------------------------------------===//

#include "core/labels.h"
#include "core/loss_options.h"
#include "cpu/backend.h"
#include "cpu/internal.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

using namespace tessel::cpu;

namespace {

/// Row r's label as a column of the block, -1 when another block holds it;
/// a label outside [0, totalClasses) records an error and gives -1 too.
int64_t labelColumn(tessel_ctx *ctx, const char *kernel, int32_t labelDtype,
                    const void *labels, int64_t r, int64_t classes,
                    int64_t classOffset, int64_t totalClasses) {
  int64_t label = loadIndex(labelDtype, labels, r);
  if (label < 0 || label >= totalClasses) {
    setError(ctx, "%s: label %lld of row %lld outside [0, %lld)", kernel,
             (long long)label, (long long)r, (long long)totalClasses);
    return -1;
  }
  int64_t column = label - classOffset;
  return column >= 0 && column < classes ? column : -1;
}

/// f(T(), S()): the logits' stored type and the statistics', T's own or
/// f32 (the front allows f32 only for 16-bit logits).
template <class F>
void visitStatsTypes(int32_t dtype, int32_t statsDtype, F &&f) {
  visitFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    if (statsDtype == dtype)
      f(T(), T());
    else if constexpr (sizeof(T) == 2)
      f(T(), float());
  });
}

} // namespace

void CpuBackend::labelLogit(tessel_ctx *ctx, int32_t dtype,
                            int32_t label_dtype, const void *logits,
                            const void *labels, void *out, int64_t rows,
                            int64_t classes, int64_t class_offset,
                            int64_t total_classes) {
  const char *kernel = "tessel_label_logit";
  visitFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *x = static_cast<const T *>(logits);
    T *y = static_cast<T *>(out);
    for (int64_t r = 0; r < rows; ++r) {
      int64_t c = labelColumn(ctx, kernel, label_dtype, labels, r, classes,
                              class_offset, total_classes);
      // The element itself, not a load/store round trip: the same bits as
      // the whole row's logit (NaN payloads included).
      if (c >= 0)
        y[r] = x[r * classes + c];
      else
        std::memset(&y[r], 0, sizeof(T)); // +0 in every float format.
    }
  });
}

void CpuBackend::vocabLossStats(tessel_ctx *ctx, int32_t dtype,
                                int32_t stats_dtype, int32_t label_dtype,
                                const void *logits, const void *labels,
                                tessel::VocabStats stats, int64_t rows,
                                int64_t classes, int64_t class_offset,
                                int64_t total_classes, double softcap) {
  const char *kernel = "tessel_vocab_loss_stats";
  visitStatsTypes(dtype, stats_dtype, [&](auto tag, auto statsTag) {
    using T = decltype(tag);
    using S = decltype(statsTag);
    using C = typename Elem<T>::Compute;
    const C cap = C(softcap);
    std::vector<C> y(static_cast<size_t>(classes));
    for (int64_t r = 0; r < rows; ++r) {
      const T *xs = static_cast<const T *>(logits) + r * classes;
      C mx = -std::numeric_limits<C>::infinity();
      double logitSum = 0.0;
      for (int64_t c = 0; c < classes; ++c) {
        y[size_t(c)] = tessel::softcapValue(C(Elem<T>::load(xs[c])), cap);
        mx = std::max(mx, y[size_t(c)]);
        logitSum += double(y[size_t(c)]);
      }
      // No logit above -inf: the block adds nothing to the row's sum.
      double sum = 0.0;
      if (mx != -std::numeric_limits<C>::infinity())
        for (int64_t c = 0; c < classes; ++c)
          sum += double(std::exp(y[size_t(c)] - mx));
      int64_t col = labelColumn(ctx, kernel, label_dtype, labels, r, classes,
                                class_offset, total_classes);
      static_cast<S *>(stats.max)[r] = Elem<S>::store(mx);
      static_cast<S *>(stats.sumExp)[r] = fromDouble<S>(sum);
      static_cast<S *>(stats.labelLogit)[r] =
          col >= 0 ? Elem<S>::store(y[size_t(col)]) : fromDouble<S>(0.0);
      static_cast<S *>(stats.logitSum)[r] = fromDouble<S>(logitSum);
    }
  });
}

void CpuBackend::vocabLossGrad(
    tessel_ctx *ctx, int32_t dtype, int32_t stats_dtype, int32_t label_dtype,
    const void *logits, const void *labels, const void *max, const void *sumExp,
    const void *rowGrad, void *dlogits, int64_t rows, int64_t classes,
    int64_t class_offset, int64_t total_classes, tessel::LossOptions options) {
  const char *kernel = "tessel_vocab_loss_grad";
  visitStatsTypes(dtype, stats_dtype, [&](auto tag, auto statsTag) {
    using T = decltype(tag);
    using S = decltype(statsTag);
    using C = typename Elem<T>::Compute;
    const C cap = C(options.softcap);
    for (int64_t r = 0; r < rows; ++r) {
      const T *xs = static_cast<const T *>(logits) + r * classes;
      T *dr = static_cast<T *>(dlogits) + r * classes;
      int64_t col = labelColumn(ctx, kernel, label_dtype, labels, r, classes,
                                class_offset, total_classes);
      double g = double(Elem<S>::load(static_cast<const S *>(rowGrad)[r]));
      C mx = C(Elem<S>::load(static_cast<const S *>(max)[r]));
      C k = C(g / double(Elem<S>::load(static_cast<const S *>(sumExp)[r])));
      tessel::SmoothedGrad<C> target =
          tessel::smoothedGrad<C>(g, total_classes, options.smoothing);
      // Element by element: dlogits may be the logits.
      for (int64_t c = 0; c < classes; ++c) {
        C y = tessel::softcapValue(C(Elem<T>::load(xs[c])), cap);
        dr[c] =
            Elem<T>::store((std::exp(y - mx) * k -
                            (c == col ? target.label : C(0)) - target.every) *
                           tessel::softcapSlope(y, cap));
      }
    }
  });
}

void CpuBackend::subLabel(tessel_ctx *ctx, int32_t dtype, int32_t label_dtype,
                          const void *x, const void *labels,
                          const void *values, void *out, int64_t rows,
                          int64_t classes, int64_t class_offset,
                          int64_t total_classes) {
  const char *kernel = "tessel_sub_label";
  visitFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *xs = static_cast<const T *>(x);
    const T *vs = static_cast<const T *>(values);
    T *ys = static_cast<T *>(out);
    if (ys != xs && rows * classes > 0)
      std::memcpy(ys, xs, size_t(rows * classes) * sizeof(T));
    for (int64_t r = 0; r < rows; ++r) {
      int64_t c = labelColumn(ctx, kernel, label_dtype, labels, r, classes,
                              class_offset, total_classes);
      if (c < 0)
        continue;
      T &y = ys[r * classes + c];
      y = Elem<T>::store(Elem<T>::load(y) - Elem<T>::load(vs[r]));
    }
  });
}

void CpuBackend::maskLabels(tessel_ctx *, int32_t labelDtype, int32_t dtype,
                            const void *labels, int64_t ignoreIndex, void *safe,
                            void *weights, int64_t n) {
  visitFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    using C = typename Elem<T>::Compute;
    T *w = static_cast<T *>(weights);
    for (int64_t i = 0; i < n; ++i) {
      MaskedLabel m = maskLabel(loadIndex(labelDtype, labels, i), ignoreIndex);
      if (labelDtype == TESSEL_I32)
        static_cast<int32_t *>(safe)[i] = int32_t(m.label);
      else
        static_cast<int64_t *>(safe)[i] = m.label;
      w[i] = Elem<T>::store(C(m.weight ? 1 : 0));
    }
  });
}
