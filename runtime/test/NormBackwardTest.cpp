//===- NormBackwardTest.cpp - Norm gradients against finite differences --===//
//
// As BackwardTest.cpp, for the norms: layer norm and RMS norm (with and
// without gamma, and the f32 kernel against a double reference on wide
// rows and tails), and batch norm's training-mode gradient.
//
//===----------------------------------------------------------------------===//

#include "BackwardTestSupport.h"

using namespace tt;
using namespace tt::backward;

namespace {

using BackwardTest = RuntimeTest;

//===--- Layer norm and RMS norm ------------------------------------------===//

TEST_F(BackwardTest, LayerNormGradMatchesFiniteDifferences) {
  const int64_t shapes[][2] = {{1, 1}, {1, 7}, {7, 13}, {13, 7}, {3, 33}};
  const double epsv = 1e-5;
  for (const auto &s : shapes) {
    for (int rms : {0, 1}) {
      int64_t rows = s[0], cols = s[1];
      size_t count = size_t(rows * cols);
      SCOPED_TRACE(shapeName({rows, cols}) + (rms ? " rms" : ""));
      Vec x = randomValues(TESSEL_F64, count, -2, 3, 400 + count);
      Vec g = randomValues(TESSEL_F64, size_t(cols), 0.5, 1.5, 401);
      Vec b = randomValues(TESSEL_F64, size_t(cols), -1, 1, 402);
      Vec r = randomValues(TESSEL_F64, count, -1, 1, 403 + count);
      // Inputs: x, gamma and (layer norm only) beta.
      Vecs inputs = rms ? Vecs{x, g} : Vecs{x, g, b};
      Forward fwd = [&](const Vecs &in) {
        Bytes xb = enc(TESSEL_F64, in[0]), gb = enc(TESSEL_F64, in[1]);
        Bytes bb = rms ? Bytes() : enc(TESSEL_F64, in[2]);
        Bytes y = zeros(TESSEL_F64, count);
        tessel_layer_norm(ctx, TESSEL_F64, xb.data(), gb.data(), ptr(bb),
                          y.data(), rows, cols, epsv, rms);
        return decode(TESSEL_F64, y);
      };
      Backward bwd = [&](int32_t dt, const Vecs &in, const Vec &dy) {
        Bytes xb = enc(dt, in[0]), gb = enc(dt, in[1]), dyb = enc(dt, dy);
        Bytes dx = zeros(dt, count), dg = zeros(dt, size_t(cols));
        Bytes db = rms ? Bytes() : zeros(dt, size_t(cols));
        tessel_layer_norm_grad(ctx, dt, xb.data(), gb.data(), dyb.data(),
                               dx.data(), dg.data(), ptr(db), rows, cols, epsv,
                               rms);
        Vecs grads{decode(dt, dx), decode(dt, dg)};
        if (!rms)
          grads.push_back(decode(dt, db));
        return grads;
      };
      std::vector<size_t> wrt =
          rms ? std::vector<size_t>{0, 1} : std::vector<size_t>{0, 1, 2};
      checkFiniteDifferences(fwd, bwd, inputs, r, wrt);
      checkDtypes(bwd, inputs, r);
    }
  }
}

TEST_F(BackwardTest, LayerNormGradWithoutGammaUsesOne) {
  const int64_t rows = 3, cols = 7;
  Vec x = randomValues(TESSEL_F64, rows * cols, -2, 2, 410);
  Vec dy = randomValues(TESSEL_F64, rows * cols, -1, 1, 411);
  Vec ones(cols, 1.0);
  Vec dxNull(rows * cols), dxOnes(rows * cols), dg(cols);
  tessel_layer_norm_grad(ctx, TESSEL_F64, x.data(), nullptr, dy.data(),
                         dxNull.data(), nullptr, nullptr, rows, cols, 1e-5, 0);
  tessel_layer_norm_grad(ctx, TESSEL_F64, x.data(), ones.data(), dy.data(),
                         dxOnes.data(), dg.data(), nullptr, rows, cols, 1e-5,
                         0);
  EXPECT_EQ(dxNull, dxOnes);
}

// Tests that the vectorised f32 layer and RMS norm gradients match an f64
// loop on the same inputs, on widths with every tail of the 8-lane loops
// and past one 256-element flush block, and on row counts past the 32-row
// blocks of the dγ/dβ column sums. Each result is checked within 2e-6 (about
// 16 ulp) of the scale of what it is computed from, the magnitudes before
// any cancellation: x̂ against (|x| + |mean|)·rstd (x − mean of a rounded
// mean), Σd and Σd·x̂ against Σ|d| and Σ|d|·|x̂|, so dx against
// rstd·(|d| + Σ|d|/cols + |x̂|·Σ|d·x̂|/cols) and dγ, dβ against Σ|dy·x̂|
// and Σ|dy|.
TEST_F(BackwardTest, LayerNormGradF32MatchesReferenceOnTails) {
  const double epsv = 1e-5;
  for (int64_t rows : {1, 3, 40, 70}) {
    for (int64_t cols : {1, 7, 8, 9, 13, 33, 257, 300}) {
      for (int rms : {0, 1}) {
        for (bool withGamma : {true, false}) {
          SCOPED_TRACE(shapeName({rows, cols}) + (rms ? " rms" : "") +
                       (withGamma ? "" : " no gamma"));
          size_t count = size_t(rows * cols);
          Vec x = randomValues(TESSEL_F32, count, -2, 3, 420 + count);
          Vec g = withGamma
                      ? randomValues(TESSEL_F32, size_t(cols), 0.5, 1.5, 421)
                      : Vec(size_t(cols), 1.0);
          Vec dy = randomValues(TESSEL_F32, count, -1, 1, 422 + count);
          Bytes xb = enc(TESSEL_F32, x), gb = enc(TESSEL_F32, g),
                dyb = enc(TESSEL_F32, dy), dx = zeros(TESSEL_F32, count),
                dg = zeros(TESSEL_F32, size_t(cols)),
                db = zeros(TESSEL_F32, size_t(cols));
          tessel_layer_norm_grad(ctx, TESSEL_F32, xb.data(),
                                 withGamma ? gb.data() : nullptr, dyb.data(),
                                 dx.data(), dg.data(), db.data(), rows, cols,
                                 epsv, rms);
          Vec gotDx = decode(TESSEL_F32, dx), gotDg = decode(TESSEL_F32, dg),
              gotDb = decode(TESSEL_F32, db);
          Vec wantDg(size_t(cols), 0.0), wantDb(size_t(cols), 0.0),
              scaleDg(size_t(cols), 0.0), scaleDb(size_t(cols), 0.0);
          int bad = 0;
          for (int64_t r = 0; r < rows; ++r) {
            const double *xs = x.data() + r * cols, *dys = dy.data() + r * cols;
            const RowStats stats = normRowStats(xs, cols, rms, epsv);
            const double mean = stats.mean, rstd = stats.rstd;
            double meanD = 0, meanDX = 0, absD = 0, absDX = 0;
            auto xhScale = [&](int64_t j) {
              return (std::fabs(xs[j]) + std::fabs(mean)) * rstd;
            };
            for (int64_t j = 0; j < cols; ++j) {
              double xh = (xs[j] - mean) * rstd, d = dys[j] * g[size_t(j)];
              meanD += d;
              meanDX += d * xh;
              absD += std::fabs(d);
              absDX += std::fabs(d) * xhScale(j);
              wantDg[size_t(j)] += dys[j] * xh;
              wantDb[size_t(j)] += dys[j];
              scaleDg[size_t(j)] += std::fabs(dys[j]) * xhScale(j);
              scaleDb[size_t(j)] += std::fabs(dys[j]);
            }
            meanD = rms ? 0 : meanD / double(cols);
            meanDX /= double(cols);
            for (int64_t j = 0; j < cols; ++j) {
              double xh = (xs[j] - mean) * rstd, d = dys[j] * g[size_t(j)];
              double want = rstd * (d - meanD - xh * meanDX);
              double scale = rstd * (std::fabs(d) + absD / double(cols) +
                                     xhScale(j) * absDX / double(cols));
              double got = gotDx[size_t(r * cols + j)];
              if (!(std::fabs(got - want) <= 2e-6 * scale) && bad++ < 5)
                ADD_FAILURE() << "dx[" << r << ", " << j << "]: got " << got
                              << ", want " << want;
            }
          }
          for (size_t j = 0; j < size_t(cols); ++j) {
            if (!(std::fabs(gotDg[j] - wantDg[j]) <= 2e-6 * scaleDg[j]) &&
                bad++ < 5)
              ADD_FAILURE() << "dgamma[" << j << "]: got " << gotDg[j]
                            << ", want " << wantDg[j];
            if (!(std::fabs(gotDb[j] - wantDb[j]) <= 2e-6 * scaleDb[j]) &&
                bad++ < 5)
              ADD_FAILURE() << "dbeta[" << j << "]: got " << gotDb[j]
                            << ", want " << wantDb[j];
          }
          EXPECT_EQ(bad, 0);
        }
      }
    }
  }
}

//===--- Batch norm -------------------------------------------------------===//

TEST_F(BackwardTest, BatchNormGradMatchesFiniteDifferences) {
  const int64_t shapes[][3] = {
      {1, 1, 7}, {2, 3, 5}, {7, 1, 1}, {3, 13, 2}, {1, 7, 13}};
  const double epsv = 1e-5;
  for (const auto &s : shapes) {
    int64_t outer = s[0], ch = s[1], inner = s[2];
    size_t count = size_t(outer * ch * inner);
    SCOPED_TRACE(shapeName({outer, ch, inner}));
    Vec x = randomValues(TESSEL_F64, count, -2, 3, 500 + count);
    Vec g = randomValues(TESSEL_F64, size_t(ch), 0.5, 1.5, 501);
    Vec b = randomValues(TESSEL_F64, size_t(ch), -1, 1, 502);
    Vec r = randomValues(TESSEL_F64, count, -1, 1, 503 + count);
    Forward fwd = [&](const Vecs &in) {
      Bytes xb = enc(TESSEL_F64, in[0]), gb = enc(TESSEL_F64, in[1]),
            bb = enc(TESSEL_F64, in[2]), y = zeros(TESSEL_F64, count);
      tessel_batch_norm(ctx, TESSEL_F64, xb.data(), gb.data(), bb.data(),
                        y.data(), outer, ch, inner, epsv);
      return decode(TESSEL_F64, y);
    };
    Backward bwd = [&](int32_t dt, const Vecs &in, const Vec &dy) {
      Bytes xb = enc(dt, in[0]), gb = enc(dt, in[1]), dyb = enc(dt, dy);
      Bytes dx = zeros(dt, count), dg = zeros(dt, size_t(ch)),
            db = zeros(dt, size_t(ch));
      tessel_batch_norm_grad(ctx, dt, xb.data(), gb.data(), dyb.data(),
                             dx.data(), dg.data(), db.data(), outer, ch, inner,
                             epsv);
      return Vecs{decode(dt, dx), decode(dt, dg), decode(dt, db)};
    };
    checkFiniteDifferences(fwd, bwd, {x, g, b}, r, {0, 1, 2});
    checkDtypes(bwd, {x, g, b}, r);
  }
}

} // namespace
