//===- backward.cpp - Backward kernels of the elementwise and norm ops ----===//
//
// The reverse-mode kernels of tessel_unary, tessel_softmax, the layer/RMS
// and batch norms, tessel_cross_entropy and tessel_embedding, with PyTorch
// autograd's semantics. Element math runs in the compute type (f32, or f64
// for f64); sums and statistics accumulate in f64 like the forward kernels.
// Every gradient output is overwritten.
//
//===----------------------------------------------------------------------===//

#include "internal.h"

#include <algorithm>
#include <utility>
#include <vector>

using namespace tessel::cpu;

namespace {

template <class T> const T *in(const void *p) { return static_cast<const T *>(p); }
template <class T> T *out(void *p) { return static_cast<T *>(p); }

template <class T> typename Elem<T>::Compute ld(const T *p, int64_t i) {
  return Elem<T>::load(p[i]);
}

/// 1 / (1 + e^-x) without overflow (e^-|x| never exceeds 1).
template <class C> C sigmoidOf(C x) {
  if (x >= C(0))
    return C(1) / (C(1) + std::exp(-x));
  C e = std::exp(x);
  return e / (C(1) + e);
}

/// op'(x) · dy for one element.
template <class C> struct UnaryGrad {
  int32_t op;
  C operator()(C x, C dy) const {
    switch (op) {
    case TESSEL_NEG:
      return -dy;
    case TESSEL_EXP:
      return dy * std::exp(x);
    case TESSEL_LOG:
      return dy / x;
    case TESSEL_SQRT:
      return dy * C(0.5) / std::sqrt(x);
    case TESSEL_RSQRT: {
      C r = C(1) / std::sqrt(x);
      return dy * C(-0.5) * r * r * r;
    }
    case TESSEL_TANH: {
      C t = std::tanh(x);
      return dy * (C(1) - t * t);
    }
    case TESSEL_SIGMOID: {
      C s = sigmoidOf(x);
      return dy * s * (C(1) - s);
    }
    case TESSEL_RELU:
      // PyTorch's threshold_backward: 0 where x <= 0 (x = 0 included); a
      // NaN x passes dy through.
      return x <= C(0) ? C(0) : dy;
    case TESSEL_GELU: {
      // d/dx x·Φ(x) = Φ(x) + x·φ(x).
      C cdf = C(0.5) * (C(1) + std::erf(x * C(M_SQRT1_2)));
      C pdf = C(0.39894228040143267794) * std::exp(C(-0.5) * x * x);
      return dy * (cdf + x * pdf);
    }
    case TESSEL_GELU_TANH: {
      // d/dx 0.5·x·(1 + tanh(u)), u = k·(x + 0.044715·x³).
      const C k = C(0.79788456080286535588); // sqrt(2 / pi)
      const C c = C(0.044715);
      C x2 = x * x;
      C t = std::tanh(k * (x + c * x2 * x));
      C du = k * (C(1) + C(3) * c * x2);
      return dy * (C(0.5) * (C(1) + t) + C(0.5) * x * (C(1) - t * t) * du);
    }
    case TESSEL_SILU: {
      C s = sigmoidOf(x);
      return dy * s * (C(1) + x * (C(1) - s));
    }
    default:
      return C(0);
    }
  }
};

template <class T>
void unaryGradImpl(int32_t op, const T *x, const T *dy, T *dx, int64_t n) {
  using C = typename Elem<T>::Compute;
  UnaryGrad<C> g{op};
  for (int64_t i = 0; i < n; ++i)
    dx[i] = Elem<T>::store(g(ld(x, i), ld(dy, i)));
}

template <class T>
void softmaxGradImpl(const T *y, const T *dy, T *dx, int64_t outer,
                     int64_t dim, int64_t inner) {
  using C = typename Elem<T>::Compute;
  // A whole [dim, inner] slab at a time keeps the inner index contiguous.
  std::vector<double> dot(static_cast<size_t>(inner));
  for (int64_t o = 0; o < outer; ++o) {
    const T *ys = y + o * dim * inner, *dys = dy + o * dim * inner;
    T *dxs = dx + o * dim * inner;
    std::fill(dot.begin(), dot.end(), 0.0);
    for (int64_t d = 0; d < dim; ++d)
      for (int64_t j = 0; j < inner; ++j)
        dot[size_t(j)] += double(ld(ys, d * inner + j)) *
                          double(ld(dys, d * inner + j));
    for (int64_t d = 0; d < dim; ++d)
      for (int64_t j = 0; j < inner; ++j) {
        int64_t i = d * inner + j;
        dxs[i] = Elem<T>::store(ld(ys, i) * (ld(dys, i) - C(dot[size_t(j)])));
      }
  }
}

/// Layer norm: x̂ = (x − mean)·rstd, y = x̂·γ + β, so with d = dy·γ
///   dx = rstd · (d − mean(d) − x̂ · mean(d·x̂)).
/// RMS norm (no mean subtracted): dx = rstd · (d − x̂ · mean(d·x̂)).
template <class T>
void layerNormGradImpl(const T *x, const T *gamma, const T *dy, T *dx,
                       T *dgamma, T *dbeta, int64_t rows, int64_t cols,
                       double eps, bool rms) {
  using C = typename Elem<T>::Compute;
  std::vector<double> dg(static_cast<size_t>(cols), 0.0),
      db(static_cast<size_t>(cols), 0.0);
  std::vector<C> g(static_cast<size_t>(cols), C(1)),
      xhat(static_cast<size_t>(cols)), d(static_cast<size_t>(cols));
  if (gamma)
    for (int64_t j = 0; j < cols; ++j)
      g[size_t(j)] = ld(gamma, j);
  for (int64_t r = 0; r < rows; ++r) {
    const T *xs = x + r * cols, *dys = dy + r * cols;
    // Statistics as the forward kernel computes them (two passes, f64).
    double mean = 0.0;
    if (!rms) {
      for (int64_t j = 0; j < cols; ++j)
        mean += double(ld(xs, j));
      mean /= double(cols);
    }
    double var = 0.0;
    for (int64_t j = 0; j < cols; ++j) {
      double dv = double(ld(xs, j)) - mean;
      var += dv * dv;
    }
    var /= double(cols);
    C m = C(mean), rstd = C(1.0 / std::sqrt(var + eps));
    double sumD = 0.0, sumDX = 0.0;
    for (int64_t j = 0; j < cols; ++j) {
      C xh = (ld(xs, j) - m) * rstd;
      C dyj = ld(dys, j);
      C dj = dyj * g[size_t(j)];
      xhat[size_t(j)] = xh;
      d[size_t(j)] = dj;
      sumD += double(dj);
      sumDX += double(dj) * double(xh);
      dg[size_t(j)] += double(dyj) * double(xh);
      db[size_t(j)] += double(dyj);
    }
    C meanD = rms ? C(0) : C(sumD / double(cols));
    C meanDX = C(sumDX / double(cols));
    T *dxs = dx + r * cols;
    for (int64_t j = 0; j < cols; ++j)
      dxs[j] = Elem<T>::store(
          rstd * (d[size_t(j)] - meanD - xhat[size_t(j)] * meanDX));
  }
  if (dgamma)
    for (int64_t j = 0; j < cols; ++j)
      dgamma[j] = fromDouble<T>(dg[size_t(j)]);
  if (dbeta)
    for (int64_t j = 0; j < cols; ++j)
      dbeta[j] = fromDouble<T>(db[size_t(j)]);
}

/// Batch norm over N = outer·inner values per channel, with the batch mean
/// and biased variance: dx = γ·rstd · (dy − Σdy/N − x̂ · Σ(dy·x̂)/N),
/// dγ = Σ dy·x̂, dβ = Σ dy.
template <class T>
void batchNormGradImpl(const T *x, const T *gamma, const T *dy, T *dx,
                       T *dgamma, T *dbeta, int64_t outer, int64_t channels,
                       int64_t inner, double eps) {
  using C = typename Elem<T>::Compute;
  size_t nc = static_cast<size_t>(channels);
  std::vector<double> mean(nc, 0.0), var(nc, 0.0), sdy(nc, 0.0), sdyx(nc, 0.0);
  double count = double(outer * inner);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t c = 0; c < channels; ++c) {
      const T *xs = x + (o * channels + c) * inner;
      for (int64_t i = 0; i < inner; ++i)
        mean[size_t(c)] += double(ld(xs, i));
    }
  for (double &m : mean)
    m /= count;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t c = 0; c < channels; ++c) {
      const T *xs = x + (o * channels + c) * inner;
      for (int64_t i = 0; i < inner; ++i) {
        double dv = double(ld(xs, i)) - mean[size_t(c)];
        var[size_t(c)] += dv * dv;
      }
    }
  std::vector<C> m(nc), rstd(nc);
  for (size_t c = 0; c < nc; ++c) {
    m[c] = C(mean[c]);
    rstd[c] = C(1.0 / std::sqrt(var[c] / count + eps));
  }
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t c = 0; c < channels; ++c) {
      const T *xs = x + (o * channels + c) * inner;
      const T *dys = dy + (o * channels + c) * inner;
      for (int64_t i = 0; i < inner; ++i) {
        C xh = (ld(xs, i) - m[size_t(c)]) * rstd[size_t(c)];
        double d = double(ld(dys, i));
        sdy[size_t(c)] += d;
        sdyx[size_t(c)] += d * double(xh);
      }
    }
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t c = 0; c < channels; ++c) {
      C g = gamma ? ld(gamma, c) : C(1);
      C k = g * rstd[size_t(c)];
      C a = C(sdy[size_t(c)] / count), b = C(sdyx[size_t(c)] / count);
      const T *xs = x + (o * channels + c) * inner;
      const T *dys = dy + (o * channels + c) * inner;
      T *dxs = dx + (o * channels + c) * inner;
      for (int64_t i = 0; i < inner; ++i) {
        C xh = (ld(xs, i) - m[size_t(c)]) * rstd[size_t(c)];
        dxs[i] = Elem<T>::store(k * (ld(dys, i) - a - xh * b));
      }
    }
  if (dgamma)
    for (int64_t c = 0; c < channels; ++c)
      dgamma[c] = fromDouble<T>(sdyx[size_t(c)]);
  if (dbeta)
    for (int64_t c = 0; c < channels; ++c)
      dbeta[c] = fromDouble<T>(sdy[size_t(c)]);
}

