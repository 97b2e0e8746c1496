//===- MatmulTest.cpp - Batched matmul against a double reference ---------===//

#include "TestUtil.h"

using namespace tt;

namespace {

using MatmulTest = RuntimeTest;

struct Shape {
  int64_t batch, m, n, k;
};

TEST_F(MatmulTest, MatchesReference) {
  const Shape shapes[] = {{1, 1, 1, 1},  {1, 7, 13, 5}, {3, 7, 13, 5},
                          {2, 17, 1, 9}, {2, 1, 19, 3}, {4, 13, 7, 37},
                          {1, 33, 29, 31}};
  for (int32_t dtype : kFloatTypes) {
    for (const Shape &s : shapes) {
      for (int ta : {0, 1}) {
        for (int tb : {0, 1}) {
          for (int shared : {0, 1}) {
            SCOPED_TRACE(std::string(dtypeName(dtype)) + " b" +
                         std::to_string(s.batch) + " m" + std::to_string(s.m) +
                         " n" + std::to_string(s.n) + " k" +
                         std::to_string(s.k) + " ta" + std::to_string(ta) +
                         " tb" + std::to_string(tb) + " shared" +
                         std::to_string(shared));
            int64_t bb = shared ? 1 : s.batch;
            auto a = randomValues(dtype, size_t(s.batch * s.m * s.k), -1, 1,
                                  uint64_t(s.m * 31 + s.k));
            auto b = randomValues(dtype, size_t(bb * s.k * s.n), -1, 1,
                                  uint64_t(s.n * 17 + s.k));
            std::vector<double> ref(static_cast<size_t>(s.batch * s.m * s.n));
            std::vector<double> absRef(ref.size());
            for (int64_t p = 0; p < s.batch; ++p) {
              const double *ap = a.data() + p * s.m * s.k;
              const double *bp = b.data() + (shared ? 0 : p * s.k * s.n);
              for (int64_t i = 0; i < s.m; ++i)
                for (int64_t j = 0; j < s.n; ++j) {
                  double acc = 0, accAbs = 0;
                  for (int64_t l = 0; l < s.k; ++l) {
                    double x = ta ? ap[l * s.m + i] : ap[i * s.k + l];
                    double y = tb ? bp[j * s.k + l] : bp[l * s.n + j];
                    acc += x * y;
                    accAbs += std::fabs(x * y);
                  }
                  ref[size_t((p * s.m + i) * s.n + j)] = acc;
                  absRef[size_t((p * s.m + i) * s.n + j)] = accAbs;
                }
            }
            auto ab = encode(dtype, a), bbytes = encode(dtype, b);
            std::vector<uint8_t> c(ref.size() *
                                   size_t(tessel_dtype_size(dtype)));
            tessel_matmul(ctx, dtype, ab.data(), bbytes.data(), c.data(),
                          s.batch, s.m, s.n, s.k, ta, tb, shared);
            auto got = decode(dtype, c);
            // One rounding of the result plus k roundings of the compute
            // type, bounded by Σ|a·b|.
            int bad = 0;
            for (size_t i = 0; i < ref.size(); ++i) {
              double tol = eps(dtype) * std::fabs(ref[i]) +
                           2 * double(s.k) * computeEps(dtype) * absRef[i] +
                           (dtype == TESSEL_F16 ? 0x1p-24 : 0);
              if (std::fabs(got[i] - ref[i]) > tol && bad++ < 5)
                ADD_FAILURE() << i << ": got " << got[i] << " want " << ref[i];
            }
            EXPECT_EQ(bad, 0);
          }
        }
      }
    }
  }
}

TEST_F(MatmulTest, EmptyInnerDimensionGivesZeros) {
  std::vector<float> c(6, 5.0f);
  tessel_matmul(ctx, TESSEL_F32, nullptr, nullptr, c.data(), 1, 2, 3, 0, 0, 0,
                0);
  EXPECT_EQ(c, std::vector<float>(6, 0.0f));
}

TEST_F(MatmulTest, IntegerDtypeSetsError) {
  int32_t a = 1, b = 2, c = 0;
  tessel_matmul(ctx, TESSEL_I32, &a, &b, &c, 1, 1, 1, 1, 0, 0, 0);
  EXPECT_NE(tessel_error(ctx), nullptr);
  tessel_clear_error(ctx);
}

} // namespace
