//===- CudaElementwiseTest.cpp - The CUDA elementwise kernels -------------===//
//
// Host tests: elementwise_math.h's functions (what the kernels compute per
// element) against the CPU backend through the C ABI, element by element:
// every 16-bit pattern's load, a sweep of f32 and f64 stores, every cast
// pair, every unary op and derivative, every binary op and dtype, and the
// dropout mask (the hash itself against core/rng.h). GPU tests (skipped
// without a device): each kernel on a CUDA and a CPU context, compared.
//
//===----------------------------------------------------------------------===//

#include "CudaTestUtil.h"

#include "core/rng.h"
#include "cuda/elementwise_math.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <tuple>

using namespace tessel::cudatest;
namespace tc = tessel::cuda;

namespace {

template <class T> constexpr int32_t dtypeOf() {
  if constexpr (std::is_same<T, float>::value)
    return TESSEL_F32;
  else if constexpr (std::is_same<T, tc::Half>::value)
    return TESSEL_F16;
  else if constexpr (std::is_same<T, tc::BFloat>::value)
    return TESSEL_BF16;
  else if constexpr (std::is_same<T, double>::value)
    return TESSEL_F64;
  else if constexpr (std::is_same<T, int32_t>::value)
    return TESSEL_I32;
  else
    return TESSEL_I64;
}

template <class F> void forFloatTypes(F &&f) {
  f(float());
  f(tc::Half());
  f(tc::BFloat());
  f(double());
}

template <class F> void forAllTypes(F &&f) {
  forFloatTypes(f);
  f(int32_t());
  f(int64_t());
}

/// The stored bits of an element, zero-extended.
template <class T> uint64_t bitsOf(T v) {
  uint64_t u = 0;
  std::memcpy(&u, &v, sizeof v);
  return u;
}

template <class T> std::vector<T> stored(const std::vector<double> &values) {
  std::vector<T> out;
  for (double v : values)
    out.push_back(tc::fromDouble<T>(v));
  return out;
}

/// |v|, 0 for NaN or an infinity (for absolute tolerances).
double magnitude(double v) { return std::isfinite(v) ? std::fabs(v) : 0.0; }

bool close(double got, double want, double rtol, double atol) {
  if (std::isnan(want))
    return std::isnan(got);
  if (std::isinf(want))
    return got == want;
  return std::fabs(got - want) <= rtol * std::fabs(want) + atol;
}

/// Relative tolerance of a result rounded into T after f32 (or f64)
/// arithmetic that may differ from the CPU's by FMA contraction.
template <class T> double roundingTolerance() {
  if constexpr (std::is_same<T, double>::value)
    return 1e-12;
  else if constexpr (std::is_same<T, float>::value)
    return 2e-6;
  else if constexpr (std::is_same<T, tc::Half>::value)
    return 1.0 / 1024;
  else
    return 1.0 / 128;
}

/// Inputs for the float ops: specials, a fine grid over [-20, 20], a log
/// grid of both signs, and random values.
std::vector<double> floatInputs() {
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> v = {0.0,     -0.0,   inf,   -inf, std::nan(""),
                           1e-40,   -1e-40, 1e-30, 1e30, 65504.0,
                           65520.0, 3e38,   -3e38, 88.7, -104.5,
                           7.9,     -7.9,   4.0,   -4.0, 1e-5};
  for (double x = -20.0; x <= 20.0; x += 1.0 / 37)
    v.push_back(x);
  for (double m = 1e-12; m < 1e12; m *= 1.7) {
    v.push_back(m);
    v.push_back(-m);
  }
  std::mt19937_64 rng(7);
  std::normal_distribution<double> normal(0.0, 5.0);
  for (int i = 0; i < 2000; ++i)
    v.push_back(normal(rng));
  return v;
}

class CpuReference : public ::testing::Test {
protected:
  void SetUp() override {
    cpu = createContext("cpu");
    ASSERT_NE(cpu, nullptr) << tessel_error(nullptr);
  }
  void TearDown() override {
    EXPECT_EQ(tessel_error(cpu), nullptr) << tessel_error(cpu);
    tessel_ctx_destroy(cpu);
  }
  /// tessel_cast on the CPU of a host array.
  template <class TIn, class TOut>
  std::vector<TOut> cpuCast(const std::vector<TIn> &x) {
    std::vector<TOut> y(x.size());
    tessel_cast(cpu, dtypeOf<TIn>(), dtypeOf<TOut>(), x.data(), y.data(),
                int64_t(x.size()));
    return y;
  }
  tessel_ctx *cpu = nullptr;
};

//===--- Conversions and casts --------------------------------------------===//

// The 16-bit conversions themselves are core/storage.h's, checked against
// the CPU by CudaStoredMath.ConversionsEqualCpu (CudaInitTest.cpp).

/// Source values of a cast test in TIn: every float input, plus integers
/// at the edges of both integer types and of exact f32/f64 integers.
template <class TIn> std::vector<TIn> castInputs() {
  std::vector<double> d = floatInputs();
  for (double v : {2147483647.0, 2147483648.0, -2147483648.0, -2147483649.0,
                   9.2233720368547758e18, -9.2233720368547758e18, 16777217.0,
                   9007199254740993.0, 0.5, -0.5, 1.5, 2.5, -2.5})
    d.push_back(v);
  std::vector<TIn> out = stored<TIn>(d);
  if constexpr (std::is_integral<TIn>::value) {
    for (TIn v :
         {std::numeric_limits<TIn>::min(), std::numeric_limits<TIn>::max(),
          TIn(-1), TIn(16777217), TIn(int64_t(1) << 30)})
      out.push_back(v);
    if constexpr (sizeof(TIn) == 8)
      for (int64_t v : {(int64_t(1) << 53) + 1, (int64_t(1) << 62) + 3,
                        -(int64_t(1) << 60) - 1, int64_t(0x7ffffe0000000001)})
        out.push_back(TIn(v));
  }
  if constexpr (std::is_same<TIn, double>::value) {
    // Doubles between two floats: round-to-odd before a 16-bit rounding.
    std::mt19937_64 rng(3);
    for (int i = 0; i < 20000; ++i) {
      double base =
          std::ldexp(double(rng() % 4096) / 4096 + 1.0, int(rng() % 40) - 25);
      out.push_back(base * (1.0 + std::ldexp(double(rng() % 1000) - 500, -30)));
    }
  }
  return out;
}

// Tests castElement against tessel_cast for all 36 dtype pairs, bit for bit.
TEST_F(CpuReference, CastMatchesEveryPair) {
  forAllTypes([&](auto inTag) {
    using TIn = decltype(inTag);
    std::vector<TIn> x = castInputs<TIn>();
    forAllTypes([&](auto outTag) {
      using TOut = decltype(outTag);
      auto want = cpuCast<TIn, TOut>(x);
      int bad = 0;
      for (size_t i = 0; i < x.size(); ++i)
        if (bitsOf(tc::castElement<TIn, TOut>(x[i])) != bitsOf(want[i]) &&
            bad++ < 3)
          ADD_FAILURE() << dtypeOf<TIn>() << " -> " << dtypeOf<TOut>()
                        << " element " << i << " x=" << double(tc::Elem<TIn>::load(x[i])) << " got=" << bitsOf(tc::castElement<TIn, TOut>(x[i])) << " want=" << bitsOf(want[i]);
      EXPECT_EQ(bad, 0);
    });
  });
}

//===--- Unary ops and derivatives ----------------------------------------===//

template <int Count, int Op = 0, class F> void forOps(F &&f) {
  if constexpr (Op < Count) {
    f(std::integral_constant<int, Op>());
    forOps<Count, Op + 1>(f);
  }
}

// Tests every unary op in every float dtype against tessel_unary.
TEST_F(CpuReference, UnaryMatchesCpu) {
  forFloatTypes([&](auto tag) {
    using T = decltype(tag);
    using C = typename tc::Elem<T>::Compute;
    std::vector<T> x = stored<T>(floatInputs());
    forOps<TESSEL_SILU + 1>([&](auto opTag) {
      constexpr int Op = decltype(opTag)::value;
      std::vector<T> want(x.size());
      tessel_unary(cpu, Op, dtypeOf<T>(), x.data(), want.data(),
                   int64_t(x.size()));
      int bad = 0;
      for (size_t i = 0; i < x.size(); ++i) {
        C xi = tc::Elem<T>::load(x[i]);
        double got = tc::toDouble(tc::Elem<T>::store(tc::unaryOp<Op, C>(xi)));
        // The polynomial erf/tanh around ±1 feed a cancelling 1 + ...: an
        // absolute bound scaled by |x| covers the GELUs' negative tail.
        double atol =
            roundingTolerance<T>() * 0.1 * magnitude(double(xi)) + 1e-30;
        if (!close(got, tc::toDouble(want[i]), roundingTolerance<T>(), atol) &&
            bad++ < 3)
          ADD_FAILURE() << "dtype " << dtypeOf<T>() << " op " << Op << " x "
                        << double(xi) << ": " << got << " vs "
                        << tc::toDouble(want[i]);
      }
      EXPECT_EQ(bad, 0);
    });
  });
}

// Tests every derivative in every float dtype against tessel_unary_grad.
TEST_F(CpuReference, UnaryGradMatchesCpu) {
  forFloatTypes([&](auto tag) {
    using T = decltype(tag);
    using C = typename tc::Elem<T>::Compute;
    std::vector<double> xs = floatInputs(), dys(xs.size());
    std::mt19937_64 rng(11);
    std::uniform_real_distribution<double> uni(-2.0, 2.0);
    for (double &d : dys)
      d = uni(rng);
    std::vector<T> x = stored<T>(xs), dy = stored<T>(dys);
    forOps<TESSEL_SILU + 1>([&](auto opTag) {
      constexpr int Op = decltype(opTag)::value;
      std::vector<T> want(x.size());
      tessel_unary_grad(cpu, Op, dtypeOf<T>(), x.data(), dy.data(), want.data(),
                        int64_t(x.size()));
      int bad = 0;
      for (size_t i = 0; i < x.size(); ++i) {
        C xi = tc::Elem<T>::load(x[i]), gi = tc::Elem<T>::load(dy[i]);
        double got =
            tc::toDouble(tc::Elem<T>::store(tc::unaryGradOp<Op, C>(xi, gi)));
        double atol = roundingTolerance<T>() * 0.1 * magnitude(double(gi)) *
                          (1.0 + magnitude(double(xi))) +
                      1e-30;
        if (!close(got, tc::toDouble(want[i]), roundingTolerance<T>(), atol) &&
            bad++ < 3)
          ADD_FAILURE() << "dtype " << dtypeOf<T>() << " op " << Op << " x "
                        << double(xi) << ": " << got << " vs "
                        << tc::toDouble(want[i]);
      }
      EXPECT_EQ(bad, 0);
    });
  });
}

//===--- Binary ops -------------------------------------------------------===//

/// Operands of the binary tests: random values, specials and, for
/// integers, zero divisors, MIN / -1 and overflowing sums and products.
template <class T> void binaryInputs(std::vector<T> &a, std::vector<T> &b) {
  std::vector<double> fa = floatInputs(), fb = floatInputs();
  std::mt19937_64 rng(5);
  std::shuffle(fb.begin(), fb.end(), rng);
  if constexpr (std::is_integral<T>::value) {
    for (size_t i = 0; i < fa.size(); ++i) {
      a.push_back(T(int64_t(rng())));
      b.push_back(i % 5 == 0 ? T(int64_t(rng() % 21) - 10) : T(int64_t(rng())));
    }
    const T lo = std::numeric_limits<T>::min(),
            hi = std::numeric_limits<T>::max();
    for (T x : {lo, hi, T(-1), T(0), T(7)})
      for (T y : {lo, hi, T(-1), T(0), T(1), T(3)}) {
        a.push_back(x);
        b.push_back(y);
      }
  } else {
    a = stored<T>(fa);
    b = stored<T>(fb);
    // Equal pairs for TESSEL_EQUAL (NaN equals nothing, -0 equals +0).
    for (size_t i = 0; i < a.size(); i += 3)
      b[i] = a[i];
    a.push_back(tc::fromDouble<T>(-0.0));
    b.push_back(tc::fromDouble<T>(0.0));
  }
}

// Tests every binary op in every dtype against tessel_binary, bit for bit,
// and that the division flags zero divisors exactly when the CPU reports.
TEST_F(CpuReference, BinaryMatchesCpu) {
  forAllTypes([&](auto tag) {
    using T = decltype(tag);
    using C = typename tc::Elem<T>::Compute;
    std::vector<T> a, b;
    binaryInputs(a, b);
    forOps<TESSEL_EQUAL + 1>([&](auto opTag) {
      constexpr int Op = decltype(opTag)::value;
      std::vector<T> want(a.size());
      tessel_binary(cpu, Op, dtypeOf<T>(), a.data(), b.data(), want.data(),
                    int64_t(a.size()));
      bool cpuError = tessel_error(cpu) != nullptr;
      tessel_clear_error(cpu);
      bool divByZero = false;
      int bad = 0;
      for (size_t i = 0; i < a.size(); ++i) {
        T got = tc::Elem<T>::store(tc::binaryOp<Op, C>(
            tc::Elem<T>::load(a[i]), tc::Elem<T>::load(b[i]), divByZero));
        if (bitsOf(got) != bitsOf(want[i]) && bad++ < 3)
          ADD_FAILURE() << "dtype " << dtypeOf<T>() << " op " << Op
                        << " element " << i;
      }
      EXPECT_EQ(bad, 0);
      EXPECT_EQ(divByZero, cpuError)
          << "dtype " << dtypeOf<T>() << " op " << Op;
      if constexpr (std::is_integral<T>::value)
        EXPECT_EQ(divByZero, Op == TESSEL_DIV);
    });
  });
}

// Tests that tessel_binary_broadcast's units cover an [rows, cols] view
// once, each element meeting b's element of its column or row.
TEST(CudaBroadcastSplit, UnitsCoverTheViewOnce) {
  for (auto [rows, cols, width] : {std::tuple<int64_t, int64_t, int>{3, 8, 4},
                                   {5, 7, 1},
                                   {1, 16, 8},
                                   {4, 1, 1}}) {
    std::vector<int> seen(size_t(rows * cols), 0);
    const int64_t unitsPerRow = cols / width;
    for (int64_t u = 0; u < rows * unitsPerRow; ++u) {
      int64_t r, c;
      tc::broadcastUnit<int64_t>(u, unitsPerRow, width, r, c);
      for (int k = 0; k < width; ++k) {
        ++seen[size_t(r * cols + c + k)];
        EXPECT_EQ(tc::broadcastOperandIndex<int64_t>(r, c + k, false), c + k);
        EXPECT_EQ(tc::broadcastOperandIndex<int64_t>(r, c + k, true), r);
      }
    }
    EXPECT_EQ(seen, std::vector<int>(seen.size(), 1))
        << rows << "x" << cols << " by " << width;
  }
}

//===--- Dropout ----------------------------------------------------------===//

// Tests dropout's mask (its prefix split of the hash) against core/rng.h's.
TEST(CudaDropoutHash, MatchesRng) {
  std::mt19937_64 rng(9);
  for (int i = 0; i < 100000; ++i) {
    uint64_t a = rng(), b = rng(), c = rng(), d = rng();
    uint64_t h = tessel::hash4(tessel::kDropoutDomain ^ a, b, c, d);
    bool keep = tessel::uniformOpen(h) >= 0.3;
    ASSERT_EQ(tc::dropoutKeep(tc::dropoutPrefix(a, b), int64_t(c), d, 0.3),
              keep);
  }
}

/// Host dropout of n elements whose whole-tensor indices are indexOf(i).
template <class T, class IndexOf>
std::vector<T> hostDropout(const std::vector<T> &x, double rate, uint64_t seed,
                           uint64_t step, uint64_t stream, IndexOf indexOf) {
  using C = typename tc::Elem<T>::Compute;
  uint64_t prefix = tc::dropoutPrefix(seed, step);
  C scale = tc::dropoutScale<C>(rate);
  std::vector<T> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    bool keep = tc::dropoutKeep(prefix, indexOf(int64_t(i)), stream, rate);
    y[i] = tc::Elem<T>::store(keep ? C(tc::Elem<T>::load(x[i]) * scale) : C(0));
  }
  return y;
}

