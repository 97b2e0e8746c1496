//===- VocabLossTest.cpp - The fused vocabulary-parallel loss kernels -----===//
//
// tessel_vocab_loss_stats and tessel_vocab_loss_grad (ABI 29), and their
// _f32 forms of 16-bit logits with f32 statistics (ABI 30): a row's
// classes split into blocks, each block's statistics completed as the
// partitioner completes them (the max's all-reduce, the sums of
// exponentials rescaled to it, the label's logit and the logits' sum
// summed), give the whole row's loss from its definition in f64 (the
// logits soft-capped or not, the target smoothed or not); each block's
// gradient from the whole rows' statistics, concatenated, is the whole
// row's gradient (tessel_cross_entropy_grad_smoothed, its loss of the
// statistics' type). In place equals
// apart, bit for bit; bad options and labels are refused.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

#include <cmath>

using namespace tt;

namespace {

using VocabLossTest = RuntimeTest;
using Vec = std::vector<double>;
using Bytes = std::vector<uint8_t>;

struct Options {
  double cap, smoothing;
};

/// The logits' dtype and the statistics': the same, or f32 for 16-bit
/// logits (the _f32 entries).
struct Types {
  int32_t logits, stats;
  bool wide() const { return stats != logits; }
};

/// Row r's label: (7r + 2) mod classes.
std::vector<double> labelsOf(int64_t rows, int64_t classes) {
  std::vector<double> l(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r)
    l[size_t(r)] = double((7 * r + 2) % classes);
  return l;
}

/// The columns [offset, offset + size) of a [rows, classes] matrix.
Vec columns(const Vec &x, int64_t rows, int64_t classes, int64_t offset,
            int64_t size) {
  Vec block;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < size; ++c)
      block.push_back(x[size_t(r * classes + offset + c)]);
  return block;
}

/// Each row's loss from its definition in f64.
Vec referenceLoss(const Vec &x, const Vec &labels, int64_t rows,
                  int64_t classes, Options o) {
  Vec loss;
  for (int64_t r = 0; r < rows; ++r) {
    Vec y;
    double mx = -INFINITY;
    for (int64_t k = 0; k < classes; ++k) {
      double v = x[size_t(r * classes + k)];
      y.push_back(o.cap > 0 ? o.cap * std::tanh(v / o.cap) : v);
      mx = std::max(mx, y.back());
    }
    double sum = 0, lse, row;
    for (double v : y)
      sum += std::exp(v - mx);
    lse = mx + std::log(sum);
    row = lse;
    for (int64_t k = 0; k < classes; ++k)
      row -= ((k == int64_t(labels[size_t(r)]) ? 1 - o.smoothing : 0.0) +
              o.smoothing / double(classes)) *
             y[size_t(k)];
    loss.push_back(row);
  }
  return loss;
}

