//===- MatmulEpilogueTest.cpp - tessel_matmul_epilogue against loops ------===//
//
// C = op(A)·op(B) + beta·C (+ bias) checked against a double reference for
// every float dtype, transpose, shared B, beta 0 and 1 and the bias
// epilogue; the GELU and bias-gradient epilogues (tessel_matmul_epilogue_
// aux) against the unfused ops bit for bit and against double loops; a
// 16-bit GEMM summed into or written in f32 (tessel_matmul_accumulate_f32,
// tessel_matmul_f32) against double loops; the front's refusals.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

#include <limits>
#include <string>
#include <utility>

using namespace tt;

namespace {

using MatmulEpilogueTest = RuntimeTest;

struct Shape {
  int64_t batch, m, n, k;
};

std::string describe(int32_t dtype, const Shape &s, int ta, int tb, int shared,
                     int beta, int bias) {
  return std::string(dtypeName(dtype)) + " b" + std::to_string(s.batch) + " m" +
         std::to_string(s.m) + " n" + std::to_string(s.n) + " k" +
         std::to_string(s.k) + " ta" + std::to_string(ta) + " tb" +
         std::to_string(tb) + " shared" + std::to_string(shared) + " beta" +
         std::to_string(beta) + " bias" + std::to_string(bias);
}

TEST_F(MatmulEpilogueTest, MatchesReference) {
  // k = 700 is longer than OpenBLAS's K block: beta 1 then adds partial
  // products to C block by block.
  const Shape shapes[] = {{1, 7, 13, 5},
                          {3, 7, 13, 5},
                          {2, 17, 1, 9},
                          {4, 13, 7, 37},
                          {1, 9, 11, 700}};
  for (int32_t dtype : kFloatTypes)
    for (const Shape &s : shapes)
      for (int ta : {0, 1})
        for (int tb : {0, 1})
          for (int shared : {0, 1})
            for (int beta : {0, 1})
              for (int bias : {0, 1}) {
                SCOPED_TRACE(describe(dtype, s, ta, tb, shared, beta, bias));
                int64_t bb = shared ? 1 : s.batch;
                size_t count = size_t(s.batch * s.m * s.n);
                auto a = randomValues(dtype, size_t(s.batch * s.m * s.k), -1, 1,
                                      uint64_t(s.m * 31 + s.k));
                auto b = randomValues(dtype, size_t(bb * s.k * s.n), -1, 1,
                                      uint64_t(s.n * 17 + s.k));
                auto c0 = randomValues(dtype, count, -4, 4, uint64_t(s.n));
                auto biasValues =
                    randomValues(dtype, size_t(s.n), -2, 2, uint64_t(s.k));
                std::vector<double> ref(count), absRef(count);
                for (int64_t p = 0; p < s.batch; ++p) {
                  const double *ap = a.data() + p * s.m * s.k;
                  const double *bp = b.data() + (shared ? 0 : p * s.k * s.n);
                  for (int64_t i = 0; i < s.m; ++i)
                    for (int64_t j = 0; j < s.n; ++j) {
                      size_t at = size_t((p * s.m + i) * s.n + j);
                      double acc = beta ? c0[at] : 0.0;
                      double accAbs = std::fabs(acc);
                      if (bias) {
                        acc += biasValues[size_t(j)];
                        accAbs += std::fabs(biasValues[size_t(j)]);
                      }
                      for (int64_t l = 0; l < s.k; ++l) {
                        double x = ta ? ap[l * s.m + i] : ap[i * s.k + l];
                        double y = tb ? bp[j * s.k + l] : bp[l * s.n + j];
                        acc += x * y;
                        accAbs += std::fabs(x * y);
                      }
                      ref[at] = acc;
                      absRef[at] = accAbs;
                    }
                }
                auto ab = encode(dtype, a), bbytes = encode(dtype, b);
                auto c = encode(dtype, c0);
                auto biasBytes = encode(dtype, biasValues);
                tessel_matmul_epilogue(
                    ctx, dtype, ab.data(), bbytes.data(), c.data(), s.batch,
                    s.m, s.n, s.k, ta, tb, shared, double(beta),
                    bias ? TESSEL_EPILOGUE_BIAS : TESSEL_EPILOGUE_NONE,
                    bias ? biasBytes.data() : nullptr);
                ASSERT_EQ(tessel_error(ctx), nullptr) << tessel_error(ctx);
                auto got = decode(dtype, c);
                // Three roundings of the output type (the product, the
                // sum with C, the sum with the bias: 16-bit types round
                // each, as the unfused ops) plus k + 2 of the compute type,
                // bounded by the sum of magnitudes.
                int bad = 0;
                for (size_t i = 0; i < count; ++i) {
                  double tol =
                      eps(dtype) * (std::fabs(ref[i]) + 2 * absRef[i]) +
                      2 * double(s.k + 2) * computeEps(dtype) * absRef[i] +
                      (dtype == TESSEL_F16 ? 0x1p-24 : 0);
                  if (std::fabs(got[i] - ref[i]) > tol && bad++ < 5)
                    ADD_FAILURE()
                        << i << ": got " << got[i] << " want " << ref[i];
                }
                EXPECT_EQ(bad, 0);
              }
}

// The fused call equals tessel_matmul into a temporary and a tessel_binary
// add (of C, or of the broadcast bias) bit for bit, where the GEMM does
// not split K: f32 and f64 add the rounded product once; 16-bit types
// round the product and then each add, as the unfused ops do.
TEST_F(MatmulEpilogueTest, EqualsMatmulThenAddForShortK) {
  for (int32_t dtype : kFloatTypes)
    for (int bias : {0, 1}) {
      SCOPED_TRACE(std::string(dtypeName(dtype)) + (bias ? " bias" : " acc"));
      const int64_t m = 24, n = 40, k = 32;
      auto a = encode(dtype, randomValues(dtype, size_t(m * k), -1, 1, 1));
      auto b = encode(dtype, randomValues(dtype, size_t(k * n), -1, 1, 2));
      auto c0 = encode(dtype, randomValues(dtype, size_t(m * n), -1, 1, 3));
      auto vec = randomValues(dtype, size_t(n), -1, 1, 4);
      std::vector<double> rows;
      for (int64_t i = 0; i < m; ++i)
        rows.insert(rows.end(), vec.begin(), vec.end());
      auto biasBytes = encode(dtype, vec), broadcast = encode(dtype, rows);
      std::vector<uint8_t> product(c0.size()), unfused = c0, fused = c0;
      tessel_matmul(ctx, dtype, a.data(), b.data(), product.data(), 1, m, n, k,
                    0, 0, 0);
      tessel_binary(ctx, TESSEL_ADD, dtype, product.data(),
                    bias ? broadcast.data() : c0.data(), unfused.data(), m * n);
      tessel_matmul_epilogue(ctx, dtype, a.data(), b.data(), fused.data(), 1, m,
                             n, k, 0, 0, 0, bias ? 0.0 : 1.0,
                             bias ? TESSEL_EPILOGUE_BIAS : TESSEL_EPILOGUE_NONE,
                             bias ? biasBytes.data() : nullptr);
      ASSERT_EQ(tessel_error(ctx), nullptr);
      EXPECT_EQ(fused, unfused);
    }
}

TEST_F(MatmulEpilogueTest, EmptyInnerDimensionKeepsOrZeroesC) {
  std::vector<float> c(6, 5.0f);
  tessel_matmul_epilogue(ctx, TESSEL_F32, nullptr, nullptr, c.data(), 1, 2, 3,
                         0, 0, 0, 0, 1.0, TESSEL_EPILOGUE_NONE, nullptr);
  EXPECT_EQ(c, std::vector<float>(6, 5.0f));
  tessel_matmul_epilogue(ctx, TESSEL_F32, nullptr, nullptr, c.data(), 1, 2, 3,
                         0, 0, 0, 0, 0.0, TESSEL_EPILOGUE_NONE, nullptr);
  EXPECT_EQ(c, std::vector<float>(6, 0.0f));
  EXPECT_EQ(tessel_error(ctx), nullptr);
}

TEST_F(MatmulEpilogueTest, BadArgumentsSetErrors) {
  float a = 1, b = 2, c = 0, bias = 1;
  struct Case {
    double beta;
    int32_t epilogue;
    const float *bias;
    int64_t k;
    const char *message;
  } cases[] = {
      {0.5, TESSEL_EPILOGUE_NONE, nullptr, 1,
       "tessel_matmul_epilogue: beta 0.5 (expected 0 or 1)"},
      {0.0, 7, nullptr, 1, "tessel_matmul_epilogue: unknown epilogue 7"},
      {0.0, TESSEL_EPILOGUE_BIAS, nullptr, 1,
       "tessel_matmul_epilogue: null bias"},
      {0.0, TESSEL_EPILOGUE_BIAS, &bias, 0,
       "tessel_matmul_epilogue: k = 0 with an epilogue"},
  };
  for (const Case &t : cases) {
    tessel_matmul_epilogue(ctx, TESSEL_F32, &a, &b, &c, 1, 1, 1, t.k, 0, 0, 0,
                           t.beta, t.epilogue, t.bias);
    ASSERT_NE(tessel_error(ctx), nullptr) << t.message;
    EXPECT_STREQ(tessel_error(ctx), t.message);
    tessel_clear_error(ctx);
  }
  int32_t i = 1;
  tessel_matmul_epilogue(ctx, TESSEL_I32, &i, &i, &i, 1, 1, 1, 1, 0, 0, 0, 0.0,
                         TESSEL_EPILOGUE_NONE, nullptr);
  EXPECT_NE(tessel_error(ctx), nullptr);
  tessel_clear_error(ctx);
  EXPECT_EQ(c, 0.0f);
}

/// gelu_tanh and its derivative in double: the reference of the GELU
/// epilogues.
double geluTanh(double x) {
  const double k = 0.79788456080286535588;
  return 0.5 * x * (1 + std::tanh(k * (x + 0.044715 * x * x * x)));
}
double geluTanhGrad(double x) {
  const double k = 0.79788456080286535588;
  double t = std::tanh(k * (x + 0.044715 * x * x * x));
  return 0.5 * (1 + t) +
         0.5 * x * (1 - t * t) * k * (1 + 3 * 0.044715 * x * x);
}

// The GELU epilogues are the unfused ops' arithmetic on the CPU: the
// biased product (kept in aux) then tessel_unary's GELU, and the product
// then tessel_unary_grad's, bit for bit in every dtype, with and without
// transposes and a shared B; GELU_BIAS without aux writes the same C.
TEST_F(MatmulEpilogueTest, GeluEpiloguesEqualTheUnfusedOps) {
  const Shape shapes[] = {{1, 7, 13, 5}, {3, 8, 16, 9}};
  for (int32_t dtype : kFloatTypes)
    for (const Shape &s : shapes)
      for (int ta : {0, 1})
        for (int tb : {0, 1})
          for (int shared : {0, 1}) {
            SCOPED_TRACE(describe(dtype, s, ta, tb, shared, 0, 1));
            const int64_t count = s.batch * s.m * s.n;
            auto a = encode(dtype, randomValues(dtype, size_t(s.batch * s.m * s.k),
                                                -1, 1, 5));
            auto b = encode(dtype,
                            randomValues(dtype,
                                         size_t((shared ? 1 : s.batch) * s.k * s.n),
                                         -1, 1, 6));
            auto bias = encode(dtype, randomValues(dtype, size_t(s.n), -1, 1, 7));
            auto pre0 = encode(dtype, randomValues(dtype, size_t(count), -3, 3, 8));
            const size_t bytes = pre0.size();
            auto call = [&](auto fn, auto &&...args) {
              fn(ctx, dtype, a.data(), b.data(), args...);
              ASSERT_EQ(tessel_error(ctx), nullptr) << tessel_error(ctx);
            };
            // Forward: matmul_bias then gelu.
            std::vector<uint8_t> pre(bytes), act(bytes), fused(bytes),
                aux(bytes), noAux(bytes);
            call(tessel_matmul_epilogue, pre.data(), s.batch, s.m, s.n, s.k, ta,
                 tb, shared, 0.0, TESSEL_EPILOGUE_BIAS, bias.data());
            tessel_unary(ctx, TESSEL_GELU_TANH, dtype, pre.data(), act.data(),
                         count);
            call(tessel_matmul_epilogue_aux, fused.data(), s.batch, s.m, s.n,
                 s.k, ta, tb, shared, 0.0, TESSEL_EPILOGUE_GELU_BIAS,
                 bias.data(), aux.data());
            call(tessel_matmul_epilogue_aux, noAux.data(), s.batch, s.m, s.n,
                 s.k, ta, tb, shared, 0.0, TESSEL_EPILOGUE_GELU_BIAS,
                 bias.data(), static_cast<void *>(nullptr));
            EXPECT_EQ(aux, pre);
            EXPECT_EQ(fused, act);
            EXPECT_EQ(noAux, act);
            // Backward: matmul then gelu_grad at the forward's input.
            std::vector<uint8_t> product(bytes), grad(bytes), fusedGrad(bytes);
            call(tessel_matmul, product.data(), s.batch, s.m, s.n, s.k, ta, tb,
                 shared);
            tessel_unary_grad(ctx, TESSEL_GELU_TANH, dtype, pre0.data(),
                              product.data(), grad.data(), count);
            call(tessel_matmul_epilogue_aux, fusedGrad.data(), s.batch, s.m,
                 s.n, s.k, ta, tb, shared, 0.0, TESSEL_EPILOGUE_DGELU,
                 static_cast<const void *>(nullptr), pre0.data());
            EXPECT_EQ(fusedGrad, grad);
          }
}

// Against double loops: f64 to 1e-12 of the magnitudes, f32 to its rounding
// (the fast tanh and exp of the f32 kernels are within a few ulps).
TEST_F(MatmulEpilogueTest, GeluEpiloguesMatchDoubleLoops) {
  const int64_t m = 9, n = 24, k = 31;
  for (int32_t dtype : {TESSEL_F64, TESSEL_F32}) {
    SCOPED_TRACE(dtypeName(dtype));
    auto a = randomValues(dtype, size_t(m * k), -1, 1, 11);
    auto b = randomValues(dtype, size_t(k * n), -1, 1, 12);
    auto bias = randomValues(dtype, size_t(n), -1, 1, 13);
    auto pre = randomValues(dtype, size_t(m * n), -4, 4, 14);
    auto ab = encode(dtype, a), bb = encode(dtype, b);
    auto biasBytes = encode(dtype, bias), preBytes = encode(dtype, pre);
    std::vector<uint8_t> c(preBytes.size()), aux(preBytes.size()),
        dc(preBytes.size());
    tessel_matmul_epilogue_aux(ctx, dtype, ab.data(), bb.data(), c.data(), 1, m,
                               n, k, 0, 0, 0, 0.0, TESSEL_EPILOGUE_GELU_BIAS,
                               biasBytes.data(), aux.data());
    tessel_matmul_epilogue_aux(ctx, dtype, ab.data(), bb.data(), dc.data(), 1,
                               m, n, k, 0, 0, 0, 0.0, TESSEL_EPILOGUE_DGELU,
                               nullptr, preBytes.data());
    ASSERT_EQ(tessel_error(ctx), nullptr) << tessel_error(ctx);
    auto got = decode(dtype, c), gotAux = decode(dtype, aux),
         gotGrad = decode(dtype, dc);
    const double tol = dtype == TESSEL_F64 ? 1e-12 : 4e-6;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double product = 0, magnitude = 0;
        for (int64_t l = 0; l < k; ++l) {
          product += a[size_t(i * k + l)] * b[size_t(l * n + j)];
          magnitude += std::fabs(a[size_t(i * k + l)] * b[size_t(l * n + j)]);
        }
        size_t at = size_t(i * n + j);
        double x = product + bias[size_t(j)];
        double scale = magnitude + std::fabs(bias[size_t(j)]) + 1;
        EXPECT_NEAR(gotAux[at], x, tol * scale) << at;
        EXPECT_NEAR(got[at], geluTanh(x), 1.2 * tol * scale) << at;
        EXPECT_NEAR(gotGrad[at], product * geluTanhGrad(pre[at]),
                    1.2 * tol * (magnitude + 1)) << at;
      }
  }
}