template <class T>
void expectSameBits(const std::vector<T> &got, const std::vector<T> &want) {
  ASSERT_EQ(got.size(), want.size());
  int bad = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (bitsOf(got[i]) != bitsOf(want[i]) && bad++ < 3)
      ADD_FAILURE() << "element " << i << " of " << got.size();
  EXPECT_EQ(bad, 0);
}

// Tests dropout's values against tessel_dropout bit for bit.
TEST_F(CpuReference, DropoutMatchesCpu) {
  forFloatTypes([&](auto tag) {
    using T = decltype(tag);
    std::vector<T> x = stored<T>(floatInputs());
    for (double rate : {0.0, 0.1, 0.5, 0.999, 1.0})
      for (uint64_t stream : {uint64_t(0), uint64_t(0x1234567890abcdefull)}) {
        tessel_set_rng_stream(cpu, stream);
        int64_t first = 1000003;
        std::vector<T> want(x.size());
        tessel_dropout(cpu, dtypeOf<T>(), x.data(), want.data(),
                       int64_t(x.size()), rate, 42, 7, first);
        expectSameBits(hostDropout(x, rate, 42, 7, stream,
                                   [&](int64_t i) { return first + i; }),
                       want);
      }
  });
}

// Tests the block dims' merging and indexing against tessel_dropout_block:
// contiguous blocks, a column block, extents of 1, and a block with more
// dims than a kernel argument holds after merging.
TEST_F(CpuReference, DropoutBlockMatchesCpu) {
  struct Case {
    std::vector<int64_t> shape, strides;
    int64_t first;
  };
  std::vector<Case> cases = {
      {{}, {}, 5},
      {{7, 13}, {13, 1}, 0},
      {{7, 5}, {64, 1}, 40},              // columns 40..44 of a [7, 64] tensor
      {{3, 1, 4, 5}, {200, 7, 20, 1}, 3}, // an extent of 1 with any stride
      {{2, 3, 4}, {96, 32, 8}, 1},        // every 8th element
  };
  Case wide; // 14 dims of 2, none mergeable: the device-memory path
  int64_t stride = 3;
  for (int d = 13; d >= 0; --d) {
    wide.shape.insert(wide.shape.begin(), 2);
    wide.strides.insert(wide.strides.begin(), stride);
    stride *= 5;
  }
  wide.first = 11;
  cases.push_back(wide);
  for (const Case &c : cases) {
    int32_t rank = int32_t(c.shape.size());
    int64_t n = 1;
    for (int64_t e : c.shape)
      n *= e;
    std::vector<int64_t> shape(size_t(rank) + 1), strides(size_t(rank) + 1);
    int32_t merged = 0;
    bool fits = tc::collapseBlockDims(rank, c.shape.data(), c.strides.data(),
                                      shape.data(), strides.data(), merged);
    EXPECT_EQ(fits, merged <= tc::BlockDims::kMax);
    if (rank == 14)
      EXPECT_FALSE(fits);
    std::vector<float> x = stored<float>(std::vector<double>(size_t(n), 1.5));
    std::vector<float> want(x.size());
    tessel_dropout_block(cpu, TESSEL_F32, x.data(), want.data(), rank,
                         c.shape.data(), c.strides.data(), 0.5, 9, 2, c.first);
    expectSameBits(hostDropout(x, 0.5, 9, 2, 0,
                               [&](int64_t i) {
                                 return tc::blockIndex(merged, shape.data(),
                                                       strides.data(), c.first,
                                                       i);
                               }),
                   want);
  }
}

