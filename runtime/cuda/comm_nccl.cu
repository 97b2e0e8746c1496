//===- comm_nccl.cu - NCCL communicators per mesh axes ------------------===//
//
// The CUDA backend's Communicator. It bootstraps from the CPU backend's
// communicator of the same world (ranks as threads sharing a
// tessel_local_world, or MPI processes), which it keeps for three things:
//
//   - The handshake before every collective: an all_gather, over the
//     group, of each member's call signature (a mismatched call fails on
//     every member instead of letting NCCL read past a buffer; a member
//     that never comes fails with the host communicator's timeout, naming
//     the missing ranks) and, on a group's first collective, group index
//     0's ncclUniqueId.
//   - Lazy NCCL communicators: one per group of a canonical axes mask (the
//     mask without size-1 axes), created at that group's first collective
//     with ncclCommInitRankConfig among the group's members only (nranks G,
//     rank = group index, the id from the handshake). Why not one world
//     communicator split per mask: ncclCommSplit is collective over the
//     whole world, so a mask first used by some ranks only (a pipeline
//     stage's data-parallel all_reduce while the next stage waits in a
//     receive) would deadlock, and splitting every mask eagerly costs up to
//     2^axes communicators that are mostly never used.
//   - Point-to-point messages, staged through host memory: the contract's
//     send is buffered (it returns without waiting for the receiver) and
//     its messages match by tag in any order, while an NCCL send is a
//     rendezvous that also serialises every later operation of its
//     communicator on the rank; the 1F1B exchange (both stages send, then
//     receive) would deadlock on large activations. The host path has the
//     contract's exact semantics and error wording.
//
// Collectives run on commStream(), ordered after the compute stream by an
// event, and are waited for on the host: the communicators are non-blocking
// (ncclConfig_t blocking = 0) and the wait polls the completion event and
// ncclCommGetAsyncError up to the context's timeout, so a member that dies
// mid-collective fails the call instead of hanging it (the backend's
// synchronize and copies wait without a bound, so nothing may be left
// pending). On a timeout or an NCCL error every communicator of the rank
// is aborted and later collectives fail at once.
//
// Started collectives (tessel_*_start) take the same path up to its end,
// then comm_nccl_started.cu takes over.
//
// Data moves as bytes. Reductions are not NCCL's: all_reduce is an
// all-to-all of chunks (ncclSend/ncclRecv in a group), a kernel reducing
// the received chunks in group-index order (nccl_plan.h's reduceOrdered,
// the CPU's arithmetic), and an all-gather of the reduced chunks: the ring's
// 2·(G-1)/G·n bytes per rank, with the bits of the CPU backends.
// reduce_scatter is the same all-to-all and reduction; all_gather is
// ncclAllGather; all_to_all is grouped sends and receives. The strided
// layouts the ABI asks for are packed and unpacked with cudaMemcpy2DAsync.
//
//===----------------------------------------------------------------------===//

#include "cuda/comm_nccl.h"

#include "core/context.h"
#include "cpu/comm.h"
#include "cpu/comm_tcp.h"

#include <cstdio>

using namespace tessel;
using namespace tessel::cuda;

static_assert(NCCL_UNIQUE_ID_BYTES == kNcclIdBytes, "ncclUniqueId size");

namespace {

//===--- The reduce kernel ------------------------------------------------===//

/// out[i] = the ordered reduction of the G received blocks (n elements,
/// `n` apart) at i.
template <class T>
__global__ void reduceBlocksKernel(const T *blocks, T *out, int64_t n,
                                   int64_t groupSize, int32_t reduce) {
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += step)
    out[i] = reduceOrdered(blocks, n, groupSize, i, reduce);
}

template <class T>
void launchReduce(const void *blocks, void *out, int64_t n, int64_t groupSize,
                  int32_t reduce, cudaStream_t stream) {
  reduceBlocksKernel<T><<<gridFor(n), 256, 0, stream>>>(
      static_cast<const T *>(blocks), static_cast<T *>(out), n, groupSize,
      reduce);
}

