//===- InitTest.cpp - Counter-based parameter initialisation --------------===//

#include "TestUtil.h"

using namespace tt;

namespace {

using InitTest = RuntimeTest;

std::vector<double> initValues(tessel_ctx *ctx, int32_t dtype, int64_t first,
                               int64_t count, int32_t kind,
                               std::vector<double> args, uint64_t seed,
                               const char *name) {
  std::vector<uint8_t> buf(static_cast<size_t>(count * tessel_dtype_size(dtype)));
  tessel_init_param(ctx, buf.data(), dtype, first, count, kind, args.data(),
                    seed, name);
  return decode(dtype, buf);
}

const int32_t kRandomKinds[] = {TESSEL_INIT_NORMAL,
                                TESSEL_INIT_TRUNCATED_NORMAL,
                                TESSEL_INIT_UNIFORM};

// Element i is the same whether the parameter is filled whole or in odd
// chunks, as every sharding of it would.
TEST_F(InitTest, IndependentOfChunking) {
  const int64_t n = 1009;
  for (int32_t dtype : {TESSEL_F32, TESSEL_BF16, TESSEL_F64}) {
    for (int32_t kind : kRandomKinds) {
      SCOPED_TRACE(std::string(dtypeName(dtype)) + " kind " +
                   std::to_string(kind));
      std::vector<double> args = {0.5, 0.25};
      std::vector<double> whole =
          initValues(ctx, dtype, 0, n, kind, args, 42, "layer.w");
      std::vector<double> pieced;
      for (int64_t first = 0, step = 1; first < n; first += step, step += 6) {
        int64_t count = std::min(step, n - first);
        std::vector<double> part =
            initValues(ctx, dtype, first, count, kind, args, 42, "layer.w");
        pieced.insert(pieced.end(), part.begin(), part.end());
      }
      expectClose(pieced, whole, 0.0, 0.0);
      // And the same again on a second call.
      expectClose(initValues(ctx, dtype, 0, n, kind, args, 42, "layer.w"),
                  whole, 0.0, 0.0);
    }
  }
}

// Every dtype stores the correctly rounded value of the same f64 draw.
TEST_F(InitTest, DtypesAgreeUpToRounding) {
  std::vector<double> args = {0.02, 0.0};
  std::vector<double> ref = initValues(ctx, TESSEL_F64, 5, 513,
                                       TESSEL_INIT_NORMAL, args, 3, "emb");
  for (int32_t dtype : {TESSEL_F32, TESSEL_F16, TESSEL_BF16}) {
    std::vector<double> got =
        initValues(ctx, dtype, 5, 513, TESSEL_INIT_NORMAL, args, 3, "emb");
    for (size_t i = 0; i < ref.size(); ++i)
      ASSERT_EQ(got[i], quantize(dtype, ref[i])) << dtypeName(dtype) << i;
  }
}

TEST_F(InitTest, NamesAndSeedsGiveDifferentStreams) {
  std::vector<double> args = {1.0, 0.0};
  auto a = initValues(ctx, TESSEL_F32, 0, 257, TESSEL_INIT_NORMAL, args, 1,
                      "block.0.w");
  auto b = initValues(ctx, TESSEL_F32, 0, 257, TESSEL_INIT_NORMAL, args, 1,
                      "block.1.w");
  auto c = initValues(ctx, TESSEL_F32, 0, 257, TESSEL_INIT_NORMAL, args, 2,
                      "block.0.w");
  int sameAB = 0, sameAC = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    sameAB += a[i] == b[i];
    sameAC += a[i] == c[i];
  }
  EXPECT_EQ(sameAB, 0);
  EXPECT_EQ(sameAC, 0);
}

