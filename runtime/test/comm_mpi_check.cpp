//===- comm_mpi_check.cpp - The MPI backend against reference collectives -===//
//
// Run as 4 MPI processes (mpirun -np 4): a 2x2 mesh, every collective on
// every mask against the same plain-loop references as the local backend's
// tests (CommReference.h), bit for bit, plus the counters; the same
// through the started forms (tessel_*_start, run on the context's comm
// worker while the caller goes on), which also match the blocking calls'
// bits with several in flight; then
// point-to-point messages between every pair of ranks: several in flight,
// received out of tag order, tags past MPI_TAG_UB that fold onto one MPI
// tag, a 4 MiB payload, a size mismatch, a receive's timeout and the
// per-peer counters; then collective timeouts that name the member that did
// not arrive (asleep outside tessel, or waiting in another collective).
// Each process exits non-zero if any of its checks failed; rank 0 prints OK
// when the whole world passed.
//
//===----------------------------------------------------------------------===//

#include "CommReference.h"

#include <chrono>
#include <cstdio>
#include <thread>

using namespace tt;

namespace {

int checkCounters(tessel_ctx *ctx, int rank) {
  int failed = 0;
  auto expect = [&](bool ok, const char *what) {
    if (!ok) {
      std::fprintf(stderr, "rank %d: counters: %s\n", rank, what);
      ++failed;
    }
  };
  tessel_reset_counters(ctx);
  tt::issueOneOfEachCollective(ctx);
  expect(tessel_error(ctx) == nullptr, "a call failed");
  expect(tessel_comm_bytes(ctx, TESSEL_COLL_ALL_REDUCE, 1) == 40 &&
             tessel_comm_calls(ctx, TESSEL_COLL_ALL_REDUCE, 1) == 1,
         "all_reduce mask 1");
  expect(tessel_comm_bytes(ctx, TESSEL_COLL_ALL_REDUCE, 3) == 14 &&
             tessel_comm_calls(ctx, TESSEL_COLL_ALL_REDUCE, 3) == 1,
         "all_reduce mask 3");
  expect(tessel_comm_calls(ctx, TESSEL_COLL_ALL_REDUCE, 0) == 0,
         "all_reduce on a group of one");
  expect(tessel_comm_bytes(ctx, TESSEL_COLL_ALL_GATHER, 2) == 48 &&
             tessel_comm_calls(ctx, TESSEL_COLL_ALL_GATHER, 2) == 1,
         "all_gather mask 2");
  expect(tessel_comm_bytes(ctx, TESSEL_COLL_REDUCE_SCATTER, 3) == 192 &&
             tessel_comm_calls(ctx, TESSEL_COLL_REDUCE_SCATTER, 3) == 1,
         "reduce_scatter mask 3");
  expect(tessel_comm_bytes(ctx, TESSEL_COLL_ALL_TO_ALL, 1) == 48 &&
             tessel_comm_calls(ctx, TESSEL_COLL_ALL_TO_ALL, 1) == 1,
         "all_to_all mask 1");
  tessel_reset_counters(ctx);
  expect(tessel_comm_calls(ctx, TESSEL_COLL_ALL_REDUCE, 1) == 0, "reset");
  return failed;
}

/// The started collectives: the reference battery through the *_start
/// forms, several started back to back on every group against the blocking
/// calls' bits, and their counters.
int checkStarted(tessel_ctx *ctx, const Mesh &mesh, int rank) {
  CommChecker checker(ctx, mesh, rank, [](const std::string &msg) {
    std::fprintf(stderr, "%s\n", msg.c_str());
  });
  checker.useStart(true);
  checker.allReduces({TESSEL_F32, TESSEL_BF16, TESSEL_I32}, /*large=*/true);
  checker.allGathers({TESSEL_F32});
  checker.reduceScatters({TESSEL_F64});
  checker.allToAlls({TESSEL_BF16});
  int failed = checker.failures();
  auto expect = [&](bool ok, const char *what) {
    if (!ok) {
      const char *err = tessel_error(ctx);
      std::fprintf(stderr, "rank %d: started: %s%s%s\n", rank, what,
                   err ? ": " : "", err ? err : "");
      ++failed;
    }
  };
  // One all_reduce per mask (chunked), all in flight at once.
  const int64_t n = 30001;
  std::vector<float> in(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    in[size_t(i)] = float(commValue(TESSEL_F32, 9, rank, i));
  std::vector<std::vector<float>> blocking(4, std::vector<float>(in.size())),
      started(4, std::vector<float>(in.size(), -1.0f));
  for (uint32_t mask = 1; mask < 4; ++mask)
    tessel_all_reduce(ctx, mask, TESSEL_F32, in.data(), blocking[mask].data(),
                      n, TESSEL_REDUCE_SUM);
  for (uint32_t mask = 1; mask < 4; ++mask)
    tessel_all_reduce_start(ctx, mask, TESSEL_F32, in.data(),
                            started[mask].data(), n, TESSEL_REDUCE_SUM);
  tessel_comm_wait_all(ctx);
  for (uint32_t mask = 1; mask < 4; ++mask)
    expect(tessel_error(ctx) == nullptr && started[mask] == blocking[mask],
           "started all_reduce == blocking");
  tessel_reset_counters(ctx);
  tt::issueOneOfEachCollective(ctx, /*started=*/true);
  expect(tessel_comm_bytes(ctx, TESSEL_COLL_ALL_REDUCE, 1) == 40 &&
             tessel_comm_async_bytes(ctx, TESSEL_COLL_ALL_REDUCE, 1) == 40,
         "async bytes of all_reduce mask 1");
  expect(tessel_comm_async_bytes(ctx, TESSEL_COLL_REDUCE_SCATTER, 3) == 192 &&
             tessel_comm_calls(ctx, TESSEL_COLL_REDUCE_SCATTER, 3) == 1,
         "async bytes of reduce_scatter mask 3");
  expect(tessel_comm_async_bytes(ctx, TESSEL_COLL_ALL_REDUCE, 0) == 0,
         "a group of one counts nothing");
  tessel_reset_counters(ctx);
  expect(tessel_comm_async_bytes(ctx, TESSEL_COLL_ALL_REDUCE, 1) == 0, "reset");
  return failed;
}

/// Send/recv between every pair of the world's ranks.
int checkP2p(tessel_ctx *ctx, int rank, int size) {
  int failed = 0;
  auto expect = [&](bool ok, const std::string &what) {
    if (!ok) {
      const char *err = tessel_error(ctx);
      std::fprintf(stderr, "rank %d: p2p: %s%s%s\n", rank, what.c_str(),
                   err ? ": " : "", err ? err : "");
      ++failed;
    }
  };
  auto sendPayload = [&](int peer, int64_t tag, int64_t bytes) {
    std::vector<uint8_t> data = p2pPayload(rank, peer, tag, bytes);
    tessel_send(ctx, peer, tag, data.data(), bytes);
    expect(tessel_error(ctx) == nullptr, "send to " + std::to_string(peer));
  };
  auto expectPayload = [&](int peer, int64_t tag, int64_t bytes) {
    std::vector<uint8_t> got(static_cast<size_t>(bytes), 0xee);
    tessel_recv(ctx, peer, tag, got.data(), bytes);
    expect(tessel_error(ctx) == nullptr &&
               got == p2pPayload(peer, rank, tag, bytes),
           "message from " + std::to_string(peer) + " tag " +
               std::to_string(tag));
  };
  tessel_reset_counters(ctx);
  // Tags that fold onto one MPI tag when MPI_TAG_UB + 1 is a power of two
  // (Open MPI, MPICH): the receive that wants the second sets the first
  // aside.
  const int64_t folded = int64_t(1) << 62;
  // Every message to a peer is sent before any is received; each peer takes
  // them in another order than sent.
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank)
      continue;
    for (int64_t tag : {int64_t(1), int64_t(2), int64_t(3)})
      sendPayload(peer, 10 * tag + rank, 100 * tag + peer);
    sendPayload(peer, folded + 5, 7);
    sendPayload(peer, 5, 9);
    sendPayload(peer, -4, 0);
  }
  for (int peer = size - 1; peer >= 0; --peer) {
    if (peer == rank)
      continue;
    for (int64_t tag : {int64_t(3), int64_t(1), int64_t(2)})
      expectPayload(peer, 10 * tag + peer, 100 * tag + rank);
    expectPayload(peer, 5, 9);
    expectPayload(peer, -4, 0);
    expectPayload(peer, folded + 5, 7);
  }
  // Around a ring, 4 MiB: more than MPI sends eagerly.
  const int64_t big = 4 << 20;
  sendPayload((rank + 1) % size, 77, big);
  expectPayload((rank + size - 1) % size, 77, big);
  // 100·tag + receiver bytes for tags 1..3, then 7, 9 and 0.
  auto pairBytes = [](int to) { return int64_t(600 + 3 * to + 7 + 9); };
  for (int peer = 0; peer < size; ++peer) {
    const int64_t ring = peer == (rank + 1) % size ? big : 0;
    const int64_t ringIn = peer == (rank + size - 1) % size ? big : 0;
    const int64_t calls = peer == rank ? 0 : 6;
    expect(tessel_p2p_bytes(ctx, peer, TESSEL_P2P_SENT) ==
               (peer == rank ? 0 : pairBytes(peer)) + ring,
           "bytes sent to " + std::to_string(peer));
    expect(tessel_p2p_calls(ctx, peer, TESSEL_P2P_SENT) ==
               calls + (ring ? 1 : 0),
           "calls sent to " + std::to_string(peer));
    expect(tessel_p2p_bytes(ctx, peer, TESSEL_P2P_RECEIVED) ==
               (peer == rank ? 0 : pairBytes(rank)) + ringIn,
           "bytes received from " + std::to_string(peer));
    expect(tessel_p2p_calls(ctx, peer, TESSEL_P2P_RECEIVED) ==
               calls + (ringIn ? 1 : 0),
           "calls received from " + std::to_string(peer));
  }
  // A receive of another size than sent: the error names both, and the
  // message is consumed (the pair stays in step for the next one).
  if (rank == 0) {
    std::vector<uint8_t> buf(16);
    tessel_send(ctx, 1, 99, buf.data(), 16);
    sendPayload(1, 100, 8);
  } else if (rank == 1) {
    std::vector<uint8_t> buf(32);
    tessel_set_microbatch(ctx, 4);
    tessel_recv(ctx, 0, 99, buf.data(), 32);
    const char *err = tessel_error(ctx);
    const std::string want = "tessel_recv: the message from rank 0 (tag 99, "
                             "microbatch 4) has 16 bytes, the receive expects "
                             "32";
    if (!err || err != want) {
      std::fprintf(stderr, "rank 1: p2p: size mismatch: got '%s'\n",
                   err ? err : "(no error)");
      ++failed;
    }
    tessel_clear_error(ctx);
    tessel_set_microbatch(ctx, 0);
    expectPayload(0, 100, 8);
  }
  return failed;
}

