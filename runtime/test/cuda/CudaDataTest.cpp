//===- CudaDataTest.cpp - The CUDA data kernels against the CPU backend ---===//
//
// Host tests run data_math.h's functions the way data.cu's kernels do
// (the same index maps, the same per-thread runs, tree and splits of a
// reduction, the same sort-and-sum of the embedding gradient) and compare
// with the CPU backend through the C ABI. GPU tests (CpuVsCuda, skipped
// without a device) run the kernels themselves on both backends.
//
//===----------------------------------------------------------------------===//

#include "cuda/CudaTestUtil.h"
#include "cuda/data_math.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>

using namespace tessel::cuda;
using tessel::cudatest::CpuVsCuda;
using tessel::cudatest::createContext;

namespace {

/// A one-rank CPU context for the host tests.
class CudaDataHost : public ::testing::Test {
protected:
  void SetUp() override {
    cpu = createContext("cpu");
    ASSERT_NE(cpu, nullptr);
  }
  void TearDown() override {
    EXPECT_EQ(tessel_error(cpu), nullptr) << tessel_error(cpu);
    tessel_ctx_destroy(cpu);
  }
  tessel_ctx *cpu = nullptr;
};

std::vector<float> randomFloats(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float &x : v)
    x = dist(gen);
  return v;
}

template <class T> T fromFloat(float f) {
  return FloatElem<T>::store(double(f));
}
template <> int32_t fromFloat<int32_t>(float f) { return int32_t(f * 1000.0f); }
template <> int64_t fromFloat<int64_t>(float f) {
  return int64_t(double(f) * 1e15);
}

template <class T> std::vector<T> randomData(size_t n, uint32_t seed) {
  std::vector<float> f = randomFloats(n, seed);
  std::vector<T> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = fromFloat<T>(f[i]);
  return v;
}

template <class T> int32_t dtypeOf();
template <> int32_t dtypeOf<float>() { return TESSEL_F32; }
template <> int32_t dtypeOf<double>() { return TESSEL_F64; }
template <> int32_t dtypeOf<HalfBits>() { return TESSEL_F16; }
template <> int32_t dtypeOf<Bf16Bits>() { return TESSEL_BF16; }
template <> int32_t dtypeOf<int32_t>() { return TESSEL_I32; }
template <> int32_t dtypeOf<int64_t>() { return TESSEL_I64; }

/// Bits of an element, for exact comparisons (NaN == NaN of any payload).
template <class T> uint64_t bitsOfElem(T v) {
  uint64_t u = 0;
  std::memcpy(&u, &v, sizeof(T));
  return u;
}
template <class T> bool isNanElem(T v) {
  if constexpr (std::is_same<T, int32_t>::value ||
                std::is_same<T, int64_t>::value)
    return false;
  else
    return std::isnan(FloatElem<T>::load(v));
}

template <class T>
void expectSameBits(const std::vector<T> &got, const std::vector<T> &want,
                    const char *what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    bool same = bitsOfElem(got[i]) == bitsOfElem(want[i]) ||
                (isNanElem(got[i]) && isNanElem(want[i]));
    if (!same && bad++ < 5)
      ADD_FAILURE() << what << ": element " << i << " bits " << std::hex
                    << bitsOfElem(got[i]) << ", want " << bitsOfElem(want[i]);
  }
  EXPECT_EQ(bad, 0) << what;
}

/// A reduction's result: f64 within rounding of a different summation order
/// (1e-12 relative; the inputs are O(1) and sums have <= 40000 terms), every
/// other dtype bit for bit (f32 and 16-bit results are rounded once from a
/// double sum, as on the CPU; integers are exact).
template <class T>
void expectReduced(const std::vector<T> &got, const std::vector<T> &want) {
  if constexpr (std::is_same<T, double>::value) {
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      if (std::isnan(want[i]) || got[i] == want[i])
        EXPECT_EQ(std::isnan(got[i]), std::isnan(want[i])) << i;
      else
        EXPECT_NEAR(got[i], want[i], 1e-12 * (1 + std::fabs(want[i]))) << i;
    }
  } else {
    expectSameBits(got, want, "reduce");
  }
}

