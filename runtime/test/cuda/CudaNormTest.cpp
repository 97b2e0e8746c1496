//===- CudaNormTest.cpp - The CUDA norm kernels' arithmetic vs the CPU ----===//
//
// Host tests (no GPU): norm_math.h's arithmetic run in plain loops the way
// the kernels of cuda/norm.cu split it (threads and slots of RowConfig, the
// shuffle trees, the chunked column sums) and compared with the CPU backend
// through the C ABI: softmax and its gradient (contiguous and strided),
// layer and RMS norm and their gradients, batch norm and its gradient, in
// f32 and f64 (bf16 for the forward kernels), and the 16-bit conversions
// against cpu/internal.h bit for bit. The residual adds fused into layer
// norm and its gradient are checked bit for bit against tessel_binary beside
// the unfused kernels. The same kernels on a GPU:
// CudaNormGpuTest.cpp.
//
//===----------------------------------------------------------------------===//

#include "cuda/CudaNormTestUtil.h"

#include "cpu/internal.h"

using namespace tessel::cudatest;
using namespace tessel::cudatest::norm;

namespace {

//===--- The kernels' work split, emulated on the host --------------------===//

/// What each of the `threads` threads of a row holds, in the kernels'
/// order: the first column of each of its slots of `vec` columns.
std::vector<std::vector<int64_t>> slotsOf(int64_t cols, RowConfig config,
                                          int vec) {
  std::vector<std::vector<int64_t>> slots(size_t(config.threads));
  for (int t = 0; t < config.threads; ++t) {
    int64_t k = 0;
    for (int64_t j0 = slotStart(t, 0, config.threads, vec);
         j0 < cols && (config.elems == 0 || k < config.elems / vec);
         j0 = slotStart(t, ++k, config.threads, vec))
      slots[size_t(t)].push_back(j0);
  }
  return slots;
}

/// groupReduce: a butterfly in each warp, then over the warps' results.
template <class C, class Op>
C reduceLikeDevice(std::vector<C> v, Op op, C identity) {
  auto butterfly = [&](std::vector<C> &w) {
    for (int o = 16; o > 0; o >>= 1) {
      std::vector<C> next(32);
      for (int l = 0; l < 32; ++l)
        next[size_t(l)] = op(w[size_t(l)], w[size_t(l ^ o)]);
      w = next;
    }
  };
  std::vector<C> parts(32, identity);
  for (size_t w = 0; w < v.size() / 32; ++w) {
    std::vector<C> lane(v.begin() + long(w * 32), v.begin() + long(w * 32 + 32));
    butterfly(lane);
    parts[w] = lane[0];
  }
  if (v.size() == 32)
    return parts[0];
  butterfly(parts);
  return parts[0];
}

template <class C> C sumLikeDevice(const std::vector<C> &v) {
  return reduceLikeDevice(v, [](C a, C b) { return a + b; }, C(0));
}

/// Row-kernel emulation: the row's values in compute type, the slots of
/// each thread, and each element visited as the kernel visits it.
template <class T> struct RowEmu {
  using C = typename Elem<T>::Compute;
  int64_t cols;
  int vec;
  std::vector<std::vector<int64_t>> slots;

  RowEmu(int64_t cols, bool aligned) : cols(cols) {
    vec = aligned && (cols * int64_t(sizeof(T))) % 16 == 0 ? int(16 / sizeof(T))
                                                          : 1;
    slots = slotsOf(cols, chooseRowConfig(cols, int(sizeof(C))), vec);
  }
  /// Σ over threads (device tree) of Σ f(j) over the thread's elements.
  template <class F> C sum(F f) const {
    std::vector<C> part(slots.size(), C(0));
    for (size_t t = 0; t < slots.size(); ++t)
      for (int64_t j0 : slots[t])
        for (int v = 0; v < vec; ++v)
          if (j0 + v < cols)
            part[t] += f(j0 + v);
    return sumLikeDevice(part);
  }
};

template <class T>
std::vector<T> emulateSoftmaxRows(const std::vector<T> &x, int64_t rows,
                                  int64_t dim) {
  using C = typename Elem<T>::Compute;
  RowEmu<T> emu(dim, true);
  std::vector<T> y(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    auto at = [&](int64_t j) { return C(Elem<T>::load(x[size_t(r * dim + j)])); };
    std::vector<C> mx(emu.slots.size()), sum(emu.slots.size());
    for (size_t t = 0; t < emu.slots.size(); ++t) {
      mx[t] = -std::numeric_limits<C>::infinity();
      sum[t] = C(0);
      for (int64_t j0 : emu.slots[t])
        for (int v = 0; v < emu.vec; ++v)
          if (j0 + v < dim)
            onlineAdd(mx[t], sum[t], at(j0 + v));
    }
    C rowMax = reduceLikeDevice(mx, [](C a, C b) { return a < b ? b : a; },
                                -std::numeric_limits<C>::infinity());
    for (size_t t = 0; t < sum.size(); ++t)
      sum[t] = onlineRescale(mx[t], sum[t], rowMax);
    C inv = C(1) / sumLikeDevice(sum);
    for (int64_t j = 0; j < dim; ++j)
      y[size_t(r * dim + j)] = Elem<T>::store(expOf(at(j) - rowMax) * inv);
  }
  return y;
}

template <class T>
std::vector<T> emulateSoftmaxColumns(const std::vector<T> &x, int64_t outer,
                                     int64_t dim, int64_t inner) {
  using C = typename Elem<T>::Compute;
  std::vector<T> y(x.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < inner; ++j) {
      auto at = [&](int64_t d) { return size_t((o * dim + d) * inner + j); };
      C mx = -std::numeric_limits<C>::infinity(), sum = C(0);
      for (int64_t d = 0; d < dim; ++d)
        onlineAdd(mx, sum, C(Elem<T>::load(x[at(d)])));
      for (int64_t d = 0; d < dim; ++d)
        y[at(d)] = Elem<T>::store(expOf(C(Elem<T>::load(x[at(d)])) - mx) *
                                  (C(1) / sum));
    }
  return y;
}

template <class T>
std::vector<T> emulateSoftmaxGrad(const std::vector<T> &y,
                                  const std::vector<T> &dy, int64_t outer,
                                  int64_t dim, int64_t inner) {
  using C = typename Elem<T>::Compute;
  std::vector<T> dx(y.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < inner; ++j) {
      auto at = [&](int64_t d) { return size_t((o * dim + d) * inner + j); };
      auto prod = [&](int64_t d) {
        return C(Elem<T>::load(y[at(d)])) * C(Elem<T>::load(dy[at(d)]));
      };
      C dot = C(0);
      if (inner == 1)
        dot = RowEmu<T>(dim, true).sum(prod);
      else
        for (int64_t d = 0; d < dim; ++d)
          dot += prod(d);
      for (int64_t d = 0; d < dim; ++d)
        dx[at(d)] = Elem<T>::store(softmaxDx(C(Elem<T>::load(y[at(d)])),
                                             C(Elem<T>::load(dy[at(d)])), dot));
    }
  return dx;
}

/// A row's mean and rstd as rowStats computes them; at(j) is the row's
/// element j in compute type.
template <class T, class At>
void emulateRowStats(const RowEmu<T> &emu, At at, double eps, bool rms,
                     typename Elem<T>::Compute &mean,
                     typename Elem<T>::Compute &rstd) {
  using C = typename Elem<T>::Compute;
  const double invCols = 1.0 / double(emu.cols);
  C m = rms ? C(0) : meanOf(emu.sum(at), invCols);
  C q = emu.sum([&](int64_t j) {
    C d = at(j) - m;
    return d * d;
  });
  mean = m;
  rstd = rstdOf<C>(double(q), invCols, eps);
}

/// layerNormRowsKernel over the values x(i) (compute type) of a
/// [rows, cols] tensor.
template <class T, class X>
std::vector<T> emulateLayerNormOf(X x, const std::vector<T> *gamma,
                                  const std::vector<T> *beta, int64_t rows,
                                  int64_t cols, double eps, bool rms) {
  using C = typename Elem<T>::Compute;
  RowEmu<T> emu(cols, true);
  std::vector<T> y(size_t(rows * cols));
  for (int64_t r = 0; r < rows; ++r) {
    auto at = [&](int64_t j) { return C(x(r * cols + j)); };
    C mean, rstd;
    emulateRowStats(emu, at, eps, rms, mean, rstd);
    for (int64_t j = 0; j < cols; ++j) {
      C g = gamma ? C(Elem<T>::load((*gamma)[size_t(j)])) : C(0);
      C b = beta ? C(Elem<T>::load((*beta)[size_t(j)])) : C(0);
      y[size_t(r * cols + j)] = Elem<T>::store(layerNormValue(
          at(j), mean, rstd, gamma != nullptr, g, beta != nullptr, b));
    }
  }
  return y;
}

template <class T>
std::vector<T> emulateLayerNorm(const std::vector<T> &x,
                                const std::vector<T> *gamma,
                                const std::vector<T> *beta, int64_t rows,
                                int64_t cols, double eps, bool rms) {
  return emulateLayerNormOf(
      [&](int64_t i) { return Elem<T>::load(x[size_t(i)]); }, gamma, beta, rows,
      cols, eps, rms);
}

/// The fused add and layer norm (layerNormRowsKernel with kAdd): `sum` gets
/// a + b stored; the norm reads roundedSum from registers where the row is
/// cached, the stored sum where it is streamed.
template <class T>
std::vector<T> emulateAddLayerNorm(const std::vector<T> &a,
                                   const std::vector<T> &b, std::vector<T> &sum,
                                   const std::vector<T> *gamma,
                                   const std::vector<T> *beta, int64_t rows,
                                   int64_t cols, double eps, bool rms) {
  using C = typename Elem<T>::Compute;
  std::vector<C> cached(a.size());
  sum.resize(a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    cached[i] = roundedSum<T>(C(Elem<T>::load(a[i])), C(Elem<T>::load(b[i])));
    sum[i] = Elem<T>::store(cached[i]);
  }
  const bool streamed = chooseRowConfig(cols, int(sizeof(C))).elems == 0;
  return emulateLayerNormOf(
      [&](int64_t i) {
        return streamed ? C(Elem<T>::load(sum[size_t(i)])) : cached[size_t(i)];
      },
      gamma, beta, rows, cols, eps, rms);
}

/// Column sums as channelSums computes them for inner == 1: per chunk of
/// rows, 8 row lanes in order, then the chunks in order; f(r, c, a, b).
template <class F>
void emulateColumnSums(int64_t rows, int64_t cols, F f, std::vector<double> &a,
                       std::vector<double> &b) {
  const int64_t chunks = columnChunks(rows);
  const int64_t per = (rows + chunks - 1) / chunks;
  a.assign(size_t(cols), 0.0);
  b.assign(size_t(cols), 0.0);
  for (int64_t c = 0; c < cols; ++c)
    for (int64_t k = 0; k < chunks; ++k) {
      double ca = 0, cb = 0;
      for (int lane = 0; lane < 8; ++lane) {
        double la = 0, lb = 0;
        for (int64_t r = k * per + lane; r < std::min(rows, (k + 1) * per);
             r += 8)
          f(r, c, la, lb);
        ca += la;
        cb += lb;
      }
      a[size_t(c)] += ca;
      b[size_t(c)] += cb;
    }
}

/// layerNormGradRowsKernel and the dγ/dβ column sums; with `residual`,
/// the fused kernel's dx (residualPlusDx).
template <class T>
Grads<T> emulateLayerNormGrad(const std::vector<T> &x,
                              const std::vector<T> *gamma,
                              const std::vector<T> &dy, int64_t rows,
                              int64_t cols, double eps, bool rms,
                              const std::vector<T> *residual = nullptr) {
  using C = typename Elem<T>::Compute;
  RowEmu<T> emu(cols, true);
  Grads<T> out;
  out.dx.resize(x.size());
  std::vector<C> means(static_cast<size_t>(rows)),
      rstds(static_cast<size_t>(rows));
  auto ld = [](const std::vector<T> &v, int64_t i) {
    return C(Elem<T>::load(v[size_t(i)]));
  };
  for (int64_t r = 0; r < rows; ++r) {
    C mean, rstd;
    emulateRowStats(
        emu, [&](int64_t j) { return ld(x, r * cols + j); }, eps, rms, mean,
        rstd);
    means[size_t(r)] = mean;
    rstds[size_t(r)] = rstd;
    auto xh = [&](int64_t j) { return (ld(x, r * cols + j) - mean) * rstd; };
    auto d = [&](int64_t j) {
      return gamma ? ld(dy, r * cols + j) * ld(*gamma, j) : ld(dy, r * cols + j);
    };
    const double invCols = 1.0 / double(cols);
    C meanD = rms ? C(0) : meanOf(emu.sum(d), invCols);
    C meanDX =
        meanOf(emu.sum([&](int64_t j) { return d(j) * xh(j); }), invCols);
    for (int64_t j = 0; j < cols; ++j) {
      C v = normDx(rstd, d(j), meanD, xh(j), meanDX);
      if (residual)
        v = residualPlusDx<T>(ld(*residual, r * cols + j), v);
      out.dx[size_t(r * cols + j)] = Elem<T>::store(v);
    }
  }
  std::vector<double> a, b;
  emulateColumnSums(rows, cols,
                    [&](int64_t r, int64_t c, double &sa, double &sb) {
                      C dv = ld(dy, r * cols + c);
                      sb += double(dv);
                      sa += double(dv * ((ld(x, r * cols + c) - means[size_t(r)]) *
                                         rstds[size_t(r)]));
                    },
                    a, b);
  for (int64_t c = 0; c < cols; ++c) {
    out.dgamma.push_back(fromDouble<T>(a[size_t(c)]));
    out.dbeta.push_back(fromDouble<T>(b[size_t(c)]));
  }
  return out;
}

/// channelSums over [outer, channels, inner]: the column layout for
/// inner == 1, else chunks of each channel's (o, i) run reduced by 256
/// threads as groupReduce does. f(idx, c, a, b).
template <class F>
void emulateChannelSums(int64_t outer, int64_t channels, int64_t inner, F f,
                        std::vector<double> &a, std::vector<double> &b) {
  if (inner == 1) {
    emulateColumnSums(outer, channels,
                      [&](int64_t o, int64_t c, double &sa, double &sb) {
                        f(o * channels + c, c, sa, sb);
                      },
                      a, b);
    return;
  }
  const int64_t count = outer * inner, chunks = slabChunks(count);
  const int64_t per = (count + chunks - 1) / chunks;
  a.assign(size_t(channels), 0.0);
  b.assign(size_t(channels), 0.0);
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t k = 0; k < chunks; ++k) {
      std::vector<double> ta(256, 0.0), tb(256, 0.0);
      for (int t = 0; t < 256; ++t)
        for (int64_t n = k * per + t; n < std::min(count, (k + 1) * per);
             n += 256) {
          int64_t o = n / inner;
          f((o * channels + c) * inner + (n - o * inner), c, ta[size_t(t)],
            tb[size_t(t)]);
        }
      a[size_t(c)] += sumLikeDevice(ta);
      b[size_t(c)] += sumLikeDevice(tb);
    }
}

