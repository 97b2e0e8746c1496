//===- ContextTest.cpp - Context, memory, copies, counters and errors -----===//

#include "TestUtil.h"

#include <thread>

using namespace tt;

namespace {

using ContextTest = RuntimeTest;

TEST(ContextCreate, RankAndWorldSize) {
  tessel_local_world *world = tessel_local_world_create(4);
  tessel_ctx_options options{TESSEL_BACKEND_CPU, 2, 4, 0};
  options.comm = TESSEL_COMM_LOCAL;
  options.local_world = world;
  tessel_ctx *ctx = tessel_ctx_create(&options);
  ASSERT_NE(ctx, nullptr);
  EXPECT_EQ(tessel_ctx_rank(ctx), 2);
  EXPECT_EQ(tessel_ctx_world_size(ctx), 4);
  EXPECT_EQ(tessel_error(ctx), nullptr);
  tessel_ctx_destroy(ctx);
  tessel_local_world_destroy(world);
}

// Options from before ABI 3 (the new fields zero): one rank, no comm.
TEST(ContextCreate, OldOptionsAreOneRankWithoutComm) {
  tessel_ctx_options options{TESSEL_BACKEND_CPU, 0, 1, 0};
  tessel_ctx *ctx = tessel_ctx_create(&options);
  ASSERT_NE(ctx, nullptr) << tessel_error(nullptr);
  EXPECT_EQ(tessel_ctx_world_size(ctx), 1);
  EXPECT_EQ(tessel_ctx_mesh_rank(ctx), 1);
  tessel_ctx_destroy(ctx);
  // Several ranks need a comm kind.
  tessel_ctx_options many{TESSEL_BACKEND_CPU, 0, 2, 0};
  EXPECT_EQ(tessel_ctx_create(&many), nullptr);
  tessel_clear_error(nullptr);
}

TEST(ContextCreate, InvalidOptionsFailWithReason) {
  tessel_ctx_options badRank{TESSEL_BACKEND_CPU, 4, 4, 0};
  EXPECT_EQ(tessel_ctx_create(&badRank), nullptr);
  ASSERT_NE(tessel_error(nullptr), nullptr);
  EXPECT_NE(std::string(tessel_error(nullptr)).find("rank"), std::string::npos);
  // Without a GPU (or the CUDA plugin), asking for "cuda" fails with why.
  if (!tessel_backend_available("cuda")) {
    tessel_ctx_options cuda{TESSEL_BACKEND_CUDA, 0, 1, 0};
    EXPECT_EQ(tessel_ctx_create(&cuda), nullptr);
    ASSERT_NE(tessel_error(nullptr), nullptr);
    EXPECT_NE(std::string(tessel_error(nullptr)).find("no CUDA backend: "),
              std::string::npos)
        << tessel_error(nullptr);
  }
  EXPECT_EQ(tessel_ctx_create(nullptr), nullptr);
  tessel_clear_error(nullptr);
  EXPECT_EQ(tessel_error(nullptr), nullptr);
}

TEST(DtypeSize, AllCodes) {
  EXPECT_EQ(tessel_dtype_size(TESSEL_F32), 4);
  EXPECT_EQ(tessel_dtype_size(TESSEL_F16), 2);
  EXPECT_EQ(tessel_dtype_size(TESSEL_BF16), 2);
  EXPECT_EQ(tessel_dtype_size(TESSEL_F64), 8);
  EXPECT_EQ(tessel_dtype_size(TESSEL_I32), 4);
  EXPECT_EQ(tessel_dtype_size(TESSEL_I64), 8);
  EXPECT_EQ(tessel_dtype_size(6), 0);
  EXPECT_EQ(tessel_dtype_size(-1), 0);
}

TEST_F(ContextTest, AllocIsAlignedAndZeroed) {
  for (int64_t bytes : {0, 1, 3, 63, 64, 65, 1000, 1 << 20}) {
    auto *p = static_cast<uint8_t *>(tessel_alloc(ctx, bytes));
    ASSERT_NE(p, nullptr) << bytes;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u) << bytes;
    for (int64_t i = 0; i < bytes; ++i)
      ASSERT_EQ(p[i], 0) << bytes;
    tessel_free(ctx, p);
  }
  tessel_free(ctx, nullptr);
}

