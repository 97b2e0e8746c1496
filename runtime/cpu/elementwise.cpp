//===- elementwise.cpp - Binary, unary, cast and dropout kernels ----------===//

#include "cpu/backend.h"
#include "cpu/internal.h"
#include "cpu/vecmath.h"

#include "core/context.h"

#include <functional>

using namespace tessel::cpu;

namespace {

/// Element types whose loops get an AVX2 + FMA copy (dispatch): the ones
/// stored as they are computed. The 16-bit floats convert element by element
/// with bit tricks that do not vectorise either way.
template <class T>
constexpr bool kVectorElem = !std::is_same<T, Half>::value &&
                             !std::is_same<T, BFloat>::value;

/// Which element of b each element of a meets: b[i] (tessel_binary, rows
/// 1), or tessel_binary_broadcast's b[c] or b[r] of an [rows, cols] view,
/// b the left operand with bFirst.
struct Pairing {
  int64_t rows, cols;
  bool perRow = false, bFirst = false;

  static Pairing same(int64_t n) { return {1, n}; }
  static Pairing broadcast(int64_t rows, int64_t cols, int32_t layout) {
    return {rows, cols, (layout & TESSEL_BROADCAST_ROWS) != 0,
            (layout & TESSEL_BROADCAST_B_FIRST) != 0};
  }
};

/// out = fn(a, b) over `pairing`'s elements (mapBinary swaps fn's operands
/// for bFirst). A row at a time: the inner loop vectorises as
/// tessel_binary's always has.
template <class T, class Fn>
void mapPairs(const T *as, const T *bs, T *os, const Pairing &pairing, Fn fn) {
  const int64_t cols = pairing.cols;
  auto loop = [&]() TESSEL_INLINE {
    for (int64_t r = 0; r < pairing.rows; ++r) {
      const T *ar = as + r * cols;
      T *orow = os + r * cols;
      if (pairing.perRow) {
        const auto y = Elem<T>::load(bs[r]);
        for (int64_t c = 0; c < cols; ++c)
          orow[c] = Elem<T>::store(fn(Elem<T>::load(ar[c]), y));
      } else {
        for (int64_t c = 0; c < cols; ++c)
          orow[c] =
              Elem<T>::store(fn(Elem<T>::load(ar[c]), Elem<T>::load(bs[c])));
      }
    }
  };
  if constexpr (kVectorElem<T>)
    dispatch(loop);
  else
    loop();
}

/// out = fn(a, b) over `pairing`'s elements (fn(b, a) with bFirst).
template <class T, class Fn>
void mapBinary(const void *a, const void *b, void *out, const Pairing &pairing,
               Fn fn) {
  const T *as = static_cast<const T *>(a);
  const T *bs = static_cast<const T *>(b);
  T *os = static_cast<T *>(out);
  if (pairing.bFirst)
    mapPairs<T>(as, bs, os, pairing,
                [&](auto x, auto y) TESSEL_INLINE { return fn(y, x); });
  else
    mapPairs<T>(as, bs, os, pairing, fn);
}

template <class T, class Fn>
void mapUnary(const void *x, void *y, int64_t n, Fn fn) {
  const T *xs = static_cast<const T *>(x);
  T *ys = static_cast<T *>(y);
  auto loop = [&]() TESSEL_INLINE {
    for (int64_t i = 0; i < n; ++i)
      ys[i] = Elem<T>::store(fn(Elem<T>::load(xs[i])));
  };
  if constexpr (kVectorElem<T>)
    dispatch(loop);
  else
    loop();
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
  if constexpr (std::is_same<C, float>::value) {
    return fastSigmoid(x);
  } else {
    if (x >= C(0))
      return C(1) / (C(1) + std::exp(-x));
    C e = std::exp(x);
    return e / (C(1) + e);
  }
}

template <class C> C expOf(C x) {
  if constexpr (std::is_same<C, float>::value)
    return fastExp(x);
  else
    return std::exp(x);
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
    mapUnary<T>(x, y, n, [](C v) { return expOf(v); });
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

/// Inverted dropout of n elements whose indices in the whole tensor are
/// indexOf(0 .. n-1), drawn from random stream `stream`.
template <typename IndexOf>
void dropoutElements(int32_t dtype, const void *x, void *y, int64_t n,
                     double rate, uint64_t seed, uint64_t step,
                     uint64_t stream, IndexOf indexOf) {
  visitFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    using C = typename Elem<T>::Compute;
    const T *xs = static_cast<const T *>(x);
    T *ys = static_cast<T *>(y);
    // rate == 1 drops everything; the scale would be infinite.
    C scale = rate < 1.0 ? C(1.0 / (1.0 - rate)) : C(0);
    for (int64_t i = 0; i < n; ++i) {
      double u = uniformOpen(
          hash4(kDropoutDomain ^ seed, step, uint64_t(indexOf(i)), stream));
      bool keep = u >= rate;
      ys[i] = Elem<T>::store(keep ? C(Elem<T>::load(xs[i]) * scale) : C(0));
    }
  });
}

} // namespace

