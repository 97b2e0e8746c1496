//===- tessel-bench-comm-tcp.cpp - all_reduce over TCP against threads ----===//
//
// tessel_all_reduce (f32, sum, out of place) of --mib MiB (default 4) on
// --ranks ranks (default 2), first on a local world (ranks as threads,
// shared memory), then on a TCP world over loopback (the ranks are threads
// of this process too, but every byte crosses the kernel's TCP stack, as
// between torchrun's processes). Prints the median of --iters timed calls
// (after 3 warm-up calls) of each and their ratio.
//
//===----------------------------------------------------------------------===//

#include "tessel/runtime.h"

#include "runtime/test/LoopbackPort.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

/// Median seconds per all_reduce of `count` floats on every rank of a
/// world of `ranks` (rank 0's timings); negative on an error.
double medianAllReduce(int32_t comm, int ranks, int64_t count, int iters) {
  tessel_local_world *world =
      comm == TESSEL_COMM_LOCAL ? tessel_local_world_create(ranks) : nullptr;
  const int port = tessel::test::freeLoopbackPort();
  std::vector<double> times;
  std::vector<std::string> errors(static_cast<size_t>(ranks));
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] {
      tessel_ctx_options o{};
      o.rank = r;
      o.world_size = ranks;
      o.comm = comm;
      o.local_world = world;
      o.comm_timeout_seconds = 120;
      o.rendezvous_host = "127.0.0.1";
      o.rendezvous_port = port;
      o.rendezvous_key = "bench";
      tessel_ctx *ctx = tessel_ctx_create(&o);
      if (!ctx) {
        errors[size_t(r)] = tessel_error(nullptr);
        return;
      }
      std::vector<float> in(static_cast<size_t>(count), 1.0f + float(r)),
          out(static_cast<size_t>(count));
      for (int i = 0; i < 3 + iters; ++i) {
        auto start = std::chrono::steady_clock::now();
        tessel_all_reduce(ctx, 1, TESSEL_F32, in.data(), out.data(), count,
                          TESSEL_REDUCE_SUM);
        double s = std::chrono::duration<double>(
                       std::chrono::steady_clock::now() - start)
                       .count();
        if (r == 0 && i >= 3)
          times.push_back(s);
      }
      if (const char *err = tessel_error(ctx))
        errors[size_t(r)] = err;
      tessel_ctx_destroy(ctx);
    });
  for (std::thread &t : threads)
    t.join();
  if (world)
    tessel_local_world_destroy(world);
  for (const std::string &e : errors)
    if (!e.empty()) {
      std::fprintf(stderr, "tessel-bench-comm-tcp: %s\n", e.c_str());
      return -1;
    }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

} // namespace

int main(int argc, char **argv) {
  int ranks = 2, iters = 50;
  double mib = 4;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--ranks")
      ranks = std::atoi(argv[i + 1]);
    else if (flag == "--mib")
      mib = std::atof(argv[i + 1]);
    else if (flag == "--iters")
      iters = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: tessel-bench-comm-tcp [--ranks N] "
                           "[--mib MiB] [--iters N]\n");
      return 2;
    }
  }
  if (ranks < 2 || ranks > 64 || iters < 1 || !(mib > 0) || mib > 4096) {
    std::fprintf(stderr, "tessel-bench-comm-tcp: --ranks in [2, 64], --iters "
                         ">= 1, --mib in (0, 4096]\n");
    return 2;
  }
  const int64_t count = int64_t(mib * 1024 * 1024 / 4);
  const double threads =
      medianAllReduce(TESSEL_COMM_LOCAL, ranks, count, iters);
  const double tcp = medianAllReduce(TESSEL_COMM_TCP, ranks, count, iters);
  if (threads < 0 || tcp < 0)
    return 1;
  std::printf("all_reduce f32 %.3g MiB, %d ranks, median of %d: threads "
              "%.3f ms, tcp %.3f ms, tcp/threads %.2f\n",
              mib, ranks, iters, threads * 1e3, tcp * 1e3, tcp / threads);
  return 0;
}
