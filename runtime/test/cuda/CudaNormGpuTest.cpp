//===- CudaNormGpuTest.cpp - The CUDA norm kernels against the CPU's ------===//
//
// On a GPU (CpuVsCuda; skipped without one): every norm kernel on a CUDA
// and a CPU context through the C ABI on the same inputs, every dtype, rows
// in each configuration (warp, block, streamed; 128-bit and scalar), and the
// column sums' reproducibility.
//
//===----------------------------------------------------------------------===//

#include "cuda/CudaNormTestUtil.h"

#include <cstring>

using namespace tessel::cudatest;
using namespace tessel::cudatest::norm;

namespace {

using CudaNormGpu = CpuVsCuda;

template <class T> void gpuRowCases(tessel_ctx *cpu, tessel_ctx *gpu) {
  const int64_t cols[] = {1, 7, 768, 1000, 4097, 20000};
  for (int64_t rows : kRows)
    for (int64_t n : cols) {
      std::string name = shapeName(rows, n);
      auto x = randomRow<T>(size_t(rows * n), uint64_t(rows * n), -4, 4);
      auto gv = randomRow<T>(size_t(n), 3, 0.5, 1.5);
      auto bv = randomRow<T>(size_t(n), 4, -1, 1);
      auto dy = randomRow<T>(x.size(), 5, -1, 1);
      auto y = runSoftmax(cpu, x, rows, n, 1);
      expectNear(runSoftmax(gpu, x, rows, n, 1), y, tolerance<T>(),
                 "softmax " + name);
      expectNear(runSoftmaxGrad(gpu, y, dy, rows, n, 1),
                 runSoftmaxGrad(cpu, y, dy, rows, n, 1), tolerance<T>(),
                 "softmax grad " + name);
      for (bool rms : {false, true})
        for (int affine = 0; affine < 3; ++affine) {
          const std::vector<T> *g = affine < 2 ? &gv : nullptr;
          const std::vector<T> *b = affine < 1 ? &bv : nullptr;
          std::string what = name + (rms ? " rms" : "") + " affine " +
                             std::to_string(affine);
          expectNear(runLayerNorm(gpu, x, g, b, rows, n, 1e-5, rms),
                     runLayerNorm(cpu, x, g, b, rows, n, 1e-5, rms),
                     tolerance<T>(), "layer norm " + what);
          bool wantDbeta = affine != 1;
          Grads<T> want = runLayerNormGrad(cpu, x, g, dy, affine < 2, wantDbeta,
                                           rows, n, 1e-5, rms);
          Grads<T> got = runLayerNormGrad(gpu, x, g, dy, affine < 2, wantDbeta,
                                          rows, n, 1e-5, rms);
          expectNear(got.dx, want.dx, tolerance<T>(), "dx " + what,
                     layerNormGradScale(x, g, dy, rows, n, 1e-5, rms));
          expectNear(got.dgamma, want.dgamma, tolerance<T>(), "dgamma " + what);
          expectNear(got.dbeta, want.dbeta, tolerance<T>(), "dbeta " + what);
        }
    }
}

TEST_F(CudaNormGpu, RowKernelsMatchCpu) {
  gpuRowCases<float>(cpu, gpu);
  gpuRowCases<double>(cpu, gpu);
  gpuRowCases<Half>(cpu, gpu);
  gpuRowCases<BFloat>(cpu, gpu);
}

template <class T> void gpuStridedAndBatchCases(tessel_ctx *cpu, tessel_ctx *gpu) {
  const int64_t shapes[][3] = {{1, 1, 1},    {65, 7, 1},   {4, 3, 5},
                               {2, 5, 768},  {3, 2, 4097}, {130, 768, 1},
                               {2, 1000, 3}, {1, 3, 70000}};
  for (const auto &s : shapes) {
    std::string name = shapeName(s[0], s[1], s[2]);
    auto x = randomRow<T>(size_t(s[0] * s[1] * s[2]), uint64_t(s[1]), -4, 4);
    auto dy = randomRow<T>(x.size(), 6, -1, 1);
    auto gv = randomRow<T>(size_t(s[1]), 3, 0.5, 1.5);
    auto bv = randomRow<T>(size_t(s[1]), 4, -1, 1);
    auto y = runSoftmax(cpu, x, s[0], s[1], s[2]);
    expectNear(runSoftmax(gpu, x, s[0], s[1], s[2]), y, tolerance<T>(),
               "softmax " + name);
    expectNear(runSoftmaxGrad(gpu, y, dy, s[0], s[1], s[2]),
               runSoftmaxGrad(cpu, y, dy, s[0], s[1], s[2]), tolerance<T>(),
               "softmax grad " + name);
    for (bool affine : {true, false}) {
      const std::vector<T> *g = affine ? &gv : nullptr;
      const std::vector<T> *b = affine ? &bv : nullptr;
      expectNear(runBatchNorm(gpu, x, g, b, s[0], s[1], s[2], 1e-5),
                 runBatchNorm(cpu, x, g, b, s[0], s[1], s[2], 1e-5),
                 tolerance<T>(), "batch norm " + name);
      Grads<T> want = runBatchNormGrad(cpu, x, g, dy, s[0], s[1], s[2], 1e-5);
      Grads<T> got = runBatchNormGrad(gpu, x, g, dy, s[0], s[1], s[2], 1e-5);
      expectNear(got.dx, want.dx, tolerance<T>(), "batch dx " + name);
      expectNear(got.dgamma, want.dgamma, tolerance<T>(), "batch dgamma " + name);
      expectNear(got.dbeta, want.dbeta, tolerance<T>(), "batch dbeta " + name);
    }
  }
}

TEST_F(CudaNormGpu, StridedSoftmaxAndBatchNormMatchCpu) {
  gpuStridedAndBatchCases<float>(cpu, gpu);
  gpuStridedAndBatchCases<double>(cpu, gpu);
  gpuStridedAndBatchCases<Half>(cpu, gpu);
  gpuStridedAndBatchCases<BFloat>(cpu, gpu);
}

TEST_F(CudaNormGpu, MisalignedRowsTakeTheScalarPath) {
  // Rows of 768 f32 starting one element past a 16-byte boundary.
  const int64_t rows = 9, cols = 768;
  auto x = randomRow<float>(size_t(rows * cols + 1), 8, -4, 4);
  void *buf = put(gpu, x), *y = tessel_alloc(gpu, int64_t(x.size() * 4));
  tessel_layer_norm(gpu, TESSEL_F32, static_cast<float *>(buf) + 1, nullptr,
                    nullptr, static_cast<float *>(y) + 1, rows, cols, 1e-5, 0);
  auto got = take<float>(gpu, y, x.size());
  tessel_free(gpu, buf);
  std::vector<float> body(x.begin() + 1, x.end());
  std::vector<float> gotBody(got.begin() + 1, got.end());
  const std::vector<float> *none = nullptr;
  expectNear(gotBody,
             runLayerNorm(cpu, body, none, none, rows, cols, 1e-5, false),
             tolerance<float>(), "misaligned layer norm");
}

TEST_F(CudaNormGpu, ColumnSumsAreReproducible) {
  const int64_t rows = 4000, cols = 1000;
  auto x = randomRow<float>(size_t(rows * cols), 1, -4, 4);
  auto dy = randomRow<float>(x.size(), 2, -1, 1);
  auto gv = randomRow<float>(size_t(cols), 3, 0.5, 1.5);
  Grads<float> first =
      runLayerNormGrad(gpu, x, &gv, dy, true, true, rows, cols, 1e-5, false);
  for (int i = 0; i < 3; ++i) {
    Grads<float> again =
        runLayerNormGrad(gpu, x, &gv, dy, true, true, rows, cols, 1e-5, false);
    EXPECT_EQ(0, std::memcmp(first.dgamma.data(), again.dgamma.data(), cols * 4));
    EXPECT_EQ(0, std::memcmp(first.dbeta.data(), again.dbeta.data(), cols * 4));
  }
  Grads<float> want =
      runLayerNormGrad(cpu, x, &gv, dy, true, true, rows, cols, 1e-5, false);
  expectNear(first.dgamma, want.dgamma, 1e-5, "dgamma over 4000 rows");
  expectNear(first.dbeta, want.dbeta, 1e-5, "dbeta over 4000 rows");
}

TEST_F(CudaNormGpu, EmptyBatchGivesZeroSums) {
  std::vector<float> ones(4, 1.0f);
  void *dg = put(gpu, ones), *db = put(gpu, ones);
  tessel_batch_norm_grad(gpu, TESSEL_F32, nullptr, nullptr, nullptr, nullptr,
                         dg, db, 0, 4, 3, 1e-5);
  EXPECT_EQ(take<float>(gpu, dg, 4), std::vector<float>(4, 0.0f));
  EXPECT_EQ(take<float>(gpu, db, 4), std::vector<float>(4, 0.0f));
}

} // namespace
