//===- RopeTest.cpp - The rotary position embedding against a reference ---===//
//
// tessel_rope against the rotation written out in f64 from its definition
// (the angle p · theta^(-2i/D), the halves' or the neighbours' pairs), and
// the properties autodiff relies on: the inverse undoes the rotation and
// is its transpose.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

#include <cmath>
#include <numeric>

using namespace tt;

namespace {

using RopeTest = RuntimeTest;

struct Shape {
  int64_t outer, positions, heads, dim;
  int64_t count() const { return outer * positions * heads * dim; }
};

/// The rotation from its definition, in f64.
std::vector<double> reference(const std::vector<double> &x, Shape s,
                              double theta, bool interleaved, bool inverse) {
  std::vector<double> y(x.size());
  const int64_t half = s.dim / 2;
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t p = 0; p < s.positions; ++p)
      for (int64_t h = 0; h < s.heads; ++h) {
        const int64_t row = ((o * s.positions + p) * s.heads + h) * s.dim;
        for (int64_t i = 0; i < half; ++i) {
          double angle =
              double(p) / std::pow(theta, double(2 * i) / double(s.dim));
          if (inverse)
            angle = -angle;
          size_t a = size_t(row + (interleaved ? 2 * i : i));
          size_t b = size_t(row + (interleaved ? 2 * i + 1 : i + half));
          y[a] = x[a] * std::cos(angle) - x[b] * std::sin(angle);
          y[b] = x[b] * std::cos(angle) + x[a] * std::sin(angle);
        }
      }
  return y;
}

std::vector<double> run(tessel_ctx *ctx, int32_t dtype,
                        const std::vector<double> &x, Shape s, double theta,
                        bool interleaved, bool inverse) {
  auto xb = encode(dtype, x);
  std::vector<uint8_t> yb(xb.size());
  tessel_rope(ctx, dtype, xb.data(), yb.data(), s.outer, s.positions, s.heads,
              s.dim, theta, interleaved, inverse, 0, 0, 0, 0);
  return decode(dtype, yb);
}

const Shape kShapes[] = {
    {1, 1, 1, 2}, {2, 7, 3, 8}, {1, 33, 2, 16}, {3, 5, 4, 6}, {1, 130, 1, 64}};

TEST_F(RopeTest, MatchesDefinition) {
  for (int32_t dtype : kFloatTypes)
    for (Shape s : kShapes)
      for (bool interleaved : {false, true})
        for (bool inverse : {false, true})
          for (double theta : {10000.0, 500000.0, 2.5}) {
            SCOPED_TRACE(
                std::string(dtypeName(dtype)) + " [" + std::to_string(s.outer) +
                ", " + std::to_string(s.positions) + ", " +
                std::to_string(s.heads) + ", " + std::to_string(s.dim) +
                "] theta " + std::to_string(theta) +
                (interleaved ? " interleaved" : "") +
                (inverse ? " inverse" : ""));
            auto x = randomValues(dtype, size_t(s.count()), -2, 2, 71);
            auto want = reference(x, s, theta, interleaved, inverse);
            // |y| <= |a| + |b| <= 4: the turn rounded to the arithmetic's
            // type (twice) and two products and a sum in it, then the
            // rounding to the stored type; and the f64 angle's own
            // rounding, relative to the angle (up to the position).
            double atol =
                16 * computeEps(dtype) + 4 * double(s.positions) * 0x1p-52;
            expectClose(run(ctx, dtype, x, s, theta, interleaved, inverse),
                        want, eps(dtype), atol);
          }
}

// Position 0 turns by nothing: its rows come out bit for bit.
TEST_F(RopeTest, FirstPositionIsUnchanged) {
  Shape s{2, 3, 2, 8};
  for (int32_t dtype : kFloatTypes) {
    auto x = randomValues(dtype, size_t(s.count()), -3, 3, 72);
    auto y = run(ctx, dtype, x, s, 10000.0, false, false);
    for (int64_t o = 0; o < s.outer; ++o)
      for (int64_t j = 0; j < s.heads * s.dim; ++j) {
        size_t at = size_t(o * s.positions * s.heads * s.dim + j);
        EXPECT_EQ(y[at], x[at]) << dtypeName(dtype) << " element " << at;
      }
  }
}