TEST_F(VocabLossTest, BlocksCompleteToTheWholeLoss) {
  const int64_t rows = 5, classes = 60;
  const std::vector<std::vector<int64_t>> splits = {
      {30, 30}, {20, 20, 20}, {7, 0, 53}};
  const Options options[] = {{0, 0}, {2.5, 0}, {0, 0.1}, {2.5, 0.3}};
  const Types types[] = {{TESSEL_F64, TESSEL_F64},
                         {TESSEL_F32, TESSEL_F32},
                         {TESSEL_BF16, TESSEL_BF16},
                         {TESSEL_BF16, TESSEL_F32},
                         {TESSEL_F16, TESSEL_F32}};
  uint64_t seed = 11;
  for (Types t : types)
    for (const Options &o : options)
      for (const auto &split : splits) {
        const int32_t dtype = t.logits, stats = t.stats;
        SCOPED_TRACE(std::string(dtypeName(dtype)) + " statistics " +
                     dtypeName(stats) + " cap " + std::to_string(o.cap) +
                     " smoothing " + std::to_string(o.smoothing) + " blocks " +
                     std::to_string(split.size()));
        Vec x = randomValues(dtype, size_t(rows * classes), -6, 6, seed++);
        Vec labels = labelsOf(rows, classes);
        Bytes lb = encode(TESSEL_I64, labels);
        // Each row's gradient g, as the partitioner scales it.
        Vec g;
        for (int64_t r = 0; r < rows; ++r)
          g.push_back(0.25 * double(r + 1));
        Bytes gb = encode(stats, g);
        // The blocks' statistics, completed.
        Vec max(rows, -INFINITY), sum(rows, 0), label(rows, 0), total(rows, 0);
        std::vector<Vec> blockMax, blockSum;
        int64_t offset = 0;
        for (int64_t size : split) {
          Bytes xb = encode(dtype, columns(x, rows, classes, offset, size));
          size_t rowBytes = size_t(rows) * tessel_dtype_size(stats);
          Bytes m(rowBytes), s(rowBytes), l(rowBytes), ls(rowBytes);
          (t.wide() ? tessel_vocab_loss_stats_f32 : tessel_vocab_loss_stats)(
              ctx, dtype, TESSEL_I64, xb.data(), lb.data(), m.data(), s.data(),
              l.data(), ls.data(), rows, size, offset, classes, o.cap);
          ASSERT_EQ(tessel_error(ctx), nullptr) << tessel_error(ctx);
          blockMax.push_back(decode(stats, m));
          blockSum.push_back(decode(stats, s));
          for (int64_t r = 0; r < rows; ++r) {
            max[size_t(r)] =
                std::max(max[size_t(r)], blockMax.back()[size_t(r)]);
            label[size_t(r)] += decode(stats, l)[size_t(r)];
            total[size_t(r)] += decode(stats, ls)[size_t(r)];
          }
          offset += size;
        }
        for (size_t b = 0; b < split.size(); ++b)
          for (int64_t r = 0; r < rows; ++r)
            sum[size_t(r)] += blockSum[b][size_t(r)] *
                              std::exp(blockMax[b][size_t(r)] - max[size_t(r)]);
        Vec loss;
        for (int64_t r = 0; r < rows; ++r)
          loss.push_back(std::log(sum[size_t(r)]) + max[size_t(r)] -
                         label[size_t(r)] +
                         o.smoothing * (label[size_t(r)] -
                                        total[size_t(r)] / double(classes)));
        // The statistics are stored in their type: bf16 rounds each (the
        // logits are bf16 or f16 values, exact in f64 and f32 alike).
        double tol = stats == TESSEL_F64   ? 1e-12
                     : stats == TESSEL_F32 ? 2e-5
                                           : 0.05;
        expectClose(loss, referenceLoss(x, labels, rows, classes, o), tol, tol);

        // The blocks' gradients from the whole rows' statistics, concatenated,
        // against the whole row's gradient.
        Bytes mb = encode(stats, max), sb = encode(stats, sum);
        Vec grad(size_t(rows * classes));
        offset = 0;
        for (int64_t size : split) {
          Bytes xb = encode(dtype, columns(x, rows, classes, offset, size));
          Bytes db(xb.size());
          (t.wide() ? tessel_vocab_loss_grad_f32 : tessel_vocab_loss_grad)(
              ctx, dtype, TESSEL_I64, xb.data(), lb.data(), mb.data(),
              sb.data(), gb.data(), db.data(), rows, size, offset, classes,
              o.cap, o.smoothing);
          ASSERT_EQ(tessel_error(ctx), nullptr) << tessel_error(ctx);
          Vec d = decode(dtype, db);
          for (int64_t r = 0; r < rows; ++r)
            for (int64_t c = 0; c < size; ++c)
              grad[size_t(r * classes + offset + c)] = d[size_t(r * size + c)];
          offset += size;
        }
        Bytes xb = encode(dtype, x), want(xb.size());
        tessel_cross_entropy_grad_smoothed(
            ctx, dtype, stats, TESSEL_I64, xb.data(), lb.data(), gb.data(),
            want.data(), rows, classes, TESSEL_LOSS_NONE, o.cap, o.smoothing);
        ASSERT_EQ(tessel_error(ctx), nullptr) << tessel_error(ctx);
        expectClose(grad, decode(dtype, want), std::max(tol, eps(dtype)), tol);
      }
}

