//===- ParamGradF32Test.cpp - f32 gradients of 16-bit parameters ----------===//
//
// The ABI 14 entries write the f32 gradients of 16-bit parameters (a bf16
// step's, Megatron's f32 main_grad) themselves, instead of rounding their
// sums to 16 bits for a cast to widen:
// - tessel_layer_norm_grad_f32 and tessel_layer_norm_grad_add_f32, a norm's
//   column sums dγ = Σ dy·x̂ and dβ = Σ dy of f16/bf16 rows. Checked: dx
//   is the 16-bit entries' bit for bit; the f32 sums match a double
//   reference to f32 precision, where the 16-bit entries' are only as
//   close as their format; no rows give zero sums;
// - tessel_embedding_grad_f32, a table's scatter-add: each row's f64 sum
//   rounded once to f32, the 16-bit entry's the same sum rounded to 16
//   bits; blocks of the table as the whole.
// Both refuse f32 and f64 inputs.
//
//===----------------------------------------------------------------------===//

#include "BackwardTestSupport.h"

#include <cmath>

using namespace tt;

namespace {

using NormGradF32Test = RuntimeTest;
using Bytes = std::vector<uint8_t>;

const int32_t kHalfTypes[] = {TESSEL_F16, TESSEL_BF16};
const int64_t kShapes[][2] = {{1, 1}, {7, 13}, {64, 300}, {5, 1000}};

/// The column sums in double from the rows' values: dγ = Σ dy·x̂ (x̂ from
/// the row's mean and variance), dβ = Σ dy; `scale` gets Σ|dy·x̂| and
/// Σ|dy| per column, the size of the sums' rounding error.
void referenceSums(const std::vector<double> &x, const std::vector<double> &dy,
                   int64_t rows, int64_t cols, bool rms,
                   std::vector<double> &dg, std::vector<double> &db,
                   std::vector<double> &scale) {
  dg.assign(size_t(cols), 0.0);
  db.assign(size_t(cols), 0.0);
  scale.assign(size_t(cols), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    const double *xs = x.data() + r * cols, *dys = dy.data() + r * cols;
    const backward::RowStats stats =
        backward::normRowStats(xs, cols, rms, 1e-5);
    const double mean = stats.mean, rstd = stats.rstd;
    for (int64_t j = 0; j < cols; ++j) {
      double term = dys[j] * (xs[j] - mean) * rstd;
      dg[size_t(j)] += term;
      db[size_t(j)] += dys[j];
      scale[size_t(j)] += std::fabs(term) + std::fabs(dys[j]);
    }
  }
}

/// The largest |got − want| / scale over the columns.
double worstError(const std::vector<double> &got,
                  const std::vector<double> &want,
                  const std::vector<double> &scale) {
  double worst = 0;
  for (size_t j = 0; j < want.size(); ++j)
    worst = std::max(worst, std::fabs(got[j] - want[j]) / scale[j]);
  return worst;
}

TEST_F(NormGradF32Test, SumsAreF32AndDxIsTheHalfEntries) {
  for (int32_t dtype : kHalfTypes)
    for (const auto &shape : kShapes)
      for (bool rms : {false, true})
        for (bool add : {false, true}) {
          const int64_t rows = shape[0], cols = shape[1], count = rows * cols;
          SCOPED_TRACE(std::string(dtypeName(dtype)) + " " +
                       std::to_string(rows) + "x" + std::to_string(cols) +
                       (rms ? " rms" : " layer") + (add ? " add" : ""));
          std::vector<double> xv = randomValues(dtype, size_t(count), -3, 3, 1),
                              dyv =
                                  randomValues(dtype, size_t(count), -1, 1, 2);
          Bytes x = encode(dtype, xv), dy = encode(dtype, dyv),
                residual =
                    encode(dtype, randomValues(dtype, size_t(count), -1, 1, 3));
          const size_t bytes = size_t(count * tessel_dtype_size(dtype)),
                       halfCols = size_t(cols * tessel_dtype_size(dtype));
          // gamma null (ones): dγ and dβ do not depend on it.
          Bytes wantDx(bytes), dg16(halfCols), db16(halfCols), dx(bytes);
          std::vector<float> dg32(static_cast<size_t>(cols)), db32(dg32.size());
          if (add) {
            tessel_layer_norm_grad_add(
                ctx, dtype, x.data(), nullptr, dy.data(), residual.data(),
                wantDx.data(), dg16.data(), db16.data(), rows, cols, 1e-5, rms);
            tessel_layer_norm_grad_add_f32(
                ctx, dtype, x.data(), nullptr, dy.data(), residual.data(),
                dx.data(), dg32.data(), db32.data(), rows, cols, 1e-5, rms);
          } else {
            tessel_layer_norm_grad(ctx, dtype, x.data(), nullptr, dy.data(),
                                   wantDx.data(), dg16.data(), db16.data(),
                                   rows, cols, 1e-5, rms);
            tessel_layer_norm_grad_f32(ctx, dtype, x.data(), nullptr, dy.data(),
                                       dx.data(), dg32.data(), db32.data(),
                                       rows, cols, 1e-5, rms);
          }
          ASSERT_EQ(tessel_error(ctx), nullptr) << tessel_error(ctx);
          EXPECT_EQ(dx, wantDx);

          std::vector<double> dg, db, scale;
          referenceSums(xv, dyv, rows, cols, rms, dg, db, scale);
          std::vector<double> g32(dg32.begin(), dg32.end()),
              b32(db32.begin(), db32.end());
          // x̂ is computed in f32 (the kernels' arithmetic), each sum is
          // rounded once to f32: a few f32 ulps of the terms' size.
          EXPECT_LE(worstError(g32, dg, scale), 1e-6);
          EXPECT_LE(worstError(b32, db, scale), 1e-6);
          // The 16-bit sums are the same sums rounded to 16 bits: the f32
          // ones widened and rounded give them within one 16-bit ulp.
          const double ulp16 = dtype == TESSEL_BF16 ? 0x1p-7 : 0x1p-10;
          std::vector<double> g16 = decode(dtype, dg16.data(), size_t(cols)),
                              b16 = decode(dtype, db16.data(), size_t(cols));
          for (int64_t j = 0; j < cols; ++j) {
            EXPECT_LE(std::fabs(g16[size_t(j)] - g32[size_t(j)]),
                      ulp16 * std::fabs(g32[size_t(j)]) + 1e-30)
                << "dgamma column " << j;
            EXPECT_LE(std::fabs(b16[size_t(j)] - b32[size_t(j)]),
                      ulp16 * std::fabs(b32[size_t(j)]) + 1e-30)
                << "dbeta column " << j;
          }
        }
}

// Tests that the f32 sums are closer to the exact ones than the 16-bit
// sums, which is why the step wants them: over many rows of bf16, the
// rounding of each column sum to 8 bits of mantissa dominates.
TEST_F(NormGradF32Test, F32SumsAreCloserThanBf16Sums) {
  const int64_t rows = 512, cols = 64, count = rows * cols;
  std::vector<double> xv = randomValues(TESSEL_BF16, size_t(count), -3, 3, 4),
                      dyv = randomValues(TESSEL_BF16, size_t(count), -1, 1, 5);
  Bytes x = encode(TESSEL_BF16, xv), dy = encode(TESSEL_BF16, dyv);
  Bytes dx(size_t(count) * 2), dg16(size_t(cols) * 2), db16(size_t(cols) * 2);
  std::vector<float> dg32(static_cast<size_t>(cols)), db32(dg32.size());
  tessel_layer_norm_grad(ctx, TESSEL_BF16, x.data(), nullptr, dy.data(),
                         dx.data(), dg16.data(), db16.data(), rows, cols, 1e-5,
                         0);
  tessel_layer_norm_grad_f32(ctx, TESSEL_BF16, x.data(), nullptr, dy.data(),
                             dx.data(), dg32.data(), db32.data(), rows, cols,
                             1e-5, 0);
  std::vector<double> dg, db, scale;
  referenceSums(xv, dyv, rows, cols, false, dg, db, scale);
  double err16 = worstError(decode(TESSEL_BF16, dg16.data(), size_t(cols)), dg,
                            scale),
         err32 = worstError(std::vector<double>(dg32.begin(), dg32.end()), dg,
                            scale);
  EXPECT_LT(err32 * 100, err16) << "f32 " << err32 << ", bf16 " << err16;
}

// Tests that no rows zero the f32 sums (all four bytes of each).
TEST_F(NormGradF32Test, NoRowsZeroTheF32Sums) {
  float dg[3] = {1, 2, 3}, db[3] = {4, 5, 6};
  tessel_layer_norm_grad_add_f32(ctx, TESSEL_BF16, nullptr, nullptr, nullptr,
                                 nullptr, nullptr, dg, db, 0, 3, 1e-5, 0);
  tessel_layer_norm_grad_f32(ctx, TESSEL_F16, nullptr, nullptr, nullptr,
                             nullptr, dg + 1, db + 1, 0, 2, 1e-5, 1);
  ASSERT_EQ(tessel_error(ctx), nullptr) << tessel_error(ctx);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(dg[i], 0.f);
    EXPECT_EQ(db[i], 0.f);
  }
}

