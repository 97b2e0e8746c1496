//===- DataTest.cpp - Strided copy, reduce and embedding kernels ----------===//

#include "TestUtil.h"

#include <cstring>
#include <numeric>

using namespace tt;

namespace {

using DataTest = RuntimeTest;

/// Reference strided copy over doubles, by explicit multi-index.
void refStridedCopy(const std::vector<double> &in, std::vector<double> &out,
                    const std::vector<int64_t> &shape,
                    const std::vector<int64_t> &is,
                    const std::vector<int64_t> &os) {
  int64_t total = 1;
  for (int64_t s : shape)
    total *= s;
  for (int64_t flat = 0; flat < total; ++flat) {
    int64_t rem = flat, io = 0, oo = 0;
    for (int d = int(shape.size()) - 1; d >= 0; --d) {
      int64_t i = rem % shape[size_t(d)];
      rem /= shape[size_t(d)];
      io += i * is[size_t(d)];
      oo += i * os[size_t(d)];
    }
    out[size_t(oo)] = in[size_t(io)];
  }
}

struct CopyCase {
  const char *name;
  std::vector<int64_t> shape, inStrides, outStrides;
  size_t inSize, outSize;
};

std::vector<int64_t> rowMajor(const std::vector<int64_t> &shape) {
  std::vector<int64_t> s(shape.size());
  int64_t acc = 1;
  for (int d = int(shape.size()) - 1; d >= 0; --d) {
    s[size_t(d)] = acc;
    acc *= shape[size_t(d)];
  }
  return s;
}

TEST_F(DataTest, StridedCopyMatchesReference) {
  std::vector<CopyCase> cases = {
      {"scalar", {}, {}, {}, 1, 1},
      {"contiguous", {7, 13}, {13, 1}, {13, 1}, 91, 91},
      {"transpose", {7, 13}, {1, 7}, {13, 1}, 91, 91},
      {"broadcast-row", {7, 13}, {0, 1}, {13, 1}, 13, 91},
      {"broadcast-col", {7, 13}, {1, 0}, {13, 1}, 7, 91},
      // Rows 2..8 and columns 1..5 of a [13, 7] tensor.
      {"slice", {7, 5}, {7, 1}, {5, 1}, 91, 35},
      // The second half of a concat along dim 1: [3, 5] into [3, 12] at 7.
      {"concat", {3, 5}, {5, 1}, {12, 1}, 15, 36},
      // A [3, 1, 5, 7] tensor permuted (2, 0, 3, 1).
      {"permute4", {3, 1, 5, 7}, {35, 35, 7, 1}, {7, 1, 21, 1}, 105, 105},
      {"unit-strided", {1, 1, 1}, {5, 3, 1}, {1, 1, 1}, 1, 1},
  };
  for (int32_t dtype : {TESSEL_F32, TESSEL_BF16, TESSEL_F64, TESSEL_I64}) {
    for (const CopyCase &c : cases) {
      SCOPED_TRACE(std::string(dtypeName(dtype)) + " " + c.name);
      auto in = randomValues(dtype, c.inSize, -100, 100, 3);
      std::vector<double> ref(c.outSize, -7.0);
      int64_t inOff = std::string(c.name) == "slice" ? 2 * 7 + 1 : 0;
      int64_t outOff = std::string(c.name) == "concat" ? 7 : 0;
      std::vector<double> inView(in.begin() + inOff, in.end());
      std::vector<double> outView(ref.begin() + outOff, ref.end());
      refStridedCopy(inView, outView, c.shape, c.inStrides, c.outStrides);
      std::copy(outView.begin(), outView.end(), ref.begin() + outOff);

      auto inB = encode(dtype, in);
      auto outB = encode(dtype, std::vector<double>(c.outSize, -7.0));
      int64_t es = tessel_dtype_size(dtype);
      tessel_strided_copy(ctx, dtype, inB.data() + inOff * es,
                          outB.data() + outOff * es, int32_t(c.shape.size()),
                          c.shape.data(), c.inStrides.data(),
                          c.outStrides.data());
      expectClose(decode(dtype, outB), ref, 0.0, 0.0);
    }
  }
}

// A random permutation of a rank-5 tensor exercises the generic odometer.
TEST_F(DataTest, StridedCopyRank5Permutation) {
  std::vector<int64_t> shape = {2, 3, 5, 7, 4};
  std::vector<int> perm = {4, 2, 0, 3, 1};
  std::vector<int64_t> permShape(5);
  for (int d = 0; d < 5; ++d)
    permShape[size_t(d)] = shape[size_t(perm[size_t(d)])];
  auto outRM = rowMajor(permShape);
  std::vector<int64_t> outStrides(5);
  for (int d = 0; d < 5; ++d)
    outStrides[size_t(perm[size_t(d)])] = outRM[size_t(d)];
  auto inStrides = rowMajor(shape);
  auto in = randomValues(TESSEL_F32, 840, -1, 1, 9);
  std::vector<double> ref(840);
  refStridedCopy(in, ref, shape, inStrides, outStrides);
  auto inB = encode(TESSEL_F32, in);
  std::vector<uint8_t> outB(inB.size());
  tessel_strided_copy(ctx, TESSEL_F32, inB.data(), outB.data(), 5,
                      shape.data(), inStrides.data(), outStrides.data());
  expectClose(decode(TESSEL_F32, outB), ref, 0.0, 0.0);
}

/// Reference reduction in double.
std::vector<double> refReduce(int32_t kind, const std::vector<double> &in,
                              const std::vector<int64_t> &shape,
                              uint64_t mask) {
  std::vector<int64_t> outShape;
  for (size_t d = 0; d < shape.size(); ++d)
    if (!((mask >> d) & 1))
      outShape.push_back(shape[d]);
  int64_t outCount = 1, redCount = 1;
  for (size_t d = 0; d < shape.size(); ++d)
    ((mask >> d) & 1 ? redCount : outCount) *= shape[d];
  std::vector<double> acc(static_cast<size_t>(outCount),
                          kind == TESSEL_REDUCE_MAX ? -INFINITY : 0.0);
  for (size_t flat = 0; flat < in.size(); ++flat) {
    int64_t rem = int64_t(flat), o = 0, scale = 1;
    for (int d = int(shape.size()) - 1; d >= 0; --d) {
      int64_t i = rem % shape[size_t(d)];
      rem /= shape[size_t(d)];
      if (!((mask >> d) & 1)) {
        o += i * scale;
        scale *= shape[size_t(d)];
      }
    }
    double &a = acc[size_t(o)];
    a = kind == TESSEL_REDUCE_MAX ? std::max(a, in[flat]) : a + in[flat];
  }
  if (kind == TESSEL_REDUCE_MEAN)
    for (double &a : acc)
      a /= double(redCount);
  return acc;
}

TEST_F(DataTest, ReduceMatchesReferenceForEveryMask) {
  const std::vector<std::vector<int64_t>> shapes = {
      {13}, {7, 13}, {3, 5, 7}, {2, 3, 1, 7}, {1, 13, 1}, {17, 1}};
  for (int32_t dtype : kAllTypes) {
    for (const auto &shape : shapes) {
      int64_t total = 1;
      for (int64_t s : shape)
        total *= s;
      auto in = randomValues(dtype, size_t(total), -10, 10, uint64_t(total));
      auto inB = encode(dtype, in);
      for (uint64_t mask = 0; mask < (1u << shape.size()); ++mask) {
        for (int32_t kind :
             {TESSEL_REDUCE_SUM, TESSEL_REDUCE_MEAN, TESSEL_REDUCE_MAX}) {
          if (kind == TESSEL_REDUCE_MEAN && isInt(dtype))
            continue;
          SCOPED_TRACE(std::string(dtypeName(dtype)) + " rank " +
                       std::to_string(shape.size()) + " mask " +
                       std::to_string(mask) + " kind " + std::to_string(kind));
          auto ref = refReduce(kind, in, shape, mask);
          std::vector<uint8_t> out(ref.size() *
                                   size_t(tessel_dtype_size(dtype)));
          tessel_reduce(ctx, kind, dtype, inB.data(), out.data(),
                        int32_t(shape.size()), shape.data(), mask);
          // Sums accumulate in f64 and round once into the dtype.
          double rtol = isInt(dtype) ? 0 : eps(dtype);
          double atol = isInt(dtype) ? 0 : eps(dtype) * 10 * total * 1e-3;
          expectClose(decode(dtype, out), ref, rtol, atol);
        }
      }
    }
  }
}

// A splat constant: every element of every width is the host's one value,
// nothing past `count` is written; misuse is reported, not run.
TEST_F(DataTest, FillWritesTheOneValueEverywhere) {
  const double f64 = -2.75;
  const float f32 = 1.5f;
  const uint16_t half = 0x3c00, bf16 = 0xbf80;
  const int32_t i32 = -7;
  const int64_t i64 = int64_t(1) << 40;
  struct Case {
    int32_t dtype;
    const void *value;
  };
  for (Case c : {Case{TESSEL_F32, &f32}, Case{TESSEL_F16, &half},
                 Case{TESSEL_BF16, &bf16}, Case{TESSEL_F64, &f64},
                 Case{TESSEL_I32, &i32}, Case{TESSEL_I64, &i64}}) {
    const size_t es = size_t(tessel_dtype_size(c.dtype)), count = 37;
    std::vector<uint8_t> out((count + 1) * es, 0xee);
    tessel_fill(ctx, c.dtype, out.data(), int64_t(count), c.value);
    for (size_t i = 0; i < count; ++i)
      EXPECT_EQ(std::memcmp(&out[i * es], c.value, es), 0)
          << "dtype " << c.dtype << " element " << i;
    for (size_t b = count * es; b < out.size(); ++b)
      EXPECT_EQ(out[b], 0xee) << "dtype " << c.dtype << " past the end";
  }
  float untouched = 4.0f;
  tessel_fill(ctx, TESSEL_F32, &untouched, 0, &f32);
  EXPECT_EQ(untouched, 4.0f);
  tessel_fill(ctx, TESSEL_F32, &untouched, -1, &f32);
  EXPECT_STREQ(tessel_error(ctx), "tessel_fill: negative count");
  tessel_clear_error(ctx);
  tessel_fill(ctx, TESSEL_F32, &untouched, 1, nullptr);
  EXPECT_STREQ(tessel_error(ctx), "tessel_fill: null value");
  tessel_clear_error(ctx);
  tessel_fill(ctx, 99, &untouched, 1, &f32);
  EXPECT_NE(tessel_error(ctx), nullptr);
  tessel_clear_error(ctx);
  EXPECT_EQ(untouched, 4.0f);
}

TEST_F(DataTest, ReduceScalarAndErrors) {
  float x = 3.5f, y = 0;
  tessel_reduce(ctx, TESSEL_REDUCE_SUM, TESSEL_F32, &x, &y, 0, nullptr, 0);
  EXPECT_EQ(y, 3.5f);
  int32_t ints[3] = {1, 2, 3}, out = 0;
  int64_t shape[1] = {3};
  tessel_reduce(ctx, TESSEL_REDUCE_MEAN, TESSEL_I32, ints, &out, 1, shape, 1);
  EXPECT_NE(tessel_error(ctx), nullptr);
  tessel_clear_error(ctx);
  tessel_reduce(ctx, TESSEL_REDUCE_SUM, TESSEL_I32, ints, &out, 1, shape, 2);
  EXPECT_NE(tessel_error(ctx), nullptr); // Mask bit beyond the rank.
  tessel_clear_error(ctx);
}

// The CPU's widened reduction is the unfused ops' values, bit for bit: the
// reduction in the 16-bit dtype, then the cast to f32 (tessel/runtime.h).
TEST_F(DataTest, ReduceF32IsTheReductionWidened) {
  const std::vector<int64_t> shape = {3, 5, 7};
  auto in = randomValues(TESSEL_BF16, 105, -10, 10, 105);
  for (int32_t dtype : {TESSEL_BF16, TESSEL_F16}) {
    auto inB = encode(dtype, in);
    for (uint64_t mask = 0; mask < 8; ++mask)
      for (int32_t kind :
           {TESSEL_REDUCE_SUM, TESSEL_REDUCE_MEAN, TESSEL_REDUCE_MAX}) {
        SCOPED_TRACE(std::string(dtypeName(dtype)) + " mask " +
                     std::to_string(mask) + " kind " + std::to_string(kind));
        size_t count = 1;
        for (size_t d = 0; d < shape.size(); ++d)
          if (!((mask >> d) & 1))
            count *= size_t(shape[d]);
        std::vector<uint16_t> narrow(count);
        std::vector<float> expected(count), wide(count, -1.0f);
        tessel_reduce(ctx, kind, dtype, inB.data(), narrow.data(), 3,
                      shape.data(), mask);
        tessel_cast(ctx, dtype, TESSEL_F32, narrow.data(), expected.data(),
                    int64_t(count));
        tessel_reduce_f32(ctx, kind, dtype, inB.data(), wide.data(), 3,
                          shape.data(), mask);
        ASSERT_EQ(tessel_error(ctx), nullptr) << tessel_error(ctx);
        EXPECT_EQ(0, std::memcmp(wide.data(), expected.data(),
                                 count * sizeof(float)));
      }
  }
}

TEST_F(DataTest, ReduceF32MisuseSetsErrors) {
  uint16_t in[4] = {0x3f80, 0x3f80, 0x3f80, 0x3f80}; // bf16 ones
  float out[2] = {7.0f, 7.0f};
  int64_t shape[2] = {2, 2};
  struct Case {
    int32_t kind, dtype;
    uint64_t mask;
    const char *message;
  } cases[] = {
      {TESSEL_REDUCE_SUM, TESSEL_F32, 1,
       "tessel_reduce_f32: unsupported dtype 0"},
      {TESSEL_REDUCE_SUM, TESSEL_I32, 1,
       "tessel_reduce_f32: unsupported dtype 4"},
      {7, TESSEL_BF16, 1, "tessel_reduce_f32: unknown kind 7"},
      {TESSEL_REDUCE_SUM, TESSEL_BF16, 4,
       "tessel_reduce_f32: mask names a dimension beyond rank 2"},
  };
  for (const Case &t : cases) {
    tessel_reduce_f32(ctx, t.kind, t.dtype, in, out, 2, shape, t.mask);
    EXPECT_EQ(std::string(tessel_error(ctx) ? tessel_error(ctx) : ""),
              t.message);
    tessel_clear_error(ctx);
  }
  EXPECT_EQ(out[0], 7.0f); // refused: nothing written
  tessel_reduce_f32(ctx, TESSEL_REDUCE_SUM, TESSEL_BF16, in, out, 2, shape, 1);
  EXPECT_EQ(tessel_error(ctx), nullptr);
  EXPECT_EQ(out[0], 2.0f);
  EXPECT_EQ(out[1], 2.0f);
}

TEST_F(DataTest, EmbeddingGathersRows) {
  const int64_t vocab = 13, hidden = 7, numIds = 11;
  for (int32_t dtype : {TESSEL_F32, TESSEL_BF16, TESSEL_F16}) {
    for (int32_t idsType : {TESSEL_I32, TESSEL_I64}) {
      SCOPED_TRACE(std::string(dtypeName(dtype)) + " ids " +
                   dtypeName(idsType));
      auto table = randomValues(dtype, size_t(vocab * hidden), -1, 1, 4);
      std::vector<double> ids(numIds);
      for (int64_t i = 0; i < numIds; ++i)
        ids[size_t(i)] = double((i * 5 + 3) % vocab);
      auto tableB = encode(dtype, table), idsB = encode(idsType, ids);
      std::vector<uint8_t> out(static_cast<size_t>(numIds * hidden * tessel_dtype_size(dtype)));
      tessel_embedding(ctx, dtype, idsType, tableB.data(), idsB.data(),
                       out.data(), numIds, vocab, hidden, 0, vocab);
      std::vector<double> ref;
      for (double id : ids)
        ref.insert(ref.end(), table.begin() + long(id) * hidden,
                   table.begin() + long(id + 1) * hidden);
      expectClose(decode(dtype, out), ref, 0.0, 0.0);
    }
  }
}

TEST_F(DataTest, EmbeddingOutOfRangeIdSetsErrorAndWritesZero) {
  std::vector<float> table(5 * 3, 1.0f), out(3 * 3, 9.0f);
  int64_t ids[3] = {4, 5, -1};
  tessel_embedding(ctx, TESSEL_F32, TESSEL_I64, table.data(), ids, out.data(),
                   3, 5, 3, 0, 5);
  ASSERT_NE(tessel_error(ctx), nullptr);
  EXPECT_NE(std::string(tessel_error(ctx)).find("id 5"), std::string::npos);
  for (int j = 0; j < 3; ++j) {
    EXPECT_EQ(out[size_t(j)], 1.0f);
    EXPECT_EQ(out[size_t(3 + j)], 0.0f);
    EXPECT_EQ(out[size_t(6 + j)], 0.0f);
  }
  tessel_clear_error(ctx);
  EXPECT_EQ(tessel_error(ctx), nullptr);
}

} // namespace