// The GELU epilogues' refusals: beta 1, DGELU without its input, aux with
// an epilogue that has none, aux overlapping C.
TEST_F(MatmulEpilogueTest, GeluEpilogueMisuseSetsErrors) {
  std::vector<float> a(4, 1), b(4, 1), c(4, 0), bias(2, 1), aux(4, 0);
  struct Case {
    double beta;
    int32_t epilogue;
    const float *bias;
    float *aux;
    const char *message;
  } cases[] = {
      {1.0, TESSEL_EPILOGUE_GELU_BIAS, bias.data(), aux.data(),
       "tessel_matmul_epilogue_aux: the GELU epilogues take beta 0, got 1"},
      {0.0, TESSEL_EPILOGUE_DGELU, nullptr, nullptr,
       "tessel_matmul_epilogue_aux: null aux (the GELU's input) with the "
       "DGELU epilogue"},
      {0.0, TESSEL_EPILOGUE_GELU_BIAS, nullptr, aux.data(),
       "tessel_matmul_epilogue_aux: null bias"},
      {0.0, TESSEL_EPILOGUE_BIAS, bias.data(), aux.data(),
       "tessel_matmul_epilogue_aux: aux with an epilogue that neither writes "
       "nor reads it"},
      {0.0, TESSEL_EPILOGUE_DGELU, nullptr, c.data() + 1,
       "tessel_matmul_epilogue_aux: aux overlaps the output"},
      {0.0, 5, nullptr, nullptr,
       "tessel_matmul_epilogue_aux: unknown epilogue 5"},
  };
  for (const Case &t : cases) {
    tessel_matmul_epilogue_aux(ctx, TESSEL_F32, a.data(), b.data(), c.data(),
                               1, 2, 2, 2, 0, 0, 0, t.beta, t.epilogue, t.bias,
                               t.aux);
    ASSERT_NE(tessel_error(ctx), nullptr) << t.message;
    EXPECT_STREQ(tessel_error(ctx), t.message);
    tessel_clear_error(ctx);
  }
  // tessel_matmul_epilogue has no aux: its DGELU cannot run.
  tessel_matmul_epilogue(ctx, TESSEL_F32, a.data(), b.data(), c.data(), 1, 2, 2,
                         2, 0, 0, 0, 0.0, TESSEL_EPILOGUE_DGELU, nullptr);
  EXPECT_STREQ(tessel_error(ctx),
               "tessel_matmul_epilogue: null aux (the GELU's input) with the "
               "DGELU epilogue");
  tessel_clear_error(ctx);
  EXPECT_EQ(c, std::vector<float>(4, 0.0f));
}

