//===- graph.h - The state of a step being captured -------------*- C++ -*-===//
//
// Private to the runtime. Between tessel_graph_begin and tessel_graph_end a
// context holds a CaptureState: what its counters were (a capture runs
// nothing, so what the front counted meanwhile is taken back and charged
// to every launch instead), the call recorder when the backend has no
// native capture, the comm worker set aside (started collectives are kept
// in call order with the rest), and whether it was tracing.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_RUNTIME_CORE_GRAPH_H
#define TESSEL_RUNTIME_CORE_GRAPH_H

#include "core/async_comm.h"
#include "core/context.h"
#include "core/recording.h"

#include <memory>
#include <unordered_map>

namespace tessel {

/// What the front counts for one piece of work: the activity counters and
/// the collectives' (per kind, per axes mask).
struct CountedWork {
  int64_t kernelCalls = 0;
  int64_t bytesCopied = 0;
  std::unordered_map<uint32_t, CommCounter> comm[TESSEL_NUM_COLLECTIVES];
};

struct CaptureState {
  CountedWork before; // the context's counts at tessel_graph_begin
  std::unique_ptr<CallRecorder> recorder; // null: the backend captures
  std::unique_ptr<CommWorker> worker;     // set aside while capturing
  bool wasTracing = false;
};

/// Puts back what a capture set aside (the real backend and communicator,
/// the comm worker, tracing) and drops the capture; nothing if none.
void abandonCapture(tessel_ctx *ctx);

} // namespace tessel

/// A captured step: its context, the work and what the front counted when
/// it was captured (added to the context's counters at every launch).
struct tessel_graph {
  tessel_ctx *ctx = nullptr;
  std::unique_ptr<tessel::CapturedWork> work;
  tessel::CountedWork counted;
};

#endif // TESSEL_RUNTIME_CORE_GRAPH_H