// The inverse undoes the rotation, and is its transpose:
// <rope(x), y> = <x, rope⁻¹(y)>, which makes it rope's gradient.
TEST_F(RopeTest, InverseIsTheTranspose) {
  for (bool interleaved : {false, true}) {
    Shape s{2, 9, 3, 10};
    auto x = randomValues(TESSEL_F64, size_t(s.count()), -1, 1, 73);
    auto y = randomValues(TESSEL_F64, size_t(s.count()), -1, 1, 74);
    auto rx = run(ctx, TESSEL_F64, x, s, 10000.0, interleaved, false);
    auto back = run(ctx, TESSEL_F64, rx, s, 10000.0, interleaved, true);
    expectClose(back, x, 0, 4e-16);
    auto ry = run(ctx, TESSEL_F64, y, s, 10000.0, interleaved, true);
    double lhs = std::inner_product(rx.begin(), rx.end(), y.begin(), 0.0);
    double rhs = std::inner_product(x.begin(), x.end(), ry.begin(), 0.0);
    EXPECT_NEAR(lhs, rhs, 1e-13) << (interleaved ? "interleaved" : "halves");
  }
}

// The interleaved pairs are the halves' pairs of the row with its even
// elements first: the same rotation, the elements permuted.
TEST_F(RopeTest, InterleavedIsAPermutationOfHalves) {
  Shape s{1, 6, 2, 8};
  auto x = randomValues(TESSEL_F32, size_t(s.count()), -1, 1, 75);
  std::vector<double> permuted(x.size());
  for (int64_t r = 0; r < s.outer * s.positions * s.heads; ++r)
    for (int64_t i = 0; i < s.dim / 2; ++i) {
      permuted[size_t(r * s.dim + i)] = x[size_t(r * s.dim + 2 * i)];
      permuted[size_t(r * s.dim + s.dim / 2 + i)] =
          x[size_t(r * s.dim + 2 * i + 1)];
    }
  auto interleaved = run(ctx, TESSEL_F32, x, s, 10000.0, true, false);
  auto halves = run(ctx, TESSEL_F32, permuted, s, 10000.0, false, false);
  for (int64_t r = 0; r < s.outer * s.positions * s.heads; ++r)
    for (int64_t i = 0; i < s.dim / 2; ++i) {
      EXPECT_EQ(interleaved[size_t(r * s.dim + 2 * i)],
                halves[size_t(r * s.dim + i)]);
      EXPECT_EQ(interleaved[size_t(r * s.dim + 2 * i + 1)],
                halves[size_t(r * s.dim + s.dim / 2 + i)]);
    }
}

// y may be x: the rotation in place writes what it would elsewhere.
TEST_F(RopeTest, InPlaceEqualsOutOfPlace) {
  Shape s{2, 5, 3, 12};
  for (int32_t dtype : kFloatTypes) {
    auto x = randomValues(dtype, size_t(s.count()), -1, 1, 76);
    auto xb = encode(dtype, x);
    std::vector<uint8_t> yb(xb.size());
    tessel_rope(ctx, dtype, xb.data(), yb.data(), s.outer, s.positions, s.heads,
                s.dim, 10000.0, 0, 0, 0, 0, 0, 0);
    tessel_rope(ctx, dtype, xb.data(), xb.data(), s.outer, s.positions, s.heads,
                s.dim, 10000.0, 0, 0, 0, 0, 0, 0);
    EXPECT_EQ(xb, yb) << dtypeName(dtype);
  }
}

