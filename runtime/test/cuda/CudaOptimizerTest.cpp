//===- CudaOptimizerTest.cpp - CUDA optimizer kernels vs the CPU ----------===//
//
// Host tests: optimizer_math.h's per-element SGD / Adam / AdamW, run in
// plain loops, equal the CPU backend's tessel_optimizer_update bit for bit
// (every option combination, several steps, with and without a gradient
// scale, f32 / f64 / f16 / bf16); clipScaleValue equals tessel_clip_scale;
// the sum of squares partitioned as the kernel partitions it matches
// tessel_sum_squares; the multi-tensor chunk walk (optimizer.h) equals
// per-tensor updates. ABI 18's f64 states: the per-element updates equal
// plain double loops, the chunk walk equals the CPU's
// tessel_optimizer_update_f64_group_current, clipScaleValue equals
// tessel_clip_scale_f64. GPU tests (skipped without a device): each kernel
// on a CUDA context against the CPU context through the C ABI.
//
//===----------------------------------------------------------------------===//

#include "CudaTestUtil.h"
#include "TestUtil.h"

#include "cuda/optimizer.h"
#include "cuda/optimizer_math.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>

using namespace tessel::cuda;
using namespace tessel::stored;
using tessel::UpdateTensor;
using tessel::cudatest::CpuVsCuda;
using tessel::cudatest::createContext;
using tessel::cudatest::downloadFrom;
using tessel::cudatest::uploadTo;

namespace {

template <class T> int32_t dtypeOf();
template <> int32_t dtypeOf<float>() { return TESSEL_F32; }
template <> int32_t dtypeOf<double>() { return TESSEL_F64; }
template <> int32_t dtypeOf<Half>() { return TESSEL_F16; }
template <> int32_t dtypeOf<BFloat>() { return TESSEL_BF16; }

template <class T> const char *dtypeName() {
  switch (dtypeOf<T>()) {
  case TESSEL_F32:
    return "f32";
  case TESSEL_F64:
    return "f64";
  case TESSEL_F16:
    return "f16";
  default:
    return "bf16";
  }
}

template <class T>
std::vector<T> randomValues(std::mt19937_64 &rng, size_t n, double sd) {
  std::normal_distribution<double> dist(0.0, sd);
  std::vector<T> out(n);
  for (T &x : out)
    x = fromDouble<T>(dist(rng));
  return out;
}

/// Index of the first element whose bytes differ, or -1.
template <class T>
int64_t firstDifference(const std::vector<T> &a, const std::vector<T> &b) {
  for (size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], sizeof(T)) != 0)
      return int64_t(i);
  return -1;
}

struct OptCase {
  const char *name;
  tessel_optimizer opt;
};

/// Adam or AdamW with these constants (the runtime tests' helper).
constexpr auto adam = tt::adamOptimizer;

/// SGD with these constants (the runtime tests' helper).
constexpr auto sgd = tt::sgdOptimizer;

/// An update over a schedule of the context's step, and whether the GPU
/// must equal the CPU bit for bit (no pow or cos of the device).
struct ScheduledCase {
  tessel_optimizer opt;
  tessel_lr_schedule schedule;
  bool exact;
};

std::vector<OptCase> optimizerCases() {
  return {
      {"sgd", sgd(0.0, 0, 0.0)},
      {"sgd-wd", sgd(0.0, 0, 0.01)},
      {"sgd-momentum", sgd(0.9, 0, 0.0)},
      {"sgd-nesterov", sgd(0.9, 1, 0.0)},
      {"sgd-nesterov-wd", sgd(0.85, 1, 0.05)},
      {"sgd-momentum-wd", sgd(0.9, 0, 1e-4)},
      {"adam", adam(TESSEL_OPT_ADAM, 0.9, 0.999, 1e-8, 0.0)},
      {"adam-l2", adam(TESSEL_OPT_ADAM, 0.9, 0.999, 1e-8, 0.01)},
      {"adam-betas", adam(TESSEL_OPT_ADAM, 0.8, 0.95, 1e-6, 0.0)},
      {"adamw", adam(TESSEL_OPT_ADAMW, 0.9, 0.999, 1e-8, 0.0)},
      {"adamw-wd", adam(TESSEL_OPT_ADAMW, 0.9, 0.95, 1e-8, 0.1)},
  };
}

bool isAdam(const tessel_optimizer &o) { return o.kind != TESSEL_OPT_SGD; }

/// This test's learning rate and gradient scale of 1-based `step`.
double lrAt(int64_t step) { return 1e-2 * (1.0 + 0.25 * double(step)); }
float scaleAt(int64_t step) { return 0.37f / float(step); }

/// One parameter tensor, its gradient and state on a context.
template <class T> struct DeviceTensors {
  tessel_ctx *ctx;
  void *param, *grad, *s0, *s1, *scale;
  DeviceTensors(tessel_ctx *c, const std::vector<T> &p, size_t n) : ctx(c) {
    param = tessel_alloc(ctx, int64_t(n * sizeof(T)) + 64);
    grad = tessel_alloc(ctx, int64_t(n * sizeof(T)) + 64);
    s0 = tessel_alloc(ctx, int64_t(n * sizeof(float)) + 64);
    s1 = tessel_alloc(ctx, int64_t(n * sizeof(float)) + 64);
    scale = tessel_alloc(ctx, 4);
    if (n)
      tessel_copy_to_device(ctx, param, p.data(), int64_t(n * sizeof(T)));
  }
  ~DeviceTensors() {
    for (void *q : {param, grad, s0, s1, scale})
      tessel_free(ctx, q);
  }
  /// One update with gradient g; `offset` elements into each buffer.
  void step(const tessel_optimizer &opt, const std::vector<T> &g, int64_t step,
            bool withScale, int64_t offset = 0) {
    int64_t n = int64_t(g.size());
    char *p = static_cast<char *>(param) + offset * sizeof(T);
    char *gd = static_cast<char *>(grad) + offset * sizeof(T);
    float *m = static_cast<float *>(s0) + offset;
    float *v = static_cast<float *>(s1) + offset;
    if (n)
      tessel_copy_to_device(ctx, gd, g.data(), n * int64_t(sizeof(T)));
    float s = scaleAt(step);
    tessel_copy_to_device(ctx, scale, &s, 4);
    bool needsState0 = isAdam(opt) || opt.momentum != 0.0;
    tessel_optimizer_update(ctx, &opt, dtypeOf<T>(), p, gd,
                            withScale ? scale : nullptr,
                            needsState0 ? m : nullptr,
                            isAdam(opt) ? v : nullptr, n, step, lrAt(step));
  }
  template <class U>
  std::vector<U> read(const void *base, int64_t offset, size_t n) {
    std::vector<U> out(n);
    tessel_synchronize(ctx);
    if (n)
      tessel_copy_to_host(ctx, out.data(),
                          static_cast<const U *>(base) + offset,
                          int64_t(n * sizeof(U)));
    return out;
  }
};

