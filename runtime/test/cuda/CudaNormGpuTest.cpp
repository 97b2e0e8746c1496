//===- CudaNormGpuTest.cpp - The CUDA norm kernels against the CPU's ------===//
//
// On a GPU (CpuVsCuda; skipped without one): every norm kernel on a CUDA
// and a CPU context through the C ABI on the same inputs, every dtype, rows
// in each configuration (warp, block, streamed; 128-bit and scalar), and the
// column sums' reproducibility. The fused residual adds
// (tessel_add_layer_norm, tessel_layer_norm_grad_add) against tessel_binary
// beside the unfused kernels on the same GPU, bit for bit. The f32
// parameter gradients of 16-bit rows (ABI 14) against the CPU's.
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

/// The ABI 14 entries: dγ and dβ of 16-bit rows in f32 as the CPU's
/// within f32 rounding, dx bit for bit the 16-bit entry's on the GPU (and,
/// with the residual add, as the CPU's).
template <class T> void f32ParamGradCases(tessel_ctx *cpu, tessel_ctx *gpu) {
  const int64_t cols[] = {7, 768, 4097};
  for (int64_t rows : kRows)
    for (int64_t n : cols)
      for (bool rms : {false, true})
        for (bool add : {false, true}) {
          std::string what =
              shapeName(rows, n) + (rms ? " rms" : "") + (add ? " add" : "");
          auto x = randomRow<T>(size_t(rows * n), uint64_t(rows * n), -4, 4);
          auto gv = randomRow<T>(size_t(n), 3, 0.5, 1.5);
          auto dy = randomRow<T>(x.size(), 5, -1, 1);
          auto res = randomRow<T>(x.size(), 6, -1, 1);
          const std::vector<T> *residual = add ? &res : nullptr;
          Grads<T, float> want = runLayerNormGradF32(cpu, x, &gv, dy, residual,
                                                     rows, n, 1e-5, rms);
          Grads<T, float> got = runLayerNormGradF32(gpu, x, &gv, dy, residual,
                                                    rows, n, 1e-5, rms);
          expectNear(got.dgamma, want.dgamma, 1e-5, "f32 dgamma " + what);
          expectNear(got.dbeta, want.dbeta, 1e-5, "f32 dbeta " + what);
          if (add)
            expectNear(got.dx, want.dx, tolerance<T>(), "dx " + what,
                       layerNormGradScale(x, &gv, dy, rows, n, 1e-5, rms));
          else
            expectSameBits(got.dx,
                           runLayerNormGrad(gpu, x, &gv, dy, true, true, rows,
                                            n, 1e-5, rms)
                               .dx,
                           "dx " + what);
        }
}

TEST_F(CudaNormGpu, F32ParamGradsOfHalfRowsMatchCpu) {
  f32ParamGradCases<Half>(cpu, gpu);
  f32ParamGradCases<BFloat>(cpu, gpu);
}

//===--- Fused residual adds vs the unfused kernels -----------------------===//

/// Device copies of host vectors on one context, each `shift` elements past
/// an allocation (16-byte aligned), so that shift 1 makes the rows take the
/// scalar path; freed at the end.
struct DeviceBuffers {
  tessel_ctx *ctx;
  int shift;
  std::vector<void *> owned;
  template <class T> T *alloc(size_t n) {
    owned.push_back(
        tessel_alloc(ctx, int64_t((n + size_t(shift)) * sizeof(T))));
    return static_cast<T *>(owned.back()) + shift;
  }
  template <class T> T *put(const std::vector<T> &host) {
    T *p = alloc<T>(host.size());
    tessel_copy_to_device(ctx, p, host.data(),
                          int64_t(host.size() * sizeof(T)));
    return p;
  }
  template <class T> T *putIf(const std::vector<T> *host) {
    return host ? put(*host) : nullptr;
  }
  template <class T> std::vector<T> get(const T *p, size_t n) {
    std::vector<T> host(n);
    tessel_synchronize(ctx);
    tessel_copy_to_host(ctx, host.data(), p, int64_t(n * sizeof(T)));
    return host;
  }
  ~DeviceBuffers() {
    for (void *p : owned)
      tessel_free(ctx, p);
  }
};

