//===- LossFusionTest.cpp - The loss's fused entries (ABI 13) -------------===//
//
// tessel_cross_entropy_f32 and tessel_cross_entropy_grad_f32 fold the
// mixed-precision casts around the loss into its kernels, and
// tessel_cross_entropy_with_grad computes the loss and its gradient in one
// call, the gradient optionally over the logits. Each must give the
// unfused program's bits: the logits cast to f32, the f32 loss and
// gradient, the gradient cast back; the loss, then the gradient.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

using namespace tt;

namespace {

using LossFusionTest = RuntimeTest;

/// The unfused and fused results of one call shape.
struct LossRun {
  std::vector<uint8_t> loss, dlogits;
};

/// Rows of `classes` random logits of dtype with labels of labelType
/// (row r's label (7r + 2) mod classes, or -1 for row `badRow`).
struct LossCase {
  int32_t dtype, labelType;
  int64_t rows, classes;
  int64_t badRow = -1;
  std::vector<uint8_t> logits, labels;

  LossCase(int32_t dtype, int32_t labelType, int64_t rows, int64_t classes,
           uint64_t seed)
      : dtype(dtype), labelType(labelType), rows(rows), classes(classes) {
    logits = encode(dtype, randomValues(dtype, size_t(rows * classes), -8, 8,
                                        seed));
    setLabels();
  }
  void setLabels() {
    std::vector<double> l(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r)
      l[size_t(r)] = r == badRow ? -1.0 : double((r * 7 + 2) % classes);
    labels = encode(labelType, l);
  }
  size_t lossCount(int32_t reduction) const {
    return reduction == TESSEL_LOSS_NONE ? size_t(rows) : 1;
  }
};

/// dloss (f32) for a loss of `count` values: 0.75, 1.5, 2.25, ...
std::vector<float> dlossOf(size_t count) {
  std::vector<float> d(count);
  for (size_t i = 0; i < count; ++i)
    d[i] = 0.75f * float(i + 1);
  return d;
}

/// Cast to f32, the f32 loss and gradient, the gradient cast back.
LossRun unfused(tessel_ctx *ctx, const LossCase &c, int32_t reduction) {
  size_t n = size_t(c.rows * c.classes), sz = tessel_dtype_size(c.dtype);
  std::vector<float> wide(n), grad(n);
  tessel_cast(ctx, c.dtype, TESSEL_F32, c.logits.data(), wide.data(),
              int64_t(n));
  LossRun run{std::vector<uint8_t>(c.lossCount(reduction) * 4),
              std::vector<uint8_t>(n * sz)};
  std::vector<float> dloss = dlossOf(c.lossCount(reduction));
  tessel_cross_entropy(ctx, TESSEL_F32, c.labelType, wide.data(),
                       c.labels.data(), run.loss.data(), c.rows, c.classes,
                       reduction);
  tessel_cross_entropy_grad(ctx, TESSEL_F32, c.labelType, wide.data(),
                            c.labels.data(), dloss.data(), grad.data(), c.rows,
                            c.classes, reduction);
  tessel_cast(ctx, TESSEL_F32, c.dtype, grad.data(), run.dlogits.data(),
              int64_t(n));
  return run;
}

/// The _f32 entries: the loss in f32, then its gradient from an f32 dloss.
LossRun f32Entries(tessel_ctx *ctx, const LossCase &c, int32_t reduction) {
  size_t n = size_t(c.rows * c.classes), sz = tessel_dtype_size(c.dtype);
  LossRun run{std::vector<uint8_t>(c.lossCount(reduction) * 4),
              std::vector<uint8_t>(n * sz)};
  std::vector<float> dloss = dlossOf(c.lossCount(reduction));
  tessel_cross_entropy_f32(ctx, c.dtype, c.labelType, c.logits.data(),
                           c.labels.data(), run.loss.data(), c.rows, c.classes,
                           reduction);
  tessel_cross_entropy_grad_f32(ctx, c.dtype, c.labelType, c.logits.data(),
                                c.labels.data(), dloss.data(),
                                run.dlogits.data(), c.rows, c.classes,
                                reduction);
  return run;
}

// Tests that the _f32 entries give the unfused program's bits for bf16
// and f16 logits, every reduction, both label types, rows shorter and
// longer than a vector (the f32 kernel's vectorised log-sum-exp and
// gradient with their tails).
TEST_F(LossFusionTest, F32LossEqualsCastThenF32LossBitForBit) {
  const int64_t shapes[][2] = {{1, 1}, {3, 5}, {4, 37}, {2, 1000}, {9, 64}};
  uint64_t seed = 7;
  for (int32_t dtype : {TESSEL_BF16, TESSEL_F16})
    for (int32_t labelType : {TESSEL_I32, TESSEL_I64})
      for (const auto &s : shapes)
        for (int32_t reduction :
             {TESSEL_LOSS_MEAN, TESSEL_LOSS_SUM, TESSEL_LOSS_NONE}) {
          SCOPED_TRACE(std::string(dtypeName(dtype)) + " " +
                       dtypeName(labelType) + " " + std::to_string(s[0]) +
                       "x" + std::to_string(s[1]) + " reduction " +
                       std::to_string(reduction));
          LossCase c(dtype, labelType, s[0], s[1], seed++);
          LossRun want = unfused(ctx, c, reduction);
          LossRun got = f32Entries(ctx, c, reduction);
          ASSERT_EQ(tessel_error(ctx), nullptr);
          EXPECT_EQ(got.loss, want.loss);
          EXPECT_EQ(got.dlogits, want.dlogits);
        }
}

// Tests that a bad label records the entry's error and, as the unfused
// kernels do, gives its row a zero gradient and a zero loss term.
TEST_F(LossFusionTest, F32LossBadLabelSetsErrorAndZeroRow) {
  LossCase c(TESSEL_BF16, TESSEL_I64, 4, 37, 3);
  c.badRow = 2;
  c.setLabels();
  LossRun want = unfused(ctx, c, TESSEL_LOSS_NONE);
  tessel_clear_error(ctx);
  std::vector<uint8_t> loss(4 * 4), dlogits(size_t(4 * 37) * 2);
  std::vector<float> dloss = dlossOf(4);
  tessel_cross_entropy_f32(ctx, TESSEL_BF16, TESSEL_I64, c.logits.data(),
                           c.labels.data(), loss.data(), 4, 37,
                           TESSEL_LOSS_NONE);
  ASSERT_NE(tessel_error(ctx), nullptr);
  EXPECT_STREQ(tessel_error(ctx),
               "tessel_cross_entropy: label -1 of row 2 outside [0, 37)");
  tessel_clear_error(ctx);
  tessel_cross_entropy_grad_f32(ctx, TESSEL_BF16, TESSEL_I64, c.logits.data(),
                                c.labels.data(), dloss.data(), dlogits.data(),
                                4, 37, TESSEL_LOSS_NONE);
  ASSERT_NE(tessel_error(ctx), nullptr);
  EXPECT_STREQ(tessel_error(ctx),
               "tessel_cross_entropy_grad: label -1 of row 2 outside [0, 37)");
  tessel_clear_error(ctx);
  EXPECT_EQ(loss, want.loss);
  EXPECT_EQ(dlogits, want.dlogits);
  for (size_t i = 2 * 37 * 2; i < 3 * 37 * 2; ++i)
    ASSERT_EQ(dlogits[i], 0) << "byte " << i;
}

// Tests the entries' argument errors: f32 (or f64, or integer) logits,
// whose loss is already in their own type; a bad reduction or label
// dtype; a negative shape. Nothing is written.
TEST_F(LossFusionTest, F32LossMisuseSetsErrors) {
  float x[6] = {0, 1, 2, 3, 4, 5}, out[2] = {-7, -7}, dl = 1;
  int32_t labels[2] = {0, 1};
  struct Bad {
    int32_t dtype, labelType, reduction;
    int64_t rows, classes;
    const char *error;
  };
  const Bad cases[] = {
      {TESSEL_F32, TESSEL_I32, TESSEL_LOSS_SUM, 2, 3,
       ": unsupported dtype 0"},
      {TESSEL_F64, TESSEL_I32, TESSEL_LOSS_SUM, 2, 3,
       ": unsupported dtype 3"},
      {TESSEL_I32, TESSEL_I32, TESSEL_LOSS_SUM, 2, 3,
       ": unsupported dtype 4"},
      {TESSEL_BF16, TESSEL_F32, TESSEL_LOSS_SUM, 2, 3,
       ": labels must be i32 or i64, got dtype 0"},
      {TESSEL_BF16, TESSEL_I32, 7, 2, 3, ": unknown reduction 7"},
      {TESSEL_BF16, TESSEL_I32, TESSEL_LOSS_SUM, 2, -3,
       ": negative shape [2, -3]"},
  };
  for (const Bad &bad : cases) {
    SCOPED_TRACE(bad.error);
    tessel_cross_entropy_f32(ctx, bad.dtype, bad.labelType, x, labels, out,
                             bad.rows, bad.classes, bad.reduction);
    ASSERT_NE(tessel_error(ctx), nullptr);
    EXPECT_EQ(std::string(tessel_error(ctx)),
              std::string("tessel_cross_entropy_f32") + bad.error);
    tessel_clear_error(ctx);
    tessel_cross_entropy_grad_f32(ctx, bad.dtype, bad.labelType, x, labels,
                                  &dl, out, bad.rows, bad.classes,
                                  bad.reduction);
    ASSERT_NE(tessel_error(ctx), nullptr);
    EXPECT_EQ(std::string(tessel_error(ctx)),
              std::string("tessel_cross_entropy_grad_f32") + bad.error);
    tessel_clear_error(ctx);
    EXPECT_EQ(out[0], -7.0f);
    EXPECT_EQ(out[1], -7.0f);
  }
}

/// tessel_cross_entropy_with_grad's loss and gradient (over the logits
/// when inPlace), the loss in lossDtype.
LossRun withGrad(tessel_ctx *ctx, const LossCase &c, int32_t lossDtype,
                 int32_t reduction, bool inPlace) {
  size_t n = size_t(c.rows * c.classes), sz = tessel_dtype_size(c.dtype);
  size_t lossSize = size_t(tessel_dtype_size(lossDtype));
  std::vector<uint8_t> logits = c.logits;
  LossRun run{std::vector<uint8_t>(c.lossCount(reduction) * lossSize),
              std::vector<uint8_t>(n * sz)};
  std::vector<double> seeds;
  for (float d : dlossOf(c.lossCount(reduction)))
    seeds.push_back(double(d));
  std::vector<uint8_t> dloss = encode(lossDtype, seeds);
  void *dlogits = inPlace ? logits.data() : run.dlogits.data();
  tessel_cross_entropy_with_grad(ctx, c.dtype, lossDtype, c.labelType,
                                 logits.data(), c.labels.data(), dloss.data(),
                                 run.loss.data(), dlogits, c.rows, c.classes,
                                 reduction);
  if (inPlace)
    run.dlogits = logits;
  return run;
}

/// The loss, then its gradient, by the separate entries.
LossRun separately(tessel_ctx *ctx, const LossCase &c, int32_t lossDtype,
                   int32_t reduction) {
  if (lossDtype != c.dtype)
    return f32Entries(ctx, c, reduction);
  size_t n = size_t(c.rows * c.classes), sz = tessel_dtype_size(c.dtype);
  LossRun run{std::vector<uint8_t>(c.lossCount(reduction) * sz),
              std::vector<uint8_t>(n * sz)};
  std::vector<double> seeds;
  for (float d : dlossOf(c.lossCount(reduction)))
    seeds.push_back(double(d));
  std::vector<uint8_t> dloss = encode(c.dtype, seeds);
  tessel_cross_entropy(ctx, c.dtype, c.labelType, c.logits.data(),
                       c.labels.data(), run.loss.data(), c.rows, c.classes,
                       reduction);
  tessel_cross_entropy_grad(ctx, c.dtype, c.labelType, c.logits.data(),
                            c.labels.data(), dloss.data(), run.dlogits.data(),
                            c.rows, c.classes, reduction);
  return run;
}

// Tests that tessel_cross_entropy_with_grad gives the separate entries'
// bits, its gradient apart from the logits or over them, for every float
// type with its own loss and for f16/bf16 with an f32 loss.
TEST_F(LossFusionTest, WithGradEqualsLossThenGradBitForBit) {
  const int64_t shapes[][2] = {{1, 1}, {3, 5}, {4, 37}, {2, 1000}};
  const int32_t types[][2] = {
      {TESSEL_F32, TESSEL_F32},  {TESSEL_F64, TESSEL_F64},
      {TESSEL_BF16, TESSEL_BF16}, {TESSEL_F16, TESSEL_F16},
      {TESSEL_BF16, TESSEL_F32}, {TESSEL_F16, TESSEL_F32}};
  uint64_t seed = 11;
  for (const auto &t : types)
    for (const auto &s : shapes)
      for (int32_t reduction :
           {TESSEL_LOSS_MEAN, TESSEL_LOSS_SUM, TESSEL_LOSS_NONE})
        for (bool inPlace : {false, true}) {
          SCOPED_TRACE(std::string(dtypeName(t[0])) + " loss " +
                       dtypeName(t[1]) + " " + std::to_string(s[0]) + "x" +
                       std::to_string(s[1]) + " reduction " +
                       std::to_string(reduction) +
                       (inPlace ? " in place" : ""));
          LossCase c(t[0], TESSEL_I64, s[0], s[1], seed++);
          LossRun want = separately(ctx, c, t[1], reduction);
          LossRun got = withGrad(ctx, c, t[1], reduction, inPlace);
          ASSERT_EQ(tessel_error(ctx), nullptr);
          EXPECT_EQ(got.loss, want.loss);
          EXPECT_EQ(got.dlogits, want.dlogits);
        }
}

// Tests that a bad label records the loss's error once, gives its row a
// zero gradient and adds nothing to the loss, in place too.
TEST_F(LossFusionTest, WithGradBadLabel) {
  LossCase c(TESSEL_F32, TESSEL_I32, 4, 37, 5);
  c.badRow = 1;
  c.setLabels();
  LossRun want = separately(ctx, c, TESSEL_F32, TESSEL_LOSS_SUM);
  tessel_clear_error(ctx);
  LossRun got = withGrad(ctx, c, TESSEL_F32, TESSEL_LOSS_SUM, true);
  ASSERT_NE(tessel_error(ctx), nullptr);
  EXPECT_STREQ(tessel_error(ctx),
               "tessel_cross_entropy: label -1 of row 1 outside [0, 37)");
  tessel_clear_error(ctx);
  EXPECT_EQ(got.loss, want.loss);
  EXPECT_EQ(got.dlogits, want.dlogits);
  for (size_t i = 37 * 4; i < 2 * 37 * 4; ++i)
    ASSERT_EQ(got.dlogits[i], 0) << "byte " << i;
}

// Tests the fused entry's argument errors: a loss dtype that is neither
// the logits' nor f32, an f32 loss of f32 or f64 logits, a gradient that
// overlaps the logits without being them, a byte count past int64.
// Nothing is written.
TEST_F(LossFusionTest, WithGradMisuseSetsErrors) {
  float x[8] = {0, 1, 2, 3, 4, 5, 6, 7}, out = -7, dl = 1;
  float dx[8] = {-7, -7, -7, -7, -7, -7, -7, -7};
  int32_t labels[2] = {0, 1};
  auto call = [&](int32_t dtype, int32_t lossDtype, void *dlogits,
                  int64_t rows, int64_t classes) {
    tessel_cross_entropy_with_grad(ctx, dtype, lossDtype, TESSEL_I32, x,
                                   labels, &dl, &out, dlogits, rows, classes,
                                   TESSEL_LOSS_SUM);
    std::string error = tessel_error(ctx) ? tessel_error(ctx) : "";
    tessel_clear_error(ctx);
    return error;
  };
  EXPECT_EQ(call(TESSEL_F16, TESSEL_F64, dx, 2, 3),
            "tessel_cross_entropy_with_grad: loss dtype 3 (expected the "
            "logits' 1 or f32)");
  EXPECT_EQ(call(TESSEL_F64, TESSEL_F32, dx, 2, 3),
            "tessel_cross_entropy_with_grad: unsupported dtype 3");
  EXPECT_EQ(call(TESSEL_F32, TESSEL_F32, x + 1, 2, 3),
            "tessel_cross_entropy_with_grad: dlogits overlaps the logits "
            "without being them (in place is dlogits == logits)");
  EXPECT_EQ(call(TESSEL_F32, TESSEL_F32, dx, INT64_C(1) << 31,
                 INT64_C(1) << 31),
            "tessel_cross_entropy_with_grad: [2147483648, 2147483648] "
            "logits overflow int64 bytes");
  EXPECT_EQ(out, -7.0f);
  for (float v : dx)
    EXPECT_EQ(v, -7.0f);
  EXPECT_EQ(x[1], 1.0f);
}

} // namespace
