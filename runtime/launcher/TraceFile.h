//===- TraceFile.h - tessel-run --trace: one step's timeline ----*- C++ -*-===//
//
// Every rank records one training step with the runtime's trace
// (tessel_trace_*); the run writes it as a Chrome trace (chrome://tracing,
// Perfetto: a process per rank, a thread for what the rank's thread issues
// and one for its collectives) and rank 0 sums its own: kernels, collectives,
// and the started bytes whose wait came after at least one kernel, the
// witness of the report's overlapped bytes.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_RUN_TRACEFILE_H
#define TESSEL_RUN_TRACEFILE_H

#include "tessel/runtime.h"

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace tessel::run {

/// The events of one rank's trace, in the order recorded.
std::vector<tessel_trace_event> readTrace(const tessel_ctx *ctx);

/// What one rank's traced step did.
struct TraceSummary {
  int64_t kernels = 0;
  double kernelSeconds = 0;
  int64_t collectives = 0;
  double commSeconds = 0;
  /// Of commSeconds, the time some kernel of the rank ran too.
  double hiddenSeconds = 0;
  /// Payload bytes of started collectives; of them, those the rank issued
  /// a kernel between starting and waiting for.
  int64_t startedBytes = 0;
  int64_t overlappedBytes = 0;
  int64_t dropped = 0;
};
TraceSummary summarizeTrace(const std::vector<tessel_trace_event> &events,
                            int64_t dropped);
/// "412 kernels (0.21 s), 14 collectives (0.03 s, 85% of it while kernels
/// ran); 3172356 of 3172356 started bytes overlapped kernels".
std::string describeTrace(const TraceSummary &summary);

/// The --trace file of one process: the ranks it runs add their events
/// (from their threads), then write() writes them at once.
class TraceWriter {
public:
  /// `path`: the file; under MPI every process writes its own ranks', rank
  /// R > 0 into `path` with ".rank<R>" before its extension.
  explicit TraceWriter(std::string path) : path(std::move(path)) {}
  void add(int32_t rank, int64_t step, std::vector<tessel_trace_event> events);
  /// Writes the file (a temporary renamed over it); throws RunError.
  void write() const;
  /// The file rank `rank`'s process writes when it is one of `processes`
  /// (1: every rank in this one).
  static std::string pathFor(const std::string &path, int32_t rank,
                             int32_t processes);

private:
  std::string path;
  mutable std::mutex mutex;
  std::map<int32_t, std::pair<int64_t, std::vector<tessel_trace_event>>> ranks;
};

} // namespace tessel::run

#endif // TESSEL_RUN_TRACEFILE_H