template <class T> struct BatchStats {
  std::vector<double> mean, rstd;
};

template <class T>
BatchStats<T> emulateBatchStats(const std::vector<T> &x, int64_t outer,
                                int64_t channels, int64_t inner, double eps) {
  BatchStats<T> s;
  std::vector<double> unused;
  double count = double(outer * inner);
  emulateChannelSums(outer, channels, inner,
                     [&](int64_t i, int64_t, double &a, double &) {
                       a += toDouble(x[size_t(i)]);
                     },
                     s.mean, unused);
  for (double &m : s.mean)
    m /= count;
  emulateChannelSums(outer, channels, inner,
                     [&](int64_t i, int64_t c, double &a, double &) {
                       double d = toDouble(x[size_t(i)]) - s.mean[size_t(c)];
                       a += d * d;
                     },
                     s.rstd, unused);
  for (double &v : s.rstd)
    v = 1.0 / std::sqrt(v / count + eps);
  return s;
}

template <class T>
std::vector<T> emulateBatchNorm(const std::vector<T> &x,
                                const std::vector<T> *gamma,
                                const std::vector<T> *beta, int64_t outer,
                                int64_t channels, int64_t inner, double eps) {
  using C = typename Elem<T>::Compute;
  BatchStats<T> s = emulateBatchStats(x, outer, channels, inner, eps);
  std::vector<T> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    size_t c = size_t(int64_t(i) / inner % channels);
    C g = gamma ? C(Elem<T>::load((*gamma)[c])) : C(1);
    C b = beta ? C(Elem<T>::load((*beta)[c])) : C(0);
    y[i] = Elem<T>::store((C(Elem<T>::load(x[i])) - C(s.mean[c])) *
                              C(s.rstd[c]) * g +
                          b);
  }
  return y;
}

