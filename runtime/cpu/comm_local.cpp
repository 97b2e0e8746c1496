//===- comm_local.cpp - Collectives between ranks that are threads --------===//
//
// TESSEL_COMM_LOCAL: the ranks of a tessel_local_world are threads of one
// process, so a collective reads its peers' buffers directly. Every rank
// publishes its buffers in its slot and meets its group at a barrier; past
// it, each rank copies or reduces straight from its peers' buffers, then
// meets them again so that nobody returns (and lets its caller reuse a
// buffer) while a peer still reads it. Reductions go through reduceInOrder in
// group-index order, so every member computes the same bits.
//
// Nothing here is tied to the calling thread: a started collective runs on
// its context's comm worker (core/async_comm.h) instead of the rank's
// thread. The worker runs a rank's collectives one at a time, in call
// order, and the rank's thread calls in only when nothing is queued, so a
// rank is in at most one collective and writes its slot from one thread
// at a time; errors go through the thread-safe setError; an abort or a
// timeout wakes a worker waiting at a barrier as it would the rank.
//
// Point-to-point messages go through mailboxes instead: tessel_send copies
// the payload into the (sender, receiver) pair's queue and returns;
// tessel_recv waits on its rank's condition variable for a message with its
// tag in the queue from its peer.
//
//===----------------------------------------------------------------------===//

#include "cpu/comm.h"

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <new>

using namespace tessel::cpu;

namespace {

/// A reusable barrier of one group: `generation` counts completed rounds;
/// `present` marks, by group index, who has arrived in the current one.
struct Barrier {
  std::condition_variable cv;
  uint64_t generation = 0;
  int64_t arrived = 0;
  std::vector<char> present;
  /// Set by the first wait that timed out: the round can never complete
  /// consistently, so every wait on this barrier fails with it.
  std::string broken;
};

/// What a rank publishes for the collective it is in.
struct Slot {
  const void *in = nullptr;
  void *out = nullptr;
  uint64_t signature = 0;
};

/// A point-to-point message sent and not yet received: its tag and a copy
/// of its payload.
struct Message {
  int64_t tag = 0;
  std::vector<uint8_t> payload;
};

/// Above this many bytes an all_reduce splits the work: each member reduces
/// one chunk instead of every member reducing everything.
constexpr int64_t kChunkedAllReduceBytes = 64 * 1024;

} // namespace

struct tessel_local_world {
  explicit tessel_local_world(int32_t size)
      : worldSize(size), slots(size_t(size)), attached(size_t(size), 0),
        mailboxes(size_t(size) * size_t(size)), arrived(size_t(size)) {}

  const int32_t worldSize;
  /// Guards everything below except the slots (see publish()).
  std::mutex mutex;
  /// A slot is written by its own rank only, before it arrives at the first
  /// barrier of a collective, and read by its peers only between that
  /// barrier and the last one, so the barrier's mutex orders every access.
  std::vector<Slot> slots;
  std::vector<char> attached;
  bool aborted = false;
  std::string abortError;
  /// Per (axes mask, group id), created on first use.
  std::map<std::pair<uint32_t, int64_t>, std::unique_ptr<Barrier>> barriers;
  /// The messages from rank s to rank d not yet received, in send order, at
  /// s * worldSize + d. They belong to the world, not to a context: a rank
  /// may send to a peer whose context does not exist yet.
  std::vector<std::deque<Message>> mailboxes;
  /// Per receiving rank: notified when a message arrives for it and when
  /// the world aborts.
  std::vector<std::condition_variable> arrived;

  std::deque<Message> &mailbox(int32_t from, int32_t to) {
    return mailboxes[size_t(from) * size_t(worldSize) + size_t(to)];
  }
};

namespace {

Barrier &barrierOf(tessel_local_world *world, const Group &group) {
  std::lock_guard<std::mutex> lock(world->mutex);
  auto &barrier = world->barriers[{group.mask, group.id}];
  if (!barrier) {
    barrier = std::make_unique<Barrier>();
    barrier->present.assign(size_t(group.size), 0);
  }
  return *barrier;
}

/// One group's view of a collective in progress.
class LocalGroup {
public:
  LocalGroup(tessel_ctx *ctx, tessel_local_world *world, const Group &group,
             const Collective &c)
      : ctx(ctx), world(world), group(group), c(c),
        barrier(barrierOf(world, group)) {
    members.resize(size_t(group.size));
    for (int64_t j = 0; j < group.size; ++j)
      members[size_t(j)] = groupMemberRank(ctx, group, j);
  }