/// The HD functions over a host tensor: what one kernel call computes.
template <class T>
void hostUpdate(const tessel_optimizer &opt, std::vector<T> &param,
                const std::vector<T> &grad, std::vector<float> &s0,
                std::vector<float> &s1, int64_t step, bool withScale) {
  using C = typename Elem<T>::Compute;
  C scale = C(withScale ? scaleAt(step) : 1.0f);
  if (isAdam(opt)) {
    AdamCoeffs<C> k = makeAdamCoeffs<C>(opt, step, lrAt(step));
    for (size_t i = 0; i < param.size(); ++i)
      param[i] = Elem<T>::store(adamElement(k, C(Elem<T>::load(param[i])),
                                            C(Elem<T>::load(grad[i])), scale,
                                            s0[i], s1[i]));
  } else {
    SgdCoeffs<C> k = makeSgdCoeffs<C>(opt, lrAt(step));
    for (size_t i = 0; i < param.size(); ++i)
      param[i] =
          Elem<T>::store(sgdElement(k, C(Elem<T>::load(param[i])),
                                    C(Elem<T>::load(grad[i])), scale, s0[i]));
  }
}

template <class T> void expectHostUpdateEqualsCpu(size_t n) {
  tessel_ctx *cpu = createContext("cpu");
  ASSERT_NE(cpu, nullptr);
  for (const OptCase &c : optimizerCases()) {
    for (bool withScale : {false, true}) {
      SCOPED_TRACE(std::string(c.name) + " " + dtypeName<T>() +
                   " n=" + std::to_string(n) + (withScale ? " scaled" : ""));
      std::mt19937_64 rng(n * 31 + 7);
      std::vector<T> param = randomValues<T>(rng, n, 1.0);
      std::vector<float> s0(n, 0.0f), s1(n, 0.0f);
      DeviceTensors<T> dev(cpu, param, n);
      for (int64_t step = 1; step <= 4; ++step) {
        std::vector<T> grad = randomValues<T>(rng, n, 0.5);
        dev.step(c.opt, grad, step, withScale);
        hostUpdate(c.opt, param, grad, s0, s1, step, withScale);
        ASSERT_EQ(firstDifference(param, dev.template read<T>(dev.param, 0, n)),
                  -1)
            << "param after step " << step;
        if (isAdam(c.opt) || c.opt.momentum != 0.0)
          ASSERT_EQ(firstDifference(s0, dev.template read<float>(dev.s0, 0, n)),
                    -1)
              << "state0 after step " << step;
        if (isAdam(c.opt))
          ASSERT_EQ(firstDifference(s1, dev.template read<float>(dev.s1, 0, n)),
                    -1)
              << "state1 after step " << step;
      }
    }
  }
  EXPECT_EQ(tessel_error(cpu), nullptr);
  tessel_ctx_destroy(cpu);
}

} // namespace

//===--- Host: the HD arithmetic against the CPU backend ------------------===//

TEST(CudaOptimizerHost, UpdateEqualsCpuF32) {
  for (size_t n : {1, 7, 1000, 4099})
    expectHostUpdateEqualsCpu<float>(n);
}

TEST(CudaOptimizerHost, UpdateEqualsCpuF64) {
  for (size_t n : {1, 5, 2051})
    expectHostUpdateEqualsCpu<double>(n);
}

TEST(CudaOptimizerHost, UpdateEqualsCpuF16) {
  for (size_t n : {3, 1025})
    expectHostUpdateEqualsCpu<Half>(n);
}

TEST(CudaOptimizerHost, UpdateEqualsCpuBf16) {
  for (size_t n : {3, 1025})
    expectHostUpdateEqualsCpu<BFloat>(n);
}

TEST(CudaOptimizerHost, ClipScaleEqualsCpu) {
  tessel_ctx *cpu = createContext("cpu");
  ASSERT_NE(cpu, nullptr);
  float *sum = static_cast<float *>(tessel_alloc(cpu, 4));
  float *gs = static_cast<float *>(tessel_alloc(cpu, 4));
  float *out = static_cast<float *>(tessel_alloc(cpu, 4));
  int checked = 0;
  for (float s : {0.0f, 1e-12f, 0.25f, 4.0f, 123.456f, 1e6f, 3e30f})
    for (double maxNorm : {-1.0, 0.0, 1e-3, 0.5, 1.0, 7.3, 1e9})
      for (int scaled = 0; scaled < 3; ++scaled) {
        float g = scaled == 1 ? 0.25f : 1.0f / 3.0f;
        tessel_copy_to_device(cpu, sum, &s, 4);
        tessel_copy_to_device(cpu, gs, &g, 4);
        tessel_clip_scale(cpu, sum, maxNorm, scaled ? gs : nullptr, out);
        float cpuScale;
        tessel_copy_to_host(cpu, &cpuScale, out, 4);
        float hd = float(clipScaleValue(s, maxNorm, scaled ? g : 1.0f));
        EXPECT_EQ(floatBits(hd), floatBits(cpuScale))
            << "sum " << s << " max_norm " << maxNorm << " scaled " << scaled;
        ++checked;
      }
  EXPECT_EQ(checked, 7 * 7 * 3);
  for (void *p : {(void *)sum, (void *)gs, (void *)out})
    tessel_free(cpu, p);
  tessel_ctx_destroy(cpu);
}

// ABI 18: with f64 scalars nothing is rounded to f32: clipScaleValue is
// torch's formula in double and equals tessel_clip_scale_f64 bit for bit.
TEST(CudaOptimizerHost, ClipScaleF64EqualsCpu) {
  tessel_ctx *cpu = createContext("cpu");
  ASSERT_NE(cpu, nullptr);
  void *sum = tessel_alloc(cpu, 8), *gs = tessel_alloc(cpu, 8);
  void *out = tessel_alloc(cpu, 8);
  for (double s : {0.0, 1e-12, 0.1, 4.0, 123.456, 1e6 + 0.3, 3e30})
    for (double maxNorm : {-1.0, 0.0, 1e-3, 0.5, 1.0, 7.3, 1e9})
      for (bool scaled : {false, true}) {
        SCOPED_TRACE("sum " + std::to_string(s) + " max_norm " +
                     std::to_string(maxNorm) + (scaled ? " scaled" : ""));
        double g = scaled ? 1.0 / 3.0 : 1.0; // 1/3: not an f32 value
        tessel_copy_to_device(cpu, sum, &s, 8);
        tessel_copy_to_device(cpu, gs, &g, 8);
        tessel_clip_scale_f64(cpu, sum, maxNorm, scaled ? gs : nullptr, out);
        double cpuScale = downloadFrom<double>(cpu, out, 1)[0];
        double hd = clipScaleValue(s, maxNorm, g);
        double torch =
            maxNorm > 0.0
                ? std::min(1.0, maxNorm / (std::sqrt(s) * g + 1e-6)) * g
                : g;
        EXPECT_EQ(std::memcmp(&hd, &cpuScale, 8), 0) << hd << " " << cpuScale;
        EXPECT_EQ(hd, torch);
      }
  EXPECT_EQ(tessel_error(cpu), nullptr);
  for (void *p : {sum, gs, out})
    tessel_free(cpu, p);
  tessel_ctx_destroy(cpu);
}

