//===- NormTest.cpp - Softmax, layer/batch norm and cross-entropy ---------===//

#include "TestUtil.h"

using namespace tt;

namespace {

using NormTest = RuntimeTest;

/// Output tolerance of a kernel computed in f32 (f64) and stored in dtype:
/// one ulp of the result plus a compute error scaled by `scale`.
double rtolOf(int32_t dtype) {
  return dtype == TESSEL_F32 || dtype == TESSEL_F64 ? 64 * eps(dtype)
                                                    : eps(dtype);
}
double atolOf(int32_t dtype, double scale) {
  // f16 results below 2^-14 are subnormal, with a fixed quantum of 2^-24.
  return 64 * computeEps(dtype) * scale + (dtype == TESSEL_F16 ? 0x1p-24 : 0);
}

std::vector<double> refSoftmax(const std::vector<double> &x, int64_t outer,
                               int64_t dim, int64_t inner) {
  std::vector<double> y(x.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < inner; ++j) {
      auto at = [&](int64_t d) { return size_t((o * dim + d) * inner + j); };
      double mx = -INFINITY, sum = 0;
      for (int64_t d = 0; d < dim; ++d)
        mx = std::max(mx, x[at(d)]);
      for (int64_t d = 0; d < dim; ++d)
        sum += std::exp(x[at(d)] - mx);
      for (int64_t d = 0; d < dim; ++d)
        y[at(d)] = std::exp(x[at(d)] - mx) / sum;
    }
  return y;
}

TEST_F(NormTest, SoftmaxMatchesReference) {
  const int64_t shapes[][3] = {{1, 1, 1}, {7, 13, 1}, {3, 7, 5}, {2, 1, 13},
                               {1, 100, 3}};
  for (int32_t dtype : kFloatTypes) {
    for (const auto &s : shapes) {
      SCOPED_TRACE(std::string(dtypeName(dtype)) + " " + std::to_string(s[0]) +
                   "x" + std::to_string(s[1]) + "x" + std::to_string(s[2]));
      auto x = randomValues(dtype, size_t(s[0] * s[1] * s[2]), -8, 8, 21);
      auto xb = encode(dtype, x);
      std::vector<uint8_t> y(xb.size());
      tessel_softmax(ctx, dtype, xb.data(), y.data(), s[0], s[1], s[2]);
      expectClose(decode(dtype, y), refSoftmax(x, s[0], s[1], s[2]),
                  rtolOf(dtype), atolOf(dtype, 1e-3));
    }
  }
}

TEST_F(NormTest, SoftmaxIsStableForLargeLogits) {
  float x[4] = {1000.f, 1001.f, -1000.f, 999.f}, y[4];
  tessel_softmax(ctx, TESSEL_F32, x, y, 1, 4, 1);
  auto ref = refSoftmax({1000, 1001, -1000, 999}, 1, 4, 1);
  for (int i = 0; i < 4; ++i)
    EXPECT_NEAR(y[i], ref[size_t(i)], 1e-6) << i;
}

TEST_F(NormTest, LayerNormAndRmsNormMatchReference) {
  const int64_t shapes[][2] = {{1, 1}, {7, 13}, {3, 100}, {13, 7}};
  for (int32_t dtype : kFloatTypes) {
    for (const auto &s : shapes) {
      for (int rms : {0, 1}) {
        int64_t rows = s[0], cols = s[1];
        SCOPED_TRACE(std::string(dtypeName(dtype)) + " " +
                     std::to_string(rows) + "x" + std::to_string(cols) +
                     (rms ? " rms" : ""));
        auto x = randomValues(dtype, size_t(rows * cols), -3, 5, 31);
        auto g = randomValues(dtype, size_t(cols), 0.5, 1.5, 32);
        auto b = randomValues(dtype, size_t(cols), -1, 1, 33);
        auto xb = encode(dtype, x), gb = encode(dtype, g),
             bb = encode(dtype, b);
        std::vector<uint8_t> y(xb.size());
        const double epsv = 1e-5;
        tessel_layer_norm(ctx, dtype, xb.data(), gb.data(),
                          rms ? nullptr : bb.data(), y.data(), rows, cols,
                          epsv, rms);
        std::vector<double> ref(x.size());
        for (int64_t r = 0; r < rows; ++r) {
          double mean = 0, var = 0;
          for (int64_t c = 0; c < cols; ++c)
            mean += x[size_t(r * cols + c)];
          mean = rms ? 0 : mean / double(cols);
          for (int64_t c = 0; c < cols; ++c)
            var += std::pow(x[size_t(r * cols + c)] - mean, 2);
          var /= double(cols);
          for (int64_t c = 0; c < cols; ++c)
            ref[size_t(r * cols + c)] =
                (x[size_t(r * cols + c)] - mean) / std::sqrt(var + epsv) *
                    g[size_t(c)] +
                (rms ? 0 : b[size_t(c)]);
        }
        expectClose(decode(dtype, y), ref, rtolOf(dtype), atolOf(dtype, 10));
      }
    }
  }
}

TEST_F(NormTest, BatchNormMatchesReference) {
  const int64_t shapes[][3] = {{3, 7, 5}, {1, 13, 1}, {7, 3, 1}, {2, 1, 13}};
  for (int32_t dtype : kFloatTypes) {
    for (const auto &s : shapes) {
      int64_t outer = s[0], ch = s[1], inner = s[2];
      SCOPED_TRACE(std::string(dtypeName(dtype)) + " " +
                   std::to_string(outer) + "x" + std::to_string(ch) + "x" +
                   std::to_string(inner));
      auto x = randomValues(dtype, size_t(outer * ch * inner), -2, 6, 41);
      auto g = randomValues(dtype, size_t(ch), 0.5, 1.5, 42);
      auto b = randomValues(dtype, size_t(ch), -1, 1, 43);
      auto xb = encode(dtype, x), gb = encode(dtype, g), bb = encode(dtype, b);
      std::vector<uint8_t> y(xb.size());
      const double epsv = 1e-3;
      tessel_batch_norm(ctx, dtype, xb.data(), gb.data(), bb.data(), y.data(),
                        outer, ch, inner, epsv);
      std::vector<double> ref(x.size());
      auto at = [&](int64_t o, int64_t c, int64_t i) {
        return size_t((o * ch + c) * inner + i);
      };
      for (int64_t c = 0; c < ch; ++c) {
        double mean = 0, var = 0, n = double(outer * inner);
        for (int64_t o = 0; o < outer; ++o)
          for (int64_t i = 0; i < inner; ++i)
            mean += x[at(o, c, i)];
        mean /= n;
        for (int64_t o = 0; o < outer; ++o)
          for (int64_t i = 0; i < inner; ++i)
            var += std::pow(x[at(o, c, i)] - mean, 2);
        var /= n;
        for (int64_t o = 0; o < outer; ++o)
          for (int64_t i = 0; i < inner; ++i)
            ref[at(o, c, i)] = (x[at(o, c, i)] - mean) / std::sqrt(var + epsv) *
                                   g[size_t(c)] +
                               b[size_t(c)];
      }
      expectClose(decode(dtype, y), ref, rtolOf(dtype), atolOf(dtype, 10));
    }
  }
}

TEST_F(NormTest, CrossEntropyMatchesReference) {
  const int64_t shapes[][2] = {{1, 1}, {7, 13}, {13, 7}, {3, 101}};
  for (int32_t dtype : kFloatTypes) {
    for (int32_t labelType : {TESSEL_I32, TESSEL_I64}) {
      for (const auto &s : shapes) {
        for (int32_t red : {TESSEL_LOSS_MEAN, TESSEL_LOSS_SUM, TESSEL_LOSS_NONE}) {
          int64_t rows = s[0], classes = s[1];
          SCOPED_TRACE(std::string(dtypeName(dtype)) + " " +
                       dtypeName(labelType) + " " + std::to_string(rows) +
                       "x" + std::to_string(classes) + " red " +
                       std::to_string(red));
          auto x = randomValues(dtype, size_t(rows * classes), -6, 6, 51);
          std::vector<double> labels(static_cast<size_t>(rows));
          for (int64_t r = 0; r < rows; ++r)
            labels[size_t(r)] = double((r * 7 + 2) % classes);
          auto xb = encode(dtype, x), lb = encode(labelType, labels);
          std::vector<double> loss(static_cast<size_t>(rows));
          double total = 0;
          for (int64_t r = 0; r < rows; ++r) {
            double mx = -INFINITY, sum = 0;
            for (int64_t c = 0; c < classes; ++c)
              mx = std::max(mx, x[size_t(r * classes + c)]);
            for (int64_t c = 0; c < classes; ++c)
              sum += std::exp(x[size_t(r * classes + c)] - mx);
            loss[size_t(r)] = mx + std::log(sum) -
                              x[size_t(r * classes + int64_t(labels[size_t(r)]))];
            total += loss[size_t(r)];
          }
          std::vector<double> ref =
              red == TESSEL_LOSS_NONE ? loss
              : red == TESSEL_LOSS_SUM ? std::vector<double>{total}
                                       : std::vector<double>{total / double(rows)};
          std::vector<uint8_t> out(ref.size() *
                                   size_t(tessel_dtype_size(dtype)));
          tessel_cross_entropy(ctx, dtype, labelType, xb.data(), lb.data(),
                               out.data(), rows, classes, red);
          expectClose(decode(dtype, out), ref, rtolOf(dtype),
                      atolOf(dtype, 10));
        }
      }
    }
  }
}

TEST_F(NormTest, CrossEntropyIsStableForLargeLogits) {
  float x[6] = {1e4f, 1e4f + 1, 1e4f - 1, -1e4f, -1e4f, -1e4f + 2};
  int32_t labels[2] = {1, 0};
  float out[2];
  tessel_cross_entropy(ctx, TESSEL_F32, TESSEL_I32, x, labels, out, 2, 3,
                       TESSEL_LOSS_NONE);
  double l0 = std::log(std::exp(-1.0) + 1 + std::exp(-2.0));
  double l1 = 2 + std::log(2 + std::exp(2.0)) - 2;
  EXPECT_NEAR(out[0], l0, 1e-5);
  EXPECT_NEAR(out[1], l1, 1e-5);
}

TEST_F(NormTest, CrossEntropyBadLabelSetsError) {
  float x[6] = {0, 1, 2, 3, 4, 5}, out = 0;
  int64_t labels[2] = {0, 3};
  tessel_cross_entropy(ctx, TESSEL_F32, TESSEL_I64, x, labels, &out, 2, 3,
                       TESSEL_LOSS_MEAN);
  ASSERT_NE(tessel_error(ctx), nullptr);
  EXPECT_NE(std::string(tessel_error(ctx)).find("label 3"), std::string::npos);
  tessel_clear_error(ctx);
  EXPECT_EQ(tessel_error(ctx), nullptr);
  labels[1] = -1;
  tessel_cross_entropy(ctx, TESSEL_F32, TESSEL_I64, x, labels, &out, 2, 3,
                       TESSEL_LOSS_SUM);
  EXPECT_NE(tessel_error(ctx), nullptr);
  tessel_clear_error(ctx);
}

} // namespace
