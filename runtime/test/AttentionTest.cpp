//===- AttentionTest.cpp - Multi-head attention against a reference -------===//

#include "TestUtil.h"

#include <tuple>

using namespace tt;

namespace {

using AttentionTest = RuntimeTest;

struct Case {
  int64_t b, s, t, h, hkv, d, e;
  int causal;
  int64_t window = 0;
  double softcap = 0;
};

TEST_F(AttentionTest, MatchesReference) {
  const Case cases[] = {
      {1, 1, 1, 1, 1, 1, 1, 0},
      {1, 1, 1, 1, 1, 1, 1, 1},
      {2, 7, 7, 4, 2, 5, 3, 0},
      {2, 7, 7, 4, 2, 5, 3, 1},
      {1, 5, 13, 3, 1, 8, 7, 0},
      {1, 5, 13, 3, 1, 8, 7, 1},
      {1, 13, 5, 3, 3, 8, 7, 1},
      {2, 13, 13, 6, 3, 16, 16, 1},
      {3, 1, 11, 2, 2, 7, 13, 0},
      // Longer than one causal row block of the kernel (32 rows), with
      // fewer, equal and more keys than queries.
      {1, 70, 70, 2, 1, 8, 5, 1},
      {2, 67, 40, 2, 2, 4, 3, 1},
      {1, 40, 75, 2, 1, 4, 9, 1},
      {1, 45, 45, 1, 1, 3, 3, 0},
      // Sliding windows: of one key, narrower and wider than a row block,
      // and as wide as the sequence; with fewer keys than queries the rows
      // past the last key's window see none (zero output, lse -inf).
      {2, 7, 7, 4, 2, 5, 3, 1, 1},
      {2, 7, 7, 4, 2, 5, 3, 1, 3},
      {1, 70, 70, 2, 1, 8, 5, 1, 20},
      {1, 70, 70, 2, 1, 8, 5, 1, 45},
      {1, 45, 45, 1, 1, 3, 3, 1, 45},
      {2, 67, 40, 2, 2, 4, 3, 1, 10},
      // More rows than one unmasked block (256).
      {1, 300, 7, 2, 1, 4, 3, 0},
      // Soft-capped scores (Gemma 2), below the largest scores so tanh
      // bends them: unmasked, causal over row blocks, under a window.
      {2, 7, 7, 4, 2, 5, 3, 0, 0, 0.8},
      {1, 70, 70, 2, 1, 8, 5, 1, 0, 0.5},
      {1, 70, 70, 2, 1, 8, 5, 1, 20, 0.8},
      {1, 300, 7, 2, 1, 4, 3, 0, 0, 2.0},
  };
  for (int32_t dtype : kFloatTypes) {
    for (const Case &c : cases) {
      SCOPED_TRACE(std::string(dtypeName(dtype)) + " B" + std::to_string(c.b) +
                   " S" + std::to_string(c.s) + " T" + std::to_string(c.t) +
                   " H" + std::to_string(c.h) + "/" + std::to_string(c.hkv) +
                   " D" + std::to_string(c.d) + " E" + std::to_string(c.e) +
                   (c.causal ? " causal" : "") +
                   (c.window ? " window " + std::to_string(c.window) : "") +
                   (c.softcap ? " softcap " + std::to_string(c.softcap) : ""));
      auto q = randomValues(dtype, size_t(c.b * c.s * c.h * c.d), -1, 1, 61);
      auto k = randomValues(dtype, size_t(c.b * c.t * c.hkv * c.d), -1, 1, 62);
      auto v = randomValues(dtype, size_t(c.b * c.t * c.hkv * c.e), -2, 2, 63);
      double scale = 1.0 / std::sqrt(double(c.d)) * 1.7;
      std::vector<double> ref(static_cast<size_t>(c.b * c.s * c.h * c.e));
      std::vector<double> refLse(static_cast<size_t>(c.b * c.h * c.s));
      int64_t group = c.h / c.hkv;
      for (int64_t b = 0; b < c.b; ++b)
        for (int64_t h = 0; h < c.h; ++h) {
          int64_t hk = h / group;
          for (int64_t i = 0; i < c.s; ++i) {
            int64_t limit = c.causal ? std::min(i + 1, c.t) : c.t;
            int64_t first =
                c.window ? std::max<int64_t>(i - c.window + 1, 0) : 0;
            std::vector<double> p(static_cast<size_t>(limit), 0.0);
            double mx = -INFINITY, sum = 0;
            for (int64_t j = first; j < limit; ++j) {
              double dot = 0;
              for (int64_t x = 0; x < c.d; ++x)
                dot += q[size_t(((b * c.s + i) * c.h + h) * c.d + x)] *
                       k[size_t(((b * c.t + j) * c.hkv + hk) * c.d + x)];
              p[size_t(j)] =
                  c.softcap ? c.softcap * std::tanh(dot * scale / c.softcap)
                            : dot * scale;
              mx = std::max(mx, p[size_t(j)]);
            }
            for (int64_t j = first; j < limit; ++j)
              sum += (p[size_t(j)] = std::exp(p[size_t(j)] - mx));
            refLse[size_t((b * c.h + h) * c.s + i)] =
                sum > 0 ? mx + std::log(sum) : -INFINITY;
            for (int64_t y = 0; y < c.e; ++y) {
              double acc = 0;
              for (int64_t j = first; j < limit; ++j)
                acc += p[size_t(j)] / sum *
                       v[size_t(((b * c.t + j) * c.hkv + hk) * c.e + y)];
              ref[size_t(((b * c.s + i) * c.h + h) * c.e + y)] = acc;
            }
          }
        }
      auto qb = encode(dtype, q), kb = encode(dtype, k), vb = encode(dtype, v);
      std::vector<uint8_t> out(ref.size() * size_t(tessel_dtype_size(dtype)));
      if (c.softcap)
        tessel_attention_softcap(ctx, dtype, qb.data(), kb.data(), vb.data(),
                                 out.data(), nullptr, c.b, c.s, c.t, c.h, c.hkv,
                                 c.d, c.e, scale, c.causal, c.window,
                                 c.softcap);
      else if (c.window)
        tessel_attention_window(ctx, dtype, qb.data(), kb.data(), vb.data(),
                                out.data(), nullptr, c.b, c.s, c.t, c.h, c.hkv,
                                c.d, c.e, scale, c.causal, c.window);
      else
        tessel_attention(ctx, dtype, qb.data(), kb.data(), vb.data(),
                         out.data(), c.b, c.s, c.t, c.h, c.hkv, c.d, c.e, scale,
                         c.causal);
      // Outputs are convex combinations of |v| <= 2.
      double rtol = dtype == TESSEL_F64 ? 1e-12 : eps(dtype);
      double atol = 2 * 64 * computeEps(dtype) * 2 +
                    (dtype == TESSEL_F16 ? 0x1p-24 : 0);
      expectClose(decode(dtype, out), ref, rtol, atol);

      // With the log-sum-exp: the same output bytes, and lse [B, H, S] in
      // f64 for f64 and f32 otherwise (exact inputs, f32 arithmetic).
      std::vector<uint8_t> outLse(out.size());
      std::vector<double> lse64(refLse.size());
      std::vector<float> lse32(refLse.size());
      void *lse = dtype == TESSEL_F64 ? static_cast<void *>(lse64.data())
                                      : static_cast<void *>(lse32.data());
      tessel_attention_softcap(ctx, dtype, qb.data(), kb.data(), vb.data(),
                               outLse.data(), lse, c.b, c.s, c.t, c.h, c.hkv,
                               c.d, c.e, scale, c.causal, c.window, c.softcap);
      ASSERT_EQ(tessel_error(ctx), nullptr) << tessel_error(ctx);
      EXPECT_EQ(outLse, out);
      std::vector<double> gotLse =
          dtype == TESSEL_F64 ? lse64
                              : std::vector<double>(lse32.begin(), lse32.end());
      expectClose(gotLse, refLse, dtype == TESSEL_F64 ? 1e-13 : 1e-6,
                  dtype == TESSEL_F64 ? 1e-13 : 1e-6);
    }
  }
}

TEST_F(AttentionTest, LseOfRowsWithoutKeysIsMinusInfinity) {
  float q[4] = {1, 2, 3, 4}, lse32[2] = {0, 0};
  double q64[4] = {1, 2, 3, 4}, lse64[2] = {0, 0};
  float o[4];
  double o64[4];
  // B 1, S 2, T 0, H 1, D 2, E 2: no keys, zero outputs.
  tessel_attention_lse(ctx, TESSEL_F32, q, q, q, o, lse32, 1, 2, 0, 1, 1, 2, 2,
                       1.0, 0);
  tessel_attention_lse(ctx, TESSEL_F64, q64, q64, q64, o64, lse64, 1, 2, 0, 1,
                       1, 2, 2, 1.0, 0);
  ASSERT_EQ(tessel_error(ctx), nullptr);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(lse32[i], -INFINITY);
    EXPECT_EQ(lse64[i], -INFINITY);
  }
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(o[i], 0.0f);
    EXPECT_EQ(o64[i], 0.0);
  }
}

