//===- TcpWorld.h - Ranks as threads joined over TCP ------------*- C++ -*-===//
//
// The TCP counterpart of LocalWorld.h: every rank is a thread of the test
// with a TESSEL_COMM_TCP context on a free loopback port, so the TCP
// communicator runs the same batteries as the thread communicator.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_RUNTIME_TEST_TCPWORLD_H
#define TESSEL_RUNTIME_TEST_TCPWORLD_H

#include "LocalWorld.h"
#include "LoopbackPort.h"

#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace tt {

inline tessel_ctx_options tcpOptions(const Mesh &mesh, int rank, int port,
                                     const char *key, double timeout) {
  tessel_ctx_options options =
      rankOptions(mesh, rank, TESSEL_COMM_TCP, timeout);
  options.rendezvous_host = "127.0.0.1";
  options.rendezvous_port = port;
  options.rendezvous_key = key;
  return options;
}

using TcpRankBody = std::function<void(tessel_ctx *, int rank)>;

/// Runs `body` on every rank of a TCP world; per rank, the error of the
/// context's creation or the one its context holds at the end ("" if none).
inline std::vector<std::string>
runTcpRanks(const Mesh &mesh, const TcpRankBody &body, double timeout = 30) {
  const int world = int(meshRanks(mesh));
  const int port = tessel::test::freeLoopbackPort();
  std::vector<std::string> errors(static_cast<size_t>(world));
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      tessel_ctx_options options = tcpOptions(mesh, r, port, "test", timeout);
      tessel_ctx *ctx = tessel_ctx_create(&options);
      if (!ctx) {
        errors[size_t(r)] = std::string("create: ") + tessel_error(nullptr);
        return;
      }
      body(ctx, r);
      if (const char *err = tessel_error(ctx))
        errors[size_t(r)] = err;
      tessel_ctx_destroy(ctx);
    });
  for (std::thread &t : threads)
    t.join();
  return errors;
}

} // namespace tt

#endif // TESSEL_RUNTIME_TEST_TCPWORLD_H
