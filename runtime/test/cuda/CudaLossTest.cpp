//===- CudaLossTest.cpp - The CUDA cross-entropy kernels ------------------===//
//
// Host tests: loss_math.h's per-row arithmetic, run as the kernels split a
// row over a warp or a block (each thread's online max and Σ e^(x - max),
// combined at the row's max in f64), against the CPU backend's
// tessel_cross_entropy and tessel_cross_entropy_grad on random logits of
// many shapes (a 50304-class row included), f32 and f64, every reduction;
// the vocab-parallel label kernels' column rule against the CPU's. GPU
// tests (skipped without a device): each kernel on a CUDA and a CPU
// context, compared, ABI 13's fused forms included (the f32 loss of
// 16-bit logits; the loss and its gradient in one pass, in place or not).
//
//===----------------------------------------------------------------------===//

#include "CudaTestUtil.h"

#include "cuda/loss_math.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <type_traits>

using namespace tessel::cudatest;
namespace tc = tessel::cuda;

namespace {

template <class T> constexpr int32_t dtypeOf() {
  if constexpr (std::is_same<T, float>::value)
    return TESSEL_F32;
  else if constexpr (std::is_same<T, tc::Half>::value)
    return TESSEL_F16;
  else if constexpr (std::is_same<T, tc::BFloat>::value)
    return TESSEL_BF16;
  else
    return TESSEL_F64;
}

template <class T> uint64_t bitsOf(T v) {
  uint64_t u = 0;
  std::memcpy(&u, &v, sizeof v);
  return u;
}

/// The threads of a row group, as loss.cu picks them.
int rowThreads(int64_t classes) { return classes <= 1024 ? 32 : 512; }

template <class C> struct HostStats {
  C max;
  double sum;
};

/// A row's statistics computed as the kernel computes them for a 16-byte
/// aligned row: vectors of N elements dealt to the G threads in turn, the
/// tail one element each, then the threads' states combined at the max.
template <class T>
HostStats<typename tc::Elem<T>::Compute> hostRowStats(const T *x,
                                                      int64_t classes) {
  using C = typename tc::Elem<T>::Compute;
  const int G = rowThreads(classes);
  const int64_t N = 16 / sizeof(T), packs = classes / N;
  std::vector<tc::LseState<C>> states(size_t(G), tc::lseEmpty<C>());
  for (int64_t v = 0; v < packs; ++v)
    for (int64_t k = 0; k < N; ++k)
      tc::lseAdd(states[size_t(v % G)], tc::Elem<T>::load(x[v * N + k]));
  for (int64_t c = packs * N; c < classes; ++c)
    tc::lseAdd(states[size_t((c - packs * N) % G)], tc::Elem<T>::load(x[c]));
  C rowMax = states[0].max;
  for (auto &s : states)
    rowMax = s.max > rowMax ? s.max : rowMax;
  double sum = 0.0;
  for (auto &s : states)
    sum += tc::lseTerm(s, rowMax);
  return {rowMax, tc::lseRowSum(rowMax, sum)};
}

struct Shape {
  int64_t rows, classes;
};

/// Logits with a spread per row (offsets up to ±40), a -inf logit in some
/// rows, and labels with two bad ones when `badLabels`.
template <class T>
void makeProblem(const Shape &s, uint64_t seed, bool badLabels,
                 std::vector<T> &logits, std::vector<int64_t> &labels) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 3.0);
  logits.resize(size_t(s.rows * s.classes));
  labels.resize(size_t(s.rows));
  for (int64_t r = 0; r < s.rows; ++r) {
    double offset = double(int64_t(rng() % 81) - 40);
    for (int64_t c = 0; c < s.classes; ++c)
      logits[size_t(r * s.classes + c)] =
          tc::fromDouble<T>(offset + normal(rng));
    labels[size_t(r)] = int64_t(rng() % uint64_t(s.classes));
    if (r % 5 == 3 && s.classes > 2) // a masked class, never the label
      logits[size_t(r * s.classes + (labels[size_t(r)] + 1) % s.classes)] =
          tc::fromDouble<T>(-std::numeric_limits<double>::infinity());
  }
  if (badLabels && s.rows > 2) {
    labels[1] = -1;
    labels[size_t(s.rows - 1)] = s.classes;
  }
}

bool close(double got, double want, double rtol, double atol) {
  if (std::isnan(want))
    return std::isnan(got);
  if (std::isinf(want))
    return got == want;
  return std::fabs(got - want) <= rtol * std::fabs(want) + atol;
}

template <class T> double tolerance() {
  return std::is_same<T, double>::value ? 1e-12 : 1e-6;
}

const Shape kShapes[] = {{1, 1},    {1, 2},    {7, 33},    {67, 1000},
                         {5, 1024}, {3, 1025}, {13, 4097}, {2, 50304}};