TEST_F(AttentionTest, LseNullSetsError) {
  float q[2] = {1, 2}, o[2];
  tessel_attention_lse(ctx, TESSEL_F32, q, q, q, o, nullptr, 1, 1, 1, 1, 1, 2,
                       2, 1.0, 0);
  ASSERT_NE(tessel_error(ctx), nullptr);
  EXPECT_NE(std::string(tessel_error(ctx)).find("tessel_attention_lse: lse is "
                                                "null"),
            std::string::npos)
      << tessel_error(ctx);
  tessel_clear_error(ctx);
}

// A window as wide as the sequence is no window: the causal kernel's
// bytes.
TEST_F(AttentionTest, WindowOfWholeSequenceIsCausal) {
  auto q = randomValues(TESSEL_F32, 2 * 40 * 2 * 8, -1, 1, 5);
  std::vector<float> x(q.begin(), q.end()), causal(x.size()),
      windowed(x.size());
  tessel_attention(ctx, TESSEL_F32, x.data(), x.data(), x.data(), causal.data(),
                   2, 40, 40, 2, 2, 8, 8, 0.3, 1);
  tessel_attention_window(ctx, TESSEL_F32, x.data(), x.data(), x.data(),
                          windowed.data(), nullptr, 2, 40, 40, 2, 2, 8, 8, 0.3,
                          1, 40);
  ASSERT_EQ(tessel_error(ctx), nullptr) << tessel_error(ctx);
  EXPECT_EQ(windowed, causal);
}