namespace {

/// Σx² in f64 split as the kernel splits it: 1024 threads' worth of blocks
/// at most, each thread a strided share, the partials added in order.
template <class T> double partitionedSumSquares(const std::vector<T> &x) {
  const int64_t threads = 256, maxBlocks = 1024, n = int64_t(x.size());
  int64_t blocks = std::max<int64_t>(
      1, std::min<int64_t>(maxBlocks, (n + 4 * threads - 1) / (4 * threads)));
  int64_t stride = blocks * threads;
  double total = 0.0;
  for (int64_t b = 0; b < blocks; ++b) {
    double partial = 0.0;
    for (int64_t t = 0; t < threads; ++t) {
      int64_t tid = b * threads + t;
      double acc = 0.0;
      for (int64_t i = tid; i < n / 4; i += stride)
        for (int64_t j = 0; j < 4; ++j) {
          double v = double(Elem<T>::load(x[size_t(4 * i + j)]));
          acc += v * v;
        }
      for (int64_t i = n / 4 * 4 + tid; i < n; i += stride) {
        double v = double(Elem<T>::load(x[size_t(i)]));
        acc += v * v;
      }
      partial += acc;
    }
    total += partial;
  }
  return total;
}

template <class T> void expectSumSquaresMatchesCpu(size_t n) {
  SCOPED_TRACE(std::string(dtypeName<T>()) + " n=" + std::to_string(n));
  tessel_ctx *cpu = createContext("cpu");
  ASSERT_NE(cpu, nullptr);
  std::mt19937_64 rng(n + 3);
  std::vector<T> x = randomValues<T>(rng, n, 2.0);
  void *dx = tessel_alloc(cpu, int64_t(n * sizeof(T)) + 8);
  if (n)
    tessel_copy_to_device(cpu, dx, x.data(), int64_t(n * sizeof(T)));
  float start = 2.5f; // accumulates into *sum
  float *sum = static_cast<float *>(tessel_alloc(cpu, 4));
  tessel_copy_to_device(cpu, sum, &start, 4);
  tessel_sum_squares(cpu, dtypeOf<T>(), dx, int64_t(n), sum);
  float cpuSum;
  tessel_copy_to_host(cpu, &cpuSum, sum, 4);
  float hostSum = float(double(start) + partitionedSumSquares(x));
  EXPECT_NEAR(hostSum, cpuSum, 1e-6 * std::fabs(cpuSum));
  // ABI 18's f64 *sum: the f64 total added without rounding to f32, so
  // within 1e-11 (the orders of the sums differ; f32 would be up to 6e-8
  // off) and, with nothing added, the start (not an f32 value) exactly.
  double start64 = 2.5 + 0x1p-30;
  void *sum64 = uploadTo(cpu, std::vector<double>{start64});
  tessel_sum_squares_f64(cpu, dtypeOf<T>(), dx, int64_t(n), sum64);
  double cpuSum64 = downloadFrom<double>(cpu, sum64, 1)[0];
  double hostSum64 = start64 + partitionedSumSquares(x);
  EXPECT_NEAR(hostSum64, cpuSum64, 1e-11 * std::fabs(cpuSum64));
  if (n == 0) {
    EXPECT_EQ(cpuSum64, start64);
  }
  EXPECT_EQ(tessel_error(cpu), nullptr);
  tessel_free(cpu, dx);
  tessel_free(cpu, sum);
  tessel_free(cpu, sum64);
  tessel_ctx_destroy(cpu);
}

} // namespace

TEST(CudaOptimizerHost, SumSquaresPartitionMatchesCpu) {
  for (size_t n : {0, 1, 5, 1023, 4099, 300001})
    expectSumSquaresMatchesCpu<float>(n);
  for (size_t n : {3, 70001})
    expectSumSquaresMatchesCpu<double>(n);
  expectSumSquaresMatchesCpu<BFloat>(9999);
  expectSumSquaresMatchesCpu<Half>(9999);
}

//===--- Host: the multi-tensor chunk walk --------------------------------===//

namespace {

template <class T> void expectChunkWalkEqualsCpu(int32_t kind) {
  SCOPED_TRACE(dtypeName<T>());
  tessel_optimizer opt{};
  opt.kind = kind;
  opt.beta1 = 0.9;
  opt.beta2 = 0.95;
  opt.eps = 1e-8;
  opt.weight_decay = 0.1;
  const std::vector<size_t> sizes = {
      1,   5, 0, size_t(kAdamChunkElements), size_t(2 * kAdamChunkElements + 7),
      3000};
  tessel_ctx *cpu = createContext("cpu");
  ASSERT_NE(cpu, nullptr);
  std::mt19937_64 rng(11);
  std::vector<std::vector<T>> params, grads;
  std::vector<std::vector<float>> ms, vs;
  std::vector<std::unique_ptr<DeviceTensors<T>>> devs;
  std::vector<UpdateTensor> list;
  for (size_t n : sizes) {
    params.push_back(randomValues<T>(rng, n, 1.0));
    grads.emplace_back(n);
    ms.emplace_back(n, 0.0f);
    vs.emplace_back(n, 0.0f);
    devs.push_back(std::make_unique<DeviceTensors<T>>(cpu, params.back(), n));
  }
  for (size_t t = 0; t < sizes.size(); ++t)
    list.push_back({params[t].data(), nullptr, grads[t].data(), ms[t].data(),
                    vs[t].data(), int64_t(sizes[t])});
  const ChunkElementBytes bytes{int64_t(sizeof(T)), int64_t(sizeof(T)), 0, 4};
  std::vector<AdamChunk> chunks = adamChunks(list, false, bytes);
  ASSERT_EQ(chunks.size(), size_t(1 + 1 + 1 + 3 + 1));
  using C = typename Elem<T>::Compute;
  for (int64_t step = 1; step <= 3; ++step) {
    for (size_t t = 0; t < sizes.size(); ++t) {
      grads[t] = randomValues<T>(rng, sizes[t], 0.5);
      list[t].grad = grads[t].data();
      devs[t]->step(opt, grads[t], step, true);
    }
    chunks = adamChunks(list, false, bytes);
    AdamCoeffs<C> k = makeAdamCoeffs<C>(opt, step, lrAt(step));
    C scale = C(scaleAt(step));
    for (const AdamChunk &c : chunks) {
      T *p = static_cast<T *>(c.param);
      const T *g = static_cast<const T *>(c.grad);
      float *m = static_cast<float *>(c.m), *v = static_cast<float *>(c.v);
      for (int64_t i = 0; i < c.count; ++i)
        p[i] = Elem<T>::store(adamElement(k, C(Elem<T>::load(p[i])),
                                          C(Elem<T>::load(g[i])), scale, m[i],
                                          v[i]));
    }
    for (size_t t = 0; t < sizes.size(); ++t) {
      DeviceTensors<T> &d = *devs[t];
      ASSERT_EQ(
          firstDifference(params[t], d.template read<T>(d.param, 0, sizes[t])),
          -1)
          << "tensor " << t << " step " << step;
      ASSERT_EQ(
          firstDifference(vs[t], d.template read<float>(d.s1, 0, sizes[t])), -1)
          << "tensor " << t << " step " << step;
    }
  }
  devs.clear();
  EXPECT_EQ(tessel_error(cpu), nullptr);
  tessel_ctx_destroy(cpu);
}

} // namespace