//===--- On a GPU ---------------------------------------------------------===//

using CudaElementwise = CpuVsCuda;

// An odd count (vector body and scalar tail) and a misaligned one.
constexpr int64_t kGpuCount = 100003;

/// Runs `kernel(ctx, in..., out)` on both contexts over host inputs of T
/// (also shifted by one element: the scalar path) and returns the outputs.
template <class TOut, class Fixture, class Kernel, class... TIn>
std::pair<std::vector<TOut>, std::vector<TOut>>
runBoth(Fixture &f, size_t shift, Kernel kernel,
        const std::vector<TIn> &...in) {
  size_t n = std::max({in.size()...});
  std::vector<TOut> results[2];
  tessel_ctx *ctxs[2] = {f.cpuCtx(), f.gpuCtx()};
  for (int k = 0; k < 2; ++k) {
    auto withShift = [&](const auto &v) {
      using V = typename std::decay_t<decltype(v)>::value_type;
      std::vector<V> padded(shift);
      padded.insert(padded.end(), v.begin(), v.end());
      return padded;
    };
    std::vector<void *> buffers = {f.upload(ctxs[k], withShift(in))...};
    void *out = f.upload(ctxs[k], std::vector<TOut>(n + shift));
    std::vector<const char *> ins;
    size_t j = 0;
    ((ins.push_back(static_cast<const char *>(buffers[j++]) +
                    shift * sizeof(TIn))),
     ...);
    kernel(ctxs[k], ins, static_cast<char *>(out) + shift * sizeof(TOut));
    auto all = f.template download<TOut>(ctxs[k], out, n + shift);
    results[k].assign(all.begin() + long(shift), all.end());
    for (void *b : buffers)
      tessel_free(ctxs[k], b);
    tessel_free(ctxs[k], out);
  }
  return {results[0], results[1]};
}

