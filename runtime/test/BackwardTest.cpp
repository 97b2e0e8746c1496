//===- BackwardTest.cpp - Backward kernels against finite differences ----===//
//
// Every backward kernel is checked in f64 against central finite
// differences of its forward kernel: for a random r, the gradient of the
// linear functional L(x) = Σ r ⊙ f(x) is what the kernel returns for dy = r,
// and (L(x + h·e_j) − L(x − h·e_j)) / 2h estimates its j-th component to
// O(h²) + O(ε·|f|/h), about 1e-9 relative here. The f32 and 16-bit kernels
// are then checked against the f64 kernel on the same (representable)
// inputs.
//
//===----------------------------------------------------------------------===//

#include "BackwardTestSupport.h"

using namespace tt;
using namespace tt::backward;

namespace {

using BackwardTest = RuntimeTest;

//===--- Unary ------------------------------------------------------------===//

TEST_F(BackwardTest, UnaryGradMatchesFiniteDifferences) {
  struct OpCase {
    int32_t op;
    double lo, hi;
  };
  const OpCase ops[] = {
      {TESSEL_NEG, -3, 3},     {TESSEL_EXP, -3, 3},
      {TESSEL_LOG, 0.25, 4},   {TESSEL_SQRT, 0.25, 4},
      {TESSEL_RSQRT, 0.25, 4}, {TESSEL_TANH, -3, 3},
      {TESSEL_SIGMOID, -6, 6}, {TESSEL_RELU, -3, 3},
      {TESSEL_GELU, -4, 4},    {TESSEL_GELU_TANH, -4, 4},
      {TESSEL_SILU, -6, 6},
  };
  for (const OpCase &oc : ops) {
    for (int64_t n : {1, 7, 13}) {
      SCOPED_TRACE("op " + std::to_string(oc.op) + " n " + std::to_string(n));
      Vec x = randomValues(TESSEL_F64, size_t(n), oc.lo, oc.hi, 100 + n);
      for (double &v : x) // Keep finite differences off the ReLU kink.
        if (std::fabs(v) < 1e-2)
          v = 0.5;
      Vec r = randomValues(TESSEL_F64, size_t(n), -1, 1, 200 + n);
      Forward fwd = [&](const Vecs &in) {
        Bytes xb = enc(TESSEL_F64, in[0]), y = zeros(TESSEL_F64, size_t(n));
        tessel_unary(ctx, oc.op, TESSEL_F64, xb.data(), y.data(), n);
        return decode(TESSEL_F64, y);
      };
      Backward bwd = [&](int32_t dt, const Vecs &in, const Vec &dy) {
        Bytes xb = enc(dt, in[0]), dyb = enc(dt, dy), dx = zeros(dt, size_t(n));
        tessel_unary_grad(ctx, oc.op, dt, xb.data(), dyb.data(), dx.data(), n);
        return Vecs{decode(dt, dx)};
      };
      checkFiniteDifferences(fwd, bwd, {x}, r, {0});
      checkDtypes(bwd, {x}, r, {TESSEL_F32, TESSEL_BF16, TESSEL_F16});
    }
  }
}

/// op'(x) in long double from the textbook forms (cosh, erfc), written
/// independently of the kernel's e^-|x| forms, and `scale`, the sum of the
/// magnitudes of the terms op' adds up: the size a rounding error of the
/// f32 terms is measured against (op' itself crosses zero for SiLU and the
/// GELUs).
long double refUnaryGrad(int32_t op, long double x, long double &scale) {
  const long double k = 0.797884560802865355879892119868763737L; // √(2/π)
  const long double c = 0.044715L;
  long double r;
  scale = -1;
  switch (op) {
  case TESSEL_NEG:
    r = -1;
    break;
  case TESSEL_EXP:
    r = std::exp(x);
    break;
  case TESSEL_LOG:
    r = 1 / x;
    break;
  case TESSEL_SQRT:
    r = 0.5L / std::sqrt(x);
    break;
  case TESSEL_RSQRT:
    r = -0.5L / (x * std::sqrt(x));
    break;
  case TESSEL_TANH: {
    long double ch = std::cosh(x);
    r = 1 / (ch * ch);
    break;
  }
  case TESSEL_SIGMOID:
    r = 1 / ((1 + std::exp(-x)) * (1 + std::exp(x)));
    break;
  case TESSEL_RELU:
    r = x <= 0 ? 0 : 1;
    break;
  case TESSEL_GELU: {
    long double cdf = 0.5L * std::erfc(-x / std::sqrt(2.0L));
    long double xpdf = x * std::exp(-0.5L * x * x) / std::sqrt(2 * M_PIl);
    r = cdf + xpdf;
    scale = cdf + std::fabs(xpdf);
    break;
  }
  case TESSEL_GELU_TANH: {
    long double u = k * (x + c * x * x * x), ch = std::cosh(u);
    long double a = 1 / (1 + std::exp(-2 * u));
    long double b = 0.5L * x * k * (1 + 3 * c * x * x) / (ch * ch);
    r = a + b;
    scale = a + std::fabs(b);
    break;
  }
  default: { // TESSEL_SILU
    long double s = 1 / (1 + std::exp(-x)), sc = 1 / (1 + std::exp(x));
    r = s + x * s * sc;
    scale = s + std::fabs(x * s * sc);
    break;
  }
  }
  if (scale < 0)
    scale = std::fabs(r);
  return r;
}

// Tests that the vectorised f32 derivatives match long double references on
// lengths with every tail of the 8-lane loops, within the bounds stated in
// backward.cpp: relative to the sum of the magnitudes of op''s terms (times
// |dy|), 1e-6 (about 8 ulp; measured ≤ 3.2e-7) for TANH, SIGMOID, SILU, EXP,
// LOG, SQRT, RSQRT; for GELU_TANH 4e-6 on |x| ≤ 5 (the error grows with u,
// from e^-2|u| of a rounded u: about 2e-6 at x = −5); for GELU the same
// 1e-6 plus 3e-7 absolute (fastErf near ±1, as in the forward GELU:
// measured ≤ 2.8e-7); NEG and RELU exactly.
TEST_F(BackwardTest, UnaryGradF32MatchesReferenceOnTails) {
  struct OpCase {
    int32_t op;
    double lo, hi, rtol, atol;
  };
  const OpCase ops[] = {
      {TESSEL_NEG, -6, 6, 0, 0},          {TESSEL_EXP, -20, 20, 1e-6, 0},
      {TESSEL_LOG, 0.01, 30, 1e-6, 0},    {TESSEL_SQRT, 0.01, 30, 1e-6, 0},
      {TESSEL_RSQRT, 0.01, 30, 1e-6, 0},  {TESSEL_TANH, -12, 12, 1e-6, 0},
      {TESSEL_SIGMOID, -30, 30, 1e-6, 0}, {TESSEL_RELU, -6, 6, 0, 0},
      {TESSEL_GELU, -8, 8, 1e-6, 3e-7},   {TESSEL_GELU_TANH, -5, 5, 4e-6, 0},
      {TESSEL_SILU, -30, 30, 1e-6, 0},
  };
  for (const OpCase &oc : ops) {
    for (int64_t n : {1, 7, 8, 9, 15, 31, 1000, 1001}) {
      SCOPED_TRACE("op " + std::to_string(oc.op) + " n " + std::to_string(n));
      Vec x = randomValues(TESSEL_F32, size_t(n), oc.lo, oc.hi, 900 + n);
      Vec dy = randomValues(TESSEL_F32, size_t(n), -2, 2, 901 + n);
      if (n > 3 && oc.lo < 0) { // ReLU's kink and the signed zeros.
        x[0] = 0.0;
        x[1] = -0.0;
      }
      Bytes xb = enc(TESSEL_F32, x), dyb = enc(TESSEL_F32, dy),
            dx = zeros(TESSEL_F32, size_t(n));
      tessel_unary_grad(ctx, oc.op, TESSEL_F32, xb.data(), dyb.data(),
                        dx.data(), n);
      Vec got = decode(TESSEL_F32, dx);
      int bad = 0;
      for (size_t i = 0; i < got.size(); ++i) {
        long double scale;
        long double want = refUnaryGrad(oc.op, x[i], scale) * dy[i];
        scale *= std::fabs(dy[i]);
        double err = double(std::fabs(got[i] - want));
        double tol = oc.rtol * double(scale) + oc.atol * std::fabs(dy[i]);
        if (oc.rtol == 0) // Exact: the f32 product of an exact factor.
          tol = 0, want = double(float(want));
        if (!(err <= tol) && bad++ < 5)
          ADD_FAILURE() << "x " << x[i] << " dy " << dy[i] << ": got "
                        << got[i] << ", want " << double(want) << " (tol "
                        << tol << ")";
      }
      EXPECT_EQ(bad, 0);
    }
  }
}

// Tests that the f32 derivatives of the saturating ops reach their limits
// far out, finite and without NaN (the e^-|x| forms never form 1 − tanh²
// or inf · 0 for finite x below 1e19).
TEST_F(BackwardTest, UnaryGradF32IsFiniteFarOut) {
  const float xs[] = {-1e10f, -1e4f, -200.f, -50.f, -20.f,
                      20.f,   50.f,  200.f,  1e4f,  1e10f};
  const size_t n = sizeof xs / sizeof xs[0];
  std::vector<float> dy(n, 1.0f), dx(n);
  for (int32_t op : {TESSEL_TANH, TESSEL_SIGMOID, TESSEL_GELU,
                     TESSEL_GELU_TANH, TESSEL_SILU}) {
    tessel_unary_grad(ctx, op, TESSEL_F32, xs, dy.data(), dx.data(),
                      int64_t(n));
    for (size_t i = 0; i < n; ++i) {
      SCOPED_TRACE("op " + std::to_string(op) + " x " + std::to_string(xs[i]));
      ASSERT_TRUE(std::isfinite(dx[i]));
      bool zeroLimit = op == TESSEL_TANH || op == TESSEL_SIGMOID || xs[i] < 0;
      // SiLU' at −20 is −19·e^-20 = −4e-8; the GELUs' past ±20 are 0 or 1,
      // the exact GELU's within fastErf's error near 1 (≤ 2.8e-7).
      EXPECT_NEAR(dx[i], zeroLimit ? 0.0 : 1.0, 5e-7);
    }
  }
}

TEST_F(BackwardTest, ReluGradIsZeroAtZero) {
  double x[3] = {0.0, -0.0, 1.0}, dy[3] = {2, 3, 4}, dx[3];
  tessel_unary_grad(ctx, TESSEL_RELU, TESSEL_F64, x, dy, dx, 3);
  EXPECT_EQ(dx[0], 0.0);
  EXPECT_EQ(dx[1], 0.0);
  EXPECT_EQ(dx[2], 4.0);
}

TEST_F(BackwardTest, UnaryGradRejectsUnknownOpAndIntegers) {
  float x = 1, dy = 1, dx = 0;
  tessel_unary_grad(ctx, 99, TESSEL_F32, &x, &dy, &dx, 1);
  EXPECT_NE(tessel_error(ctx), nullptr);
  tessel_clear_error(ctx);
  int32_t ix = 1, idy = 1, idx = 0;
  tessel_unary_grad(ctx, TESSEL_EXP, TESSEL_I32, &ix, &idy, &idx, 1);
  EXPECT_NE(tessel_error(ctx), nullptr);
  tessel_clear_error(ctx);
}

//===--- Softmax ----------------------------------------------------------===//

TEST_F(BackwardTest, SoftmaxGradMatchesFiniteDifferences) {
  const int64_t shapes[][3] = {{1, 1, 1}, {7, 13, 1}, {3, 7, 5}, {2, 1, 13},
                               {1, 13, 7}};
  for (const auto &s : shapes) {
    int64_t outer = s[0], dim = s[1], inner = s[2];
    size_t count = size_t(outer * dim * inner);
    SCOPED_TRACE(shapeName({outer, dim, inner}));
    Vec x = randomValues(TESSEL_F64, count, -3, 3, 300 + count);
    Vec r = randomValues(TESSEL_F64, count, -1, 1, 301 + count);
    Forward fwd = [&](const Vecs &in) {
      Bytes xb = enc(TESSEL_F64, in[0]), y = zeros(TESSEL_F64, count);
      tessel_softmax(ctx, TESSEL_F64, xb.data(), y.data(), outer, dim, inner);
      return decode(TESSEL_F64, y);
    };
    // The kernel takes the softmax output; inputs[0] here is y itself.
    Backward bwdY = [&](int32_t dt, const Vecs &in, const Vec &dy) {
      Bytes yb = enc(dt, in[0]), dyb = enc(dt, dy), dx = zeros(dt, count);
      tessel_softmax_grad(ctx, dt, yb.data(), dyb.data(), dx.data(), outer,
                          dim, inner);
      return Vecs{decode(dt, dx)};
    };
    Backward bwdX = [&](int32_t dt, const Vecs &in, const Vec &dy) {
      return bwdY(dt, {fwd(in)}, dy);
    };
    checkFiniteDifferences(fwd, bwdX, {x}, r, {0});
    checkDtypes(bwdY, {fwd({x})}, r);
  }
}

//===--- Cross-entropy ----------------------------------------------------===//

TEST_F(BackwardTest, CrossEntropyGradMatchesFiniteDifferences) {
  const int64_t shapes[][2] = {{1, 1}, {7, 13}, {13, 7}, {3, 100}};
  for (const auto &s : shapes) {
    for (int32_t red : {TESSEL_LOSS_MEAN, TESSEL_LOSS_SUM, TESSEL_LOSS_NONE}) {
      for (int32_t ldt : {TESSEL_I32, TESSEL_I64}) {
        int64_t rows = s[0], classes = s[1];
        size_t count = size_t(rows * classes);
        SCOPED_TRACE(shapeName({rows, classes}) + " reduction " +
                     std::to_string(red) + " labels " + dtypeName(ldt));
        Vec x = randomValues(TESSEL_F64, count, -4, 4, 600 + count);
        Vec lab(static_cast<size_t>(rows));
        std::mt19937_64 rng(601 + count);
        for (double &l : lab)
          l = double(rng() % uint64_t(classes));
        Bytes lb = enc(ldt, lab);
        size_t outCount = red == TESSEL_LOSS_NONE ? size_t(rows) : 1;
        Vec r = randomValues(TESSEL_F64, outCount, -1, 1, 602 + count);
        Forward fwd = [&](const Vecs &in) {
          Bytes xb = enc(TESSEL_F64, in[0]), y = zeros(TESSEL_F64, outCount);
          tessel_cross_entropy(ctx, TESSEL_F64, ldt, xb.data(), lb.data(),
                               y.data(), rows, classes, red);
          return decode(TESSEL_F64, y);
        };
        Backward bwd = [&](int32_t dt, const Vecs &in, const Vec &dl) {
          Bytes xb = enc(dt, in[0]), dlb = enc(dt, dl), dx = zeros(dt, count);
          tessel_cross_entropy_grad(ctx, dt, ldt, xb.data(), lb.data(),
                                    dlb.data(), dx.data(), rows, classes, red);
          return Vecs{decode(dt, dx)};
        };
        checkFiniteDifferences(fwd, bwd, {x}, r, {0});
        checkDtypes(bwd, {x}, r);
      }
    }
  }
}

// Tests that the vectorised f32 cross-entropy gradient matches g·(softmax −
// onehot) in long double on class counts with every tail of the 8-lane
// loops and past one 256-element flush block, within 1e-6 · |g|·(p +
// onehot): the f32 rounding of x − max (up to 4 ulp of p for logits in
// [−8, 8]), the polynomial exp's ulp, the scale's and the product's
// roundings; measured up to 7e-7.
TEST_F(BackwardTest, CrossEntropyGradF32MatchesReferenceOnTails) {
  const int64_t rows = 5;
  for (int64_t classes : {1, 7, 8, 9, 13, 100, 257, 1000}) {
    for (int32_t red : {TESSEL_LOSS_MEAN, TESSEL_LOSS_SUM, TESSEL_LOSS_NONE}) {
      SCOPED_TRACE(shapeName({rows, classes}) + " reduction " +
                   std::to_string(red));
      size_t count = size_t(rows * classes);
      Vec x = randomValues(TESSEL_F32, count, -8, 8, 610 + count);
      std::vector<int32_t> labels(static_cast<size_t>(rows));
      std::mt19937_64 rng(611 + count);
      for (int32_t &l : labels)
        l = int32_t(rng() % uint64_t(classes));
      size_t outCount = red == TESSEL_LOSS_NONE ? size_t(rows) : 1;
      Vec dl = randomValues(TESSEL_F32, outCount, -2, 2, 612 + count);
      Bytes xb = enc(TESSEL_F32, x), dlb = enc(TESSEL_F32, dl),
            dx = zeros(TESSEL_F32, count);
      tessel_cross_entropy_grad(ctx, TESSEL_F32, TESSEL_I32, xb.data(),
                                labels.data(), dlb.data(), dx.data(), rows,
                                classes, red);
      Vec got = decode(TESSEL_F32, dx);
      int bad = 0;
      for (int64_t r = 0; r < rows; ++r) {
        const double *xs = x.data() + r * classes;
        long double g = red == TESSEL_LOSS_NONE ? dl[size_t(r)]
                        : red == TESSEL_LOSS_SUM
                            ? dl[0]
                            : (long double)dl[0] / rows;
        long double mx = *std::max_element(xs, xs + classes), sum = 0;
        for (int64_t c = 0; c < classes; ++c)
          sum += std::exp((long double)xs[c] - mx);
        for (int64_t c = 0; c < classes; ++c) {
          long double p = std::exp((long double)xs[c] - mx) / sum;
          long double onehot = c == labels[size_t(r)] ? 1 : 0;
          double want = double(g * (p - onehot));
          double tol = double(1e-6L * std::fabs(g) * (p + onehot));
          double gc = got[size_t(r * classes + c)];
          if (!(std::fabs(gc - want) <= tol) && bad++ < 5)
            ADD_FAILURE() << "row " << r << " class " << c << ": got " << gc
                          << ", want " << want << " (tol " << tol << ")";
        }
      }
      EXPECT_EQ(bad, 0);
    }
  }
}

TEST_F(BackwardTest, CrossEntropyGradBadLabelZeroesItsRow) {
  float logits[6] = {1, 2, 3, 4, 5, 6}, dl = 1.0f, dx[6];
  int32_t labels[2] = {1, 3};
  std::fill(dx, dx + 6, 7.0f);
  tessel_cross_entropy_grad(ctx, TESSEL_F32, TESSEL_I32, logits, labels, &dl,
                            dx, 2, 3, TESSEL_LOSS_SUM);
  EXPECT_NE(tessel_error(ctx), nullptr);
  tessel_clear_error(ctx);
  double s = 0;
  for (int i = 0; i < 3; ++i)
    s += dx[i];
  EXPECT_NEAR(s, 0.0, 1e-6); // softmax − onehot sums to 0.
  EXPECT_LT(dx[1], 0.0f);
  for (int i = 3; i < 6; ++i)
    EXPECT_EQ(dx[i], 0.0f);
}

//===--- Embedding --------------------------------------------------------===//

TEST_F(BackwardTest, EmbeddingGradMatchesFiniteDifferences) {
  const int64_t cases[][3] = {{1, 1, 1}, {7, 5, 3}, {13, 13, 7}, {20, 7, 13}};
  for (const auto &c : cases) {
    for (int32_t idt : {TESSEL_I32, TESSEL_I64}) {
      int64_t num = c[0], vocab = c[1], hidden = c[2];
      SCOPED_TRACE(shapeName({num, vocab, hidden}) + " " + dtypeName(idt));
      // Ids with repeats, and (vocab > 1) one id that never occurs.
      Vec ids(static_cast<size_t>(num));
      std::mt19937_64 rng(700 + num);
      for (double &id : ids)
        id = double(rng() % uint64_t(vocab > 1 ? vocab - 1 : 1));
      Bytes ib = enc(idt, ids);
      Vec table = randomValues(TESSEL_F64, size_t(vocab * hidden), -1, 1, 701);
      Vec r = randomValues(TESSEL_F64, size_t(num * hidden), -1, 1, 702 + num);
      Forward fwd = [&](const Vecs &in) {
        Bytes tb = enc(TESSEL_F64, in[0]),
              y = zeros(TESSEL_F64, size_t(num * hidden));
        tessel_embedding(ctx, TESSEL_F64, idt, tb.data(), ib.data(), y.data(),
                         num, vocab, hidden, 0, vocab);
        return decode(TESSEL_F64, y);
      };
      Backward bwd = [&](int32_t dt, const Vecs &, const Vec &dy) {
        Bytes dyb = enc(dt, dy), dt_ = zeros(dt, size_t(vocab * hidden));
        // Garbage first: the gradient is overwritten, not accumulated.
        std::fill(dt_.begin(), dt_.end(), uint8_t(0x3c));
        tessel_embedding_grad(ctx, dt, idt, ib.data(), dyb.data(), dt_.data(),
                              num, vocab, hidden, 0, vocab);
        return Vecs{decode(dt, dt_)};
      };
      checkFiniteDifferences(fwd, bwd, {table}, r, {0});
      checkDtypes(bwd, {table}, r, {TESSEL_F32, TESSEL_BF16, TESSEL_F16});
      if (vocab > 1) {
        Vec g = bwd(TESSEL_F64, {table}, r)[0];
        for (int64_t j = 0; j < hidden; ++j)
          EXPECT_EQ(g[size_t((vocab - 1) * hidden + j)], 0.0);
      }
    }
  }
}

TEST_F(BackwardTest, EmbeddingGradSumsRepeatsOnceRounded) {
  // Three contributions to one bf16 row: 1 + 2^-8 + 2^-8 = 1 + 2^-7 exactly,
  // which rounding after every addition (ties to even) would lose.
  const int64_t ids[3] = {0, 0, 0};
  Vec d = {1.0, 0x1p-8, 0x1p-8};
  Bytes db = encode(TESSEL_BF16, d), out = zeros(TESSEL_BF16, 2);
  tessel_embedding_grad(ctx, TESSEL_BF16, TESSEL_I64, ids, db.data(),
                        out.data(), 3, 2, 1, 0, 2);
  Vec g = decode(TESSEL_BF16, out);
  EXPECT_EQ(g[0], 1.0 + 0x1p-7);
  EXPECT_EQ(g[1], 0.0);
}

TEST_F(BackwardTest, EmbeddingGradBadIdSetsError) {
  int32_t ids[2] = {1, 5};
  float dout[4] = {1, 2, 3, 4}, dt[6];
  tessel_embedding_grad(ctx, TESSEL_F32, TESSEL_I32, ids, dout, dt, 2, 3, 2, 0,
                        3);
  EXPECT_NE(tessel_error(ctx), nullptr);
  tessel_clear_error(ctx);
  float want[6] = {0, 0, 1, 2, 0, 0};
  for (int i = 0; i < 6; ++i)
    EXPECT_EQ(dt[i], want[i]) << i;
}

//===--- Attention --------------------------------------------------------===//

TEST_F(BackwardTest, AttentionGradMatchesFiniteDifferences) {
  struct Case {
    int64_t b, s, t, h, hkv, d, e;
    int causal;
    int64_t window = 0;
    double softcap = 0;
  };
  const Case cases[] = {
      {1, 1, 1, 1, 1, 1, 1, 0},
      {1, 1, 1, 1, 1, 1, 1, 1},
      {2, 7, 7, 4, 2, 5, 3, 0},
      {2, 7, 7, 4, 2, 5, 3, 1},
      {1, 5, 13, 3, 1, 8, 7, 0},
      {1, 5, 13, 3, 1, 8, 7, 1},
      {1, 13, 5, 2, 2, 3, 1, 1},
      // Past one 32-row causal block (the kernel's row blocks), with fewer
      // keys than queries and with more, and the same shape unmasked.
      {1, 45, 37, 2, 1, 3, 2, 1},
      {1, 37, 45, 2, 2, 3, 2, 1},
      {1, 37, 45, 2, 2, 3, 2, 0},
      // Sliding windows within a row block and across blocks, and rows
      // that see no key (past the last key's window).
      {2, 7, 7, 4, 2, 5, 3, 1, 3},
      {1, 45, 45, 2, 1, 3, 2, 1, 33},
      {1, 45, 37, 2, 1, 3, 2, 1, 10},
      {1, 60, 30, 1, 1, 3, 2, 1, 8},
      // More rows than one unmasked block (256).
      {1, 260, 3, 1, 1, 2, 2, 0},
      // Soft-capped scores (Gemma 2): unmasked, causal across row blocks,
      // under a window.
      {2, 7, 7, 4, 2, 5, 3, 0, 0, 0.6},
      {1, 45, 37, 2, 1, 3, 2, 1, 0, 0.9},
      {1, 45, 45, 2, 1, 3, 2, 1, 10, 0.6},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE("B" + std::to_string(c.b) + " S" + std::to_string(c.s) + " T" +
                 std::to_string(c.t) + " H" + std::to_string(c.h) + "/" +
                 std::to_string(c.hkv) + " D" + std::to_string(c.d) + " E" +
                 std::to_string(c.e) + (c.causal ? " causal" : "") +
                 (c.window ? " window " + std::to_string(c.window) : "") +
                 (c.softcap ? " softcap " + std::to_string(c.softcap) : ""));
    size_t nq = size_t(c.b * c.s * c.h * c.d), nk = size_t(c.b * c.t * c.hkv * c.d);
    size_t nv = size_t(c.b * c.t * c.hkv * c.e), no = size_t(c.b * c.s * c.h * c.e);
    Vec q = randomValues(TESSEL_F64, nq, -1, 1, 801);
    Vec k = randomValues(TESSEL_F64, nk, -1, 1, 802);
    Vec v = randomValues(TESSEL_F64, nv, -2, 2, 803);
    Vec r = randomValues(TESSEL_F64, no, -1, 1, 804);
    double scale = 1.7 / std::sqrt(double(c.d));
    Forward fwd = [&](const Vecs &in) {
      Bytes qb = enc(TESSEL_F64, in[0]), kb = enc(TESSEL_F64, in[1]),
            vb = enc(TESSEL_F64, in[2]), o = zeros(TESSEL_F64, no);
      tessel_attention_softcap(ctx, TESSEL_F64, qb.data(), kb.data(), vb.data(),
                               o.data(), nullptr, c.b, c.s, c.t, c.h, c.hkv,
                               c.d, c.e, scale, c.causal, c.window, c.softcap);
      return decode(TESSEL_F64, o);
    };
    // The model's way (ABI 11; the window's and soft cap's entries, ABI 20
    // and 24): the
    // forward's output and log-sum-exp handed to the gradient. The entry
    // of older models, which recomputes both, must give the same bytes.
    // `stored`: the dtype the output is rounded to before the gradient reads it
    // (its own, unless an f64 reference stands in for a 16-bit run).
    auto gradient = [&](int32_t dt, const Vecs &in, const Vec &dy,
                        int32_t stored) {
      Bytes qb = enc(dt, in[0]), kb = enc(dt, in[1]), vb = enc(dt, in[2]),
            dob = enc(dt, dy), out = zeros(dt, no);
      Bytes lse((dt == TESSEL_F64 ? 8 : 4) * size_t(c.b * c.h * c.s));
      tessel_attention_softcap(
          ctx, dt, qb.data(), kb.data(), vb.data(), out.data(), lse.data(), c.b,
          c.s, c.t, c.h, c.hkv, c.d, c.e, scale, c.causal, c.window, c.softcap);
      if (stored != dt)
        out = enc(dt, quantized(stored, decode(dt, out)));
      Bytes dq = zeros(dt, nq), dk = zeros(dt, nk), dv = zeros(dt, nv);
      // Garbage first: the gradients are overwritten, not accumulated.
      std::fill(dk.begin(), dk.end(), uint8_t(0x3c));
      std::fill(dv.begin(), dv.end(), uint8_t(0x3c));
      tessel_attention_grad_softcap(
          ctx, dt, qb.data(), kb.data(), vb.data(), out.data(), lse.data(),
          dob.data(), dq.data(), dk.data(), dv.data(), c.b, c.s, c.t, c.h,
          c.hkv, c.d, c.e, scale, c.causal, c.window, c.softcap);
      if (stored == dt && !c.window && !c.softcap) {
        Bytes rq = zeros(dt, nq), rk = zeros(dt, nk), rv = zeros(dt, nv);
        tessel_attention_grad(ctx, dt, qb.data(), kb.data(), vb.data(),
                              dob.data(), rq.data(), rk.data(), rv.data(), c.b,
                              c.s, c.t, c.h, c.hkv, c.d, c.e, scale, c.causal);
        EXPECT_TRUE(rq == dq && rk == dk && rv == dv) << dtypeName(dt);
      }
      EXPECT_EQ(tessel_error(ctx), nullptr);
      return Vecs{decode(dt, dq), decode(dt, dk), decode(dt, dv)};
    };
    Backward bwd = [&](int32_t dt, const Vecs &in, const Vec &dy) {
      return gradient(dt, in, dy, dt);
    };
    checkFiniteDifferences(fwd, bwd, {q, k, v}, r, {0, 1, 2});
    checkDtypes(bwd, {q, k, v}, r, {TESSEL_F32});
    // 16-bit: D = rowsum(dO ⊙ O) reads the stored output, rounded to the
    // dtype (as flash-attention's does), so the reference is the f64
    // gradient from the output rounded the same way.
    for (int32_t dt : {TESSEL_BF16, TESSEL_F16}) {
      SCOPED_TRACE(dtypeName(dt));
      Vecs qin = {quantized(dt, q), quantized(dt, k), quantized(dt, v)};
      Vec qr = quantized(dt, r);
      Vecs ref = gradient(TESSEL_F64, qin, qr, dt);
      Vecs got = gradient(dt, qin, qr, dt);
      for (size_t i = 0; i < ref.size(); ++i) {
        SCOPED_TRACE("gradient " + std::to_string(i));
        expectClose(got[i], ref[i], eps(dt),
                    1e-5 * std::max(1.0, maxAbs(ref[i])) +
                        (dt == TESSEL_F16 ? 0x1p-24 : 0));
      }
    }
  }
}

TEST_F(BackwardTest, AttentionGradLseNeedsOutAndLse) {
  float x[2] = {1, 2}, lse[1] = {0}, g[2], h[2], i[2];
  struct Missing {
    const float *out, *lse;
    const char *error;
  };
  for (const Missing &m : {Missing{x, nullptr, "lse is null"},
                           Missing{nullptr, lse, "out is null"}}) {
    tessel_attention_grad_lse(ctx, TESSEL_F32, x, x, x, m.out, m.lse, x, g, h,
                              i, 1, 1, 1, 1, 1, 2, 2, 1.0, 0);
    ASSERT_NE(tessel_error(ctx), nullptr) << m.error;
    EXPECT_NE(std::string(tessel_error(ctx)).find(m.error), std::string::npos);
    tessel_clear_error(ctx);
  }
}

TEST_F(BackwardTest, AttentionGradBadHeadGroupingSetsError) {
  float q[3] = {0}, k[2] = {0}, v[2] = {0}, dout[3] = {0}, dq[3], dk[2], dv[2];
  tessel_attention_grad(ctx, TESSEL_F32, q, k, v, dout, dq, dk, dv, 1, 1, 1, 3,
                        2, 1, 1, 1.0, 0);
  EXPECT_NE(tessel_error(ctx), nullptr);
  tessel_clear_error(ctx);
}

//===--- Counters ---------------------------------------------------------===//

TEST_F(BackwardTest, EveryKernelCounts) {
  float x[4] = {1, 2, 3, 4}, dy[4] = {1, 1, 1, 1}, dx[4], g[2] = {1, 1},
        dg[2], db[2];
  int32_t ids[2] = {0, 1};
  tessel_reset_counters(ctx);
  tessel_unary_grad(ctx, TESSEL_TANH, TESSEL_F32, x, dy, dx, 4);
  tessel_softmax_grad(ctx, TESSEL_F32, x, dy, dx, 2, 2, 1);
  tessel_layer_norm_grad(ctx, TESSEL_F32, x, g, dy, dx, dg, db, 2, 2, 1e-5, 0);
  tessel_batch_norm_grad(ctx, TESSEL_F32, x, g, dy, dx, dg, db, 1, 2, 2, 1e-5);
  tessel_cross_entropy_grad(ctx, TESSEL_F32, TESSEL_I32, x, ids, dy, dx, 2, 2,
                            TESSEL_LOSS_MEAN);
  tessel_embedding_grad(ctx, TESSEL_F32, TESSEL_I32, ids, dy, dx, 2, 2, 2, 0,
                        2);
  tessel_attention_grad(ctx, TESSEL_F32, x, x, x, dy, dx, dg, db, 1, 2, 2, 1,
                        1, 1, 1, 1.0, 1);
  tessel_counters c;
  tessel_get_counters(ctx, &c);
  EXPECT_EQ(c.kernel_calls, 7);
  EXPECT_GE(c.kernel_seconds, 0.0);
}

} // namespace
