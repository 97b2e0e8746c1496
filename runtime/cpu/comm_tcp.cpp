//===- comm_tcp.cpp - TCP links, point-to-point and the TCP communicator --===//
//
// TESSEL_COMM_TCP (see comm_tcp.h): the frames over the rendezvous' full
// mesh, tessel_send / tessel_recv, and the communicator's creation. A peer
// whose connection closes or fails is gone: every operation that waits for
// it fails at once with the reason, and a process that exits (normally or
// not) closes its sockets, so its peers never wait out the timeout for it.
//
//===----------------------------------------------------------------------===//

#include "cpu/comm_tcp.h"

#include "core/rendezvous.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <new>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

using namespace tessel;
using namespace tessel::cpu;

//===--- Links ------------------------------------------------------------===//

TcpLinks::TcpLinks(std::vector<int> sockets, int32_t rank) {
  peers.resize(sockets.size());
  for (size_t p = 0; p < sockets.size(); ++p) {
    peers[p].fd = sockets[p];
    if (int32_t(p) == rank)
      peers[p].goneReason = "this rank";
  }
}

TcpLinks::~TcpLinks() {
  const auto until =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(closeSeconds));
  std::string why;
  // Peers gone meanwhile drop out of both waits.
  pump(
      until,
      [&] {
        std::vector<int32_t> unflushed;
        for (size_t p = 0; p < peers.size(); ++p)
          if (!gone(int32_t(p)) && !flushed(int32_t(p)))
            unflushed.push_back(int32_t(p));
        return unflushed;
      },
      why);
  for (Peer &p : peers)
    if (p.fd >= 0)
      shutdown(p.fd, SHUT_WR);
  // Read until every peer has closed too: closing with unread bytes would
  // reset the connection and could discard what the peer has not read.
  pump(
      until,
      [&] {
        for (size_t p = 0; p < peers.size(); ++p)
          if (!gone(int32_t(p)))
            return std::vector<int32_t>{-1};
        return std::vector<int32_t>{};
      },
      why);
  for (Peer &p : peers)
    if (p.fd >= 0)
      close(p.fd);
}

void TcpLinks::fail(int32_t peer, const std::string &why) {
  Peer &p = peers[size_t(peer)];
  if (p.fd < 0)
    return;
  close(p.fd);
  p.fd = -1;
  p.goneReason = why;
  p.out.clear();
}

bool TcpLinks::post(int32_t peer, uint32_t kind, uint32_t mask, int64_t tag,
                    const void *data, int64_t bytes, bool copy) {
  Peer &p = peers[size_t(peer)];
  if (p.fd < 0)
    return false;
  p.out.emplace_back();
  Outgoing &o = p.out.back();
  std::memcpy(o.header, &kind, 4);
  std::memcpy(o.header + 4, &mask, 4);
  std::memcpy(o.header + 8, &tag, 8);
  std::memcpy(o.header + 16, &bytes, 8);
  o.bytes = size_t(bytes);
  if (copy && bytes > 0) {
    o.owned.assign(static_cast<const uint8_t *>(data),
                   static_cast<const uint8_t *>(data) + bytes);
    o.payload = o.owned.data();
  } else {
    o.payload = static_cast<const uint8_t *>(data);
  }
  return true;
}