int64_t loadIndex(int32_t dtype, const void *p, int64_t i) {
  return dtype == TESSEL_I32 ? in<int32_t>(p)[i] : in<int64_t>(p)[i];
}

} // namespace

extern "C" {

void tessel_unary_grad(tessel_ctx *ctx, int32_t op, int32_t dtype,
                       const void *x, const void *dy, void *dx, int64_t n) {
  KernelScope scope(ctx);
  if (op < TESSEL_NEG || op > TESSEL_SILU) {
    setError(ctx, "tessel_unary_grad: unknown op %d", op);
    return;
  }
  bool ok = visitFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    unaryGradImpl(op, in<T>(x), in<T>(dy), out<T>(dx), n);
  });
  if (!ok)
    setError(ctx, "tessel_unary_grad: unsupported dtype %d", dtype);
}

void tessel_softmax_grad(tessel_ctx *ctx, int32_t dtype, const void *y,
                         const void *dy, void *dx, int64_t outer, int64_t dim,
                         int64_t inner) {
  KernelScope scope(ctx);
  bool ok = visitFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    softmaxGradImpl(in<T>(y), in<T>(dy), out<T>(dx), outer, dim, inner);
  });
  if (!ok)
    setError(ctx, "tessel_softmax_grad: unsupported dtype %d", dtype);
}

