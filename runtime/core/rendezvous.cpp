//===- rendezvous.cpp - TCP rendezvous and full mesh of sockets -----------===//
//
// The protocol (all integers little-endian as the hosts are; the ranks of
// one world run one build on one architecture):
//   join    rank → 0   'TSLJ' keyLen key rank world port blobLen blob
//   verdict 0 → rank   status (0 ok, 1 rejected) msgLen msg
//   table   0 → rank   per rank: ipLen ip port blobLen blob  (ok only)
//   link    i → j < i  'TSLL' keyLen key rank
// Every length is checked against its bound before anything is allocated.
//
//===----------------------------------------------------------------------===//

#include "core/rendezvous.h"

#include <arpa/inet.h>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

using namespace tessel;
using Clock = RendezvousClock;

namespace {

constexpr uint32_t kJoinMagic = 0x4a4c5354; // "TSLJ"
constexpr uint32_t kLinkMagic = 0x4c4c5354; // "TSLL"
constexpr uint32_t kMaxAddress = 256;
/// A stranger that connects and says nothing is dropped after this long.
constexpr double kHelloSeconds = 10;

int msUntil(Clock::time_point until) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                  until - Clock::now())
                  .count();
  if (left <= 0)
    return 0;
  return left > 1000 ? 1000 : int(left);
}

bool setNonBlocking(int fd) {
  int flags = fcntl(fd, F_GETFL, 0);
  return flags >= 0 && fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0;
}

void setNoDelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

std::string sysError(const char *what) {
  return std::string(what) + ": " + std::strerror(errno);
}

/// A message being built or parsed.
struct Buffer {
  std::string bytes;
  void u32(uint32_t v) { bytes.append(reinterpret_cast<char *>(&v), 4); }
  void i32(int32_t v) { bytes.append(reinterpret_cast<char *>(&v), 4); }
  void str(const std::string &s) {
    u32(uint32_t(s.size()));
    bytes += s;
  }
};

bool readU32(int fd, uint32_t &v, Clock::time_point until, std::string &err) {
  return readFully(fd, &v, 4, until, err);
}

/// Reads a length-prefixed string of at most `limit` bytes.
bool readStr(int fd, std::string &s, uint32_t limit, const char *what,
             Clock::time_point until, std::string &err) {
  uint32_t n = 0;
  if (!readU32(fd, n, until, err))
    return false;
  if (n > limit) {
    err = std::string(what) + " of " + std::to_string(n) +
          " bytes exceeds the limit of " + std::to_string(limit);
    return false;
  }
  s.assign(n, '\0');
  return n == 0 || readFully(fd, &s[0], n, until, err);
}

/// A listening IPv4 socket on all interfaces at `port` (0: any free port);
/// -1 with the reason.
int listenOn(int32_t port, std::string &err) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    err = sysError("socket");
    return -1;
  }
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = htons(uint16_t(port));
  if (bind(fd, reinterpret_cast<sockaddr *>(&addr), sizeof(addr)) != 0) {
    err = sysError(("bind to port " + std::to_string(port)).c_str()) +
          (errno == EADDRINUSE ? " (another process listens there: pick "
                                 "another port)"
                               : "");
    close(fd);
    return -1;
  }
  if (listen(fd, SOMAXCONN) != 0 || !setNonBlocking(fd)) {
    err = sysError("listen");
    close(fd);
    return -1;
  }
  return fd;
}

int32_t portOf(int fd) {
  sockaddr_in addr{};
  socklen_t len = sizeof(addr);
  if (getsockname(fd, reinterpret_cast<sockaddr *>(&addr), &len) != 0)
    return -1;
  return ntohs(addr.sin_port);
}

/// Accepts one connection before the deadline: -1 with the reason
/// (err empty when only the deadline passed).
int acceptBefore(int listener, Clock::time_point until, std::string &err) {
  err.clear();
  while (true) {
    int fd = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd >= 0) {
      setNoDelay(fd);
      return fd;
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR &&
        errno != ECONNABORTED) {
      err = sysError("accept");
      return -1;
    }
    if (Clock::now() >= until)
      return -1;
    pollfd p{listener, POLLIN, 0};
    poll(&p, 1, msUntil(until));
  }
}

