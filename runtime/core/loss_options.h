//===- loss_options.h - A loss's soft cap and label smoothing -*- C++ -*-===//
//
// The two options of nn.cross_entropy the loss kernels compute inside their
// row passes, shared by the CPU backend and the CUDA kernels (TESSEL_HD):
// a soft cap of the logits (ABI 27, core/softcap.h) and PyTorch's label
// smoothing ε (ABI 28), whose target is (1 − ε) at the label plus ε/V at
// every class. With y the (capped) logits of a row of V classes:
//
//   loss      = lse(y) − (1 − ε)·y[label] − ε·Σy / V
//   dloss/dy  = g · (softmax(y) − (1 − ε)·onehot − ε / V)
//
// so the kernels need one more sum per row and no logits-sized term. ε = 0
// computes exactly the plain loss and gradient (the same bits).
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_RUNTIME_CORE_LOSS_OPTIONS_H
#define TESSEL_RUNTIME_CORE_LOSS_OPTIONS_H

#include "core/hd.h"
#include "core/softcap.h"

#include <cstdint>

namespace tessel {

struct LossOptions {
  double softcap = 0;   ///< the logits capped by softcapValue; 0: none
  double smoothing = 0; ///< label smoothing ε in [0, 1]; 0: none
};

/// The row statistics of a block of a vocabulary-parallel loss
/// (tessel_vocab_loss_stats), each [rows] of the logits' dtype, or f32 for
/// 16-bit logits (tessel_vocab_loss_stats_f32).
struct VocabStats {
  void *max, *sumExp, *labelLogit, *logitSum;
};

/// A row's loss from its log-sum-exp, its label's logit and the sum of its
/// `classes` logits (all of the capped logits, in f64): lse − y[label]
/// unsmoothed (logitSum unread), else lse − (1 − ε)·y[label] − ε·Σy / V.
TESSEL_HD double smoothedRowLoss(double lse, double labelLogit, double logitSum,
                                 int64_t classes, double smoothing) {
  if (!(smoothing > 0))
    return lse - labelLogit;
  return lse - (1.0 - smoothing) * labelLogit -
         smoothing * (logitSum / double(classes));
}

/// What a row's gradient g subtracts from g·softmax: `label` at the label
/// and `every` at every class (g and 0 unsmoothed: the plain gradient's
/// bits), in the arithmetic type.
template <class C> struct SmoothedGrad {
  C label;
  C every;
};

template <class C>
TESSEL_HD SmoothedGrad<C> smoothedGrad(double g, int64_t classes,
                                       double smoothing) {
  if (!(smoothing > 0))
    return SmoothedGrad<C>{C(g), C(0)};
  return SmoothedGrad<C>{C(g * (1.0 - smoothing)),
                         C(g * smoothing / double(classes))};
}

} // namespace tessel

#endif // TESSEL_RUNTIME_CORE_LOSS_OPTIONS_H