// Bad arguments are refused with a message and touch nothing.
TEST_F(RopeTest, BadArgumentsAreRefused) {
  float x[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  float y[16] = {};
  struct Bad {
    int64_t outer, positions, heads, dim;
    double theta;
    float *out;
    const char *message;
    double factor = 0, low = 0, high = 0, original = 0;
  } cases[] = {
      {1, 2, 1, 3, 10000.0, y, "head_dim even"},
      {-1, 2, 1, 4, 10000.0, y, "bad shape"},
      {INT64_MAX / 2, 4, 1, 2, 10000.0, y, "bytes within int64"},
      {1, 2, 2, 4, 0.0, y, "theta 0 must be finite and positive"},
      {1, 2, 2, 4, NAN, y, "must be finite"},
      {1, 2, 2, 4, 10000.0, x + 1, "y overlaps x without being it"},
      {1, 2, 2, 4, 10000.0, y, "scaling [0.5, 1, 4, 8192] needs", 0.5, 1, 4,
       8192},
      {1, 2, 2, 4, 10000.0, y, "needs factor >= 1, 0 < low < high", 8, 4, 1,
       8192},
      {1, 2, 2, 4, 10000.0, y, "all finite", 8, 1, 4, INFINITY},
  };
  for (const Bad &c : cases) {
    tessel_rope(ctx, TESSEL_F32, x, c.out, c.outer, c.positions, c.heads, c.dim,
                c.theta, 0, 0, c.factor, c.low, c.high, c.original);
    const char *err = tessel_error(ctx);
    ASSERT_NE(err, nullptr) << c.message;
    EXPECT_NE(std::string(err).find(c.message), std::string::npos) << err;
    tessel_clear_error(ctx);
    for (float v : y)
      EXPECT_EQ(v, 0.0f);
  }
  tessel_rope(ctx, 99, x, y, 1, 2, 2, 4, 10000.0, 0, 0, 0, 0, 0, 0);
  EXPECT_NE(tessel_error(ctx), nullptr);
  tessel_clear_error(ctx);
}

// Llama 3.1's frequency scaling (Hugging Face's _compute_llama3_parameters,
// written out here): with Llama 3.2's theta 500000, factor 32, low 1, high
// 4 and 8192 original positions, head dimension 64 has pairs in all three
// regimes; the rotation with them matches the definition, and without
// scaling is the plain rope.
TEST_F(RopeTest, Llama31ScalingMatchesItsDefinition) {
  const double theta = 500000, factor = 32, low = 1, high = 4, original = 8192;
  Shape s{1, 300, 2, 64};
  std::vector<double> frequency(32);
  int kept = 0, divided = 0, blended = 0;
  for (int64_t i = 0; i < 32; ++i) {
    double f = 1.0 / std::pow(theta, double(2 * i) / 64.0);
    double wavelength = 2 * M_PI / f;
    if (wavelength < original / high) {
      frequency[size_t(i)] = f, ++kept;
    } else if (wavelength > original / low) {
      frequency[size_t(i)] = f / factor, ++divided;
    } else {
      double smooth = (original / wavelength - low) / (high - low);
      frequency[size_t(i)] = (1 - smooth) * f / factor + smooth * f;
      ++blended;
    }
  }
  ASSERT_GT(kept, 0);
  ASSERT_GT(divided, 0);
  ASSERT_GT(blended, 0);
  for (int32_t dtype : {TESSEL_F64, TESSEL_F32}) {
    auto x = randomValues(dtype, size_t(s.count()), -1, 1, 77);
    std::vector<double> want(x.size());
    for (int64_t p = 0; p < s.positions; ++p)
      for (int64_t h = 0; h < s.heads; ++h)
        for (int64_t i = 0; i < 32; ++i) {
          size_t a = size_t((p * s.heads + h) * 64 + i), b = a + 32;
          double angle = double(p) * frequency[size_t(i)];
          want[a] = x[a] * std::cos(angle) - x[b] * std::sin(angle);
          want[b] = x[b] * std::cos(angle) + x[a] * std::sin(angle);
        }
    auto xb = encode(dtype, x);
    std::vector<uint8_t> yb(xb.size());
    tessel_rope(ctx, dtype, xb.data(), yb.data(), s.outer, s.positions, s.heads,
                s.dim, theta, 0, 0, factor, low, high, original);
    expectClose(decode(dtype, yb), want, eps(dtype),
                16 * computeEps(dtype) + 4 * 300 * 0x1p-52);
    // Factor 0 is the plain rope.
    std::vector<uint8_t> plain(xb.size());
    tessel_rope(ctx, dtype, xb.data(), plain.data(), s.outer, s.positions,
                s.heads, s.dim, theta, 0, 0, 0, 0, 0, 0);
    expectClose(decode(dtype, plain),
                reference(x, s, theta, /*interleaved=*/false, false),
                eps(dtype), 16 * computeEps(dtype) + 4 * 300 * 0x1p-52);
    EXPECT_NE(plain, yb);
  }
}

// YaRN's frequency scaling (transformers' _compute_yarn_parameters, written
// out here): Qwen's long context (theta 1e6, head 128, factor 4 over 32768
// original positions, betas 32 and 1, the correction range truncated) and
// gpt-oss's (theta 150000, head 64, factor 32 over 4096, not truncated).
// Each has kept, divided and blended pairs.
TEST_F(RopeTest, YarnScalingMatchesItsDefinition) {
  struct Case {
    double theta, factor, original;
    int64_t dim;
    bool truncate;
  };
  for (Case c :
       {Case{1e6, 4, 32768, 128, true}, Case{150000, 32, 4096, 64, false}}) {
    SCOPED_TRACE("theta " + std::to_string(c.theta));
    const int64_t pairs = c.dim / 2;
    auto correctionDim = [&](double rotations) {
      return double(c.dim) * std::log(c.original / (rotations * 2 * M_PI)) /
             (2 * std::log(c.theta));
    };
    double low = correctionDim(32), high = correctionDim(1);
    if (c.truncate)
      low = std::floor(low), high = std::ceil(high);
    low = std::max(low, 0.0);
    high = std::min(high, double(c.dim - 1));
    std::vector<double> frequency(static_cast<size_t>(pairs));
    int kept = 0, divided = 0, blended = 0;
    for (int64_t i = 0; i < pairs; ++i) {
      double extrapolated = 1.0 / std::pow(c.theta, double(2 * i) / c.dim);
      double interpolated = extrapolated / c.factor;
      double ramp = std::clamp((double(i) - low) / (high - low), 0.0, 1.0);
      double extrapolationFactor = 1 - ramp;
      frequency[size_t(i)] = interpolated * (1 - extrapolationFactor) +
                             extrapolated * extrapolationFactor;
      (ramp == 0 ? kept : ramp == 1 ? divided : blended)++;
    }
    ASSERT_GT(kept, 0);
    ASSERT_GT(divided, 0);
    ASSERT_GT(blended, 0);
    Shape s{2, 50, 2, c.dim};
    for (int32_t dtype : {TESSEL_F64, TESSEL_F32}) {
      auto x = randomValues(dtype, size_t(s.count()), -1, 1, 78);
      std::vector<double> want(x.size());
      for (int64_t o = 0; o < s.outer; ++o)
        for (int64_t p = 0; p < s.positions; ++p)
          for (int64_t h = 0; h < s.heads; ++h)
            for (int64_t i = 0; i < pairs; ++i) {
              size_t a = size_t(((o * s.positions + p) * s.heads + h) * c.dim +
                                i),
                     b = a + size_t(pairs);
              double angle = double(p) * frequency[size_t(i)];
              want[a] = x[a] * std::cos(angle) - x[b] * std::sin(angle);
              want[b] = x[b] * std::cos(angle) + x[a] * std::sin(angle);
            }
      auto xb = encode(dtype, x);
      std::vector<uint8_t> yb(xb.size()), back(xb.size());
      tessel_rope_yarn(ctx, dtype, xb.data(), yb.data(), s.outer, s.positions,
                       s.heads, s.dim, c.theta, 0, 0, c.factor, 32, 1,
                       c.original, c.truncate);
      ASSERT_EQ(tessel_error(ctx), nullptr) << tessel_error(ctx);
      expectClose(decode(dtype, yb), want, eps(dtype),
                  16 * computeEps(dtype) + 4 * 50 * 0x1p-52);
      // The inverse undoes it.
      tessel_rope_yarn(ctx, dtype, yb.data(), back.data(), s.outer, s.positions,
                       s.heads, s.dim, c.theta, 0, 1, c.factor, 32, 1,
                       c.original, c.truncate);
      expectClose(decode(dtype, back), x, eps(dtype),
                  32 * computeEps(dtype) + 4 * 50 * 0x1p-52);
    }
  }
}

TEST_F(RopeTest, BadYarnSetsError) {
  float x[8] = {0};
  struct Bad {
    double theta, factor, betaFast, original;
  };
  for (Bad b :
       {Bad{1.0, 4, 32, 4096}, Bad{1e4, 0.5, 32, 4096}, Bad{1e4, 4, 0, 4096},
        Bad{1e4, 4, 32, -1}, Bad{1e4, double(INFINITY), 32, 4096}}) {
    tessel_rope_yarn(ctx, TESSEL_F32, x, x, 1, 2, 1, 4, b.theta, 0, 0, b.factor,
                     b.betaFast, 1, b.original, 1);
    ASSERT_NE(tessel_error(ctx), nullptr);
    EXPECT_NE(std::string(tessel_error(ctx)).find("tessel_rope_yarn: "),
              std::string::npos)
        << tessel_error(ctx);
    tessel_clear_error(ctx);
  }
}

/// The partial rope with per-pair factors from its definition
/// (transformers' _compute_longrope_parameters and apply_rotary_pos_emb of
/// a partial rotary factor, written out): pair i < R / 2 of the first R
/// elements turns at p / (factors[i] · theta^(2i / R)), cos and sin times
/// the attention factor; the rest pass.
std::vector<double> partialReference(const std::vector<double> &x, Shape s,
                                     int64_t rotary, double theta,
                                     const std::vector<double> &factors,
                                     double attention, bool interleaved,
                                     bool inverse) {
  std::vector<double> y = x;
  const int64_t half = rotary / 2;
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t p = 0; p < s.positions; ++p)
      for (int64_t h = 0; h < s.heads; ++h) {
        const int64_t row = ((o * s.positions + p) * s.heads + h) * s.dim;
        for (int64_t i = 0; i < half; ++i) {
          double divisor = factors.empty() ? 1.0 : factors[size_t(i)];
          double angle =
              double(p) /
              (divisor * std::pow(theta, double(2 * i) / double(rotary)));
          if (inverse)
            angle = -angle;
          size_t a = size_t(row + (interleaved ? 2 * i : i));
          size_t b = size_t(row + (interleaved ? 2 * i + 1 : i + half));
          double c = attention * std::cos(angle),
                 sn = attention * std::sin(angle);
          y[a] = x[a] * c - x[b] * sn;
          y[b] = x[b] * c + x[a] * sn;
        }
      }
  return y;
}