/// How a fused call's buffers are laid out: in place (sum = a or b) and
/// misaligned (every pointer one element off).
struct FusedLayout {
  int sumIs = 0; // 0: its own buffer, 1: a, 2: b
  int shift = 0;
};

/// tessel_add_layer_norm against tessel_binary then tessel_layer_norm.
template <class T>
void expectAddLayerNormUnfused(tessel_ctx *gpu, int64_t rows, int64_t cols,
                               int affine, bool rms, FusedLayout layout,
                               const std::string &what) {
  const int32_t dtype = dtypeOf<T>();
  const size_t n = size_t(rows * cols);
  auto a = randomRow<T>(n, uint64_t(rows * cols), -4, 4);
  auto b = randomRow<T>(n, uint64_t(cols) + 7, -1, 1);
  auto gv = randomRow<T>(size_t(cols), 3, 0.5, 1.5);
  auto bv = randomRow<T>(size_t(cols), 4, -1, 1);
  DeviceBuffers buf{gpu, layout.shift, {}};
  T *g = affine < 2 ? buf.put(gv) : nullptr;
  T *beta = affine < 1 ? buf.put(bv) : nullptr;

  T *ua = buf.put(a), *ub = buf.put(b), *usum = buf.alloc<T>(n),
    *uy = buf.alloc<T>(n);
  tessel_binary(gpu, TESSEL_ADD, dtype, ua, ub, usum, int64_t(n));
  tessel_layer_norm(gpu, dtype, usum, g, beta, uy, rows, cols, 1e-5, rms);

  T *fa = buf.put(a), *fb = buf.put(b), *fy = buf.alloc<T>(n);
  T *fsum = layout.sumIs == 1 ? fa : layout.sumIs == 2 ? fb : buf.alloc<T>(n);
  tessel_add_layer_norm(gpu, dtype, fa, fb, g, beta, fsum, fy, rows, cols, 1e-5,
                        rms);
  expectSameBits(buf.get(fsum, n), buf.get(usum, n), "sum " + what);
  expectSameBits(buf.get(fy, n), buf.get(uy, n), "y " + what);
}

/// tessel_layer_norm_grad_add against tessel_layer_norm_grad then
/// tessel_binary(residual, dx, dx); dγ with gamma, dβ unless `affine` is 1.
template <class T>
void expectLayerNormGradAddUnfused(tessel_ctx *gpu, int64_t rows, int64_t cols,
                                   int affine, bool rms, FusedLayout layout,
                                   const std::string &what) {
  const int32_t dtype = dtypeOf<T>();
  const size_t n = size_t(rows * cols), nc = size_t(cols);
  auto x = randomRow<T>(n, uint64_t(rows * cols), -4, 4);
  auto dy = randomRow<T>(n, 5, -1, 1);
  auto res = randomRow<T>(n, 6, -2, 2);
  auto gv = randomRow<T>(nc, 3, 0.5, 1.5);
  const bool wantDgamma = affine < 2, wantDbeta = affine != 1;
  DeviceBuffers buf{gpu, layout.shift, {}};
  T *g = affine < 2 ? buf.put(gv) : nullptr;
  T *xd = buf.put(x), *dyd = buf.put(dy);

  T *ures = buf.put(res), *udx = buf.alloc<T>(n);
  T *udg = wantDgamma ? buf.alloc<T>(nc) : nullptr;
  T *udb = wantDbeta ? buf.alloc<T>(nc) : nullptr;
  tessel_layer_norm_grad(gpu, dtype, xd, g, dyd, udx, udg, udb, rows, cols,
                         1e-5, rms);
  tessel_binary(gpu, TESSEL_ADD, dtype, ures, udx, udx, int64_t(n));

  T *fres = buf.put(res);
  T *fdx = buf.alloc<T>(n);
  T *fdg = wantDgamma ? buf.alloc<T>(nc) : nullptr;
  T *fdb = wantDbeta ? buf.alloc<T>(nc) : nullptr;
  tessel_layer_norm_grad_add(gpu, dtype, xd, g, dyd, fres, fdx, fdg, fdb, rows,
                             cols, 1e-5, rms);
  expectSameBits(buf.get(fdx, n), buf.get(udx, n), "dx " + what);
  if (wantDgamma)
    expectSameBits(buf.get(fdg, nc), buf.get(udg, nc), "dgamma " + what);
  if (wantDbeta)
    expectSameBits(buf.get(fdb, nc), buf.get(udb, nc), "dbeta " + what);
}

