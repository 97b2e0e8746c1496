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
// tessel_clip_scale_f64. The kernels on a GPU: CudaOptimizerGpuTest.cpp.
//
//===----------------------------------------------------------------------===//

#include "CudaOptimizerTestUtil.h"
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
using namespace tessel::cudatest::optimizer;

namespace {

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