TEST_F(InitTest, NormalStatistics) {
  const int64_t n = 100000;
  const double stdv = 2.0, mean = 0.5;
  auto v = initValues(ctx, TESSEL_F64, 0, n, TESSEL_INIT_NORMAL, {stdv, mean},
                      1234, "w");
  double s = 0, s2 = 0, s4 = 0;
  for (double x : v)
    s += x;
  double m = s / n;
  for (double x : v) {
    s2 += (x - m) * (x - m);
    s4 += std::pow((x - mean) / stdv, 4);
  }
  double sd = std::sqrt(s2 / n);
  // Bounds at ~5 sigma: sd(mean) = std/sqrt(n), sd(std) ≈ std/sqrt(2n).
  EXPECT_NEAR(m, mean, 5 * stdv / std::sqrt(double(n)));
  EXPECT_NEAR(sd, stdv, 5 * stdv / std::sqrt(2.0 * n));
  EXPECT_NEAR(s4 / n, 3.0, 0.15); // Kurtosis of a normal.
  // The fraction beyond 2 std of a normal is 4.55%.
  int beyond = 0;
  for (double x : v)
    beyond += std::fabs(x - mean) > 2 * stdv;
  EXPECT_NEAR(double(beyond) / n, 0.0455, 0.004);
}

TEST_F(InitTest, TruncatedNormalStaysWithinTwoStd) {
  const int64_t n = 100000;
  const double stdv = 0.02, mean = -1.0;
  auto v = initValues(ctx, TESSEL_F64, 0, n, TESSEL_INIT_TRUNCATED_NORMAL,
                      {stdv, mean}, 99, "w");
  double s = 0, s2 = 0;
  for (double x : v) {
    ASSERT_LE(std::fabs(x - mean), 2 * stdv * (1 + 1e-12));
    s += x;
  }
  double m = s / n;
  for (double x : v)
    s2 += (x - m) * (x - m);
  // A standard normal cut at ±2 has std 0.8796.
  EXPECT_NEAR(m, mean, 5 * stdv / std::sqrt(double(n)));
  EXPECT_NEAR(std::sqrt(s2 / n) / stdv, 0.8796, 0.01);
}

TEST_F(InitTest, UniformRangeAndMean) {
  const int64_t n = 100000;
  auto v = initValues(ctx, TESSEL_F64, 7, n, TESSEL_INIT_UNIFORM, {-3.0, 5.0},
                      5, "bias");
  double s = 0;
  for (double x : v) {
    ASSERT_GT(x, -3.0);
    ASSERT_LT(x, 5.0);
    s += x;
  }
  // Uniform(-3, 5) has mean 1 and std 8/sqrt(12).
  EXPECT_NEAR(s / n, 1.0, 5 * (8 / std::sqrt(12.0)) / std::sqrt(double(n)));
}

TEST_F(InitTest, ConstantKinds) {
  for (int32_t dtype : kAllTypes) {
    SCOPED_TRACE(dtypeName(dtype));
    EXPECT_EQ(initValues(ctx, dtype, 3, 13, TESSEL_INIT_ZEROS, {0}, 1, "z"),
              std::vector<double>(13, 0.0));
    EXPECT_EQ(initValues(ctx, dtype, 3, 13, TESSEL_INIT_ONES, {0}, 1, "o"),
              std::vector<double>(13, 1.0));
    EXPECT_EQ(initValues(ctx, dtype, 0, 7, TESSEL_INIT_CONSTANT, {3.0}, 1, "c"),
              std::vector<double>(7, 3.0));
  }
}

TEST_F(InitTest, BadKindSetsError) {
  float x[3];
  tessel_init_param(ctx, x, TESSEL_F32, 0, 3, 17, nullptr, 0, "w");
  EXPECT_NE(tessel_error(ctx), nullptr);
  tessel_clear_error(ctx);
  double args[2] = {1, 0};
  int32_t ints[3];
  tessel_init_param(ctx, ints, TESSEL_I32, 0, 3, TESSEL_INIT_NORMAL, args, 0,
                    "w");
  EXPECT_NE(tessel_error(ctx), nullptr);
  tessel_clear_error(ctx);
}

} // namespace