class CpuLossReference : public ::testing::Test {
protected:
  void SetUp() override {
    cpu = createContext("cpu");
    ASSERT_NE(cpu, nullptr) << tessel_error(nullptr);
  }
  void TearDown() override {
    EXPECT_EQ(tessel_error(cpu), nullptr) << tessel_error(cpu);
    tessel_ctx_destroy(cpu);
  }
  /// Whether the CPU recorded an error (cleared).
  bool takeError() {
    bool had = tessel_error(cpu) != nullptr;
    tessel_clear_error(cpu);
    return had;
  }
  tessel_ctx *cpu = nullptr;
};

// Tests the per-row losses and their mean and sum against
// tessel_cross_entropy, bad labels included (0 for the row, an error).
TEST_F(CpuLossReference, CrossEntropyMatchesCpu) {
  auto run = [&](auto tag) {
    using T = decltype(tag);
    for (const Shape &s : kShapes) {
      SCOPED_TRACE(std::to_string(s.rows) + "x" + std::to_string(s.classes));
      std::vector<T> x;
      std::vector<int64_t> labels;
      bool bad = s.rows > 2;
      makeProblem(s, uint64_t(s.rows * 131 + s.classes), bad, x, labels);
      std::vector<double> host(size_t(s.rows));
      for (int64_t r = 0; r < s.rows; ++r) {
        int64_t label = labels[size_t(r)];
        if (label < 0 || label >= s.classes)
          continue;
        const T *row = x.data() + r * s.classes;
        auto st = hostRowStats(row, s.classes);
        host[size_t(r)] =
            tc::lseOfRow(st.max, st.sum) - tc::toDouble(row[label]);
      }
      std::vector<T> none(size_t(s.rows)), mean(1), sum(1);
      tessel_cross_entropy(cpu, dtypeOf<T>(), TESSEL_I64, x.data(),
                           labels.data(), none.data(), s.rows, s.classes,
                           TESSEL_LOSS_NONE);
      EXPECT_EQ(takeError(), bad);
      tessel_cross_entropy(cpu, dtypeOf<T>(), TESSEL_I64, x.data(),
                           labels.data(), mean.data(), s.rows, s.classes,
                           TESSEL_LOSS_MEAN);
      tessel_cross_entropy(cpu, dtypeOf<T>(), TESSEL_I64, x.data(),
                           labels.data(), sum.data(), s.rows, s.classes,
                           TESSEL_LOSS_SUM);
      EXPECT_EQ(takeError(), bad);
      double total = 0.0;
      for (int64_t r = 0; r < s.rows; ++r) {
        const T *row = x.data() + r * s.classes;
        int64_t label = labels[size_t(r)];
        double scale = label >= 0 && label < s.classes
                           ? std::fabs(tc::toDouble(row[label])) + 1.0
                           : 1.0;
        EXPECT_TRUE(close(tc::toDouble(tc::fromDouble<T>(host[size_t(r)])),
                          tc::toDouble(none[size_t(r)]), tolerance<T>(),
                          tolerance<T>() * scale))
            << "row " << r << ": " << host[size_t(r)] << " vs "
            << tc::toDouble(none[size_t(r)]);
        total += host[size_t(r)];
      }
      EXPECT_TRUE(close(tc::toDouble(tc::fromDouble<T>(total)),
                        tc::toDouble(sum[0]), tolerance<T>(),
                        tolerance<T>() * s.rows));
      EXPECT_TRUE(close(tc::toDouble(tc::fromDouble<T>(total / double(s.rows))),
                        tc::toDouble(mean[0]), tolerance<T>(), tolerance<T>()));
    }
  };
  run(float());
  run(double());
}