void TcpLinks::readFrom(int32_t peer) {
  Peer &p = peers[size_t(peer)];
  while (p.fd >= 0) {
    uint8_t *dst;
    size_t want;
    if (!p.inPayload) {
      dst = p.header + p.headerGot;
      want = sizeof(p.header) - p.headerGot;
    } else {
      dst = p.incoming.data.data() + p.payloadGot;
      want = p.incoming.data.size() - p.payloadGot;
    }
    ssize_t got = want == 0 ? 0 : ::recv(p.fd, dst, want, 0);
    if (want != 0 && got == 0) {
      fail(peer, "rank " + std::to_string(peer) +
                     " closed its connection (it exited, failed or "
                     "destroyed its context)");
      return;
    }
    if (got < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
        return;
      fail(peer, "the connection to rank " + std::to_string(peer) +
                     " failed: " + std::strerror(errno));
      return;
    }
    if (!p.inPayload) {
      p.headerGot += size_t(got);
      if (p.headerGot < sizeof(p.header))
        continue;
      Frame &f = p.incoming;
      int64_t bytes = 0;
      std::memcpy(&f.kind, p.header, 4);
      std::memcpy(&f.mask, p.header + 4, 4);
      std::memcpy(&f.tag, p.header + 8, 8);
      std::memcpy(&bytes, p.header + 16, 8);
      if ((f.kind != kCollective && f.kind != kPointToPoint) || bytes < 0 ||
          bytes > kMaxTcpFrameBytes) {
        fail(peer, "rank " + std::to_string(peer) +
                       " sent a malformed frame (kind " +
                       std::to_string(f.kind) + ", " + std::to_string(bytes) +
                       " bytes)");
        return;
      }
      try {
        f.data.resize(size_t(bytes));
      } catch (const std::bad_alloc &) {
        fail(peer, "out of memory for a frame of " + std::to_string(bytes) +
                       " bytes from rank " + std::to_string(peer));
        return;
      }
      p.headerGot = 0;
      p.payloadGot = 0;
      p.inPayload = true;
    } else {
      p.payloadGot += size_t(got);
    }
    if (p.inPayload && p.payloadGot == p.incoming.data.size()) {
      (p.incoming.kind == kCollective ? p.collectives : p.messages)
          .push_back(std::move(p.incoming));
      p.incoming = Frame();
      p.inPayload = false;
    }
  }
}