// The bias-gradient epilogue is the GEMM (beta 0 or 1) and tessel_reduce's
// sum of op(B)'s rows, bit for bit in every dtype, B stored either way; the
// bias gradient is overwritten with beta 1 too.
TEST_F(MatmulEpilogueTest, BiasGradEpilogueEqualsTheUnfusedOps) {
  const int64_t m = 12, n = 20, k = 33;
  for (int32_t dtype : kFloatTypes)
    for (int ta : {0, 1})
      for (int tb : {0, 1})
        for (int beta : {0, 1}) {
          SCOPED_TRACE(describe(dtype, Shape{1, m, n, k}, ta, tb, 0, beta, 0));
          auto a = encode(dtype, randomValues(dtype, size_t(m * k), -1, 1, 21));
          auto b = encode(dtype, randomValues(dtype, size_t(k * n), -1, 1, 22));
          auto c0 = encode(dtype, randomValues(dtype, size_t(m * n), -1, 1, 23));
          auto stale = encode(dtype, randomValues(dtype, size_t(n), -9, 9, 24));
          std::vector<uint8_t> unfused = c0, fused = c0, sums(stale.size()),
                               grad = stale;
          tessel_matmul_epilogue(ctx, dtype, a.data(), b.data(), unfused.data(),
                                 1, m, n, k, ta, tb, 0, double(beta),
                                 TESSEL_EPILOGUE_NONE, nullptr);
          const int64_t shape[2] = {tb ? n : k, tb ? k : n};
          tessel_reduce(ctx, TESSEL_REDUCE_SUM, dtype, b.data(), sums.data(), 2,
                        shape, tb ? 0b10 : 0b01);
          tessel_matmul_epilogue_aux(ctx, dtype, a.data(), b.data(),
                                     fused.data(), 1, m, n, k, ta, tb, 0,
                                     double(beta), TESSEL_EPILOGUE_BGRADB,
                                     nullptr, grad.data());
          ASSERT_EQ(tessel_error(ctx), nullptr) << tessel_error(ctx);
          EXPECT_EQ(fused, unfused);
          EXPECT_EQ(grad, sums);
        }
  // Against double loops in f64: dW = Xᵀ·dY, db = Σ rows of dY.
  auto x = randomValues(TESSEL_F64, size_t(k * m), -1, 1, 25);
  auto dy = randomValues(TESSEL_F64, size_t(k * n), -1, 1, 26);
  std::vector<double> dw(static_cast<size_t>(m * n)),
      db(static_cast<size_t>(n));
  tessel_matmul_epilogue_aux(ctx, TESSEL_F64, x.data(), dy.data(), dw.data(), 1,
                             m, n, k, 1, 0, 0, 0.0, TESSEL_EPILOGUE_BGRADB,
                             nullptr, db.data());
  ASSERT_EQ(tessel_error(ctx), nullptr);
  for (int64_t j = 0; j < n; ++j) {
    double want = 0;
    for (int64_t r = 0; r < k; ++r)
      want += dy[size_t(r * n + j)];
    EXPECT_NEAR(db[size_t(j)], want, 1e-13) << j;
    for (int64_t i = 0; i < m; ++i) {
      double w = 0;
      for (int64_t r = 0; r < k; ++r)
        w += x[size_t(r * m + i)] * dy[size_t(r * n + j)];
      EXPECT_NEAR(dw[size_t(i * n + j)], w, 1e-13) << i << "," << j;
    }
  }
}