// Tests dlogits element by element against tessel_cross_entropy_grad for
// every reduction, bad labels' rows zero.
TEST_F(CpuLossReference, CrossEntropyGradMatchesCpu) {
  auto run = [&](auto tag) {
    using T = decltype(tag);
    using C = typename tc::Elem<T>::Compute;
    for (const Shape &s : kShapes)
      for (int32_t reduction :
           {TESSEL_LOSS_MEAN, TESSEL_LOSS_SUM, TESSEL_LOSS_NONE}) {
        SCOPED_TRACE(std::to_string(s.rows) + "x" + std::to_string(s.classes) +
                     " reduction " + std::to_string(reduction));
        std::vector<T> x;
        std::vector<int64_t> labels64;
        bool bad = s.rows > 2;
        makeProblem(s, uint64_t(s.rows * 7 + s.classes), bad, x, labels64);
        std::vector<int32_t> labels(labels64.begin(), labels64.end());
        std::vector<T> dloss;
        for (int64_t r = 0; r < s.rows; ++r)
          dloss.push_back(tc::fromDouble<T>(0.5 + 0.25 * double(r % 4)));
        std::vector<T> want(x.size());
        tessel_cross_entropy_grad(cpu, dtypeOf<T>(), TESSEL_I32, x.data(),
                                  labels.data(), dloss.data(), want.data(),
                                  s.rows, s.classes, reduction);
        EXPECT_EQ(takeError(), bad);
        int wrong = 0;
        for (int64_t r = 0; r < s.rows; ++r) {
          const T *row = x.data() + r * s.classes;
          int64_t label = labels[size_t(r)];
          double g =
              tc::lossGradScale(reduction, tc::toDouble(dloss[size_t(r)]),
                                tc::toDouble(dloss[0]), s.rows);
          bool valid = label >= 0 && label < s.classes;
          auto st =
              valid ? hostRowStats(row, s.classes) : HostStats<C>{C(0), 0.0};
          C k = C(g / st.sum);
          auto target = tessel::smoothedGrad<C>(g, s.classes, 0.0);
          for (int64_t c = 0; c < s.classes; ++c) {
            double got = valid ? double(tc::crossEntropyGradElement(
                                     tc::Elem<T>::load(row[c]), st.max, k,
                                     target, c == label))
                               : 0.0;
            double ref = tc::toDouble(want[size_t(r * s.classes + c)]);
            if (!close(got, ref, tolerance<T>(),
                       tolerance<T>() * std::fabs(g)) &&
                wrong++ < 3)
              ADD_FAILURE() << "row " << r << " class " << c << ": " << got
                            << " vs " << ref;
          }
        }
        EXPECT_EQ(wrong, 0);
      }
  };
  run(float());
  run(double());
}

// Tests the label kernels' column rule against tessel_label_logit and
// tessel_sub_label on every block of a 10-class split, bad labels included.
TEST_F(CpuLossReference, LabelKernelsMatchCpu) {
  const int64_t rows = 9, total = 10, classes = 4;
  std::vector<int64_t> labels = {0, 3, 4, 9, -1, 10, 6, 5, 2};
  std::vector<float> values(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r)
    values[size_t(r)] = 0.25f * float(r + 1);
  for (int64_t offset : {0, 4, 6}) {
    std::vector<float> x(size_t(rows * classes));
    for (size_t i = 0; i < x.size(); ++i)
      x[i] = float(i) * 1.5f - 7.0f;
    std::vector<float> logit(static_cast<size_t>(rows)), sub(x.size());
    tessel_label_logit(cpu, TESSEL_F32, TESSEL_I64, x.data(), labels.data(),
                       logit.data(), rows, classes, offset, total);
    EXPECT_TRUE(takeError());
    tessel_sub_label(cpu, TESSEL_F32, TESSEL_I64, x.data(), labels.data(),
                     values.data(), sub.data(), rows, classes, offset, total);
    EXPECT_TRUE(takeError());
    std::vector<float> subHost = x;
    for (int64_t r = 0; r < rows; ++r) {
      int64_t c = tc::labelColumn(labels[size_t(r)], classes, offset, total);
      EXPECT_EQ(bitsOf(c >= 0 ? x[size_t(r * classes + c)] : 0.0f),
                bitsOf(logit[size_t(r)]))
          << "offset " << offset << " row " << r;
      if (c >= 0)
        subHost[size_t(r * classes + c)] -= values[size_t(r)];
    }
    EXPECT_EQ(subHost, sub) << "offset " << offset;
  }
}

//===--- On a GPU ---------------------------------------------------------===//

class CudaVsCpuLoss : public CpuVsCuda {
protected:
  /// Runs `kernel(ctx, logits, labels, out)` on both contexts (logits
  /// shifted by `shift` elements) and returns the CPU's and the GPU's out.
  template <class TOut, class T, class L, class Kernel>
  std::pair<std::vector<TOut>, std::vector<TOut>>
  both(const std::vector<T> &logits, const std::vector<L> &labels,
       size_t outCount, size_t shift, Kernel kernel) {
    std::vector<TOut> results[2];
    tessel_ctx *ctxs[2] = {cpu, gpu};
    std::vector<T> padded(shift, logits.empty() ? T() : logits[0]);
    padded.insert(padded.end(), logits.begin(), logits.end());
    for (int k = 0; k < 2; ++k) {
      void *x = upload(ctxs[k], padded), *l = upload(ctxs[k], labels);
      void *out = upload(ctxs[k], std::vector<TOut>(outCount));
      kernel(ctxs[k], static_cast<const T *>(x) + shift, l, out);
      results[k] = download<TOut>(ctxs[k], out, outCount);
      tessel_free(ctxs[k], x);
      tessel_free(ctxs[k], l);
      tessel_free(ctxs[k], out);
    }
    return {results[0], results[1]};
  }
};