void tessel_layer_norm_grad(tessel_ctx *ctx, int32_t dtype, const void *x,
                            const void *gamma, const void *dy, void *dx,
                            void *dgamma, void *dbeta, int64_t rows,
                            int64_t cols, double eps, int32_t rms) {
  KernelScope scope(ctx);
  if (rows < 0 || cols < 0) {
    setError(ctx, "tessel_layer_norm_grad: negative shape");
    return;
  }
  bool ok = visitFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    layerNormGradImpl(in<T>(x), in<T>(gamma), in<T>(dy), out<T>(dx),
                      out<T>(dgamma), out<T>(dbeta), rows, cols, eps,
                      rms != 0);
  });
  if (!ok)
    setError(ctx, "tessel_layer_norm_grad: unsupported dtype %d", dtype);
}

void tessel_batch_norm_grad(tessel_ctx *ctx, int32_t dtype, const void *x,
                            const void *gamma, const void *dy, void *dx,
                            void *dgamma, void *dbeta, int64_t outer,
                            int64_t channels, int64_t inner, double eps) {
  KernelScope scope(ctx);
  if (outer < 0 || channels < 0 || inner < 0) {
    setError(ctx, "tessel_batch_norm_grad: negative shape");
    return;
  }
  bool ok = visitFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    if (outer * inner == 0) {
      // No values: the sums are empty.
      for (int64_t c = 0; c < channels; ++c) {
        if (dgamma)
          out<T>(dgamma)[c] = fromDouble<T>(0.0);
        if (dbeta)
          out<T>(dbeta)[c] = fromDouble<T>(0.0);
      }
      return;
    }
    batchNormGradImpl(in<T>(x), in<T>(gamma), in<T>(dy), out<T>(dx),
                      out<T>(dgamma), out<T>(dbeta), outer, channels, inner,
                      eps);
  });
  if (!ok)
    setError(ctx, "tessel_batch_norm_grad: unsupported dtype %d", dtype);
}