// The bias-gradient epilogue's refusals: no aux, a batch, aux over C.
TEST_F(MatmulEpilogueTest, BiasGradEpilogueMisuseSetsErrors) {
  std::vector<float> a(8, 1), b(8, 1), c(8, 0), grad(2, 0);
  struct Case {
    int64_t batch, k;
    float *aux;
    const char *message;
  } cases[] = {
      {1, 2, nullptr,
       "tessel_matmul_epilogue_aux: null aux (the bias gradient) with the "
       "BGRADB epilogue"},
      {2, 1, grad.data(),
       "tessel_matmul_epilogue_aux: the BGRADB epilogue on a batch of 2 (one "
       "GEMM only)"},
      {1, 2, c.data() + 3,
       "tessel_matmul_epilogue_aux: aux overlaps the output"},
  };
  for (const Case &t : cases) {
    tessel_matmul_epilogue_aux(ctx, TESSEL_F32, a.data(), b.data(), c.data(),
                               t.batch, 2, 2, t.k, 0, 0, 0, 0.0,
                               TESSEL_EPILOGUE_BGRADB, nullptr, t.aux);
    EXPECT_STREQ(tessel_error(ctx), t.message);
    tessel_clear_error(ctx);
  }
  EXPECT_EQ(c, std::vector<float>(8, 0.0f));
  EXPECT_EQ(grad, std::vector<float>(2, 0.0f));
}

