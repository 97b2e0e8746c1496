//===- loss_math.h - Per-row math of the cross-entropy kernels -*- C++ -*-===//
//
// The cross-entropy kernels (loss.cu) read a row of logits once for its
// log-sum-exp: every thread of the row keeps a running (max, Σ e^(x - max))
// over its elements (the online softmax update), then the row combines the
// threads' pairs in a fixed tree: each sum rescaled to the row's max and
// added in f64, so the result is the same bits on every run. The gradient
// recomputes that and writes g·(e^(x - max) / Σ − onehot) in the same pass
// as it reads the row a second time; probabilities are never stored. The
// arithmetic is the CPU backend's (cpu/norm.cpp, cpu/backward.cpp): f32
// (and 16-bit storage) in f32 with the polynomial exp and f64 sums; f64 in
// f64. The host tests (test/cuda/CudaLossTest.cpp) run these functions as
// the kernels partition a row and compare with the CPU backend.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_RUNTIME_CUDA_LOSS_MATH_H
#define TESSEL_RUNTIME_CUDA_LOSS_MATH_H

#include "core/loss_options.h"
#include "cuda/elementwise_math.h"

namespace tessel {
namespace cuda {

/// One thread's running log-sum-exp: sum = Σ e^(x - max) over the elements
/// added so far (max = -inf and sum = 0 before the first).
template <class C> struct LseState {
  C max;
  C sum;
};

template <class C> TESSEL_HD C negInfinity() { return -C(infinityF()); }

template <class C> TESSEL_HD LseState<C> lseEmpty() {
  return LseState<C>{negInfinity<C>(), C(0)};
}

/// Adds one logit. A -inf logit adds 0 (also before any finite one, where
/// x - max would be NaN); a NaN makes the sum NaN, as on the CPU.
template <class C> TESSEL_HD void lseAdd(LseState<C> &s, C x) {
  if (x > s.max) {
    s.sum = s.sum * expOf(s.max - x) + C(1);
    s.max = x;
  } else {
    s.sum += x == negInfinity<C>() ? C(0) : expOf(x - s.max);
  }
}

/// A thread's sum rescaled to the row's max `rowMax` (>= s.max), in f64
/// for the row's sum. A state that saw no finite logit holds 0 or NaN.
template <class C> TESSEL_HD double lseTerm(const LseState<C> &s, C rowMax) {
  if (s.max == negInfinity<C>())
    return double(s.sum);
  return double(s.sum * expOf(s.max - rowMax));
}

/// A row's Σ e^(x - max) from its max and the threads' terms: NaN when
/// the max is not finite (a row of -inf, or a +inf logit), as on the CPU,
/// where e^(x - max) is NaN there.
template <class C> TESSEL_HD double lseRowSum(C rowMax, double sum) {
  if (!(rowMax > negInfinity<C>() && rowMax < -negInfinity<C>()))
    return double(infinityF()) - double(infinityF());
  return sum;
}

/// log Σ e^x of the row: max + log Σ e^(x - max), in f64.
template <class C> TESSEL_HD double lseOfRow(C rowMax, double rowSum) {
  return double(rowMax) + ::log(rowSum);
}

/// The scale of a row's gradient: dloss[row] (none), dloss[0] (sum) or
/// dloss[0] / rows (mean), in f64.
TESSEL_HD double lossGradScale(int32_t reduction, double dlossRow,
                               double dloss0, int64_t rows) {
  return reduction == TESSEL_LOSS_NONE  ? dlossRow
         : reduction == TESSEL_LOSS_SUM ? dloss0
                                        : dloss0 / double(rows);
}

/// dlogits of one element: e^(x - max)·(g / Σ), minus the target's share
/// of g at the label, then its share at every class (g and 0 unsmoothed,
/// core/loss_options.h); the product rounded before the subtractions, as
/// the CPU does.
template <class C>
TESSEL_HD C crossEntropyGradElement(C x, C rowMax, C k, SmoothedGrad<C> target,
                                    bool isLabel) {
  C p = mulRn(expOf(x - rowMax), k);
  return (isLabel ? p - target.label : p) - target.every;
}

/// Row r's label as a column of a block [classOffset, classOffset +
/// classes) of totalClasses: -1 when another block holds it, -2 when it is
/// outside [0, totalClasses) (an error).
TESSEL_HD int64_t labelColumn(int64_t label, int64_t classes,
                              int64_t classOffset, int64_t totalClasses) {
  if (label < 0 || label >= totalClasses)
    return -2;
  int64_t column = label - classOffset;
  return column >= 0 && column < classes ? column : -1;
}

} // namespace cuda
} // namespace tessel

#endif // TESSEL_RUNTIME_CUDA_LOSS_MATH_H