//===--- Host emulations of the kernels -----------------------------------===//

/// stridedCopy as the kernels compute it: the tiled transpose when it
/// plans one (tile by tile, as transposeKernel), else the element map (up
/// to kMaxDims after coalescing). Returns whether it tiled.
template <class T>
bool emulateStridedCopy(const std::vector<T> &in, std::vector<T> &out,
                        const std::vector<int64_t> &shape,
                        const std::vector<int64_t> &inStrides,
                        const std::vector<int64_t> &outStrides) {
  std::vector<Dim> dims;
  for (size_t d = 0; d < shape.size(); ++d)
    dims.push_back({shape[d], inStrides[d], outStrides[d]});
  dims = coalesce(dims);
  TransposePlan plan;
  if (planTranspose(dims, plan)) {
    for (int64_t r = 0; r < plan.restCount; ++r) {
      int64_t src0, dst0;
      plan.rest.offsets(r, src0, dst0);
      for (int64_t p0 = 0; p0 < plan.sizeP; p0 += kTile)
        for (int64_t q0 = 0; q0 < plan.sizeQ; q0 += kTile)
          for (int64_t p = p0; p < std::min(plan.sizeP, p0 + kTile); ++p)
            for (int64_t q = q0; q < std::min(plan.sizeQ, q0 + kTile); ++q)
              out[size_t(plan.dst(dst0, p, q))] =
                  in[size_t(plan.src(src0, p, q))];
    }
    return true;
  }
  EXPECT_LE(dims.size(), size_t(kMaxDims));
  IndexMap map = makeIndexMap(dims, 0, dims.size());
  int64_t total = 1;
  for (const Dim &d : dims)
    total *= d.size;
  for (int64_t i = 0; i < total; ++i) {
    int64_t src, dst;
    map.offsets(i, src, dst);
    out[size_t(dst)] = in[size_t(src)];
  }
  return false;
}

/// tessel_reduce in the kernels' order: per block (output, split) the
/// threads' strided runs, the fixed tree, then the splits in order.
template <class T>
std::vector<T> emulateReduce(int32_t kind, const std::vector<T> &in,
                             const ReducePlan &plan) {
  using Ops = ReduceOps<T>;
  using Acc = typename Ops::Acc;
  bool isMax = kind == TESSEL_REDUCE_MAX;
  ReduceSplit split = reduceSplit(plan);
  int lanes = plan.rowMajor ? kRowThreads : kColY;
  std::vector<T> out(static_cast<size_t>(plan.outputs));
  std::vector<Acc> lane(static_cast<size_t>(lanes));
  for (int64_t o = 0; o < plan.outputs; ++o) {
    Acc total = Ops::init(isMax);
    for (int64_t s = 0; s < split.splits; ++s) {
      int64_t begin = s * split.chunk;
      int64_t end = std::min(plan.reduced, begin + split.chunk);
      for (int t = 0; t < lanes; ++t) {
        Acc acc = Ops::init(isMax);
        for (int64_t r = begin + t; r < end; r += lanes)
          acc = Ops::combine(
              isMax, acc,
              Ops::load(in[size_t(plan.kept.offset(o) + plan.red.offset(r))]));
        lane[size_t(t)] = acc;
      }
      for (int half = lanes / 2; half > 0; half /= 2)
        for (int t = 0; t < half; ++t)
          lane[size_t(t)] =
              Ops::combine(isMax, lane[size_t(t)], lane[size_t(t + half)]);
      total = s == 0 ? lane[0] : Ops::combine(isMax, total, lane[0]);
    }
    out[size_t(o)] =
        Ops::store(total, kind == TESSEL_REDUCE_MEAN, plan.reduced);
  }
  return out;
}

