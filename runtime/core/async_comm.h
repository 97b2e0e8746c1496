//===- async_comm.h - The thread that runs a context's started collectives ===//
//
// A communicator whose calls block the calling thread (the CPU ones: ranks
// as threads meeting at shared-memory barriers, MPI polling its requests)
// overlaps a collective with the rank's kernels only if another thread
// makes the call. CommWorker is that thread, one per context, created by
// the context's first tessel_*_start: it runs the queued collectives one at
// a time, first in first out. A blocking collective issued while started
// ones are pending is queued too and waited for, so every collective runs
// in the rank's call order, which is the order in which the members of a
// group match their calls. Errors go to the context (setError is
// thread-safe) before the collective counts as done, so a wait that
// returns sees them.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_RUNTIME_CORE_ASYNC_COMM_H
#define TESSEL_RUNTIME_CORE_ASYNC_COMM_H

#include "core/collective.h"

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>

namespace tessel {

/// Runs one checked collective of a group of more than one rank on the
/// communicator and counts it; false when it failed (error recorded).
/// `started`: it came from a *_start call (counts its async bytes).
using RunCollective = bool (*)(tessel_ctx *ctx, const Collective &c,
                               const Group &group, bool started);

class CommWorker {
public:
  /// Starts the thread; throws std::system_error when it cannot.
  CommWorker(tessel_ctx *ctx, RunCollective run);
  /// Runs what is still queued, then joins the thread. Each queued
  /// collective ends within the context's timeout (sooner once the world is
  /// aborted, at once after an earlier failure), so this never hangs
  /// beyond it.
  ~CommWorker();
  CommWorker(const CommWorker &) = delete;
  CommWorker &operator=(const CommWorker &) = delete;

  /// Queues `c` after everything queued so far; its ticket for wait().
  /// The Collective is copied (with its shape), so the caller's arguments
  /// may go once this returns.
  uint64_t enqueue(const Collective &c, const Group &group, bool started);
  /// True when nothing is queued or running. Only the rank's thread
  /// enqueues, so an idle worker stays idle until that thread enqueues
  /// again: the rank's thread may then call the communicator itself.
  bool idle();
  /// Returns once the collective of `ticket` (and so every one before it)
  /// has run.
  void wait(uint64_t ticket);
  /// Returns once every queued collective whose output is `out` has run;
  /// at once when none is.
  void waitForOutput(const void *out);
  /// Returns once everything queued has run.
  void waitAll();

private:
  struct Job {
    uint64_t ticket;
    Collective c;
    Group group;
    bool started;
  };

  void loop();

  tessel_ctx *const ctx;
  const RunCollective run;
  std::mutex mutex;
  /// Signalled when a job is queued or the worker must stop.
  std::condition_variable queued;
  /// Signalled when a job has run.
  std::condition_variable done;
  /// The queue; its front is the job running (it stays there until it has
  /// run, so that waitForOutput sees it). Only the worker pops, and a
  /// deque keeps references to its elements across push_back.
  std::deque<Job> jobs;
  uint64_t lastTicket = 0;
  /// Tickets run so far (they run in ticket order).
  uint64_t finished = 0;
  /// Set by a job that failed, cleared when the queue empties: the jobs
  /// queued behind a failed collective are not run. After a failure the
  /// group's state is undefined and the caller aborts; running them could
  /// only add a timeout each before it gets to.
  bool failing = false;
  bool stopping = false;
  std::thread thread;
};

/// The context's comm worker, created on first use; null when its
/// communicator may not run on another thread or the thread cannot start
/// (a start then runs synchronously).
CommWorker *commWorkerOf(tessel_ctx *ctx, RunCollective run);

/// Returns once every started collective of ctx has completed (the comm
/// worker's queue has run; a stream-ordered communicator's compute stream
/// is ordered after them): tessel_comm_wait_all, and what tessel_send,
/// tessel_recv and tessel_ctx_destroy do first.
void waitForStartedCollectives(tessel_ctx *ctx);

} // namespace tessel

#endif // TESSEL_RUNTIME_CORE_ASYNC_COMM_H
