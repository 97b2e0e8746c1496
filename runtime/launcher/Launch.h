//===- Launch.h - One rank's run, and every rank of a mesh as threads -----===//
//
// tessel-run's loop — parameters, data, steps, metrics, checkpoint — for
// one rank of a model: rank 0 of 1 for a model compiled for one device, or
// any rank of the mesh a partitioned model was compiled for. The same code
// runs the ranks as threads of one process (runLocalRanks) or one per MPI
// process (tessel-run.cpp calls runRank).
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_RUN_LAUNCH_H
#define TESSEL_RUN_LAUNCH_H

#include "runtime/launcher/Args.h"
#include "runtime/launcher/Data.h"
#include "runtime/launcher/ModelLibrary.h"
#include "runtime/launcher/Progress.h"
#include "runtime/launcher/Safetensors.h"
#include "runtime/launcher/TraceFile.h"
#include "runtime/launcher/Torchrun.h"

#include <memory>

namespace tessel::run {

enum class Mode { Train, Eval, CheckGrads };

/// What every rank of a run shares, read-only, set up once per process
/// before any rank starts (so a bad file or flag fails once, not per rank).
struct RunPlan {
  const Options *options = nullptr;
  const LoadedModel *model = nullptr;
  Mode mode = Mode::Train;
  /// The checkpoint to start from (validated); null: initialise from the
  /// seed.
  const CheckpointReader *checkpoint = nullptr;
  int64_t firstStep = 0;
  /// Written by rank 0 (null: no --metrics, or not this process's).
  MetricsWriter *metrics = nullptr;
  /// --trace: every rank adds its traced step (null: no --trace).
  TraceWriter *trace = nullptr;
  /// When the run started (steady clock seconds), for the summary.
  double startSeconds = 0;
  /// TESSEL_COMM_TCP: rank 0's address and port and the world's key
  /// (Torchrun.h); null otherwise.
  const TorchrunEnv *tcp = nullptr;
};

/// How a rank's run ended: `signal` 0 after its last step, else the
/// SIGINT or SIGTERM it stopped on (every rank of a mesh agrees); `step` the
/// step count done (and saved, with --save).
struct RunEnd {
  int signal = 0;
  int64_t step = 0;
};

/// The run's mode: what the flags ask of what the model can do.
Mode modeOf(const Options &options, const ModelDesc &model);

/// The data source the flags name (synthetic from the seed, or --data),
/// filling the feeds of `view`; throws RunError on a bad file. `heldOut`:
/// --eval-every's (--eval-data, or synthetic samples training never draws).
std::unique_ptr<BatchSource> makeBatchSource(const Options &options,
                                             const ModelDesc &view,
                                             bool heldOut = false);

/// Rank `rank`'s whole run: its context (`comm` a tessel_comm_kind, `world`
/// the shared state of TESSEL_COMM_LOCAL), its block of the parameters
/// (initialised or loaded), each step on its block of the data, and its
/// part in the checkpoint's gathers. Rank 0 alone reports: progress,
/// metrics, the communication check and the summary; it writes the
/// checkpoint (after the last step, every --save-every steps and when a
/// stop signal ends the run early). Throws RunError; a failure in a
/// collective names the peer that failed.
RunEnd runRank(const RunPlan &plan, int32_t rank, int32_t comm,
               tessel_local_world *world);

/// Every rank of the model's mesh as a thread of this process (the local
/// backend), or rank 0 of 1 on this thread for a model without a mesh. A
/// rank that fails aborts the world, so the others stop at their next
/// collective; throws RunError "rank R: ..." with the first failure.
RunEnd runLocalRanks(const RunPlan &plan);

} // namespace tessel::run

#endif // TESSEL_RUN_LAUNCH_H
