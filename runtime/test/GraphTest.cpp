//===- GraphTest.cpp - Steps captured once and launched (tessel_graph_*) --===//
//
// The CPU backend records a capture's calls and replays them, as a CUDA
// graph does: nothing runs while capturing, a launch runs the work with
// the arguments it was captured with and reads device memory (and the
// context's step, through the _current entries) as it runs.
//
//===----------------------------------------------------------------------===//

#include "LocalWorld.h"
#include "TestUtil.h"

#include <functional>

using namespace tt;

namespace {

using GraphTest = RuntimeTest;

/// Ends a capture that must succeed.
tessel_graph *endCapture(tessel_ctx *ctx) {
  tessel_graph *graph = tessel_graph_end(ctx);
  EXPECT_NE(graph, nullptr) << (tessel_error(ctx) ? tessel_error(ctx) : "");
  return graph;
}

// Tests that a capture runs nothing, and each launch runs the captured
// kernels on what device memory holds at the launch.
TEST_F(GraphTest, LaunchRunsTheCaptureOnTodaysMemory) {
  std::vector<float> a = {1, 2, 3}, b = {10, 20, 30}, c(3, 0.f), d(3, 0.f);
  ASSERT_EQ(tessel_graph_begin(ctx), 0);
  tessel_binary(ctx, TESSEL_ADD, TESSEL_F32, a.data(), b.data(), c.data(), 3);
  tessel_copy(ctx, d.data(), c.data(), 12);
  tessel_graph *graph = endCapture(ctx);
  EXPECT_EQ(c, std::vector<float>(3, 0.f)); // captured, not run
  tessel_graph_launch(ctx, graph);
  EXPECT_EQ(d, (std::vector<float>{11, 22, 33}));
  a = {5, 5, 5};
  tessel_graph_launch(ctx, graph);
  EXPECT_EQ(d, (std::vector<float>{15, 25, 35}));
  tessel_graph_destroy(graph);
}

// Tests that tessel_copy_to_device while capturing captures the host bytes
// as they were at the call (a constant), and host arrays (a reduction's
// shape) are copied at the capture too.
TEST_F(GraphTest, HostArgumentsAreFixedAtTheCapture) {
  float value = 1.5f, out = 0.f;
  std::vector<float> x = {1, 2, 3, 4, 5, 6}, rowSums(2, 0.f);
  int64_t shape[] = {2, 3};
  ASSERT_EQ(tessel_graph_begin(ctx), 0);
  tessel_copy_to_device(ctx, &out, &value, sizeof(value));
  tessel_reduce(ctx, TESSEL_REDUCE_SUM, TESSEL_F32, x.data(), rowSums.data(), 2,
                shape, 0b10);
  tessel_graph *graph = endCapture(ctx);
  value = 7.0f;
  shape[1] = 1;
  tessel_graph_launch(ctx, graph);
  EXPECT_EQ(out, 1.5f);
  EXPECT_EQ(rowSums, (std::vector<float>{6, 15}));
  tessel_graph_destroy(graph);
}

// Tests that the _current entries read the step set before each launch:
// a captured dropout and AdamW update give, launch after launch, what the
// explicit entries give call by call with that step.
TEST_F(GraphTest, CurrentEntriesReadEachLaunchsStep) {
  const int64_t n = 64;
  std::vector<float> x(n, 1.0f), y(n), p(n, 0.5f), g(n, 0.25f), m(n), v(n);
  std::vector<float> wantP = p, wm(n), wv(n), wantY(n);
  const tessel_optimizer adamw =
      adamOptimizer(TESSEL_OPT_ADAMW, 0.9, 0.95, 1e-8, 0.1);
  tessel_lr_schedule schedule{TESSEL_LR_WARMUP_COSINE, 1e-2, 1e-3, 2, 6};
  ASSERT_EQ(tessel_graph_begin(ctx), 0);
  tessel_dropout_current(ctx, TESSEL_F32, x.data(), y.data(), n, 0.5, 9, 0);
  tessel_optimizer_update_current(ctx, &adamw, &schedule, TESSEL_F32, p.data(),
                                  g.data(), nullptr, m.data(), v.data(), n);
  tessel_graph *graph = endCapture(ctx);
  std::vector<std::vector<float>> masks;
  for (uint64_t step = 0; step < 6; ++step) {
    tessel_set_step(ctx, step);
    tessel_graph_launch(ctx, graph);
    tessel_dropout(ctx, TESSEL_F32, x.data(), wantY.data(), n, 0.5, 9, step, 0);
    tessel_optimizer_update(
        ctx, &adamw, TESSEL_F32, wantP.data(), g.data(), nullptr, wm.data(),
        wv.data(), n, int64_t(step) + 1,
        tessel_lr_at(schedule.kind, schedule.lr, schedule.min_lr,
                     schedule.warmup, schedule.total_steps, int64_t(step) + 1));
    ASSERT_EQ(y, wantY) << "step " << step;
    ASSERT_EQ(p, wantP) << "step " << step;
    ASSERT_EQ(v, wv) << "step " << step;
    masks.push_back(y);
  }
  EXPECT_NE(masks[0], masks[1]);
  tessel_graph_destroy(graph);
}

// Tests that a capture charges nothing and each launch charges what the
// captured calls counted.
TEST_F(GraphTest, CountersChargeEachLaunch) {
  std::vector<float> a(8, 1.f), b(8, 2.f);
  tessel_reset_counters(ctx);
  ASSERT_EQ(tessel_graph_begin(ctx), 0);
  tessel_binary(ctx, TESSEL_ADD, TESSEL_F32, a.data(), b.data(), b.data(), 8);
  tessel_unary(ctx, TESSEL_NEG, TESSEL_F32, b.data(), b.data(), 8);
  tessel_copy(ctx, a.data(), b.data(), 32);
  tessel_graph *graph = endCapture(ctx);
  tessel_counters c;
  tessel_get_counters(ctx, &c);
  EXPECT_EQ(c.kernel_calls, 0);
  EXPECT_EQ(c.bytes_copied, 0);
  for (int launch = 1; launch <= 3; ++launch) {
    tessel_graph_launch(ctx, graph);
    tessel_get_counters(ctx, &c);
    EXPECT_EQ(c.kernel_calls, 2 * launch);
    EXPECT_EQ(c.bytes_copied, 32 * launch);
  }
  tessel_graph_destroy(graph);
}

/// Expects ctx's error to name `entry` as refused while capturing, then
/// clears it.
void expectRefused(tessel_ctx *ctx, const std::string &entry) {
  const char *error = tessel_error(ctx);
  ASSERT_NE(error, nullptr) << entry;
  EXPECT_EQ(std::string(error),
            entry + ": not allowed while a step is being captured (between "
                    "tessel_graph_begin and tessel_graph_end)");
  tessel_clear_error(ctx);
}

// Tests every call a captured step cannot hold: each is refused with an
// error naming it, and a capture that recorded an error ends with nothing.
TEST_F(GraphTest, RefusesWhatAStepCannotHold) {
  float host = 0, dev = 0;
  void *buffer = tessel_alloc(ctx, 64);
  auto capture = [&](const std::string &entry,
                     const std::function<void()> &call) {
    SCOPED_TRACE(entry);
    ASSERT_EQ(tessel_graph_begin(ctx), 0);
    call();
    expectRefused(ctx, entry);
    tessel_graph *graph = tessel_graph_end(ctx);
    ASSERT_NE(graph, nullptr) << tessel_error(ctx);
    tessel_graph_destroy(graph);
    // A fresh capture whose error stays: no graph.
    ASSERT_EQ(tessel_graph_begin(ctx), 0);
    call();
    EXPECT_EQ(tessel_graph_end(ctx), nullptr);
    EXPECT_NE(tessel_error(ctx), nullptr);
    tessel_clear_error(ctx);
  };
  capture("tessel_alloc", [&] { EXPECT_EQ(tessel_alloc(ctx, 16), nullptr); });
  capture("tessel_free", [&] { tessel_free(ctx, buffer); });
  capture("tessel_copy_to_host",
          [&] { tessel_copy_to_host(ctx, &host, &dev, 4); });
  capture("tessel_synchronize", [&] { tessel_synchronize(ctx); });
  capture("tessel_set_step", [&] { tessel_set_step(ctx, 3); });
  capture("tessel_reset_counters", [&] { tessel_reset_counters(ctx); });
  capture("tessel_trace_begin",
          [&] { EXPECT_NE(tessel_trace_begin(ctx, 16), 0); });
  capture("tessel_init_param", [&] {
    tessel_init_param(ctx, &dev, TESSEL_F32, 0, 1, TESSEL_INIT_ZEROS, nullptr,
                      0, "w");
  });
  EXPECT_EQ(tessel_get_step(ctx), 0u);
  tessel_free(ctx, buffer); // still ours: the refused free kept it
}

// Tests the misuse of the entry points themselves.
TEST_F(GraphTest, MisuseIsAnErrorNeverACrash) {
  EXPECT_EQ(tessel_graph_end(ctx), nullptr);
  EXPECT_NE(std::string(tessel_error(ctx)).find("tessel_graph_end: no step is "
                                                "being captured"),
            std::string::npos);
  tessel_clear_error(ctx);
  ASSERT_EQ(tessel_graph_begin(ctx), 0);
  EXPECT_NE(tessel_graph_begin(ctx), 0);
  EXPECT_NE(std::string(tessel_error(ctx)).find("already being captured"),
            std::string::npos);
  tessel_clear_error(ctx);
  tessel_graph_launch(ctx, nullptr);
  EXPECT_NE(std::string(tessel_error(ctx)).find("null graph"),
            std::string::npos);
  tessel_clear_error(ctx);
  tessel_graph *graph = endCapture(ctx); // an empty step
  tessel_graph_launch(ctx, graph);
  EXPECT_EQ(tessel_error(ctx), nullptr);
  // Another context's graph.
  tessel_ctx_options options{TESSEL_BACKEND_CPU, 0, 1, 0};
  tessel_ctx *other = tessel_ctx_create(&options);
  tessel_graph_launch(other, graph);
  EXPECT_NE(std::string(tessel_error(other)).find("captured on another "
                                                  "context"),
            std::string::npos);
  // A context destroyed while it captures gives everything back.
  ASSERT_EQ(tessel_graph_begin(other), -1); // its error is still recorded
  tessel_clear_error(other);
  ASSERT_EQ(tessel_graph_begin(other), 0);
  std::vector<float> a(4, 1.f);
  tessel_unary(other, TESSEL_NEG, TESSEL_F32, a.data(), a.data(), 4);
  tessel_ctx_destroy(other);
  EXPECT_EQ(a, std::vector<float>(4, 1.f));
  tessel_graph_destroy(graph);
  tessel_graph_destroy(nullptr);
  tessel_graph_launch(nullptr, nullptr);
}

// Tests collectives in a captured step on a 2x2 mesh of threads: blocking
// and started ones (with their waits) replay in order on every rank, each
// launch reducing what the inputs hold then, and charging its bytes.
TEST(GraphComm, CollectivesReplayOnEveryRank) {
  expectNoErrors(
      runRanks(Mesh{2, 2}, [](tessel_ctx *ctx, int rank, tessel_local_world *) {
        std::vector<float> x(64), sum(64), gathered(128);
        ASSERT_EQ(tessel_graph_begin(ctx), 0);
        tessel_all_reduce(ctx, 0b01, TESSEL_F32, x.data(), sum.data(), 64,
                          TESSEL_REDUCE_SUM);
        int64_t shape[] = {64};
        tessel_all_gather_start(ctx, 0b10, TESSEL_F32, x.data(),
                                gathered.data(), 1, shape, 0);
        tessel_comm_wait(ctx, gathered.data());
        tessel_graph *graph = tessel_graph_end(ctx);
        ASSERT_NE(graph, nullptr) << tessel_error(ctx);
        EXPECT_EQ(tessel_comm_calls(ctx, TESSEL_COLL_ALL_REDUCE, 0b01), 0);
        for (int launch = 1; launch <= 2; ++launch) {
          std::fill(x.begin(), x.end(), float(launch * (rank + 1)));
          tessel_graph_launch(ctx, graph);
          // Axis 0 joins ranks r and r ^ 2; axis 1 ranks r and r ^ 1.
          EXPECT_EQ(sum[0], float(launch * ((rank + 1) + ((rank ^ 2) + 1))));
          int first = rank & ~1;
          EXPECT_EQ(gathered[0], float(launch * (first + 1)));
          EXPECT_EQ(gathered[64], float(launch * (first + 2)));
          EXPECT_EQ(tessel_comm_calls(ctx, TESSEL_COLL_ALL_REDUCE, 0b01),
                    launch);
          EXPECT_EQ(tessel_comm_async_bytes(ctx, TESSEL_COLL_ALL_GATHER, 0b10),
                    launch * 128 * 4);
        }
        tessel_graph_destroy(graph);
      }));
}

} // namespace