/// embeddingGrad as the kernels compute it: stable sort of (row, position)
/// by row, each row's run summed in double in position order.
template <class T>
std::vector<T> emulateEmbeddingGrad(const std::vector<int64_t> &ids,
                                    const std::vector<T> &dout, int64_t rows,
                                    int64_t hidden, int64_t rowOffset,
                                    int64_t vocab) {
  std::vector<std::pair<int64_t, int64_t>> keys;
  for (size_t i = 0; i < ids.size(); ++i) {
    int64_t id = ids[i], local = id - rowOffset;
    bool here = id >= 0 && id < vocab && local >= 0 && local < rows;
    keys.push_back({here ? local : rows, int64_t(i)});
  }
  std::stable_sort(keys.begin(), keys.end(), [](const auto &a, const auto &b) {
    return a.first < b.first;
  });
  std::vector<T> dtable(size_t(rows * hidden), FloatElem<T>::store(0.0));
  for (size_t s = 0; s < keys.size(); ++s) {
    int64_t key = keys[s].first;
    if (key >= rows || (s > 0 && keys[s - 1].first == key))
      continue;
    for (int64_t c = 0; c < hidden; ++c) {
      double acc = 0.0;
      for (size_t j = s; j < keys.size() && keys[j].first == key; ++j)
        acc += FloatElem<T>::load(dout[size_t(keys[j].second * hidden + c)]);
      dtable[size_t(key * hidden + c)] = FloatElem<T>::store(acc);
    }
  }
  return dtable;
}

struct ReduceCase {
  std::vector<int64_t> shape;
  uint64_t mask;

  /// Elements of the input and of the output (the kept dimensions).
  int64_t inputCount() const {
    int64_t count = 1;
    for (int64_t s : shape)
      count *= s;
    return count;
  }
  int64_t outputCount() const {
    int64_t count = 1;
    for (size_t d = 0; d < shape.size(); ++d)
      if (!((mask >> d) & 1))
        count *= shape[d];
    return count;
  }
};

const std::vector<ReduceCase> &reduceCases() {
  static const std::vector<ReduceCase> cases = {
      {{}, 0},
      {{7, 13}, 0b01},
      {{7, 13}, 0b10},
      {{7, 13}, 0b11},
      {{3, 5, 7, 11}, 0b1010},
      {{3, 5, 7, 11}, 0b0101},
      {{3, 5, 7, 11}, 0b0110},
      {{3, 5, 7, 11}, 0b1001},
      {{3, 1, 7, 1}, 0b0010},
      {{3, 5, 7, 11}, 0},
      {{2, 20000}, 0b10}, // few long rows: splits over blocks
      {{20000, 3}, 0b01}, // few columns: splits over blocks
      {{64, 2, 96}, 0b101},
      {{5, 300}, 0b10},    // rows long enough for a block each
      {{3, 70, 2}, 0b010}, // a middle dimension
      {{5, 0, 3}, 0b010},  // an empty reduction
  };
  return cases;
}

template <class T> void checkReduceOnHost(tessel_ctx *cpu) {
  for (const ReduceCase &c : reduceCases()) {
    int64_t count = c.inputCount();
    std::vector<T> in = randomData<T>(size_t(count), uint32_t(count) + 7);
    if constexpr (!std::is_integral<T>::value)
      if (count > 3)
        in[3] = FloatElem<T>::store(std::nan("")); // a NaN for max to keep
    ReducePlan plan;
    int32_t rank = int32_t(c.shape.size());
    ASSERT_TRUE(planReduce(rank, c.shape.data(), c.mask, plan));
    if (plan.rowMajor && plan.reduced > 0)
      EXPECT_EQ(plan.red.offset(plan.reduced - 1), plan.reduced - 1);
    for (int32_t kind :
         {TESSEL_REDUCE_SUM, TESSEL_REDUCE_MEAN, TESSEL_REDUCE_MAX}) {
      if (kind == TESSEL_REDUCE_MEAN && std::is_integral<T>::value)
        continue;
      std::vector<T> want(size_t(plan.outputs));
      tessel_reduce(cpu, kind, dtypeOf<T>(), in.data(), want.data(), rank,
                    c.shape.data(), c.mask);
      std::vector<T> got = emulateReduce<T>(kind, in, plan);
      // f64 sums: a different order, within rounding of n terms.
      expectReduced(got, want);
    }
  }
}

} // namespace

//===--- Host tests -------------------------------------------------------===//