// A partial rope (Phi-4-mini's partial_rotary_factor 0.75 of heads of
// 128; GPT-NeoX's quarter) with and without LongRoPE's factors and its
// attention factor (Phi-4-mini's sqrt(1 + ln 32 / ln 4096)), both pair
// layouts, both directions, in place and not: the first R elements turn as
// a head of R would, the rest come out bit for bit.
TEST_F(RopeTest, PartialRopeWithFactorsMatchesItsDefinition) {
  struct Case {
    Shape s;
    int64_t rotary;
  };
  for (Case c : {Case{{2, 40, 2, 128}, 96}, Case{{1, 9, 3, 16}, 4},
                 Case{{1, 5, 1, 8}, 8}, Case{{1, 3, 2, 6}, 2}})
    for (bool withFactors : {false, true})
      for (int variant = 0; variant < 8; ++variant) {
        bool interleaved = variant & 1, inverse = variant & 2,
             inPlace = variant & 4;
        std::vector<double> factors;
        const double attention =
            withFactors ? std::sqrt(1 + std::log(32.0) / std::log(4096.0))
                        : 1.0;
        if (withFactors) // rising as LongRoPE's long factors do
          for (int64_t i = 0; i < c.rotary / 2; ++i)
            factors.push_back(1.0 + 0.37 * double(i * i) / double(c.rotary));
        for (int32_t dtype : {TESSEL_F64, TESSEL_F32, TESSEL_BF16}) {
          SCOPED_TRACE(
              std::string(dtypeName(dtype)) + " rotary " +
              std::to_string(c.rotary) + " of " + std::to_string(c.s.dim) +
              (withFactors ? " factors" : "") +
              (interleaved ? " interleaved" : "") +
              (inverse ? " inverse" : "") + (inPlace ? " in place" : ""));
          auto x = randomValues(dtype, size_t(c.s.count()), -2, 2, 79);
          auto xb = encode(dtype, x);
          std::vector<uint8_t> yb(xb.size());
          uint8_t *out = inPlace ? xb.data() : yb.data();
          tessel_rope_factors(
              ctx, dtype, xb.data(), out, c.s.outer, c.s.positions, c.s.heads,
              c.s.dim, c.rotary, 10000.0, interleaved, inverse,
              withFactors ? factors.data() : nullptr, attention);
          ASSERT_EQ(tessel_error(ctx), nullptr) << tessel_error(ctx);
          auto got = decode(dtype, inPlace ? xb : yb);
          auto want = partialReference(x, c.s, c.rotary, 10000.0, factors,
                                       attention, interleaved, inverse);
          expectClose(got, want, eps(dtype),
                      16 * computeEps(dtype) +
                          4 * double(c.s.positions) * 0x1p-52);
          for (size_t r = 0; r < size_t(c.s.count() / c.s.dim); ++r)
            for (int64_t j = c.rotary; j < c.s.dim; ++j)
              ASSERT_EQ(got[r * size_t(c.s.dim) + size_t(j)],
                        x[r * size_t(c.s.dim) + size_t(j)]);
        }
      }
}

