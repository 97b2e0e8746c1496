//===- Prefetch.h - The next microbatch drawn while this step runs --------===//
//
// A PyTorch DataLoader worker for the launcher: while the step runs on
// microbatch k, a background thread draws microbatch k + 1 (synthetic
// samples or token windows) into a staging copy of the feeds, through a
// runtime context of its own; fill(k + 1) then only copies it into the
// rank's arena. Any other index (a resumed or evaluation run's first, a
// gradient check's) is filled at once, as without prefetching.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_LAUNCHER_PREFETCH_H
#define TESSEL_LAUNCHER_PREFETCH_H

#include "runtime/launcher/Data.h"

#include <exception>
#include <memory>
#include <thread>

namespace tessel::run {

class PrefetchingBatchSource : public BatchSource {
public:
  /// Prefetches `inner`'s microbatches for the feeds of `model` (the rank's
  /// description), staged on a context of backend `backend`. Throws
  /// RunError when the staging context or memory cannot be had.
  PrefetchingBatchSource(std::unique_ptr<BatchSource> inner,
                         const ModelDesc &model, const char *backend);
  ~PrefetchingBatchSource() override;
  PrefetchingBatchSource(const PrefetchingBatchSource &) = delete;
  PrefetchingBatchSource &operator=(const PrefetchingBatchSource &) = delete;

  void fill(int64_t index, tessel_ctx *ctx, void *arena) override;

private:
  /// Waits for the background draw; rethrows its error.
  void wait();

  std::unique_ptr<BatchSource> inner;
  std::vector<const TensorDesc *> feeds;
  /// The feeds span [regionBegin, regionEnd) of the arena; `staging` holds
  /// that span, and `stagingArena` is where an arena would start for the
  /// feeds' offsets to land in it.
  int64_t regionBegin = 0, regionEnd = 0;
  tessel_ctx *stagingCtx = nullptr;
  void *staging = nullptr;
  void *stagingArena = nullptr;
  std::thread worker;
  int64_t pending = -1; // the index being drawn, or -1
  std::exception_ptr error;
};

} // namespace tessel::run

#endif // TESSEL_LAUNCHER_PREFETCH_H
