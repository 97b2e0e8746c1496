//===- elementwise.cpp - Binary, unary, cast and dropout kernels ----------===//

#include "internal.h"

#include <functional>

using namespace tessel::cpu;

namespace {

template <class T, class Fn>
void mapBinary(const void *a, const void *b, void *out, int64_t n, Fn fn) {
  const T *as = static_cast<const T *>(a);
  const T *bs = static_cast<const T *>(b);
  T *os = static_cast<T *>(out);
  for (int64_t i = 0; i < n; ++i)
    os[i] = Elem<T>::store(fn(Elem<T>::load(as[i]), Elem<T>::load(bs[i])));
}

template <class T, class Fn>
void mapUnary(const void *x, void *y, int64_t n, Fn fn) {
  const T *xs = static_cast<const T *>(x);
  T *ys = static_cast<T *>(y);
  for (int64_t i = 0; i < n; ++i)
    ys[i] = Elem<T>::store(fn(Elem<T>::load(xs[i])));
}

/// Applies `fn`; integers go through their unsigned type so that overflow
/// wraps instead of being undefined.
template <class C, class Fn> C wrap(C x, C y, Fn fn) {
  if constexpr (isIntegral<C>()) {
    using U = std::make_unsigned_t<C>;
    return C(U(fn(U(x), U(y))));
  } else {
    return fn(x, y);
  }
}

/// 1 / (1 + e^-x) without overflow: e^-|x| never exceeds 1.
template <class C> C sigmoid(C x) {
  if (x >= C(0))
    return C(1) / (C(1) + std::exp(-x));
  C e = std::exp(x);
  return e / (C(1) + e);
}

/// tanh for f32 as a [13/6] rational function on [-7.9, 7.9] (the
/// approximation Eigen uses): no libm call, so the loop vectorises; glibc's
/// scalar tanhf costs ~20 ns an element and made GELU the slowest kernel of
/// a GPT step. Within a few ulp of tanhf; exact ±1 beyond the clamp.
/// Clamps with plain comparisons: fminf/fmaxf are libm calls on x86-64 and
/// would stop the loop from vectorising.
inline float clampTo(float x, float bound) {
  x = x < -bound ? -bound : x;
  return x > bound ? bound : x;
}

inline float fastTanh(float x) {
  float c = clampTo(x, 7.90531110763549805f);
  float c2 = c * c;
  float p = c2 * -2.76076847742355e-16f + 2.00018790482477e-13f;
  p = c2 * p + -8.60467152213735e-11f;
  p = c2 * p + 5.12229709037114e-08f;
  p = c2 * p + 1.48572235717979e-05f;
  p = c2 * p + 6.37261928875436e-04f;
  p = c2 * p + 4.89352455891786e-03f;
  p = c * p;
  float q = c2 * 1.19825839466702e-06f + 1.18534705686654e-04f;
  q = c2 * q + 2.26843463243900e-03f;
  q = c2 * q + 4.89352518554385e-03f;
  // Tiny inputs: tanh(x) = x to float precision, and keeps -0 and denormals.
  // The quotient is computed unconditionally so the choice is a select.
  float ratio = p / q;
  return std::fabs(x) < 0.0004f ? x : ratio;
}

/// erf for f32 as a [13/8] rational function on [-4, 4] (Eigen's), for the
/// same reason as fastTanh.
inline float fastErf(float x) {
  float c = clampTo(x, 4.0f);
  float c2 = c * c;
  float p = c2 * -2.72614225801306e-10f + 2.77068142495902e-08f;
  p = c2 * p + -2.10102402082508e-06f;
  p = c2 * p + -5.69250639462346e-05f;
  p = c2 * p + -7.34990630326855e-04f;
  p = c2 * p + -2.95459980854025e-03f;
  p = c2 * p + -1.60960333262415e-02f;
  p = c * p;
  float q = c2 * -1.45660718464996e-05f + -2.13374055278905e-04f;
  q = c2 * q + -1.68282697438203e-03f;
  q = c2 * q + -7.37332916720468e-03f;
  q = c2 * q + -1.42647390514189e-02f;
  return p / q;
}

template <class C> C tanhOf(C x) {
  if constexpr (std::is_same<C, float>::value)
    return fastTanh(x);
  else
    return std::tanh(x);
}

template <class C> C erfOf(C x) {
  if constexpr (std::is_same<C, float>::value)
    return fastErf(x);
  else
    return std::erf(x);
}

template <class T> bool runUnary(int32_t op, const void *x, void *y, int64_t n) {
  using C = typename Elem<T>::Compute;
  switch (op) {
  case TESSEL_NEG:
    mapUnary<T>(x, y, n, [](C v) { return -v; });
    return true;
  case TESSEL_EXP:
    mapUnary<T>(x, y, n, [](C v) { return std::exp(v); });
    return true;
  case TESSEL_LOG:
    mapUnary<T>(x, y, n, [](C v) { return std::log(v); });
    return true;
  case TESSEL_SQRT:
    mapUnary<T>(x, y, n, [](C v) { return std::sqrt(v); });
    return true;
  case TESSEL_RSQRT:
    mapUnary<T>(x, y, n, [](C v) { return C(1) / std::sqrt(v); });
    return true;
  case TESSEL_TANH:
    mapUnary<T>(x, y, n, [](C v) { return tanhOf(v); });
    return true;
  case TESSEL_SIGMOID:
    mapUnary<T>(x, y, n, [](C v) { return sigmoid(v); });
    return true;
  case TESSEL_RELU:
    // v > 0 ? v : 0 would turn NaN into 0; keep NaN visible.
    mapUnary<T>(x, y, n, [](C v) { return v < C(0) ? C(0) : v; });
    return true;
  case TESSEL_GELU:
    mapUnary<T>(x, y, n, [](C v) {
      return C(0.5) * v * (C(1) + erfOf(v * C(M_SQRT1_2)));
    });
    return true;
  case TESSEL_GELU_TANH:
    mapUnary<T>(x, y, n, [](C v) {
      const C k = C(0.79788456080286535588); // sqrt(2 / pi)
      return C(0.5) * v * (C(1) + tanhOf(k * (v + C(0.044715) * v * v * v)));
    });
    return true;
  case TESSEL_SILU:
    mapUnary<T>(x, y, n, [](C v) { return v * sigmoid(v); });
    return true;
  default:
    return false;
  }
}

template <class TIn, class TOut> void castLoop(const void *x, void *y, int64_t n) {
  const TIn *xs = static_cast<const TIn *>(x);
  TOut *ys = static_cast<TOut *>(y);
  for (int64_t i = 0; i < n; ++i) {
    if constexpr (isIntegral<TIn>() && isIntegral<TOut>())
      ys[i] = TOut(xs[i]); // Exact through int64; narrowing wraps like C.
    else if constexpr (std::is_same<TIn, TOut>::value)
      ys[i] = xs[i];
    else
      ys[i] = fromDouble<TOut>(toDouble(xs[i]));
  }
}

} // namespace

