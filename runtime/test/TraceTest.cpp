//===- TraceTest.cpp - A rank's timeline of kernels and collectives -------===//
//
// tessel_trace_*: kernels with their entry points' names and ordered times;
// blocking and started collectives with their bytes, the started ones
// completing on the comm thread and counting the kernels issued between
// their start and their wait (the witness tessel-run checks the compiler's
// overlapped bytes against); the bound on events; nothing recorded outside
// a trace.
//
//===----------------------------------------------------------------------===//

#include "LocalWorld.h"
#include "TestUtil.h"

#include <vector>

using namespace tt;

namespace {

std::vector<tessel_trace_event> eventsOf(const tessel_ctx *ctx) {
  std::vector<tessel_trace_event> events;
  for (int64_t i = 0; i < tessel_trace_count(ctx); ++i) {
    tessel_trace_event e;
    EXPECT_EQ(tessel_trace_get(ctx, i, &e), 0);
    events.push_back(e);
  }
  return events;
}

tessel_ctx *oneRank() {
  tessel_ctx_options options{TESSEL_BACKEND_CPU, 0, 1, 0};
  return tessel_ctx_create(&options);
}

TEST(Trace, RecordsKernelsInOrderWithTheirNames) {
  tessel_ctx *ctx = oneRank();
  ASSERT_NE(ctx, nullptr);
  std::vector<float> x(64, 1.0f), y(64);
  tessel_unary(ctx, TESSEL_EXP, TESSEL_F32, x.data(), y.data(), 64); // before
  ASSERT_EQ(tessel_trace_begin(ctx, 100), 0);
  tessel_unary(ctx, TESSEL_EXP, TESSEL_F32, x.data(), y.data(), 64);
  tessel_binary(ctx, TESSEL_ADD, TESSEL_F32, x.data(), y.data(), y.data(), 64);
  tessel_trace_end(ctx);
  tessel_unary(ctx, TESSEL_EXP, TESSEL_F32, x.data(), y.data(), 64); // after
  std::vector<tessel_trace_event> events = eventsOf(ctx);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_STREQ(events[0].name, "tessel_unary");
  EXPECT_STREQ(events[1].name, "tessel_binary");
  for (const tessel_trace_event &e : events) {
    EXPECT_EQ(e.kind, TESSEL_TRACE_KERNEL);
    EXPECT_GE(e.begin, 0.0);
    EXPECT_GE(e.end, e.begin);
  }
  EXPECT_GE(events[1].begin, events[0].end);
  EXPECT_EQ(tessel_trace_dropped(ctx), 0);
  tessel_ctx_destroy(ctx);
}

TEST(Trace, KeepsAtMostMaxEventsAndCountsTheRest) {
  tessel_ctx *ctx = oneRank();
  ASSERT_NE(ctx, nullptr);
  std::vector<float> x(8, 1.0f), y(8);
  ASSERT_EQ(tessel_trace_begin(ctx, 3), 0);
  for (int i = 0; i < 5; ++i)
    tessel_unary(ctx, TESSEL_NEG, TESSEL_F32, x.data(), y.data(), 8);
  tessel_trace_end(ctx);
  EXPECT_EQ(tessel_trace_count(ctx), 3);
  EXPECT_EQ(tessel_trace_dropped(ctx), 2);
  // A new trace starts empty.
  ASSERT_EQ(tessel_trace_begin(ctx, 3), 0);
  EXPECT_EQ(tessel_trace_count(ctx), 0);
  EXPECT_EQ(tessel_trace_dropped(ctx), 0);
  tessel_trace_event e;
  EXPECT_NE(tessel_trace_get(ctx, 0, &e), 0);
  EXPECT_NE(tessel_trace_begin(ctx, -1), 0);
  EXPECT_NE(tessel_error(ctx), nullptr);
  tessel_ctx_destroy(ctx);
}

TEST(Trace, NullContextAndNoTrace) {
  EXPECT_NE(tessel_trace_begin(nullptr, 10), 0);
  tessel_trace_end(nullptr);
  EXPECT_EQ(tessel_trace_count(nullptr), 0);
  tessel_ctx *ctx = oneRank();
  ASSERT_NE(ctx, nullptr);
  tessel_trace_event e;
  EXPECT_EQ(tessel_trace_count(ctx), 0);
  EXPECT_NE(tessel_trace_get(ctx, 0, &e), 0);
  tessel_ctx_destroy(ctx);
}

// Two ranks: a blocking all-reduce, then a started one with three kernels
// before its wait, then a started one waited for at once.
TEST(Trace, CollectivesCarryBytesAndTheKernelsTheyOverlapped) {
  const int64_t n = 1024;
  std::vector<std::vector<tessel_trace_event>> traces(2);
  std::vector<std::string> errors =
      runRanks({2}, [&](tessel_ctx *ctx, int rank, tessel_local_world *) {
        std::vector<float> a(n, 1.0f), b(n, 2.0f), c(n, 3.0f), y(n);
        ASSERT_EQ(tessel_trace_begin(ctx, 100), 0);
        tessel_all_reduce(ctx, 1, TESSEL_F32, a.data(), a.data(), n,
                          TESSEL_REDUCE_SUM);
        tessel_all_reduce_start(ctx, 1, TESSEL_F32, b.data(), b.data(), n,
                                TESSEL_REDUCE_SUM);
        for (int i = 0; i < 3; ++i)
          tessel_unary(ctx, TESSEL_EXP, TESSEL_F32, a.data(), y.data(), n);
        tessel_comm_wait(ctx, b.data());
        tessel_all_reduce_start(ctx, 1, TESSEL_F32, c.data(), c.data(), n,
                                TESSEL_REDUCE_SUM);
        tessel_comm_wait(ctx, c.data());
        tessel_trace_end(ctx);
        EXPECT_EQ(b[0], 4.0f);
        EXPECT_EQ(c[0], 6.0f);
        traces[size_t(rank)] = eventsOf(ctx);
      });
  expectNoErrors(errors);
  for (const std::vector<tessel_trace_event> &events : traces) {
    std::vector<tessel_trace_event> collectives, kernels, waits;
    for (const tessel_trace_event &e : events)
      (e.kind == TESSEL_TRACE_COLLECTIVE ? collectives
       : e.kind == TESSEL_TRACE_KERNEL   ? kernels
                                         : waits)
          .push_back(e);
    ASSERT_EQ(collectives.size(), 3u);
    EXPECT_EQ(kernels.size(), 3u);
    EXPECT_EQ(waits.size(), 2u);
    EXPECT_STREQ(collectives[0].name, "tessel_all_reduce");
    EXPECT_EQ(collectives[0].started, 0);
    EXPECT_EQ(collectives[0].kernels_between, -1);
    EXPECT_STREQ(collectives[1].name, "tessel_all_reduce_start");
    EXPECT_EQ(collectives[1].started, 1);
    EXPECT_EQ(collectives[1].kernels_between, 3);
    EXPECT_EQ(collectives[2].started, 1);
    EXPECT_EQ(collectives[2].kernels_between, 0);
    for (const tessel_trace_event &e : collectives) {
      EXPECT_EQ(e.collective, TESSEL_COLL_ALL_REDUCE);
      EXPECT_EQ(e.axes, 1u);
      EXPECT_EQ(e.bytes, n * 4);
      EXPECT_GE(e.end, e.begin) << e.name; // completed
    }
    // The started ones completed no later than their waits returned.
    EXPECT_LE(collectives[1].end, waits[0].end);
    EXPECT_LE(collectives[2].end, waits[1].end);
  }
}

} // namespace
