//===- LossOptionsTest.cpp - The cross-entropy's cap and smoothing --------===//
//
// The loss entries that take options against their definition written out
// in f64: tessel_cross_entropy(_grad, _with_grad)_softcap (ABI 27: Gemma
// 2's final_logit_softcapping inside the loss) and _smoothed (ABI 28:
// PyTorch's label smoothing, with or without a cap). With y = c·tanh(x / c)
// (x without a cap) and the target t = (1 − ε)·onehot + ε/V, the loss is
// lse(y) − Σ t·y and the gradient g·(softmax(y) − t)·(1 − (y / c)²); every
// reduction, the loss in the logits' type or f32 for 16-bit logits. The
// fused call equals the two, in place or not; a cap and a smoothing of 0
// are the plain loss, bit for bit.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

#include <cmath>

using namespace tt;

namespace {

using LossOptionsTest = RuntimeTest;

struct Case {
  int32_t dtype, lossDtype;
  int64_t rows, classes;
  double cap;           // 0: none
  double smoothing = 0; // ε
};

/// Row r's label: (5r + 1) mod classes.
std::vector<double> labelsOf(int64_t rows, int64_t classes) {
  std::vector<double> l(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r)
    l[size_t(r)] = double((5 * r + 1) % classes);
  return l;
}

/// dloss: 0.75, 1.5, ... (one a row for `none`, else one).
std::vector<double> dlossOf(int32_t reduction, int64_t rows) {
  std::vector<double> d(reduction == TESSEL_LOSS_NONE ? size_t(rows) : 1);
  for (size_t i = 0; i < d.size(); ++i)
    d[i] = 0.75 * double(i + 1);
  return d;
}

/// The loss (per row, or reduced) and the gradient from the definition.
void reference(const std::vector<double> &x, const std::vector<double> &labels,
               const std::vector<double> &dloss, const Case &c,
               int32_t reduction, std::vector<double> &loss,
               std::vector<double> &grad) {
  loss.assign(reduction == TESSEL_LOSS_NONE ? size_t(c.rows) : 1, 0.0);
  grad.assign(x.size(), 0.0);
  for (int64_t r = 0; r < c.rows; ++r) {
    std::vector<double> y(static_cast<size_t>(c.classes));
    double mx = -INFINITY;
    for (int64_t k = 0; k < c.classes; ++k) {
      double v = x[size_t(r * c.classes + k)];
      y[size_t(k)] = c.cap > 0 ? c.cap * std::tanh(v / c.cap) : v;
      mx = std::max(mx, y[size_t(k)]);
    }
    double sum = 0;
    for (double v : y)
      sum += std::exp(v - mx);
    int64_t label = int64_t(labels[size_t(r)]);
    auto target = [&](int64_t k) {
      return (k == label ? 1 - c.smoothing : 0.0) +
             c.smoothing / double(c.classes);
    };
    double rowLoss = mx + std::log(sum);
    for (int64_t k = 0; k < c.classes; ++k)
      rowLoss -= target(k) * y[size_t(k)];
    if (reduction == TESSEL_LOSS_NONE)
      loss[size_t(r)] = rowLoss;
    else
      loss[0] +=
          reduction == TESSEL_LOSS_MEAN ? rowLoss / double(c.rows) : rowLoss;
    double g = reduction == TESSEL_LOSS_NONE   ? dloss[size_t(r)]
               : reduction == TESSEL_LOSS_MEAN ? dloss[0] / double(c.rows)
                                               : dloss[0];
    for (int64_t k = 0; k < c.classes; ++k) {
      double p = std::exp(y[size_t(k)] - mx) / sum - target(k);
      double t = c.cap > 0 ? y[size_t(k)] / c.cap : 0.0;
      grad[size_t(r * c.classes + k)] = g * p * (1 - t * t);
    }
  }
}

/// The loss and gradient of case `c` through the _smoothed entries, or
/// the _softcap ones (`softcapEntries`, without a smoothing).
void lossAndGrad(tessel_ctx *ctx, const Case &c, int32_t reduction,
                 bool softcapEntries, const void *x, const void *labels,
                 int32_t labelDtype, const void *dloss, void *loss,
                 void *grad) {
  if (softcapEntries) {
    tessel_cross_entropy_softcap(ctx, c.dtype, c.lossDtype, labelDtype, x,
                                 labels, loss, c.rows, c.classes, reduction,
                                 c.cap);
    tessel_cross_entropy_grad_softcap(ctx, c.dtype, c.lossDtype, labelDtype, x,
                                      labels, dloss, grad, c.rows, c.classes,
                                      reduction, c.cap);
    return;
  }
  tessel_cross_entropy_smoothed(ctx, c.dtype, c.lossDtype, labelDtype, x,
                                labels, loss, c.rows, c.classes, reduction,
                                c.cap, c.smoothing);
  tessel_cross_entropy_grad_smoothed(ctx, c.dtype, c.lossDtype, labelDtype, x,
                                     labels, dloss, grad, c.rows, c.classes,
                                     reduction, c.cap, c.smoothing);
}

TEST_F(LossOptionsTest, MatchesItsDefinition) {
  const Case cases[] = {
      {TESSEL_F64, TESSEL_F64, 5, 7, 0.5},
      {TESSEL_F64, TESSEL_F64, 3, 1200, 30.0},
      {TESSEL_F32, TESSEL_F32, 4, 37, 3.0},
      {TESSEL_F32, TESSEL_F32, 2, 1000, 0.25},
      {TESSEL_BF16, TESSEL_BF16, 3, 64, 2.0},
      {TESSEL_BF16, TESSEL_F32, 6, 50, 1.5},
      {TESSEL_F16, TESSEL_F32, 2, 9, 4.0},
      // Smoothed, with and without a cap (PyTorch's 0.1; 1: uniform).
      {TESSEL_F64, TESSEL_F64, 5, 7, 0.0, 0.1},
      {TESSEL_F64, TESSEL_F64, 3, 1200, 30.0, 0.7},
      {TESSEL_F32, TESSEL_F32, 4, 37, 0.0, 0.1},
      {TESSEL_F32, TESSEL_F32, 2, 1000, 0.25, 1.0},
      {TESSEL_BF16, TESSEL_BF16, 3, 64, 0.0, 0.3},
      {TESSEL_BF16, TESSEL_F32, 6, 50, 1.5, 0.1},
      {TESSEL_F16, TESSEL_F32, 2, 9, 0.0, 0.2},
  };
  uint64_t seed = 31;
  for (const Case &c : cases)
    for (int32_t reduction :
         {TESSEL_LOSS_MEAN, TESSEL_LOSS_SUM, TESSEL_LOSS_NONE}) {
      SCOPED_TRACE(std::string(dtypeName(c.dtype)) + " loss " +
                   dtypeName(c.lossDtype) + " " + std::to_string(c.rows) + "x" +
                   std::to_string(c.classes) + " cap " + std::to_string(c.cap) +
                   " smoothing " + std::to_string(c.smoothing) + " reduction " +
                   std::to_string(reduction));
      auto x = randomValues(c.dtype, size_t(c.rows * c.classes), -8, 8, seed++);
      auto labels = labelsOf(c.rows, c.classes);
      auto dloss = dlossOf(reduction, c.rows);
      std::vector<double> wantLoss, wantGrad;
      reference(x, labels, dloss, c, reduction, wantLoss, wantGrad);
      auto xb = encode(c.dtype, x);
      auto lb = encode(TESSEL_I32, labels);
      auto db = encode(c.lossDtype, dloss);
      // A capped loss without smoothing through both entry pairs.
      for (bool softcapEntries : {false, true}) {
        if (softcapEntries && (c.smoothing > 0 || c.cap == 0))
          continue;
        SCOPED_TRACE(softcapEntries ? "_softcap" : "_smoothed");
        std::vector<uint8_t> loss(wantLoss.size() *
                                  tessel_dtype_size(c.lossDtype)),
            grad(xb.size());
        lossAndGrad(ctx, c, reduction, softcapEntries, xb.data(), lb.data(),
                    TESSEL_I32, db.data(), loss.data(), grad.data());
        ASSERT_EQ(tessel_error(ctx), nullptr) << tessel_error(ctx);
        // The arithmetic's rounding over a row (f64 or f32), then the
        // stored type's.
        double tol = c.dtype == TESSEL_F64 ? 1e-12 : 2e-5;
        expectClose(decode(c.lossDtype, loss), wantLoss,
                    std::max(tol, eps(c.lossDtype)), tol);
        expectClose(decode(c.dtype, grad), wantGrad,
                    std::max(tol, eps(c.dtype)), tol);
      }
    }
}

// The fused call is the loss then the gradient, bit for bit, its gradient
// over the logits or apart, under a cap, a smoothing or both.
TEST_F(LossOptionsTest, WithGradIsTheLossThenTheGradient) {
  const std::pair<double, double> options[] = {
      {2.0, 0.0}, {0.0, 0.1}, {2.0, 0.3}};
  for (int32_t dtype : {TESSEL_F32, TESSEL_BF16, TESSEL_F64})
    for (auto [cap, smoothing] : options)
      for (bool inPlace : {false, true}) {
        SCOPED_TRACE(std::string(dtypeName(dtype)) + " cap " +
                     std::to_string(cap) + " smoothing " +
                     std::to_string(smoothing));
        Case c{dtype, dtype == TESSEL_BF16 ? int32_t(TESSEL_F32) : dtype,
               4,     300,
               cap,   smoothing};
        bool softcapEntries = smoothing == 0;
        auto x = randomValues(dtype, size_t(c.rows * c.classes), -6, 6, 41);
        auto xb = encode(dtype, x);
        auto lb = encode(TESSEL_I64, labelsOf(c.rows, c.classes));
        auto db = encode(c.lossDtype, dlossOf(TESSEL_LOSS_MEAN, c.rows));
        size_t lossBytes = tessel_dtype_size(c.lossDtype);
        std::vector<uint8_t> loss(lossBytes), grad(xb.size()),
            fusedLoss(lossBytes), fusedGrad(xb.size());
        lossAndGrad(ctx, c, TESSEL_LOSS_MEAN, softcapEntries, xb.data(),
                    lb.data(), TESSEL_I64, db.data(), loss.data(), grad.data());
        std::vector<uint8_t> logits = xb;
        void *dlogits = inPlace ? logits.data() : fusedGrad.data();
        if (softcapEntries)
          tessel_cross_entropy_with_grad_softcap(
              ctx, dtype, c.lossDtype, TESSEL_I64, logits.data(), lb.data(),
              db.data(), fusedLoss.data(), dlogits, c.rows, c.classes,
              TESSEL_LOSS_MEAN, c.cap);
        else
          tessel_cross_entropy_with_grad_smoothed(
              ctx, dtype, c.lossDtype, TESSEL_I64, logits.data(), lb.data(),
              db.data(), fusedLoss.data(), dlogits, c.rows, c.classes,
              TESSEL_LOSS_MEAN, c.cap, c.smoothing);
        ASSERT_EQ(tessel_error(ctx), nullptr) << tessel_error(ctx);
        EXPECT_EQ(fusedLoss, loss);
        EXPECT_EQ(inPlace ? logits : fusedGrad, grad);
      }
}

// Cap 0 is no cap and smoothing 0 none: the plain entries' bits, and the
// _smoothed entries without a smoothing are the _softcap ones.
TEST_F(LossOptionsTest, ZeroOptionsAreThePlainLoss) {
  const int64_t rows = 3, classes = 45;
  for (int32_t dtype : {TESSEL_F32, TESSEL_BF16, TESSEL_F64})
    for (double cap : {0.0, 2.5}) {
      SCOPED_TRACE(std::string(dtypeName(dtype)) + " cap " +
                   std::to_string(cap));
      auto xb =
          encode(dtype, randomValues(dtype, size_t(rows * classes), -5, 5, 43));
      auto lb = encode(TESSEL_I32, labelsOf(rows, classes));
      auto db = encode(dtype, dlossOf(TESSEL_LOSS_NONE, rows));
      size_t lossBytes = size_t(rows) * tessel_dtype_size(dtype);
      std::vector<uint8_t> want(lossBytes), got(lossBytes), wantGrad(xb.size()),
          gotGrad(xb.size());
      Case c{dtype, dtype, rows, classes, cap, 0.0};
      if (cap == 0) {
        tessel_cross_entropy(ctx, dtype, TESSEL_I32, xb.data(), lb.data(),
                             want.data(), rows, classes, TESSEL_LOSS_NONE);
        tessel_cross_entropy_grad(ctx, dtype, TESSEL_I32, xb.data(), lb.data(),
                                  db.data(), wantGrad.data(), rows, classes,
                                  TESSEL_LOSS_NONE);
        std::vector<uint8_t> capped(lossBytes), cappedGrad(xb.size());
        lossAndGrad(ctx, c, TESSEL_LOSS_NONE, true, xb.data(), lb.data(),
                    TESSEL_I32, db.data(), capped.data(), cappedGrad.data());
        EXPECT_EQ(capped, want);
        EXPECT_EQ(cappedGrad, wantGrad);
      } else {
        lossAndGrad(ctx, c, TESSEL_LOSS_NONE, true, xb.data(), lb.data(),
                    TESSEL_I32, db.data(), want.data(), wantGrad.data());
      }
      lossAndGrad(ctx, c, TESSEL_LOSS_NONE, false, xb.data(), lb.data(),
                  TESSEL_I32, db.data(), got.data(), gotGrad.data());
      ASSERT_EQ(tessel_error(ctx), nullptr) << tessel_error(ctx);
      EXPECT_EQ(got, want);
      EXPECT_EQ(gotGrad, wantGrad);
    }
}

TEST_F(LossOptionsTest, BadArgumentsSetError) {
  float x[6] = {1, 2, 3, 4, 5, 6}, loss[2] = {}, dl[1] = {1};
  int32_t labels[2] = {0, 1};
  for (double cap : {-1.0, double(NAN), double(INFINITY)}) {
    tessel_cross_entropy_softcap(ctx, TESSEL_F32, TESSEL_F32, TESSEL_I32, x,
                                 labels, loss, 2, 3, TESSEL_LOSS_MEAN, cap);
    ASSERT_NE(tessel_error(ctx), nullptr);
    EXPECT_NE(std::string(tessel_error(ctx))
                  .find("tessel_cross_entropy_softcap: softcap"),
              std::string::npos)
        << tessel_error(ctx);
    tessel_clear_error(ctx);
    tessel_cross_entropy_with_grad_softcap(ctx, TESSEL_F32, TESSEL_F32,
                                           TESSEL_I32, x, labels, dl, loss, x,
                                           2, 3, TESSEL_LOSS_MEAN, cap);
    ASSERT_NE(tessel_error(ctx), nullptr);
    EXPECT_NE(std::string(tessel_error(ctx)).find("must be finite and >= 0"),
              std::string::npos)
        << tessel_error(ctx);
    tessel_clear_error(ctx);
  }
  for (double smoothing : {-0.1, 1.5, double(NAN)}) {
    tessel_cross_entropy_smoothed(ctx, TESSEL_F32, TESSEL_F32, TESSEL_I32, x,
                                  labels, loss, 2, 3, TESSEL_LOSS_MEAN, 0.0,
                                  smoothing);
    ASSERT_NE(tessel_error(ctx), nullptr);
    EXPECT_NE(std::string(tessel_error(ctx))
                  .find("tessel_cross_entropy_smoothed: label smoothing"),
              std::string::npos)
        << tessel_error(ctx);
    tessel_clear_error(ctx);
    tessel_cross_entropy_grad_smoothed(ctx, TESSEL_F32, TESSEL_F32, TESSEL_I32,
                                       x, labels, dl, x, 2, 3, TESSEL_LOSS_MEAN,
                                       1.0, smoothing);
    ASSERT_NE(tessel_error(ctx), nullptr);
    EXPECT_NE(std::string(tessel_error(ctx)).find("must be in [0, 1]"),
              std::string::npos)
        << tessel_error(ctx);
    tessel_clear_error(ctx);
  }
  EXPECT_EQ(loss[0], 0.0f);
  // An f32 loss of f64 logits is no loss type of theirs.
  tessel_cross_entropy_grad_softcap(ctx, TESSEL_F64, TESSEL_F32, TESSEL_I32, x,
                                    labels, dl, x, 1, 3, TESSEL_LOSS_MEAN, 1.0);
  ASSERT_NE(tessel_error(ctx), nullptr);
  tessel_clear_error(ctx);
}

} // namespace