TEST_F(AttentionTest, BadWindowSetsError) {
  float q[2] = {1, 2}, o[2];
  for (auto [causal, window, message] :
       {std::tuple<int, int64_t, const char *>{
            0, 4, "tessel_attention_window: window 4 needs the causal mask"},
        {1, -1, "tessel_attention_window: window -1 is negative"}}) {
    tessel_attention_window(ctx, TESSEL_F32, q, q, q, o, nullptr, 1, 1, 1, 1, 1,
                            2, 2, 1.0, causal, window);
    ASSERT_NE(tessel_error(ctx), nullptr);
    EXPECT_EQ(std::string(tessel_error(ctx)), message);
    tessel_clear_error(ctx);
  }
}

// Soft cap 0 is no cap: the window entry's bytes.
TEST_F(AttentionTest, SoftcapZeroIsNoCap) {
  auto q = randomValues(TESSEL_F32, 2 * 40 * 2 * 8, -1, 1, 9);
  std::vector<float> x(q.begin(), q.end()), plain(x.size()), capped(x.size());
  tessel_attention_window(ctx, TESSEL_F32, x.data(), x.data(), x.data(),
                          plain.data(), nullptr, 2, 40, 40, 2, 2, 8, 8, 0.3, 1,
                          7);
  tessel_attention_softcap(ctx, TESSEL_F32, x.data(), x.data(), x.data(),
                           capped.data(), nullptr, 2, 40, 40, 2, 2, 8, 8, 0.3,
                           1, 7, 0.0);
  ASSERT_EQ(tessel_error(ctx), nullptr) << tessel_error(ctx);
  EXPECT_EQ(capped, plain);
}

TEST_F(AttentionTest, BadSoftcapSetsError) {
  float q[2] = {1, 2}, o[2], lse[1];
  for (double cap : {-1.0, double(INFINITY), double(NAN)}) {
    SCOPED_TRACE(cap);
    tessel_attention_softcap(ctx, TESSEL_F32, q, q, q, o, nullptr, 1, 1, 1, 1,
                             1, 2, 2, 1.0, 1, 0, cap);
    ASSERT_NE(tessel_error(ctx), nullptr);
    EXPECT_NE(std::string(tessel_error(ctx))
                  .find("tessel_attention_softcap: softcap "),
              std::string::npos)
        << tessel_error(ctx);
    tessel_clear_error(ctx);
    tessel_attention_grad_softcap(ctx, TESSEL_F32, q, q, q, o, lse, o, o, o, o,
                                  1, 1, 1, 1, 1, 2, 2, 1.0, 1, 0, cap);
    ASSERT_NE(tessel_error(ctx), nullptr);
    EXPECT_NE(std::string(tessel_error(ctx))
                  .find("is not 0 or a finite positive number"),
              std::string::npos)
        << tessel_error(ctx);
    tessel_clear_error(ctx);
  }
}

TEST_F(AttentionTest, BadHeadGroupingSetsError) {
  float q[3] = {0}, k[2] = {0}, v[2] = {0}, o[3];
  tessel_attention(ctx, TESSEL_F32, q, k, v, o, 1, 1, 1, 3, 2, 1, 1, 1.0, 0);
  EXPECT_NE(tessel_error(ctx), nullptr);
  tessel_clear_error(ctx);
}

} // namespace