  void publish() {
    world->slots[size_t(ctx->rank)] = {c.in, c.out, c.signature()};
  }
  const Slot &peer(int64_t j) const {
    return world->slots[size_t(members[size_t(j)])];
  }
  const uint8_t *peerIn(int64_t j) const {
    return static_cast<const uint8_t *>(peer(j).in);
  }

  /// True when every member made the same call. Each member compares every
  /// slot with its own, so if any two differ every member sees a difference:
  /// all of them take the same (error) path.
  bool membersAgree() const {
    const uint64_t mine = c.signature();
    for (int64_t j = 0; j < group.size; ++j)
      if (peer(j).signature != mine)
        return false;
    return true;
  }

  /// Waits for the whole group; false (error recorded) on an abort or a
  /// timeout.
  bool arrive();

  tessel_ctx *ctx;
  tessel_local_world *world;
  const Group &group;
  const Collective &c;
  Barrier &barrier;
  std::vector<int32_t> members;
};

bool LocalGroup::arrive() {
  std::unique_lock<std::mutex> lock(world->mutex);
  // A timeout on this group outranks a later abort (typically a peer
  // reporting that same timeout): every waiter gets the timeout's message.
  auto failed = [&] {
    if (!barrier.broken.empty()) {
      setError(ctx, "%s", barrier.broken.c_str());
      return true;
    }
    if (world->aborted) {
      setError(ctx, "%s", world->abortError.c_str());
      return true;
    }
    return false;
  };
  if (failed())
    return false;
  barrier.present[size_t(group.index)] = 1;
  if (++barrier.arrived == group.size) {
    barrier.arrived = 0;
    std::fill(barrier.present.begin(), barrier.present.end(), 0);
    ++barrier.generation;
    barrier.cv.notify_all();
    return true;
  }
  const uint64_t generation = barrier.generation;
  const auto deadline = commDeadline(ctx);
  while (barrier.generation == generation) {
    if (failed())
      return false;
    if (barrier.cv.wait_until(lock, deadline) == std::cv_status::timeout &&
        barrier.generation == generation && !failed()) {
      std::string indices, ranks;
      for (int64_t j = 0; j < group.size; ++j) {
        if (barrier.present[size_t(j)])
          continue;
        indices += (indices.empty() ? "" : ", ") + std::to_string(j);
        ranks +=
            (ranks.empty() ? "" : ", ") + std::to_string(members[size_t(j)]);
      }
      char seconds[32], mask[16];
      std::snprintf(seconds, sizeof(seconds), "%g", ctx->commTimeoutSeconds);
      std::snprintf(mask, sizeof(mask), "0x%x", group.mask);
      barrier.broken = std::string(c.name) + ": timed out after " + seconds +
                       " s waiting for group indices {" + indices +
                       "} (ranks {" + ranks + "}) of the group of axes mask " +
                       mask;
      barrier.cv.notify_all();
      setError(ctx, "%s", barrier.broken.c_str());
      return false;
    }
  }
  return true;
}

//===--- Algorithms -------------------------------------------------------===//

/// Small: every member reduces the whole buffer into scratch, waits until
/// all have read every input, then writes its output; in place is safe
/// because nobody writes an output before the group is done reading.
///
/// Large: member g owns chunk g. It reduces chunk g of every member's input
/// into chunk g of its own output; after the middle barrier it copies the
/// other chunks h from their owners' outputs. In place (in == out on every
/// member) is safe: chunk g of member g's buffer is read, during the
/// reduction, only by member g itself, and reduceInOrder reads each block of
/// every input before writing it; chunk h != g of member g's buffer is read
/// by member h during the reduction only, which ends at the middle barrier
/// before member g overwrites it with the copy. The last barrier keeps each
/// owner's chunk alive until every member has copied it.
bool allReduce(LocalGroup &lg) {
  const Collective &c = lg.c;
  const int64_t groupSize = lg.group.size, g = lg.group.index;
  const int64_t n = c.count, es = c.elemSize;
  std::vector<const void *> inputs(static_cast<size_t>(groupSize));
  if (n * es < kChunkedAllReduceBytes || n < groupSize) {
    for (int64_t p = 0; p < groupSize; ++p)
      inputs[size_t(p)] = lg.peerIn(p);
    std::vector<uint8_t> sum(size_t(n * es));
    reduceInOrder(c.dtype, c.reduce, groupSize, inputs.data(), sum.data(), n);
    if (!lg.arrive())
      return false;
    if (n > 0)
      std::memcpy(c.out, sum.data(), size_t(n * es));
    return true;
  }
  auto chunkBegin = [&](int64_t j) { return j * n / groupSize; };
  const int64_t begin = chunkBegin(g), end = chunkBegin(g + 1);
  for (int64_t p = 0; p < groupSize; ++p)
    inputs[size_t(p)] = lg.peerIn(p) + begin * es;
  auto *out = static_cast<uint8_t *>(c.out);
  reduceInOrder(c.dtype, c.reduce, groupSize, inputs.data(), out + begin * es,
                end - begin);
  if (!lg.arrive())
    return false;
  for (int64_t h = 0; h < groupSize; ++h) {
    if (h == g)
      continue;
    const int64_t b = chunkBegin(h), e = chunkBegin(h + 1);
    std::memcpy(out + b * es,
                static_cast<const uint8_t *>(lg.peer(h).out) + b * es,
                size_t((e - b) * es));
  }
  return lg.arrive();
}

/// Peer p's input becomes block p of every [G·len] row of the output.
void allGather(LocalGroup &lg) {
  const Collective &c = lg.c;
  const int64_t groupSize = lg.group.size;
  const int64_t rowBytes = c.len * c.inner * c.elemSize;
  for (int64_t p = 0; p < groupSize; ++p)
    copyRows(static_cast<uint8_t *>(c.out) + p * rowBytes, groupSize * rowBytes,
             lg.peerIn(p), rowBytes, c.outer, rowBytes);
}

/// Block g of every row, reduced over the members' inputs.
void reduceScatter(LocalGroup &lg) {
  const Collective &c = lg.c;
  const int64_t groupSize = lg.group.size, g = lg.group.index;
  const int64_t blockElems = c.len / groupSize * c.inner;
  std::vector<const void *> inputs(static_cast<size_t>(groupSize));
  for (int64_t o = 0; o < c.outer; ++o) {
    const int64_t first = (o * groupSize + g) * blockElems;
    for (int64_t p = 0; p < groupSize; ++p)
      inputs[size_t(p)] = lg.peerIn(p) + first * c.elemSize;
    reduceInOrder(c.dtype, c.reduce, groupSize, inputs.data(),
                  static_cast<uint8_t *>(c.out) + o * blockElems * c.elemSize,
                  blockElems);
  }
}

/// Block g (along split_dim) of every peer p's input, placed at p along
/// concat_dim.
void allToAll(LocalGroup &lg) {
  const Collective &c = lg.c;
  const int64_t groupSize = lg.group.size, g = lg.group.index;
  AllToAllLayout layout = allToAllLayout(c, groupSize);
  for (int64_t p = 0; p < groupSize; ++p)
    copyBox(c.elemSize, layout.blockShape,
            lg.peerIn(p) + layout.inOffset(g) * c.elemSize, layout.inStrides,
            static_cast<uint8_t *>(c.out) + layout.outOffset(p) * c.elemSize,
            layout.outStrides);
}

/// The tags of the messages waiting in `box`, for a timeout's message: a
/// peer that sent under another tag than the one awaited is the usual
/// mistake of a pipeline schedule.
std::string waitingTags(const std::deque<Message> &box) {
  if (box.empty())
    return "";
  constexpr size_t kShown = 8;
  std::string tags;
  for (size_t i = 0; i < box.size() && i < kShown; ++i)
    tags += (i ? ", " : "") + std::to_string(box[i].tag);
  if (box.size() > kShown)
    tags += ", ...";
  return std::to_string(box.size()) + " other message" +
         (box.size() == 1 ? "" : "s") + " from it wait" +
         (box.size() == 1 ? "s" : "") + " unreceived, tags {" + tags + "}";
}

/// The threads world's communicator of one context: its rank's slot in
/// the world, held from creation to destruction.
class LocalCommunicator final : public Communicator {
public:
  LocalCommunicator(tessel_local_world *world, int32_t rank)
      : world(world), rank(rank) {}
  ~LocalCommunicator() override {
    std::lock_guard<std::mutex> lock(world->mutex);
    world->attached[size_t(rank)] = 0;
  }

