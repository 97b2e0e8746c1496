//===- BackwardTestSupport.h - Checks of backward kernels -------*- C++ -*-===//
//
// What BackwardTest.cpp and NormBackwardTest.cpp check every backward
// kernel with: its f64 gradient of L(x) = Σ r ⊙ f(x) against central
// finite differences of the forward, and its f32 and 16-bit results
// against its f64 one on the same representable inputs; and a norm's row
// statistics as a double reference computes them.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_RUNTIME_TEST_BACKWARDTESTSUPPORT_H
#define TESSEL_RUNTIME_TEST_BACKWARDTESTSUPPORT_H

#include "TestUtil.h"

#include <cmath>
#include <functional>
#include <string>

namespace tt::backward {

using Vec = std::vector<double>;
using Vecs = std::vector<Vec>;
using Bytes = std::vector<uint8_t>;

/// The f64 forward: inputs to the output that L weights.
using Forward = std::function<Vec(const Vecs &)>;
/// The backward at `dtype`: (inputs, dy) to the gradients of the inputs it
/// differentiates, in input order.
using Backward = std::function<Vecs(int32_t, const Vecs &, const Vec &)>;

inline Vec quantized(int32_t dtype, Vec v) {
  for (double &x : v)
    x = quantize(dtype, x);
  return v;
}

inline double maxAbs(const Vec &v) {
  double m = 0;
  for (double x : v)
    m = std::max(m, std::fabs(x));
  return m;
}

/// ∂L/∂inputs[which] by central differences.
inline Vec fdGrad(const Forward &f, Vecs xs, const Vec &r, size_t which,
                  double h = 1e-6) {
  Vec g(xs[which].size());
  for (size_t j = 0; j < g.size(); ++j) {
    double v = xs[which][j];
    xs[which][j] = v + h;
    Vec fp = f(xs);
    xs[which][j] = v - h;
    Vec fm = f(xs);
    xs[which][j] = v;
    // Difference per element before summing: no cancellation of large L.
    double s = 0;
    for (size_t i = 0; i < r.size(); ++i)
      s += r[i] * (fp[i] - fm[i]);
    g[j] = s / (2 * h);
  }
  return g;
}

/// Analytic f64 gradients of inputs[wrt[i]] against finite differences.
inline void checkFiniteDifferences(const Forward &fwd, const Backward &bwd,
                                   const Vecs &inputs, const Vec &r,
                                   const std::vector<size_t> &wrt) {
  Vecs analytic = bwd(TESSEL_F64, inputs, r);
  ASSERT_EQ(analytic.size(), wrt.size());
  for (size_t i = 0; i < wrt.size(); ++i) {
    SCOPED_TRACE("gradient of input " + std::to_string(wrt[i]));
    Vec fd = fdGrad(fwd, inputs, r, wrt[i]);
    expectClose(analytic[i], fd, 1e-6, 1e-7 * std::max(1.0, maxAbs(fd)));
  }
}

/// The f32 and 16-bit kernels against the f64 kernel on the same inputs.
/// Their compute is f32 from exactly representable inputs with one final
/// rounding, so the error is an ulp of the dtype plus f32 noise relative to
/// the gradient's scale.
inline void checkDtypes(const Backward &bwd, const Vecs &inputs, const Vec &r,
                        std::initializer_list<int32_t> dtypes = {TESSEL_F32,
                                                                 TESSEL_BF16},
                        double noise = 1e-5) {
  for (int32_t dtype : dtypes) {
    SCOPED_TRACE(dtypeName(dtype));
    Vecs qin;
    for (const Vec &v : inputs)
      qin.push_back(quantized(dtype, v));
    Vec qr = quantized(dtype, r);
    Vecs ref = bwd(TESSEL_F64, qin, qr);
    Vecs got = bwd(dtype, qin, qr);
    ASSERT_EQ(ref.size(), got.size());
    for (size_t i = 0; i < ref.size(); ++i) {
      SCOPED_TRACE("gradient " + std::to_string(i));
      double rtol = dtype == TESSEL_F32 ? noise : eps(dtype);
      expectClose(got[i], ref[i], rtol,
                  noise * std::max(1.0, maxAbs(ref[i])) +
                      (dtype == TESSEL_F16 ? 0x1p-24 : 0));
    }
  }
}

inline Bytes enc(int32_t dtype, const Vec &v) { return encode(dtype, v); }
inline Bytes zeros(int32_t dtype, size_t n) {
  return Bytes(n * size_t(tessel_dtype_size(dtype)));
}
inline const void *ptr(const Bytes &b) {
  return b.empty() ? nullptr : b.data();
}
inline void *ptr(Bytes &b) { return b.empty() ? nullptr : b.data(); }

inline std::string shapeName(std::initializer_list<int64_t> dims) {
  std::string s;
  for (int64_t d : dims)
    s += (s.empty() ? "" : "x") + std::to_string(d);
  return s;
}

/// A layer norm's (or, with `rms`, an RMS norm's: no mean) statistics of
/// one row of `cols` doubles: the mean and 1 / sqrt(variance + eps).
struct RowStats {
  double mean = 0, rstd = 0;
};
inline RowStats normRowStats(const double *xs, int64_t cols, bool rms,
                             double eps) {
  RowStats s;
  if (!rms) {
    for (int64_t j = 0; j < cols; ++j)
      s.mean += xs[j];
    s.mean /= double(cols);
  }
  double var = 0;
  for (int64_t j = 0; j < cols; ++j)
    var += (xs[j] - s.mean) * (xs[j] - s.mean);
  s.rstd = 1 / std::sqrt(var / double(cols) + eps);
  return s;
}

} // namespace tt::backward

#endif // TESSEL_RUNTIME_TEST_BACKWARDTESTSUPPORT_H