/// Connects to host:port, retrying refused or unreachable attempts until
/// the deadline when `retry` (rank 0's listener may not exist yet; a
/// peer's exists before its address is published, so a refusal there
/// means the peer is gone).
int connectWithRetries(const std::string &host, int32_t port,
                       Clock::time_point until, std::string &err,
                       bool retry = true) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  const std::string where = host + ":" + std::to_string(port);
  std::string lastError = "nothing listens there";
  bool refused = false;
  while (true) {
    addrinfo *found = nullptr;
    int rc =
        getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
    if (rc != 0) {
      lastError = std::string("cannot resolve the host: ") + gai_strerror(rc);
    } else {
      for (addrinfo *a = found; a; a = a->ai_next) {
        int fd =
            socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0)
          continue;
        setNonBlocking(fd);
        int c = connect(fd, a->ai_addr, a->ai_addrlen);
        if (c != 0 && errno == EINPROGRESS) {
          pollfd p{fd, POLLOUT, 0};
          if (poll(&p, 1, msUntil(until)) == 1) {
            int soError = 0;
            socklen_t len = sizeof(soError);
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &soError, &len);
            c = soError == 0 ? 0 : -1;
            errno = soError;
          } else {
            errno = ETIMEDOUT;
          }
        }
        if (c == 0) {
          freeaddrinfo(found);
          setNoDelay(fd);
          return fd;
        }
        refused = errno == ECONNREFUSED;
        lastError = std::strerror(errno);
        close(fd);
      }
      freeaddrinfo(found);
    }
    if ((refused && !retry) || Clock::now() >= until) {
      err = "could not connect to " + where + " (" + lastError + ")";
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

struct Joined {
  int fd = -1;
  std::string ip;
  int32_t port = 0;
  std::string blob;
};

std::string peerIp(int fd) {
  sockaddr_in addr{};
  socklen_t len = sizeof(addr);
  char text[INET_ADDRSTRLEN] = "127.0.0.1";
  if (getpeername(fd, reinterpret_cast<sockaddr *>(&addr), &len) == 0)
    inet_ntop(AF_INET, &addr.sin_addr, text, sizeof(text));
  return text;
}

void sendVerdict(int fd, uint32_t status, const std::string &msg,
                 Clock::time_point until) {
  Buffer b;
  b.u32(status);
  b.str(msg);
  std::string ignored;
  writeFully(fd, b.bytes.data(), b.bytes.size(), until, ignored);
}

/// Rank 0: accepts joins until every rank is in, rejecting strangers.
bool gatherJoins(int listener, const RendezvousOptions &o,
                 std::vector<Joined> &joined, Clock::time_point until,
                 std::string &error) {
  int32_t missing = o.worldSize - 1;
  while (missing > 0) {
    std::string err;
    int fd = acceptBefore(listener, until, err);
    if (fd < 0) {
      if (!err.empty()) {
        error = err;
        return false;
      }
      std::string absent;
      for (int32_t r = 1; r < o.worldSize; ++r)
        if (joined[size_t(r)].fd < 0)
          absent += (absent.empty() ? "" : ", ") + std::to_string(r);
      error = "timed out after " + std::to_string(o.timeoutSeconds) +
              " s waiting for ranks " + absent + " to join";
      return false;
    }
    const auto helloUntil = std::min(
        until, Clock::now() + std::chrono::seconds(int(kHelloSeconds)));
    uint32_t magic = 0;
    std::string key, blob;
    int32_t rank = -1, world = -1;
    uint32_t port = 0;
    bool ok = readU32(fd, magic, helloUntil, err) && magic == kJoinMagic &&
              readStr(fd, key, kMaxRendezvousKey, "key", helloUntil, err) &&
              readFully(fd, &rank, 4, helloUntil, err) &&
              readFully(fd, &world, 4, helloUntil, err) &&
              readU32(fd, port, helloUntil, err) &&
              readStr(fd, blob, kMaxRendezvousBlob, "blob", helloUntil, err);
    std::string reject;
    if (!ok)
      reject = "not a tessel rendezvous join";
    else if (key != o.key)
      reject = "wrong rendezvous key";
    else if (world != o.worldSize)
      reject = "world size " + std::to_string(world) + " differs from rank " +
               "0's " + std::to_string(o.worldSize);
    else if (rank < 1 || rank >= o.worldSize)
      reject = "rank " + std::to_string(rank) + " is out of range [1, " +
               std::to_string(o.worldSize) + ")";
    else if (joined[size_t(rank)].fd >= 0)
      reject = "rank " + std::to_string(rank) + " has already joined";
    else if (port > 65535)
      reject = "bad port " + std::to_string(port);
    if (!reject.empty()) {
      // A stranger is told why and dropped; the rendezvous goes on.
      if (ok)
        sendVerdict(fd, 1, reject, helloUntil);
      close(fd);
      continue;
    }
    Joined &j = joined[size_t(rank)];
    j.fd = fd;
    j.ip = peerIp(fd);
    j.port = int32_t(port);
    j.blob = std::move(blob);
    --missing;
  }
  return true;
}

/// Rank i: connects to rank 0, joins, reads the table.
int joinRankZero(const RendezvousOptions &o, int32_t listenPort,
                 const std::string &blob, std::vector<Joined> &table,
                 Clock::time_point until, std::string &error) {
  int fd = connectWithRetries(o.host, o.port, until, error);
  if (fd < 0)
    return -1;
  Buffer b;
  b.u32(kJoinMagic);
  b.str(o.key);
  b.i32(o.rank);
  b.i32(o.worldSize);
  b.u32(uint32_t(listenPort));
  b.str(blob);
  uint32_t status = 0;
  std::string msg, err;
  bool ok = writeFully(fd, b.bytes.data(), b.bytes.size(), until, err) &&
            readU32(fd, status, until, err) &&
            readStr(fd, msg, 4096, "message", until, err);
  if (ok && status != 0) {
    error = "rank 0 at " + o.host + ":" + std::to_string(o.port) +
            " rejected this rank: " + msg;
    close(fd);
    return -1;
  }
  for (int32_t r = 0; ok && r < o.worldSize; ++r) {
    Joined &j = table[size_t(r)];
    uint32_t port = 0;
    ok = readStr(fd, j.ip, kMaxAddress, "address", until, err) &&
         readU32(fd, port, until, err) &&
         readStr(fd, j.blob, kMaxRendezvousBlob, "blob", until, err);
    j.port = int32_t(port);
  }
  if (!ok) {
    error = "rendezvous with rank 0 at " + o.host + ":" +
            std::to_string(o.port) + " failed: " + err;
    close(fd);
    return -1;
  }
  return fd;
}

/// Accepts the links of ranks above `o.rank` on `listener`.
bool acceptLinks(int listener, const RendezvousOptions &o,
                 std::vector<int> &sockets, Clock::time_point until,
                 std::string &error) {
  int32_t missing = o.worldSize - 1 - o.rank;
  while (missing > 0) {
    std::string err;
    int fd = acceptBefore(listener, until, err);
    if (fd < 0) {
      error = err.empty() ? "timed out waiting for the links of the ranks "
                            "above " +
                                std::to_string(o.rank)
                          : err;
      return false;
    }
    const auto helloUntil = std::min(
        until, Clock::now() + std::chrono::seconds(int(kHelloSeconds)));
    uint32_t magic = 0;
    std::string key;
    int32_t rank = -1;
    bool ok = readU32(fd, magic, helloUntil, err) && magic == kLinkMagic &&
              readStr(fd, key, kMaxRendezvousKey, "key", helloUntil, err) &&
              readFully(fd, &rank, 4, helloUntil, err) && key == o.key &&
              rank > o.rank && rank < o.worldSize && sockets[size_t(rank)] < 0;
    if (!ok) {
      close(fd);
      continue;
    }
    sockets[size_t(rank)] = fd;
    --missing;
  }
  return true;
}

} // namespace