TEST(CudaOptimizerHost, MultiTensorChunkWalkEqualsCpu) {
  expectChunkWalkEqualsCpu<float>(TESSEL_OPT_ADAMW);
  expectChunkWalkEqualsCpu<BFloat>(TESSEL_OPT_ADAMW);
  expectChunkWalkEqualsCpu<float>(TESSEL_OPT_ADAM);
}

//===--- Host: f64 states (ABI 18) ----------------------------------------===//

// With f64 states and an f64 scale the element updates are torch's
// arithmetic in double throughout (no state rounded to f32), written here
// as plain double loops in the same order.
TEST(CudaOptimizerHost, F64StatesEqualPlainDoubleLoops) {
  const size_t n = 1031;
  for (const OptCase &c : optimizerCases()) {
    SCOPED_TRACE(c.name);
    const tessel_optimizer &o = c.opt;
    std::mt19937_64 rng(19);
    std::vector<double> param = randomValues<double>(rng, n, 1.0);
    std::vector<double> want = param;
    std::vector<double> s0(n, 0.0), s1(n, 0.0), w0(n, 0.0), w1(n, 0.0);
    for (int64_t step = 1; step <= 4; ++step) {
      std::vector<double> grad = randomValues<double>(rng, n, 0.5);
      double scale = 1.0 / (3.0 * double(step)), lr = lrAt(step);
      if (isAdam(o)) {
        AdamCoeffs<double> k = makeAdamCoeffs<double>(o, step, lr);
        double bc1 = 1.0 - std::pow(o.beta1, double(step));
        double bc2 = 1.0 - std::pow(o.beta2, double(step));
        for (size_t i = 0; i < n; ++i) {
          param[i] = adamElement(k, param[i], grad[i], scale, s0[i], s1[i]);
          double p = want[i], g = grad[i] * scale;
          if (o.weight_decay != 0.0) {
            if (o.kind == TESSEL_OPT_ADAMW)
              p *= 1.0 - lr * o.weight_decay;
            else
              g += o.weight_decay * p;
          }
          w0[i] = w0[i] + (g - w0[i]) * (1.0 - o.beta1);
          w1[i] = w1[i] * o.beta2 + (1.0 - o.beta2) * g * g;
          double denom = std::sqrt(w1[i]) / std::sqrt(bc2) + o.eps;
          want[i] = p - lr / bc1 * (w0[i] / denom);
        }
      } else {
        SgdCoeffs<double> k = makeSgdCoeffs<double>(o, lr);
        for (size_t i = 0; i < n; ++i) {
          param[i] = sgdElement(k, param[i], grad[i], scale, s0[i]);
          double g = grad[i] * scale;
          if (o.weight_decay != 0.0)
            g += o.weight_decay * want[i];
          if (o.momentum != 0.0) {
            w0[i] = o.momentum * w0[i] + g;
            g = o.nesterov ? g + o.momentum * w0[i] : w0[i];
          }
          want[i] = want[i] - lr * g;
        }
      }
      ASSERT_EQ(firstDifference(param, want), -1) << "param, step " << step;
      ASSERT_EQ(firstDifference(s0, w0), -1) << "state0, step " << step;
      ASSERT_EQ(firstDifference(s1, w1), -1) << "state1, step " << step;
    }
  }
}

// f64 states are 8 bytes an element: the chunks' m and v advance by 8.
TEST(CudaOptimizerHost, F64StateChunksOffsetStatesByEightBytes) {
  std::vector<double> param(70000), grad(70000), m(70000), v(70000);
  std::vector<UpdateTensor> tensors = {
      {param.data(), nullptr, grad.data(), m.data(), v.data(), 70000}};
  std::vector<AdamChunk> chunks =
      adamChunks(tensors, /*master=*/false, ChunkElementBytes{8, 8, 0, 8});
  ASSERT_EQ(chunks.size(), 2u);
  EXPECT_EQ(chunks[1].param, param.data() + kAdamChunkElements);
  EXPECT_EQ(chunks[1].copy, nullptr);
  EXPECT_EQ(chunks[1].grad, grad.data() + kAdamChunkElements);
  EXPECT_EQ(chunks[1].m, m.data() + kAdamChunkElements);
  EXPECT_EQ(chunks[1].v, v.data() + kAdamChunkElements);
  EXPECT_EQ(chunks[1].count, 70000 - kAdamChunkElements);
}

// What the CUDA f64 group computes on the host (Adam through the chunk
// walk, SGD through the per-tensor update it falls back to) equals the
// CPU's tessel_optimizer_update_f64_group_current bit for bit: param, m and
// v in f64 and the gradient scale read as an f64.
TEST(CudaOptimizerHost, F64GroupEqualsCpu) {
  const std::vector<int64_t> sizes = {5, 0, kAdamChunkElements + 3, 3000};
  tessel_ctx *cpu = createContext("cpu");
  ASSERT_NE(cpu, nullptr);
  for (const OptCase &c : optimizerCases()) {
    SCOPED_TRACE(c.name);
    const tessel_optimizer &o = c.opt;
    std::mt19937_64 rng(23);
    // Per tensor: param, grad, state0, state1 on the host (what the walk
    // updates) and on the CPU context (what the group updates).
    std::vector<std::vector<double>> host;
    std::vector<void *> bufs;
    std::vector<UpdateTensor> list;
    for (int64_t n : sizes) {
      std::vector<double> p = randomValues<double>(rng, size_t(n), 1.0);
      std::vector<double> zeros(size_t(n), 0.0);
      for (const std::vector<double> &init : {p, zeros, zeros, zeros}) {
        host.push_back(init);
        bufs.push_back(uploadTo(cpu, init));
      }
    }
    for (size_t t = 0; t < sizes.size(); ++t)
      list.push_back({host[4 * t].data(), nullptr, host[4 * t + 1].data(),
                      host[4 * t + 2].data(), host[4 * t + 3].data(),
                      sizes[t]});
    void *scaleBuf = tessel_alloc(cpu, 8);
    for (int64_t step = 1; step <= 3; ++step) {
      double scale = 1.0 / (3.0 * double(step)); // not an f32 value
      tessel_copy_to_device(cpu, scaleBuf, &scale, 8);
      for (size_t t = 0; t < sizes.size(); ++t) {
        host[4 * t + 1] = randomValues<double>(rng, size_t(sizes[t]), 0.5);
        list[t].grad = host[4 * t + 1].data();
        if (sizes[t])
          tessel_copy_to_device(cpu, bufs[4 * t + 1], host[4 * t + 1].data(),
                                sizes[t] * 8);
      }
      tessel_lr_schedule schedule{TESSEL_LR_CONSTANT, lrAt(step), 0.0, 0, 0};
      tessel_set_step(cpu, uint64_t(step - 1));
      tessel_optimizer_update_f64_group_current(cpu, &o, &schedule, scaleBuf,
                                                int64_t(sizes.size()),
                                                bufs.data(), sizes.data());
      if (isAdam(o)) {
        AdamCoeffs<double> k = makeAdamCoeffs<double>(o, step, lrAt(step));
        for (const AdamChunk &ch :
             adamChunks(list, false, ChunkElementBytes{8, 8, 0, 8})) {
          double *p = static_cast<double *>(ch.param);
          const double *g = static_cast<const double *>(ch.grad);
          double *m = static_cast<double *>(ch.m);
          double *v = static_cast<double *>(ch.v);
          for (int64_t i = 0; i < ch.count; ++i)
            p[i] = adamElement(k, p[i], g[i], scale, m[i], v[i]);
        }
      } else {
        SgdCoeffs<double> k = makeSgdCoeffs<double>(o, lrAt(step));
        for (const UpdateTensor &t : list)
          for (int64_t i = 0; i < t.n; ++i) {
            double *p = static_cast<double *>(t.param);
            p[i] = sgdElement(k, p[i], static_cast<const double *>(t.grad)[i],
                              scale, static_cast<double *>(t.state0)[i]);
          }
      }
      ASSERT_EQ(tessel_error(cpu), nullptr) << tessel_error(cpu);
      for (size_t b = 0; b < bufs.size(); ++b)
        ASSERT_EQ(firstDifference(host[b], downloadFrom<double>(
                                               cpu, bufs[b], host[b].size())),
                  -1)
            << "tensor " << b / 4 << " buffer " << b % 4 << " step " << step;
    }
    for (void *p : bufs)
      tessel_free(cpu, p);
    tessel_free(cpu, scaleBuf);
  }
  tessel_ctx_destroy(cpu);
}