extern "C" {

void tessel_binary(tessel_ctx *ctx, int32_t op, int32_t dtype, const void *a,
                   const void *b, void *out, int64_t n) {
  KernelScope scope(ctx);
  if (op < TESSEL_ADD || op > TESSEL_DIV) {
    setError(ctx, "tessel_binary: unknown op %d", op);
    return;
  }
  bool divByZero = false;
  bool ok = visitAny(dtype, [&](auto tag) {
    using T = decltype(tag);
    using C = typename Elem<T>::Compute;
    switch (op) {
    case TESSEL_ADD:
      mapBinary<T>(a, b, out, n, [](C x, C y) { return wrap<C>(x, y, std::plus<>()); });
      break;
    case TESSEL_SUB:
      mapBinary<T>(a, b, out, n, [](C x, C y) { return wrap<C>(x, y, std::minus<>()); });
      break;
    case TESSEL_MUL:
      mapBinary<T>(a, b, out, n, [](C x, C y) { return wrap<C>(x, y, std::multiplies<>()); });
      break;
    case TESSEL_DIV:
      if constexpr (isIntegral<C>()) {
        // Integer division by zero (or MIN / -1) is undefined in C++;
        // write 0 and report instead.
        mapBinary<T>(a, b, out, n, [&](C x, C y) {
          if (y == 0 || (y == C(-1) && x == std::numeric_limits<C>::min())) {
            divByZero |= y == 0;
            return y == 0 ? C(0) : x;
          }
          return C(x / y);
        });
      } else {
        mapBinary<T>(a, b, out, n, [](C x, C y) { return x / y; });
      }
      break;
    }
  });
  if (!ok)
    setError(ctx, "tessel_binary: unsupported dtype %d", dtype);
  else if (divByZero)
    setError(ctx, "tessel_binary: integer division by zero");
}

void tessel_unary(tessel_ctx *ctx, int32_t op, int32_t dtype, const void *x,
                  void *y, int64_t n) {
  KernelScope scope(ctx);
  bool opOk = true;
  bool ok = visitFloat(dtype, [&](auto tag) {
    opOk = runUnary<decltype(tag)>(op, x, y, n);
  });
  if (!ok)
    setError(ctx, "tessel_unary: unsupported dtype %d", dtype);
  else if (!opOk)
    setError(ctx, "tessel_unary: unknown op %d", op);
}

void tessel_cast(tessel_ctx *ctx, int32_t src_dtype, int32_t dst_dtype,
                 const void *x, void *y, int64_t n) {
  KernelScope scope(ctx);
  bool dstOk = false;
  bool srcOk = visitAny(src_dtype, [&](auto srcTag) {
    dstOk = visitAny(dst_dtype, [&](auto dstTag) {
      castLoop<decltype(srcTag), decltype(dstTag)>(x, y, n);
    });
  });
  if (!srcOk || !dstOk)
    setError(ctx, "tessel_cast: unsupported dtypes %d -> %d", src_dtype,
             dst_dtype);
}

void tessel_dropout(tessel_ctx *ctx, int32_t dtype, const void *x, void *y,
                    int64_t n, double rate, uint64_t seed, uint64_t step,
                    int64_t first) {
  KernelScope scope(ctx);
  if (!(rate >= 0.0 && rate <= 1.0)) {
    setError(ctx, "tessel_dropout: rate %g outside [0, 1]", rate);
    return;
  }
  bool ok = visitFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    using C = typename Elem<T>::Compute;
    const T *xs = static_cast<const T *>(x);
    T *ys = static_cast<T *>(y);
    // rate == 1 drops everything; the scale would be infinite.
    C scale = rate < 1.0 ? C(1.0 / (1.0 - rate)) : C(0);
    for (int64_t i = 0; i < n; ++i) {
      double u = uniformOpen(
          hash4(kDropoutDomain ^ seed, step, uint64_t(first + i), 0));
      bool keep = u >= rate;
      ys[i] = Elem<T>::store(keep ? C(Elem<T>::load(xs[i]) * scale) : C(0));
    }
  });
  if (!ok)
    setError(ctx, "tessel_dropout: unsupported dtype %d", dtype);
}

} // extern "C"