  bool allReduce(tessel_ctx *ctx, const Group &group,
                 const Collective &c) override {
    LocalGroup lg(ctx, world, group, c);
    return enter(lg) && ::allReduce(lg);
  }
  bool allGather(tessel_ctx *ctx, const Group &group,
                 const Collective &c) override {
    LocalGroup lg(ctx, world, group, c);
    if (!enter(lg))
      return false;
    ::allGather(lg);
    return lg.arrive();
  }
  bool reduceScatter(tessel_ctx *ctx, const Group &group,
                     const Collective &c) override {
    LocalGroup lg(ctx, world, group, c);
    if (!enter(lg))
      return false;
    ::reduceScatter(lg);
    return lg.arrive();
  }
  bool allToAll(tessel_ctx *ctx, const Group &group,
                const Collective &c) override {
    LocalGroup lg(ctx, world, group, c);
    if (!enter(lg))
      return false;
    ::allToAll(lg);
    return lg.arrive();
  }

  bool send(tessel_ctx *ctx, int32_t peer, int64_t tag, const void *buf,
            int64_t bytes) override {
    // The copy is made outside the world's lock.
    Message message;
    message.tag = tag;
    try {
      const auto *data = static_cast<const uint8_t *>(buf);
      if (bytes > 0)
        message.payload.assign(data, data + bytes);
    } catch (const std::bad_alloc &) {
      setError(ctx, "tessel_send: out of memory copying %lld bytes for rank %d",
               (long long)bytes, peer);
      return false;
    }
    std::lock_guard<std::mutex> lock(world->mutex);
    if (world->aborted) {
      setError(ctx, "%s", world->abortError.c_str());
      return false;
    }
    world->mailbox(rank, peer).push_back(std::move(message));
    world->arrived[size_t(peer)].notify_all();
    return true;
  }