void reduceBlocks(int32_t dtype, const void *blocks, void *out, int64_t n,
                  int64_t groupSize, int32_t reduce, cudaStream_t stream) {
  switch (dtype) {
  case TESSEL_F32:
    return launchReduce<float>(blocks, out, n, groupSize, reduce, stream);
  case TESSEL_F64:
    return launchReduce<double>(blocks, out, n, groupSize, reduce, stream);
  case TESSEL_F16:
    return launchReduce<HalfBits>(blocks, out, n, groupSize, reduce, stream);
  case TESSEL_BF16:
    return launchReduce<Bf16Bits>(blocks, out, n, groupSize, reduce, stream);
  case TESSEL_I32:
    return launchReduce<int32_t>(blocks, out, n, groupSize, reduce, stream);
  case TESSEL_I64:
    return launchReduce<int64_t>(blocks, out, n, groupSize, reduce, stream);
  }
}

//===--- Device scratch ---------------------------------------------------===//

/// A device buffer from the stream-ordered pool, freed on the same stream
/// after the work that uses it.
class Scratch {
public:
  explicit Scratch(cudaStream_t stream) : stream(stream) {}
  ~Scratch() {
    if (ptr)
      cudaFreeAsync(ptr, stream);
  }
  Scratch(const Scratch &) = delete;
  Scratch &operator=(const Scratch &) = delete;
  cudaError_t allocate(int64_t bytes) {
    return cudaMallocAsync(&ptr, size_t(bytes > 0 ? bytes : 1), stream);
  }
  uint8_t *get() const { return static_cast<uint8_t *>(ptr); }

private:
  cudaStream_t stream;
  void *ptr = nullptr;
};

} // namespace