template <class T>
Grads<T> emulateBatchNormGrad(const std::vector<T> &x,
                              const std::vector<T> *gamma,
                              const std::vector<T> &dy, int64_t outer,
                              int64_t channels, int64_t inner, double eps) {
  using C = typename Elem<T>::Compute;
  BatchStats<T> s = emulateBatchStats(x, outer, channels, inner, eps);
  auto xhat = [&](size_t i, size_t c) {
    return (C(Elem<T>::load(x[i])) - C(s.mean[c])) * C(s.rstd[c]);
  };
  std::vector<double> sdy, sdyx;
  emulateChannelSums(outer, channels, inner,
                     [&](int64_t i, int64_t c, double &a, double &b) {
                       double d = toDouble(dy[size_t(i)]);
                       a += d;
                       b += d * double(xhat(size_t(i), size_t(c)));
                     },
                     sdy, sdyx);
  Grads<T> out;
  out.dx.resize(x.size());
  double count = double(outer * inner);
  for (size_t i = 0; i < x.size(); ++i) {
    size_t c = size_t(int64_t(i) / inner % channels);
    C g = gamma ? C(Elem<T>::load((*gamma)[c])) : C(1);
    out.dx[i] = Elem<T>::store(normDx(g * C(s.rstd[c]),
                                      C(Elem<T>::load(dy[i])),
                                      C(sdy[c] / count), xhat(i, c),
                                      C(sdyx[c] / count)));
  }
  for (int64_t c = 0; c < channels; ++c) {
    out.dgamma.push_back(fromDouble<T>(sdyx[size_t(c)]));
    out.dbeta.push_back(fromDouble<T>(sdy[size_t(c)]));
  }
  return out;
}