TEST(CudaDataMath, FastDivmodDividesExactly) {
  std::mt19937 gen(11);
  std::vector<uint32_t> divisors = {
      1, 2, 3, 5, 7, 13, 64, 96, 1000, 65535, 65536, 1u << 30, (1u << 31) - 1};
  for (int i = 0; i < 200; ++i)
    divisors.push_back(1 + gen() % ((1u << 31) - 1));
  for (uint32_t d : divisors) {
    FastDivmod fast(d);
    std::vector<uint32_t> ns = {0, 1, d - 1, d, (1u << 31) - 1};
    if (d < (1u << 30))
      ns.push_back(d + 1);
    for (int i = 0; i < 500; ++i)
      ns.push_back(gen() % (1u << 31));
    for (uint32_t n : ns)
      ASSERT_EQ(fast.div(n), n / d) << n << " / " << d;
  }
}

TEST_F(CudaDataHost, StridedCopyMapsMatchCpu) {
  struct Case {
    std::vector<int64_t> shape, in, out;
  };
  std::vector<Case> cases = {
      {{64, 96}, {96, 1}, {1, 64}},                // transpose
      {{17, 33}, {33, 1}, {1, 17}},                // odd transpose
      {{3, 40, 50}, {2000, 50, 1}, {2000, 1, 40}}, // batched transpose
      {{16, 3, 20}, {1, 320, 16}, {60, 20, 1}},    // tiles over a middle dim
      {{2, 7, 3, 5}, {105, 15, 5, 1}, {105, 5, 35, 1}}, // [B,S,H,D]→[B,H,S,D]
      {{7, 13}, {0, 1}, {13, 1}},                       // broadcast rows
      {{7, 13}, {1, 0}, {13, 1}},                       // broadcast columns
      {{5, 9}, {20, 2}, {9, 1}},                        // strided slice
      {{}, {}, {}},                                     // a scalar
      {{1, 6, 1, 4}, {24, 4, 4, 1}, {24, 1, 24, 6}},    // unit dims
      {{2, 2, 2, 2, 2, 2, 2, 3},
       {1, 2, 4, 8, 16, 32, 64, 128},
       {384, 192, 96, 48, 24, 12, 6, 1}}, // 8 reversed dims
  };
  int tiled = 0;
  for (const Case &c : cases) {
    int64_t count = 1, inSpan = 1, outSpan = 1;
    for (size_t d = 0; d < c.shape.size(); ++d) {
      count *= c.shape[d];
      inSpan += (c.shape[d] - 1) * c.in[d];
      outSpan += (c.shape[d] - 1) * c.out[d];
    }
    std::vector<float> in = randomFloats(size_t(inSpan), 9);
    std::vector<float> want(size_t(outSpan), -1.0f), got = want;
    tessel_strided_copy(cpu, TESSEL_F32, in.data(), want.data(),
                        int32_t(c.shape.size()), c.shape.data(), c.in.data(),
                        c.out.data());
    tiled += emulateStridedCopy(in, got, c.shape, c.in, c.out);
    expectSameBits(got, want, "strided copy");
  }
  EXPECT_EQ(tiled, 4) << "the transposes take the tiled kernel";
}

TEST_F(CudaDataHost, ReduceOrderMatchesCpuF32) {
  checkReduceOnHost<float>(cpu);
}
TEST_F(CudaDataHost, ReduceOrderMatchesCpuF64) {
  checkReduceOnHost<double>(cpu);
}
TEST_F(CudaDataHost, ReduceOrderMatchesCpuBf16) {
  checkReduceOnHost<Bf16Bits>(cpu);
}
TEST_F(CudaDataHost, ReduceOrderMatchesCpuF16) {
  checkReduceOnHost<HalfBits>(cpu);
}
TEST_F(CudaDataHost, ReduceOrderMatchesCpuI32) {
  checkReduceOnHost<int32_t>(cpu);
}
TEST_F(CudaDataHost, ReduceOrderMatchesCpuI64) {
  checkReduceOnHost<int64_t>(cpu);
}

