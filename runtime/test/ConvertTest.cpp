//===- ConvertTest.cpp - 16-bit float conversions and tessel_cast ---------===//

#include "TestUtil.h"

#include <limits>

using namespace tt;

namespace {

using ConvertTest = RuntimeTest;

float bitsToFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Every f16 widens exactly, and narrows back to the same bits (NaNs stay
// NaN; quiet NaNs keep their bits).
TEST_F(ConvertTest, HalfRoundTripsExhaustively) {
  std::vector<uint16_t> all(65536), back(65536);
  std::vector<float> wide(65536);
  for (uint32_t i = 0; i < 65536; ++i)
    all[i] = uint16_t(i);
  tessel_cast(ctx, TESSEL_F16, TESSEL_F32, all.data(), wide.data(), 65536);
  tessel_cast(ctx, TESSEL_F32, TESSEL_F16, wide.data(), back.data(), 65536);
  for (uint32_t i = 0; i < 65536; ++i) {
    double want = decodeHalf(uint16_t(i));
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(wide[i])) << i;
      ASSERT_GT(back[i] & 0x3ff, 0) << i;
      ASSERT_EQ(back[i] & 0x7c00, 0x7c00) << i;
      if (i & 0x200)
        ASSERT_EQ(back[i], i) << i;
    } else {
      ASSERT_EQ(double(wide[i]), want) << i;
      ASSERT_EQ(back[i], i) << i;
    }
  }
}

TEST_F(ConvertTest, Bf16RoundTripsExhaustively) {
  std::vector<uint16_t> all(65536), back(65536);
  std::vector<float> wide(65536);
  for (uint32_t i = 0; i < 65536; ++i)
    all[i] = uint16_t(i);
  tessel_cast(ctx, TESSEL_BF16, TESSEL_F32, all.data(), wide.data(), 65536);
  tessel_cast(ctx, TESSEL_F32, TESSEL_BF16, wide.data(), back.data(), 65536);
  for (uint32_t i = 0; i < 65536; ++i) {
    double want = decodeBf16(uint16_t(i));
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(wide[i])) << i;
      ASSERT_TRUE(std::isnan(decodeBf16(back[i]))) << i;
    } else {
      ASSERT_EQ(double(wide[i]), want) << i;
      ASSERT_EQ(back[i], i) << i;
    }
  }
}

// Random f32 bit patterns (all exponents, NaN and inf included) narrow to
// the correctly rounded 16-bit value.
TEST_F(ConvertTest, NarrowingRoundsToNearestEven) {
  std::mt19937 rng(7);
  const size_t n = 200003;
  std::vector<float> x(n);
  for (float &f : x)
    f = bitsToFloat(rng());
  // Exact ties and edge cases, in both formats.
  const float edges[] = {1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, 65504.0f,
                         65519.99f,       65520.0f,            0x1p-25f,
                         0x1.8p-25f,      0x1p-24f,            0x1p-14f,
                         1.0f + 0x1p-8f,  1.0f + 3 * 0x1p-8f,  -0.0f,
                         3.4028235e38f,   INFINITY,            -INFINITY};
  std::copy(std::begin(edges), std::end(edges), x.begin());
  std::vector<uint16_t> h(n), b(n);
  tessel_cast(ctx, TESSEL_F32, TESSEL_F16, x.data(), h.data(), int64_t(n));
  tessel_cast(ctx, TESSEL_F32, TESSEL_BF16, x.data(), b.data(), int64_t(n));
  for (size_t i = 0; i < n; ++i) {
    if (std::isnan(x[i])) {
      ASSERT_TRUE(std::isnan(decodeHalf(h[i]))) << i;
      ASSERT_TRUE(std::isnan(decodeBf16(b[i]))) << i;
      continue;
    }
    ASSERT_EQ(h[i], encodeHalf(quantize(TESSEL_F16, x[i])))
        << "f16 of " << x[i];
    ASSERT_EQ(b[i], encodeBf16(quantize(TESSEL_BF16, x[i])))
        << "bf16 of " << x[i];
  }
}