class CudaElementwiseFixture : public CpuVsCuda {
public:
  tessel_ctx *cpuCtx() { return cpu; }
  tessel_ctx *gpuCtx() { return gpu; }
  using CpuVsCuda::download;
  using CpuVsCuda::upload;
};

using CudaVsCpuElementwise = CudaElementwiseFixture;

template <class T> std::vector<T> gpuInputs(uint64_t seed, double scale) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, scale);
  std::vector<double> v(static_cast<size_t>(kGpuCount));
  for (double &d : v)
    d = normal(rng);
  return stored<T>(v);
}

// Tests tessel_binary on the GPU: every op and dtype, bit for bit.
TEST_F(CudaVsCpuElementwise, BinaryMatchesCpu) {
  forAllTypes([&](auto tag) {
    using T = decltype(tag);
    std::vector<T> a = gpuInputs<T>(1, 1e3), b = gpuInputs<T>(2, 1e3);
    // Equal pairs for TESSEL_EQUAL; no integer zero divisor (an error).
    for (size_t i = 0; i < b.size(); i += 7)
      b[i] = a[i];
    for (size_t i = 0; i < b.size(); ++i)
      if (bitsOf(b[i]) == 0 && std::is_integral<T>::value)
        b[i] = tc::fromDouble<T>(3.0);
    forOps<TESSEL_EQUAL + 1>([&](auto opTag) {
      for (size_t shift : {0, 1}) {
        auto [want, got] = runBoth<T>(
            *this, shift,
            [&](tessel_ctx *ctx, auto &ins, void *out) {
              tessel_binary(ctx, decltype(opTag)::value, dtypeOf<T>(), ins[0],
                            ins[1], out, kGpuCount);
            },
            a, b);
        expectSameBits(got, want);
      }
    });
  });
}