//===--- The cases --------------------------------------------------------===//

class CpuOnly : public ::testing::Test {
protected:
  void SetUp() override {
    cpu = createContext("cpu");
    ASSERT_NE(cpu, nullptr) << tessel_error(nullptr);
  }
  void TearDown() override {
    EXPECT_EQ(tessel_error(cpu), nullptr) << tessel_error(cpu);
    tessel_ctx_destroy(cpu);
  }
  tessel_ctx *cpu = nullptr;
};

using CudaNormHost = CpuOnly;

template <class T> void softmaxCases(tessel_ctx *cpu) {
  for (int64_t rows : kRows)
    for (int64_t cols : kCols) {
      std::string name = shapeName(rows, cols);
      auto x = randomRow<T>(size_t(rows * cols), uint64_t(rows * 7 + cols), -8, 8);
      auto y = runSoftmax(cpu, x, rows, cols, 1);
      expectNear(emulateSoftmaxRows(x, rows, cols), y, tolerance<T>(),
                 "softmax " + name);
      auto dy = randomRow<T>(x.size(), uint64_t(cols), -1, 1);
      expectNear(emulateSoftmaxGrad(y, dy, rows, cols, 1),
                 runSoftmaxGrad(cpu, y, dy, rows, cols, 1), tolerance<T>(),
                 "softmax grad " + name);
    }
}

