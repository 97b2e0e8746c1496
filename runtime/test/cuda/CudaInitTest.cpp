//===- CudaInitTest.cpp - The CUDA init kernel vs the CPU backend ----------===//
//
// Host tests: init_math.h's copies of rng.h equal rng.h; core/storage.h's
// conversions equal the CPU backend's (cpu/internal.h); initValue rounded
// by fromDouble equals tessel_init_param on a CPU context bit for bit for
// every kind and dtype over many (seed, name, first). GPU test (skipped
// without a device): tessel_init_param on both contexts, within one ulp of
// the stored type (the device's double log/cos may differ from glibc's by
// an ulp before the rounding).
//
//===----------------------------------------------------------------------===//

#include "CudaTestUtil.h"

#include "core/rng.h"
#include "cpu/internal.h"
#include "cuda/init_math.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>

using namespace tessel::cuda;
using tessel::cudatest::createContext;
using tessel::cudatest::CpuVsCuda;
using tessel::stored::BFloat;
using tessel::stored::Half;
namespace stored = tessel::stored;

namespace {

template <class T> int32_t dtypeOf();
template <> int32_t dtypeOf<float>() { return TESSEL_F32; }
template <> int32_t dtypeOf<double>() { return TESSEL_F64; }
template <> int32_t dtypeOf<Half>() { return TESSEL_F16; }
template <> int32_t dtypeOf<BFloat>() { return TESSEL_BF16; }
template <> int32_t dtypeOf<int32_t>() { return TESSEL_I32; }
template <> int32_t dtypeOf<int64_t>() { return TESSEL_I64; }

struct InitCase {
  int32_t kind;
  double args[2];
};

const InitCase kRandomCases[] = {
    {TESSEL_INIT_NORMAL, {0.02, 0.0}},
    {TESSEL_INIT_NORMAL, {1.5, -0.25}},
    {TESSEL_INIT_TRUNCATED_NORMAL, {0.02, 0.0}},
    {TESSEL_INIT_TRUNCATED_NORMAL, {1.0, 3.0}},
    {TESSEL_INIT_UNIFORM, {-0.1, 0.1}},
    {TESSEL_INIT_UNIFORM, {2.0, 7.5}},
};

const InitCase kFixedCases[] = {
    {TESSEL_INIT_ZEROS, {0.0, 0.0}},
    {TESSEL_INIT_ONES, {0.0, 0.0}},
    {TESSEL_INIT_CONSTANT, {3.7, 0.0}},
    {TESSEL_INIT_CONSTANT, {-2.5, 0.0}},
    {TESSEL_INIT_CONSTANT, {1e10, 0.0}},  // saturates the integers
    {TESSEL_INIT_CONSTANT, {-1e20, 0.0}}, // the same, below
    {TESSEL_INIT_CONSTANT, {std::numeric_limits<double>::quiet_NaN(), 0.0}},
};

/// The host's reading of what the kernel writes for elements
/// [first, first + count).
template <class T>
std::vector<T> hostInit(const InitCase &c, int64_t first, int64_t count,
                        uint64_t seed, const char *name) {
  std::vector<T> out(static_cast<size_t>(count));
  uint64_t nameHash = tessel::fnv1a(name);
  for (int64_t i = 0; i < count; ++i)
    out[size_t(i)] = stored::fromDouble<T>(initValue(
        c.kind, c.args[0], c.args[1], seed, nameHash, uint64_t(first + i)));
  return out;
}

template <class T>
std::vector<T> contextInit(tessel_ctx *ctx, const InitCase &c, int64_t first,
                           int64_t count, uint64_t seed, const char *name) {
  void *dst = tessel_alloc(ctx, count * int64_t(sizeof(T)));
  tessel_init_param(ctx, dst, dtypeOf<T>(), first, count, c.kind, c.args,
                    seed, name);
  std::vector<T> out(static_cast<size_t>(count));
  tessel_synchronize(ctx);
  tessel_copy_to_host(ctx, out.data(), dst, count * int64_t(sizeof(T)));
  tessel_free(ctx, dst);
  return out;
}

template <class T>
void expectHostInitEqualsCpu(tessel_ctx *cpu, const InitCase &c,
                             int &checked) {
  const char *names[] = {"w", "layers.3.attn.q_proj.weight", ""};
  for (uint64_t seed : {uint64_t(0), uint64_t(42), ~uint64_t(0) - 5})
    for (const char *name : names)
      for (int64_t first : {int64_t(0), int64_t(12345), int64_t(1) << 40}) {
        const int64_t count = 257;
        std::vector<T> want = contextInit<T>(cpu, c, first, count, seed, name);
        std::vector<T> got = hostInit<T>(c, first, count, seed, name);
        for (int64_t i = 0; i < count; ++i)
          ASSERT_EQ(std::memcmp(&want[size_t(i)], &got[size_t(i)], sizeof(T)),
                    0)
              << "kind " << c.kind << " dtype " << dtypeOf<T>() << " seed "
              << seed << " name '" << name << "' index " << first + i;
        checked += int(count);
      }
}

} // namespace