//===--- GPU: the kernels against the CPU backend -------------------------===//

namespace {

/// The same updates on both contexts; every byte of param and state equal.
/// `offset` elements into the buffers breaks the 128-bit alignment.
template <class T>
void expectGpuUpdateEqualsCpu(tessel_ctx *cpu, tessel_ctx *gpu, size_t n,
                              int64_t offset) {
  for (const OptCase &c : optimizerCases())
    for (bool withScale : {false, true}) {
      SCOPED_TRACE(std::string(c.name) + " " + dtypeName<T>() + " n=" +
                   std::to_string(n) + " offset=" + std::to_string(offset) +
                   (withScale ? " scaled" : ""));
      std::mt19937_64 rng(n + 5);
      std::vector<T> param = randomValues<T>(rng, n + size_t(offset), 1.0);
      DeviceTensors<T> a(cpu, param, param.size()), b(gpu, param, param.size());
      for (int64_t step = 1; step <= 3; ++step) {
        std::vector<T> grad = randomValues<T>(rng, n, 0.5);
        a.step(c.opt, grad, step, withScale, offset);
        b.step(c.opt, grad, step, withScale, offset);
      }
      ASSERT_EQ(firstDifference(a.template read<T>(a.param, offset, n),
                                b.template read<T>(b.param, offset, n)),
                -1);
      if (isAdam(c.opt) || c.opt.momentum != 0.0)
        ASSERT_EQ(firstDifference(a.template read<float>(a.s0, offset, n),
                                  b.template read<float>(b.s0, offset, n)),
                  -1);
      if (isAdam(c.opt))
        ASSERT_EQ(firstDifference(a.template read<float>(a.s1, offset, n),
                                  b.template read<float>(b.s1, offset, n)),
                  -1);
    }
}

} // namespace

TEST_F(CpuVsCuda, OptimizerUpdateBitExact) {
  for (size_t n : {1, 4099, 1 << 18})
    for (int64_t offset : {0, 1}) {
      expectGpuUpdateEqualsCpu<float>(cpu, gpu, n, offset);
      expectGpuUpdateEqualsCpu<double>(cpu, gpu, n, offset);
      expectGpuUpdateEqualsCpu<Half>(cpu, gpu, n, offset);
      expectGpuUpdateEqualsCpu<BFloat>(cpu, gpu, n, offset);
    }
}

// Mixed precision: the master, the states and the bf16/f16 copy equal the
// CPU's bit for bit (a vector body and a scalar tail).
TEST_F(CpuVsCuda, MasterUpdateBitExact) {
  std::mt19937_64 rng(31);
  tessel_optimizer adamw{};
  adamw.kind = TESSEL_OPT_ADAMW;
  adamw.beta1 = 0.9;
  adamw.beta2 = 0.999;
  adamw.eps = 1e-8;
  adamw.weight_decay = 0.1;
  tessel_optimizer momentum{};
  momentum.kind = TESSEL_OPT_SGD;
  momentum.momentum = 0.9;
  for (const tessel_optimizer &opt : {adamw, momentum})
    for (size_t n : {size_t(4099), size_t(1) << 16})
      for (int32_t gradDtype : {TESSEL_F32, TESSEL_BF16}) {
        SCOPED_TRACE("n " + std::to_string(n) + " grad " +
                     std::to_string(gradDtype));
        std::vector<float> master = randomValues<float>(rng, n, 1.0);
        std::vector<BFloat> copy(n);
        for (size_t i = 0; i < n; ++i)
          copy[i] = Elem<BFloat>::store(master[i]);
        std::vector<float> gradF = randomValues<float>(rng, n, 0.1);
        std::vector<BFloat> gradB = randomValues<BFloat>(rng, n, 0.1);
        std::vector<float> zeros(n, 0.f);
        std::vector<void *> bufs[2];
        tessel_ctx *ctxs[2] = {cpu, gpu};
        for (int c = 0; c < 2; ++c) {
          tessel_ctx *ctx = ctxs[c];
          bufs[c] = {upload(ctx, copy), upload(ctx, master),
                     gradDtype == TESSEL_F32 ? upload(ctx, gradF)
                                             : upload(ctx, gradB),
                     upload(ctx, zeros), upload(ctx, zeros)};
          for (int64_t step = 1; step <= 3; ++step)
            tessel_optimizer_update_master(ctx, &opt, TESSEL_BF16, bufs[c][0],
                                           bufs[c][1], gradDtype, bufs[c][2],
                                           nullptr, bufs[c][3], bufs[c][4],
                                           int64_t(n), step, 1e-2);
        }
        ASSERT_EQ(tessel_error(gpu), nullptr) << tessel_error(gpu);
        EXPECT_EQ(firstDifference(download<BFloat>(cpu, bufs[0][0], n),
                                  download<BFloat>(gpu, bufs[1][0], n)),
                  -1);
        for (int b : {1, 3, 4})
          EXPECT_EQ(firstDifference(download<float>(cpu, bufs[0][b], n),
                                    download<float>(gpu, bufs[1][b], n)),
                    -1)
              << "buffer " << b;
        for (int c = 0; c < 2; ++c)
          for (void *q : bufs[c])
            tessel_free(ctxs[c], q);
      }
}