/// Bounds for GPU vs CPU: f32 and f64 as on the host; 16-bit storage
/// within a few units of its last place.
template <class T> double gpuTolerance() {
  if constexpr (std::is_same<T, tc::Half>::value)
    return 4.0 / 1024;
  else if constexpr (std::is_same<T, tc::BFloat>::value)
    return 4.0 / 128;
  else
    return 4 * tolerance<T>();
}

/// How many of the GPU's gradient elements `got` are off the CPU's `want`
/// beyond gpuTolerance (relative; twice it absolute).
template <class T>
int gradientsOff(const std::vector<T> &got, const std::vector<T> &want) {
  int off = 0;
  for (size_t i = 0; i < want.size(); ++i)
    off += !close(tc::toDouble(got[i]), tc::toDouble(want[i]),
                  gpuTolerance<T>(), gpuTolerance<T>() * 2.0);
  return off;
}

template <class F> void forFloatTypes(F &&f) {
  f(float());
  f(double());
  f(tc::Half());
  f(tc::BFloat());
}

/// Calls f(shape, reduction) for every shape and reduction, traced with
/// T's dtype.
template <class T, class F> void forLossCases(F &&f) {
  for (const Shape &s : kShapes)
    for (int32_t reduction :
         {TESSEL_LOSS_MEAN, TESSEL_LOSS_SUM, TESSEL_LOSS_NONE}) {
      SCOPED_TRACE(std::to_string(dtypeOf<T>()) + " " +
                   std::to_string(s.rows) + "x" + std::to_string(s.classes) +
                   " reduction " + std::to_string(reduction));
      f(s, reduction);
    }
}

// Tests tessel_cross_entropy on the GPU (every reduction, both label types,
// aligned and misaligned logits) and that it is deterministic.
TEST_F(CudaVsCpuLoss, CrossEntropyMatchesCpu) {
  forFloatTypes([&](auto tag) {
    using T = decltype(tag);
    forLossCases<T>([&](const Shape &s, int32_t reduction) {
      for (size_t shift : {0, 1}) {
        std::vector<T> x;
        std::vector<int64_t> labels;
        makeProblem(s, 17 + uint64_t(s.classes), false, x, labels);
        size_t count = reduction == TESSEL_LOSS_NONE ? size_t(s.rows) : 1;
        auto kernel = [&](tessel_ctx *ctx, const T *lg, void *l, void *out) {
          tessel_cross_entropy(ctx, dtypeOf<T>(), TESSEL_I64, lg, l, out,
                               s.rows, s.classes, reduction);
        };
        auto [want, got] = both<T>(x, labels, count, shift, kernel);
        auto again = both<T>(x, labels, count, shift, kernel).second;
        for (size_t i = 0; i < count; ++i) {
          EXPECT_TRUE(close(tc::toDouble(got[i]), tc::toDouble(want[i]),
                            gpuTolerance<T>(), gpuTolerance<T>()))
              << i << ": " << tc::toDouble(got[i]) << " vs "
              << tc::toDouble(want[i]);
          EXPECT_EQ(bitsOf(got[i]), bitsOf(again[i]));
        }
      }
    });
  });
}

// Tests tessel_cross_entropy_grad on the GPU for every reduction.
TEST_F(CudaVsCpuLoss, CrossEntropyGradMatchesCpu) {
  forFloatTypes([&](auto tag) {
    using T = decltype(tag);
    forLossCases<T>([&](const Shape &s, int32_t reduction) {
      for (size_t shift : {0, 1}) {
        std::vector<T> x;
        std::vector<int64_t> labels64;
        makeProblem(s, 29 + uint64_t(s.classes), false, x, labels64);
        std::vector<int32_t> labels(labels64.begin(), labels64.end());
        std::vector<T> dloss;
        for (int64_t r = 0; r < s.rows; ++r)
          dloss.push_back(tc::fromDouble<T>(1.0 + 0.5 * double(r % 3)));
        auto [want, got] =
            both<T>(x, labels, x.size(), shift,
                    [&](tessel_ctx *ctx, const T *lg, void *l, void *out) {
                      void *dl = upload(ctx, dloss);
                      tessel_cross_entropy_grad(ctx, dtypeOf<T>(), TESSEL_I32,
                                                lg, l, dl, out, s.rows,
                                                s.classes, reduction);
                      tessel_synchronize(ctx);
                      tessel_free(ctx, dl);
                    });
        EXPECT_EQ(gradientsOff(got, want), 0);
      }
    });
  });
}

