//===- optimizer.cpp - Gradient norm, clipping and optimizer updates ------===//
//
// torch.optim's SGD (momentum, dampening 0, Nesterov), Adam (L2 weight decay
// added to the gradient) and AdamW (decoupled decay), one fused in-place
// update per parameter tensor. Scalars that change per step on the device
// (the clipping scale) are read from device memory; the arithmetic is f32
// (f64 for f64 parameters), the optimizer state and the scalars are f32, or
// f64 for f64 parameters (ABI 18). Under mixed
// precision the step runs on the f32 master weights and writes their
// rounded copy to the bf16 (or f16) parameter the model computes with.
//
//===----------------------------------------------------------------------===//

#include "cpu/backend.h"
#include "cpu/internal.h"

#include "core/context.h"
#include "core/lr_schedule.h"

#include <algorithm>

using namespace tessel::cpu;

namespace {

template <class T> using Compute = typename Elem<T>::Compute;

/// Where a step's new parameter values go: the parameter, and under mixed
/// precision also its low-precision copy (rounded to nearest even).
template <class T, class L> struct ParamOut {
  T *param;
  L *copy;
  void set(int64_t i, Compute<T> p) const {
    T stored = Elem<T>::store(p);
    param[i] = stored;
    if (copy)
      copy[i] = Elem<L>::store(Compute<L>(Elem<T>::load(stored)));
  }
};

/// S: the optimizer state's type (f32, or f64 with f64 parameters).
template <class T, class G, class L, class S>
void sgdImpl(const tessel_optimizer &opt, ParamOut<T, L> out, const G *grad,
             S gs, S *buf, int64_t n, double lr) {
  T *param = out.param;
  using C = Compute<T>;
  const C scale = C(gs), wd = C(opt.weight_decay), mom = C(opt.momentum);
  const C rate = C(lr);
  const bool decay = opt.weight_decay != 0.0, useMom = opt.momentum != 0.0;
  const bool nesterov = opt.nesterov != 0;
  for (int64_t i = 0; i < n; ++i) {
    C p = Elem<T>::load(param[i]);
    C g = C(Elem<G>::load(grad[i])) * scale;
    if (decay)
      g += wd * p;
    if (useMom) {
      // buf = momentum · buf + g (dampening 0; the zero initial buffer makes
      // the first step buf = g, as PyTorch's clone does).
      S b = S(mom * C(buf[i]) + g);
      buf[i] = b;
      g = nesterov ? g + mom * C(b) : C(b);
    }
    out.set(i, p - rate * g);
  }
}

template <class T, class G, class L, class S>
void adamImpl(const tessel_optimizer &opt, ParamOut<T, L> out, const G *grad,
              S gs, S *m, S *v, int64_t n, int64_t step, double lr) {
  T *param = out.param;
  using C = Compute<T>;
  const bool decoupled = opt.kind == TESSEL_OPT_ADAMW;
  const bool decay = opt.weight_decay != 0.0;
  const C scale = C(gs), wd = C(opt.weight_decay);
  const C b2 = C(opt.beta2), eps = C(opt.eps);
  const C omb1 = C(1.0 - opt.beta1), omb2 = C(1.0 - opt.beta2);
  // As torch.optim.Adam: step_size = lr / (1 − β1^t) and
  // denom = sqrt(v) / sqrt(1 − β2^t) + eps.
  double bc1 = 1.0 - std::pow(opt.beta1, double(step));
  double bc2 = 1.0 - std::pow(opt.beta2, double(step));
  const C stepSize = C(lr / bc1), bc2Sqrt = C(std::sqrt(bc2));
  const C shrink = C(1.0 - lr * opt.weight_decay);
  for (int64_t i = 0; i < n; ++i) {
    C p = Elem<T>::load(param[i]);
    C g = C(Elem<G>::load(grad[i])) * scale;
    if (decay) {
      if (decoupled)
        p *= shrink; // AdamW: p -= lr·wd·p before the Adam step.
      else
        g += wd * p; // Adam: L2 term in the gradient.
    }
    C mi = C(m[i]);
    mi = mi + (g - mi) * omb1; // m.lerp_(g, 1 − β1)
    C vi = C(v[i]) * b2 + omb2 * g * g;
    S ms = S(mi), vs = S(vi);
    m[i] = ms;
    v[i] = vs;
    C denom = std::sqrt(C(vs)) / bc2Sqrt + eps;
    out.set(i, p - stepSize * (C(ms) / denom));
  }
}

} // namespace