// With factors and an attention factor, the inverse is still the
// transpose, <rope(x), y> = <x, rope⁻¹(y)>: nn.rope's gradient.
TEST_F(RopeTest, ScaledInverseIsTheTranspose) {
  Shape s{2, 9, 3, 12};
  std::vector<double> factors = {1.0, 2.5, 7.0, 30.0};
  auto x = randomValues(TESSEL_F64, size_t(s.count()), -1, 1, 81);
  auto y = randomValues(TESSEL_F64, size_t(s.count()), -1, 1, 82);
  auto apply = [&](const std::vector<double> &v, bool inverse) {
    auto vb = encode(TESSEL_F64, v);
    std::vector<uint8_t> out(vb.size());
    tessel_rope_factors(ctx, TESSEL_F64, vb.data(), out.data(), s.outer,
                        s.positions, s.heads, s.dim, 8, 10000.0, 0, inverse,
                        factors.data(), 1.3);
    return decode(TESSEL_F64, out);
  };
  auto rx = apply(x, false), ry = apply(y, true);
  double lhs = std::inner_product(rx.begin(), rx.end(), y.begin(), 0.0);
  double rhs = std::inner_product(x.begin(), x.end(), ry.begin(), 0.0);
  EXPECT_NEAR(lhs, rhs, 1e-13);
  EXPECT_GT(
      std::fabs(lhs - std::inner_product(x.begin(), x.end(), y.begin(), 0.0)),
      1e-3); // it does turn and scale
}

