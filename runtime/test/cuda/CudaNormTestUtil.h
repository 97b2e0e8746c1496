//===- CudaNormTestUtil.h - Helpers of the CUDA norm tests ------*- C++ -*-===//
//
// Shared by CudaNormTest.cpp (host) and CudaNormGpuTest.cpp (GPU): each
// norm kernel (and tessel_binary's add, which the fused residual adds are
// checked against) run through the C ABI on a context, from host vectors to
// host vectors, random data in any float storage type, and the comparisons:
// with a tolerance per type, or bit for bit.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_RUNTIME_TEST_CUDA_CUDANORMTESTUTIL_H
#define TESSEL_RUNTIME_TEST_CUDA_CUDANORMTESTUTIL_H

#include "cuda/CudaTestUtil.h"
#include "cuda/norm_math.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>

namespace tessel::cudatest::norm {

using namespace tessel::cuda::norm_detail;

//===--- Running a kernel through the C ABI -------------------------------===//

template <class T> void *put(tessel_ctx *ctx, const std::vector<T> &host) {
  void *p = tessel_alloc(ctx, int64_t(host.size() * sizeof(T)));
  if (!host.empty())
    tessel_copy_to_device(ctx, p, host.data(), int64_t(host.size() * sizeof(T)));
  return p;
}

template <class T> std::vector<T> take(tessel_ctx *ctx, void *p, size_t n) {
  std::vector<T> host(n);
  tessel_synchronize(ctx);
  if (n)
    tessel_copy_to_host(ctx, host.data(), p, int64_t(n * sizeof(T)));
  tessel_free(ctx, p);
  return host;
}

/// Device buffers of one call: inputs uploaded, outputs allocated; each
/// null where its host vector is absent (an optional gamma, dgamma, ...).
struct Call {
  tessel_ctx *ctx;
  std::vector<void *> owned;
  template <class T> void *in(const std::vector<T> *host) {
    if (!host)
      return nullptr;
    owned.push_back(put(ctx, *host));
    return owned.back();
  }
  template <class T> void *outOf(size_t n, bool wanted = true) {
    return wanted ? tessel_alloc(ctx, int64_t(n * sizeof(T))) : nullptr;
  }
  ~Call() {
    for (void *p : owned)
      tessel_free(ctx, p);
  }
};

template <class T> constexpr int32_t dtypeOf() {
  return std::is_same<T, float>::value    ? TESSEL_F32
         : std::is_same<T, double>::value ? TESSEL_F64
         : std::is_same<T, Half>::value   ? TESSEL_F16
                                          : TESSEL_BF16;
}

template <class T>
std::vector<T> runSoftmax(tessel_ctx *ctx, const std::vector<T> &x, int64_t outer,
                          int64_t dim, int64_t inner) {
  Call c{ctx};
  void *y = c.outOf<T>(x.size());
  tessel_softmax(ctx, dtypeOf<T>(), c.in(&x), y, outer, dim, inner);
  return take<T>(ctx, y, x.size());
}

template <class T>
std::vector<T> runSoftmaxGrad(tessel_ctx *ctx, const std::vector<T> &y,
                              const std::vector<T> &dy, int64_t outer,
                              int64_t dim, int64_t inner) {
  Call c{ctx};
  void *dx = c.outOf<T>(y.size());
  tessel_softmax_grad(ctx, dtypeOf<T>(), c.in(&y), c.in(&dy), dx, outer, dim,
                      inner);
  return take<T>(ctx, dx, y.size());
}

/// tessel_binary TESSEL_ADD: a + b rounded to T.
template <class T>
std::vector<T> runAdd(tessel_ctx *ctx, const std::vector<T> &a,
                      const std::vector<T> &b) {
  Call c{ctx};
  void *out = c.outOf<T>(a.size());
  tessel_binary(ctx, TESSEL_ADD, dtypeOf<T>(), c.in(&a), c.in(&b), out,
                int64_t(a.size()));
  return take<T>(ctx, out, a.size());
}

template <class T>
std::vector<T> runLayerNorm(tessel_ctx *ctx, const std::vector<T> &x,
                            const std::vector<T> *gamma,
                            const std::vector<T> *beta, int64_t rows,
                            int64_t cols, double eps, bool rms) {
  Call c{ctx};
  void *y = c.outOf<T>(x.size());
  tessel_layer_norm(ctx, dtypeOf<T>(), c.in(&x), c.in(gamma), c.in(beta), y,
                    rows, cols, eps, rms);
  return take<T>(ctx, y, x.size());
}

/// dx of T; dγ, dβ of P (f32 from the _f32 entries).
template <class T, class P = T> struct Grads {
  std::vector<T> dx;
  std::vector<P> dgamma, dbeta;
};

template <class T>
Grads<T> runLayerNormGrad(tessel_ctx *ctx, const std::vector<T> &x,
                          const std::vector<T> *gamma, const std::vector<T> &dy,
                          bool wantDgamma, bool wantDbeta, int64_t rows,
                          int64_t cols, double eps, bool rms) {
  Call c{ctx};
  void *dx = c.outOf<T>(x.size());
  void *dg = c.outOf<T>(size_t(cols), wantDgamma);
  void *db = c.outOf<T>(size_t(cols), wantDbeta);
  tessel_layer_norm_grad(ctx, dtypeOf<T>(), c.in(&x), c.in(gamma), c.in(&dy),
                         dx, dg, db, rows, cols, eps, rms);
  Grads<T> g;
  g.dx = take<T>(ctx, dx, x.size());
  if (dg)
    g.dgamma = take<T>(ctx, dg, size_t(cols));
  if (db)
    g.dbeta = take<T>(ctx, db, size_t(cols));
  return g;
}

/// tessel_layer_norm_grad_f32, or with `residual`
/// tessel_layer_norm_grad_add_f32 (ABI 14): 16-bit rows, dγ and dβ in f32.
template <class T>
Grads<T, float>
runLayerNormGradF32(tessel_ctx *ctx, const std::vector<T> &x,
                    const std::vector<T> *gamma, const std::vector<T> &dy,
                    const std::vector<T> *residual, int64_t rows, int64_t cols,
                    double eps, bool rms) {
  Call c{ctx};
  void *dx = c.outOf<T>(x.size());
  void *dg = c.outOf<float>(size_t(cols));
  void *db = c.outOf<float>(size_t(cols));
  if (residual)
    tessel_layer_norm_grad_add_f32(ctx, dtypeOf<T>(), c.in(&x), c.in(gamma),
                                   c.in(&dy), c.in(residual), dx, dg, db, rows,
                                   cols, eps, rms);
  else
    tessel_layer_norm_grad_f32(ctx, dtypeOf<T>(), c.in(&x), c.in(gamma),
                               c.in(&dy), dx, dg, db, rows, cols, eps, rms);
  Grads<T, float> g;
  g.dx = take<T>(ctx, dx, x.size());
  g.dgamma = take<float>(ctx, dg, size_t(cols));
  g.dbeta = take<float>(ctx, db, size_t(cols));
  return g;
}

template <class T>
std::vector<T> runBatchNorm(tessel_ctx *ctx, const std::vector<T> &x,
                            const std::vector<T> *gamma,
                            const std::vector<T> *beta, int64_t outer,
                            int64_t channels, int64_t inner, double eps) {
  Call c{ctx};
  void *y = c.outOf<T>(x.size());
  tessel_batch_norm(ctx, dtypeOf<T>(), c.in(&x), c.in(gamma), c.in(beta), y,
                    outer, channels, inner, eps);
  return take<T>(ctx, y, x.size());
}

template <class T>
Grads<T> runBatchNormGrad(tessel_ctx *ctx, const std::vector<T> &x,
                          const std::vector<T> *gamma, const std::vector<T> &dy,
                          int64_t outer, int64_t channels, int64_t inner,
                          double eps) {
  Call c{ctx};
  void *dx = c.outOf<T>(x.size());
  void *dg = c.outOf<T>(size_t(channels));
  void *db = c.outOf<T>(size_t(channels));
  tessel_batch_norm_grad(ctx, dtypeOf<T>(), c.in(&x), c.in(gamma), c.in(&dy),
                         dx, dg, db, outer, channels, inner, eps);
  return {take<T>(ctx, dx, x.size()), take<T>(ctx, dg, size_t(channels)),
          take<T>(ctx, db, size_t(channels))};
}

//===--- Data and comparison ----------------------------------------------===//

template <class T> std::vector<T> randomRow(size_t n, uint64_t seed, double lo,
                                             double hi) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<T> v(n);
  for (T &e : v)
    e = fromDouble<T>(dist(rng));
  return v;
}