void CpuBackend::sumSquares(tessel_ctx *, int32_t dtype, const void *x,
                            int64_t n, int32_t sumDtype, void *sum) {
  double acc = 0.0;
  visitFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *xs = static_cast<const T *>(x);
    for (int64_t i = 0; i < n; ++i) {
      double v = double(Elem<T>::load(xs[i]));
      acc += v * v;
    }
  });
  if (sumDtype == TESSEL_F64) {
    *static_cast<double *>(sum) += acc;
    return;
  }
  float *s = static_cast<float *>(sum);
  *s = float(double(*s) + acc);
}

/// A device scalar of `dtype` (F32 or F64) as a double.
static double loadScalar(int32_t dtype, const void *p) {
  return dtype == TESSEL_F64 ? *static_cast<const double *>(p)
                             : double(*static_cast<const float *>(p));
}

void CpuBackend::clipScale(tessel_ctx *, int32_t dtype, const void *sum_squares,
                           double max_norm, const void *grad_scale,
                           void *scale) {
  double g = grad_scale ? loadScalar(dtype, grad_scale) : 1.0;
  // The norm of the scaled gradient g·grad.
  double norm = std::sqrt(loadScalar(dtype, sum_squares)) * g;
  // As torch.nn.utils.clip_grad_norm_: coef = max_norm / (norm + 1e-6),
  // clamped to 1.
  double coef = max_norm > 0.0 ? std::min(1.0, max_norm / (norm + 1e-6)) : 1.0;
  if (dtype == TESSEL_F64)
    *static_cast<double *>(scale) = coef * g;
  else
    *static_cast<float *>(scale) = float(coef * g);
}

/// The update's count and rate: the caller's, or the context's step + 1
/// and the schedule's rate there (this backend runs work when it is
/// issued, or replays a captured step after its launch's tessel_set_step).
static void resolveStep(const tessel_ctx *ctx, const tessel::UpdateStep &at,
                        int64_t &step, double &lr) {
  step = at.count;
  lr = at.lr;
  if (at.current) {
    step = int64_t(ctx->step + 1);
    lr = tessel::lrAtStep(at.schedule, step);
  }
}

/// One tensor's SGD or Adam step with states (and gradient scale) of type
/// S.
template <class S, class T, class G, class L>
static void updateWithStates(const tessel_optimizer &opt, ParamOut<T, L> out,
                             const G *grad, const void *gradScale, void *state0,
                             void *state1, int64_t n, int64_t step, double lr) {
  S gs = gradScale ? *static_cast<const S *>(gradScale) : S(1);
  S *s0 = static_cast<S *>(state0), *s1 = static_cast<S *>(state1);
  if (opt.kind == TESSEL_OPT_ADAM || opt.kind == TESSEL_OPT_ADAMW)
    adamImpl(opt, out, grad, gs, s0, s1, n, step, lr);
  else
    sgdImpl(opt, out, grad, gs, s0, n, lr);
}

void CpuBackend::optimizerUpdate(tessel_ctx *ctx, const tessel_optimizer &opt,
                                 const UpdateStep &at, int32_t dtype,
                                 void *param, const void *grad,
                                 const void *grad_scale, void *state0,
                                 void *state1, int64_t n) {
  int64_t step;
  double lr;
  resolveStep(ctx, at, step, lr);
  if (at.stateDtype == TESSEL_F64) {
    // ABI 18: f64 parameters with f64 states (the front checked the dtype).
    updateWithStates<double>(
        opt, ParamOut<double, double>{static_cast<double *>(param), nullptr},
        static_cast<const double *>(grad), grad_scale, state0, state1, n, step,
        lr);
    return;
  }
  visitFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    updateWithStates<float>(
        opt, ParamOut<T, T>{static_cast<T *>(param), nullptr},
        static_cast<const T *>(grad), grad_scale, state0, state1, n, step, lr);
  });
}

void CpuBackend::optimizerUpdateMaster(
    tessel_ctx *ctx, const tessel_optimizer &opt, const UpdateStep &at,
    int32_t paramDtype, void *param, void *master, int32_t gradDtype,
    const void *grad, const void *grad_scale, void *state0, void *state1,
    int64_t n) {
  int64_t step;
  double lr;
  resolveStep(ctx, at, step, lr);
  visitFloat(paramDtype, [&](auto paramTag) {
    using L = decltype(paramTag);
    ParamOut<float, L> out{static_cast<float *>(master), static_cast<L *>(param)};
    visitFloat(gradDtype, [&](auto gradTag) {
      using G = decltype(gradTag);
      updateWithStates<float>(opt, out, static_cast<const G *>(grad),
                              grad_scale, state0, state1, n, step, lr);
    });
  });
}