// tessel_matmul_accumulate_f32 and tessel_matmul_f32 on the CPU are the
// unfused ops' arithmetic: 16-bit A and B (small integers, exact in bf16
// and f16, so every product and sum is exact before the rounding) give C +
// round(A·B), or round(A·B) over a C of NaNs that is never read, with the
// product rounded to the dtype, and BGRADB the column sums rounded to the
// dtype, against double loops rounded by the test's own encoder; every
// transpose, a shared B, a batch.
TEST_F(MatmulEpilogueTest, MatmulF32MatchesLoops) {
  const Shape shapes[] = {{1, 7, 13, 5}, {3, 4, 6, 9}, {1, 9, 11, 300}};
  std::mt19937 gen(5);
  auto ints = [&](size_t count, int span) {
    std::vector<double> v(count);
    for (double &x : v)
      x = double(int(gen() % unsigned(2 * span + 1)) - span);
    return v;
  };
  for (int32_t dtype : {TESSEL_BF16, TESSEL_F16})
    for (const Shape &s : shapes)
      for (int ta : {0, 1})
        for (int tb : {0, 1})
          for (int shared : {0, 1})
            for (int bgrad : {0, 1})
              for (int accumulate : {0, 1}) {
                if (bgrad && s.batch != 1)
                  continue;
                SCOPED_TRACE(
                    describe(dtype, s, ta, tb, shared, accumulate, bgrad));
                int64_t bb = shared ? 1 : s.batch;
                std::vector<double> a = ints(size_t(s.batch * s.m * s.k), 3),
                                    b = ints(size_t(bb * s.k * s.n), 3);
                std::vector<float> c(size_t(s.batch * s.m * s.n));
                for (float &x : c)
                  x = accumulate ? float(int(gen() % 201) - 100) / 8.0f
                                 : std::numeric_limits<float>::quiet_NaN();
                std::vector<double> product(c.size()), sums(size_t(s.n));
                for (int64_t p = 0; p < s.batch; ++p)
                  for (int64_t i = 0; i < s.m; ++i)
                    for (int64_t j = 0; j < s.n; ++j)
                      for (int64_t r = 0; r < s.k; ++r) {
                        double x = a[size_t(p * s.m * s.k +
                                            (ta ? r * s.m + i : i * s.k + r))];
                        double y = b[size_t((shared ? 0 : p * s.k * s.n) +
                                            (tb ? j * s.k + r : r * s.n + j))];
                        product[size_t((p * s.m + i) * s.n + j)] += x * y;
                        if (p == 0 && i == 0)
                          sums[size_t(j)] += y;
                      }
                auto rounded = [&](const std::vector<double> &v) {
                  return decode(dtype, encode(dtype, v).data(), v.size());
                };
                std::vector<double> want(c.size()), wantSums = rounded(sums);
                std::vector<double> roundedProduct = rounded(product);
                for (size_t i = 0; i < c.size(); ++i)
                  want[i] = accumulate ? double(c[i] + float(roundedProduct[i]))
                                       : roundedProduct[i];
                std::vector<float> grad(size_t(s.n), 7.0f);
                auto ea = encode(dtype, a), eb = encode(dtype, b);
                (accumulate ? tessel_matmul_accumulate_f32 : tessel_matmul_f32)(
                    ctx, dtype, ea.data(), eb.data(), c.data(), s.batch, s.m,
                    s.n, s.k, ta, tb, shared,
                    bgrad ? TESSEL_EPILOGUE_BGRADB : TESSEL_EPILOGUE_NONE,
                    bgrad ? grad.data() : nullptr);
                ASSERT_EQ(tessel_error(ctx), nullptr) << tessel_error(ctx);
                EXPECT_EQ(std::vector<double>(c.begin(), c.end()), want);
                if (bgrad)
                  EXPECT_EQ(std::vector<double>(grad.begin(), grad.end()),
                            wantSums);
              }
}