// Whole heads without factors are tessel_rope, bit for bit; factors of 1
// are no factors.
TEST_F(RopeTest, WholeHeadsWithoutFactorsIsThePlainRope) {
  Shape s{2, 17, 3, 12};
  std::vector<double> ones(6, 1.0);
  for (int32_t dtype : kFloatTypes) {
    auto x = randomValues(dtype, size_t(s.count()), -1, 1, 80);
    auto xb = encode(dtype, x);
    std::vector<uint8_t> plain(xb.size()), bare(xb.size()), unit(xb.size());
    tessel_rope(ctx, dtype, xb.data(), plain.data(), s.outer, s.positions,
                s.heads, s.dim, 500000.0, 0, 0, 0, 0, 0, 0);
    tessel_rope_factors(ctx, dtype, xb.data(), bare.data(), s.outer,
                        s.positions, s.heads, s.dim, s.dim, 500000.0, 0, 0,
                        nullptr, 1.0);
    tessel_rope_factors(ctx, dtype, xb.data(), unit.data(), s.outer,
                        s.positions, s.heads, s.dim, s.dim, 500000.0, 0, 0,
                        ones.data(), 1.0);
    EXPECT_EQ(plain, bare) << dtypeName(dtype);
    EXPECT_EQ(plain, unit) << dtypeName(dtype);
  }
}

TEST_F(RopeTest, BadFactorsOrRotaryDimSetError) {
  std::vector<float> x(2 * 260, 0.0f), y(x.size(), 0.0f);
  std::vector<double> factors(130, 1.0);
  struct Bad {
    int64_t dim, rotary;
    double factor0;
    const char *message;
    double attention = 1.0;
  } cases[] = {
      {8, 3, 1.0, "rotary_dim 3 must be even and in (0, head_dim 8]"},
      {8, 10, 1.0, "rotary_dim 10 must be even"},
      {8, 0, 1.0, "rotary_dim 0 must be even"},
      {8, 8, 0.0, "pair 0's factor 0 must be finite and positive"},
      {8, 4, NAN, "must be finite and positive"},
      {260, 258, 1.0, "129 pairs with factors, at most 128"},
      {8, 8, 1.0, "attention_factor 0 must be finite and positive", 0.0},
      {8, 8, 1.0, "attention_factor inf must be finite", INFINITY},
  };
  for (const Bad &c : cases) {
    factors[0] = c.factor0;
    tessel_rope_factors(ctx, TESSEL_F32, x.data(), y.data(), 1, 2, 1, c.dim,
                        c.rotary, 10000.0, 0, 0, factors.data(), c.attention);
    const char *err = tessel_error(ctx);
    ASSERT_NE(err, nullptr) << c.message;
    EXPECT_NE(std::string(err).find(c.message), std::string::npos) << err;
    tessel_clear_error(ctx);
    for (float v : y)
      ASSERT_EQ(v, 0.0f);
  }
}

} // namespace
