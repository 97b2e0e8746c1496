//===- CudaOptimizerGpuTest.cpp - CUDA optimizer kernels on a GPU ---------===//
//
// Each optimizer kernel on a CUDA context against the CPU context through
// the C ABI (skipped without a device): the updates of every option
// combination and float type, master weights, the step read on the
// device, a group's one kernel, the sums of squares and the clipping
// factor, f32 and f64. The same arithmetic on the host:
// CudaOptimizerTest.cpp.
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
using namespace tessel::cudatest::optimizer;
using tessel::UpdateTensor;
using tessel::cudatest::CpuVsCuda;
using tessel::cudatest::createContext;
using tessel::cudatest::downloadFrom;
using tessel::cudatest::uploadTo;

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
