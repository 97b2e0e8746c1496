//===- comm_nccl.h - The NCCL communicator's class -------------*- C++ -*-===//
//
// Private to runtime/cuda: NcclCommunicator, shared by comm_nccl.cu (the
// handshake, the collectives' data path, point-to-point; the file's banner
// says how it works) and comm_nccl_started.cu (started collectives), and
// what both use: one call in progress and the poll of a non-blocking NCCL
// communicator.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_RUNTIME_CUDA_COMM_NCCL_H
#define TESSEL_RUNTIME_CUDA_COMM_NCCL_H

#include "cuda/backend.h"
#include "cuda/nccl_plan.h"

#include <nccl.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace tessel {
namespace cuda {
namespace nccl {

using Clock = std::chrono::steady_clock;

/// One collective in progress: what the errors name.
struct Call {
  tessel_ctx *ctx;
  const Group &group;
  const Collective &c;
  ncclComm_t comm = nullptr;
  /// When the NCCL part must be done (set once the handshake is through).
  Clock::time_point deadline{};
  /// A tessel_*_start: ends with an event instead of the host wait.
  bool started = false;
};

enum class Wait { Done, Failed, TimedOut };

/// Polls `done` until it holds, NCCL reports an error on `comm` (`rc`) or
/// the deadline passes. Spins for the first 100 ms (a healthy collective
/// ends well within it), then polls every 100 µs so that a rank waiting for
/// a stopped peer does not hold a core.
template <class Done>
Wait poll(ncclComm_t comm, Clock::time_point deadline, ncclResult_t &rc,
          Done &&done) {
  const auto spinUntil = Clock::now() + std::chrono::milliseconds(100);
  while (true) {
    ncclResult_t state = ncclSuccess;
    rc = ncclCommGetAsyncError(comm, &state);
    if (rc == ncclSuccess)
      rc = state;
    if (rc != ncclSuccess && rc != ncclInProgress)
      return Wait::Failed;
    if (done(rc))
      return Wait::Done;
    if (Clock::now() > deadline)
      return Wait::TimedOut;
    if (Clock::now() < spinUntil)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

inline std::string maskText(uint32_t mask) {
  char text[16];
  std::snprintf(text, sizeof(text), "0x%x", mask);
  return text;
}

/// The CUDA backend's Communicator (how it works: comm_nccl.cu's banner),
/// and the front's StreamCollectives for started collectives
/// (comm_nccl_started.cu's).
class NcclCommunicator final : public Communicator, public StreamCollectives {
public:
  NcclCommunicator(CudaBackend &backend, std::unique_ptr<Communicator> host,
                   int32_t rank, double timeoutSeconds)
      : backend(backend), host(std::move(host)), rank(rank),
        timeoutSeconds(timeoutSeconds) {}
  ~NcclCommunicator() override;
  bool init(std::string &error);

  bool allReduce(tessel_ctx *ctx, const Group &group,
                 const Collective &c) override {
    Call call{ctx, group, c};
    return allReduceOn(call);
  }
  bool allGather(tessel_ctx *ctx, const Group &group,
                 const Collective &c) override {
    Call call{ctx, group, c};
    return allGatherOn(call);
  }
  bool reduceScatter(tessel_ctx *ctx, const Group &group,
                     const Collective &c) override {
    Call call{ctx, group, c};
    return reduceScatterOn(call);
  }
  bool allToAll(tessel_ctx *ctx, const Group &group,
                const Collective &c) override {
    Call call{ctx, group, c};
    return allToAllOn(call);
  }
  bool send(tessel_ctx *ctx, int32_t peer, int64_t tag, const void *buf,
            int64_t bytes) override;
  bool recv(tessel_ctx *ctx, int32_t peer, int64_t tag, void *buf,
            int64_t bytes) override;

  StreamCollectives *streamCollectives() override { return this; }
  bool start(tessel_ctx *ctx, const Group &group, const Collective &c) override;
  void wait(tessel_ctx *ctx, const void *out) override;
  void waitAll(tessel_ctx *ctx) override;

private:
  bool allReduceOn(Call &call);
  bool allGatherOn(Call &call);
  bool reduceScatterOn(Call &call);
  bool allToAllOn(Call &call);
  /// The handshake, the group's communicator (created on first use) and
  /// the compute stream's work so far ordered before commStream; false
  /// with the error recorded.
  bool enter(Call &call);
  /// Creates the group's communicator from group index 0's id.
  bool createComm(Call &call, const Handshake &root);
  /// Waits for a non-blocking NCCL call's result `rc` to settle; false
  /// (communicators aborted, error recorded) when it failed.
  bool settle(Call &call, ncclResult_t rc, const char *what);
  /// Waits for everything issued on commStream, then orders the compute
  /// stream after it; for a started collective, markStarted instead.
  bool finish(Call &call, const char *what);
  /// Records the event after a started collective, under its output.
  bool markStarted(Call &call, const char *what);
  /// Orders the compute stream after `event`, then reports an NCCL error
  /// already known (a started collective's wait).
  void orderComputeAfter(tessel_ctx *ctx, cudaEvent_t event, const char *what);
  /// Waits on the host, up to the timeout, for the collectives started so
  /// far; false (communicators aborted, error recorded) when one failed or
  /// did not end in time.
  bool settleStarted(tessel_ctx *ctx, const char *what);
  /// Records a CUDA failure of `what`; true when `status` is success.
  bool cudaOk(Call &call, cudaError_t status, const char *what);
  /// Aborts every communicator and records why on ctx.
  bool fail(Call &call, const char *what, const std::string &reason);
  /// Aborts every communicator and records `message` on ctx.
  bool abortAll(tessel_ctx *ctx, const std::string &message);
  /// Issues the grouped sends and receives of `sendAt`/`recvAt` (byte
  /// offsets and sizes per member; the own block is a device copy).
  bool exchange(Call &call, const uint8_t *send,
                const std::vector<int64_t> &sendAt,
                const std::vector<int64_t> &sendBytes, uint8_t *recv,
                const std::vector<int64_t> &recvAt,
                const std::vector<int64_t> &recvBytes);
  bool copies(Call &call, uint8_t *dst, const uint8_t *src,
              const std::vector<Copy2d> &plan);
  bool reduceInto(Call &call, const uint8_t *blocks, void *out, int64_t n);

  CudaBackend &backend;
  std::unique_ptr<Communicator> host;
  int32_t rank;
  double timeoutSeconds;
  /// By canonical axes mask.
  std::unordered_map<uint32_t, ncclComm_t> comms;
  /// Set once the communicators were aborted: why.
  std::string aborted;
  cudaEvent_t computeDone = nullptr, commDone = nullptr;
  /// The events of the started collectives not yet waited for, by output;
  /// events waited for are kept for reuse.
  std::unordered_map<const void *, cudaEvent_t> started;
  std::vector<cudaEvent_t> spareEvents;
  /// The event recorded last, after every started collective so far, and
  /// its collective's communicator; `unsettled` until the host has seen
  /// commStream pass it.
  cudaEvent_t lastStarted = nullptr;
  ncclComm_t lastStartedComm = nullptr;
  bool unsettled = false;
  /// Host staging of point-to-point payloads.
  std::vector<uint8_t> staging;
};

} // namespace nccl
} // namespace cuda
} // namespace tessel

#endif // TESSEL_RUNTIME_CUDA_COMM_NCCL_H