namespace tessel {
namespace cuda {
namespace nccl {

bool NcclCommunicator::init(std::string &error) {
  if (cudaEventCreateWithFlags(&computeDone, cudaEventDisableTiming) !=
          cudaSuccess ||
      cudaEventCreateWithFlags(&commDone, cudaEventDisableTiming) !=
          cudaSuccess) {
    error = "tessel_ctx_create: cudaEventCreate failed for the NCCL "
            "communicator";
    return false;
  }
  return true;
}

NcclCommunicator::~NcclCommunicator() {
  cudaSetDevice(backend.device());
  // Every collective was waited for, so finalising only meets the peers'
  // own finalisation; a peer that never comes costs the timeout, then an
  // abort.
  const auto deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(
                             std::min(timeoutSeconds, 3.15e7)));
  for (auto &entry : comms) {
    ncclComm_t comm = entry.second;
    ncclResult_t rc = ncclCommFinalize(comm);
    if (rc == ncclSuccess || rc == ncclInProgress)
      poll(comm, deadline, rc,
           [](ncclResult_t state) { return state == ncclSuccess; });
    if (rc == ncclSuccess)
      ncclCommDestroy(comm);
    else
      ncclCommAbort(comm);
  }
  if (computeDone)
    cudaEventDestroy(computeDone);
  if (commDone)
    cudaEventDestroy(commDone);
  for (auto &entry : started)
    cudaEventDestroy(entry.second);
  for (cudaEvent_t event : spareEvents)
    cudaEventDestroy(event);
}

bool NcclCommunicator::cudaOk(Call &call, cudaError_t status,
                              const char *what) {
  if (status == cudaSuccess)
    return true;
  return fail(call, what, cudaGetErrorString(status));
}

bool NcclCommunicator::fail(Call &call, const char *what,
                            const std::string &reason) {
  return abortAll(call.ctx, std::string(call.c.name) + ": NCCL " + what +
                                " on axes mask " + maskText(call.group.mask) +
                                " " + reason + ", rank " +
                                std::to_string(rank));
}

bool NcclCommunicator::abortAll(tessel_ctx *ctx, const std::string &message) {
  for (auto &entry : comms)
    ncclCommAbort(entry.second);
  comms.clear();
  // The aborted communicators are freed: nothing may poll them any more.
  lastStartedComm = nullptr;
  unsettled = false;
  if (aborted.empty())
    aborted = message;
  setError(ctx, "%s", message.c_str());
  return false;
}

bool NcclCommunicator::settle(Call &call, ncclResult_t rc, const char *what) {
  if (rc == ncclInProgress) {
    switch (poll(call.comm, call.deadline, rc,
                 [](ncclResult_t state) { return state == ncclSuccess; })) {
    case Wait::Done:
      return true;
    case Wait::Failed:
      break;
    case Wait::TimedOut: {
      char seconds[32];
      std::snprintf(seconds, sizeof(seconds), "%g",
                    call.ctx->commTimeoutSeconds);
      return fail(call, what,
                  std::string("timed out after ") + seconds + " s");
    }
    }
  }
  if (rc == ncclSuccess)
    return true;
  std::string reason = std::string("failed: ") + ncclGetErrorString(rc);
  if (const char *last = ncclGetLastError(call.comm); last && *last)
    reason += std::string(" (") + last + ")";
  return fail(call, what, reason);
}

bool NcclCommunicator::enter(Call &call) {
  tessel_ctx *ctx = call.ctx;
  const Group &group = call.group;
  if (!aborted.empty()) {
    setError(ctx,
             "%s: the NCCL communicators of rank %d were aborted after an "
             "earlier failure (%s)",
             call.c.name, rank, aborted.c_str());
    return false;
  }
  if (cudaError_t status = cudaSetDevice(backend.device());
      status != cudaSuccess) {
    setError(ctx, "%s: cudaSetDevice(%d) failed: %s", call.c.name,
             backend.device(), cudaGetErrorString(status));
    return false;
  }
  const uint32_t key = canonicalMask(ctx->meshShape, group.mask);
  auto it = comms.find(key);
  Handshake mine;
  mine.signature = call.c.signature();
  if (it == comms.end()) {
    mine.state = Handshake::kNeedComm;
    if (group.index == 0) {
      ncclUniqueId id;
      if (ncclGetUniqueId(&id) == ncclSuccess)
        std::memcpy(mine.id, id.internal, kNcclIdBytes);
      else
        mine.state = Handshake::kNoId;
    }
  }
  std::vector<Handshake> all(static_cast<size_t>(group.size));
  Collective gather;
  gather.kind = TESSEL_COLL_ALL_GATHER;
  gather.name = call.c.name;
  gather.dtype = TESSEL_I64;
  gather.elemSize = 8;
  gather.in = &mine;
  gather.out = all.data();
  gather.len = kHandshakeWords;
  gather.shape = {kHandshakeWords};
  if (!host->allGather(ctx, group, gather))
    return false;
  if (const char *why = handshakeMismatch(all)) {
    setError(ctx, "%s: the members of the group of axes mask 0x%x %s",
             call.c.name, group.mask, why);
    return false;
  }
  call.deadline = commDeadline(ctx);
  if (it == comms.end()) {
    if (!createComm(call, all[0]))
      return false;
    it = comms.find(key);
  }
  call.comm = it->second;
  return cudaOk(call, cudaEventRecord(computeDone, backend.stream()),
                "cudaEventRecord") &&
         cudaOk(call,
                cudaStreamWaitEvent(backend.commStream(), computeDone, 0),
                "cudaStreamWaitEvent");
}

bool NcclCommunicator::createComm(Call &call, const Handshake &root) {
  ncclUniqueId id;
  std::memcpy(id.internal, root.id, kNcclIdBytes);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  ncclResult_t rc = ncclCommInitRankConfig(&comm, int(call.group.size), id,
                                           int(call.group.index), &config);
  if (!comm) {
    setError(call.ctx,
             "%s: NCCL ncclCommInitRankConfig on axes mask 0x%x failed: %s, "
             "rank %d",
             call.c.name, call.group.mask, ncclGetErrorString(rc), rank);
    return false;
  }
  // Kept before it settles, so that a failure aborts it with the others.
  comms[canonicalMask(call.ctx->meshShape, call.group.mask)] = comm;
  call.comm = comm;
  return settle(call, rc, "ncclCommInitRankConfig");
}

bool NcclCommunicator::finish(Call &call, const char *what) {
  if (call.started)
    return markStarted(call, what);
  cudaStream_t stream = backend.commStream();
  if (!cudaOk(call, cudaGetLastError(), what) ||
      !cudaOk(call, cudaEventRecord(commDone, stream), "cudaEventRecord"))
    return false;
  if (backend.capturing()) {
    // Captured, not run: the host cannot wait for it. The compute stream
    // waits on the device, and synchronize() after a launch watches the
    // timeout.
    return cudaOk(call, cudaStreamWaitEvent(backend.stream(), commDone, 0),
                  "cudaStreamWaitEvent");
  }
  cudaError_t status = cudaSuccess;
  ncclResult_t rc = ncclSuccess;
  switch (poll(call.comm, call.deadline, rc, [&](ncclResult_t) {
    status = cudaEventQuery(commDone);
    return status != cudaErrorNotReady;
  })) {
  case Wait::Done:
    if (status != cudaSuccess)
      return cudaOk(call, status, what);
    // commDone follows every collective started before on commStream.
    unsettled = false;
    return cudaOk(call,
                  cudaStreamWaitEvent(backend.stream(), commDone, 0),
                  "cudaStreamWaitEvent");
  case Wait::Failed:
    return settle(call, rc, what);
  case Wait::TimedOut:
    break;
  }
  char seconds[32];
  std::snprintf(seconds, sizeof(seconds), "%g", call.ctx->commTimeoutSeconds);
  return fail(call, what,
              std::string("timed out after ") + seconds +
                  " s (a member stopped or hung mid-collective)");
}

bool NcclCommunicator::exchange(Call &call, const uint8_t *send,
                                const std::vector<int64_t> &sendAt,
                                const std::vector<int64_t> &sendBytes,
                                uint8_t *recv,
                                const std::vector<int64_t> &recvAt,
                                const std::vector<int64_t> &recvBytes) {
  cudaStream_t stream = backend.commStream();
  const int64_t g = call.group.index;
  // The own block is copied unless it is already in place (all_reduce's
  // second exchange).
  if (sendBytes[size_t(g)] > 0 &&
      recv + recvAt[size_t(g)] != send + sendAt[size_t(g)] &&
      !cudaOk(call,
              cudaMemcpyAsync(recv + recvAt[size_t(g)], send + sendAt[size_t(g)],
                              size_t(sendBytes[size_t(g)]),
                              cudaMemcpyDeviceToDevice, stream),
              "cudaMemcpyAsync"))
    return false;
  ncclResult_t rc = ncclGroupStart();
  for (int64_t p = 0; p < call.group.size && rc == ncclSuccess; ++p) {
    if (p == g)
      continue;
    // Zero-byte blocks are skipped on both sides alike.
    if (sendBytes[size_t(p)] > 0)
      rc = ncclSend(send + sendAt[size_t(p)], size_t(sendBytes[size_t(p)]),
                    ncclUint8, int(p), call.comm, stream);
    if (rc == ncclSuccess && recvBytes[size_t(p)] > 0)
      rc = ncclRecv(recv + recvAt[size_t(p)], size_t(recvBytes[size_t(p)]),
                    ncclUint8, int(p), call.comm, stream);
  }
  const ncclResult_t end = ncclGroupEnd();
  return settle(call, rc == ncclSuccess ? end : rc, "ncclSend/ncclRecv");
}

bool NcclCommunicator::copies(Call &call, uint8_t *dst, const uint8_t *src,
                              const std::vector<Copy2d> &plan) {
  for (const Copy2d &k : plan)
    if (!cudaOk(call,
                cudaMemcpy2DAsync(dst + k.dstOffset, size_t(k.dstPitch),
                                  src + k.srcOffset, size_t(k.srcPitch),
                                  size_t(k.width), size_t(k.rows),
                                  cudaMemcpyDeviceToDevice,
                                  backend.commStream()),
                "cudaMemcpy2DAsync"))
      return false;
  return true;
}

bool NcclCommunicator::reduceInto(Call &call, const uint8_t *blocks, void *out,
                                  int64_t n) {
  if (n == 0)
    return true;
  reduceBlocks(call.c.dtype, blocks, out, n, call.group.size, call.c.reduce,
               backend.commStream());
  return cudaOk(call, cudaGetLastError(), "reduction kernel launch");
}

bool NcclCommunicator::allReduceOn(Call &call) {
  const Group &group = call.group;
  const Collective &c = call.c;
  if (!enter(call))
    return false;
  const int64_t n = c.count, es = c.elemSize, G = group.size, g = group.index;
  if (n == 0)
    return true;
  // Chunk j of every member goes to member j, which reduces the G copies
  // into chunk j of its output; the reduced chunks are then exchanged. In
  // place is safe: the input is consumed by the first exchange before the
  // reduction writes the output.
  const int64_t mine = chunkSize(g, n, G);
  Scratch received(backend.commStream());
  if (!cudaOk(call, received.allocate(G * mine * es), "cudaMallocAsync"))
    return false;
  std::vector<int64_t> chunkAt(static_cast<size_t>(G)), chunkBytes(static_cast<size_t>(G)),
      blockAt(static_cast<size_t>(G)), mineBytes(static_cast<size_t>(G), mine * es);
  for (int64_t p = 0; p < G; ++p) {
    chunkAt[size_t(p)] = chunkBegin(p, n, G) * es;
    chunkBytes[size_t(p)] = chunkSize(p, n, G) * es;
    blockAt[size_t(p)] = p * mine * es;
  }
  auto *out = static_cast<uint8_t *>(c.out);
  return exchange(call, static_cast<const uint8_t *>(c.in), chunkAt,
                  chunkBytes, received.get(), blockAt, mineBytes) &&
         reduceInto(call, received.get(), out + chunkAt[size_t(g)], mine) &&
         exchange(call, out, std::vector<int64_t>(size_t(G), chunkAt[size_t(g)]),
                  mineBytes, out, chunkAt, chunkBytes) &&
         finish(call, "all_reduce");
}

bool NcclCommunicator::allGatherOn(Call &call) {
  const Group &group = call.group;
  const Collective &c = call.c;
  if (!enter(call))
    return false;
  const int64_t bytes = c.inBytes();
  if (bytes == 0)
    return true;
  // One row: the gathered inputs are the output already.
  Scratch gathered(backend.commStream());
  uint8_t *dst = static_cast<uint8_t *>(c.out);
  if (c.outer != 1) {
    if (!cudaOk(call, gathered.allocate(group.size * bytes),
                "cudaMallocAsync"))
      return false;
    dst = gathered.get();
  }
  if (!settle(call,
              ncclAllGather(c.in, dst, size_t(bytes), ncclUint8, call.comm,
                            backend.commStream()),
              "ncclAllGather"))
    return false;
  if (c.outer != 1 && !copies(call, static_cast<uint8_t *>(c.out), dst,
                              allGatherUnpack(c, group.size)))
    return false;
  return finish(call, "ncclAllGather");
}

bool NcclCommunicator::reduceScatterOn(Call &call) {
  const Group &group = call.group;
  const Collective &c = call.c;
  if (!enter(call))
    return false;
  const int64_t G = group.size;
  const int64_t blockElems = c.outer * (c.len / G) * c.inner;
  const int64_t blockBytes = blockElems * c.elemSize;
  if (blockBytes == 0)
    return true;
  Scratch packed(backend.commStream()), received(backend.commStream());
  const uint8_t *send = static_cast<const uint8_t *>(c.in);
  if (c.outer != 1) {
    if (!cudaOk(call, packed.allocate(G * blockBytes), "cudaMallocAsync") ||
        !copies(call, packed.get(), send, reduceScatterPack(c, G)))
      return false;
    send = packed.get();
  }
  if (!cudaOk(call, received.allocate(G * blockBytes), "cudaMallocAsync"))
    return false;
  std::vector<int64_t> at(static_cast<size_t>(G)),
      sizes(static_cast<size_t>(G), blockBytes);
  for (int64_t p = 0; p < G; ++p)
    at[size_t(p)] = p * blockBytes;
  return exchange(call, send, at, sizes, received.get(), at, sizes) &&
         reduceInto(call, received.get(), c.out, blockElems) &&
         finish(call, "reduce_scatter");
}

bool NcclCommunicator::allToAllOn(Call &call) {
  const Group &group = call.group;
  const Collective &c = call.c;
  if (!enter(call))
    return false;
  const int64_t G = group.size;
  const int64_t blockBytes = c.inBytes() / G;
  if (blockBytes == 0)
    return true;
  Scratch packed(backend.commStream()), received(backend.commStream());
  if (!cudaOk(call, packed.allocate(G * blockBytes), "cudaMallocAsync") ||
      !cudaOk(call, received.allocate(G * blockBytes), "cudaMallocAsync") ||
      !copies(call, packed.get(), static_cast<const uint8_t *>(c.in),
              allToAllPack(c, G)))
    return false;
  std::vector<int64_t> at(static_cast<size_t>(G)),
      sizes(static_cast<size_t>(G), blockBytes);
  for (int64_t p = 0; p < G; ++p)
    at[size_t(p)] = p * blockBytes;
  return exchange(call, packed.get(), at, sizes, received.get(), at, sizes) &&
         copies(call, static_cast<uint8_t *>(c.out), received.get(),
                allToAllUnpack(c, G)) &&
         finish(call, "all_to_all");
}

//===--- Point-to-point (host-staged) -------------------------------------===//

bool NcclCommunicator::send(tessel_ctx *ctx, int32_t peer, int64_t tag,
                            const void *buf, int64_t bytes) {
  if (!settleStarted(ctx, "tessel_send"))
    return false;
  if (bytes > 0) {
    // The payload is copied out before send returns: buf may be reused.
    staging.resize(size_t(bytes));
    cudaSetDevice(backend.device());
    if (!CudaBackend::check(ctx,
                            cudaMemcpyAsync(staging.data(), buf, size_t(bytes),
                                            cudaMemcpyDeviceToHost,
                                            backend.stream()),
                            "tessel_send's copy to the host") ||
        !CudaBackend::check(ctx, cudaStreamSynchronize(backend.stream()),
                            "tessel_send's copy to the host"))
      return false;
  }
  return host->send(ctx, peer, tag, staging.data(), bytes);
}

bool NcclCommunicator::recv(tessel_ctx *ctx, int32_t peer, int64_t tag,
                            void *buf, int64_t bytes) {
  if (!settleStarted(ctx, "tessel_recv"))
    return false;
  staging.resize(size_t(bytes));
  if (!host->recv(ctx, peer, tag, staging.data(), bytes))
    return false;
  if (bytes == 0)
    return true;
  // From pageable memory the copy has read `staging` when it returns.
  cudaSetDevice(backend.device());
  return CudaBackend::check(ctx,
                            cudaMemcpyAsync(buf, staging.data(), size_t(bytes),
                                            cudaMemcpyHostToDevice,
                                            backend.stream()),
                            "tessel_recv's copy to the device");
}

} // namespace nccl
} // namespace cuda
} // namespace tessel

std::unique_ptr<Communicator>
CudaBackend::createCommunicator(tessel_ctx *ctx,
                                const tessel_ctx_options &options,
                                std::string &error) {
  std::unique_ptr<Communicator> host;
  switch (options.comm) {
  case TESSEL_COMM_LOCAL:
    host = cpu::createLocalCommunicator(ctx, options.local_world, error);
    break;
  case TESSEL_COMM_MPI:
    host = cpu::createMpiCommunicator(ctx, error);
    break;
  case TESSEL_COMM_TCP:
    // The group roots' ncclUniqueIds travel over the TCP links.
    host = cpu::createTcpCommunicator(ctx, options, error);
    break;
  default:
    return nullptr;
  }
  if (!host)
    return nullptr;
  auto comm = std::make_unique<nccl::NcclCommunicator>(
      *this, std::move(host), ctx->rank, ctx->commTimeoutSeconds);
  if (!comm->init(error))
    return nullptr;
  return comm;
}