bool tessel::readFully(int fd, void *buf, size_t n, Clock::time_point until,
                       std::string &error) {
  auto *p = static_cast<uint8_t *>(buf);
  while (n > 0) {
    ssize_t got = recv(fd, p, n, 0);
    if (got > 0) {
      p += got;
      n -= size_t(got);
      continue;
    }
    if (got == 0) {
      error = "connection closed by the peer";
      return false;
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      error = sysError("recv");
      return false;
    }
    if (Clock::now() >= until) {
      error = "timed out";
      return false;
    }
    pollfd pfd{fd, POLLIN, 0};
    poll(&pfd, 1, msUntil(until));
  }
  return true;
}

bool tessel::writeFully(int fd, const void *buf, size_t n,
                        Clock::time_point until, std::string &error) {
  auto *p = static_cast<const uint8_t *>(buf);
  while (n > 0) {
    ssize_t put = send(fd, p, n, MSG_NOSIGNAL);
    if (put > 0) {
      p += put;
      n -= size_t(put);
      continue;
    }
    if (put < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      error = sysError("send");
      return false;
    }
    if (Clock::now() >= until) {
      error = "timed out";
      return false;
    }
    pollfd pfd{fd, POLLOUT, 0};
    poll(&pfd, 1, msUntil(until));
  }
  return true;
}

