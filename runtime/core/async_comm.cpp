//===- async_comm.cpp - The comm worker's queue and thread ----------------===//

#include "core/async_comm.h"

#include "core/backend.h"

#include <exception>

using namespace tessel;

CommWorker::CommWorker(tessel_ctx *ctx, RunCollective run)
    : ctx(ctx), run(run), thread([this] { loop(); }) {}

CommWorker::~CommWorker() {
  {
    std::lock_guard<std::mutex> lock(mutex);
    stopping = true;
  }
  queued.notify_one();
  thread.join();
}

uint64_t CommWorker::enqueue(const Collective &c, const Group &group,
                             bool started) {
  uint64_t ticket;
  {
    std::lock_guard<std::mutex> lock(mutex);
    ticket = ++lastTicket;
    jobs.push_back(Job{ticket, c, group, started});
  }
  queued.notify_one();
  return ticket;
}

bool CommWorker::idle() {
  std::lock_guard<std::mutex> lock(mutex);
  return jobs.empty();
}

void CommWorker::wait(uint64_t ticket) {
  std::unique_lock<std::mutex> lock(mutex);
  done.wait(lock, [&] { return finished >= ticket; });
}

void CommWorker::waitForOutput(const void *out) {
  std::unique_lock<std::mutex> lock(mutex);
  uint64_t ticket = 0;
  for (const Job &job : jobs)
    if (job.c.out == out)
      ticket = job.ticket;
  done.wait(lock, [&] { return finished >= ticket; });
}

void CommWorker::waitAll() {
  std::unique_lock<std::mutex> lock(mutex);
  const uint64_t ticket = lastTicket;
  done.wait(lock, [&] { return finished >= ticket; });
}

void CommWorker::loop() {
  std::unique_lock<std::mutex> lock(mutex);
  while (true) {
    queued.wait(lock, [&] { return !jobs.empty() || stopping; });
    if (jobs.empty())
      return; // Stopping, and everything queued has run.
    const Job &job = jobs.front();
    const bool skip = failing;
    lock.unlock();
    bool ok = false;
    if (skip)
      setError(ctx, "%s: not run: an earlier collective of rank %d failed",
               job.c.name, ctx->rank);
    else
      ok = run(ctx, job.c, job.group, job.started);
    if (job.c.traceIndex >= 0)
      ctx->trace->complete(job.c.traceIndex);
    lock.lock();
    if (!ok)
      failing = true;
    jobs.pop_front();
    ++finished;
    if (jobs.empty())
      failing = false;
    done.notify_all();
  }
}

CommWorker *tessel::commWorkerOf(tessel_ctx *ctx, RunCollective run) {
  if (!ctx->commWorker && ctx->communicator &&
      ctx->communicator->runsOnWorkerThread()) {
    try {
      ctx->commWorker = std::make_unique<CommWorker>(ctx, run);
    } catch (const std::exception &) {
      // No thread to be had: starts run synchronously, as the ABI allows.
    }
  }
  return ctx->commWorker.get();
}

void tessel::waitForStartedCollectives(tessel_ctx *ctx) {
  if (ctx->commWorker)
    ctx->commWorker->waitAll();
  else if (ctx->communicator)
    if (StreamCollectives *stream = ctx->communicator->streamCollectives())
      stream->waitAll(ctx);
}