TEST(CudaDataMath, ReducePlanRefusesTooManyInterleavedDims) {
  // 18 dims alternating kept/reduced: 9 of each even after coalescing.
  std::vector<int64_t> shape(18, 2);
  uint64_t mask = 0;
  for (int d = 1; d < 18; d += 2)
    mask |= uint64_t(1) << d;
  ReducePlan plan;
  EXPECT_FALSE(planReduce(18, shape.data(), mask, plan));
  // What data.cu reduces instead: kept dims first, reduced ones innermost.
  uint64_t inner = ((uint64_t(1) << 9) - 1) << 9;
  ASSERT_TRUE(planReduce(18, shape.data(), inner, plan));
  EXPECT_TRUE(plan.rowMajor);
  EXPECT_EQ(plan.outputs, 512);
  EXPECT_EQ(plan.reduced, 512);
}

template <class T> void checkEmbeddingGradOnHost(tessel_ctx *cpu) {
  const int64_t vocab = 50, hidden = 7;
  std::mt19937 gen(17);
  std::vector<int64_t> ids(300);
  for (int64_t &id : ids)
    id = int64_t(gen() % 12) * 4 % vocab; // repeats, several rows unused
  std::vector<T> dout = randomData<T>(ids.size() * size_t(hidden), 21);
  for (auto [rows, offset] :
       {std::pair<int64_t, int64_t>{vocab, 0}, {20, 10}, {13, 37}, {0, 50}}) {
    std::vector<T> want(size_t(rows * hidden));
    tessel_embedding_grad(cpu, dtypeOf<T>(), TESSEL_I64, ids.data(),
                          dout.data(), want.data(), int64_t(ids.size()), rows,
                          hidden, offset, vocab);
    std::vector<T> got =
        emulateEmbeddingGrad(ids, dout, rows, hidden, offset, vocab);
    expectSameBits(got, want, "embedding grad");
  }
}

TEST_F(CudaDataHost, EmbeddingGradMatchesCpuBits) {
  checkEmbeddingGradOnHost<float>(cpu);
  checkEmbeddingGradOnHost<double>(cpu);
  checkEmbeddingGradOnHost<Bf16Bits>(cpu);
  checkEmbeddingGradOnHost<HalfBits>(cpu);
}

//===--- GPU tests --------------------------------------------------------===//

namespace {

class CudaData : public CpuVsCuda {
protected:
  /// Runs `call(ctx, inputs..., output)` on both backends with the same
  /// inputs and returns (cpu, gpu) outputs of `outCount` elements.
  template <class Out, class In, class F>
  std::pair<std::vector<Out>, std::vector<Out>>
  both(const std::vector<In> &input, size_t outCount, F call) {
    std::vector<Out> onCpu(outCount);
    call(cpu, static_cast<const void *>(input.data()),
         static_cast<void *>(onCpu.data()));
    void *in = upload(gpu, input);
    void *out =
        tessel_alloc(gpu, int64_t(std::max<size_t>(1, outCount) * sizeof(Out)));
    call(gpu, in, out);
    std::vector<Out> onGpu = download<Out>(gpu, out, outCount);
    tessel_free(gpu, in);
    tessel_free(gpu, out);
    return {onCpu, onGpu};
  }

  template <class T> void checkReduce() {
    for (const ReduceCase &c : reduceCases()) {
      int64_t count = c.inputCount(), outCount = c.outputCount();
      std::vector<T> in = randomData<T>(size_t(count), uint32_t(count) + 3);
      for (int32_t kind :
           {TESSEL_REDUCE_SUM, TESSEL_REDUCE_MEAN, TESSEL_REDUCE_MAX}) {
        if (kind == TESSEL_REDUCE_MEAN && std::is_integral<T>::value)
          continue;
        auto [want, got] = both<T>(
            in, size_t(outCount), [&](tessel_ctx *ctx, const void *x, void *y) {
              tessel_reduce(ctx, kind, dtypeOf<T>(), x, y,
                            int32_t(c.shape.size()), c.shape.data(), c.mask);
            });
        expectReduced(got, want);
      }
    }
  }
};

} // namespace

