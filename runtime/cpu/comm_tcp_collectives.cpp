//===- comm_tcp_collectives.cpp - Collectives over the TCP links ----------===//
//
// The algorithms of comm_mpi.cpp over TcpLinks: every collective is one or
// two exchanges in which member g sends block j to member j and receives
// one block from every other member; reductions run reduceInOrder over the
// blocks in group-index order, so the bits equal the thread and MPI
// communicators'. all_reduce is a reduce-scatter by exchange followed by an
// all-gather of the reduced chunks: 2·(G-1)/G·n bytes per rank, as a ring.
//
//===----------------------------------------------------------------------===//

#include "cpu/comm_tcp.h"

#include <cstring>

using namespace tessel;
using namespace tessel::cpu;

namespace {

/// One exchange among the group: block j of `send` (sendBytes[j] bytes) to
/// member j, one frame of recvBytes[j] bytes from every member j != g.
/// received[g] stays empty (the caller uses its own block). Send buffers
/// are borrowed: the exchange returns once they are flushed.
bool exchange(tessel_ctx *ctx, TcpLinks &links, const Group &group,
              const Collective &c, const std::vector<const uint8_t *> &send,
              const std::vector<int64_t> &sendBytes,
              const std::vector<int64_t> &recvBytes,
              std::vector<TcpLinks::Frame> &received) {
  const int64_t groupSize = group.size, g = group.index;
  const auto tag = int64_t(c.signature());
  std::vector<int32_t> members(size_t(groupSize), -1), others;
  for (int64_t j = 0; j < groupSize; ++j) {
    members[size_t(j)] = groupMemberRank(ctx, group, j);
    if (j != g)
      others.push_back(members[size_t(j)]);
  }
  for (int64_t j = 0; j < groupSize; ++j)
    if (j != g &&
        !links.post(members[size_t(j)], TcpLinks::kCollective, group.mask, tag,
                    send[size_t(j)], sendBytes[size_t(j)], /*copy=*/false)) {
      setError(ctx, "%s: rank %d is gone: %s", c.name, members[size_t(j)],
               links.goneReason(members[size_t(j)]).c_str());
      return false;
    }
  std::string why;
  auto pending = [&] {
    std::vector<int32_t> waiting;
    for (int32_t peer : others)
      if (!links.flushed(peer) ||
          links.frames(peer, TcpLinks::kCollective).empty())
        waiting.push_back(peer);
    return waiting;
  };
  if (!links.pump(commDeadline(ctx), pending, why)) {
    if (why == "timed out") {
      std::string absent;
      for (int32_t peer : others)
        if (links.frames(peer, TcpLinks::kCollective).empty())
          absent += (absent.empty() ? "" : ", ") + std::to_string(peer);
      setError(ctx,
               "%s: timed out after %g s on the group of axes mask 0x%x of "
               "%lld ranks (a member has not joined: stopped, hung or in "
               "another operation): waiting for rank(s) %s",
               c.name, ctx->commTimeoutSeconds, group.mask,
               (long long)groupSize, absent.empty() ? "?" : absent.c_str());
    } else {
      setError(ctx, "%s: on the group of axes mask 0x%x: %s", c.name,
               group.mask, why.c_str());
    }
    return false;
  }
  received.assign(size_t(groupSize), TcpLinks::Frame());
  bool ok = true;
  for (int64_t j = 0; j < groupSize; ++j) {
    if (j == g)
      continue;
    auto &box = links.frames(members[size_t(j)], TcpLinks::kCollective);
    TcpLinks::Frame &f = received[size_t(j)];
    f = std::move(box.front());
    box.pop_front();
    if (ok && (f.mask != group.mask || f.tag != tag ||
               int64_t(f.data.size()) != recvBytes[size_t(j)])) {
      setError(ctx,
               "%s: the members of the group of axes mask 0x%x made "
               "different calls: rank %d sent %lld bytes for axes mask 0x%x "
               "(%lld expected)",
               c.name, group.mask, members[size_t(j)], (long long)f.data.size(),
               f.mask, (long long)recvBytes[size_t(j)]);
      ok = false;
    }
  }
  return ok;
}

} // namespace

/// Chunk j of the buffer goes to member j, which reduces it; the reduced
/// chunks are then gathered by everyone. `in` is read (sent) before `out`
/// is written, so in == out is safe.
bool tessel::cpu::tcpAllReduce(tessel_ctx *ctx, TcpLinks &links,
                               const Group &group, const Collective &c) {
  const int64_t groupSize = group.size, g = group.index, n = c.count;
  const int64_t es = c.elemSize;
  std::vector<int64_t> begin(size_t(groupSize) + 1);
  for (int64_t j = 0; j <= groupSize; ++j)
    begin[size_t(j)] = j * n / groupSize;
  auto *in = static_cast<const uint8_t *>(c.in);
  const int64_t mine = begin[size_t(g) + 1] - begin[size_t(g)];
  std::vector<const uint8_t *> send(static_cast<size_t>(groupSize));
  std::vector<int64_t> sendBytes(static_cast<size_t>(groupSize)),
      recvBytes(size_t(groupSize), mine * es);
  for (int64_t j = 0; j < groupSize; ++j) {
    send[size_t(j)] = in + begin[size_t(j)] * es;
    sendBytes[size_t(j)] = (begin[size_t(j) + 1] - begin[size_t(j)]) * es;
  }
  std::vector<TcpLinks::Frame> received;
  if (!exchange(ctx, links, group, c, send, sendBytes, recvBytes, received))
    return false;
  std::vector<const void *> inputs(static_cast<size_t>(groupSize));
  for (int64_t p = 0; p < groupSize; ++p)
    inputs[size_t(p)] = p == g ? static_cast<const void *>(send[size_t(g)])
                               : received[size_t(p)].data.data();
  std::vector<uint8_t> reduced(size_t(mine * es));
  reduceInOrder(c.dtype, c.reduce, groupSize, inputs.data(), reduced.data(),
                mine);
  // Phase two: my reduced chunk to everyone, theirs into out.
  std::vector<const uint8_t *> gatherSend(size_t(groupSize), reduced.data());
  std::vector<int64_t> gatherBytes(size_t(groupSize), mine * es);
  if (!exchange(ctx, links, group, c, gatherSend, gatherBytes, sendBytes,
                received))
    return false;
  auto *out = static_cast<uint8_t *>(c.out);
  for (int64_t p = 0; p < groupSize; ++p) {
    const uint8_t *chunk =
        p == g ? reduced.data() : received[size_t(p)].data.data();
    if (sendBytes[size_t(p)] > 0)
      std::memcpy(out + begin[size_t(p)] * es, chunk,
                  size_t(sendBytes[size_t(p)]));
  }
  return true;
}