template <class T> double toDouble(T v) { return double(Elem<T>::load(v)); }

/// |a − b| ≤ rel · (|b| + scale), scale the mean |b| of the array or
/// `floor` if larger: relative, with a floor at the size of the terms for
/// the values that cancel to near 0.
template <class A, class B>
void expectNear(const std::vector<A> &got, const std::vector<B> &want,
                double rel, const std::string &what, double floor = 0) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double scale = 0;
  for (const B &w : want)
    scale += std::fabs(toDouble(w));
  scale = std::max(floor, want.empty() ? 0 : scale / double(want.size()));
  int bad = 0;
  for (size_t i = 0; i < got.size() && bad < 5; ++i) {
    double g = toDouble(got[i]), w = toDouble(want[i]);
    if (!(std::fabs(g - w) <= rel * (std::fabs(w) + scale))) {
      ADD_FAILURE() << what << ": element " << i << " is " << g << ", want "
                    << w;
      ++bad;
    }
  }
}

template <class T> uint64_t bitsOf(T v) {
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  return bits;
}

/// Equal bit for bit, any NaN matching any NaN (the device's NaN is the
/// canonical one, the host's carries its operand's payload).
template <class T>
void expectSameBits(const std::vector<T> &got, const std::vector<T> &want,
                    const std::string &what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    bool same = bitsOf(got[i]) == bitsOf(want[i]) ||
                (std::isnan(toDouble(got[i])) && std::isnan(toDouble(want[i])));
    if (!same && bad++ < 5)
      ADD_FAILURE() << what << ": element " << i << " is " << toDouble(got[i])
                    << " (bits " << std::hex << bitsOf(got[i]) << "), want "
                    << std::dec << toDouble(want[i]) << " (bits " << std::hex
                    << bitsOf(want[i]) << ")" << std::dec;
  }
  EXPECT_EQ(bad, 0) << what << ": elements that differ";
}