TEST_F(NormGradF32Test, RefusesRowsThatAreNot16Bit) {
  float v[4] = {};
  tessel_layer_norm_grad_f32(ctx, TESSEL_F32, v, v, v, v, v, v, 1, 4, 1e-5, 0);
  ASSERT_NE(tessel_error(ctx), nullptr);
  EXPECT_STREQ(tessel_error(ctx),
               "tessel_layer_norm_grad_f32: unsupported dtype 0");
  tessel_clear_error(ctx);
  tessel_layer_norm_grad_add_f32(ctx, TESSEL_F64, v, v, v, v, v, v, v, 1, 4,
                                 1e-5, 0);
  ASSERT_NE(tessel_error(ctx), nullptr);
  EXPECT_STREQ(tessel_error(ctx),
               "tessel_layer_norm_grad_add_f32: unsupported dtype 3");
  tessel_clear_error(ctx);
  tessel_layer_norm_grad_f32(ctx, TESSEL_BF16, v, v, v, v, v, v, 2, -4, 1e-5,
                             0);
  ASSERT_NE(tessel_error(ctx), nullptr);
  EXPECT_STREQ(tessel_error(ctx),
               "tessel_layer_norm_grad_f32: negative shape [2, -4]");
  tessel_clear_error(ctx);
}