/// Every member's input whole to everyone, placed as block p of every row.
bool tessel::cpu::tcpAllGather(tessel_ctx *ctx, TcpLinks &links,
                               const Group &group, const Collective &c) {
  const int64_t groupSize = group.size;
  const int64_t inBytes = c.outer * c.len * c.inner * c.elemSize;
  std::vector<const uint8_t *> send(size_t(groupSize),
                                    static_cast<const uint8_t *>(c.in));
  std::vector<int64_t> bytes(size_t(groupSize), inBytes);
  std::vector<TcpLinks::Frame> received;
  if (!exchange(ctx, links, group, c, send, bytes, bytes, received))
    return false;
  const int64_t rowBytes = c.len * c.inner * c.elemSize;
  for (int64_t p = 0; p < groupSize; ++p)
    copyRows(static_cast<uint8_t *>(c.out) + p * rowBytes, groupSize * rowBytes,
             p == group.index ? static_cast<const uint8_t *>(c.in)
                              : received[size_t(p)].data.data(),
             rowBytes, c.outer, rowBytes);
  return true;
}

/// Block j of every row, packed as [outer, len / G, inner], goes to member
/// j; the G blocks received are reduced in group-index order.
bool tessel::cpu::tcpReduceScatter(tessel_ctx *ctx, TcpLinks &links,
                                   const Group &group, const Collective &c) {
  const int64_t groupSize = group.size;
  const int64_t blockElems = c.len / groupSize * c.inner;
  const int64_t blockBytes = blockElems * c.elemSize;
  const int64_t sendElems = c.outer * blockElems;
  const int64_t sendBytes = sendElems * c.elemSize;
  std::vector<uint8_t> packed(size_t(groupSize * sendBytes));
  for (int64_t j = 0; j < groupSize; ++j)
    copyRows(packed.data() + j * sendBytes, blockBytes,
             static_cast<const uint8_t *>(c.in) + j * blockBytes,
             groupSize * blockBytes, c.outer, blockBytes);
  std::vector<const uint8_t *> send(static_cast<size_t>(groupSize));
  for (int64_t j = 0; j < groupSize; ++j)
    send[size_t(j)] = packed.data() + j * sendBytes;
  std::vector<int64_t> bytes(size_t(groupSize), sendBytes);
  std::vector<TcpLinks::Frame> received;
  if (!exchange(ctx, links, group, c, send, bytes, bytes, received))
    return false;
  std::vector<const void *> inputs(static_cast<size_t>(groupSize));
  for (int64_t p = 0; p < groupSize; ++p)
    inputs[size_t(p)] = p == group.index
                            ? static_cast<const void *>(send[size_t(p)])
                            : received[size_t(p)].data.data();
  reduceInOrder(c.dtype, c.reduce, groupSize, inputs.data(), c.out, sendElems);
  return true;
}

/// Packs block j (along split_dim) contiguously for member j; unpacks the
/// block from p at p along concat_dim.
bool tessel::cpu::tcpAllToAll(tessel_ctx *ctx, TcpLinks &links,
                              const Group &group, const Collective &c) {
  const int64_t groupSize = group.size;
  AllToAllLayout layout = allToAllLayout(c, groupSize);
  const std::vector<int64_t> blockStrides = rowMajorStrides(layout.blockShape);
  const int64_t blockBytes = layout.blockElems * c.elemSize;
  std::vector<uint8_t> packed(size_t(groupSize * blockBytes));
  std::vector<const uint8_t *> send(static_cast<size_t>(groupSize));
  for (int64_t j = 0; j < groupSize; ++j) {
    copyBox(c.elemSize, layout.blockShape,
            static_cast<const uint8_t *>(c.in) +
                layout.inOffset(j) * c.elemSize,
            layout.inStrides, packed.data() + j * blockBytes, blockStrides);
    send[size_t(j)] = packed.data() + j * blockBytes;
  }
  std::vector<int64_t> bytes(size_t(groupSize), blockBytes);
  std::vector<TcpLinks::Frame> received;
  if (!exchange(ctx, links, group, c, send, bytes, bytes, received))
    return false;
  for (int64_t p = 0; p < groupSize; ++p)
    copyBox(c.elemSize, layout.blockShape,
            p == group.index ? send[size_t(p)]
                             : received[size_t(p)].data.data(),
            blockStrides,
            static_cast<uint8_t *>(c.out) + layout.outOffset(p) * c.elemSize,
            layout.outStrides);
  return true;
}