template <class T> double tolerance() {
  if constexpr (std::is_same<T, double>::value)
    return 1e-12;
  else if constexpr (std::is_same<T, float>::value)
    return 2e-6;
  else if constexpr (std::is_same<T, Half>::value)
    return 2e-3; // a couple of f16 ulps
  else
    return 1.6e-2; // a couple of bf16 ulps
}

/// The size of the terms of layer norm's dx, rstd·|dy|·|γ| at their
/// largest: the floor of its error (dx itself cancels to 0 for one column).
template <class T>
double layerNormGradScale(const std::vector<T> &x, const std::vector<T> *gamma,
                          const std::vector<T> &dy, int64_t rows, int64_t cols,
                          double eps, bool rms) {
  double maxRstd = 0, dyScale = 0, gScale = 1;
  for (int64_t r = 0; r < rows; ++r) {
    double mean = 0, var = 0;
    for (int64_t j = 0; j < cols && !rms; ++j)
      mean += toDouble(x[size_t(r * cols + j)]) / double(cols);
    for (int64_t j = 0; j < cols; ++j)
      var += std::pow(toDouble(x[size_t(r * cols + j)]) - mean, 2) / double(cols);
    maxRstd = std::max(maxRstd, 1.0 / std::sqrt(var + eps));
  }
  for (const T &v : dy)
    dyScale = std::max(dyScale, std::fabs(toDouble(v)));
  if (gamma)
    for (const T &v : *gamma)
      gScale = std::max(gScale, std::fabs(toDouble(v)));
  return maxRstd * dyScale * gScale;
}

inline const int64_t kRows[] = {1, 3, 17, 65};
const int64_t kCols[] = {1, 7, 768, 4097};

inline std::string shapeName(int64_t a, int64_t b, int64_t c = -1) {
  return std::to_string(a) + "x" + std::to_string(b) +
         (c >= 0 ? "x" + std::to_string(c) : "");
}

} // namespace tessel::cudatest::norm

#endif // TESSEL_RUNTIME_TEST_CUDA_CUDANORMTESTUTIL_H