// The _current updates read the device step (tessel_set_step orders it on
// the stream) and work the count and rate out on the device. Without
// transcendental functions (SGD, a warm-up then a constant rate) the result
// equals the CPU's bit for bit; Adam's bias corrections and the cosine use
// the device's pow and cos, which may differ from the host's in the last bit
// of a double, so AdamW over a cosine schedule is held to 1e-6 relative.
TEST_F(CpuVsCuda, CurrentUpdateReadsTheDeviceStep) {
  const size_t n = 4099;
  std::mt19937_64 rng(41);
  tessel_optimizer adamw = adam(TESSEL_OPT_ADAMW, 0.9, 0.95, 1e-8, 0.1);
  const ScheduledCase cases[] = {
      {sgd(0.9, 0, 0.01), {TESSEL_LR_CONSTANT, 1e-2, 0.0, 3, 0}, true},
      {adamw, {TESSEL_LR_WARMUP_COSINE, 1e-2, 1e-3, 2, 6}, false}};
  for (const ScheduledCase &c : cases) {
    SCOPED_TRACE("kind " + std::to_string(c.opt.kind));
    std::vector<float> param = randomValues<float>(rng, n, 1.0);
    std::vector<float> zeros(n, 0.f);
    std::vector<void *> bufs[2];
    tessel_ctx *ctxs[2] = {cpu, gpu};
    std::vector<std::vector<float>> grads;
    for (int step = 0; step < 6; ++step)
      grads.push_back(randomValues<float>(rng, n, 0.5));
    for (int k = 0; k < 2; ++k) {
      tessel_ctx *ctx = ctxs[k];
      bufs[k] = {upload(ctx, param), upload(ctx, zeros), upload(ctx, zeros),
                 upload(ctx, zeros)};
      for (int step = 0; step < 6; ++step) {
        tessel_copy_to_device(ctx, bufs[k][1], grads[size_t(step)].data(),
                              int64_t(n * sizeof(float)));
        tessel_set_step(ctx, uint64_t(step));
        tessel_optimizer_update_current(ctx, &c.opt, &c.schedule, TESSEL_F32,
                                        bufs[k][0], bufs[k][1], nullptr,
                                        bufs[k][2], bufs[k][3], int64_t(n));
      }
    }
    ASSERT_EQ(tessel_error(gpu), nullptr) << tessel_error(gpu);
    std::vector<float> want = download<float>(cpu, bufs[0][0], n);
    std::vector<float> got = download<float>(gpu, bufs[1][0], n);
    if (c.exact) {
      EXPECT_EQ(firstDifference(want, got), -1);
    } else {
      for (size_t i = 0; i < n; ++i)
        ASSERT_LE(std::fabs(got[i] - want[i]),
                  1e-6 * std::fabs(want[i]) + 1e-12)
            << "element " << i;
    }
    for (int k = 0; k < 2; ++k)
      for (void *q : bufs[k])
        tessel_free(ctxs[k], q);
  }
}

// The master form's chunks: the f32 master, the 16-bit copy and the
// gradient each offset by their own element size.
TEST(CudaOptimizerHost, MasterChunksOffsetEachArrayByItsOwnSize) {
  std::vector<float> master(70000), m(70000), v(70000);
  std::vector<uint16_t> copy(70000), grad(70000);
  std::vector<UpdateTensor> tensors = {
      {copy.data(), master.data(), grad.data(), m.data(), v.data(), 70000}};
  std::vector<AdamChunk> chunks =
      adamChunks(tensors, /*master=*/true, ChunkElementBytes{4, 2, 2, 4});
  ASSERT_EQ(chunks.size(), 2u);
  EXPECT_EQ(chunks[1].param, master.data() + kAdamChunkElements);
  EXPECT_EQ(chunks[1].copy, copy.data() + kAdamChunkElements);
  EXPECT_EQ(chunks[1].grad, grad.data() + kAdamChunkElements);
  EXPECT_EQ(chunks[1].m, m.data() + kAdamChunkElements);
  EXPECT_EQ(chunks[1].v, v.data() + kAdamChunkElements);
  EXPECT_EQ(chunks[1].count, 70000 - kAdamChunkElements);
}

// A grouped update on the GPU (one multi-tensor kernel for Adam/AdamW)
// equals the GPU's calls one by one bit for bit (the same per-block
// constants from the device step), plain f32 and on masters with bf16
// copies and gradients; and the CPU's within 1e-6 (pow on the device).
TEST_F(CpuVsCuda, GroupUpdateIsOneKernelEqualToTheCalls) {
  tessel_optimizer adamw = adam(TESSEL_OPT_ADAMW, 0.9, 0.95, 1e-8, 0.1);
  tessel_lr_schedule schedule{TESSEL_LR_WARMUP_COSINE, 1e-2, 1e-3, 2, 6};
  const std::vector<int64_t> sizes = {5, 70001, 0, 4099};
  std::mt19937_64 rng(77);
  for (bool master : {false, true}) {
    SCOPED_TRACE(master ? "master" : "plain");
    const int32_t lowDtype = master ? TESSEL_BF16 : TESSEL_F32;
    // Per tensor: param (bf16 copy or f32), master, grad, m, v; [0] the
    // group's buffers on the GPU, [1] the single calls' on the GPU, [2]
    // the single calls' on the CPU.
    std::vector<std::vector<void *>> bufs[3];
    tessel_ctx *ctxs[3] = {gpu, gpu, cpu};
    for (int64_t n : sizes) {
      std::vector<float> init = randomValues<float>(rng, size_t(n), 1.0);
      std::vector<BFloat> low(static_cast<size_t>(n));
      for (size_t i = 0; i < size_t(n); ++i)
        low[i] = Elem<BFloat>::store(init[i]);
      std::vector<float> zeros(size_t(n), 0.f);
      for (int k = 0; k < 3; ++k)
        bufs[k].push_back(
            {master ? upload(ctxs[k], low) : upload(ctxs[k], init),
             upload(ctxs[k], init),
             master ? upload(ctxs[k], low) : upload(ctxs[k], init),
             upload(ctxs[k], zeros), upload(ctxs[k], zeros)});
    }
    for (uint64_t step = 0; step < 3; ++step) {
      for (tessel_ctx *ctx : {gpu, cpu})
        tessel_set_step(ctx, step);
      std::vector<void *> pointers;
      std::vector<int64_t> counts;
      for (size_t t = 0; t < sizes.size(); ++t) {
        const std::vector<void *> &b = bufs[0][t];
        pointers.insert(pointers.end(),
                        {b[0], master ? b[1] : nullptr, b[2], b[3], b[4]});
        counts.push_back(sizes[t]);
        for (int k = 1; k < 3; ++k) {
          const std::vector<void *> &c = bufs[k][t];
          if (master)
            tessel_optimizer_update_master_current(
                ctxs[k], &adamw, &schedule, lowDtype, c[0], c[1], lowDtype,
                c[2], nullptr, c[3], c[4], sizes[t]);
          else
            tessel_optimizer_update_current(ctxs[k], &adamw, &schedule,
                                            lowDtype, c[0], c[2], nullptr, c[3],
                                            c[4], sizes[t]);
        }
      }
      tessel_optimizer_update_group_current(
          gpu, &adamw, &schedule, lowDtype, lowDtype, master ? 1 : 0, nullptr,
          int64_t(sizes.size()), pointers.data(), counts.data());
      ASSERT_EQ(tessel_error(gpu), nullptr) << tessel_error(gpu);
    }
    for (size_t t = 0; t < sizes.size(); ++t) {
      size_t n = size_t(sizes[t]);
      int f32Buffer = master ? 1 : 0; // the f32 values the update computes
      for (int b : {f32Buffer, 3, 4}) {
        std::vector<float> group = download<float>(gpu, bufs[0][t][b], n);
        ASSERT_EQ(group, download<float>(gpu, bufs[1][t][b], n))
            << "tensor " << t << " buffer " << b;
        std::vector<float> want = download<float>(cpu, bufs[2][t][b], n);
        for (size_t i = 0; i < n; ++i)
          ASSERT_LE(std::fabs(group[i] - want[i]),
                    1e-6 * std::fabs(want[i]) + 1e-12)
              << "tensor " << t << " buffer " << b << " element " << i;
      }
    }
    for (int k = 0; k < 3; ++k)
      for (const std::vector<void *> &b : bufs[k])
        for (void *p : b)
          tessel_free(ctxs[k], p);
  }
}

