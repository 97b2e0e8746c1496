//===- optimizer_math.h - Optimizer arithmetic, host and device -*- C++ -*-===//
//
// One parameter element's SGD / Adam / AdamW update and the clipping scale,
// exactly as the CPU backend computes them (cpu/optimizer.cpp): the same
// operations in the same order, each rounded on its own (core/storage.h),
// so the CUDA kernels match the CPU bit for bit. What is constant over a
// call (bias corrections, 1 − β, the decoupled shrink) is computed once in
// double and rounded to the compute type, as the CPU does: on the host for
// a caller's step, on the device for the context's (ABI 9's *_current
// updates, whose step a captured graph changes between launches); the
// gradient scale is read on the device. Arithmetic in C: f32 for f32/f16/
// bf16 parameters, f64 for f64; the optimizer state S is f32, or f64 for
// f64 parameters (ABI 18: then nothing is rounded to f32).
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_RUNTIME_CUDA_OPTIMIZER_MATH_H
#define TESSEL_RUNTIME_CUDA_OPTIMIZER_MATH_H

#include "core/storage.h"

#include "tessel/runtime.h"

#include <cstdint>
#include <math.h>

namespace tessel {
namespace cuda {

//===--- SGD --------------------------------------------------------------===//

template <class C> struct SgdCoeffs {
  C weightDecay, momentum, rate;
  bool decay, useMomentum, nesterov;
};

template <class C>
TESSEL_HD SgdCoeffs<C> makeSgdCoeffs(const tessel_optimizer &opt, double lr) {
  return {C(opt.weight_decay), C(opt.momentum), C(lr),
          opt.weight_decay != 0.0, opt.momentum != 0.0, opt.nesterov != 0};
}

/// torch.optim.SGD (dampening 0) on one element: the new parameter from
/// p, the loaded gradient `grad` and the scale; `buf` is the momentum
/// buffer (read and written only with momentum).
template <class C, class S>
TESSEL_HD C sgdElement(const SgdCoeffs<C> &k, C p, C grad, C scale, S &buf) {
  using namespace stored;
  C g = mulRn(grad, scale);
  if (k.decay)
    g = addRn(g, mulRn(k.weightDecay, p));
  if (k.useMomentum) {
    // The zero initial buffer makes the first step buf = g, as PyTorch.
    S b = S(addRn(mulRn(k.momentum, C(buf)), g));
    buf = b;
    g = k.nesterov ? addRn(g, mulRn(k.momentum, C(b))) : C(b);
  }
  return subRn(p, mulRn(k.rate, g));
}

//===--- Adam, AdamW ------------------------------------------------------===//

template <class C> struct AdamCoeffs {
  C weightDecay, beta2, eps, oneMinusBeta1, oneMinusBeta2;
  C stepSize; // lr / (1 − β1^t)
  C bc2Sqrt;  // sqrt(1 − β2^t)
  C shrink;   // 1 − lr·wd (AdamW)
  bool decay, decoupled;
};

/// The per-call constants in double, rounded to C, as torch.optim.Adam:
/// step_size = lr / (1 − β1^t), denom = sqrt(v) / sqrt(1 − β2^t) + eps.
/// On the host for a caller's step; on the device, once per block, for the
/// context's step (the device's pow may differ in the last bit).
template <class C>
TESSEL_HD AdamCoeffs<C> makeAdamCoeffs(const tessel_optimizer &opt,
                                       int64_t step, double lr) {
  using namespace stored;
  double bc1 = 1.0 - pow(opt.beta1, double(step));
  double bc2 = 1.0 - pow(opt.beta2, double(step));
  return {C(opt.weight_decay),
          C(opt.beta2),
          C(opt.eps),
          C(1.0 - opt.beta1),
          C(1.0 - opt.beta2),
          C(lr / bc1),
          C(sqrt(bc2)),
          C(subRn(1.0, mulRn(lr, opt.weight_decay))),
          opt.weight_decay != 0.0,
          opt.kind == TESSEL_OPT_ADAMW};
}

/// Adam (L2 decay in the gradient) or AdamW (decoupled decay) on one
/// element: the new parameter; m and v are updated in place.
template <class C, class S>
TESSEL_HD C adamElement(const AdamCoeffs<C> &k, C p, C grad, C scale, S &m,
                        S &v) {
  using namespace stored;
  C g = mulRn(grad, scale);
  if (k.decay) {
    if (k.decoupled)
      p = mulRn(p, k.shrink); // AdamW: p −= lr·wd·p before the Adam step
    else
      g = addRn(g, mulRn(k.weightDecay, p));
  }
  C mi = C(m);
  mi = addRn(mi, mulRn(subRn(g, mi), k.oneMinusBeta1)); // m.lerp_(g, 1 − β1)
  C vi = addRn(mulRn(C(v), k.beta2), mulRn(mulRn(k.oneMinusBeta2, g), g));
  S ms = S(mi), vs = S(vi);
  m = ms;
  v = vs;
  C denom = addRn(divRn(sqrtRn(C(vs)), k.bc2Sqrt), k.eps);
  return subRn(p, mulRn(k.stepSize, divRn(C(ms), denom)));
}

//===--- Clipping ---------------------------------------------------------===//

/// tessel_clip_scale: min(1, maxNorm / (sqrt(sumSquares)·g + 1e-6))·g in
/// double, g the gradient scale (1 without one); maxNorm <= 0 gives g.
/// Callers of f32 scalars widen the inputs (exactly) and round the result
/// to float; those of f64 scalars (ABI 18) round nothing.
TESSEL_HD double clipScaleValue(double sumSquares, double maxNorm, double g) {
  using namespace stored;
  double norm = mulRn(sqrtRn(sumSquares), g);
  double coef = 1.0;
  if (maxNorm > 0.0) {
    double ratio = divRn(maxNorm, addRn(norm, 1e-6));
    coef = ratio < 1.0 ? ratio : 1.0; // std::min(1.0, ratio), NaN gives 1
  }
  return mulRn(coef, g);
}

} // namespace cuda
} // namespace tessel

#endif // TESSEL_RUNTIME_CUDA_OPTIMIZER_MATH_H