// tessel_matmul_f32 of an empty sum (K = 0) writes zeros over C, never
// read; tessel_matmul_accumulate_f32 leaves C as it was.
TEST_F(MatmulEpilogueTest, MatmulF32OfEmptySumIsZero) {
  std::vector<float> c(6, std::numeric_limits<float>::quiet_NaN());
  tessel_matmul_f32(ctx, TESSEL_BF16, nullptr, nullptr, c.data(), 1, 2, 3, 0, 0,
                    0, 0, TESSEL_EPILOGUE_NONE, nullptr);
  ASSERT_EQ(tessel_error(ctx), nullptr) << tessel_error(ctx);
  EXPECT_EQ(c, std::vector<float>(6, 0.0f));
  std::fill(c.begin(), c.end(), 2.5f);
  tessel_matmul_accumulate_f32(ctx, TESSEL_F16, nullptr, nullptr, c.data(), 1,
                               2, 3, 0, 0, 0, 0, TESSEL_EPILOGUE_NONE, nullptr);
  ASSERT_EQ(tessel_error(ctx), nullptr) << tessel_error(ctx);
  EXPECT_EQ(c, std::vector<float>(6, 2.5f));
}

// The refusals of tessel_matmul_accumulate_f32 and tessel_matmul_f32 (an
// f32 or f64 GEMM, an epilogue other than BGRADB) and those of the matmul
// epilogues they share (aux over C, BGRADB on a batch), each naming its
// entry; nothing is written.
TEST_F(MatmulEpilogueTest, MatmulF32MisuseSetsErrors) {
  std::vector<uint16_t> a(8, 0x3f80), b(8, 0x3f80); // bf16 ones
  std::vector<float> c(8, 0.0f), grad(2, 0.0f);
  struct Case {
    int32_t dtype, epilogue;
    int64_t batch;
    float *aux;
    const char *message;
  } cases[] = {
      {TESSEL_F32, TESSEL_EPILOGUE_NONE, 1, nullptr, ": unsupported dtype 0"},
      {TESSEL_F64, TESSEL_EPILOGUE_NONE, 1, nullptr, ": unsupported dtype 3"},
      {TESSEL_BF16, TESSEL_EPILOGUE_BIAS, 1, nullptr,
       ": epilogue 1 (expected none or BGRADB)"},
      {TESSEL_BF16, TESSEL_EPILOGUE_BGRADB, 1, c.data() + 3,
       ": aux overlaps the output"},
      {TESSEL_BF16, TESSEL_EPILOGUE_BGRADB, 2, grad.data(),
       ": the BGRADB epilogue on a batch of 2 (one GEMM only)"},
  };
  using Entry = decltype(&tessel_matmul_f32);
  const std::pair<Entry, std::string> entries[] = {
      {tessel_matmul_accumulate_f32, "tessel_matmul_accumulate_f32"},
      {tessel_matmul_f32, "tessel_matmul_f32"}};
  for (const auto &[entry, name] : entries)
    for (const Case &t : cases) {
      entry(ctx, t.dtype, a.data(), b.data(), c.data(), t.batch, 2, 2, 1, 0, 0,
            0, t.epilogue, t.aux);
      EXPECT_EQ(std::string(tessel_error(ctx) ? tessel_error(ctx) : ""),
                name + t.message);
      tessel_clear_error(ctx);
    }
  EXPECT_EQ(c, std::vector<float>(8, 0.0f));
  EXPECT_EQ(grad, std::vector<float>(2, 0.0f));
}

} // namespace
