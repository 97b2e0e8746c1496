//===- StopSignal.cpp - SIGINT and SIGTERM end a run at a step boundary ---===//

#include "runtime/launcher/StopSignal.h"
#include "runtime/launcher/Ranks.h"

#include <atomic>
#include <csignal>
#include <cstring>
#include <unistd.h>

using namespace tessel::run;

namespace {

// Lock-free, so the handler may write it (async-signal-safe) and every rank
// thread may read it without a data race.
std::atomic<int> stopSignal{0};
static_assert(std::atomic<int>::is_always_lock_free);

extern "C" void onStopSignal(int signal) {
  if (stopSignal.exchange(signal) != 0) {
    // Only async-signal-safe calls here: write(2) and _exit(2).
    const char message[] = "tessel-run: second signal: exiting now\n";
    ssize_t ignored = ::write(STDERR_FILENO, message, sizeof(message) - 1);
    (void)ignored;
    ::_exit(128 + signal);
  }
}

} // namespace

void tessel::run::installStopHandlers() {
  struct sigaction action;
  std::memset(&action, 0, sizeof(action));
  action.sa_handler = onStopSignal;
  sigemptyset(&action.sa_mask);
  // Restarted system calls: a signal must not fail a read or a collective's
  // wait; the run looks at the flag between steps.
  action.sa_flags = SA_RESTART;
  ::sigaction(SIGINT, &action, nullptr);
  ::sigaction(SIGTERM, &action, nullptr);
}

int tessel::run::receivedStopSignal() { return stopSignal.load(); }

void tessel::run::clearStopSignal() { stopSignal.store(0); }

namespace {

/// The MAX of `value` over the ranks of `axes`, through a 4-byte device
/// buffer freed at once (the run's allocation counters are as they were).
int32_t allReduceMax(tessel_ctx *ctx, uint32_t axes, int32_t value,
                     const char *when) {
  void *buffer = tessel_alloc(ctx, sizeof(int32_t));
  tessel_copy_to_device(ctx, buffer, &value, sizeof(value));
  tessel_all_reduce(ctx, axes, TESSEL_I32, buffer, buffer, 1,
                    TESSEL_REDUCE_MAX);
  int32_t result = 0;
  tessel_copy_to_host(ctx, &result, buffer, sizeof(result));
  tessel_synchronize(ctx);
  tessel_free(ctx, buffer);
  checkKernelError(ctx, when);
  return result;
}

} // namespace

int tessel::run::stopAfterThisStep(tessel_ctx *ctx, uint32_t axes) {
  int32_t local = stopSignal.load();
  if (axes == 0)
    return local;
  return allReduceMax(ctx, axes, local, "agreeing on a stop signal");
}

void tessel::run::waitForEveryRank(tessel_ctx *ctx, uint32_t axes) {
  if (axes != 0)
    allReduceMax(ctx, axes, 0, "waiting for every rank");
}
