//===- trace.cpp - A rank's timeline of kernels and collectives -----------===//

#include "core/trace.h"

#include "core/async_comm.h"
#include "core/context.h"

#include <new>

using namespace tessel;

Trace::Trace(int64_t maxEvents)
    : origin(std::chrono::steady_clock::now()), maxEvents(maxEvents) {}

double Trace::now() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                       origin)
      .count();
}

int64_t Trace::add(const Event &event) {
  if (int64_t(events.size()) >= maxEvents) {
    ++droppedEvents;
    return -1;
  }
  try {
    events.push_back(event);
  } catch (const std::bad_alloc &) {
    ++droppedEvents;
    return -1;
  }
  return int64_t(events.size()) - 1;
}

void Trace::kernel(const char *name, double begin) {
  Event e{};
  e.event.kind = TESSEL_TRACE_KERNEL;
  e.event.name = name;
  e.event.begin = begin;
  e.event.end = now();
  e.event.kernels_between = -1;
  std::lock_guard<std::mutex> lock(mutex);
  ++kernels;
  add(e);
}

int64_t Trace::collective(const char *name, int32_t kind, uint32_t axes,
                          int64_t bytes, bool started, const void *out,
                          double begin) {
  Event e{};
  e.event.kind = TESSEL_TRACE_COLLECTIVE;
  e.event.name = name;
  e.event.collective = kind;
  e.event.axes = axes;
  e.event.bytes = bytes;
  e.event.started = started ? 1 : 0;
  e.event.begin = begin;
  e.event.end = -1; // until it completes
  e.event.kernels_between = -1;
  e.out = out;
  std::lock_guard<std::mutex> lock(mutex);
  e.kernelsAtStart = kernels;
  return add(e);
}

void Trace::complete(int64_t index) {
  double end = now();
  std::lock_guard<std::mutex> lock(mutex);
  if (index >= 0 && index < int64_t(events.size()))
    events[index].event.end = end;
}

void Trace::waited(const void *out, double begin) {
  Event e{};
  e.event.kind = TESSEL_TRACE_WAIT;
  e.event.name = out ? "tessel_comm_wait" : "tessel_comm_wait_all";
  e.event.begin = begin;
  e.event.end = now();
  e.event.kernels_between = -1;
  e.out = out;
  std::lock_guard<std::mutex> lock(mutex);
  for (Event &c : events)
    if (c.event.kind == TESSEL_TRACE_COLLECTIVE && c.event.started &&
        c.event.kernels_between < 0 && (!out || c.out == out)) {
      c.event.kernels_between = kernels - c.kernelsAtStart;
      if (c.event.end < 0)
        c.event.end = e.event.end;
    }
  add(e);
}

int64_t Trace::count() const {
  std::lock_guard<std::mutex> lock(mutex);
  return int64_t(events.size());
}

int64_t Trace::dropped() const {
  std::lock_guard<std::mutex> lock(mutex);
  return droppedEvents;
}

bool Trace::get(int64_t index, tessel_trace_event &event) const {
  std::lock_guard<std::mutex> lock(mutex);
  if (index < 0 || index >= int64_t(events.size()))
    return false;
  event = events[index].event;
  return true;
}

extern "C" {

int32_t tessel_trace_begin(tessel_ctx *ctx, int64_t max_events) {
  if (!ctx)
    return 1;
  if (refuseWhileCapturing(ctx, "tessel_trace_begin"))
    return 1;
  if (max_events < 0) {
    setError(ctx, "tessel_trace_begin: max_events %lld is negative",
             (long long)max_events);
    return 1;
  }
  // Collectives started under the previous trace complete into it first.
  waitForStartedCollectives(ctx);
  try {
    ctx->trace = std::make_unique<Trace>(max_events);
  } catch (const std::bad_alloc &) {
    setError(ctx, "tessel_trace_begin: out of memory");
    return 1;
  }
  ctx->tracing = true;
  return 0;
}

void tessel_trace_end(tessel_ctx *ctx) {
  if (!ctx || refuseWhileCapturing(ctx, "tessel_trace_end"))
    return;
  // What the traced code started completes inside the trace.
  waitForStartedCollectives(ctx);
  ctx->tracing = false;
}

int64_t tessel_trace_count(const tessel_ctx *ctx) {
  return ctx && ctx->trace ? ctx->trace->count() : 0;
}

int64_t tessel_trace_dropped(const tessel_ctx *ctx) {
  return ctx && ctx->trace ? ctx->trace->dropped() : 0;
}

int32_t tessel_trace_get(const tessel_ctx *ctx, int64_t index,
                         tessel_trace_event *out) {
  if (!ctx || !ctx->trace || !out)
    return 1;
  return ctx->trace->get(index, *out) ? 0 : 1;
}

} // extern "C"
