//===- softcap.h - Soft-capping a score or a logit --------------*- C++ -*-===//
//
// Gemma 2's soft cap, shared by the CPU backend and the CUDA kernels
// (TESSEL_HD): a value s becomes cap · tanh(s / cap), so that none leaves
// (-cap, cap), and the gradient through it is the capped value's times
// 1 − (capped / cap)². Attention caps its scaled scores with it (ABI 24:
// attn_logit_softcapping), the cross-entropy its logits (ABI 27:
// final_logit_softcapping fused into the loss and its gradient).
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_RUNTIME_CORE_SOFTCAP_H
#define TESSEL_RUNTIME_CORE_SOFTCAP_H

#include "core/hd.h"

#include <cmath>

namespace tessel {

TESSEL_HD float softcapTanh(float x) { return tanhf(x); }
TESSEL_HD double softcapTanh(double x) { return tanh(x); }

/// s under the soft cap `cap` (in the arithmetic type): cap · tanh(s / cap),
/// or s itself for cap 0.
template <class A> TESSEL_HD A softcapValue(A s, A cap) {
  return cap > A(0) ? cap * softcapTanh(s / cap) : s;
}

/// The derivative of softcapValue at the value whose capped value is
/// `capped`: 1 - tanh² = 1 - (capped / cap)², or 1 for cap 0. The gradient
/// multiplies the capped value's gradient by it.
template <class A> TESSEL_HD A softcapSlope(A capped, A cap) {
  if (!(cap > A(0)))
    return A(1);
  A t = capped / cap;
  return A(1) - t * t;
}

} // namespace tessel

#endif // TESSEL_RUNTIME_CORE_SOFTCAP_H
