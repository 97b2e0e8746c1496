//===- StopSignal.h - SIGINT and SIGTERM end a run at a step boundary -----===//
//
// A first SIGINT or SIGTERM only records the signal; the run reads it after
// each step, every rank of a mesh agreeing on it (stopAfterThisStep), saves
// and exits 128 + the signal as a shell would. A second signal exits at
// once: the user who presses Ctrl-C twice does not want to wait for a save.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_RUN_STOPSIGNAL_H
#define TESSEL_RUN_STOPSIGNAL_H

#include "tessel/runtime.h"

namespace tessel::run {

/// Installs the SIGINT and SIGTERM handlers (tessel-run's main; a library
/// user that does not call it never stops early).
void installStopHandlers();

/// The signal received (SIGINT or SIGTERM), or 0.
int receivedStopSignal();

/// Forgets a received signal (tests).
void clearStopSignal();

/// Called by every rank of a mesh after each step, in the same order as
/// its collectives: the signal every rank stops on (0: go on). With a
/// mesh, the ranks' flags are all-reduced (MAX, over every axis) through
/// `ctx`'s collectives, so threads that read the flag a moment apart, or
/// MPI processes each signalled on its own, all stop after the same step.
/// Without a mesh (`axes` 0) the flag is read directly. Throws RunError if
/// the collective fails.
int stopAfterThisStep(tessel_ctx *ctx, uint32_t axes);

/// Returns once every rank of `axes` has called it (nothing without a
/// mesh). A run stopped by a signal exits non-zero, and mpirun kills the
/// processes still running when one does: no rank may exit before rank 0
/// has written the checkpoint.
void waitForEveryRank(tessel_ctx *ctx, uint32_t axes);

} // namespace tessel::run

#endif // TESSEL_RUN_STOPSIGNAL_H