  bool recv(tessel_ctx *ctx, int32_t peer, int64_t tag, void *buf,
            int64_t bytes) override {
    std::unique_lock<std::mutex> lock(world->mutex);
    std::deque<Message> &box = world->mailbox(peer, rank);
    const auto deadline = commDeadline(ctx);
    while (true) {
      if (world->aborted) {
        setError(ctx, "%s", world->abortError.c_str());
        return false;
      }
      // The first match: two messages with one tag arrive in send order.
      auto it = std::find_if(box.begin(), box.end(),
                             [&](const Message &m) { return m.tag == tag; });
      if (it != box.end()) {
        Message message = std::move(*it);
        box.erase(it);
        lock.unlock();
        const int64_t sent = int64_t(message.payload.size());
        if (sent != bytes) {
          setRecvSizeMismatch(ctx, peer, tag, sent, bytes);
          return false;
        }
        if (bytes > 0)
          std::memcpy(buf, message.payload.data(), size_t(bytes));
        return true;
      }
      if (std::chrono::steady_clock::now() >= deadline) {
        setRecvTimeout(ctx, peer, tag, waitingTags(box));
        return false;
      }
      world->arrived[size_t(rank)].wait_until(lock, deadline);
    }
  }

private:
  /// What every collective starts with: publish this rank's buffers, meet
  /// the group, and check that every member made the same call.
  static bool enter(LocalGroup &lg) {
    lg.publish();
    if (!lg.arrive())
      return false;
    if (lg.membersAgree())
      return true;
    // Every member found the mismatch; all meet once more so that no slot
    // is republished while a peer still compares it.
    if (lg.arrive())
      setError(lg.ctx,
               "%s: the members of the group of axes mask 0x%x made "
               "different calls (collective, dtype, reduction or shape)",
               lg.c.name, lg.group.mask);
    return false;
  }

  tessel_local_world *world;
  int32_t rank;
};

} // namespace

std::unique_ptr<Communicator>
tessel::cpu::createLocalCommunicator(tessel_ctx *ctx, tessel_local_world *world,
                                     std::string &error) {
  std::lock_guard<std::mutex> lock(world->mutex);
  if (world->worldSize != ctx->worldSize) {
    error = "tessel_ctx_create: the local world has " +
            std::to_string(world->worldSize) + " ranks, the options say " +
            std::to_string(ctx->worldSize);
    return nullptr;
  }
  if (world->attached[size_t(ctx->rank)]) {
    error = "tessel_ctx_create: rank " + std::to_string(ctx->rank) +
            " already has a context in this local world";
    return nullptr;
  }
  world->attached[size_t(ctx->rank)] = 1;
  return std::make_unique<LocalCommunicator>(world, ctx->rank);
}

tessel_local_world *tessel::cpu::createLocalWorld(int32_t worldSize) {
  return new (std::nothrow) tessel_local_world(worldSize);
}

void tessel::cpu::destroyLocalWorld(tessel_local_world *world) { delete world; }

void tessel::cpu::abortLocalWorld(tessel_local_world *world, int32_t rank,
                                  const char *message) {
  std::lock_guard<std::mutex> lock(world->mutex);
  if (world->aborted)
    return;
  world->aborted = true;
  world->abortError = "rank " + std::to_string(rank) + " failed: " + message;
  for (auto &entry : world->barriers)
    entry.second->cv.notify_all();
  for (std::condition_variable &cv : world->arrived)
    cv.notify_all();
}