/// A receive nobody sends to fails after a context's (short) timeout,
/// naming the peer, the tag and the microbatch. Every rank creates the
/// second context (creation is collective); rank 1 waits on rank 0.
int checkRecvTimeout(tessel_ctx_options options, int rank) {
  options.comm_timeout_seconds = 0.2;
  tessel_ctx *ctx = tessel_ctx_create(&options);
  if (!ctx) {
    std::fprintf(stderr, "rank %d: p2p timeout: %s\n", rank,
                 tessel_error(nullptr));
    return 1;
  }
  int failed = 0;
  if (rank == 1) {
    float x = 0;
    tessel_set_microbatch(ctx, 6);
    tessel_recv(ctx, 0, 4242, &x, 4);
    const char *err = tessel_error(ctx);
    const std::string want =
        "tessel_recv: receive from rank 0 (tag 4242, microbatch 6) timed out "
        "after 0.2 s: rank 0 has not sent it (stopped, hung or behind); "
        "rank 0 does not respond (stopped, hung or outside a tessel call)";
    if (!err || err != want) {
      std::fprintf(stderr, "rank 1: p2p timeout: got '%s'\n",
                   err ? err : "(no error)");
      ++failed;
    }
  }
  tessel_ctx_destroy(ctx);
  return failed;
}

