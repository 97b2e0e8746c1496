//===- CudaMatmulTest.cpp - The cuBLASLt GEMM against the CPU -------------===//
//
// Host: the row-major to column-major mapping (ltGemmLayout) drives a plain
// column-major GEMM loop, as cuBLASLt would read the buffers, for every
// transA/transB/bShared combination; it must give the CPU backend's
// tessel_matmul. GPU (skipped without a device): tessel_matmul on both
// backends for every dtype, transposition, batch and shared B.
//
//===----------------------------------------------------------------------===//

#include "cuda/CudaTestUtil.h"
#include "cuda/matmul.h"

#include "Formats.h"

#include <cmath>
#include <limits>
#include <random>

using namespace tessel::cuda;
using tessel::cudatest::CpuVsCuda;
using tessel::cudatest::createContext;

namespace {

struct Shape {
  int64_t batch, m, n, k;
};

std::vector<double> randomDoubles(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  std::vector<double> v(n);
  for (double &x : v)
    x = dist(gen);
  return v;
}

/// Element (r, c) of a column-major matrix.
double at(const double *p, const LtMatrix &mat, bool trans, int64_t r,
          int64_t c) {
  return trans ? p[c + r * mat.ld] : p[r + c * mat.ld];
}

/// D = opX(X)·opY(Y) per strided batch, reading the buffers as cuBLASLt
/// would with the layout's rows, columns, leading dimensions and strides.
std::vector<double> columnMajorGemm(const LtGemmLayout &l, const double *x,
                                    const double *y, size_t outCount) {
  std::vector<double> d(outCount, NAN);
  for (int64_t b = 0; b < l.batch; ++b) {
    const double *xb = x + b * l.x.batchStride;
    const double *yb = y + b * l.y.batchStride;
    double *db = d.data() + b * l.d.batchStride;
    for (int64_t i = 0; i < l.m; ++i)
      for (int64_t j = 0; j < l.n; ++j) {
        double acc = 0;
        for (int64_t p = 0; p < l.k; ++p)
          acc += at(xb, l.x, l.transX, i, p) * at(yb, l.y, l.transY, p, j);
        db[i + j * l.d.ld] = acc;
      }
  }
  return d;
}

} // namespace

TEST(CudaMatmulHost, LayoutMappingMatchesCpuForEveryCombination) {
  tessel_ctx *cpu = createContext("cpu");
  ASSERT_NE(cpu, nullptr);
  for (Shape s : {Shape{1, 1, 1, 1}, Shape{1, 7, 13, 5}, Shape{3, 7, 13, 5},
                  Shape{3, 4, 6, 9}}) {
    for (int combo = 0; combo < 8; ++combo) {
      bool ta = combo & 1, tb = combo & 2, shared = combo & 4;
      LtGemmLayout l = ltGemmLayout(s.batch, s.m, s.n, s.k, ta, tb, shared);
      // The layout describes the matrices the swap needs.
      EXPECT_EQ(l.m, s.n);
      EXPECT_EQ(l.k, s.k);
      EXPECT_EQ(l.n * l.batch, s.m * s.batch);
      EXPECT_EQ(l.x.rows, l.transX ? l.k : l.m);
      EXPECT_EQ(l.x.cols, l.transX ? l.m : l.k);
      EXPECT_EQ(l.y.rows, l.transY ? l.n : l.k);
      EXPECT_EQ(l.y.cols, l.transY ? l.k : l.n);
      EXPECT_EQ(l.d.rows, l.m);
      EXPECT_EQ(l.d.cols, l.n);
      EXPECT_GE(l.x.ld, l.x.rows);
      EXPECT_GE(l.y.ld, l.y.rows);
      EXPECT_GE(l.d.ld, l.d.rows);
      if (shared && !ta)
        EXPECT_EQ(l.batch, 1) << "a shared B folds the batch into M";

      std::vector<double> a = randomDoubles(size_t(s.batch * s.m * s.k), 1);
      std::vector<double> b =
          randomDoubles(size_t((shared ? 1 : s.batch) * s.k * s.n), 2);
      size_t outCount = size_t(s.batch * s.m * s.n);
      std::vector<double> want(outCount);
      tessel_matmul(cpu, TESSEL_F64, a.data(), b.data(), want.data(), s.batch,
                    s.m, s.n, s.k, ta, tb, shared);
      // cuBLASLt's X is our B, its Y our A, its D our C.
      std::vector<double> got =
          columnMajorGemm(l, b.data(), a.data(), outCount);
      for (size_t i = 0; i < outCount; ++i)
        ASSERT_NEAR(got[i], want[i], 1e-12)
            << "combo " << combo << " element " << i;
    }
  }
  EXPECT_EQ(tessel_error(cpu), nullptr);
  tessel_ctx_destroy(cpu);
}