// Tests tessel_cross_entropy_f32 and tessel_cross_entropy_grad_f32 (ABI 13:
// 16-bit logits, the loss and dloss in f32) on the GPU: the loss within
// f32's bounds of the CPU's (the widened logits are exact, so only the
// summation order differs), the gradient within the 16-bit bounds.
TEST_F(CudaVsCpuLoss, CrossEntropyF32OfHalfLogitsMatchesCpu) {
  auto run = [&](auto tag) {
    using T = decltype(tag);
    forLossCases<T>([&](const Shape &s, int32_t reduction) {
      std::vector<T> x;
      std::vector<int64_t> labels;
      makeProblem(s, 41 + uint64_t(s.classes), false, x, labels);
      size_t count = reduction == TESSEL_LOSS_NONE ? size_t(s.rows) : 1;
      auto [want, got] = both<float>(
          x, labels, count, 1,
          [&](tessel_ctx *ctx, const T *lg, void *l, void *out) {
            tessel_cross_entropy_f32(ctx, dtypeOf<T>(), TESSEL_I64, lg, l,
                                     out, s.rows, s.classes, reduction);
          });
      for (size_t i = 0; i < count; ++i)
        EXPECT_TRUE(close(got[i], want[i], gpuTolerance<float>(),
                          gpuTolerance<float>()))
            << i << ": " << got[i] << " vs " << want[i];
      std::vector<float> dloss;
      for (int64_t r = 0; r < s.rows; ++r)
        dloss.push_back(1.0f + 0.5f * float(r % 3));
      auto [wantGrad, gotGrad] = both<T>(
          x, labels, x.size(), 0,
          [&](tessel_ctx *ctx, const T *lg, void *l, void *out) {
            void *dl = upload(ctx, dloss);
            tessel_cross_entropy_grad_f32(ctx, dtypeOf<T>(), TESSEL_I64, lg,
                                          l, dl, out, s.rows, s.classes,
                                          reduction);
            tessel_synchronize(ctx);
            tessel_free(ctx, dl);
          });
      EXPECT_EQ(gradientsOff(gotGrad, wantGrad), 0);
    });
  };
  run(tc::Half());
  run(tc::BFloat());
}

// Tests tessel_cross_entropy_with_grad on the GPU (one pass) against the
// CPU's (the loss, then the gradient): the gradient apart from the logits
// and over them, each float type with its own loss and f16/bf16 with an
// f32 one; the loss within its type's bounds, the gradient within the
// logits'; and with the logits soft-capped (ABI 27), by a cap that bends
// them (2.5 over logits in [-8, 8]), through the same kernel and through
// the loss and gradient entries apart; and label-smoothed (ABI 28, 0.1),
// alone and under the cap, both ways.
TEST_F(CudaVsCpuLoss, CrossEntropyWithGradMatchesCpu) {
  auto run = [&](auto tag, auto lossTag) {
    using T = decltype(tag);
    using L = decltype(lossTag);
    forLossCases<T>([&](const Shape &s, int32_t reduction) {
      std::vector<T> x;
      std::vector<int64_t> labels;
      makeProblem(s, 53 + uint64_t(s.classes), false, x, labels);
      size_t count = reduction == TESSEL_LOSS_NONE ? size_t(s.rows) : 1;
      std::vector<L> dloss;
      for (size_t r = 0; r < count; ++r)
        dloss.push_back(tc::fromDouble<L>(1.0 + 0.5 * double(r % 3)));
      // The options and whether the one-pass entry computes them (else the
      // loss and gradient entries apart): plain, soft-capped, smoothed,
      // both. Without a smoothing, the _softcap entries.
      struct Options {
        double cap, smoothing;
        bool fused;
      };
      const Options kinds[] = {{0.0, 0.0, true},  {2.5, 0.0, true},
                               {2.5, 0.0, false}, {0.0, 0.1, true},
                               {0.0, 0.1, false}, {2.5, 0.1, true},
                               {2.5, 0.1, false}};
      for (const Options &o : kinds)
        for (bool inPlace : {false, true}) {
          SCOPED_TRACE(std::string("loss dtype ") +
                       std::to_string(dtypeOf<L>()) +
                       (inPlace ? ", in place" : ", apart") + ", cap " +
                       std::to_string(o.cap) + ", smoothing " +
                       std::to_string(o.smoothing));
          if (!o.fused && inPlace)
            continue; // the gradient apart reads the logits it would overwrite
          std::vector<L> loss[2];
          std::vector<T> grad[2];
          tessel_ctx *ctxs[2] = {cpu, gpu};
          for (int k = 0; k < 2; ++k) {
            void *lg = upload(ctxs[k], x), *l = upload(ctxs[k], labels);
            void *dl = upload(ctxs[k], dloss);
            void *out = upload(ctxs[k], std::vector<L>(count));
            void *dx = inPlace ? lg : upload(ctxs[k], std::vector<T>(x.size()));
            int32_t t = dtypeOf<T>(), lt = dtypeOf<L>();
            if (o.cap == 0 && o.smoothing == 0)
              tessel_cross_entropy_with_grad(ctxs[k], t, lt, TESSEL_I64, lg, l,
                                             dl, out, dx, s.rows, s.classes,
                                             reduction);
            else if (o.smoothing == 0 && o.fused)
              tessel_cross_entropy_with_grad_softcap(
                  ctxs[k], t, lt, TESSEL_I64, lg, l, dl, out, dx, s.rows,
                  s.classes, reduction, o.cap);
            else if (o.smoothing == 0) {
              tessel_cross_entropy_softcap(ctxs[k], t, lt, TESSEL_I64, lg, l,
                                           out, s.rows, s.classes, reduction,
                                           o.cap);
              tessel_cross_entropy_grad_softcap(ctxs[k], t, lt, TESSEL_I64, lg,
                                                l, dl, dx, s.rows, s.classes,
                                                reduction, o.cap);
            } else if (o.fused)
              tessel_cross_entropy_with_grad_smoothed(
                  ctxs[k], t, lt, TESSEL_I64, lg, l, dl, out, dx, s.rows,
                  s.classes, reduction, o.cap, o.smoothing);
            else {
              tessel_cross_entropy_smoothed(ctxs[k], t, lt, TESSEL_I64, lg, l,
                                            out, s.rows, s.classes, reduction,
                                            o.cap, o.smoothing);
              tessel_cross_entropy_grad_smoothed(ctxs[k], t, lt, TESSEL_I64, lg,
                                                 l, dl, dx, s.rows, s.classes,
                                                 reduction, o.cap, o.smoothing);
            }
            loss[k] = download<L>(ctxs[k], out, count);
            grad[k] = download<T>(ctxs[k], dx, x.size());
            EXPECT_EQ(tessel_error(ctxs[k]), nullptr) << tessel_error(ctxs[k]);
            for (void *p : {lg, l, dl, out})
              tessel_free(ctxs[k], p);
            if (!inPlace)
              tessel_free(ctxs[k], dx);
          }
          for (size_t i = 0; i < count; ++i)
            EXPECT_TRUE(close(tc::toDouble(loss[1][i]),
                              tc::toDouble(loss[0][i]), gpuTolerance<L>(),
                              gpuTolerance<L>()))
                << i << ": " << tc::toDouble(loss[1][i]) << " vs "
                << tc::toDouble(loss[0][i]);
          EXPECT_EQ(gradientsOff(grad[1], grad[0]), 0);
        }
    });
  };
  run(float(), float());
  run(double(), double());
  run(tc::Half(), tc::Half());
  run(tc::BFloat(), tc::BFloat());
  run(tc::Half(), float());
  run(tc::BFloat(), float());
}