void sleepSeconds(double seconds) {
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
}

/// A collective that times out names the member that did not arrive, from
/// its answer to a status probe or its silence. Rank 0 waits in all_gather
/// on mask 2 (ranks 0 and 1) on a context with a 2 s timeout: first while
/// rank 1 sleeps outside tessel (it does not respond), then while rank 1
/// waits in an all_reduce on mask 1 (ranks 1 and 3) for rank 3, which joins
/// after rank 0's timeout. Rank 1 then joins each all_gather late, so that
/// no collective is left pending; `world` (every rank, mask 3) keeps the
/// ranks in step.
int checkCollectiveTimeout(tessel_ctx *world, tessel_ctx_options options,
                           int rank) {
  const double timeout = 2;
  options.comm_timeout_seconds = timeout;
  tessel_ctx *ctx = tessel_ctx_create(&options);
  if (!ctx) {
    std::fprintf(stderr, "rank %d: collective timeout: %s\n", rank,
                 tessel_error(nullptr));
    return 1;
  }
  int failed = 0;
  auto expect = [&](bool ok, const std::string &what) {
    if (!ok) {
      const char *err = tessel_error(ctx);
      std::fprintf(stderr, "rank %d: collective timeout: %s: got '%s'\n",
                   rank, what.c_str(), err ? err : "(no error)");
      ++failed;
    }
  };
  auto barrier = [&] {
    int32_t one = 1;
    tessel_all_reduce(world, 3, TESSEL_I32, &one, &one, 1, TESSEL_REDUCE_SUM);
  };
  float in[2] = {1, 2}, out[4] = {};
  const int64_t shape[] = {2};
  auto allGather = [&] {
    tessel_all_gather(ctx, 2, TESSEL_F32, in, out, 1, shape, 0);
  };
  const std::string timedOut =
      "tessel_all_gather: timed out after 2 s in MPI_Iallgather on the group "
      "of axes mask 0x2 of 2 ranks (a member has not joined: stopped, hung or "
      "in another operation): ";

  // Tests that a member asleep outside tessel does not respond.
  barrier();
  if (rank == 0) {
    allGather();
    const char *err = tessel_error(ctx);
    expect(err && err == timedOut + "rank 1 does not respond (stopped, hung "
                                    "or outside a tessel call) (this rank is "
                                    "in tessel_all_gather #1)",
           "asleep");
    tessel_clear_error(ctx);
  } else if (rank == 1) {
    // Past rank 0's timeout and its grace period (a quarter of it).
    sleepSeconds(timeout * 1.5);
    allGather();
    expect(tessel_error(ctx) == nullptr, "late all_gather #1");
  }

  // Tests that a member waiting in another collective says which, and
  // where it stands on the group.
  barrier();
  if (rank == 0) {
    allGather();
    const char *err = tessel_error(ctx);
    expect(err && err == timedOut +
                             "rank 1 is in tessel_all_reduce #1 on axes mask "
                             "0x1, behind (at collective #1 on this group) "
                             "(this rank is in tessel_all_gather #2)",
           "in another collective");
    tessel_clear_error(ctx);
  } else if (rank == 1 || rank == 3) {
    // Rank 1 waits from 0.5 to 1.25 timeouts, across rank 0's timeout.
    sleepSeconds(timeout * (rank == 1 ? 0.5 : 1.25));
    int32_t x = rank;
    tessel_all_reduce(ctx, 1, TESSEL_I32, &x, &x, 1, TESSEL_REDUCE_SUM);
    expect(tessel_error(ctx) == nullptr && x == 4, "all_reduce on mask 1");
    if (rank == 1) {
      allGather();
      expect(tessel_error(ctx) == nullptr, "late all_gather #2");
    }
  }
  // Every collective of ctx has completed before anyone frees it.
  barrier();
  tessel_ctx_destroy(ctx);
  return failed;
}

} // namespace

