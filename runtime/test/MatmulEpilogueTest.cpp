//===- MatmulEpilogueTest.cpp - tessel_matmul_epilogue against loops ------===//
//
// C = op(A)·op(B) + beta·C (+ bias) checked against a double reference for
// every float dtype, transpose, shared B, beta 0 and 1 and both epilogues;
// and the front's refusals.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

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

} // namespace