TEST_F(ContextTest, CopiesMoveBytesAndCountThem) {
  const int64_t n = 1031;
  std::vector<uint8_t> host(n), back(n);
  for (int64_t i = 0; i < n; ++i)
    host[size_t(i)] = uint8_t(i * 7 + 3);
  void *a = tessel_alloc(ctx, n);
  void *b = tessel_alloc(ctx, n);
  tessel_copy_to_device(ctx, a, host.data(), n);
  tessel_copy(ctx, b, a, n);
  tessel_copy_to_host(ctx, back.data(), b, n - 1);
  tessel_synchronize(ctx);
  EXPECT_TRUE(std::equal(host.begin(), host.end() - 1, back.begin()));
  tessel_counters c;
  tessel_get_counters(ctx, &c);
  EXPECT_EQ(c.bytes_copied, 3 * n - 1);
  EXPECT_EQ(c.kernel_calls, 0);
  tessel_reset_counters(ctx);
  tessel_get_counters(ctx, &c);
  EXPECT_EQ(c.bytes_copied, 0);
  tessel_free(ctx, a);
  tessel_free(ctx, b);
}

TEST_F(ContextTest, CopyOntoItselfIsANoOp) {
  std::vector<uint8_t> host = {1, 2, 3, 4, 5};
  void *a = tessel_alloc(ctx, 5);
  tessel_copy_to_device(ctx, a, host.data(), 5);
  tessel_reset_counters(ctx);
  tessel_copy(ctx, a, a, 5);
  tessel_counters c;
  tessel_get_counters(ctx, &c);
  EXPECT_EQ(c.bytes_copied, 0);
  std::vector<uint8_t> back(5);
  tessel_copy_to_host(ctx, back.data(), a, 5);
  EXPECT_EQ(back, host);
  tessel_free(ctx, a);
}

TEST_F(ContextTest, ZeroFillsBytes) {
  const int64_t n = 1000;
  std::vector<uint8_t> host(n, 0xAB), back(n);
  auto *a = static_cast<uint8_t *>(tessel_alloc(ctx, n));
  tessel_copy_to_device(ctx, a, host.data(), n);
  tessel_zero(ctx, a + 3, n - 10); // Bytes [3, 993).
  tessel_zero(ctx, a, 0);
  tessel_synchronize(ctx);
  tessel_copy_to_host(ctx, back.data(), a, n);
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(back[size_t(i)], i >= 3 && i < n - 7 ? 0 : 0xAB) << i;
  tessel_free(ctx, a);
}

TEST_F(ContextTest, KernelCallsAndTimeAreCounted) {
  std::vector<float> a(64 * 64, 1.0f), b(64 * 64, 2.0f), c(64 * 64);
  tessel_counters before;
  tessel_get_counters(ctx, &before);
  tessel_binary(ctx, TESSEL_ADD, TESSEL_F32, a.data(), b.data(), c.data(), 13);
  tessel_unary(ctx, TESSEL_EXP, TESSEL_F32, a.data(), c.data(), 7);
  tessel_matmul(ctx, TESSEL_F32, a.data(), b.data(), c.data(), 1, 64, 64, 64,
                0, 0, 0);
  tessel_counters after;
  tessel_get_counters(ctx, &after);
  EXPECT_EQ(after.kernel_calls - before.kernel_calls, 3);
  EXPECT_GT(after.kernel_seconds, before.kernel_seconds);
  EXPECT_EQ(after.bytes_copied, 0);
  tessel_reset_counters(ctx);
  tessel_get_counters(ctx, &after);
  EXPECT_EQ(after.kernel_calls, 0);
  EXPECT_EQ(after.kernel_seconds, 0.0);
}

