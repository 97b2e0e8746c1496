//===- CudaGraphTest.cpp - Captured steps as CUDA graphs ------------------===//
//
// A step captured on the GPU (stream capture, tessel_graph_*) against the
// same calls run one by one on the CPU: a capture runs nothing, and each
// launch runs the kernels on what device memory and the device step hold
// at the launch; a host constant copied while capturing is the graph's.
//
//===----------------------------------------------------------------------===//

#include "CudaTestUtil.h"

#include <cmath>

using namespace tessel::cudatest;

namespace {

// The calls of one "step": a constant written from the host, a dropout of
// the context's step, an add and an SGD update with momentum of the
// context's step (the rate from a warm-up schedule: no pow or cos, so the
// GPU equals the CPU bit for bit).
struct Step {
  void *x, *y, *p, *g, *m, *v, *scale;
  int64_t n;
  void issue(tessel_ctx *ctx, const tessel_optimizer &opt,
             const tessel_lr_schedule &schedule) const {
    float half = 0.5f;
    tessel_copy_to_device(ctx, scale, &half, sizeof(half));
    tessel_dropout_current(ctx, TESSEL_F32, x, y, n, 0.25, 17, 0);
    tessel_binary(ctx, TESSEL_ADD, TESSEL_F32, g, y, g, n);
    tessel_optimizer_update_current(ctx, &opt, &schedule, TESSEL_F32, p, g,
                                    scale, m, nullptr, n);
  }
};

TEST_F(CpuVsCuda, CapturedStepReplaysWithEachLaunchsStep) {
  const int64_t n = 10007;
  tessel_optimizer sgd{};
  sgd.kind = TESSEL_OPT_SGD;
  sgd.momentum = 0.9;
  sgd.weight_decay = 0.01;
  tessel_lr_schedule schedule{TESSEL_LR_CONSTANT, 1e-2, 0.0, 3, 0};
  std::vector<float> x(static_cast<size_t>(n)),
      zeros(static_cast<size_t>(n), 0.f);
  for (int64_t i = 0; i < n; ++i)
    x[size_t(i)] = std::sin(float(i));
  Step steps[2];
  tessel_ctx *ctxs[2] = {cpu, gpu};
  for (int k = 0; k < 2; ++k)
    steps[k] = {upload(ctxs[k], x),     upload(ctxs[k], zeros),
                upload(ctxs[k], x),     upload(ctxs[k], zeros),
                upload(ctxs[k], zeros), upload(ctxs[k], zeros),
                upload(ctxs[k], std::vector<float>{0.f}), n};
  // Warm-up, as tessel-run --graph does: step 0 call by call on both.
  for (int k = 0; k < 2; ++k) {
    tessel_set_step(ctxs[k], 0);
    steps[k].issue(ctxs[k], sgd, schedule);
  }
  tessel_synchronize(gpu);
  ASSERT_EQ(tessel_graph_begin(gpu), 0) << tessel_error(gpu);
  steps[1].issue(gpu, sgd, schedule);
  tessel_graph *graph = tessel_graph_end(gpu);
  ASSERT_NE(graph, nullptr) << tessel_error(gpu);
  for (uint64_t step = 1; step <= 4; ++step) {
    tessel_set_step(cpu, step);
    steps[0].issue(cpu, sgd, schedule);
    tessel_set_step(gpu, step);
    tessel_graph_launch(gpu, graph);
    ASSERT_EQ(tessel_error(gpu), nullptr) << tessel_error(gpu);
    for (void *Step::*field : {&Step::y, &Step::p, &Step::g, &Step::m}) {
      std::vector<float> want = download<float>(cpu, steps[0].*field, size_t(n));
      std::vector<float> got = download<float>(gpu, steps[1].*field, size_t(n));
      ASSERT_EQ(want, got) << "step " << step;
    }
  }
  tessel_graph_destroy(graph);
  for (int k = 0; k < 2; ++k)
    for (void *b : {steps[k].x, steps[k].y, steps[k].p, steps[k].g, steps[k].m,
                    steps[k].v, steps[k].scale})
      tessel_free(ctxs[k], b);
}

// Tests that a capture refuses a read-back with the CPU's words and ends
// with nothing, and the context captures again afterwards.
TEST_F(CpuVsCuda, CaptureRefusesAReadBack) {
  void *buffer = upload(gpu, std::vector<float>{1.f});
  float host = 0.f;
  ASSERT_EQ(tessel_graph_begin(gpu), 0) << tessel_error(gpu);
  tessel_copy_to_host(gpu, &host, buffer, 4);
  EXPECT_EQ(tessel_graph_end(gpu), nullptr);
  ASSERT_NE(tessel_error(gpu), nullptr);
  EXPECT_NE(std::string(tessel_error(gpu)).find("tessel_copy_to_host: not "
                                                "allowed while a step is "
                                                "being captured"),
            std::string::npos)
      << tessel_error(gpu);
  tessel_clear_error(gpu);
  ASSERT_EQ(tessel_graph_begin(gpu), 0) << tessel_error(gpu);
  tessel_unary(gpu, TESSEL_NEG, TESSEL_F32, buffer, buffer, 1);
  tessel_graph *graph = tessel_graph_end(gpu);
  ASSERT_NE(graph, nullptr) << tessel_error(gpu);
  EXPECT_EQ(download<float>(gpu, buffer, 1)[0], 1.f); // not run yet
  tessel_graph_launch(gpu, graph);
  EXPECT_EQ(download<float>(gpu, buffer, 1)[0], -1.f);
  tessel_graph_destroy(graph);
  tessel_free(gpu, buffer);
}

} // namespace