// Tests the fused vocabulary-parallel kernels (ABI 29, 30) on the GPU against
// the CPU's: a block of each shape's classes at offset `classes` of three
// blocks, its four statistics and its gradient (from the CPU's statistics),
// plain, soft-capped and smoothed; bf16 logits with bf16 statistics or, as
// mixed precision computes them, f32 (ABI 30).
TEST_F(CudaVsCpuLoss, VocabLossKernelsMatchCpu) {
  auto run = [&](auto tag, auto statsTag) {
    using T = decltype(tag);
    using S = decltype(statsTag); // T, or f32 for 16-bit T (the _f32 entries)
    constexpr bool wide = !std::is_same_v<T, S>;
    for (const Shape &s : kShapes)
      for (auto [cap, smoothing] :
           {std::pair(0.0, 0.0), std::pair(2.5, 0.0), std::pair(2.5, 0.1)}) {
        SCOPED_TRACE(std::to_string(dtypeOf<T>()) + " statistics " +
                     std::to_string(dtypeOf<S>()) + " " +
                     std::to_string(s.rows) + "x" + std::to_string(s.classes) +
                     " cap " + std::to_string(cap) + " smoothing " +
                     std::to_string(smoothing));
        std::vector<T> x;
        std::vector<int64_t> labels;
        makeProblem(s, 71 + uint64_t(s.classes), false, x, labels);
        // Labels over all three blocks: a third of the rows in this one.
        for (int64_t r = 0; r < s.rows; ++r)
          labels[size_t(r)] += (r % 3) * s.classes;
        const int64_t offset = s.classes, total = 3 * s.classes;
        std::vector<S> stats[2][4], rowGrad;
        std::vector<T> grad[2];
        for (int64_t r = 0; r < s.rows; ++r)
          rowGrad.push_back(tc::fromDouble<S>(0.5 + 0.25 * double(r % 4)));
        tessel_ctx *ctxs[2] = {cpu, gpu};
        for (int k = 0; k < 2; ++k) {
          void *lg = upload(ctxs[k], x), *l = upload(ctxs[k], labels);
          void *out[4];
          for (void *&o : out)
            o = upload(ctxs[k], std::vector<S>(size_t(s.rows)));
          (wide ? tessel_vocab_loss_stats_f32 : tessel_vocab_loss_stats)(
              ctxs[k], dtypeOf<T>(), TESSEL_I64, lg, l, out[0], out[1], out[2],
              out[3], s.rows, s.classes, offset, total, cap);
          for (int i = 0; i < 4; ++i)
            stats[k][i] = download<S>(ctxs[k], out[i], size_t(s.rows));
          // Both gradients from the CPU's statistics.
          void *m = upload(ctxs[k], stats[0][0]),
               *se = upload(ctxs[k], stats[0][1]);
          void *g = upload(ctxs[k], rowGrad);
          void *dx = upload(ctxs[k], std::vector<T>(x.size()));
          (wide ? tessel_vocab_loss_grad_f32 : tessel_vocab_loss_grad)(
              ctxs[k], dtypeOf<T>(), TESSEL_I64, lg, l, m, se, g, dx, s.rows,
              s.classes, offset, total, cap, smoothing);
          grad[k] = download<T>(ctxs[k], dx, x.size());
          EXPECT_EQ(tessel_error(ctxs[k]), nullptr) << tessel_error(ctxs[k]);
          for (void *p : {lg, l, m, se, g, dx, out[0], out[1], out[2], out[3]})
            tessel_free(ctxs[k], p);
        }
        for (int i = 0; i < 4; ++i)
          for (int64_t r = 0; r < s.rows; ++r)
            EXPECT_TRUE(close(tc::toDouble(stats[1][i][size_t(r)]),
                              tc::toDouble(stats[0][i][size_t(r)]),
                              gpuTolerance<S>(), gpuTolerance<S>()))
                << "statistic " << i << " row " << r;
        EXPECT_EQ(gradientsOff(grad[1], grad[0]), 0);
      }
  };
  run(float(), float());
  run(double(), double());
  run(tc::BFloat(), tc::BFloat());
  run(tc::BFloat(), float());
}

