//===- recording.h - Captured steps on a backend without graphs -*- C++ -*-===//
//
// tessel_graph_begin on a backend that has no native capture (the CPU's)
// puts a RecordingBackend in front of the context's backend and a
// RecordingCommunicator in front of its communicator: every kernel, copy
// and collective the front hands them is kept as a call (arguments by
// value, host arrays copied) and not run. tessel_graph_end takes the calls
// out as a RecordedWork, whose launch runs them on the real backend and
// communicator in the order they were issued.
//
// This is the contract a CUDA graph keeps, on the CPU: whatever the calls
// took from the host when they were issued is fixed at the capture, and
// what changes between launches must be read when the work runs (the
// context's step, by the _current entries; the inputs, from device
// memory). So training with a captured step equals training without, bit
// for bit, only when the step really is capturable; the launcher's test of
// --graph checks exactly that here, without a GPU.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_RUNTIME_CORE_RECORDING_H
#define TESSEL_RUNTIME_CORE_RECORDING_H

#include "core/backend.h"

#include <functional>
#include <memory>
#include <vector>

namespace tessel {

/// The calls of one capture, in issue order.
using RecordedCalls = std::vector<std::function<void()>>;

/// Replays recorded calls (tessel_graph_launch on a recording backend).
class RecordedWork final : public CapturedWork {
public:
  explicit RecordedWork(RecordedCalls calls) : calls(std::move(calls)) {}
  void launch(tessel_ctx *ctx) override;

private:
  RecordedCalls calls;
};

/// Wraps the context's backend (and communicator) for a capture and puts
/// them back at the end. Lives in the context's CaptureState.
class CallRecorder {
public:
  /// Installs the recording wrappers on ctx.
  explicit CallRecorder(tessel_ctx *ctx);
  /// Puts the real backend and communicator back (if not done yet).
  ~CallRecorder();
  /// Puts them back and returns what was recorded.
  std::unique_ptr<CapturedWork> finish();

private:
  tessel_ctx *ctx;
  std::shared_ptr<RecordedCalls> calls;
  bool installed = false;
};

} // namespace tessel

#endif // TESSEL_RUNTIME_CORE_RECORDING_H