TEST_F(CudaData, StridedCopyMatchesCpu) {
  struct Case {
    std::vector<int64_t> shape, in, out;
  };
  std::vector<int64_t> ten(10, 2), tenIn(10), tenOut(10);
  for (int d = 0; d < 10; ++d) {
    tenIn[size_t(d)] = int64_t(1) << d; // reversed dims: no merging
    tenOut[size_t(d)] = int64_t(1) << (9 - d);
  }
  std::vector<Case> cases = {
      {{512, 384}, {384, 1}, {1, 512}},
      {{17, 33}, {33, 1}, {1, 17}},
      {{3, 40, 50}, {2000, 50, 1}, {2000, 1, 40}},
      {{16, 3, 20}, {1, 320, 16}, {60, 20, 1}},
      {{2, 7, 3, 5}, {105, 15, 5, 1}, {105, 5, 35, 1}},
      {{7, 13}, {0, 1}, {13, 1}},
      {{5, 9}, {20, 2}, {9, 1}},
      {{1000}, {1}, {1}},
      {{}, {}, {}},
      {ten, tenIn, tenOut},
  };
  for (const Case &c : cases) {
    int64_t inSpan = 1, outSpan = 1;
    for (size_t d = 0; d < c.shape.size(); ++d) {
      inSpan += (c.shape[d] - 1) * c.in[d];
      outSpan += (c.shape[d] - 1) * c.out[d];
    }
    for (int32_t dtype : {TESSEL_F32, TESSEL_BF16, TESSEL_F64}) {
      size_t es = size_t(tessel_dtype_size(dtype));
      std::vector<uint8_t> in(size_t(inSpan) * es);
      std::mt19937 gen(1);
      for (uint8_t &b : in)
        b = uint8_t(gen());
      auto [want, got] = both<uint8_t>(
          in, size_t(outSpan) * es,
          [&](tessel_ctx *ctx, const void *x, void *y) {
            tessel_strided_copy(ctx, dtype, x, y, int32_t(c.shape.size()),
                                c.shape.data(), c.in.data(), c.out.data());
          });
      EXPECT_EQ(got, want) << "rank " << c.shape.size() << " dtype " << dtype;
    }
  }
}

// The value is host memory (a splat constant in the model's .so), the
// output device memory: each width, counts below and past one block.
TEST_F(CudaData, FillMatchesCpu) {
  const uint64_t bits = 0x0123456789abcdefull;
  for (int32_t dtype : {TESSEL_F32, TESSEL_BF16, TESSEL_F64, TESSEL_I64})
    for (int64_t count : {int64_t(1), int64_t(37), (int64_t(1) << 22) + 3}) {
      size_t bytes = size_t(count * tessel_dtype_size(dtype));
      std::vector<uint8_t> none;
      auto [want, got] = both<uint8_t>(
          none, bytes, [&](tessel_ctx *ctx, const void *, void *y) {
            tessel_fill(ctx, dtype, y, count, &bits);
          });
      ASSERT_EQ(tessel_error(gpu), nullptr) << tessel_error(gpu);
      EXPECT_TRUE(got == want) << "dtype " << dtype << " count " << count;
    }
}

TEST_F(CudaData, ReduceMatchesCpuF32) { checkReduce<float>(); }
TEST_F(CudaData, ReduceMatchesCpuF64) { checkReduce<double>(); }
TEST_F(CudaData, ReduceMatchesCpuBf16) { checkReduce<Bf16Bits>(); }
TEST_F(CudaData, ReduceMatchesCpuF16) { checkReduce<HalfBits>(); }
TEST_F(CudaData, ReduceMatchesCpuI32) { checkReduce<int32_t>(); }
TEST_F(CudaData, ReduceMatchesCpuI64) { checkReduce<int64_t>(); }

