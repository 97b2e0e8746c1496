//===- Progress.h - Progress, per-step metrics and the final summary ------===//

#ifndef TESSEL_RUN_PROGRESS_H
#define TESSEL_RUN_PROGRESS_H

#include "runtime/launcher/MeshBlocks.h"

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>

namespace tessel::run {

struct StepResult {
  int64_t step;   // 1-based; a resumed run continues the checkpoint's count
  double loss;    // the step's loss (StepLoss: over its microbatches)
  int64_t tokens; // processed this step
  double seconds;
  double tokensPerSecond;
  int64_t allocatedBytes;   // device bytes the runtime holds (its counter)
  std::optional<double> lr; // this step's learning rate (training only)
  int64_t microbatches = 1;
  // On a mesh, the first step of a run: the collectives it ran on rank 0
  // (the runtime's counters), written to the metrics as "comm".
  std::optional<std::vector<CommCount>> comm;
  // --eval-every: the held-out loss after this step, where it was taken.
  std::optional<double> evalLoss;
};

/// Writes one JSON object per step to a file (JSON lines), flushed each step
/// so a crashed or interrupted run keeps what it measured.
class MetricsWriter {
public:
  explicit MetricsWriter(const std::string &path);
  ~MetricsWriter();
  MetricsWriter(const MetricsWriter &) = delete;
  MetricsWriter &operator=(const MetricsWriter &) = delete;
  void write(const StepResult &result);

private:
  std::string path;
  std::FILE *file = nullptr;
};

/// The most bytes a pipeline's rank keeps of its microbatches between the
/// schedule's actions, and the first rank keeping that many.
struct HeldMicrobatches {
  int64_t bytes = -1, rank = 0;
};

/// The stderr report: a redrawn progress bar on a terminal, one line every
/// `logEvery` steps otherwise, and a summary at the end.
class ProgressReporter {
public:
  /// Steps firstStep + 1 .. lastStep (1-based) will be reported.
  ProgressReporter(int64_t firstStep, int64_t lastStep, int64_t logEvery,
                   bool quiet);
  void onStep(const StepResult &result);
  /// The summary; `what` says what ran ("train adamw lr 0.001, global
  /// batch 32 = 4 x 8"). On a mesh, `comm` is the communication of one step
  /// (a line of its own) and the memory figures are each rank's; a
  /// pipeline's ranks also keep up to `held.bytes` of microbatches between
  /// their schedule's actions, the first that many being rank `held.rank`
  /// (bytes -1: not a pipeline).
  void finish(double totalSeconds, int64_t peakBytes, int64_t arenaBytes,
              const std::string &what, const std::string &comm = "",
              bool perRank = false, HeldMicrobatches held = {});

private:
  void drawBar(const StepResult &result, double eta);
  void logLine(const StepResult &result, double eta);

  int64_t firstStep, totalSteps, logEvery;
  bool quiet, terminal;
  bool barDrawn = false;
  double lastDraw = -1;
  double firstLoss = 0, lastLoss = 0;
  std::optional<double> lastEvalLoss;
  double stepSeconds = 0;
  int64_t tokens = 0;
  int64_t steps = 0;
};

} // namespace tessel::run

#endif // TESSEL_RUN_PROGRESS_H
