//===- ResidualNormTest.cpp - A residual add fused with its norm ----------===//
//
// tessel_add_layer_norm and tessel_layer_norm_grad_add promise the values
// of the two calls they replace, bit for bit: the add then the norm of the
// rounded sum, the norm's gradient rounded then added to the residual
// gradient. Checked on every float dtype, layer and RMS norm, rows within
// and past the vector loops' widths, the sum in place of an addend.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

#include <cstring>

using namespace tt;

namespace {

using ResidualNormTest = RuntimeTest;
using Bytes = std::vector<uint8_t>;

const int64_t kShapes[][2] = {{1, 1}, {7, 13}, {3, 300}, {2, 1000}};

Bytes randomBytes(int32_t dtype, int64_t count, uint32_t seed) {
  return encode(dtype, randomValues(dtype, size_t(count), -3, 3, seed));
}

const void *ptr(const Bytes &b) { return b.empty() ? nullptr : b.data(); }
void *ptr(Bytes &b) { return b.empty() ? nullptr : b.data(); }

std::string describe(int32_t dtype, const int64_t *shape, bool rms) {
  return std::string(dtypeName(dtype)) + " " + std::to_string(shape[0]) + "x" +
         std::to_string(shape[1]) + (rms ? " rms" : " layer");
}

TEST_F(ResidualNormTest, AddLayerNormIsAddThenNorm) {
  for (int32_t dtype : kFloatTypes)
    for (const auto &shape : kShapes)
      for (bool rms : {false, true}) {
        SCOPED_TRACE(describe(dtype, shape, rms));
        const int64_t rows = shape[0], cols = shape[1], count = rows * cols;
        Bytes a = randomBytes(dtype, count, 1), b = randomBytes(dtype, count, 2),
              g = randomBytes(dtype, cols, 3),
              beta = rms ? Bytes() : randomBytes(dtype, cols, 4);
        Bytes wantSum(a.size()), wantY(a.size());
        tessel_binary(ctx, TESSEL_ADD, dtype, a.data(), b.data(),
                      wantSum.data(), count);
        tessel_layer_norm(ctx, dtype, wantSum.data(), g.data(), ptr(beta),
                          wantY.data(), rows, cols, 1e-5, rms);

        Bytes sum(a.size()), y(a.size());
        tessel_add_layer_norm(ctx, dtype, a.data(), b.data(), g.data(),
                              ptr(beta), sum.data(), y.data(), rows, cols,
                              1e-5, rms);
        EXPECT_EQ(sum, wantSum);
        EXPECT_EQ(y, wantY);

        // The sum written over the first addend (the ABI allows it).
        Bytes inPlace = a;
        tessel_add_layer_norm(ctx, dtype, inPlace.data(), b.data(), g.data(),
                              ptr(beta), inPlace.data(), y.data(), rows, cols,
                              1e-5, rms);
        EXPECT_EQ(inPlace, wantSum);
        EXPECT_EQ(y, wantY);
      }
}

TEST_F(ResidualNormTest, LayerNormGradAddIsGradThenAdd) {
  for (int32_t dtype : kFloatTypes)
    for (const auto &shape : kShapes)
      for (bool rms : {false, true}) {
        SCOPED_TRACE(describe(dtype, shape, rms));
        const int64_t rows = shape[0], cols = shape[1], count = rows * cols;
        const size_t bytes = size_t(count * tessel_dtype_size(dtype)),
                     colBytes = size_t(cols * tessel_dtype_size(dtype));
        Bytes x = randomBytes(dtype, count, 5), g = randomBytes(dtype, cols, 6),
              dy = randomBytes(dtype, count, 7),
              residual = randomBytes(dtype, count, 8);
        Bytes wantDx(bytes), wantDg(colBytes), wantDb(colBytes);
        tessel_layer_norm_grad(ctx, dtype, x.data(), g.data(), dy.data(),
                               wantDx.data(), wantDg.data(), wantDb.data(),
                               rows, cols, 1e-5, rms);
        tessel_binary(ctx, TESSEL_ADD, dtype, residual.data(), wantDx.data(),
                      wantDx.data(), count);

        Bytes dx(bytes), dg(colBytes), db(colBytes);
        tessel_layer_norm_grad_add(ctx, dtype, x.data(), g.data(), dy.data(),
                                   residual.data(), dx.data(), dg.data(),
                                   db.data(), rows, cols, 1e-5, rms);
        EXPECT_EQ(dx, wantDx);
        EXPECT_EQ(dg, wantDg);
        EXPECT_EQ(db, wantDb);

        // No parameter gradients, gamma null (ones).
        Bytes ones(bytes), wantOnes(bytes);
        tessel_layer_norm_grad(ctx, dtype, x.data(), nullptr, dy.data(),
                               wantOnes.data(), nullptr, nullptr, rows, cols,
                               1e-5, rms);
        tessel_binary(ctx, TESSEL_ADD, dtype, residual.data(), wantOnes.data(),
                      wantOnes.data(), count);
        tessel_layer_norm_grad_add(ctx, dtype, x.data(), nullptr, dy.data(),
                                   residual.data(), ones.data(), nullptr,
                                   nullptr, rows, cols, 1e-5, rms);
        EXPECT_EQ(ones, wantOnes);
      }
}

// Tests that no rows still zero the parameter gradients (sums over no
// rows), as tessel_layer_norm_grad does, and write nothing else.
TEST_F(ResidualNormTest, NoRowsZeroTheColumnSums) {
  float dg[3] = {1, 2, 3}, db[3] = {4, 5, 6}, g[3] = {1, 1, 1};
  tessel_layer_norm_grad_add(ctx, TESSEL_F32, nullptr, g, nullptr, nullptr,
                             nullptr, dg, db, 0, 3, 1e-5, 0);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(dg[i], 0.f);
    EXPECT_EQ(db[i], 0.f);
  }
  tessel_add_layer_norm(ctx, TESSEL_F32, nullptr, nullptr, g, nullptr,
                        nullptr, nullptr, 0, 3, 1e-5, 1);
}

TEST_F(ResidualNormTest, BadArgumentsAreNamed) {
  float v[4] = {};
  tessel_add_layer_norm(ctx, TESSEL_I32, v, v, v, v, v, v, 1, 4, 1e-5, 0);
  ASSERT_NE(tessel_error(ctx), nullptr);
  EXPECT_STREQ(tessel_error(ctx), "tessel_add_layer_norm: unsupported dtype 4");
  tessel_clear_error(ctx);
  tessel_layer_norm_grad_add(ctx, TESSEL_F32, v, v, v, v, v, v, v, -1, 4, 1e-5,
                             0);
  ASSERT_NE(tessel_error(ctx), nullptr);
  EXPECT_STREQ(tessel_error(ctx),
               "tessel_layer_norm_grad_add: negative shape [-1, 4]");
  tessel_clear_error(ctx);
  tessel_add_layer_norm(ctx, TESSEL_F32, v, v, v, v, v, v, INT64_MAX, 4, 1e-5,
                        0);
  ASSERT_NE(tessel_error(ctx), nullptr);
  EXPECT_STREQ(tessel_error(ctx), "tessel_add_layer_norm: [9223372036854775807, "
                                  "4] elements overflow int64");
  tessel_clear_error(ctx);
}

} // namespace
