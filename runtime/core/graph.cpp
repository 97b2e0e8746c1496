//===- graph.cpp - Steps captured once and launched many times ------------===//
//
// The tessel_graph_* entry points (runtime.h). On a backend that captures
// natively (CUDA) the capture is a stream capture and a launch a graph
// launch; on the others the front records the calls (core/recording.h).
// Either way a capture runs nothing, so the counts the front made while
// capturing are taken back and charged to each launch: a launcher's
// counters after a launched step equal those of the same step run call by
// call.
//
//===----------------------------------------------------------------------===//

#include "core/graph.h"

#include "core/backend.h"

#include <chrono>

using namespace tessel;

namespace {

/// The context's counts now (comm counters under the state lock).
CountedWork countsOf(tessel_ctx *ctx) {
  CountedWork counts;
  counts.kernelCalls = ctx->counters.kernel_calls;
  counts.bytesCopied = ctx->counters.bytes_copied;
  std::lock_guard<std::mutex> lock(ctx->stateMutex);
  for (int k = 0; k < TESSEL_NUM_COLLECTIVES; ++k)
    counts.comm[k] = ctx->commCounters[k];
  return counts;
}

/// Sets the context's counts back to `counts` and returns what was counted
/// since (counters only grow between the two: a reset is refused while
/// capturing).
CountedWork takeBackSince(tessel_ctx *ctx, const CountedWork &counts) {
  CountedWork since;
  since.kernelCalls = ctx->counters.kernel_calls - counts.kernelCalls;
  since.bytesCopied = ctx->counters.bytes_copied - counts.bytesCopied;
  ctx->counters.kernel_calls = counts.kernelCalls;
  ctx->counters.bytes_copied = counts.bytesCopied;
  std::lock_guard<std::mutex> lock(ctx->stateMutex);
  for (int k = 0; k < TESSEL_NUM_COLLECTIVES; ++k) {
    for (const auto &[mask, now] : ctx->commCounters[k]) {
      CommCounter was;
      auto it = counts.comm[k].find(mask);
      if (it != counts.comm[k].end())
        was = it->second;
      if (now.calls == was.calls)
        continue;
      CommCounter &d = since.comm[k][mask];
      d.bytes = now.bytes - was.bytes;
      d.calls = now.calls - was.calls;
      d.asyncBytes = now.asyncBytes - was.asyncBytes;
    }
    ctx->commCounters[k] = counts.comm[k];
  }
  return since;
}

/// Adds one launch's counts.
void charge(tessel_ctx *ctx, const CountedWork &counted) {
  ctx->counters.kernel_calls += counted.kernelCalls;
  ctx->counters.bytes_copied += counted.bytesCopied;
  std::lock_guard<std::mutex> lock(ctx->stateMutex);
  for (int k = 0; k < TESSEL_NUM_COLLECTIVES; ++k)
    for (const auto &[mask, d] : counted.comm[k]) {
      CommCounter &c = ctx->commCounters[k][mask];
      c.bytes += d.bytes;
      c.calls += d.calls;
      c.asyncBytes += d.asyncBytes;
    }
}

/// Ends the capture on ctx: the work (null on failure or when `discard`),
/// with everything the capture set aside put back.
std::unique_ptr<CapturedWork> endCapture(tessel_ctx *ctx, bool discard) {
  CaptureState &state = *ctx->capture;
  std::unique_ptr<CapturedWork> work =
      state.recorder ? state.recorder->finish()
                     : ctx->backend->endCapture(ctx, discard);
  ctx->commWorker = std::move(state.worker);
  ctx->tracing = state.wasTracing;
  ctx->capture.reset();
  if (discard)
    work.reset();
  return work;
}

} // namespace

bool tessel::refuseWhileCapturing(tessel_ctx *ctx, const char *entry) {
  if (!ctx->capture)
    return false;
  setError(ctx,
           "%s: not allowed while a step is being captured (between "
           "tessel_graph_begin and tessel_graph_end)",
           entry);
  return true;
}

void tessel::abandonCapture(tessel_ctx *ctx) {
  if (!ctx->capture)
    return;
  takeBackSince(ctx, ctx->capture->before);
  endCapture(ctx, /*discard=*/true);
}

extern "C" {

int32_t tessel_graph_begin(tessel_ctx *ctx) {
  if (!ctx)
    return -1;
  if (ctx->capture) {
    setError(ctx, "tessel_graph_begin: a step is already being captured");
    return -1;
  }
  if (tessel_error(ctx))
    return -1;
  // The capture starts with nothing in flight, and its started collectives
  // are kept in call order with the rest (no worker thread meanwhile).
  waitForStartedCollectives(ctx);
  auto state = std::make_unique<CaptureState>();
  state->before = countsOf(ctx);
  state->wasTracing = ctx->tracing;
  if (ctx->backend->capturesNatively()) {
    if (!ctx->backend->beginCapture(ctx))
      return -1;
  } else {
    state->recorder = std::make_unique<CallRecorder>(ctx);
  }
  state->worker = std::move(ctx->commWorker);
  ctx->tracing = false; // a launch is traced as one event
  ctx->capture = std::move(state);
  return 0;
}

tessel_graph *tessel_graph_end(tessel_ctx *ctx) {
  if (!ctx)
    return nullptr;
  if (!ctx->capture) {
    setError(ctx, "tessel_graph_end: no step is being captured (call "
                  "tessel_graph_begin first)");
    return nullptr;
  }
  // Every collective started in the capture is joined to it (a CUDA graph
  // must end on the stream it began on).
  waitForStartedCollectives(ctx);
  CountedWork counted = takeBackSince(ctx, ctx->capture->before);
  bool failed = tessel_error(ctx) != nullptr;
  std::unique_ptr<CapturedWork> work = endCapture(ctx, failed);
  if (!work) {
    if (!failed)
      setError(ctx, "tessel_graph_end: the %s backend captured nothing",
               ctx->backend->name());
    return nullptr;
  }
  auto *graph = new (std::nothrow) tessel_graph;
  if (!graph) {
    setError(ctx, "tessel_graph_end: out of memory");
    return nullptr;
  }
  graph->ctx = ctx;
  graph->work = std::move(work);
  graph->counted = std::move(counted);
  return graph;
}

void tessel_graph_launch(tessel_ctx *ctx, tessel_graph *graph) {
  if (!ctx)
    return;
  if (!graph) {
    setError(ctx, "tessel_graph_launch: null graph");
    return;
  }
  if (graph->ctx != ctx) {
    setError(ctx, "tessel_graph_launch: the graph was captured on another "
                  "context (rank %d's)",
             graph->ctx ? graph->ctx->rank : -1);
    return;
  }
  if (refuseWhileCapturing(ctx, "tessel_graph_launch"))
    return;
  // A recorded step calls the communicator from this thread.
  waitForStartedCollectives(ctx);
  const double traceBegin = ctx->tracing ? ctx->trace->now() : 0;
  auto start = std::chrono::steady_clock::now();
  graph->work->launch(ctx);
  std::chrono::duration<double> elapsed =
      std::chrono::steady_clock::now() - start;
  ctx->counters.kernel_seconds += elapsed.count();
  charge(ctx, graph->counted);
  if (ctx->tracing)
    ctx->trace->kernel("tessel_graph_launch", traceBegin);
}

void tessel_graph_destroy(tessel_graph *graph) { delete graph; }

} // extern "C"