//===--- tessel_embedding_grad_f32
//-----------------------------------------===//

using EmbeddingGradF32Test = RuntimeTest;

TEST_F(EmbeddingGradF32Test, RowSumsAreF32) {
  const int64_t vocab = 11, hidden = 13, num = 200;
  for (int32_t dtype : kHalfTypes)
    for (int64_t first : {int64_t(0), int64_t(4)}) {
      // The whole table, then the block [4, 11) of a vocabulary split.
      const int64_t rows = vocab - first;
      SCOPED_TRACE(std::string(dtypeName(dtype)) + " rows from " +
                   std::to_string(first));
      std::vector<int32_t> ids(static_cast<size_t>(num));
      for (int64_t i = 0; i < num; ++i)
        ids[size_t(i)] =
            int32_t((i * 7 + i / 5) % (vocab - 1)); // row 10 unused
      std::vector<double> dv =
          randomValues(dtype, size_t(num * hidden), -1, 1, 9);
      Bytes dout = encode(dtype, dv);
      std::vector<float> table(static_cast<size_t>(rows * hidden), 7.0f);
      Bytes half(size_t(rows * hidden * tessel_dtype_size(dtype)));
      tessel_embedding_grad_f32(ctx, dtype, TESSEL_I32, ids.data(), dout.data(),
                                table.data(), num, rows, hidden, first, vocab);
      tessel_embedding_grad(ctx, dtype, TESSEL_I32, ids.data(), dout.data(),
                            half.data(), num, rows, hidden, first, vocab);
      ASSERT_EQ(tessel_error(ctx), nullptr) << tessel_error(ctx);
      std::vector<double> want(static_cast<size_t>(rows * hidden), 0.0);
      for (int64_t i = 0; i < num; ++i)
        if (ids[size_t(i)] >= first)
          for (int64_t j = 0; j < hidden; ++j)
            want[size_t((ids[size_t(i)] - first) * hidden + j)] +=
                dv[size_t(i * hidden + j)];
      std::vector<double> got16 = decode(dtype, half.data(), want.size());
      for (size_t k = 0; k < want.size(); ++k) {
        // The f64 sum in position order (the kernel's), rounded once: to
        // f32 here, to the 16-bit type by tessel_embedding_grad.
        EXPECT_EQ(table[k], float(want[k])) << "element " << k;
        EXPECT_EQ(got16[k], quantize(dtype, want[k])) << "element " << k;
      }
    }
}

TEST_F(EmbeddingGradF32Test, RefusesTablesThatAreNot16Bit) {
  int32_t ids[1] = {0};
  float dout[2] = {}, table[2] = {};
  tessel_embedding_grad_f32(ctx, TESSEL_F32, TESSEL_I32, ids, dout, table, 1, 1,
                            2, 0, 1);
  ASSERT_NE(tessel_error(ctx), nullptr);
  EXPECT_STREQ(tessel_error(ctx),
               "tessel_embedding_grad_f32: unsupported dtype 0");
  tessel_clear_error(ctx);
}

} // namespace
