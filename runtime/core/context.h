//===- context.h - The backend-neutral state of one rank --------*- C++ -*-===//
//
// Private to the runtime. The front (runtime/core) owns everything a context
// holds except the backend's own state: the rank and its mesh coordinates,
// the step, microbatch and random stream, the sticky error, the counters and
// the allocation table. The backend and its communicator hang off it, so
// one compiled model runs on whichever backend the context was created with.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_RUNTIME_CORE_CONTEXT_H
#define TESSEL_RUNTIME_CORE_CONTEXT_H

#include "core/trace.h"
#include "tessel/runtime.h"

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace tessel {
class Backend;
class Communicator;
class CommWorker;
struct CaptureState;

/// Bytes and calls of one (collective, axes mask) or (peer, direction);
/// asyncBytes: of `bytes`, those of collectives started with a *_start
/// call (collectives only).
struct CommCounter {
  int64_t bytes = 0;
  int64_t calls = 0;
  int64_t asyncBytes = 0;
};
} // namespace tessel

// A context belongs to one rank, and a rank issues its kernels from one
// thread, so most fields need no locking. The exception is the comm worker
// (core/async_comm.h): it runs started collectives on a thread of its own
// and records their errors and counters, so the error and the collectives'
// counters are guarded by stateMutex. Everything else the worker reads
// (rank, mesh, timeout, communicator) is fixed once the context exists.
struct tessel_ctx {
  tessel_ctx();
  ~tessel_ctx();

  int32_t rank = 0;
  int32_t worldSize = 1;
  /// tessel_comm_kind; the mesh (at least one axis) and this rank's
  /// coordinates on it.
  int32_t comm = TESSEL_COMM_NONE;
  std::vector<int64_t> meshShape{1};
  std::vector<int64_t> meshCoord{0};
  double commTimeoutSeconds = 600;
  /// Declared before the communicator so that it is destroyed after it: a
  /// communicator may still use the backend's device state when it leaves.
  std::unique_ptr<tessel::Backend> backend;
  /// Null for TESSEL_COMM_NONE (every group has one member).
  std::unique_ptr<tessel::Communicator> communicator;
  /// The thread that runs started collectives when the communicator blocks
  /// its caller (the CPU ones); created by the first start, so a context
  /// that never starts one has no thread. ~tessel_ctx drains and joins it
  /// first, while everything it uses still exists.
  std::unique_ptr<tessel::CommWorker> commWorker;
  /// Between tessel_graph_begin and tessel_graph_end (core/graph.h); null
  /// otherwise. ~tessel_ctx abandons a capture first.
  std::unique_ptr<tessel::CaptureState> capture;
  /// Guards hasError, error and commCounters (see above).
  mutable std::mutex stateMutex;
  /// Per collective, keyed by axes mask.
  std::unordered_map<uint32_t, tessel::CommCounter>
      commCounters[TESSEL_NUM_COLLECTIVES];
  /// Per tessel_p2p_direction, keyed by peer rank.
  std::unordered_map<int32_t, tessel::CommCounter> p2pCounters[2];
  uint64_t step = 0;
  uint64_t microbatch = 0;
  /// tessel_set_rng_stream: 0 outside repeated layers.
  uint64_t rngStream = 0;
  /// tessel_set_layer: the model's layer the next kernels belong to.
  int64_t layer = 0;
  /// tessel_set_dropout: false makes every dropout the identity.
  bool dropoutEnabled = true;
  bool hasError = false;
  std::string error;
  tessel_counters counters{};
  /// tessel_trace_begin's timeline (kept after tessel_trace_end for
  /// reading); `tracing` while it records.
  std::unique_ptr<tessel::Trace> trace;
  bool tracing = false;
  /// Bytes asked for by each live tessel_alloc, to count frees.
  std::unordered_map<void *, int64_t> allocations;
};

namespace tessel {

/// Records `fmt` as the context's error unless one is already recorded: the
/// first failure is the one worth reporting. Backends call it too, for
/// errors only the data reveals (a label out of range). Thread-safe: the
/// comm worker records the errors of started collectives.
void setError(tessel_ctx *ctx, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/// True, with the error recorded, when ctx is capturing a step: `entry`
/// (a call that reads back, synchronises, allocates, sets the step or
/// moves data through the host) cannot be part of a captured step.
bool refuseWhileCapturing(tessel_ctx *ctx, const char *entry);

/// Sets what tessel_error(NULL) reports on this thread: why the last
/// context-less call (tessel_ctx_create, tessel_mpi_init) failed.
void setCreateError(std::string message);

/// Counts one kernel and adds its wall time to the context's counters. On
/// an asynchronous backend this is the time to issue the kernel; the
/// counter documents it as wall time on the CPU.
class KernelScope {
public:
  /// `name`: the entry point's, for the trace (static storage).
  KernelScope(tessel_ctx *ctx, const char *name)
      : ctx(ctx), name(name), start(std::chrono::steady_clock::now()) {
    if (ctx && ctx->tracing)
      traceBegin = ctx->trace->now();
  }
  ~KernelScope() {
    if (!ctx)
      return;
    std::chrono::duration<double> elapsed =
        std::chrono::steady_clock::now() - start;
    ++ctx->counters.kernel_calls;
    ctx->counters.kernel_seconds += elapsed.count();
    if (ctx->tracing)
      ctx->trace->kernel(name, traceBegin);
  }
  KernelScope(const KernelScope &) = delete;
  KernelScope &operator=(const KernelScope &) = delete;

private:
  tessel_ctx *ctx;
  const char *name;
  std::chrono::steady_clock::time_point start;
  double traceBegin = 0;
};

} // namespace tessel

#endif // TESSEL_RUNTIME_CORE_CONTEXT_H
