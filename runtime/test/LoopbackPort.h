//===- LoopbackPort.h - Loopback TCP ports for tests and benches -*- C++ -*-===//
//
// The TCP communicator's tests, the torchrun tests and the TCP bench all
// need a loopback port for a rendezvous: one nothing listens on (the
// kernel's pick for port 0), or one held listening, as torchrun's store
// holds MASTER_PORT.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_RUNTIME_TEST_LOOPBACKPORT_H
#define TESSEL_RUNTIME_TEST_LOOPBACKPORT_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace tessel::test {

/// A socket bound to a loopback port of the kernel's choosing, listening
/// if `listening`; returns the port and leaves the socket in `fd` (-1 and
/// the socket closed on a failure).
inline int bindLoopbackPort(int &fd, bool listening) {
  fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (fd >= 0 &&
      bind(fd, reinterpret_cast<sockaddr *>(&addr), sizeof(addr)) == 0 &&
      (!listening || listen(fd, 4) == 0) &&
      getsockname(fd, reinterpret_cast<sockaddr *>(&addr), &len) == 0)
    return ntohs(addr.sin_port);
  if (fd >= 0)
    close(fd);
  fd = -1;
  return -1;
}

/// A loopback port that was free a moment ago; -1 if the kernel gave none.
inline int freeLoopbackPort() {
  int fd = -1;
  const int port = bindLoopbackPort(fd, /*listening=*/false);
  if (fd >= 0)
    close(fd);
  return port;
}

/// A loopback port held listening by `fd` until the caller closes it.
inline int listeningLoopbackPort(int &fd) {
  return bindLoopbackPort(fd, /*listening=*/true);
}

} // namespace tessel::test

#endif // TESSEL_RUNTIME_TEST_LOOPBACKPORT_H