/// Rows in every configuration: a warp of 8 or 16/32 elements a thread, a
/// block, streamed; 128-bit where the row length allows (256, 768, 1000,
/// 2048, 20000 for every dtype), scalar otherwise.
template <class T> void fusedAddCases(tessel_ctx *gpu) {
  const int64_t rowsList[] = {3, 65};
  const int64_t colsList[] = {1, 7, 256, 768, 1000, 2048, 4097, 20000};
  for (int64_t rows : rowsList)
    for (int64_t cols : colsList)
      for (bool rms : {false, true})
        for (int affine = 0; affine < 3; ++affine) { // γ β, γ, neither
          std::string what = shapeName(rows, cols) + (rms ? " rms" : "") +
                             " affine " + std::to_string(affine);
          expectAddLayerNormUnfused<T>(gpu, rows, cols, affine, rms, {}, what);
          expectLayerNormGradAddUnfused<T>(gpu, rows, cols, affine, rms, {},
                                           what);
        }
  // In place and misaligned, in each configuration.
  for (int64_t cols : {768, 2048, 4097, 20000})
    for (int shift : {0, 1}) {
      std::string what =
          shapeName(17, cols) + " shift " + std::to_string(shift);
      for (int sumIs : {1, 2})
        expectAddLayerNormUnfused<T>(
            gpu, 17, cols, 0, false, {sumIs, shift},
            what + " sum is " + (sumIs == 1 ? "a" : "b"));
      expectAddLayerNormUnfused<T>(gpu, 17, cols, 1, true, {0, shift},
                                   what + " rms");
      expectLayerNormGradAddUnfused<T>(gpu, 17, cols, 0, false, {0, shift},
                                       what);
      expectLayerNormGradAddUnfused<T>(gpu, 17, cols, 2, true, {0, shift},
                                       what + " rms");
    }
}

// Tests that the fused residual adds equal the unfused kernels bit for bit.
TEST_F(CudaNormGpu, FusedResidualAddsEqualUnfused) {
  fusedAddCases<float>(gpu);
  fusedAddCases<double>(gpu);
  fusedAddCases<Half>(gpu);
  fusedAddCases<BFloat>(gpu);
}

/// RMS norm with a residual add, on the GPU fused and on the CPU: one shape
/// of each configuration.
template <class T> void fusedVsCpuCases(tessel_ctx *cpu, tessel_ctx *gpu) {
  for (int64_t cols : {768, 4097, 20000}) {
    const int64_t rows = 5;
    std::string name = shapeName(rows, cols);
    auto a = randomRow<T>(size_t(rows * cols), 1, -4, 4);
    auto b = randomRow<T>(a.size(), 2, -1, 1);
    auto gv = randomRow<T>(size_t(cols), 3, 0.5, 1.5);
    const std::vector<T> *noBeta = nullptr;
    Call c{gpu};
    void *sum = c.outOf<T>(a.size()), *y = c.outOf<T>(a.size());
    tessel_add_layer_norm(gpu, dtypeOf<T>(), c.in(&a), c.in(&b), c.in(&gv),
                          nullptr, sum, y, rows, cols, 1e-5, true);
    auto cpuSum = runAdd(cpu, a, b);
    expectSameBits(take<T>(gpu, sum, a.size()), cpuSum, "sum " + name);
    expectNear(take<T>(gpu, y, a.size()),
               runLayerNorm(cpu, cpuSum, &gv, noBeta, rows, cols, 1e-5, true),
               tolerance<T>(), "y " + name);
  }
}

// Tests that the fused add and norm is the CPU's sum bit for bit and its
// norm within rounding.
TEST_F(CudaNormGpu, FusedAddLayerNormMatchesCpu) {
  fusedVsCpuCases<float>(cpu, gpu);
  fusedVsCpuCases<BFloat>(cpu, gpu);
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