void tessel_cross_entropy_grad(tessel_ctx *ctx, int32_t dtype,
                               int32_t label_dtype, const void *logits,
                               const void *labels, const void *dloss,
                               void *dlogits, int64_t rows, int64_t classes,
                               int32_t reduction) {
  KernelScope scope(ctx);
  if (!checkIndexDtype(ctx, "tessel_cross_entropy_grad", "labels",
                       label_dtype))
    return;
  if (reduction < TESSEL_LOSS_MEAN || reduction > TESSEL_LOSS_NONE) {
    setError(ctx, "tessel_cross_entropy_grad: unknown reduction %d",
             reduction);
    return;
  }
  bool ok = visitFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    using C = typename Elem<T>::Compute;
    const T *x = in<T>(logits);
    const T *dl = in<T>(dloss);
    T *dxs = out<T>(dlogits);
    std::vector<C> e(static_cast<size_t>(classes));
    for (int64_t r = 0; r < rows; ++r) {
      const T *xs = x + r * classes;
      T *dr = dxs + r * classes;
      int64_t label = loadIndex(label_dtype, labels, r);
      if (label < 0 || label >= classes) {
        setError(ctx, "tessel_cross_entropy_grad: label %lld of row %lld "
                      "outside [0, %lld)",
                 (long long)label, (long long)r, (long long)classes);
        for (int64_t c = 0; c < classes; ++c)
          dr[c] = Elem<T>::store(C(0));
        continue;
      }
      double g = reduction == TESSEL_LOSS_NONE ? double(ld(dl, r))
                 : reduction == TESSEL_LOSS_SUM
                     ? double(ld(dl, 0))
                     : double(ld(dl, 0)) / double(rows);
      C mx = -std::numeric_limits<C>::infinity();
      for (int64_t c = 0; c < classes; ++c)
        mx = std::max(mx, ld(xs, c));
      double sum = 0.0;
      for (int64_t c = 0; c < classes; ++c) {
        C v = std::exp(ld(xs, c) - mx);
        e[size_t(c)] = v;
        sum += double(v);
      }
      C k = C(g / sum), gc = C(g);
      for (int64_t c = 0; c < classes; ++c)
        dr[c] = Elem<T>::store(e[size_t(c)] * k - (c == label ? gc : C(0)));
    }
  });
  if (!ok)
    setError(ctx, "tessel_cross_entropy_grad: unsupported dtype %d", dtype);
}

void tessel_embedding_grad(tessel_ctx *ctx, int32_t dtype, int32_t ids_dtype,
                           const void *ids, const void *dout, void *dtable,
                           int64_t num_ids, int64_t vocab, int64_t hidden) {
  KernelScope scope(ctx);
  if (!checkIndexDtype(ctx, "tessel_embedding_grad", "ids", ids_dtype))
    return;
  if (num_ids < 0 || vocab < 0 || hidden < 0) {
    setError(ctx, "tessel_embedding_grad: negative shape");
    return;
  }
  bool ok = visitFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *src = in<T>(dout);
    T *dst = out<T>(dtable);
    // Every float format stores +0 as all-zero bits.
    std::memset(dst, 0, size_t(vocab * hidden) * sizeof(T));
    // (id, position) pairs sorted by id, positions ascending within an id:
    // each row sums its contributions in position order, in f64, and is
    // rounded once — the same bits for any thread count or backend order.
    std::vector<std::pair<int64_t, int64_t>> order;
    order.reserve(size_t(num_ids));
    for (int64_t i = 0; i < num_ids; ++i) {
      int64_t id = loadIndex(ids_dtype, ids, i);
      if (id < 0 || id >= vocab) {
        setError(ctx, "tessel_embedding_grad: id %lld at position %lld "
                      "outside [0, %lld)",
                 (long long)id, (long long)i, (long long)vocab);
        continue;
      }
      order.emplace_back(id, i);
    }
    std::sort(order.begin(), order.end());
    std::vector<double> acc(static_cast<size_t>(hidden));
    for (size_t a = 0; a < order.size();) {
      int64_t id = order[a].first;
      std::fill(acc.begin(), acc.end(), 0.0);
      for (; a < order.size() && order[a].first == id; ++a) {
        const T *row = src + order[a].second * hidden;
        for (int64_t j = 0; j < hidden; ++j)
          acc[size_t(j)] += double(ld(row, j));
      }
      T *drow = dst + id * hidden;
      for (int64_t j = 0; j < hidden; ++j)
        drow[j] = fromDouble<T>(acc[size_t(j)]);
    }
  });
  if (!ok)
    setError(ctx, "tessel_embedding_grad: unsupported dtype %d", dtype);
}

} // extern "C"