TEST_F(ContextTest, ErrorsAreStickyUntilCleared) {
  EXPECT_EQ(tessel_error(ctx), nullptr);
  float x[2] = {1, 2}, y[2];
  tessel_unary(ctx, 99, TESSEL_F32, x, y, 2);
  ASSERT_NE(tessel_error(ctx), nullptr);
  std::string first = tessel_error(ctx);
  EXPECT_NE(first.find("op"), std::string::npos);
  tessel_unary(ctx, TESSEL_EXP, 77, x, y, 2);
  EXPECT_EQ(first, tessel_error(ctx)); // The first error wins.
  tessel_clear_error(ctx);
  EXPECT_EQ(tessel_error(ctx), nullptr);
  tessel_unary(ctx, TESSEL_EXP, 77, x, y, 2);
  ASSERT_NE(tessel_error(ctx), nullptr);
  EXPECT_NE(std::string(tessel_error(ctx)).find("dtype"), std::string::npos);
  tessel_clear_error(ctx);
}

// Ranks run as threads, each with its own context and BLAS calls.
TEST(ContextThreads, RanksAsThreads) {
  const int world = 4;
  tessel_local_world *localWorld = tessel_local_world_create(world);
  std::vector<double> sums(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([r, &sums, localWorld] {
      tessel_ctx_options options{TESSEL_BACKEND_CPU, r, world, 0};
      options.comm = TESSEL_COMM_LOCAL;
      options.local_world = localWorld;
      tessel_ctx *ctx = tessel_ctx_create(&options);
      std::vector<float> a(37 * 41, float(r + 1)), b(41 * 29, 1.0f),
          c(37 * 29);
      for (int it = 0; it < 20; ++it)
        tessel_matmul(ctx, TESSEL_F32, a.data(), b.data(), c.data(), 1, 37,
                      29, 41, 0, 0, 0);
      double s = 0;
      for (float v : c)
        s += v;
      sums[size_t(r)] = s;
      tessel_counters cnt;
      tessel_get_counters(ctx, &cnt);
      if (cnt.kernel_calls != 20)
        sums[size_t(r)] = -1;
      tessel_ctx_destroy(ctx);
    });
  }
  for (auto &t : threads)
    t.join();
  tessel_local_world_destroy(localWorld);
  for (int r = 0; r < world; ++r)
    EXPECT_EQ(sums[size_t(r)], double(r + 1) * 41 * 37 * 29);
}

} // namespace

namespace {
// The step and microbatch counters start at 0 and hold what the launcher
// sets.
TEST(ContextStep, SetAndGet) {
  tessel_ctx_options options{TESSEL_BACKEND_CPU, 0, 1, 0};
  tessel_ctx *ctx = tessel_ctx_create(&options);
  ASSERT_NE(ctx, nullptr);
  EXPECT_EQ(tessel_get_step(ctx), 0u);
  tessel_set_step(ctx, 41);
  EXPECT_EQ(tessel_get_step(ctx), 41u);
  EXPECT_EQ(tessel_get_microbatch(ctx), 0u);
  tessel_set_microbatch(ctx, 3);
  EXPECT_EQ(tessel_get_microbatch(ctx), 3u);
  EXPECT_EQ(tessel_get_step(ctx), 41u);
  tessel_ctx_destroy(ctx);
}
} // namespace

namespace {
// The allocation counters hold exactly the bytes asked for and survive a
// counter reset; the peak remembers the high-water mark.
TEST(ContextCounters, AllocatedBytesAreExact) {
  tessel_ctx_options options{TESSEL_BACKEND_CPU, 0, 1, 0};
  tessel_ctx *ctx = tessel_ctx_create(&options);
  ASSERT_NE(ctx, nullptr);
  void *a = tessel_alloc(ctx, 100);
  void *b = tessel_alloc(ctx, 1000);
  tessel_counters counters;
  tessel_get_counters(ctx, &counters);
  EXPECT_EQ(counters.bytes_allocated, 1100);
  tessel_free(ctx, a);
  tessel_reset_counters(ctx);
  tessel_get_counters(ctx, &counters);
  EXPECT_EQ(counters.bytes_allocated, 1000);
  EXPECT_EQ(counters.peak_bytes_allocated, 1100);
  EXPECT_EQ(counters.kernel_calls, 0);
  tessel_free(ctx, b);
  tessel_get_counters(ctx, &counters);
  EXPECT_EQ(counters.bytes_allocated, 0);
  tessel_ctx_destroy(ctx);
}
} // namespace