TEST_F(CudaNormHost, SoftmaxRowsMatchCpu) {
  softmaxCases<float>(cpu);
  softmaxCases<double>(cpu);
}

TEST_F(CudaNormHost, SoftmaxRowsKeepMaskedAndStreamedRows) {
  // A long f32 row (streamed from memory), rows with -inf entries, large
  // logits; in bf16 storage too.
  const int64_t cols = 9000;
  auto x = randomRow<float>(size_t(3 * cols), 5, -30, 30);
  for (int64_t j = 0; j < cols; j += 3)
    x[size_t(j)] = -INFINITY;
  x[size_t(cols + 17)] = 1e4f;
  expectNear(emulateSoftmaxRows(x, 3, cols), runSoftmax(cpu, x, 3, cols, 1),
             tolerance<float>(), "masked softmax");
  auto xb = randomRow<BFloat>(size_t(5 * 768), 9, -8, 8);
  expectNear(emulateSoftmaxRows(xb, 5, 768), runSoftmax(cpu, xb, 5, 768, 1),
             tolerance<BFloat>(), "bf16 softmax");
}

template <class T> void stridedSoftmaxCases(tessel_ctx *cpu) {
  const int64_t shapes[][3] = {{1, 5, 2}, {3, 7, 5}, {2, 768, 3}, {4, 1, 9},
                               {2, 65, 33}};
  for (const auto &s : shapes) {
    std::string name = shapeName(s[0], s[1], s[2]);
    auto x = randomRow<T>(size_t(s[0] * s[1] * s[2]), uint64_t(s[1]), -8, 8);
    auto y = runSoftmax(cpu, x, s[0], s[1], s[2]);
    expectNear(emulateSoftmaxColumns(x, s[0], s[1], s[2]), y, tolerance<T>(),
               "strided softmax " + name);
    auto dy = randomRow<T>(x.size(), uint64_t(s[2]), -1, 1);
    expectNear(emulateSoftmaxGrad(y, dy, s[0], s[1], s[2]),
               runSoftmaxGrad(cpu, y, dy, s[0], s[1], s[2]), tolerance<T>(),
               "strided softmax grad " + name);
  }
}