// Tests tessel_binary_broadcast on the GPU: every op and dtype, b per
// column and per row, either side, 16-byte vectors (cols a multiple of
// every vector width) and single elements (odd cols, or misaligned), bit
// for bit.
TEST_F(CudaVsCpuElementwise, BinaryBroadcastMatchesCpu) {
  forAllTypes([&](auto tag) {
    using T = decltype(tag);
    for (auto [rows, cols] :
         {std::pair<int64_t, int64_t>{97, 768}, {1021, 97}}) {
      std::vector<T> a = gpuInputs<T>(3, 1e3);
      a.resize(size_t(rows * cols)); // (kGpuCount is more)
      for (int32_t layout = 0; layout < 4; ++layout) {
        const bool perRow = (layout & TESSEL_BROADCAST_ROWS) != 0;
        std::vector<T> b = gpuInputs<T>(4, 1e3);
        b.resize(size_t(perRow ? rows : cols));
        for (size_t i = 0; i < b.size(); i += 5)
          b[i] = a[i]; // equal pairs for TESSEL_EQUAL
        if constexpr (std::is_integral<T>::value) {
          // No zero divisor on either side (an error).
          for (T &v : a)
            if (v == 0)
              v = 3;
          for (T &v : b)
            if (v == 0)
              v = 5;
        }
        forOps<TESSEL_EQUAL + 1>([&](auto opTag) {
          for (size_t shift : {0, 1}) {
            auto [want, got] = runBoth<T>(
                *this, shift,
                [&](tessel_ctx *ctx, auto &ins, void *out) {
                  tessel_binary_broadcast(ctx, decltype(opTag)::value,
                                          dtypeOf<T>(), ins[0], ins[1], out,
                                          rows, cols, layout);
                },
                a, b);
            SCOPED_TRACE("dtype " + std::to_string(dtypeOf<T>()) + " op " +
                         std::to_string(decltype(opTag)::value) + " layout " +
                         std::to_string(layout) + " shift " +
                         std::to_string(shift));
            expectSameBits(got, want);
          }
        });
      }
    }
  });
  ASSERT_EQ(tessel_error(gpu), nullptr) << tessel_error(gpu);
}