// Tests that bad labels on the GPU report the CPU's error and write what
// the CPU writes (a zero loss, a zero gradient row; the label kernels: a
// zero logit, the row unchanged).
TEST_F(CudaVsCpuLoss, BadLabelsReported) {
  Shape s{4, 1500};
  std::vector<float> x;
  std::vector<int64_t> labels;
  makeProblem(s, 5, false, x, labels);
  labels[2] = 1500;
  auto losses = both<float>(
      x, labels, 4, 0,
      [&](tessel_ctx *ctx, const float *lg, void *l, void *out) {
        tessel_cross_entropy(ctx, TESSEL_F32, TESSEL_I64, lg, l, out, s.rows,
                             s.classes, TESSEL_LOSS_NONE);
        tessel_synchronize(ctx);
        ASSERT_NE(tessel_error(ctx), nullptr);
        EXPECT_STREQ(tessel_error(ctx), "tessel_cross_entropy: label 1500 "
                                        "of row 2 outside [0, 1500)");
        tessel_clear_error(ctx);
      });
  EXPECT_EQ(losses.second[2], 0.0f);
  std::vector<float> ones(4, 1.0f);
  auto grads = both<float>(
      x, labels, x.size(), 0,
      [&](tessel_ctx *ctx, const float *lg, void *l, void *out) {
        void *dl = upload(ctx, ones);
        tessel_cross_entropy_grad(ctx, TESSEL_F32, TESSEL_I64, lg, l, dl, out,
                                  s.rows, s.classes, TESSEL_LOSS_NONE);
        tessel_synchronize(ctx);
        ASSERT_NE(tessel_error(ctx), nullptr);
        EXPECT_STREQ(tessel_error(ctx), "tessel_cross_entropy_grad: label "
                                        "1500 of row 2 outside [0, 1500)");
        tessel_clear_error(ctx);
        tessel_free(ctx, dl);
      });
  for (int64_t c = 0; c < s.classes; ++c)
    EXPECT_EQ(grads.second[size_t(2 * s.classes + c)], 0.0f);
  auto logit = both<float>(
      x, labels, 4, 0,
      [&](tessel_ctx *ctx, const float *lg, void *l, void *out) {
        tessel_label_logit(ctx, TESSEL_F32, TESSEL_I64, lg, l, out, s.rows,
                           s.classes, 0, s.classes);
        tessel_synchronize(ctx);
        ASSERT_NE(tessel_error(ctx), nullptr);
        EXPECT_STREQ(tessel_error(ctx), "tessel_label_logit: label 1500 "
                                        "of row 2 outside [0, 1500)");
        tessel_clear_error(ctx);
      });
  EXPECT_EQ(logit.second[2], 0.0f);
  std::vector<float> values(4, 0.5f);
  auto sub = both<float>(
      x, labels, x.size(), 0,
      [&](tessel_ctx *ctx, const float *lg, void *l, void *out) {
        void *v = upload(ctx, values);
        tessel_sub_label(ctx, TESSEL_F32, TESSEL_I64, lg, l, v, out, s.rows,
                         s.classes, 0, s.classes);
        tessel_synchronize(ctx);
        ASSERT_NE(tessel_error(ctx), nullptr);
        EXPECT_STREQ(tessel_error(ctx), "tessel_sub_label: label 1500 "
                                        "of row 2 outside [0, 1500)");
        tessel_clear_error(ctx);
        tessel_free(ctx, v);
      });
  for (size_t i = 0; i < sub.first.size(); ++i)
    EXPECT_EQ(sub.first[i], sub.second[i]);
}