TEST(CudaMatmulHost, HugeFoldedBatchKeepsTheStridedBatch) {
  // batch·M beyond INT_MAX cannot fold: B's batch stride 0 instead.
  LtGemmLayout l =
      ltGemmLayout(int64_t(1) << 20, 4096, 8, 8, false, false, true);
  EXPECT_EQ(l.batch, int64_t(1) << 20);
  EXPECT_EQ(l.x.batchStride, 0);
  EXPECT_EQ(l.n, 4096);
}

//===--- GPU tests --------------------------------------------------------===//

namespace {

class CudaMatmul : public CpuVsCuda {
protected:
  /// tessel_matmul of `dtype` on both backends; expects the GPU within
  /// 2 ulps of the output format of the CPU plus an f32 (f64) accumulation
  /// error of k·eps·Σ|a||b|.
  void check(int32_t dtype, Shape s, bool ta, bool tb, bool shared) {
    size_t es = size_t(tessel_dtype_size(dtype));
    size_t aCount = size_t(s.batch * s.m * s.k);
    size_t bCount = size_t((shared ? 1 : s.batch) * s.k * s.n);
    size_t cCount = size_t(s.batch * s.m * s.n);
    std::vector<double> a64 = randomDoubles(aCount, 3);
    std::vector<double> b64 = randomDoubles(bCount, 4);
    auto toDtype = [&](const std::vector<double> &v) {
      std::vector<uint8_t> out(v.size() * es);
      tessel_cast(cpu, TESSEL_F64, dtype, v.data(), out.data(),
                  int64_t(v.size()));
      return out;
    };
    std::vector<uint8_t> a = toDtype(a64), b = toDtype(b64);
    std::vector<uint8_t> want(cCount * es);
    tessel_matmul(cpu, dtype, a.data(), b.data(), want.data(), s.batch, s.m,
                  s.n, s.k, ta, tb, shared);
    void *ga = upload(gpu, a), *gb = upload(gpu, b);
    void *gc = tessel_alloc(gpu, int64_t(std::max<size_t>(cCount, 1) * es));
    tessel_matmul(gpu, dtype, ga, gb, gc, s.batch, s.m, s.n, s.k, ta, tb,
                  shared);
    std::vector<uint8_t> got = download<uint8_t>(gpu, gc, cCount * es);
    ASSERT_EQ(tessel_error(gpu), nullptr) << tessel_error(gpu);
    std::vector<double> wantD(cCount), gotD(cCount);
    if (cCount) {
      tessel_cast(cpu, dtype, TESSEL_F64, want.data(), wantD.data(),
                  int64_t(cCount));
      tessel_cast(cpu, dtype, TESSEL_F64, got.data(), gotD.data(),
                  int64_t(cCount));
    }
    double ulp = dtype == TESSEL_F64   ? 0x1p-52
                 : dtype == TESSEL_F32 ? 0x1p-23
                 : dtype == TESSEL_F16 ? 0x1p-10
                                       : 0x1p-7;
    double eps = dtype == TESSEL_F64 ? 0x1p-52 : 0x1p-23;
    // |entries| <= 1: Σ|a||b| <= k.
    double bound = double(s.k) * double(s.k) * eps;
    for (size_t i = 0; i < cCount; ++i)
      ASSERT_LE(std::fabs(gotD[i] - wantD[i]),
                2 * ulp * std::fabs(wantD[i]) + 2 * bound)
          << "dtype " << dtype << " ta " << ta << " tb " << tb << " shared "
          << shared << " element " << i;
    tessel_free(gpu, ga);
    tessel_free(gpu, gb);
    tessel_free(gpu, gc);
  }
};

} // namespace

TEST_F(CudaMatmul, MatchesCpuForEveryDtypeAndCombination) {
  for (int32_t dtype : {TESSEL_F32, TESSEL_F64, TESSEL_F16, TESSEL_BF16})
    for (Shape s : {Shape{1, 1, 1, 1}, Shape{1, 7, 13, 5}, Shape{3, 7, 13, 5},
                    Shape{1, 64, 128, 96}, Shape{3, 64, 128, 96}})
      for (int combo = 0; combo < 8; ++combo)
        check(dtype, s, combo & 1, combo & 2, combo & 4);
}

