//===- trace.h - A rank's timeline of kernels and collectives --*- C++ -*-===//
//
// Private to the runtime. While a context traces (tessel_trace_begin), the
// front records each kernel the rank issues, each collective from its call
// (or start) to its completion, and each wait, with steady-clock times from
// the trace's beginning. A started collective also records how many kernels
// the rank issued between its start and its wait: the witness that it
// overlapped compute, which tessel-run compares with the compiler's
// overlapped bytes. The comm worker completes collectives from its own
// thread, hence the mutex.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_RUNTIME_CORE_TRACE_H
#define TESSEL_RUNTIME_CORE_TRACE_H

#include "tessel/runtime.h"

#include <chrono>
#include <cstdint>
#include <mutex>
#include <vector>

namespace tessel {

class Trace {
public:
  explicit Trace(int64_t maxEvents);

  /// Seconds since the trace began.
  double now() const;
  /// Records a kernel of the rank's thread that ran from `begin` to now.
  void kernel(const char *name, double begin);
  /// Records a collective issued at `begin`; its index for complete() (-1
  /// when the trace is full). A started one remembers how many kernels were
  /// recorded before it, for the wait.
  int64_t collective(const char *name, int32_t kind, uint32_t axes,
                     int64_t bytes, bool started, const void *out,
                     double begin);
  /// The collective `index` completed now (from any thread).
  void complete(int64_t index);
  /// The rank waited from `begin` to now for the started collectives whose
  /// output is `out` (null: every started one): they count the kernels
  /// recorded since their start. A collective without a completion time
  /// (issued on a stream) completes at its wait.
  void waited(const void *out, double begin);

  int64_t count() const;
  int64_t dropped() const;
  bool get(int64_t index, tessel_trace_event &event) const;

private:
  struct Event {
    tessel_trace_event event;
    const void *out = nullptr;
    int64_t kernelsAtStart = 0;
  };
  /// Appends `event` unless the trace is full; its index or -1.
  int64_t add(const Event &event);

  const std::chrono::steady_clock::time_point origin;
  const int64_t maxEvents;
  mutable std::mutex mutex;
  std::vector<Event> events;
  int64_t kernels = 0;
  int64_t droppedEvents = 0;
};

} // namespace tessel

#endif // TESSEL_RUNTIME_CORE_TRACE_H