// Tests that an integer division by zero in a broadcast binary op on the
// GPU reports the CPU's error.
TEST_F(CudaVsCpuElementwise, BroadcastDivisionByZeroReported) {
  std::vector<int32_t> a = {7, 8, 9, 10}, b = {1, 0};
  void *da = upload(gpu, a), *db = upload(gpu, b);
  void *out = upload(gpu, std::vector<int32_t>(4));
  tessel_binary_broadcast(gpu, TESSEL_DIV, TESSEL_I32, da, db, out, 2, 2,
                          TESSEL_BROADCAST_COLS);
  auto got = download<int32_t>(gpu, out, 4);
  ASSERT_NE(tessel_error(gpu), nullptr);
  EXPECT_STREQ(tessel_error(gpu),
               "tessel_binary_broadcast: integer division by zero");
  tessel_clear_error(gpu);
  EXPECT_EQ(got, (std::vector<int32_t>{7, 0, 9, 0}));
  tessel_free(gpu, da);
  tessel_free(gpu, db);
  tessel_free(gpu, out);
}

// Tests that an integer division by zero on the GPU reports the CPU's
// error at the next synchronisation and writes 0.
TEST_F(CudaVsCpuElementwise, IntegerDivisionByZeroReported) {
  std::vector<int32_t> a = {7, 8, 9}, b = {1, 0, 2};
  void *da = upload(gpu, a), *db = upload(gpu, b);
  void *out = upload(gpu, std::vector<int32_t>(3));
  tessel_binary(gpu, TESSEL_DIV, TESSEL_I32, da, db, out, 3);
  auto got = download<int32_t>(gpu, out, 3);
  ASSERT_NE(tessel_error(gpu), nullptr);
  EXPECT_STREQ(tessel_error(gpu), "tessel_binary: integer division by zero");
  tessel_clear_error(gpu);
  EXPECT_EQ(got, (std::vector<int32_t>{7, 0, 4}));
  tessel_free(gpu, da);
  tessel_free(gpu, db);
  tessel_free(gpu, out);
}