TEST_F(CudaMatmul, EmptyDimensions) {
  // k = 0 is the empty sum (zeros); m, n or batch 0 write nothing.
  for (int32_t dtype : {TESSEL_F32, TESSEL_BF16}) {
    check(dtype, Shape{2, 3, 4, 0}, false, false, false);
    check(dtype, Shape{0, 3, 4, 5}, false, true, false);
    check(dtype, Shape{2, 0, 4, 5}, true, false, true);
    check(dtype, Shape{2, 3, 0, 5}, true, true, false);
  }
}

TEST_F(CudaMatmul, OddlyAlignedOperands) {
  // Views into larger buffers (an element past the 256-byte alignment of
  // tessel_alloc): the heuristic must be told the real alignment.
  const int64_t m = 33, n = 17, k = 9;
  std::vector<float> a(size_t(m * k + 1)), b(size_t(k * n + 1));
  std::mt19937 gen(8);
  for (float &v : a)
    v = float(gen() % 17) - 8.0f; // small integers: exact in any order
  for (float &v : b)
    v = float(gen() % 17) - 8.0f;
  std::vector<float> want(size_t(m * n));
  tessel_matmul(cpu, TESSEL_F32, a.data() + 1, b.data() + 1, want.data(), 1, m,
                n, k, 0, 0, 0);
  float *ga = static_cast<float *>(upload(gpu, a));
  float *gb = static_cast<float *>(upload(gpu, b));
  float *gc = static_cast<float *>(tessel_alloc(gpu, int64_t((m * n + 1) * 4)));
  tessel_matmul(gpu, TESSEL_F32, ga + 1, gb + 1, gc + 1, 1, m, n, k, 0, 0, 0);
  std::vector<float> got = download<float>(gpu, gc + 1, size_t(m * n));
  EXPECT_EQ(got, want);
  tessel_free(gpu, ga);
  tessel_free(gpu, gb);
  tessel_free(gpu, gc);
}

// tessel_matmul_epilogue (what tessel-fuse-epilogues emits): beta 1 into a
// C that holds values, and the bias epilogue, on both backends. Small
// integers make every product and sum exact, so the GPU must equal the
// CPU bit for bit whatever order either adds in.
TEST_F(CudaMatmul, EpilogueEntryMatchesCpu) {
  const int64_t batch = 2, m = 24, n = 40, k = 16;
  std::mt19937 gen(11);
  auto ints = [&](size_t count) {
    std::vector<float> v(count);
    for (float &x : v)
      x = float(gen() % 9) - 4.0f;
    return v;
  };
  std::vector<float> a = ints(size_t(batch * m * k)), b = ints(size_t(k * n)),
                     c0 = ints(size_t(batch * m * n)), bias = ints(size_t(n));
  for (double beta : {0.0, 1.0})
    for (int32_t epilogue : {TESSEL_EPILOGUE_NONE, TESSEL_EPILOGUE_BIAS})
      for (int ta : {0, 1}) {
        SCOPED_TRACE("beta " + std::to_string(beta) + " epilogue " +
                     std::to_string(epilogue) + " ta " + std::to_string(ta));
        const float *biasHost = epilogue ? bias.data() : nullptr;
        std::vector<float> want = c0;
        tessel_matmul_epilogue(cpu, TESSEL_F32, a.data(), b.data(), want.data(),
                               batch, m, n, k, ta, 0, 1, beta, epilogue,
                               biasHost);
        void *ga = upload(gpu, a), *gb = upload(gpu, b), *gc = upload(gpu, c0);
        void *gbias = upload(gpu, bias);
        tessel_matmul_epilogue(gpu, TESSEL_F32, ga, gb, gc, batch, m, n, k, ta,
                               0, 1, beta, epilogue,
                               epilogue ? gbias : nullptr);
        std::vector<float> got = download<float>(gpu, gc, want.size());
        ASSERT_EQ(tessel_error(gpu), nullptr) << tessel_error(gpu);
        ASSERT_EQ(tessel_error(cpu), nullptr) << tessel_error(cpu);
        EXPECT_EQ(got, want);
        for (void *p : {ga, gb, gc, gbias})
          tessel_free(gpu, p);
      }
}