TEST_F(CudaNormHost, StridedSoftmaxMatchesCpu) {
  stridedSoftmaxCases<float>(cpu);
  stridedSoftmaxCases<double>(cpu);
}

template <class T> void layerNormCases(tessel_ctx *cpu, const int64_t *rowsList,
                                       size_t nRows, const int64_t *colsList,
                                       size_t nCols) {
  const double eps = 1e-5;
  for (size_t ri = 0; ri < nRows; ++ri)
    for (size_t ci = 0; ci < nCols; ++ci)
      for (int affine = 0; affine < 3; ++affine) // γ and β, γ only, neither
        for (bool rms : {false, true}) {
          int64_t rows = rowsList[ri], cols = colsList[ci];
          std::string name = shapeName(rows, cols) + (rms ? " rms" : "") +
                             " affine " + std::to_string(affine);
          auto x = randomRow<T>(size_t(rows * cols), uint64_t(rows + cols), -3, 5);
          auto gv = randomRow<T>(size_t(cols), 3, 0.5, 1.5);
          auto bv = randomRow<T>(size_t(cols), 4, -1, 1);
          const std::vector<T> *g = affine < 2 ? &gv : nullptr;
          const std::vector<T> *b = affine < 1 ? &bv : nullptr;
          expectNear(emulateLayerNorm(x, g, b, rows, cols, eps, rms),
                     runLayerNorm(cpu, x, g, b, rows, cols, eps, rms),
                     tolerance<T>(), "layer norm " + name);
          if constexpr (std::is_same<T, float>::value ||
                        std::is_same<T, double>::value) {
            auto dy = randomRow<T>(x.size(), uint64_t(cols) + 1000, -1, 1);
            Grads<T> want = runLayerNormGrad(cpu, x, g, dy, true, true, rows,
                                             cols, eps, rms);
            Grads<T> got = emulateLayerNormGrad(x, g, dy, rows, cols, eps, rms);
            expectNear(got.dx, want.dx, tolerance<T>(), "dx " + name,
                       layerNormGradScale(x, g, dy, rows, cols, eps, rms));
            expectNear(got.dgamma, want.dgamma, tolerance<T>(), "dgamma " + name);
            expectNear(got.dbeta, want.dbeta, tolerance<T>(), "dbeta " + name);
          }
        }
}

TEST_F(CudaNormHost, LayerNormMatchesCpu) {
  layerNormCases<float>(cpu, kRows, 4, kCols, 4);
  layerNormCases<double>(cpu, kRows, 4, kCols, 4);
}

TEST_F(CudaNormHost, LayerNormLongRowsAndBf16) {
  const int64_t rows[] = {2}, longCols[] = {9000}, cols[] = {7, 768};
  layerNormCases<float>(cpu, rows, 1, longCols, 1);
  const int64_t bfRows[] = {5};
  layerNormCases<BFloat>(cpu, bfRows, 1, cols, 2);
}

/// Special values for the residual adds: zeros of both signs, infinities,
/// a NaN, sums that overflow T and that round to even, subnormals.
template <class T> std::vector<T> specialValues() {
  const double inf = std::numeric_limits<double>::infinity();
  const double big = std::is_same<T, Half>::value     ? 60000.0
                     : std::is_same<T, double>::value ? 1e308
                                                      : 3e38;
  std::vector<double> v = {0.0,  -0.0, inf,     -inf,  std::nan(""), big,
                           -big, 1.0,  1.0 / 3, 1e-40, -1e-42,       257.0};
  std::vector<T> out;
  for (double d : v)
    out.push_back(fromDouble<T>(d));
  return out;
}

