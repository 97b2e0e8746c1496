//===- comm_mpi.cpp - Collectives between ranks that are MPI processes ----===//
//
// TESSEL_COMM_MPI: one process per rank, the groups are communicators split
// from MPI_COMM_WORLD. Data moves as raw elements (16-bit floats stay 16-bit
// on the wire) with MPI's all-to-all and all-gather; reductions never use
// MPI's reduction operators, whose summation order MPI leaves open: each
// rank reduces the blocks it received in group-index order with
// reduceInOrder, as the local backend does, so both give the same bits and
// every member of a group the same result. all_reduce is a reduce-scatter by
// all-to-all followed by an all-gather of the reduced chunks: the same
// 2·(G-1)/G·n bytes per rank as a ring all-reduce.
//
// Collectives are issued non-blocking and polled so that a peer that never
// joins fails the call after the context's timeout instead of hanging it.
//
// A timeout names the ranks that did not arrive, as the local backend does.
// Each context counts the collectives it has entered per axes mask and,
// while it polls (a collective or a receive), answers status probes on a
// third duplicate of MPI_COMM_WORLD (so probes never match collective or
// point-to-point traffic) with what it is waiting in. A rank that times out
// probes the members it waits for, then polls a short grace period for
// replies, answering probes itself: a member that replies is in another
// call or behind (its own count on the group); one that does not is
// stopped, hung or outside a tessel call. Everything is non-blocking, so a
// rank that has exited only costs the grace period.
//
// Point-to-point messages travel on a duplicate of MPI_COMM_WORLD, so they
// never match collective traffic. A message is two MPI messages on one MPI
// tag: a header (the full int64 tag and the byte count), then the payload.
// MPI tags stop at MPI_TAG_UB (2^15 - 1 at least), so the tag is folded
// into that range; MPI keeps the messages of one (source, MPI tag) in
// order, so the receiver reads the header, then the payload that follows
// it straight into the caller's buffer. A header whose full tag is another
// (a fold collision) has its payload set aside for the receive that wants
// it; one whose size differs is drained and reported. tessel_send copies
// the payload, posts both with MPI_Isend and returns; the pending sends are
// tested on every later call and awaited when the context goes.
//
// Started collectives run on the context's comm worker thread (see
// core/async_comm.h) when MPI provides MPI_THREAD_SERIALIZED or more: every
// MPI call of a context, collectives, point-to-point and status probes
// alike, is made either by the worker or by the rank's thread while nothing
// is queued (a blocking collective queues behind pending ones, send and
// recv wait for them, creation and destruction happen with no worker
// running), so no two threads are ever in MPI at once for a context. That
// holds per context: a process must not use a second MPI context while
// collectives of another are pending (tessel-run has one per process).
// Below MPI_THREAD_SERIALIZED a start runs its collective before returning.
//
// Without MPI (TESSEL_WITH_MPI undefined) the entry points report that.
//
//===----------------------------------------------------------------------===//

#include "cpu/comm.h"

#include <cstdlib>

#ifdef TESSEL_WITH_MPI

// The C API only: in C++, mpi.h would also declare the deprecated C++
// bindings, which live in a library we do not link.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include "cpu/comm_mpi_probes.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <list>
#include <map>
#include <memory>
#include <thread>

using namespace tessel::cpu;

namespace {

/// The context's communicators by axes mask (groups of more than one rank);
/// in each, a rank's MPI rank is its group index.
using MpiComms = std::unordered_map<uint32_t, MPI_Comm>;

/// Records a failed MPI call's message on ctx; `name` is the entry point.
bool mpiOk(tessel_ctx *ctx, const char *name, int rc, const char *call) {
  if (rc == MPI_SUCCESS)
    return true;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  setError(ctx, "%s: %s failed: %.*s", name, call, len, text);
  return false;
}
bool mpiOk(tessel_ctx *ctx, const Collective &c, int rc, const char *call) {
  return mpiOk(ctx, c.name, rc, call);
}

bool mpiIsUp() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized && !finalized;
}

/// The group's communicator: MPI_COMM_WORLD split by the group id (the
/// coordinates on the other axes), ranked by group index. The split is
/// collective over MPI_COMM_WORLD; ranks run the same program (SPMD), so
/// every rank makes its first call on a mask at the same point of the step
/// and a lazy split meets its peers.
int splitComm(const Group &group, MPI_Comm &comm) {
  int rc =
      MPI_Comm_split(MPI_COMM_WORLD, int(group.id), int(group.index), &comm);
  if (rc == MPI_SUCCESS)
    // Failures come back as codes (an error on ctx), not a fatal abort.
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  return rc;
}