// Tests tessel_unary and tessel_unary_grad on the GPU for every op and
// float dtype.
TEST_F(CudaVsCpuElementwise, UnaryAndGradMatchCpu) {
  forFloatTypes([&](auto tag) {
    using T = decltype(tag);
    std::vector<T> x = gpuInputs<T>(3, 4.0), dy = gpuInputs<T>(4, 1.0);
    forOps<TESSEL_SILU + 1>([&](auto opTag) {
      constexpr int Op = decltype(opTag)::value;
      for (size_t shift : {0, 1}) {
        auto fwd = runBoth<T>(
            *this, shift,
            [&](tessel_ctx *ctx, auto &ins, void *out) {
              tessel_unary(ctx, Op, dtypeOf<T>(), ins[0], out, kGpuCount);
            },
            x);
        auto bwd = runBoth<T>(
            *this, shift,
            [&](tessel_ctx *ctx, auto &ins, void *out) {
              tessel_unary_grad(ctx, Op, dtypeOf<T>(), ins[0], ins[1], out,
                                kGpuCount);
            },
            x, dy);
        int bad = 0;
        for (size_t i = 0; i < x.size(); ++i) {
          double atol = roundingTolerance<T>() * 0.1 *
                        (1.0 + magnitude(tc::toDouble(x[i])));
          bad += !close(tc::toDouble(fwd.second[i]), tc::toDouble(fwd.first[i]),
                        roundingTolerance<T>(), atol);
          bad += !close(tc::toDouble(bwd.second[i]), tc::toDouble(bwd.first[i]),
                        roundingTolerance<T>(), atol);
        }
        EXPECT_EQ(bad, 0) << "dtype " << dtypeOf<T>() << " op " << Op;
      }
    });
  });
}