// The 16-bit sum written in f32 (ABI 16): combined in f64 and rounded once,
// to f32, where the CPU rounds to 16 bits first (the unfused ops' values):
// equal to the CPU's f64 reduction of the same values rounded to f32 (bf16
// sums of these sizes are exact in f64, in any order).
TEST_F(CudaData, ReduceF32IsTheF64ReductionRoundedOnce) {
  for (const ReduceCase &c : reduceCases()) {
    int64_t count = c.inputCount(), outCount = c.outputCount();
    std::vector<Bf16Bits> in =
        randomData<Bf16Bits>(size_t(count), uint32_t(count) + 5);
    std::vector<double> wide(in.size());
    for (size_t i = 0; i < in.size(); ++i)
      wide[i] = FloatElem<Bf16Bits>::load(in[i]);
    int32_t rank = int32_t(c.shape.size());
    for (int32_t kind :
         {TESSEL_REDUCE_SUM, TESSEL_REDUCE_MEAN, TESSEL_REDUCE_MAX}) {
      std::vector<double> exact(static_cast<size_t>(outCount));
      tessel_reduce(cpu, kind, TESSEL_F64, wide.data(), exact.data(), rank,
                    c.shape.data(), c.mask);
      std::vector<float> want(exact.begin(), exact.end());
      void *x = upload(gpu, in);
      void *y = tessel_alloc(gpu, int64_t(std::max<int64_t>(1, outCount) * 4));
      tessel_reduce_f32(gpu, kind, TESSEL_BF16, x, y, rank, c.shape.data(),
                        c.mask);
      std::vector<float> got = download<float>(gpu, y, size_t(outCount));
      tessel_free(gpu, x);
      tessel_free(gpu, y);
      ASSERT_EQ(tessel_error(gpu), nullptr) << tessel_error(gpu);
      expectSameBits(got, want, "reduce_f32");
    }
  }
}

TEST_F(CudaData, ReduceInterleavedBeyondEightDims) {
  std::vector<int64_t> shape(18, 2);
  uint64_t mask = 0;
  for (int d = 1; d < 18; d += 2)
    mask |= uint64_t(1) << d;
  std::vector<float> in = randomFloats(size_t(1) << 18, 4);
  auto [want, got] =
      both<float>(in, 512, [&](tessel_ctx *ctx, const void *x, void *y) {
        tessel_reduce(ctx, TESSEL_REDUCE_SUM, TESSEL_F32, x, y, 18,
                      shape.data(), mask);
      });
  expectSameBits(got, want, "interleaved reduce");
}

TEST_F(CudaData, EmbeddingMatchesCpu) {
  const int64_t vocab = 100;
  for (int64_t hidden : {1, 7, 64, 130}) {
    for (auto [rows, offset] :
         {std::pair<int64_t, int64_t>{vocab, 0}, {30, 40}}) {
      std::vector<float> table = randomFloats(size_t(rows * hidden), 2);
      std::vector<int32_t> ids32;
      std::vector<int64_t> ids64;
      std::mt19937 gen{uint32_t(hidden)};
      for (int i = 0; i < 333; ++i) {
        ids32.push_back(int32_t(gen() % vocab));
        ids64.push_back(int64_t(gen() % vocab));
      }
      for (int32_t idsDtype : {TESSEL_I32, TESSEL_I64}) {
        const void *hostIds = idsDtype == TESSEL_I32
                                  ? static_cast<const void *>(ids32.data())
                                  : static_cast<const void *>(ids64.data());
        size_t idBytes = size_t(tessel_dtype_size(idsDtype)) * 333;
        std::vector<uint8_t> idBuf(static_cast<const uint8_t *>(hostIds),
                                   static_cast<const uint8_t *>(hostIds) +
                                       idBytes);
        void *gpuIds = upload(gpu, idBuf);
        auto [want, got] =
            both<float>(table, size_t(333 * hidden),
                        [&](tessel_ctx *ctx, const void *tab, void *out) {
                          tessel_embedding(ctx, TESSEL_F32, idsDtype, tab,
                                           ctx == gpu ? gpuIds : hostIds, out,
                                           333, rows, hidden, offset, vocab);
                        });
        expectSameBits(got, want, "embedding");
        tessel_free(gpu, gpuIds);
      }
    }
  }
}