void TcpLinks::writeTo(int32_t peer) {
  Peer &p = peers[size_t(peer)];
  while (p.fd >= 0 && !p.out.empty()) {
    Outgoing &o = p.out.front();
    iovec iov[2];
    int n = 0;
    if (o.sent < sizeof(o.header)) {
      iov[n].iov_base = o.header + o.sent;
      iov[n++].iov_len = sizeof(o.header) - o.sent;
      iov[n].iov_base = const_cast<uint8_t *>(o.payload);
      iov[n++].iov_len = o.bytes;
    } else {
      const size_t done = o.sent - sizeof(o.header);
      iov[n].iov_base = const_cast<uint8_t *>(o.payload) + done;
      iov[n++].iov_len = o.bytes - done;
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = size_t(n);
    ssize_t put = sendmsg(p.fd, &msg, MSG_NOSIGNAL);
    if (put < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
        return;
      fail(peer, "the connection to rank " + std::to_string(peer) +
                     " failed: " + std::strerror(errno));
      return;
    }
    o.sent += size_t(put);
    if (o.sent == sizeof(o.header) + o.bytes)
      p.out.pop_front();
  }
}

bool TcpLinks::step(int timeoutMs) {
  std::vector<pollfd> fds;
  std::vector<int32_t> owners;
  for (size_t q = 0; q < peers.size(); ++q) {
    const Peer &p = peers[q];
    if (p.fd < 0)
      continue;
    fds.push_back(
        {p.fd, short(POLLIN | (p.out.empty() ? 0 : POLLOUT)), short(0)});
    owners.push_back(int32_t(q));
  }
  if (fds.empty())
    return false;
  if (poll(fds.data(), fds.size(), timeoutMs) <= 0)
    return false;
  for (size_t i = 0; i < fds.size(); ++i) {
    if (fds[i].revents & POLLOUT)
      writeTo(owners[i]);
    if (fds[i].revents & (POLLIN | POLLHUP | POLLERR))
      readFrom(owners[i]);
  }
  return true;
}

void TcpLinks::progress() {
  for (size_t q = 0; q < peers.size(); ++q)
    if (!peers[q].out.empty())
      writeTo(int32_t(q));
  step(0);
}

bool TcpLinks::pump(Clock::time_point until, const Pending &pending,
                    std::string &why) {
  while (true) {
    const std::vector<int32_t> waiting = pending();
    if (waiting.empty())
      return true;
    for (int32_t peer : waiting) // -1: a wait on no peer in particular
      if (peer >= 0 && gone(peer)) {
        why = goneReason(peer);
        return false;
      }
    const auto now = Clock::now();
    if (now >= until) {
      why = "timed out";
      return false;
    }
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(until - now)
            .count();
    // Short polls: a peer gone without a word is noticed within 100 ms.
    step(int(std::min<int64_t>(std::max<int64_t>(left, 1), 100)));
  }
}

//===--- The communicator -------------------------------------------------===//

namespace {

/// The tags of the messages waiting from a peer, for a timeout's message.
std::string waitingTags(const std::deque<TcpLinks::Frame> &box) {
  if (box.empty())
    return "";
  std::string tags;
  for (const TcpLinks::Frame &f : box)
    tags += (tags.empty() ? "" : ", ") + std::to_string(f.tag);
  return "messages from it are waiting under tag(s) " + tags;
}

class TcpCommunicator final : public Communicator {
public:
  TcpCommunicator(std::vector<int> sockets, int32_t rank, double closeSeconds)
      : links(std::move(sockets), rank) {
    links.closeSeconds = closeSeconds;
  }

  bool allReduce(tessel_ctx *ctx, const Group &group,
                 const Collective &c) override {
    return tcpAllReduce(ctx, links, group, c);
  }
  bool allGather(tessel_ctx *ctx, const Group &group,
                 const Collective &c) override {
    return tcpAllGather(ctx, links, group, c);
  }
  bool reduceScatter(tessel_ctx *ctx, const Group &group,
                     const Collective &c) override {
    return tcpReduceScatter(ctx, links, group, c);
  }
  bool allToAll(tessel_ctx *ctx, const Group &group,
                const Collective &c) override {
    return tcpAllToAll(ctx, links, group, c);
  }

  bool send(tessel_ctx *ctx, int32_t peer, int64_t tag, const void *buf,
            int64_t bytes) override {
    if (!links.post(peer, TcpLinks::kPointToPoint, 0, tag, buf, bytes,
                    /*copy=*/true)) {
      setError(ctx, "tessel_send: cannot send to rank %d: %s", peer,
               links.goneReason(peer).c_str());
      return false;
    }
    links.progress();
    return true;
  }

  bool recv(tessel_ctx *ctx, int32_t peer, int64_t tag, void *buf,
            int64_t bytes) override {
    std::deque<TcpLinks::Frame> &box =
        links.frames(peer, TcpLinks::kPointToPoint);
    auto match = [&] {
      return std::find_if(
          box.begin(), box.end(),
          [&](const TcpLinks::Frame &f) { return f.tag == tag; });
    };
    std::string why;
    auto pending = [&] {
      return match() != box.end() ? std::vector<int32_t>{}
                                  : std::vector<int32_t>{peer};
    };
    if (!links.pump(commDeadline(ctx), pending, why)) {
      if (why == "timed out")
        setRecvTimeout(ctx, peer, tag, waitingTags(box));
      else
        setError(ctx, "tessel_recv: no message from rank %d with tag %lld: %s",
                 peer, (long long)tag, why.c_str());
      return false;
    }
    auto it = match();
    TcpLinks::Frame frame = std::move(*it);
    box.erase(it);
    if (int64_t(frame.data.size()) != bytes) {
      setRecvSizeMismatch(ctx, peer, tag, int64_t(frame.data.size()), bytes);
      return false;
    }
    if (bytes > 0)
      std::memcpy(buf, frame.data.data(), size_t(bytes));
    return true;
  }

private:
  TcpLinks links;
};

} // namespace

std::unique_ptr<Communicator> tessel::cpu::createTcpCommunicator(
    tessel_ctx *ctx, const tessel_ctx_options &options, std::string &error) {
  RendezvousOptions o;
  if (options.rendezvous_host && *options.rendezvous_host)
    o.host = options.rendezvous_host;
  o.port = options.rendezvous_port;
  o.key = options.rendezvous_key ? options.rendezvous_key : "";
  o.rank = ctx->rank;
  o.worldSize = ctx->worldSize;
  o.timeoutSeconds = ctx->commTimeoutSeconds;
  RendezvousResult joined;
  if (!rendezvous(o, "", joined, error)) {
    error = "tessel_ctx_create: TESSEL_COMM_TCP " + error;
    return nullptr;
  }
  return std::make_unique<TcpCommunicator>(
      std::move(joined.sockets), ctx->rank,
      std::min(ctx->commTimeoutSeconds, 60.0));
}