// The GELU epilogues on the GPU against the CPU's unfused arithmetic: N = 40
// takes cuBLASLt's GELU_AUX_BIAS and DGELU (one rounding after the
// epilogue), N = 13 the GEMM and the GELU kernel apart (aux's leading
// dimension is not a multiple of 8). f32 within 2e-6 of the magnitudes.
TEST_F(CudaMatmul, GeluEpiloguesMatchCpu) {
  std::mt19937 gen(12);
  auto uniform = [&](size_t count, float scale) {
    std::uniform_real_distribution<float> dist(-scale, scale);
    std::vector<float> v(count);
    for (float &x : v)
      x = dist(gen);
    return v;
  };
  for (int64_t n : {40, 13})
    for (int ta : {0, 1}) {
      SCOPED_TRACE("n " + std::to_string(n) + " ta " + std::to_string(ta));
      const int64_t batch = 2, m = 24, k = 16, count = batch * m * n;
      std::vector<float> a = uniform(size_t(batch * m * k), 1),
                         b = uniform(size_t(k * n), 1),
                         bias = uniform(size_t(n), 1),
                         pre = uniform(size_t(count), 3);
      const size_t size = static_cast<size_t>(count);
      std::vector<float> want(size), wantAux(size), wantGrad(size);
      tessel_matmul_epilogue_aux(cpu, TESSEL_F32, a.data(), b.data(),
                                 want.data(), batch, m, n, k, ta, 0, 1, 0.0,
                                 TESSEL_EPILOGUE_GELU_BIAS, bias.data(),
                                 wantAux.data());
      tessel_matmul_epilogue_aux(cpu, TESSEL_F32, a.data(), b.data(),
                                 wantGrad.data(), batch, m, n, k, ta, 0, 1, 0.0,
                                 TESSEL_EPILOGUE_DGELU, nullptr, pre.data());
      ASSERT_EQ(tessel_error(cpu), nullptr) << tessel_error(cpu);
      void *ga = upload(gpu, a), *gb = upload(gpu, b), *gbias = upload(gpu, bias);
      void *gpre = upload(gpu, pre), *gc = upload(gpu, want);
      void *gaux = upload(gpu, want), *gdc = upload(gpu, want);
      tessel_matmul_epilogue_aux(gpu, TESSEL_F32, ga, gb, gc, batch, m, n, k, ta,
                                 0, 1, 0.0, TESSEL_EPILOGUE_GELU_BIAS, gbias,
                                 gaux);
      tessel_matmul_epilogue_aux(gpu, TESSEL_F32, ga, gb, gdc, batch, m, n, k,
                                 ta, 0, 1, 0.0, TESSEL_EPILOGUE_DGELU, nullptr,
                                 gpre);
      ASSERT_EQ(tessel_error(gpu), nullptr) << tessel_error(gpu);
      std::vector<float> got = download<float>(gpu, gc, want.size());
      std::vector<float> gotAux = download<float>(gpu, gaux, want.size());
      std::vector<float> gotGrad = download<float>(gpu, gdc, want.size());
      const double tol = 2e-6 * double(k + 1);
      for (size_t i = 0; i < want.size(); ++i) {
        EXPECT_NEAR(gotAux[i], wantAux[i], tol) << i;
        EXPECT_NEAR(got[i], want[i], tol) << i;
        EXPECT_NEAR(gotGrad[i], wantGrad[i], tol) << i;
      }
      for (void *p : {ga, gb, gbias, gpre, gc, gaux, gdc})
        tessel_free(gpu, p);
    }
}