TEST(CudaInitHost, RandomKindsEqualCpu) {
  tessel_ctx *cpu = createContext("cpu");
  ASSERT_NE(cpu, nullptr);
  int checked = 0;
  for (const InitCase &c : kRandomCases) {
    expectHostInitEqualsCpu<float>(cpu, c, checked);
    expectHostInitEqualsCpu<double>(cpu, c, checked);
    expectHostInitEqualsCpu<Half>(cpu, c, checked);
    expectHostInitEqualsCpu<BFloat>(cpu, c, checked);
  }
  EXPECT_EQ(checked, 6 * 4 * 27 * 257);
  EXPECT_EQ(tessel_error(cpu), nullptr);
  tessel_ctx_destroy(cpu);
}

TEST(CudaInitHost, FixedKindsEqualCpu) {
  tessel_ctx *cpu = createContext("cpu");
  ASSERT_NE(cpu, nullptr);
  int checked = 0;
  for (const InitCase &c : kFixedCases) {
    expectHostInitEqualsCpu<float>(cpu, c, checked);
    expectHostInitEqualsCpu<double>(cpu, c, checked);
    expectHostInitEqualsCpu<Half>(cpu, c, checked);
    expectHostInitEqualsCpu<BFloat>(cpu, c, checked);
    expectHostInitEqualsCpu<int32_t>(cpu, c, checked);
    expectHostInitEqualsCpu<int64_t>(cpu, c, checked);
  }
  EXPECT_EQ(checked, 7 * 6 * 27 * 257);
  EXPECT_EQ(tessel_error(cpu), nullptr);
  tessel_ctx_destroy(cpu);
}

//===--- GPU --------------------------------------------------------------===//

namespace {

/// Ulps between two values of the same stored type (bit patterns as
/// ordered integers, for finite values of one sign); integers equal or not.
template <class T> int64_t ulpDistance(T a, T b) {
  if constexpr (std::is_same<T, float>::value) {
    return std::llabs(int64_t(int32_t(stored::floatBits(a))) -
                      int64_t(int32_t(stored::floatBits(b))));
  } else if constexpr (std::is_same<T, Half>::value ||
                       std::is_same<T, BFloat>::value) {
    return std::llabs(int64_t(int16_t(a.bits)) - int64_t(int16_t(b.bits)));
  } else {
    return a == b ? 0 : std::numeric_limits<int64_t>::max();
  }
}

/// Both contexts fill the same range; every element within `maxUlps`.
template <class T>
void expectGpuInitNearCpu(tessel_ctx *cpu, tessel_ctx *gpu, const InitCase &c,
                          int64_t maxUlps) {
  for (int64_t first : {int64_t(0), int64_t(999983)}) {
    const int64_t count = (1 << 16) + 3;
    std::vector<T> want = contextInit<T>(cpu, c, first, count, 1234, "w.q");
    std::vector<T> got = contextInit<T>(gpu, c, first, count, 1234, "w.q");
    int64_t inexact = 0;
    for (int64_t i = 0; i < count; ++i) {
      if constexpr (std::is_same<T, double>::value) {
        // The same bits (a NaN constant included) pass; otherwise device
        // log/cos are within a few ulps: absolute, as the mean may cancel
        // the draw.
        if (std::memcmp(&got[size_t(i)], &want[size_t(i)], sizeof(T)) == 0)
          continue;
        double scale = 8.0 * std::fabs(c.args[0]) + std::fabs(c.args[1]);
        ASSERT_NEAR(got[size_t(i)], want[size_t(i)], 1e-14 * scale)
            << "kind " << c.kind << " index " << first + i;
      } else {
        int64_t d = ulpDistance(want[size_t(i)], got[size_t(i)]);
        ASSERT_LE(d, maxUlps) << "kind " << c.kind << " dtype "
                              << dtypeOf<T>() << " index " << first + i;
        inexact += d != 0;
      }
    }
    // An ulp of double log/cos rarely survives rounding to the type.
    EXPECT_LE(inexact, count / 1000) << "kind " << c.kind;
  }
}

} // namespace

TEST_F(CpuVsCuda, InitParamMatchesCpu) {
  for (const InitCase &c : kRandomCases) {
    expectGpuInitNearCpu<float>(cpu, gpu, c, 1);
    expectGpuInitNearCpu<Half>(cpu, gpu, c, 1);
    expectGpuInitNearCpu<BFloat>(cpu, gpu, c, 1);
    expectGpuInitNearCpu<double>(cpu, gpu, c, 0); // an absolute bound
  }
  for (const InitCase &c : kFixedCases) {
    expectGpuInitNearCpu<float>(cpu, gpu, c, 0);
    expectGpuInitNearCpu<double>(cpu, gpu, c, 0);
    expectGpuInitNearCpu<Half>(cpu, gpu, c, 0);
    expectGpuInitNearCpu<BFloat>(cpu, gpu, c, 0);
    expectGpuInitNearCpu<int32_t>(cpu, gpu, c, 0);
    expectGpuInitNearCpu<int64_t>(cpu, gpu, c, 0);
  }
}
