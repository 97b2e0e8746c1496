//===- comm_nccl_started.cu - Started collectives on NCCL -----------------===//
//
// Started collectives (tessel_*_start; the communicator is the front's
// StreamCollectives) take the same path, handshake included, up to the
// end: instead of the host wait, an event recorded on commStream after
// the collective, kept per output pointer. tessel_comm_wait(out) orders
// the compute stream after that event (cudaStreamWaitEvent, no host wait,
// so a step with started collectives can still be captured as a graph);
// tessel_comm_wait_all after the last one recorded (commStream runs its
// work in order). A blocking collective after started ones waits for them
// on the host anyway (its own event follows theirs on commStream).
// Point-to-point, which synchronises the compute stream without a bound,
// first waits on the host, up to the timeout, for the started collectives.
// A started collective's NCCL failure is reported at its wait when NCCL
// knows it by then, else by the next blocking collective or
// point-to-point call.
//
//===----------------------------------------------------------------------===//

#include "cuda/comm_nccl.h"

#include "core/context.h"

namespace tessel {
namespace cuda {
namespace nccl {

bool NcclCommunicator::markStarted(Call &call, const char *what) {
  if (!cudaOk(call, cudaGetLastError(), what))
    return false;
  cudaEvent_t event = nullptr;
  auto it = started.find(call.c.out);
  if (it != started.end()) {
    // Re-recorded: the later collective on one output ends after the
    // earlier one (commStream is in order).
    event = it->second;
  } else if (!spareEvents.empty()) {
    event = spareEvents.back();
    spareEvents.pop_back();
  } else if (!cudaOk(call,
                     cudaEventCreateWithFlags(&event, cudaEventDisableTiming),
                     "cudaEventCreate")) {
    return false;
  }
  started[call.c.out] = event;
  if (!cudaOk(call, cudaEventRecord(event, backend.commStream()),
              "cudaEventRecord"))
    return false;
  lastStarted = event;
  lastStartedComm = call.comm;
  unsettled = true;
  return true;
}

bool NcclCommunicator::start(tessel_ctx *ctx, const Group &group,
                             const Collective &c) {
  Call call{ctx, group, c};
  call.started = true;
  switch (c.kind) {
  case TESSEL_COLL_ALL_REDUCE:
    return allReduceOn(call);
  case TESSEL_COLL_ALL_GATHER:
    return allGatherOn(call);
  case TESSEL_COLL_REDUCE_SCATTER:
    return reduceScatterOn(call);
  case TESSEL_COLL_ALL_TO_ALL:
    return allToAllOn(call);
  }
  setError(ctx, "%s: unknown collective %d", c.name, c.kind);
  return false;
}

void NcclCommunicator::orderComputeAfter(tessel_ctx *ctx, cudaEvent_t event,
                                         const char *what) {
  cudaSetDevice(backend.device());
  if (!CudaBackend::check(ctx, cudaStreamWaitEvent(backend.stream(), event, 0),
                          what))
    return;
  // Non-blocking: only what NCCL already knows.
  for (auto &entry : comms) {
    ncclResult_t state = ncclSuccess;
    ncclResult_t rc = ncclCommGetAsyncError(entry.second, &state);
    if (rc == ncclSuccess)
      rc = state;
    if (rc != ncclSuccess && rc != ncclInProgress) {
      abortAll(ctx, std::string(what) + ": NCCL failed on axes mask " +
                        maskText(entry.first) + ": " + ncclGetErrorString(rc) +
                        ", rank " + std::to_string(rank));
      return;
    }
  }
}

void NcclCommunicator::wait(tessel_ctx *ctx, const void *out) {
  auto it = started.find(out);
  if (it == started.end())
    return;
  const cudaEvent_t event = it->second;
  started.erase(it);
  // Reusable at once: the compute stream's wait has taken this record.
  spareEvents.push_back(event);
  orderComputeAfter(ctx, event, "tessel_comm_wait");
}

void NcclCommunicator::waitAll(tessel_ctx *ctx) {
  if (started.empty())
    return;
  for (auto &entry : started)
    spareEvents.push_back(entry.second);
  started.clear();
  // lastStarted's latest record follows every started collective, also
  // when it was waited for (and kept for reuse) since.
  orderComputeAfter(ctx, lastStarted, "tessel_comm_wait_all");
}

bool NcclCommunicator::settleStarted(tessel_ctx *ctx, const char *what) {
  // After an abort nothing of NCCL's is left to wait for: ncclCommAbort
  // ends the operations it had in flight.
  if (!aborted.empty() || !unsettled)
    return true;
  cudaSetDevice(backend.device());
  cudaError_t status = cudaSuccess;
  ncclResult_t rc = ncclSuccess;
  switch (poll(lastStartedComm, commDeadline(ctx), rc, [&](ncclResult_t) {
    status = cudaEventQuery(lastStarted);
    return status != cudaErrorNotReady;
  })) {
  case Wait::Done:
    unsettled = false;
    return CudaBackend::check(ctx, status, what);
  case Wait::Failed:
    return abortAll(
        ctx, std::string(what) + ": a started collective failed: NCCL " +
                 ncclGetErrorString(rc) + ", rank " + std::to_string(rank));
  case Wait::TimedOut:
    break;
  }
  char seconds[32];
  std::snprintf(seconds, sizeof(seconds), "%g", ctx->commTimeoutSeconds);
  return abortAll(ctx, std::string(what) +
                           ": a started collective did not "
                           "end within " +
                           seconds + " s (a member stopped or hung), rank " +
                           std::to_string(rank));
}

} // namespace nccl
} // namespace cuda
} // namespace tessel