void tessel::closeSockets(std::vector<int> &sockets) {
  for (int &fd : sockets)
    if (fd >= 0) {
      close(fd);
      fd = -1;
    }
}

bool tessel::rendezvous(const RendezvousOptions &o, const std::string &blob,
                        RendezvousResult &result, std::string &error) {
  const std::string prefix = "rendezvous (rank " + std::to_string(o.rank) +
                             " of " + std::to_string(o.worldSize) + "): ";
  if (o.worldSize < 1 || o.rank < 0 || o.rank >= o.worldSize) {
    error = prefix + "rank out of range";
    return false;
  }
  if (o.port < 1 || o.port > 65535) {
    error = prefix + "port " + std::to_string(o.port) + " is not in [1, 65535]";
    return false;
  }
  if (o.key.size() > kMaxRendezvousKey || blob.size() > kMaxRendezvousBlob) {
    error = prefix + "key or blob too long";
    return false;
  }
  if (!(o.timeoutSeconds > 0)) {
    error = prefix + "the timeout must be positive";
    return false;
  }
  const auto until =
      Clock::now() +
      std::chrono::duration_cast<Clock::duration>(
          std::chrono::duration<double>(std::min(o.timeoutSeconds, 3.15e7)));
  result.sockets.assign(size_t(o.worldSize), -1);
  result.blobs.assign(size_t(o.worldSize), std::string());
  if (o.worldSize == 1) {
    result.blobs[0] = blob;
    return true;
  }
  std::vector<Joined> table(size_t(o.worldSize));
  std::string err;
  auto fail = [&](const std::string &why) {
    error = prefix + why;
    closeSockets(result.sockets);
    for (Joined &j : table)
      if (j.fd >= 0)
        close(j.fd);
    return false;
  };

  if (o.rank == 0) {
    int listener = listenOn(o.port, err);
    if (listener < 0)
      return fail(err);
    bool ok = gatherJoins(listener, o, table, until, err);
    close(listener);
    if (!ok) {
      for (Joined &j : table)
        if (j.fd >= 0)
          sendVerdict(j.fd, 1, "rank 0 gave up: " + err, until);
      return fail(err);
    }
    table[0].blob = blob;
    Buffer b;
    b.u32(0);
    b.str("");
    for (const Joined &j : table) {
      b.str(j.ip);
      b.u32(uint32_t(j.port));
      b.str(j.blob);
    }
    for (int32_t r = 1; r < o.worldSize; ++r) {
      Joined &j = table[size_t(r)];
      if (!writeFully(j.fd, b.bytes.data(), b.bytes.size(), until, err))
        return fail("sending the table to rank " + std::to_string(r) + ": " +
                    err);
      result.sockets[size_t(r)] = j.fd;
      j.fd = -1;
    }
    for (int32_t r = 0; r < o.worldSize; ++r)
      result.blobs[size_t(r)] = std::move(table[size_t(r)].blob);
    return true;
  }

  // Rank i > 0: a listener for the ranks above, then join, then the links.
  int listener = -1;
  if (o.rank + 1 < o.worldSize) {
    listener = listenOn(0, err);
    if (listener < 0)
      return fail(err);
  }
  int zero = joinRankZero(o, listener < 0 ? 0 : portOf(listener), blob, table,
                          until, err);
  if (zero < 0) {
    if (listener >= 0)
      close(listener);
    return fail(err);
  }
  result.sockets[0] = zero;
  for (int32_t r = 1; r < o.rank; ++r) {
    const Joined &j = table[size_t(r)];
    int fd = connectWithRetries(j.ip, j.port, until, err, /*retry=*/false);
    Buffer b;
    b.u32(kLinkMagic);
    b.str(o.key);
    b.i32(o.rank);
    if (fd < 0 || !writeFully(fd, b.bytes.data(), b.bytes.size(), until, err)) {
      if (fd >= 0)
        close(fd);
      if (listener >= 0)
        close(listener);
      return fail("linking to rank " + std::to_string(r) + ": " + err);
    }
    result.sockets[size_t(r)] = fd;
  }
  if (listener >= 0) {
    bool ok = acceptLinks(listener, o, result.sockets, until, err);
    close(listener);
    if (!ok)
      return fail(err);
  }
  for (int32_t r = 0; r < o.worldSize; ++r)
    result.blobs[size_t(r)] = std::move(table[size_t(r)].blob);
  return true;
}