TEST_F(VocabLossTest, GradInPlaceEqualsApart) {
  const int64_t rows = 3, classes = 40;
  for (Types t :
       {Types{TESSEL_F32, TESSEL_F32}, Types{TESSEL_BF16, TESSEL_BF16},
        Types{TESSEL_F64, TESSEL_F64}, Types{TESSEL_BF16, TESSEL_F32}}) {
    const int32_t dtype = t.logits;
    Bytes xb =
        encode(dtype, randomValues(dtype, size_t(rows * classes), -4, 4, 5));
    Bytes lb = encode(TESSEL_I32, labelsOf(rows, classes));
    Bytes mb = encode(t.stats, Vec(rows, 4.0)),
          sb = encode(t.stats, Vec(rows, 9.0));
    Bytes gb = encode(t.stats, Vec(rows, 0.5));
    Bytes apart(xb.size()), inPlace = xb;
    auto grad = t.wide() ? tessel_vocab_loss_grad_f32 : tessel_vocab_loss_grad;
    grad(ctx, dtype, TESSEL_I32, xb.data(), lb.data(), mb.data(), sb.data(),
         gb.data(), apart.data(), rows, classes, 40, 120, 1.5, 0.2);
    grad(ctx, dtype, TESSEL_I32, inPlace.data(), lb.data(), mb.data(),
         sb.data(), gb.data(), inPlace.data(), rows, classes, 40, 120, 1.5,
         0.2);
    ASSERT_EQ(tessel_error(ctx), nullptr) << tessel_error(ctx);
    EXPECT_EQ(inPlace, apart) << dtypeName(dtype) << " " << dtypeName(t.stats);
  }
}

TEST_F(VocabLossTest, BadArgumentsSetError) {
  float x[6] = {1, 2, 3, 4, 5, 6}, rowsOut[4][2] = {};
  int32_t labels[2] = {0, 1};
  auto stats = [&](double cap, int64_t offset, int64_t total) {
    tessel_vocab_loss_stats(ctx, TESSEL_F32, TESSEL_I32, x, labels, rowsOut[0],
                            rowsOut[1], rowsOut[2], rowsOut[3], 2, 3, offset,
                            total, cap);
  };
  auto expectError = [&](const char *what) {
    ASSERT_NE(tessel_error(ctx), nullptr) << what;
    EXPECT_NE(std::string(tessel_error(ctx)).find(what), std::string::npos)
        << tessel_error(ctx);
    tessel_clear_error(ctx);
  };
  stats(-1.0, 0, 3);
  expectError("tessel_vocab_loss_stats: softcap");
  stats(0.0, 2, 4); // the block [2, 5) outside 4 classes
  expectError("tessel_vocab_loss_stats: block of 3 classes");
  labels[1] = 7; // outside [0, 6)
  stats(0.0, 0, 6);
  expectError("label 7 of row 1 outside [0, 6)");
  EXPECT_EQ(rowsOut[2][1], 0.0f); // its label logit
  labels[1] = 1;
  float g[2] = {1, 1};
  tessel_vocab_loss_grad(ctx, TESSEL_F32, TESSEL_I32, x, labels, rowsOut[0],
                         rowsOut[1], g, x, 2, 3, 0, 3, 0.0, 1.5);
  expectError("tessel_vocab_loss_grad: label smoothing 1.5");
  // f32 statistics are for 16-bit logits only.
  tessel_vocab_loss_stats_f32(ctx, TESSEL_F32, TESSEL_I32, x, labels,
                              rowsOut[0], rowsOut[1], rowsOut[2], rowsOut[3], 2,
                              3, 0, 3, 0.0);
  expectError("tessel_vocab_loss_stats_f32: unsupported dtype");
  tessel_vocab_loss_grad_f32(ctx, TESSEL_F64, TESSEL_I32, x, labels, rowsOut[0],
                             rowsOut[1], g, x, 2, 3, 0, 3, 0.0, 0.0);
  expectError("tessel_vocab_loss_grad_f32: unsupported dtype");
}

} // namespace
