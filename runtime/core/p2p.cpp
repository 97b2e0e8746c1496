//===- p2p.cpp - Point-to-point send/recv: checks, counters, dispatch -----===//
//
// The backend-neutral half of tessel_send and tessel_recv, as
// collectives.cpp is for the collectives: the argument checks (a context
// without a communicator has no peer), the per-peer counters of the calls
// that completed, and the wording of recv's errors, so that every
// communicator reports a timeout or a size mismatch alike. Both wait for
// the started collectives first: the comm worker and the rank's thread
// never call the communicator at once (MPI_THREAD_SERIALIZED), and a
// message never overtakes a collective issued before it.
//
//===----------------------------------------------------------------------===//

#include "core/async_comm.h"
#include "core/backend.h"

using namespace tessel;

void tessel::setRecvTimeout(tessel_ctx *ctx, int32_t peer, int64_t tag,
                            const std::string &detail) {
  // The launcher prefixes the pipeline stage and action; the microbatch
  // tells which of the step's messages never came.
  setError(ctx,
           "tessel_recv: receive from rank %d (tag %lld, microbatch %llu) "
           "timed out after %g s: rank %d has not sent it (stopped, hung or "
           "behind)%s%s",
           peer, (long long)tag, (unsigned long long)ctx->microbatch,
           ctx->commTimeoutSeconds, peer, detail.empty() ? "" : "; ",
           detail.c_str());
}

void tessel::setRecvSizeMismatch(tessel_ctx *ctx, int32_t peer, int64_t tag,
                                 int64_t sentBytes, int64_t expectedBytes) {
  setError(ctx,
           "tessel_recv: the message from rank %d (tag %lld, microbatch %llu) "
           "has %lld bytes, the receive expects %lld",
           peer, (long long)tag, (unsigned long long)ctx->microbatch,
           (long long)sentBytes, (long long)expectedBytes);
}

namespace {

/// The checks send and recv share; the communicator, or null with the
/// error recorded.
Communicator *checkPeer(tessel_ctx *ctx, const char *name, int32_t peer,
                        const void *buf, int64_t bytes) {
  Communicator *comm = ctx->communicator.get();
  if (!comm) {
    setError(ctx,
             "%s: no peer rank %d: the context has no communicator "
             "(TESSEL_COMM_NONE, a world of one rank)",
             name, peer);
    return nullptr;
  }
  if (peer < 0 || peer >= ctx->worldSize) {
    setError(ctx, "%s: peer rank %d outside the world of %d ranks", name, peer,
             ctx->worldSize);
    return nullptr;
  }
  if (peer == ctx->rank) {
    setError(ctx, "%s: peer rank %d is the calling rank", name, peer);
    return nullptr;
  }
  if (bytes < 0) {
    setError(ctx, "%s: bad size %lld bytes", name, (long long)bytes);
    return nullptr;
  }
  if (bytes > 0 && !buf) {
    setError(ctx, "%s: null buffer", name);
    return nullptr;
  }
  return comm;
}

void count(tessel_ctx *ctx, int32_t direction, int32_t peer, int64_t bytes) {
  CommCounter &counter = ctx->p2pCounters[direction][peer];
  counter.bytes += bytes;
  ++counter.calls;
}

const CommCounter *counterOf(const tessel_ctx *ctx, int32_t peer,
                             int32_t direction) {
  if (!ctx ||
      (direction != TESSEL_P2P_SENT && direction != TESSEL_P2P_RECEIVED))
    return nullptr;
  auto it = ctx->p2pCounters[direction].find(peer);
  return it == ctx->p2pCounters[direction].end() ? nullptr : &it->second;
}

} // namespace

extern "C" {

void tessel_send(tessel_ctx *ctx, int32_t peer, int64_t tag, const void *buf,
                 int64_t bytes) {
  if (!ctx || refuseWhileCapturing(ctx, "tessel_send"))
    return;
  Communicator *comm = checkPeer(ctx, "tessel_send", peer, buf, bytes);
  if (!comm)
    return;
  waitForStartedCollectives(ctx);
  if (comm->send(ctx, peer, tag, buf, bytes))
    count(ctx, TESSEL_P2P_SENT, peer, bytes);
}

void tessel_recv(tessel_ctx *ctx, int32_t peer, int64_t tag, void *buf,
                 int64_t bytes) {
  if (!ctx || refuseWhileCapturing(ctx, "tessel_recv"))
    return;
  Communicator *comm = checkPeer(ctx, "tessel_recv", peer, buf, bytes);
  if (!comm)
    return;
  waitForStartedCollectives(ctx);
  if (comm->recv(ctx, peer, tag, buf, bytes))
    count(ctx, TESSEL_P2P_RECEIVED, peer, bytes);
}

int64_t tessel_p2p_bytes(const tessel_ctx *ctx, int32_t peer,
                         int32_t direction) {
  const CommCounter *counter = counterOf(ctx, peer, direction);
  return counter ? counter->bytes : 0;
}

int64_t tessel_p2p_calls(const tessel_ctx *ctx, int32_t peer,
                         int32_t direction) {
  const CommCounter *counter = counterOf(ctx, peer, direction);
  return counter ? counter->calls : 0;
}

} // extern "C"