/// Raw elements of the dtype's width: nothing is reduced by MPI.
MPI_Datatype elementType(int64_t elemSize) {
  switch (elemSize) {
  case 2:
    return MPI_UINT16_T;
  case 4:
    return MPI_UINT32_T;
  default:
    return MPI_UINT64_T;
  }
}



/// How a polled request ended.
enum class Wait { Done, Failed, TimedOut };

/// Polls `request` until it completes (status in `status` when non-null),
/// an MPI call fails (error recorded, naming `name` and `call`) or
/// `deadline` passes (nothing recorded: the caller words the timeout).
/// Answers status probes every turn.
Wait pollUntil(tessel_ctx *ctx, StatusProbes &probes, const char *name,
               MPI_Request &request, Clock::time_point deadline,
               const char *call, MPI_Status *status = MPI_STATUS_IGNORE) {
  const auto spinUntil = Clock::now() + std::chrono::milliseconds(100);
  while (true) {
    probes.serve();
    int done = 0;
    if (!mpiOk(ctx, name, MPI_Test(&request, &done, status), call))
      return Wait::Failed;
    if (done)
      return Wait::Done;
    if (Clock::now() > deadline)
      return Wait::TimedOut;
    // Poll flat out for the first 100 ms (MPI progresses a non-blocking
    // operation only inside MPI_Test, and a healthy one completes well
    // within that), then back off to a poll a millisecond, so a rank
    // waiting for a stopped or hung peer does not hold a core at 100%
    // until the timeout. Yielding lets oversubscribed ranks progress.
    if (Clock::now() < spinUntil)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

/// Completes a non-blocking collective, polling so that a missing peer
/// becomes a timeout error (the request then stays pending: the caller must
/// abort the job).
bool await(tessel_ctx *ctx, StatusProbes &probes, const Collective &c,
           const Group &group, MPI_Request &request, const char *call) {
  switch (pollUntil(ctx, probes, c.name, request, commDeadline(ctx), call)) {
  case Wait::Done:
    return true;
  case Wait::Failed:
    return false;
  case Wait::TimedOut:
    break;
  }
  std::vector<int32_t> others;
  for (int64_t j = 0; j < group.size; ++j)
    if (j != group.index)
      others.push_back(groupMemberRank(ctx, group, j));
  const std::string members = probes.survey(ctx, others, group.mask);
  setError(ctx,
           "%s: timed out after %g s in %s on the group of axes mask "
           "0x%x of %lld ranks (a member has not joined: stopped, hung "
           "or in another operation)%s%s",
           c.name, ctx->commTimeoutSeconds, call, group.mask,
           (long long)group.size, members.empty() ? "" : ": ",
           members.c_str());
  return false;
}

class MpiGroup {
public:
  MpiGroup(tessel_ctx *ctx, MpiComms &comms, StatusProbes &probes,
           const Group &group, const Collective &c)
      : ctx(ctx), comms(comms), probes(probes), group(group), c(c),
        type(elementType(c.elemSize)) {}
  ~MpiGroup() { probes.leave(); }

  bool init();
  bool allReduce();
  bool allGather();
  bool reduceScatter();
  bool allToAll();

private:
  /// MPI counts are ints.
  bool fitsInt(int64_t elems) {
    if (elems <= INT_MAX)
      return true;
    setError(ctx, "%s: %lld elements per message exceed MPI's int count",
             c.name, (long long)elems);
    return false;
  }
  bool allToAllBlocks(const void *send, void *recv, int64_t blockElems);

  tessel_ctx *ctx;
  MpiComms &comms;
  StatusProbes &probes;
  const Group &group;
  const Collective &c;
  MPI_Datatype type;
  MPI_Comm comm = MPI_COMM_NULL;
};

bool MpiGroup::init() {
  if (!mpiIsUp()) {
    setError(ctx, "%s: MPI is not running", c.name);
    return false;
  }
  probes.enterCollective(c.name, group.mask);
  auto it = comms.find(group.mask);
  if (it != comms.end()) {
    comm = it->second;
    return true;
  }
  if (!mpiOk(ctx, c, splitComm(group, comm), "MPI_Comm_split"))
    return false;
  comms[group.mask] = comm;
  return true;
}

bool MpiGroup::allToAllBlocks(const void *send, void *recv,
                              int64_t blockElems) {
  if (!fitsInt(blockElems))
    return false;
  MPI_Request request;
  return mpiOk(ctx, c,
               MPI_Ialltoall(send, int(blockElems), type, recv, int(blockElems),
                             type, comm, &request),
               "MPI_Ialltoall") &&
         await(ctx, probes, c, group, request, "MPI_Ialltoall");
}

/// Chunk j of the buffer goes to group index j, which reduces it; the
/// reduced chunks are then gathered by everyone. `in` is consumed by the
/// all-to-all before `out` is written, so in == out is safe.
bool MpiGroup::allReduce() {
  const int64_t groupSize = group.size, g = group.index, n = c.count;
  const int64_t es = c.elemSize;
  if (!fitsInt(n))
    return false;
  std::vector<int> counts(static_cast<size_t>(groupSize)),
      displs(static_cast<size_t>(groupSize));
  for (int64_t j = 0; j < groupSize; ++j) {
    displs[size_t(j)] = int(j * n / groupSize);
    counts[size_t(j)] = int((j + 1) * n / groupSize - j * n / groupSize);
  }
  const int mine = counts[size_t(g)];
  std::vector<int> recvCounts(size_t(groupSize), mine),
      recvDispls(static_cast<size_t>(groupSize));
  for (int64_t p = 0; p < groupSize; ++p)
    recvDispls[size_t(p)] = int(p * mine);
  std::vector<uint8_t> received(size_t(groupSize * mine * es));
  MPI_Request request;
  if (!mpiOk(ctx, c,
             MPI_Ialltoallv(c.in, counts.data(), displs.data(), type,
                            received.data(), recvCounts.data(),
                            recvDispls.data(), type, comm, &request),
             "MPI_Ialltoallv") ||
      !await(ctx, probes, c, group, request, "MPI_Ialltoallv"))
    return false;
  std::vector<const void *> inputs(static_cast<size_t>(groupSize));
  for (int64_t p = 0; p < groupSize; ++p)
    inputs[size_t(p)] = received.data() + p * mine * es;
  std::vector<uint8_t> reduced(size_t(mine * es));
  reduceInOrder(c.dtype, c.reduce, groupSize, inputs.data(), reduced.data(),
                mine);
  return mpiOk(ctx, c,
               MPI_Iallgatherv(reduced.data(), mine, type, c.out, counts.data(),
                               displs.data(), type, comm, &request),
               "MPI_Iallgatherv") &&
         await(ctx, probes, c, group, request, "MPI_Iallgatherv");
}

/// Gathers the inputs whole, then places input p as block p of every row
/// (straight into out when there is one row).
bool MpiGroup::allGather() {
  const int64_t elems = c.outer * c.len * c.inner;
  if (!fitsInt(elems))
    return false;
  const int64_t inBytes = elems * c.elemSize;
  std::vector<uint8_t> gathered;
  void *dst = c.out;
  if (c.outer != 1) {
    gathered.resize(size_t(group.size * inBytes));
    dst = gathered.data();
  }
  MPI_Request request;
  if (!mpiOk(ctx, c,
             MPI_Iallgather(c.in, int(elems), type, dst, int(elems), type, comm,
                            &request),
             "MPI_Iallgather") ||
      !await(ctx, probes, c, group, request, "MPI_Iallgather"))
    return false;
  if (c.outer != 1) {
    const int64_t rowBytes = c.len * c.inner * c.elemSize;
    for (int64_t p = 0; p < group.size; ++p)
      copyRows(static_cast<uint8_t *>(c.out) + p * rowBytes,
               group.size * rowBytes, gathered.data() + p * inBytes, rowBytes,
               c.outer, rowBytes);
  }
  return true;
}

/// Block j of every row, packed as [outer, len / G, inner], goes to group
/// index j; the G blocks received are reduced in group-index order.
bool MpiGroup::reduceScatter() {
  const int64_t groupSize = group.size;
  const int64_t blockElems = c.len / groupSize * c.inner;
  const int64_t blockBytes = blockElems * c.elemSize;
  const int64_t sendElems = c.outer * blockElems;
  std::vector<uint8_t> packed;
  const void *send = c.in;
  if (c.outer != 1) {
    packed.resize(size_t(groupSize * sendElems * c.elemSize));
    for (int64_t j = 0; j < groupSize; ++j)
      copyRows(packed.data() + j * sendElems * c.elemSize, blockBytes,
               static_cast<const uint8_t *>(c.in) + j * blockBytes,
               groupSize * blockBytes, c.outer, blockBytes);
    send = packed.data();
  }
  std::vector<uint8_t> received(size_t(groupSize * sendElems * c.elemSize));
  if (!allToAllBlocks(send, received.data(), sendElems))
    return false;
  std::vector<const void *> inputs(static_cast<size_t>(groupSize));
  for (int64_t p = 0; p < groupSize; ++p)
    inputs[size_t(p)] = received.data() + p * sendElems * c.elemSize;
  reduceInOrder(c.dtype, c.reduce, groupSize, inputs.data(), c.out, sendElems);
  return true;
}

/// Packs block j (along split_dim) contiguously for group index j; unpacks
/// the block from p at p along concat_dim.
bool MpiGroup::allToAll() {
  const int64_t groupSize = group.size;
  AllToAllLayout layout = allToAllLayout(c, groupSize);
  const std::vector<int64_t> blockStrides = rowMajorStrides(layout.blockShape);
  const int64_t blockBytes = layout.blockElems * c.elemSize;
  std::vector<uint8_t> send(size_t(groupSize * blockBytes)),
      received(size_t(groupSize * blockBytes));
  for (int64_t j = 0; j < groupSize; ++j)
    copyBox(c.elemSize, layout.blockShape,
            static_cast<const uint8_t *>(c.in) +
                layout.inOffset(j) * c.elemSize,
            layout.inStrides, send.data() + j * blockBytes, blockStrides);
  if (!allToAllBlocks(send.data(), received.data(), layout.blockElems))
    return false;
  for (int64_t p = 0; p < groupSize; ++p)
    copyBox(c.elemSize, layout.blockShape, received.data() + p * blockBytes,
            blockStrides,
            static_cast<uint8_t *>(c.out) + layout.outOffset(p) * c.elemSize,
            layout.outStrides);
  return true;
}

//===--- Point-to-point ---------------------------------------------------===//

/// What precedes every payload: the caller's tag, whole, and the payload's
/// size.
struct Header {
  int64_t tag = 0;
  int64_t bytes = 0;
};

/// A send whose MPI_Isends may still read its buffers.
struct PendingSend {
  Header header;
  std::vector<uint8_t> payload;
  MPI_Request requests[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
};

/// One context's communicators, split per axes mask (the single axes at
/// creation, other masks on first use) and freed with it, and its
/// point-to-point state.
class MpiCommunicator final : public Communicator {
public:
  ~MpiCommunicator() override {
    if (!mpiIsUp())
      return;
    finishSends();
    probes.shutdown();
    if (probes.comm != MPI_COMM_NULL)
      MPI_Comm_free(&probes.comm);
    for (auto &entry : comms)
      MPI_Comm_free(&entry.second);
    if (p2pComm != MPI_COMM_NULL)
      MPI_Comm_free(&p2pComm);
  }

  bool allReduce(tessel_ctx *ctx, const Group &group,
                 const Collective &c) override {
    MpiGroup mg(ctx, comms, probes, group, c);
    return mg.init() && mg.allReduce();
  }
  bool allGather(tessel_ctx *ctx, const Group &group,
                 const Collective &c) override {
    MpiGroup mg(ctx, comms, probes, group, c);
    return mg.init() && mg.allGather();
  }
  bool reduceScatter(tessel_ctx *ctx, const Group &group,
                     const Collective &c) override {
    MpiGroup mg(ctx, comms, probes, group, c);
    return mg.init() && mg.reduceScatter();
  }
  bool allToAll(tessel_ctx *ctx, const Group &group,
                const Collective &c) override {
    MpiGroup mg(ctx, comms, probes, group, c);
    return mg.init() && mg.allToAll();
  }

  bool send(tessel_ctx *ctx, int32_t peer, int64_t tag, const void *buf,
            int64_t bytes) override;
  bool recv(tessel_ctx *ctx, int32_t peer, int64_t tag, void *buf,
            int64_t bytes) override;

  bool runsOnWorkerThread() const override { return serializedThreads; }

  MpiComms comms;
  /// MPI provides MPI_THREAD_SERIALIZED or more: two threads may make MPI
  /// calls, one at a time.
  bool serializedThreads = false;
  StatusProbes probes;
  /// MPI_COMM_WORLD's duplicate for point-to-point messages.
  MPI_Comm p2pComm = MPI_COMM_NULL;
  /// The largest MPI tag (MPI_TAG_UB).
  int tagUpperBound = 32767;
  /// How long the destructor waits for unreceived sends.
  double timeoutSeconds = 600;

private:
  bool p2pUp(tessel_ctx *ctx, const char *name);
  int mpiTagOf(int64_t tag) const {
    return int(uint64_t(tag) % (uint64_t(tagUpperBound) + 1));
  }
  /// Frees the pending sends that completed; false on an MPI error.
  bool reapSends(tessel_ctx *ctx, const char *name);
  /// Waits (up to the timeout) for every pending send.
  void finishSends();
  /// Posts a receive of `bytes` into `dst` and waits for it until
  /// `deadline` (`request` stays pending on a timeout).
  Wait receive(tessel_ctx *ctx, int32_t peer, int mpiTag,
               Clock::time_point deadline, void *dst, int64_t bytes,
               MPI_Request &request) {
    if (!mpiOk(ctx, "tessel_recv",
               MPI_Irecv(dst, int(bytes), MPI_BYTE, peer, mpiTag, p2pComm,
                         &request),
               "MPI_Irecv"))
      return Wait::Failed;
    return pollUntil(ctx, probes, "tessel_recv", request, deadline,
                     "MPI_Irecv");
  }
  /// Receives the header of the next message from `peer` on `mpiTag`.
  bool recvHeader(tessel_ctx *ctx, int32_t peer, int64_t tag, int mpiTag,
                  Clock::time_point deadline, Header &header);
  /// Receives the payload that follows a header into `dst`.
  bool recvPayload(tessel_ctx *ctx, int32_t peer, int64_t tag, int mpiTag,
                   Clock::time_point deadline, void *dst, int64_t bytes);

  std::list<PendingSend> pendingSends;
  /// Payloads received for another full tag than the one awaited (a fold
  /// collision), by (peer, tag), in arrival order.
  std::map<std::pair<int32_t, int64_t>, std::deque<std::vector<uint8_t>>>
      setAside;
};

bool MpiCommunicator::p2pUp(tessel_ctx *ctx, const char *name) {
  if (!mpiIsUp()) {
    setError(ctx, "%s: MPI is not running", name);
    return false;
  }
  return reapSends(ctx, name);
}

bool MpiCommunicator::reapSends(tessel_ctx *ctx, const char *name) {
  for (auto it = pendingSends.begin(); it != pendingSends.end();) {
    int done = 0;
    if (!mpiOk(ctx, name,
               MPI_Testall(2, it->requests, &done, MPI_STATUSES_IGNORE),
               "MPI_Testall"))
      return false;
    it = done ? pendingSends.erase(it) : std::next(it);
  }
  return true;
}

void MpiCommunicator::finishSends() {
  const auto deadline =
      Clock::now() +
      std::chrono::duration_cast<Clock::duration>(
          std::chrono::duration<double>(std::min(timeoutSeconds, 3.15e7)));
  while (!pendingSends.empty() && Clock::now() < deadline) {
    if (!reapSends(nullptr, "tessel_ctx_destroy"))
      break;
    if (!pendingSends.empty())
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (pendingSends.empty())
    return;
  // Never received (the job is failing): MPI may still read these buffers,
  // so they are left to the process's end rather than freed under it.
  new std::list<PendingSend>(std::move(pendingSends));
}

bool MpiCommunicator::send(tessel_ctx *ctx, int32_t peer, int64_t tag,
                           const void *buf, int64_t bytes) {
  const char *name = "tessel_send";
  if (!p2pUp(ctx, name))
    return false;
  if (bytes > INT_MAX) {
    setError(ctx, "tessel_send: %lld bytes exceed MPI's int count",
             (long long)bytes);
    return false;
  }
  pendingSends.emplace_back();
  PendingSend &pending = pendingSends.back();
  pending.header = {tag, bytes};
  try {
    const auto *data = static_cast<const uint8_t *>(buf);
    if (bytes > 0)
      pending.payload.assign(data, data + bytes);
  } catch (const std::bad_alloc &) {
    pendingSends.pop_back();
    setError(ctx, "tessel_send: out of memory copying %lld bytes for rank %d",
             (long long)bytes, peer);
    return false;
  }
  const int mpiTag = mpiTagOf(tag);
  if (!mpiOk(ctx, name,
             MPI_Isend(&pending.header, int(sizeof(Header)), MPI_BYTE, peer,
                       mpiTag, p2pComm, &pending.requests[0]),
             "MPI_Isend") ||
      !mpiOk(ctx, name,
             MPI_Isend(pending.payload.data(), int(bytes), MPI_BYTE, peer,
                       mpiTag, p2pComm, &pending.requests[1]),
             "MPI_Isend"))
    return false;
  return true;
}

bool MpiCommunicator::recvHeader(tessel_ctx *ctx, int32_t peer, int64_t tag,
                                 int mpiTag, Clock::time_point deadline,
                                 Header &header) {
  MPI_Request request;
  switch (receive(ctx, peer, mpiTag, deadline, &header, sizeof(Header),
                  request)) {
  case Wait::Done:
    return true;
  case Wait::Failed:
    return false;
  case Wait::TimedOut:
    break;
  }
  // Withdraw the receive so that a late header is not lost to it; one
  // that arrived in the meantime completes it instead.
  MPI_Status status;
  MPI_Cancel(&request);
  MPI_Wait(&request, &status);
  int cancelled = 0;
  MPI_Test_cancelled(&status, &cancelled);
  if (!cancelled)
    return true;
  setRecvTimeout(ctx, peer, tag, probes.survey(ctx, {peer}, ~0u));
  return false;
}

bool MpiCommunicator::recvPayload(tessel_ctx *ctx, int32_t peer, int64_t tag,
                                  int mpiTag, Clock::time_point deadline,
                                  void *dst, int64_t bytes) {
  MPI_Request request;
  switch (receive(ctx, peer, mpiTag, deadline, dst, bytes, request)) {
  case Wait::Done:
    return true;
  case Wait::Failed:
    return false;
  case Wait::TimedOut:
    break;
  }
  // The header came, its payload did not: the pair is out of step and the
  // receive stays pending, so the process must abort.
  setRecvTimeout(ctx, peer, tag, "its header arrived, its payload did not");
  return false;
}

bool MpiCommunicator::recv(tessel_ctx *ctx, int32_t peer, int64_t tag,
                           void *buf, int64_t bytes) {
  if (!p2pUp(ctx, "tessel_recv"))
    return false;
  auto aside = setAside.find({peer, tag});
  if (aside != setAside.end()) {
    std::vector<uint8_t> payload = std::move(aside->second.front());
    aside->second.pop_front();
    if (aside->second.empty())
      setAside.erase(aside);
    if (int64_t(payload.size()) != bytes) {
      setRecvSizeMismatch(ctx, peer, tag, int64_t(payload.size()), bytes);
      return false;
    }
    if (bytes > 0)
      std::memcpy(buf, payload.data(), size_t(bytes));
    return true;
  }
  const int mpiTag = mpiTagOf(tag);
  const auto deadline = commDeadline(ctx);
  probes.enterRecv(peer, tag);
  struct Leave {
    StatusProbes &probes;
    ~Leave() { probes.leave(); }
  } leave{probes};
  while (true) {
    Header header;
    if (!recvHeader(ctx, peer, tag, mpiTag, deadline, header))
      return false;
    if (header.tag == tag && header.bytes == bytes)
      return recvPayload(ctx, peer, tag, mpiTag, deadline, buf, bytes);
    // Another message: its payload comes next on this MPI tag, so it is
    // received (set aside, or drained on a size mismatch) to keep the
    // pair's stream in step.
    if (header.bytes < 0 || header.bytes > INT_MAX) {
      setError(ctx, "tessel_recv: corrupt header from rank %d (%lld bytes)",
               peer, (long long)header.bytes);
      return false;
    }
    std::vector<uint8_t> payload(size_t(header.bytes));
    if (!recvPayload(ctx, peer, header.tag, mpiTag, deadline, payload.data(),
                     header.bytes))
      return false;
    if (header.tag == tag) {
      setRecvSizeMismatch(ctx, peer, tag, header.bytes, bytes);
      return false;
    }
    setAside[{peer, header.tag}].push_back(std::move(payload));
  }
}

} // namespace

std::unique_ptr<Communicator>
tessel::cpu::createMpiCommunicator(tessel_ctx *ctx, std::string &error) {
  if (!mpiIsUp()) {
    error = "tessel_ctx_create: MPI is not initialised (call tessel_mpi_init "
            "first)";
    return nullptr;
  }
  int rank = -1, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (rank != ctx->rank || size != ctx->worldSize) {
    error = "tessel_ctx_create: rank " + std::to_string(ctx->rank) + " of " +
            std::to_string(ctx->worldSize) +
            " disagrees with MPI_COMM_WORLD (rank " + std::to_string(rank) +
            " of " + std::to_string(size) + ")";
    return nullptr;
  }
  auto comm = std::make_unique<MpiCommunicator>();
  comm->timeoutSeconds = ctx->commTimeoutSeconds;
  // MPI may have been initialised by someone else, at a lower level.
  int threadLevel = MPI_THREAD_SINGLE;
  MPI_Query_thread(&threadLevel);
  comm->serializedThreads = threadLevel >= MPI_THREAD_SERIALIZED;
  if (MPI_Comm_dup(MPI_COMM_WORLD, &comm->p2pComm) != MPI_SUCCESS) {
    error = "tessel_ctx_create: MPI_Comm_dup failed";
    return nullptr;
  }
  MPI_Comm_set_errhandler(comm->p2pComm, MPI_ERRORS_RETURN);
  if (MPI_Comm_dup(MPI_COMM_WORLD, &comm->probes.comm) != MPI_SUCCESS) {
    error = "tessel_ctx_create: MPI_Comm_dup failed";
    return nullptr;
  }
  MPI_Comm_set_errhandler(comm->probes.comm, MPI_ERRORS_RETURN);
  int *tagUpperBound = nullptr, found = 0;
  MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tagUpperBound, &found);
  if (found && tagUpperBound && *tagUpperBound > 0)
    comm->tagUpperBound = *tagUpperBound;
  // Every rank creates its context, so the splits of the single-axis groups
  // (the common case) happen here, collectively, rather than in a step.
  for (size_t a = 0; a < ctx->meshShape.size(); ++a) {
    Group group;
    if (ctx->meshShape[a] == 1 || !groupOf(ctx, 1u << a, group))
      continue;
    MPI_Comm split;
    if (splitComm(group, split) != MPI_SUCCESS) {
      error = "tessel_ctx_create: MPI_Comm_split failed for mesh axis " +
              std::to_string(a);
      return nullptr;
    }
    comm->comms[group.mask] = split;
  }
  return comm;
}

int32_t tessel::cpu::mpiInit(int32_t *rank, int32_t *world_size) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (finalized) {
    setCreateError("tessel_mpi_init: MPI was already finalised");
    return 1;
  }
  if (!initialized) {
    // A rank issues its calls from one thread, not necessarily the main
    // one, and its started collectives run on its comm worker: two
    // threads, never in MPI at once.
    int provided = 0;
    if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided) !=
        MPI_SUCCESS) {
      setCreateError("tessel_mpi_init: MPI_Init_thread failed");
      return 1;
    }
  }
  int r = 0, s = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  if (rank)
    *rank = r;
  if (world_size)
    *world_size = s;
  return 0;
}

void tessel::cpu::mpiFinalize() {
  if (mpiIsUp())
    MPI_Finalize();
}

void tessel::cpu::mpiAbort(int32_t code) {
  if (mpiIsUp())
    MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

#else // !TESSEL_WITH_MPI

using namespace tessel::cpu;

std::unique_ptr<Communicator>
tessel::cpu::createMpiCommunicator(tessel_ctx *, std::string &error) {
  error = "tessel_ctx_create: TESSEL_COMM_MPI, but this runtime was built "
          "without MPI";
  return nullptr;
}

int32_t tessel::cpu::mpiInit(int32_t *, int32_t *) {
  setCreateError("tessel_mpi_init: this runtime was built without MPI");
  return 1;
}

void tessel::cpu::mpiFinalize() {}

void tessel::cpu::mpiAbort(int32_t code) { std::_Exit(code); }

#endif // TESSEL_WITH_MPI
