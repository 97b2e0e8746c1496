//===- Prefetch.cpp - The next microbatch drawn while this step runs ------===//

#include "runtime/launcher/Prefetch.h"
#include "runtime/launcher/Error.h"

#include <algorithm>
#include <cstdint>
#include <utility>

using namespace tessel::run;

PrefetchingBatchSource::PrefetchingBatchSource(
    std::unique_ptr<BatchSource> inner, const ModelDesc &model,
    const char *backend)
    : inner(std::move(inner)), feeds(model.feeds()) {
  if (feeds.empty())
    return;
  regionBegin = feeds.front()->offset;
  for (const TensorDesc *t : feeds) {
    regionBegin = std::min(regionBegin, t->offset);
    regionEnd = std::max(regionEnd, t->offset + t->bytes);
  }
  tessel_ctx_options options = {};
  options.world_size = 1;
  options.backend_name = backend;
  stagingCtx = tessel_ctx_create(&options);
  if (!stagingCtx) {
    const char *why = tessel_error(nullptr);
    throw RunError(std::string("cannot create the data loader's context: ") +
                   (why ? why : "unknown error"));
  }
  staging =
      tessel_alloc(stagingCtx, std::max<int64_t>(regionEnd - regionBegin, 64));
  if (!staging) {
    tessel_ctx_destroy(stagingCtx);
    throw RunError("cannot allocate " +
                   std::to_string(regionEnd - regionBegin) +
                   " bytes to stage the next microbatch");
  }
  // Only offsets in [regionBegin, regionEnd) are ever added to it: the
  // address is formed as an integer, never dereferenced outside `staging`.
  stagingArena = reinterpret_cast<void *>(
      reinterpret_cast<uintptr_t>(staging) - uintptr_t(regionBegin));
}

PrefetchingBatchSource::~PrefetchingBatchSource() {
  if (worker.joinable())
    worker.join();
  if (staging)
    tessel_free(stagingCtx, staging);
  if (stagingCtx)
    tessel_ctx_destroy(stagingCtx);
}

void PrefetchingBatchSource::wait() {
  if (worker.joinable())
    worker.join();
  if (std::exception_ptr failed = std::exchange(error, nullptr))
    std::rethrow_exception(failed);
}

void PrefetchingBatchSource::fill(int64_t index, tessel_ctx *ctx,
                                  void *arena) {
  if (!stagingCtx) { // No feeds: nothing to draw ahead.
    inner->fill(index, ctx, arena);
    return;
  }
  bool drawn = pending == index;
  if (drawn) {
    wait();
  } else if (worker.joinable()) { // A draw of another index: dropped.
    worker.join();
    error = nullptr;
  }
  pending = -1;
  if (drawn) {
    for (const TensorDesc *t : feeds)
      tessel_copy(ctx, static_cast<char *>(arena) + t->offset,
                  static_cast<char *>(staging) + (t->offset - regionBegin),
                  t->bytes);
  } else {
    // On this thread, through the rank's context: the first fill also lets
    // the inner source make what it keeps (staging of its own) there.
    inner->fill(index, ctx, arena);
  }
  pending = index + 1;
  worker = std::thread([this, next = pending] {
    try {
      inner->fill(next, stagingCtx, stagingArena);
      tessel_synchronize(stagingCtx);
      if (const char *failed = tessel_error(stagingCtx))
        throw RunError(std::string("drawing microbatch ") +
                       std::to_string(next) + ": " + failed);
    } catch (...) {
      error = std::current_exception();
    }
  });
}