// Tests tessel_label_logit and tessel_sub_label on the GPU, bit for bit.
TEST_F(CudaVsCpuLoss, LabelKernelsMatchCpu) {
  forFloatTypes([&](auto tag) {
    using T = decltype(tag);
    const int64_t rows = 300, total = 1000, classes = 250;
    std::vector<T> x;
    std::vector<int64_t> labels;
    makeProblem(Shape{rows, classes}, 3, false, x, labels);
    std::mt19937_64 rng(4);
    for (int64_t &l : labels)
      l = int64_t(rng() % uint64_t(total));
    std::vector<T> values(static_cast<size_t>(rows), tc::fromDouble<T>(0.75));
    for (int64_t offset : {0, 250, 750}) {
      auto logit =
          both<T>(x, labels, size_t(rows), 0,
                  [&](tessel_ctx *ctx, const T *lg, void *l, void *out) {
                    tessel_label_logit(ctx, dtypeOf<T>(), TESSEL_I64, lg, l,
                                       out, rows, classes, offset, total);
                  });
      auto sub =
          both<T>(x, labels, x.size(), 0,
                  [&](tessel_ctx *ctx, const T *lg, void *l, void *out) {
                    void *v = upload(ctx, values);
                    tessel_sub_label(ctx, dtypeOf<T>(), TESSEL_I64, lg, l, v,
                                     out, rows, classes, offset, total);
                    tessel_synchronize(ctx);
                    tessel_free(ctx, v);
                  });
      for (size_t i = 0; i < logit.first.size(); ++i)
        EXPECT_EQ(bitsOf(logit.first[i]), bitsOf(logit.second[i]));
      for (size_t i = 0; i < sub.first.size(); ++i)
        EXPECT_EQ(bitsOf(sub.first[i]), bitsOf(sub.second[i]));
    }
  });
}

// Tests tessel_mask_labels on the GPU: the safe labels and the weights of
// both label types and every float type, as the CPU writes them.
TEST_F(CudaVsCpuLoss, MaskLabelsMatchCpu) {
  forFloatTypes([&](auto tag) {
    using T = decltype(tag);
    const int64_t n = 1000;
    std::mt19937_64 rng(5);
    std::vector<int64_t> labels64(static_cast<size_t>(n));
    for (int64_t &l : labels64)
      l = rng() % 4 == 0 ? -100 : int64_t(rng() % 50000);
    std::vector<int32_t> labels32(labels64.begin(), labels64.end());
    for (int32_t lt : {TESSEL_I32, TESSEL_I64}) {
      SCOPED_TRACE(std::to_string(dtypeOf<T>()) + " labels " +
                   std::to_string(lt));
      std::vector<int64_t> safe[2];
      std::vector<T> weights[2];
      tessel_ctx *ctxs[2] = {cpu, gpu};
      for (int k = 0; k < 2; ++k) {
        void *l = lt == TESSEL_I32 ? upload(ctxs[k], labels32)
                                   : upload(ctxs[k], labels64);
        void *sf = upload(ctxs[k], std::vector<int64_t>(size_t(n), 7));
        void *w = upload(ctxs[k], std::vector<T>(size_t(n)));
        tessel_mask_labels(ctxs[k], lt, dtypeOf<T>(), l, -100, sf, w, n);
        ASSERT_EQ(tessel_error(ctxs[k]), nullptr) << tessel_error(ctxs[k]);
        if (lt == TESSEL_I32) {
          std::vector<int32_t> s32 = download<int32_t>(ctxs[k], sf, size_t(n));
          safe[k].assign(s32.begin(), s32.end());
        } else {
          safe[k] = download<int64_t>(ctxs[k], sf, size_t(n));
        }
        weights[k] = download<T>(ctxs[k], w, size_t(n));
        tessel_free(ctxs[k], l);
        tessel_free(ctxs[k], sf);
        tessel_free(ctxs[k], w);
      }
      EXPECT_EQ(safe[0], safe[1]);
      for (size_t i = 0; i < size_t(n); ++i)
        EXPECT_EQ(bitsOf(weights[0][i]), bitsOf(weights[1][i])) << i;
    }
  });
}

} // namespace