TEST_F(CudaData, EmbeddingBadIdZeroesRowAndRecordsError) {
  std::vector<float> table = randomFloats(40, 3); // [10, 4]
  std::vector<int64_t> ids = {1, 12, 3};
  void *gpuIds = upload(gpu, ids);
  void *gpuTable = upload(gpu, table);
  void *out = tessel_alloc(gpu, 12 * sizeof(float));
  tessel_embedding(gpu, TESSEL_F32, TESSEL_I64, gpuTable, gpuIds, out, 3, 10, 4,
                   0, 10);
  std::vector<float> got = download<float>(gpu, out, 12);
  const char *err = tessel_error(gpu);
  ASSERT_NE(err, nullptr);
  EXPECT_STREQ(err, "tessel_embedding: id 12 at position 1 outside [0, 10)");
  for (int j = 0; j < 4; ++j) {
    EXPECT_EQ(got[size_t(4 + j)], 0.0f);
    EXPECT_EQ(got[size_t(j)], table[size_t(4 + j)]);
  }
  tessel_clear_error(gpu);
  tessel_free(gpu, gpuIds);
  tessel_free(gpu, gpuTable);
  tessel_free(gpu, out);
}

TEST_F(CudaData, EmbeddingGradMatchesCpuBits) {
  const int64_t vocab = 50000, hidden = 64, numIds = 8192;
  std::mt19937 gen(23);
  std::vector<int64_t> ids(numIds);
  for (int64_t &id : ids) // a skewed distribution: long runs for frequent ids
    id = int64_t(gen() % 2 ? gen() % 50 : gen() % vocab);
  for (int32_t dtype : {TESSEL_F32, TESSEL_BF16, TESSEL_F16, TESSEL_F64}) {
    size_t es = size_t(tessel_dtype_size(dtype));
    std::vector<float> f = randomFloats(size_t(numIds * hidden), 29);
    std::vector<uint8_t> dout(f.size() * es);
    tessel_cast(cpu, TESSEL_F32, dtype, f.data(), dout.data(),
                int64_t(f.size()));
    void *gpuIds = upload(gpu, ids);
    for (auto [rows, offset] :
         {std::pair<int64_t, int64_t>{vocab, 0}, {12500, 25000}}) {
      auto [want, got] = both<uint8_t>(
          dout, size_t(rows * hidden) * es,
          [&](tessel_ctx *ctx, const void *dy, void *dtable) {
            tessel_embedding_grad(ctx, dtype, TESSEL_I64,
                                  ctx == gpu ? gpuIds : ids.data(), dy, dtable,
                                  numIds, rows, hidden, offset, vocab);
          });
      EXPECT_TRUE(got == want) << "dtype " << dtype << " rows " << rows;
      if (dtype != TESSEL_BF16 && dtype != TESSEL_F16)
        continue;
      // ABI 14: the same f64 sums rounded to an f32 table instead.
      auto [want32, got32] = both<uint8_t>(
          dout, size_t(rows * hidden) * 4,
          [&](tessel_ctx *ctx, const void *dy, void *dtable) {
            tessel_embedding_grad_f32(
                ctx, dtype, TESSEL_I64, ctx == gpu ? gpuIds : ids.data(), dy,
                dtable, numIds, rows, hidden, offset, vocab);
          });
      EXPECT_TRUE(got32 == want32)
          << "f32 table of dtype " << dtype << " rows " << rows;
    }
    tessel_free(gpu, gpuIds);
  }
}

TEST_F(CudaData, EmbeddingGradBadIdIsSkippedAndRecorded) {
  std::vector<int32_t> ids = {2, -1, 2};
  std::vector<float> dout = {1, 2, 3, 4, 5, 6};
  void *gpuIds = upload(gpu, ids);
  void *gpuDout = upload(gpu, dout);
  void *dtable = tessel_alloc(gpu, 8 * sizeof(float));
  tessel_embedding_grad(gpu, TESSEL_F32, TESSEL_I32, gpuIds, gpuDout, dtable, 3,
                        4, 2, 0, 4);
  std::vector<float> got = download<float>(gpu, dtable, 8);
  ASSERT_NE(tessel_error(gpu), nullptr);
  EXPECT_STREQ(tessel_error(gpu),
               "tessel_embedding_grad: id -1 at position 1 outside [0, 4)");
  EXPECT_EQ(got, (std::vector<float>{0, 0, 0, 0, 6, 8, 0, 0}));
  tessel_clear_error(gpu);
  tessel_free(gpu, gpuIds);
  tessel_free(gpu, gpuDout);
  tessel_free(gpu, dtable);
}