/// The sum-of-squares and clipping entries of S scalars: f32, or f64
/// (ABI 18); and how far two f64 sums of other orders may be apart once in
/// S (a rounding to f32 would be up to 6e-8 off).
template <class S> struct ScalarEntries;
template <> struct ScalarEntries<float> {
  static constexpr auto sumSquares = tessel_sum_squares;
  static constexpr auto clipScale = tessel_clip_scale;
  static constexpr double sumTolerance = 2e-7;
};
template <> struct ScalarEntries<double> {
  static constexpr auto sumSquares = tessel_sum_squares_f64;
  static constexpr auto clipScale = tessel_clip_scale_f64;
  static constexpr double sumTolerance = 1e-11;
};

/// Sums of squares of X (f32 or f64) values into an S added to `start`,
/// per size and alignment: the GPU's within the tolerance of the CPU's,
/// the same bits on every run, the start kept exactly when nothing is
/// added.
template <class X, class S>
void expectSumSquaresPerSize(tessel_ctx *cpu, tessel_ctx *gpu, S start,
                             uint64_t seed) {
  using Entries = ScalarEntries<S>;
  const int32_t dtype = sizeof(X) == 8 ? TESSEL_F64 : TESSEL_F32;
  for (size_t n : {0, 1, 7, 1000, (1 << 20) + 3})
    for (int64_t offset : {0, 1}) {
      SCOPED_TRACE("n=" + std::to_string(n) +
                   " offset=" + std::to_string(offset));
      std::mt19937_64 rng(n + seed);
      std::vector<X> x = randomValues<X>(rng, n + size_t(offset), 1.5);
      void *cx = uploadTo(cpu, x), *gx = uploadTo(gpu, x);
      void *cs = uploadTo(cpu, std::vector<S>{start});
      void *gs1 = uploadTo(gpu, std::vector<S>{start});
      void *gs2 = uploadTo(gpu, std::vector<S>{start});
      Entries::sumSquares(cpu, dtype, static_cast<X *>(cx) + offset, int64_t(n),
                          cs);
      Entries::sumSquares(gpu, dtype, static_cast<X *>(gx) + offset, int64_t(n),
                          gs1);
      Entries::sumSquares(gpu, dtype, static_cast<X *>(gx) + offset, int64_t(n),
                          gs2);
      S c = downloadFrom<S>(cpu, cs, 1)[0];
      S g1 = downloadFrom<S>(gpu, gs1, 1)[0];
      S g2 = downloadFrom<S>(gpu, gs2, 1)[0];
      EXPECT_NEAR(g1, c, Entries::sumTolerance * std::fabs(c));
      EXPECT_EQ(std::memcmp(&g1, &g2, sizeof(S)), 0);
      if (n == 0)
        EXPECT_EQ(g1, start);
      for (void *p : {cx, cs})
        tessel_free(cpu, p);
      for (void *p : {gx, gs1, gs2})
        tessel_free(gpu, p);
    }
}

/// The clipping factor of S scalars from each of `sums`, with and without
/// the gradient scale g: the GPU's bits are the CPU's.
template <class S>
void expectClipScaleBitExact(tessel_ctx *cpu, tessel_ctx *gpu,
                             std::initializer_list<S> sums, S g) {
  for (S s : sums)
    for (double maxNorm : {0.0, 0.5, 1.0, 1e9})
      for (bool scaled : {false, true}) {
        void *cs = uploadTo(cpu, std::vector<S>{s});
        void *gs = uploadTo(gpu, std::vector<S>{s});
        void *cg = uploadTo(cpu, std::vector<S>{g});
        void *gg = uploadTo(gpu, std::vector<S>{g});
        void *co = uploadTo(cpu, std::vector<S>{S(0)});
        void *go = uploadTo(gpu, std::vector<S>{S(0)});
        ScalarEntries<S>::clipScale(cpu, cs, maxNorm, scaled ? cg : nullptr,
                                    co);
        ScalarEntries<S>::clipScale(gpu, gs, maxNorm, scaled ? gg : nullptr,
                                    go);
        S want = downloadFrom<S>(cpu, co, 1)[0];
        S got = downloadFrom<S>(gpu, go, 1)[0];
        EXPECT_EQ(std::memcmp(&want, &got, sizeof(S)), 0)
            << s << " " << maxNorm << " " << scaled << ": " << want << " vs "
            << got;
        for (void *p : {cs, cg, co})
          tessel_free(cpu, p);
        for (void *p : {gs, gg, go})
          tessel_free(gpu, p);
      }
}

TEST_F(CpuVsCuda, SumSquaresAccumulatesAndIsDeterministic) {
  expectSumSquaresPerSize<float, float>(cpu, gpu, 2.5f, 0);
  // The other dtypes, accumulating over two tensors as a global norm does.
  std::mt19937_64 rng(1);
  std::vector<double> d = randomValues<double>(rng, 5003, 1.0);
  std::vector<BFloat> b = randomValues<BFloat>(rng, 777, 1.0);
  std::vector<Half> h = randomValues<Half>(rng, 4096, 1.0);
  void *cd = upload(cpu, d), *gd = upload(gpu, d);
  void *cb = upload(cpu, b), *gb = upload(gpu, b);
  void *ch = upload(cpu, h), *gh = upload(gpu, h);
  void *cs = upload(cpu, std::vector<float>{0.0f});
  void *gs = upload(gpu, std::vector<float>{0.0f});
  tessel_sum_squares(cpu, TESSEL_F64, cd, 5003, cs);
  tessel_sum_squares(cpu, TESSEL_BF16, cb, 777, cs);
  tessel_sum_squares(cpu, TESSEL_F16, ch, 4096, cs);
  tessel_sum_squares(gpu, TESSEL_F64, gd, 5003, gs);
  tessel_sum_squares(gpu, TESSEL_BF16, gb, 777, gs);
  tessel_sum_squares(gpu, TESSEL_F16, gh, 4096, gs);
  float c = download<float>(cpu, cs, 1)[0], g = download<float>(gpu, gs, 1)[0];
  EXPECT_NEAR(g, c, 4e-7 * std::fabs(c));
  for (void *p : {cd, cb, ch, cs})
    tessel_free(cpu, p);
  for (void *p : {gd, gb, gh, gs})
    tessel_free(gpu, p);
}