int main() {
  int32_t rank = -1, size = 0;
  if (tessel_mpi_init(&rank, &size) != 0) {
    std::fprintf(stderr, "comm_mpi_check: %s\n", tessel_error(nullptr));
    return 1;
  }
  const Mesh mesh{2, 2};
  if (size != 4) {
    std::fprintf(stderr, "comm_mpi_check: run with 4 processes, not %d\n",
                 size);
    tessel_mpi_abort(2);
  }
  tessel_ctx_options options{};
  options.backend = TESSEL_BACKEND_CPU;
  options.rank = rank;
  options.world_size = size;
  options.comm = TESSEL_COMM_MPI;
  options.mesh_rank = 2;
  options.mesh_shape[0] = mesh[0];
  options.mesh_shape[1] = mesh[1];
  options.comm_timeout_seconds = 120;
  tessel_ctx *ctx = tessel_ctx_create(&options);
  if (!ctx) {
    std::fprintf(stderr, "rank %d: %s\n", rank, tessel_error(nullptr));
    tessel_mpi_abort(1);
  }

  CommChecker checker(ctx, mesh, rank, [](const std::string &msg) {
    std::fprintf(stderr, "%s\n", msg.c_str());
  });
  const std::vector<int32_t> dtypes = {TESSEL_F32, TESSEL_BF16, TESSEL_F64,
                                       TESSEL_I32};
  checker.allReduces(dtypes, /*large=*/true);
  checker.allGathers(dtypes);
  checker.reduceScatters(dtypes);
  checker.allToAlls(dtypes);
  checker.allSlices(dtypes);
  int failed = checker.failures() + checkCounters(ctx, rank) +
               checkStarted(ctx, mesh, rank) + checkP2p(ctx, rank, size) +
               checkRecvTimeout(options, rank) +
               checkCollectiveTimeout(ctx, options, rank);

  // The world's verdict, through the collective under test (a broken
  // all_reduce has already failed the checks above on its own ranks).
  int32_t total = failed;
  tessel_all_reduce(ctx, 3, TESSEL_I32, &total, &total, 1, TESSEL_REDUCE_SUM);
  if (tessel_error(ctx)) {
    std::fprintf(stderr, "rank %d: %s\n", rank, tessel_error(ctx));
    ++failed;
  }
  if (rank == 0 && failed == 0 && total == 0)
    std::printf("OK\n");
  else if (rank == 0)
    std::printf("FAILED (%d checks over the world)\n", int(total));
  tessel_ctx_destroy(ctx);
  tessel_mpi_finalize();
  return failed == 0 && total == 0 ? 0 : 1;
}