/// tessel_binary and tessel_binary_broadcast: op over `pairing`'s elements;
/// false for an integer division by zero (0 written there).
static bool runBinary(int32_t op, int32_t dtype, const void *a, const void *b,
                      void *out, const Pairing &pairing) {
  bool divByZero = false;
  visitAny(dtype, [&](auto tag) {
    using T = decltype(tag);
    using C = typename Elem<T>::Compute;
    switch (op) {
    case TESSEL_ADD:
      mapBinary<T>(a, b, out, pairing,
                   [](C x, C y) { return wrap<C>(x, y, std::plus<>()); });
      break;
    case TESSEL_SUB:
      mapBinary<T>(a, b, out, pairing,
                   [](C x, C y) { return wrap<C>(x, y, std::minus<>()); });
      break;
    case TESSEL_MUL:
      mapBinary<T>(a, b, out, pairing,
                   [](C x, C y) { return wrap<C>(x, y, std::multiplies<>()); });
      break;
    case TESSEL_DIV:
      if constexpr (isIntegral<C>()) {
        // Integer division by zero (or MIN / -1) is undefined in C++;
        // write 0 and report instead.
        mapBinary<T>(a, b, out, pairing, [&](C x, C y) {
          if (y == 0 || (y == C(-1) && x == std::numeric_limits<C>::min())) {
            divByZero |= y == 0;
            return y == 0 ? C(0) : x;
          }
          return C(x / y);
        });
      } else {
        mapBinary<T>(a, b, out, pairing, [](C x, C y) { return x / y; });
      }
      break;
    case TESSEL_EQUAL:
      // 16-bit floats load exactly into f32: the stored values compare.
      mapBinary<T>(a, b, out, pairing,
                   [](C x, C y) { return x == y ? C(1) : C(0); });
      break;
    }
  });
  return !divByZero;
}

void CpuBackend::binary(tessel_ctx *ctx, int32_t op, int32_t dtype,
                        const void *a, const void *b, void *out, int64_t n) {
  if (!runBinary(op, dtype, a, b, out, Pairing::same(n)))
    setError(ctx, "tessel_binary: integer division by zero");
}

void CpuBackend::binaryBroadcast(tessel_ctx *ctx, int32_t op, int32_t dtype,
                                 const void *a, const void *b, void *out,
                                 int64_t rows, int64_t cols, int32_t layout) {
  if (!runBinary(op, dtype, a, b, out, Pairing::broadcast(rows, cols, layout)))
    setError(ctx, "tessel_binary_broadcast: integer division by zero");
}

void CpuBackend::unary(tessel_ctx *, int32_t op, int32_t dtype, const void *x,
                       void *y, int64_t n) {
  visitFloat(dtype,
             [&](auto tag) { runUnary<decltype(tag)>(op, x, y, n); });
}

void CpuBackend::cast(tessel_ctx *, int32_t src_dtype, int32_t dst_dtype,
                      const void *x, void *y, int64_t n) {
  visitAny(src_dtype, [&](auto srcTag) {
    visitAny(dst_dtype, [&](auto dstTag) {
      castLoop<decltype(srcTag), decltype(dstTag)>(x, y, n);
    });
  });
}

/// The mask's step: the caller's, or the context's as it stands now (this
/// backend runs work when it is issued, or replays a captured step after
/// its launch's tessel_set_step).
static uint64_t stepOf(const tessel_ctx *ctx, tessel::StepRef step) {
  return step.current ? ctx->step : step.step;
}

void CpuBackend::dropout(tessel_ctx *ctx, int32_t dtype, const void *x,
                         void *y, int64_t n, double rate, uint64_t seed,
                         StepRef step, int64_t first, uint64_t stream) {
  dropoutElements(dtype, x, y, n, rate, seed, stepOf(ctx, step), stream,
                  [&](int64_t i) { return first + i; });
}

void CpuBackend::dropoutBlock(tessel_ctx *ctx, int32_t dtype, const void *x,
                              void *y, int32_t rank, const int64_t *shape,
                              const int64_t *strides, double rate,
                              uint64_t seed, StepRef step, int64_t first,
                              uint64_t stream) {
  int64_t n = 1;
  for (int32_t d = 0; d < rank; ++d)
    n *= shape[d];
  // Local row-major index -> the whole tensor's index.
  auto indexOf = [&](int64_t i) {
    int64_t index = first;
    for (int32_t d = rank - 1; d >= 0; --d) {
      index += (i % shape[d]) * strides[d];
      i /= shape[d];
    }
    return index;
  };
  dropoutElements(dtype, x, y, n, rate, seed, stepOf(ctx, step), stream,
                  indexOf);
}