// Tests tessel_cast on the GPU for every dtype pair, bit for bit.
TEST_F(CudaVsCpuElementwise, CastMatchesCpu) {
  forAllTypes([&](auto inTag) {
    using TIn = decltype(inTag);
    std::vector<TIn> x = castInputs<TIn>();
    forAllTypes([&](auto outTag) {
      using TOut = decltype(outTag);
      for (size_t shift : {0, 1}) {
        auto [want, got] = runBoth<TOut>(
            *this, shift,
            [&](tessel_ctx *ctx, auto &ins, void *out) {
              tessel_cast(ctx, dtypeOf<TIn>(), dtypeOf<TOut>(), ins[0], out,
                          int64_t(x.size()));
            },
            x);
        expectSameBits(got, want);
      }
    });
  });
}

// Tests tessel_dropout and tessel_dropout_block on the GPU, bit for bit.
TEST_F(CudaVsCpuElementwise, DropoutMatchesCpu) {
  forFloatTypes([&](auto tag) {
    using T = decltype(tag);
    std::vector<T> x = gpuInputs<T>(5, 2.0);
    for (double rate : {0.0, 0.1, 1.0}) {
      tessel_set_rng_stream(cpu, 77);
      tessel_set_rng_stream(gpu, 77);
      auto [want, got] = runBoth<T>(
          *this, 1,
          [&](tessel_ctx *ctx, auto &ins, void *out) {
            tessel_dropout(ctx, dtypeOf<T>(), ins[0], out, kGpuCount, rate, 3,
                           4, 12345);
          },
          x);
      expectSameBits(got, want);
    }
    // Columns 100.. of a [7, 20000] tensor: a two-dim strided block.
    std::vector<T> blockX = gpuInputs<T>(6, 2.0);
    blockX.resize(7 * 14287, blockX[0]);
    int64_t shape[] = {7, 14287}, strides[] = {20000, 1};
    auto [want, got] = runBoth<T>(
        *this, 0,
        [&](tessel_ctx *ctx, auto &ins, void *out) {
          tessel_dropout_block(ctx, dtypeOf<T>(), ins[0], out, 2, shape,
                               strides, 0.25, 8, 1, 100);
        },
        blockX);
    expectSameBits(got, want);
  });
}

// Tests the _current entries on the GPU against the CPU: the mask is the
// device step's, which tessel_set_step orders on the stream, so two steps
// set between calls draw their own masks (as a replayed graph's do).
TEST_F(CudaVsCpuElementwise, CurrentDropoutReadsTheStepSetBeforeIt) {
  std::vector<float> x = gpuInputs<float>(7, 2.0);
  int64_t shape[] = {7, 14287}, strides[] = {20000, 1};
  std::vector<float> masks[2];
  for (uint64_t step : {5u, 6u}) {
    tessel_set_step(cpu, step);
    tessel_set_step(gpu, step);
    auto [want, got] = runBoth<float>(
        *this, 1,
        [&](tessel_ctx *ctx, auto &ins, void *out) {
          tessel_dropout_current(ctx, TESSEL_F32, ins[0], out, kGpuCount, 0.5,
                                 3, 12345);
        },
        x);
    expectSameBits(got, want);
    masks[step - 5] = got;
    std::vector<float> blockX(7 * 14287, 1.25f);
    auto [wantBlock, gotBlock] = runBoth<float>(
        *this, 0,
        [&](tessel_ctx *ctx, auto &ins, void *out) {
          tessel_dropout_block_current(ctx, TESSEL_F32, ins[0], out, 2, shape,
                                       strides, 0.25, 8, 100);
        },
        blockX);
    expectSameBits(gotBlock, wantBlock);
  }
  EXPECT_NE(masks[0], masks[1]);
}

} // namespace