TEST_F(CpuVsCuda, ClipScaleBitExact) {
  expectClipScaleBitExact<float>(cpu, gpu, {0.0f, 0.25f, 4.0f, 1e6f},
                                 1.0f / 3.0f);
}

//===--- GPU: f64 states and scalars (ABI 18) -----------------------------===//

// The f64 *sum: as the f32 one, nothing rounded to f32 (ABI 18).
TEST_F(CpuVsCuda, SumSquaresF64AccumulatesInF64) {
  const double start = 2.5 + 0x1p-30; // not an f32 value
  expectSumSquaresPerSize<double, double>(cpu, gpu, start, 9);
  // The other dtypes into one f64 sum, as a global norm accumulates.
  std::mt19937_64 rng(2);
  std::vector<float> f = randomValues<float>(rng, 5003, 1.0);
  std::vector<BFloat> b = randomValues<BFloat>(rng, 777, 1.0);
  std::vector<Half> h = randomValues<Half>(rng, 4096, 1.0);
  void *cf = upload(cpu, f), *gf = upload(gpu, f);
  void *cb = upload(cpu, b), *gb = upload(gpu, b);
  void *ch = upload(cpu, h), *gh = upload(gpu, h);
  void *cs = upload(cpu, std::vector<double>{start});
  void *gs = upload(gpu, std::vector<double>{start});
  for (tessel_ctx *ctx : {cpu, gpu}) {
    bool onCpu = ctx == cpu;
    tessel_sum_squares_f64(ctx, TESSEL_F32, onCpu ? cf : gf, 5003,
                           onCpu ? cs : gs);
    tessel_sum_squares_f64(ctx, TESSEL_BF16, onCpu ? cb : gb, 777,
                           onCpu ? cs : gs);
    tessel_sum_squares_f64(ctx, TESSEL_F16, onCpu ? ch : gh, 4096,
                           onCpu ? cs : gs);
  }
  double c = download<double>(cpu, cs, 1)[0];
  double g = download<double>(gpu, gs, 1)[0];
  EXPECT_NEAR(g, c, 1e-11 * std::fabs(c));
  for (void *p : {cf, cb, ch, cs})
    tessel_free(cpu, p);
  for (void *p : {gf, gb, gh, gs})
    tessel_free(gpu, p);
}

TEST_F(CpuVsCuda, ClipScaleF64BitExact) {
  expectClipScaleBitExact<double>(cpu, gpu, {0.0, 0.1, 4.0, 1e6 + 0.3},
                                  1.0 / 3.0);
}

// tessel_optimizer_update_f64_group_current on the GPU (AdamW: one
// multi-tensor kernel over f64 chunks; SGD: the per-tensor kernel with f64
// states) against the CPU, tensors at odd element offsets taking the
// scalar path. SGD over a constant schedule is equal bit for bit; AdamW's
// states too (they depend on neither the rate nor the parameter), its
// parameters within 1e-12 relative (the device's pow and cos may differ
// from the host's in the last bit of a double).
TEST_F(CpuVsCuda, F64GroupUpdateEqualsCpu) {
  tessel_optimizer adamw = adam(TESSEL_OPT_ADAMW, 0.9, 0.95, 1e-8, 0.1);
  const ScheduledCase cases[] = {
      {sgd(0.9, 1, 0.01), {TESSEL_LR_CONSTANT, 1e-2, 0.0, 2, 0}, true},
      {adamw, {TESSEL_LR_WARMUP_COSINE, 1e-2, 1e-3, 2, 6}, false}};
  const std::vector<int64_t> sizes = {5, 70001, 0, 4099};
  std::mt19937_64 rng(53);
  for (const ScheduledCase &c : cases)
    for (bool scaled : {false, true}) {
      SCOPED_TRACE("kind " + std::to_string(c.opt.kind) +
                   (scaled ? " scaled" : ""));
      // Per tensor: param, grad, state0, state1, each one element longer,
      // the tensor at offset t % 2; [0] the CPU's, [1] the GPU's.
      std::vector<void *> bufs[2];
      std::vector<void *> pointers[2];
      tessel_ctx *ctxs[2] = {cpu, gpu};
      for (size_t t = 0; t < sizes.size(); ++t) {
        size_t len = size_t(sizes[t]) + 1;
        std::vector<double> init = randomValues<double>(rng, len, 1.0);
        std::vector<double> zeros(len, 0.0);
        for (int k = 0; k < 2; ++k)
          for (const std::vector<double> &v : {init, zeros, zeros, zeros}) {
            bufs[k].push_back(upload(ctxs[k], v));
            pointers[k].push_back(static_cast<double *>(bufs[k].back()) +
                                  t % 2);
          }
      }
      void *scales[2] = {upload(cpu, std::vector<double>{1.0 / 3.0}),
                         upload(gpu, std::vector<double>{1.0 / 3.0})};
      for (uint64_t step = 0; step < 3; ++step) {
        for (size_t t = 0; t < sizes.size(); ++t) {
          std::vector<double> grad =
              randomValues<double>(rng, size_t(sizes[t]), 0.5);
          for (int k = 0; k < 2; ++k)
            if (!grad.empty())
              tessel_copy_to_device(ctxs[k], pointers[k][4 * t + 1],
                                    grad.data(), sizes[t] * 8);
        }
        for (int k = 0; k < 2; ++k) {
          tessel_set_step(ctxs[k], step);
          tessel_optimizer_update_f64_group_current(
              ctxs[k], &c.opt, &c.schedule, scaled ? scales[k] : nullptr,
              int64_t(sizes.size()), pointers[k].data(), sizes.data());
        }
        ASSERT_EQ(tessel_error(gpu), nullptr) << tessel_error(gpu);
      }
      for (size_t t = 0; t < sizes.size(); ++t)
        for (size_t b : {size_t(0), size_t(2), size_t(3)}) {
          size_t n = size_t(sizes[t]);
          std::vector<double> want =
              download<double>(cpu, pointers[0][4 * t + b], n);
          std::vector<double> got =
              download<double>(gpu, pointers[1][4 * t + b], n);
          if (c.exact || b != 0) {
            EXPECT_EQ(firstDifference(want, got), -1)
                << "tensor " << t << " buffer " << b;
            continue;
          }
          for (size_t i = 0; i < n; ++i)
            ASSERT_LE(std::fabs(got[i] - want[i]),
                      1e-12 * std::fabs(want[i]) + 1e-15)
                << "tensor " << t << " element " << i;
        }
      for (int k = 0; k < 2; ++k) {
        for (void *p : bufs[k])
          tessel_free(ctxs[k], p);
        tessel_free(ctxs[k], scales[k]);
      }
    }
}