// f64 → f16 rounds once: 1 + 2^-11 + 2^-40 is above the tie, so it rounds
// up, whereas going through f32 first would land on the tie and round down.
TEST_F(ConvertTest, F64NarrowsWithoutDoubleRounding) {
  double x[] = {1.0 + 0x1p-11 + 0x1p-40, 1.0 + 0x1p-8 + 0x1p-40};
  uint16_t h[2], b[2];
  tessel_cast(ctx, TESSEL_F64, TESSEL_F16, x, h, 2);
  tessel_cast(ctx, TESSEL_F64, TESSEL_BF16, x, b, 2);
  EXPECT_EQ(decodeHalf(h[0]), 1.0 + 0x1p-10);
  EXPECT_EQ(decodeBf16(b[1]), 1.0 + 0x1p-7);
}

TEST_F(ConvertTest, CastBetweenAllDtypes) {
  const std::vector<double> values = {-3.75, -1.0, -0.5, 0.0,  0.5,  1.0,
                                      2.25,  7.0,  13.0, 100.5, 1000.0};
  for (int32_t src : kAllTypes) {
    for (int32_t dst : kAllTypes) {
      SCOPED_TRACE(std::string(dtypeName(src)) + " -> " + dtypeName(dst));
      std::vector<double> in(values.size());
      for (size_t i = 0; i < values.size(); ++i)
        in[i] = quantize(src, values[i]);
      std::vector<uint8_t> x = encode(src, in);
      std::vector<uint8_t> y(values.size() * size_t(tessel_dtype_size(dst)));
      tessel_cast(ctx, src, dst, x.data(), y.data(), int64_t(values.size()));
      std::vector<double> want(in.size());
      for (size_t i = 0; i < in.size(); ++i)
        want[i] = quantize(dst, in[i]);
      expectClose(decode(dst, y), want, 0.0, 0.0);
    }
  }
}

TEST_F(ConvertTest, FloatToIntSaturatesAndMapsNaNToZero) {
  double x[] = {1e20, -1e20, NAN, -2.9, 2147483647.0};
  int32_t y[5];
  int64_t z[5];
  tessel_cast(ctx, TESSEL_F64, TESSEL_I32, x, y, 5);
  tessel_cast(ctx, TESSEL_F64, TESSEL_I64, x, z, 5);
  EXPECT_EQ(y[0], std::numeric_limits<int32_t>::max());
  EXPECT_EQ(y[1], std::numeric_limits<int32_t>::min());
  EXPECT_EQ(y[2], 0);
  EXPECT_EQ(y[3], -2);
  EXPECT_EQ(y[4], 2147483647);
  EXPECT_EQ(z[0], std::numeric_limits<int64_t>::max());
  EXPECT_EQ(z[1], std::numeric_limits<int64_t>::min());
  EXPECT_EQ(z[2], 0);
  // Just past the range (2^31 .. 2^32, 2^63 .. 2^64) saturates too (it
  // once converted there as the hardware does: INT_MIN on x86-64).
  double past[] = {2147483648.0, 3e9, -2147483649.0, 0x1p63, 1.5 * 0x1p63};
  int32_t p32[5];
  int64_t p64[5];
  tessel_cast(ctx, TESSEL_F64, TESSEL_I32, past, p32, 5);
  tessel_cast(ctx, TESSEL_F64, TESSEL_I64, past, p64, 5);
  EXPECT_EQ(p32[0], std::numeric_limits<int32_t>::max());
  EXPECT_EQ(p32[1], std::numeric_limits<int32_t>::max());
  EXPECT_EQ(p32[2], std::numeric_limits<int32_t>::min());
  EXPECT_EQ(p64[3], std::numeric_limits<int64_t>::max());
  EXPECT_EQ(p64[4], std::numeric_limits<int64_t>::max());
  EXPECT_EQ(p64[1], int64_t(3000000000));
}

TEST_F(ConvertTest, IntToIntIsExact) {
  int64_t x[] = {(int64_t(1) << 53) + 1, -5, (int64_t(1) << 32) + 7};
  int64_t y[3];
  int32_t z[3];
  tessel_cast(ctx, TESSEL_I64, TESSEL_I64, x, y, 3);
  tessel_cast(ctx, TESSEL_I64, TESSEL_I32, x, z, 3);
  EXPECT_EQ(y[0], x[0]);
  EXPECT_EQ(z[1], -5);
  EXPECT_EQ(z[2], 7);
}

TEST_F(ConvertTest, BadDtypeSetsError) {
  float x = 1.0f, y = 0.0f;
  tessel_cast(ctx, TESSEL_F32, 42, &x, &y, 1);
  EXPECT_NE(tessel_error(ctx), nullptr);
  tessel_clear_error(ctx);
}

} // namespace