template <class T> void roundedSumCases(tessel_ctx *cpu) {
  using C = typename Elem<T>::Compute;
  auto sp = specialValues<T>();
  std::vector<T> a = randomRow<T>(4096, 11, -300, 300);
  std::vector<T> b = randomRow<T>(4096, 12, -1, 1);
  for (T x : sp)
    for (T y : sp) {
      a.push_back(x);
      b.push_back(y);
    }
  // dx: b's value nudged off T's grid, unrounded (in f32 and f64 a no-op).
  std::vector<T> sums, dx, plusDx;
  for (size_t i = 0; i < a.size(); ++i) {
    C ca = C(Elem<T>::load(a[i])), cb = C(Elem<T>::load(b[i]));
    C unrounded = cb + cb * C(1.0 / 4096);
    sums.push_back(Elem<T>::store(roundedSum<T>(ca, cb)));
    dx.push_back(Elem<T>::store(unrounded));
    plusDx.push_back(Elem<T>::store(residualPlusDx<T>(ca, unrounded)));
  }
  expectSameBits(sums, runAdd(cpu, a, b), "roundedSum");
  expectSameBits(plusDx, runAdd(cpu, a, dx), "residualPlusDx");
}

// Tests that the fused adds' per-element arithmetic is tessel_binary's add
// on the CPU, special values included.
TEST_F(CudaNormHost, FusedAddsAreTheCpuAdd) {
  roundedSumCases<float>(cpu);
  roundedSumCases<double>(cpu);
  roundedSumCases<Half>(cpu);
  roundedSumCases<BFloat>(cpu);
}

/// The fused add and layer norm against tessel_binary then
/// tessel_layer_norm on the CPU: the sum bit for bit, y bit for bit with the
/// unfused kernel's emulation on that sum (the CPU's row sums run in another
/// order) and within rounding of the CPU's.
template <class T>
void addLayerNormCases(tessel_ctx *cpu, std::initializer_list<int64_t> rowsList,
                       std::initializer_list<int64_t> colsList) {
  const double eps = 1e-5;
  for (int64_t rows : rowsList)
    for (int64_t cols : colsList)
      for (int affine = 0; affine < 3; ++affine)
        for (bool rms : {false, true}) {
          std::string name = shapeName(rows, cols) + (rms ? " rms" : "") +
                             " affine " + std::to_string(affine);
          size_t n = size_t(rows * cols);
          auto a = randomRow<T>(n, uint64_t(rows + cols), -3, 5);
          auto b = randomRow<T>(n, uint64_t(cols) + 77, -1, 1);
          auto gv = randomRow<T>(size_t(cols), 3, 0.5, 1.5);
          auto bv = randomRow<T>(size_t(cols), 4, -1, 1);
          const std::vector<T> *g = affine < 2 ? &gv : nullptr;
          const std::vector<T> *beta = affine < 1 ? &bv : nullptr;
          std::vector<T> sum;
          auto y =
              emulateAddLayerNorm(a, b, sum, g, beta, rows, cols, eps, rms);
          auto cpuSum = runAdd(cpu, a, b);
          expectSameBits(sum, cpuSum, "sum " + name);
          expectSameBits(
              y, emulateLayerNorm(cpuSum, g, beta, rows, cols, eps, rms),
              "y vs unfused " + name);
          expectNear(y,
                     runLayerNorm(cpu, cpuSum, g, beta, rows, cols, eps, rms),
                     tolerance<T>(), "y vs cpu " + name);
        }
}

// Tests the fused add and layer norm in the warp, block and streamed
// configurations (9000 columns: streamed for f32 and bf16).
TEST_F(CudaNormHost, AddLayerNormMatchesAddThenLayerNorm) {
  addLayerNormCases<float>(cpu, {1, 3, 17}, {1, 7, 768, 4097, 9000});
  addLayerNormCases<BFloat>(cpu, {1, 5}, {7, 768, 4097, 9000});
}

