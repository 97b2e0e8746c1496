//===- ElementwiseTest.cpp - Binary, unary and dropout kernels ------------===//

#include "TestUtil.h"

#include <set>

using namespace tt;

namespace {

using ElementwiseTest = RuntimeTest;

const int64_t kSizes[] = {1, 7, 13, 1000};

double refBinary(int32_t op, double a, double b) {
  switch (op) {
  case TESSEL_ADD:
    return a + b;
  case TESSEL_SUB:
    return a - b;
  case TESSEL_MUL:
    return a * b;
  default:
    return a / b;
  }
}

TEST_F(ElementwiseTest, BinaryMatchesReference) {
  for (int32_t dtype : kAllTypes) {
    for (int32_t op : {TESSEL_ADD, TESSEL_SUB, TESSEL_MUL, TESSEL_DIV}) {
      for (int64_t n : kSizes) {
        SCOPED_TRACE(std::string(dtypeName(dtype)) + " op " +
                     std::to_string(op) + " n " + std::to_string(n));
        auto a = randomValues(dtype, size_t(n), -50, 50, 11 + n);
        auto b = randomValues(dtype, size_t(n), 1, 20, 12 + n);
        // Divisors of both signs, never zero.
        for (size_t i = 0; i < b.size(); i += 2)
          b[i] = -b[i];
        auto ab = encode(dtype, a), bb = encode(dtype, b);
        std::vector<uint8_t> out(ab.size());
        tessel_binary(ctx, op, dtype, ab.data(), bb.data(), out.data(), n);
        std::vector<double> ref(static_cast<size_t>(n));
        for (size_t i = 0; i < ref.size(); ++i) {
          double r = refBinary(op, a[i], b[i]);
          ref[i] = isInt(dtype) ? std::trunc(r) : r;
        }
        // One rounding of the exact result into the dtype.
        expectClose(decode(dtype, out), ref, isInt(dtype) ? 0 : eps(dtype),
                    isInt(dtype) ? 0 : 1e-300);
      }
    }
  }
}

// Tests that TESSEL_EQUAL gives 1 exactly where the stored values are equal
// (every other element equal, the others one step apart; NaN equals
// nothing), also in place (out == a).
TEST_F(ElementwiseTest, EqualMatchesReference) {
  for (int32_t dtype : kAllTypes) {
    for (int64_t n : kSizes) {
      SCOPED_TRACE(std::string(dtypeName(dtype)) + " n " + std::to_string(n));
      auto a = randomValues(dtype, size_t(n), -50, 50, 21 + n);
      std::vector<double> b = a;
      for (size_t i = 1; i < b.size(); i += 2)
        b[i] = quantize(dtype, b[i] + 1);
      if (!isInt(dtype) && n > 2)
        a[2] = b[2] = NAN;
      auto ab = encode(dtype, a), bb = encode(dtype, b);
      std::vector<uint8_t> out(ab.size());
      tessel_binary(ctx, TESSEL_EQUAL, dtype, ab.data(), bb.data(), out.data(),
                    n);
      std::vector<double> ref(a.size());
      for (size_t i = 0; i < ref.size(); ++i)
        ref[i] = a[i] == b[i] ? 1 : 0;
      expectClose(decode(dtype, out), ref, 0, 0);
      tessel_binary(ctx, TESSEL_EQUAL, dtype, ab.data(), bb.data(), ab.data(),
                    n);
      expectClose(decode(dtype, ab), ref, 0, 0);
    }
  }
  EXPECT_EQ(tessel_error(ctx), nullptr);
}

// Tests that an op code past TESSEL_EQUAL records an error.
TEST_F(ElementwiseTest, UnknownBinaryOpSetsError) {
  float a[1] = {1}, b[1] = {1}, c[1] = {7};
  tessel_binary(ctx, TESSEL_EQUAL + 1, TESSEL_F32, a, b, c, 1);
  EXPECT_NE(tessel_error(ctx), nullptr);
  tessel_clear_error(ctx);
}

TEST_F(ElementwiseTest, IntegerDivisionByZeroSetsError) {
  int32_t a[3] = {6, 7, 8}, b[3] = {3, 0, -4}, c[3];
  tessel_binary(ctx, TESSEL_DIV, TESSEL_I32, a, b, c, 3);
  EXPECT_NE(tessel_error(ctx), nullptr);
  EXPECT_EQ(c[0], 2);
  EXPECT_EQ(c[1], 0);
  EXPECT_EQ(c[2], -2);
  tessel_clear_error(ctx);
}

/// b broadcast to [rows, cols] by tessel_strided_copy (stride 0): what a
/// model copied out before ABI 17's tessel_binary_broadcast.
std::vector<uint8_t> broadcastCopy(tessel_ctx *ctx, int32_t dtype,
                                   const std::vector<uint8_t> &b, int64_t rows,
                                   int64_t cols, bool perRow) {
  std::vector<uint8_t> out(size_t(rows * cols) * tessel_dtype_size(dtype));
  const int64_t shape[2] = {rows, cols};
  const int64_t inStrides[2] = {perRow ? 1 : 0, perRow ? 0 : 1};
  const int64_t outStrides[2] = {cols, 1};
  tessel_strided_copy(ctx, dtype, b.data(), out.data(), 2, shape, inStrides,
                      outStrides);
  return out;
}

// Tests that tessel_binary_broadcast equals the broadcast copied out and
// tessel_binary, bit for bit: every op and dtype, b per column and per row,
// b the left or the right operand, also in place (out == a).
TEST_F(ElementwiseTest, BinaryBroadcastIsCopyThenBinary) {
  const std::pair<int64_t, int64_t> shapes[] = {
      {1, 1}, {3, 7}, {5, 16}, {4, 1000}, {1000, 3}};
  for (int32_t dtype : kAllTypes)
    for (int32_t op = TESSEL_ADD; op <= TESSEL_EQUAL; ++op)
      for (auto [rows, cols] : shapes)
        for (int32_t layout = 0; layout < 4; ++layout) {
          const bool perRow = (layout & TESSEL_BROADCAST_ROWS) != 0;
          const bool bFirst = (layout & TESSEL_BROADCAST_B_FIRST) != 0;
          SCOPED_TRACE(std::string(dtypeName(dtype)) + " op " +
                       std::to_string(op) + " [" + std::to_string(rows) + ", " +
                       std::to_string(cols) + "] layout " +
                       std::to_string(layout));
          // Divisors of both signs, never zero, on both sides.
          auto a = randomValues(dtype, size_t(rows * cols), 1, 50, 3 + rows);
          auto b = randomValues(dtype, size_t(perRow ? rows : cols), 1, 20,
                                5 + cols);
          for (size_t i = 0; i < a.size(); i += 3)
            a[i] = -a[i];
          for (size_t i = 0; i < b.size(); i += 2)
            b[i] = -b[i];
          // Equal pairs for TESSEL_EQUAL.
          a[0] = b[0];
          auto ab = encode(dtype, a), bb = encode(dtype, b);
          auto full = broadcastCopy(ctx, dtype, bb, rows, cols, perRow);
          std::vector<uint8_t> want(ab.size()), got(ab.size());
          tessel_binary(ctx, op, dtype, bFirst ? full.data() : ab.data(),
                        bFirst ? ab.data() : full.data(), want.data(),
                        rows * cols);
          tessel_binary_broadcast(ctx, op, dtype, ab.data(), bb.data(),
                                  got.data(), rows, cols, layout);
          ASSERT_EQ(tessel_error(ctx), nullptr) << tessel_error(ctx);
          EXPECT_EQ(got, want);
          tessel_binary_broadcast(ctx, op, dtype, ab.data(), bb.data(),
                                  ab.data(), rows, cols, layout);
          EXPECT_EQ(ab, want) << "in place";
        }
}

// Tests that tessel_binary_broadcast refuses an unknown op or layout, a
// negative or overflowing shape and an out over b, writing nothing; that an
// empty view does nothing; and that it reports an integer division by zero
// as tessel_binary does.
TEST_F(ElementwiseTest, BinaryBroadcastMisuseSetsErrors) {
  float a[6] = {1, 2, 3, 4, 5, 6}, b[3] = {1, 1, 1}, out[6] = {};
  const std::vector<float> aBefore(a, a + 6);
  struct Case {
    int32_t op, dtype;
    const float *b;
    float *out;
    int64_t rows;
    int32_t layout;
    const char *error;
  };
  const Case cases[] = {
      {9, TESSEL_F32, b, out, 2, 0, "unknown op 9"},
      {TESSEL_ADD, TESSEL_F32, b, out, 2, 4, "unknown layout 4"},
      {TESSEL_ADD, TESSEL_F32, b, out, -2, 0, "negative shape"},
      {TESSEL_ADD, TESSEL_F32, b, out, INT64_MAX, 0, "overflow"},
      {TESSEL_ADD, TESSEL_F32, b, out, int64_t(1) << 61, 0, "int64 bytes"},
      {TESSEL_ADD, 77, b, out, 2, 0, "dtype"},
      {TESSEL_ADD, TESSEL_F32, a + 1, a, 2, 0, "out overlaps b"},
  };
  for (const Case &c : cases) {
    tessel_binary_broadcast(ctx, c.op, c.dtype, a, c.b, c.out, c.rows, 3,
                            c.layout);
    ASSERT_NE(tessel_error(ctx), nullptr) << c.error;
    EXPECT_NE(std::string(tessel_error(ctx)).find(c.error), std::string::npos)
        << tessel_error(ctx);
    tessel_clear_error(ctx);
    EXPECT_EQ(std::vector<float>(out, out + 6), std::vector<float>(6, 0.0f))
        << c.error;
    EXPECT_EQ(std::vector<float>(a, a + 6), aBefore) << c.error;
  }
  tessel_binary_broadcast(ctx, TESSEL_ADD, TESSEL_F32, a, b, out, 0, 3, 0);
  EXPECT_EQ(tessel_error(ctx), nullptr);

  int32_t ia[4] = {6, 7, 8, 9}, ib[2] = {3, 0}, iout[4];
  tessel_binary_broadcast(ctx, TESSEL_DIV, TESSEL_I32, ia, ib, iout, 2, 2,
                          TESSEL_BROADCAST_COLS);
  ASSERT_NE(tessel_error(ctx), nullptr);
  EXPECT_STREQ(tessel_error(ctx),
               "tessel_binary_broadcast: integer division by zero");
  tessel_clear_error(ctx);
  EXPECT_EQ(std::vector<int32_t>(iout, iout + 4),
            (std::vector<int32_t>{2, 0, 2, 0}));
}

double refUnary(int32_t op, double x) {
  switch (op) {
  case TESSEL_NEG:
    return -x;
  case TESSEL_EXP:
    return std::exp(x);
  case TESSEL_LOG:
    return std::log(x);
  case TESSEL_SQRT:
    return std::sqrt(x);
  case TESSEL_RSQRT:
    return 1 / std::sqrt(x);
  case TESSEL_TANH:
    return std::tanh(x);
  case TESSEL_SIGMOID:
    return 1 / (1 + std::exp(-x));
  case TESSEL_RELU:
    return x > 0 ? x : 0;
  case TESSEL_GELU:
    return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
  case TESSEL_GELU_TANH:
    return 0.5 * x *
           (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
  default:
    return x / (1 + std::exp(-x));
  }
}

TEST_F(ElementwiseTest, UnaryMatchesReference) {
  for (int32_t dtype : kFloatTypes) {
    for (int32_t op = TESSEL_NEG; op <= TESSEL_SILU; ++op) {
      bool positive = op == TESSEL_LOG || op == TESSEL_SQRT ||
                      op == TESSEL_RSQRT;
      for (int64_t n : kSizes) {
        SCOPED_TRACE(std::string(dtypeName(dtype)) + " op " +
                     std::to_string(op) + " n " + std::to_string(n));
        auto x = randomValues(dtype, size_t(n), positive ? 0.01 : -6,
                              positive ? 30 : 6, 100 + op * 7 + n);
        auto xb = encode(dtype, x);
        std::vector<uint8_t> y(xb.size());
        tessel_unary(ctx, op, dtype, xb.data(), y.data(), n);
        std::vector<double> ref(x.size());
        for (size_t i = 0; i < x.size(); ++i)
          ref[i] = refUnary(op, x[i]);
        // The output rounding (one ulp for 16-bit results the f32 compute
        // may push across a rounding boundary) plus f32 libm error.
        double rtol = dtype == TESSEL_F64 ? 1e-13
                      : dtype == TESSEL_F32 ? 4e-6
                                           : eps(dtype) + 4e-6;
        double atol = dtype == TESSEL_F64 ? 1e-15 : 1e-6;
        expectClose(decode(dtype, y), ref, rtol, atol);
      }
    }
  }
}

// Sigmoid and SiLU must neither overflow nor produce NaN far out.
TEST_F(ElementwiseTest, SigmoidIsStableForLargeInputs) {
  float x[] = {-1000.f, -100.f, -88.5f, 88.5f, 100.f, 1000.f, -INFINITY,
               INFINITY};
  float y[8], z[8];
  tessel_unary(ctx, TESSEL_SIGMOID, TESSEL_F32, x, y, 8);
  tessel_unary(ctx, TESSEL_SILU, TESSEL_F32, x, z, 8);
  const double want[] = {0, 3.7200760e-44, 3.6723017e-39, 1, 1, 1, 0, 1};
  for (int i = 0; i < 8; ++i) {
    ASSERT_FALSE(std::isnan(y[i])) << i;
    EXPECT_NEAR(y[i], want[i], 1e-6 * want[i] + 1e-44) << i;
    if (std::isfinite(x[i]))
      EXPECT_NEAR(z[i], x[i] * want[i], 1e-4 * std::fabs(x[i] * want[i]) + 1e-40)
          << i;
  }
}

std::vector<double> runDropout(tessel_ctx *ctx, int32_t dtype,
                               const std::vector<double> &x, double rate,
                               uint64_t seed, uint64_t step, int64_t first) {
  auto xb = encode(dtype, x);
  std::vector<uint8_t> y(xb.size());
  tessel_dropout(ctx, dtype, xb.data(), y.data(), int64_t(x.size()), rate,
                 seed, step, first);
  return decode(dtype, y);
}

// Tests that each block of a [6, 10] tensor split 2 × 2 (a rank's part of
// a split dropout) draws, through the whole tensor's strides, exactly the
// bits of its elements in the whole tensor's dropout.
TEST_F(ElementwiseTest, DropoutBlocksAreBlocksOfTheWhole) {
  const int64_t rows = 6, cols = 10, first = 3 * rows * cols;
  auto x = randomValues(TESSEL_F32, size_t(rows * cols), 0.5, 2, 9);
  auto whole = runDropout(ctx, TESSEL_F32, x, 0.4, 21, 2, first);
  const int64_t shape[] = {rows / 2, cols / 2}, strides[] = {cols, 1};
  for (int64_t r = 0; r < 2; ++r)
    for (int64_t c = 0; c < 2; ++c) {
      std::vector<double> block;
      for (int64_t i = 0; i < shape[0]; ++i)
        for (int64_t j = 0; j < shape[1]; ++j)
          block.push_back(
              x[size_t((r * shape[0] + i) * cols + c * shape[1] + j)]);
      auto xb = encode(TESSEL_F32, block);
      std::vector<uint8_t> yb(xb.size());
      tessel_dropout_block(ctx, TESSEL_F32, xb.data(), yb.data(), 2, shape,
                           strides, 0.4, 21, 2,
                           first + r * shape[0] * cols + c * shape[1]);
      ASSERT_EQ(tessel_error(ctx), nullptr) << tessel_error(ctx);
      std::vector<double> y = decode(TESSEL_F32, yb), want;
      for (int64_t i = 0; i < shape[0]; ++i)
        for (int64_t j = 0; j < shape[1]; ++j)
          want.push_back(
              whole[size_t((r * shape[0] + i) * cols + c * shape[1] + j)]);
      expectClose(y, want, 0.0, 0.0);
    }
  const int64_t negative[] = {-1, 2};
  std::vector<uint8_t> buffer(64);
  tessel_dropout_block(ctx, TESSEL_F32, buffer.data(), buffer.data(), 2,
                       negative, strides, 0.4, 21, 2, 0);
  ASSERT_NE(tessel_error(ctx), nullptr);
  EXPECT_NE(std::string(tessel_error(ctx)).find("negative shape"),
            std::string::npos);
  tessel_clear_error(ctx);
}

// Tests that tessel_set_dropout(ctx, 0) (evaluation) makes every dropout,
// whole or block, explicit step or current, the identity, still checking
// its arguments, and that 1 draws the masks again.
TEST_F(ElementwiseTest, DropoutOffIsTheIdentity) {
  const int64_t rows = 4, cols = 6;
  auto x = randomValues(TESSEL_F32, size_t(rows * cols), 0.5, 2, 29);
  auto xb = encode(TESSEL_F32, x);
  EXPECT_EQ(tessel_get_dropout(ctx), 1);
  tessel_set_dropout(ctx, 0);
  EXPECT_EQ(tessel_get_dropout(ctx), 0);
  const int64_t shape[] = {rows, cols}, strides[] = {cols, 1};
  std::vector<uint8_t> y(xb.size()), yCurrent(xb.size()), yBlock(xb.size());
  tessel_dropout(ctx, TESSEL_F32, xb.data(), y.data(), rows * cols, 0.5, 7, 3,
                 0);
  tessel_dropout_current(ctx, TESSEL_F32, xb.data(), yCurrent.data(),
                         rows * cols, 0.5, 7, 0);
  tessel_dropout_block(ctx, TESSEL_F32, xb.data(), yBlock.data(), 2, shape,
                       strides, 0.5, 7, 3, 0);
  ASSERT_EQ(tessel_error(ctx), nullptr) << tessel_error(ctx);
  EXPECT_EQ(y, xb);
  EXPECT_EQ(yCurrent, xb);
  EXPECT_EQ(yBlock, xb);
  tessel_dropout(ctx, TESSEL_F32, xb.data(), y.data(), rows * cols, 1.5, 7, 3,
                 0);
  ASSERT_NE(tessel_error(ctx), nullptr);
  tessel_clear_error(ctx);
  tessel_set_dropout(ctx, 1);
  tessel_dropout(ctx, TESSEL_F32, xb.data(), y.data(), rows * cols, 0.5, 7, 3,
                 0);
  EXPECT_EQ(decode(TESSEL_F32, y),
            runDropout(ctx, TESSEL_F32, x, 0.5, 7, 3, 0));
  EXPECT_NE(y, xb);
}

// Tests that the _current entries draw the masks of the context's step
// (tessel_set_step), whole and block, exactly as the explicit entries do
// with that step, and that another step draws another mask.
TEST_F(ElementwiseTest, CurrentDropoutDrawsTheContextsStep) {
  const int64_t rows = 4, cols = 6, first = 5 * rows * cols;
  auto x = randomValues(TESSEL_F32, size_t(rows * cols), 0.5, 2, 19);
  auto xb = encode(TESSEL_F32, x);
  std::vector<std::vector<uint8_t>> masks;
  for (uint64_t step : {3u, 4u}) {
    tessel_set_step(ctx, step);
    std::vector<uint8_t> y(xb.size()), yBlock(xb.size());
    tessel_dropout_current(ctx, TESSEL_F32, xb.data(), y.data(), rows * cols,
                           0.5, 7, first);
    const int64_t shape[] = {rows, cols}, strides[] = {cols, 1};
    tessel_dropout_block_current(ctx, TESSEL_F32, xb.data(), yBlock.data(), 2,
                                 shape, strides, 0.5, 7, first);
    ASSERT_EQ(tessel_error(ctx), nullptr) << tessel_error(ctx);
    EXPECT_EQ(decode(TESSEL_F32, y),
              runDropout(ctx, TESSEL_F32, x, 0.5, 7, step, first));
    EXPECT_EQ(yBlock, y);
    masks.push_back(y);
  }
  EXPECT_NE(masks[0], masks[1]);
  std::vector<uint8_t> y(xb.size());
  tessel_dropout_current(ctx, TESSEL_F32, xb.data(), y.data(), rows * cols,
                         1.5, 7, 0);
  ASSERT_NE(tessel_error(ctx), nullptr);
  EXPECT_NE(std::string(tessel_error(ctx)).find("tessel_dropout_current: rate"),
            std::string::npos)
      << tessel_error(ctx);
  tessel_clear_error(ctx);
}

TEST_F(ElementwiseTest, DropoutIsIndependentOfChunking) {
  const size_t n = 1013;
  for (int32_t dtype : {TESSEL_F32, TESSEL_BF16}) {
    SCOPED_TRACE(dtypeName(dtype));
    auto x = randomValues(dtype, n, 0.5, 2, 8);
    auto whole = runDropout(ctx, dtype, x, 0.3, 77, 5, 0);
    std::vector<double> pieced;
    for (size_t first = 0, step = 1; first < n; first += step, step += 4) {
      size_t count = std::min(step, n - first);
      std::vector<double> part(x.begin() + long(first),
                               x.begin() + long(first + count));
      auto y = runDropout(ctx, dtype, part, 0.3, 77, 5, int64_t(first));
      pieced.insert(pieced.end(), y.begin(), y.end());
    }
    expectClose(pieced, whole, 0.0, 0.0);
    // Kept elements are x / (1 - rate) (computed as x · f32(1 / 0.7), so
    // within an ulp), dropped ones 0.
    for (size_t i = 0; i < n; ++i)
      if (whole[i] != 0)
        EXPECT_NEAR(whole[i], x[i] / 0.7, eps(dtype) * x[i] / 0.7) << i;
    // Another step draws another mask.
    auto next = runDropout(ctx, dtype, x, 0.3, 77, 6, 0);
    EXPECT_NE(next, whole);
  }
}

// A repeated layer's random stream (tessel_fold_in of its caller's and the
// layer, for two levels of nesting) is distinct from the others and draws a
// mask of its own; setting the stream back draws the first mask again.
TEST_F(ElementwiseTest, DropoutStreamsDrawTheirOwnMasks) {
  auto x = randomValues(TESSEL_F32, 4096, 0.5, 2, 3);
  ASSERT_EQ(tessel_get_rng_stream(ctx), 0u);
  auto outside = runDropout(ctx, TESSEL_F32, x, 0.5, 9, 1, 0);
  std::vector<uint64_t> streams;
  for (uint64_t caller : {uint64_t(0), tessel_fold_in(0, 1)})
    for (int64_t layer = 0; layer < 3; ++layer)
      streams.push_back(tessel_fold_in(caller, layer));
  EXPECT_EQ(std::set<uint64_t>(streams.begin(), streams.end()).size(),
            streams.size());
  EXPECT_EQ(tessel_fold_in(streams[4], 2), tessel_fold_in(streams[4], 2));
  std::vector<std::vector<double>> masks{outside};
  for (uint64_t stream : streams) {
    EXPECT_NE(stream, 0u);
    tessel_set_rng_stream(ctx, stream);
    EXPECT_EQ(tessel_get_rng_stream(ctx), stream);
    masks.push_back(runDropout(ctx, TESSEL_F32, x, 0.5, 9, 1, 0));
  }
  // Each pair of masks agrees on about half the elements, not all.
  for (size_t a = 0; a < masks.size(); ++a)
    for (size_t b = a + 1; b < masks.size(); ++b) {
      size_t same = 0;
      for (size_t i = 0; i < x.size(); ++i)
        same += (masks[a][i] == 0) == (masks[b][i] == 0);
      EXPECT_NEAR(double(same) / double(x.size()), 0.5, 0.05) << a << " " << b;
    }
  tessel_set_rng_stream(ctx, 0);
  EXPECT_EQ(runDropout(ctx, TESSEL_F32, x, 0.5, 9, 1, 0), outside);
}

TEST_F(ElementwiseTest, DropoutKeepsExpectedFraction) {
  const size_t n = 100000;
  std::vector<double> ones(n, 1.0);
  for (double rate : {0.1, 0.5, 0.9}) {
    auto y = runDropout(ctx, TESSEL_F32, ones, rate, 3, 0, 0);
    size_t kept = 0;
    for (double v : y)
      kept += v != 0;
    double p = 1 - rate;
    // 5 sigma of a binomial proportion.
    EXPECT_NEAR(double(kept) / n, p, 5 * std::sqrt(p * (1 - p) / n)) << rate;
  }
  auto all = runDropout(ctx, TESSEL_F16, ones, 0.0, 3, 0, 0);
  EXPECT_EQ(all, ones);
  auto none = runDropout(ctx, TESSEL_F32, ones, 1.0, 3, 0, 0);
  EXPECT_EQ(none, std::vector<double>(n, 0.0));
}

} // namespace
