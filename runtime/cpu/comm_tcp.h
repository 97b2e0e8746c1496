//===- comm_tcp.h - The TCP communicator's sockets and collectives -*- C++
//-*-===//
//
// Private to runtime/cpu. TESSEL_COMM_TCP: one process per rank, joined by
// the TCP rendezvous (core/rendezvous.h) into a full mesh of sockets.
// TcpLinks moves framed messages over that mesh; the collectives
// (comm_tcp_collectives.cpp) exchange blocks through it and reduce them with
// reduceInOrder in group-index order, as the thread and MPI communicators
// do, so all three give the same bits.
//
// Every message is a frame: a 24-byte header (kind, axes mask, tag, payload
// bytes) and the payload. Collective and point-to-point frames share a
// socket; each peer's frames are sorted into two queues as they arrive, so
// a pipeline message sent while its receiver is in a collective waits for
// it, and the other way round. A collective's frames carry its signature as
// tag: members that disagree on the call fail instead of misreading.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_RUNTIME_CPU_COMM_TCP_H
#define TESSEL_RUNTIME_CPU_COMM_TCP_H

#include "core/collective.h"
#include "cpu/comm.h"

#include <chrono>
#include <deque>
#include <functional>
#include <string>
#include <vector>

namespace tessel {
namespace cpu {

/// The communicator of a new TESSEL_COMM_TCP context: runs the rendezvous
/// at options.rendezvous_host:port (collective over the world); null with
/// the reason in `error`.
std::unique_ptr<Communicator>
createTcpCommunicator(tessel_ctx *ctx, const tessel_ctx_options &options,
                      std::string &error);

/// The largest frame a peer may announce (1 TiB): a corrupt header fails
/// the link instead of asking for an absurd allocation.
constexpr int64_t kMaxTcpFrameBytes = int64_t(1) << 40;

class TcpLinks {
public:
  using Clock = std::chrono::steady_clock;
  enum Kind : uint32_t { kCollective = 1, kPointToPoint = 2 };
  struct Frame {
    uint32_t kind = 0, mask = 0;
    int64_t tag = 0;
    std::vector<uint8_t> data;
  };

  /// Takes the rendezvous' sockets (sockets[rank] == -1).
  TcpLinks(std::vector<int> sockets, int32_t rank);
  /// Flushes what is queued, half-closes every link and waits (bounded by
  /// `closeSeconds`) for the peers to close theirs, so no byte in flight is
  /// lost to a reset.
  ~TcpLinks();
  double closeSeconds = 60;

  /// Queues a frame for `peer`. A borrowed payload must stay alive until
  /// flushed(peer); a copied one is owned by the queue.
  bool post(int32_t peer, uint32_t kind, uint32_t mask, int64_t tag,
            const void *data, int64_t bytes, bool copy);
  /// Moves bytes until pending() (the peers the caller still waits for)
  /// is empty; false with the reason in `why` ("timed out", or why a peer
  /// it still waits for is gone: a gone peer whose part is in does not
  /// fail the call) once the deadline passes.
  using Pending = std::function<std::vector<int32_t>()>;
  bool pump(Clock::time_point until, const Pending &pending, std::string &why);
  /// One round without waiting (after a send).
  void progress();

  bool flushed(int32_t peer) const { return peers[size_t(peer)].out.empty(); }
  bool gone(int32_t peer) const { return peers[size_t(peer)].fd < 0; }
  const std::string &goneReason(int32_t peer) const {
    return peers[size_t(peer)].goneReason;
  }
  std::deque<Frame> &frames(int32_t peer, uint32_t kind) {
    Peer &p = peers[size_t(peer)];
    return kind == kCollective ? p.collectives : p.messages;
  }

private:
  struct Outgoing {
    uint8_t header[24];
    const uint8_t *payload = nullptr;
    size_t bytes = 0;
    size_t sent = 0; /// of header and payload together
    std::vector<uint8_t> owned;
  };
  struct Peer {
    int fd = -1;
    std::string goneReason;
    std::deque<Outgoing> out;
    uint8_t header[24];
    size_t headerGot = 0;
    bool inPayload = false;
    Frame incoming;
    size_t payloadGot = 0;
    std::deque<Frame> collectives, messages;
  };
  void fail(int32_t peer, const std::string &why);
  void readFrom(int32_t peer);
  void writeTo(int32_t peer);
  bool step(int timeoutMs);

  std::vector<Peer> peers;
};

/// The collectives over `links` (arguments checked by the front, groups of
/// more than one rank): false with the error recorded on ctx.
bool tcpAllReduce(tessel_ctx *ctx, TcpLinks &links, const Group &group,
                  const Collective &c);
bool tcpAllGather(tessel_ctx *ctx, TcpLinks &links, const Group &group,
                  const Collective &c);
bool tcpReduceScatter(tessel_ctx *ctx, TcpLinks &links, const Group &group,
                      const Collective &c);
bool tcpAllToAll(tessel_ctx *ctx, TcpLinks &links, const Group &group,
                 const Collective &c);

} // namespace cpu
} // namespace tessel

#endif // TESSEL_RUNTIME_CPU_COMM_TCP_H