/// The fused gradient against tessel_layer_norm_grad then tessel_binary
/// (residual + dx) on the CPU: dx bit for bit with the unfused kernel's
/// emulation plus the CPU's add, dγ and dβ bit for bit with the unfused
/// emulation's, and (f32) within rounding of the CPU's.
template <class T>
void layerNormGradAddCases(tessel_ctx *cpu,
                           std::initializer_list<int64_t> rowsList,
                           std::initializer_list<int64_t> colsList) {
  const double eps = 1e-5;
  for (int64_t rows : rowsList)
    for (int64_t cols : colsList)
      for (bool affine : {true, false})
        for (bool rms : {false, true}) {
          std::string name = shapeName(rows, cols) + (rms ? " rms" : "") +
                             (affine ? "" : " plain");
          size_t n = size_t(rows * cols);
          auto x = randomRow<T>(n, uint64_t(rows + cols), -3, 5);
          auto dy = randomRow<T>(n, uint64_t(cols) + 1000, -1, 1);
          auto res = randomRow<T>(n, uint64_t(cols) + 2000, -2, 2);
          auto gv = randomRow<T>(size_t(cols), 3, 0.5, 1.5);
          const std::vector<T> *g = affine ? &gv : nullptr;
          Grads<T> got =
              emulateLayerNormGrad(x, g, dy, rows, cols, eps, rms, &res);
          Grads<T> unfused =
              emulateLayerNormGrad(x, g, dy, rows, cols, eps, rms);
          expectSameBits(got.dx, runAdd(cpu, res, unfused.dx), "dx " + name);
          expectSameBits(got.dgamma, unfused.dgamma, "dgamma " + name);
          expectSameBits(got.dbeta, unfused.dbeta, "dbeta " + name);
          if constexpr (std::is_same<T, float>::value) {
            Grads<T> want = runLayerNormGrad(cpu, x, g, dy, true, true, rows,
                                             cols, eps, rms);
            expectNear(got.dx, runAdd(cpu, res, want.dx), tolerance<T>(),
                       "dx vs cpu " + name,
                       layerNormGradScale(x, g, dy, rows, cols, eps, rms));
          }
        }
}

TEST_F(CudaNormHost, LayerNormGradAddMatchesGradThenAdd) {
  layerNormGradAddCases<float>(cpu, {1, 3, 65}, {1, 7, 768, 4097, 9000});
  layerNormGradAddCases<BFloat>(cpu, {1, 5}, {7, 768, 9000});
}

template <class T> void batchNormCases(tessel_ctx *cpu) {
  const int64_t shapes[][3] = {{1, 1, 1},  {65, 7, 1}, {4, 3, 5},
                               {2, 5, 768}, {3, 2, 4097}, {130, 768, 1}};
  const double eps = 1e-5;
  for (const auto &s : shapes)
    for (bool affine : {true, false}) {
      std::string name = shapeName(s[0], s[1], s[2]) + (affine ? "" : " plain");
      auto x = randomRow<T>(size_t(s[0] * s[1] * s[2]), uint64_t(s[2]), -2, 4);
      auto gv = randomRow<T>(size_t(s[1]), 3, 0.5, 1.5);
      auto bv = randomRow<T>(size_t(s[1]), 4, -1, 1);
      const std::vector<T> *g = affine ? &gv : nullptr;
      const std::vector<T> *b = affine ? &bv : nullptr;
      expectNear(emulateBatchNorm(x, g, b, s[0], s[1], s[2], eps),
                 runBatchNorm(cpu, x, g, b, s[0], s[1], s[2], eps),
                 tolerance<T>(), "batch norm " + name);
      auto dy = randomRow<T>(x.size(), uint64_t(s[0]), -1, 1);
      Grads<T> want = runBatchNormGrad(cpu, x, g, dy, s[0], s[1], s[2], eps);
      Grads<T> got = emulateBatchNormGrad(x, g, dy, s[0], s[1], s[2], eps);
      expectNear(got.dx, want.dx, tolerance<T>(), "dx " + name);
      expectNear(got.dgamma, want.dgamma, tolerance<T>(), "dgamma " + name);
      expectNear(got.dbeta, want.dbeta, tolerance<T>(), "dbeta " + name);
    }
}

TEST_F(CudaNormHost, BatchNormMatchesCpu) {
  batchNormCases<float>(cpu);
  batchNormCases<double>(cpu);
}

} // namespace