// A 16-bit GEMM summed into or written in f32 (tessel_matmul_accumulate_f32,
// tessel_matmul_f32 over a C of NaNs: cuBLASLt with f32 C and D, beta 1 or
// 0) against the CPU, which rounds the product and the sums to the dtype as
// the unfused ops do: small integers and k = 16, so every product and sum
// (at most 256 in magnitude) is exact even in bf16 and the GPU must equal
// the CPU bit for bit; bf16 and f16, B stored either way, with and without
// the bias gradient, whose aux is also offset by 4 bytes (not 16-byte
// aligned: our column-sum kernel instead of the epilogue).
TEST_F(CudaMatmul, MatmulF32MatchesCpu) {
  const int64_t m = 24, n = 40, k = 16;
  std::mt19937 gen(17);
  auto ints = [&](size_t count) {
    std::vector<double> v(count);
    for (double &x : v)
      x = double(int(gen() % 9) - 4);
    return v;
  };
  for (int32_t dtype : {TESSEL_BF16, TESSEL_F16})
    for (int tb : {0, 1})
      for (int bgrad : {0, 1, 2}) // 2: a misaligned aux
        for (int accumulate : {0, 1}) {
          SCOPED_TRACE(std::string(tt::dtypeName(dtype)) + " tb " +
                       std::to_string(tb) + " bgrad " + std::to_string(bgrad) +
                       " accumulate " + std::to_string(accumulate));
          auto entry =
              accumulate ? tessel_matmul_accumulate_f32 : tessel_matmul_f32;
          auto a = tt::encode(dtype, ints(size_t(k * m)));
          auto b = tt::encode(dtype, ints(size_t(k * n)));
          std::vector<float> c0(size_t(m * n));
          for (float &x : c0)
            x = accumulate ? float(int(gen() % 33) - 16) / 4.0f
                           : std::numeric_limits<float>::quiet_NaN();
          int32_t epilogue =
              bgrad ? TESSEL_EPILOGUE_BGRADB : TESSEL_EPILOGUE_NONE;
          std::vector<float> want = c0, wantGrad(size_t(n) + 1, 7.0f);
          entry(cpu, dtype, a.data(), b.data(), want.data(), 1, m, n, k, 1, tb,
                0, epilogue, bgrad ? wantGrad.data() : nullptr);
          ASSERT_EQ(tessel_error(cpu), nullptr) << tessel_error(cpu);
          void *ga = upload(gpu, a), *gb = upload(gpu, b),
               *gc = upload(gpu, c0);
          void *ggrad = upload(gpu, std::vector<float>(size_t(n) + 1, 7.0f));
          float *aux = bgrad == 2 ? static_cast<float *>(ggrad) + 1
                                  : static_cast<float *>(ggrad);
          entry(gpu, dtype, ga, gb, gc, 1, m, n, k, 1, tb, 0, epilogue,
                bgrad ? aux : nullptr);
          ASSERT_EQ(tessel_error(gpu), nullptr) << tessel_error(gpu);
          EXPECT_EQ(download<float>(gpu, gc, want.size()), want);
          if (bgrad) {
            std::vector<float> got = download<float>(gpu, ggrad, size_t(n) + 1);
            std::vector<float> sums(wantGrad.begin(), wantGrad.end() - 1);
            EXPECT_EQ(std::vector<float>(got.begin() + (bgrad == 2),
                                         got.begin() + (bgrad == 2) + n),
                      sums);
          }
          for (void *p : {ga, gb, gc, ggrad})
            tessel_free(gpu, p);
        }
}

// The bias-gradient epilogue (cuBLASLt's BGRADB under the row-major swap)
// against the CPU's GEMM and row sums: small integers, so every sum is
// exact and the GPU must equal the CPU bit for bit; beta 0 and 1, B stored
// either way.
TEST_F(CudaMatmul, BiasGradEpilogueMatchesCpu) {
  const int64_t m = 24, n = 40, k = 64;
  std::mt19937 gen(13);
  auto ints = [&](size_t count) {
    std::vector<float> v(count);
    for (float &x : v)
      x = float(gen() % 9) - 4.0f;
    return v;
  };
  std::vector<float> a = ints(size_t(k * m)), b = ints(size_t(k * n)),
                     c0 = ints(size_t(m * n));
  for (double beta : {0.0, 1.0})
    for (int tb : {0, 1}) {
      SCOPED_TRACE("beta " + std::to_string(beta) + " tb " + std::to_string(tb));
      std::vector<float> want = c0, wantGrad(size_t(n), 7.0f);
      tessel_matmul_epilogue_aux(cpu, TESSEL_F32, a.data(), b.data(),
                                 want.data(), 1, m, n, k, 1, tb, 0, beta,
                                 TESSEL_EPILOGUE_BGRADB, nullptr,
                                 wantGrad.data());
      ASSERT_EQ(tessel_error(cpu), nullptr) << tessel_error(cpu);
      void *ga = upload(gpu, a), *gb = upload(gpu, b), *gc = upload(gpu, c0);
      void *ggrad = upload(gpu, std::vector<float>(size_t(n), 7.0f));
      tessel_matmul_epilogue_aux(gpu, TESSEL_F32, ga, gb, gc, 1, m, n, k, 1, tb,
                                 0, beta, TESSEL_EPILOGUE_BGRADB, nullptr,
                                 ggrad);
      ASSERT_EQ(tessel_error(gpu), nullptr) << tessel_error(gpu);
      EXPECT_EQ(download<float>(gpu, gc, want.size()), want);
      EXPECT_EQ(download<float>(gpu, ggrad, size_t(n)), wantGrad);
      for (void *p : {ga, gb, gc, ggrad})
        tessel_free(gpu, p);
    }
}
