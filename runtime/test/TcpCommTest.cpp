//===- TcpCommTest.cpp - The TCP communicator against the thread one ------===//

#include "LocalWorld.h"
#include "TcpWorld.h"
#include "TestUtil.h"

#include "core/rendezvous.h"

#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>

using namespace tt;

namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

bool contains(const std::string &text, const std::string &needle) {
  return text.find(needle) != std::string::npos;
}

/// The error creating a context with `options` gives ("" if none).
std::string createError(tessel_ctx_options options) {
  tessel_ctx *ctx = tessel_ctx_create(&options);
  std::string err = ctx ? "" : tessel_error(nullptr);
  tessel_ctx_destroy(ctx);
  return err;
}

CommChecker checkerFor(tessel_ctx *ctx, const Mesh &mesh, int rank) {
  return CommChecker(ctx, mesh, rank,
                     [](const std::string &msg) { ADD_FAILURE() << msg; });
}

class TcpMesh : public ::testing::TestWithParam<Mesh> {};

INSTANTIATE_TEST_SUITE_P(Meshes, TcpMesh,
                         ::testing::Values(Mesh{2}, Mesh{4}, Mesh{2, 2},
                                           Mesh{2, 3}),
                         [](const ::testing::TestParamInfo<Mesh> &info) {
                           return shapeText(info.param);
                         });

// The thread communicator's batteries, over sockets: every collective on
// every axes mask (sub-communicators), bit for bit the reduction in
// group-index order.
TEST_P(TcpMesh, EveryCollectiveMatchesTheOrderedReference) {
  const Mesh mesh = GetParam();
  expectNoErrors(runTcpRanks(mesh, [&](tessel_ctx *ctx, int rank) {
    CommChecker check = checkerFor(ctx, mesh, rank);
    check.allReduces({TESSEL_F32, TESSEL_BF16, TESSEL_F64, TESSEL_I64},
                     /*large=*/true);
    check.allGathers({TESSEL_F32, TESSEL_BF16});
    check.reduceScatters({TESSEL_F32, TESSEL_F16, TESSEL_I32});
    check.allToAlls({TESSEL_F32, TESSEL_F64});
    check.allSlices({TESSEL_F32});
  }));
}

// The started forms run on the comm worker thread over the same links.
TEST_P(TcpMesh, StartedCollectivesMatchTheOrderedReference) {
  const Mesh mesh = GetParam();
  expectNoErrors(runTcpRanks(mesh, [&](tessel_ctx *ctx, int rank) {
    CommChecker check = checkerFor(ctx, mesh, rank);
    check.useStart(true);
    check.allReduces({TESSEL_F32, TESSEL_BF16}, /*large=*/true);
    check.allGathers({TESSEL_F32});
    check.reduceScatters({TESSEL_F32});
  }));
}

/// Per rank, the outputs of a fixed sequence of collectives on f32 data
/// that is not exactly summable (so the order shows in the bits).
using Outputs = std::vector<std::vector<float>>;
Outputs runSequence(tessel_ctx *ctx, int rank) {
  const int64_t n = 300001;
  std::vector<float> in(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    in[size_t(i)] = float(1.0 / double(3 + i % 97 + rank * 7)) * 1e3f +
                    float(i % 13) * 1e-4f;
  Outputs outs;
  std::vector<float> out(static_cast<size_t>(n));
  for (int32_t kind : {TESSEL_REDUCE_SUM, TESSEL_REDUCE_MEAN}) {
    tessel_all_reduce(ctx, 1, TESSEL_F32, in.data(), out.data(), n, kind);
    outs.push_back(out);
  }
  const int64_t G = tessel_group_size(ctx, 1);
  const int64_t shape[2] = {G * 1000, 7};
  std::vector<float> rs(size_t(1000 * 7));
  tessel_reduce_scatter(ctx, 1, TESSEL_F32, in.data(), rs.data(), 2, shape, 0,
                        TESSEL_REDUCE_SUM);
  outs.push_back(rs);
  return outs;
}

// Bit-identical to the thread communicator on the same inputs, for several
// world sizes.
TEST(TcpComm, BitIdenticalToThreads) {
  for (int world : {2, 3, 5}) {
    std::vector<Outputs> local(static_cast<size_t>(world)),
        tcp(static_cast<size_t>(world));
    expectNoErrors(runRanks(
        Mesh{world}, [&](tessel_ctx *ctx, int rank, tessel_local_world *) {
          local[size_t(rank)] = runSequence(ctx, rank);
        }));
    expectNoErrors(runTcpRanks(Mesh{world}, [&](tessel_ctx *ctx, int rank) {
      tcp[size_t(rank)] = runSequence(ctx, rank);
    }));
    for (int r = 0; r < world; ++r) {
      ASSERT_EQ(local[size_t(r)].size(), tcp[size_t(r)].size());
      for (size_t k = 0; k < local[size_t(r)].size(); ++k)
        EXPECT_EQ(std::memcmp(local[size_t(r)][k].data(),
                              tcp[size_t(r)][k].data(),
                              local[size_t(r)][k].size() * sizeof(float)),
                  0)
            << "world " << world << " rank " << r << " output " << k;
    }
  }
}

// Pipeline traffic: activations forward, gradients back, 1 MiB each, with
// a collective between sends and receives (a message that arrives while
// its receiver is in a collective waits for it).
TEST(TcpComm, PointToPointInterleavedWithCollectives) {
  constexpr int world = 3;
  constexpr int64_t kBytes = 1 << 20;
  expectNoErrors(runTcpRanks(Mesh{world}, [&](tessel_ctx *ctx, int rank) {
    for (int64_t mb = 0; mb < 3; ++mb) {
      std::vector<uint8_t> got(static_cast<size_t>(kBytes));
      if (rank > 0) {
        tessel_recv(ctx, rank - 1, 2 * mb, got.data(), kBytes);
        EXPECT_EQ(got, p2pPayload(rank - 1, rank, 2 * mb, kBytes));
      }
      if (rank + 1 < world) {
        std::vector<uint8_t> data = p2pPayload(rank, rank + 1, 2 * mb, kBytes);
        tessel_send(ctx, rank + 1, 2 * mb, data.data(), kBytes);
      }
      float x = float(rank), sum = 0;
      tessel_all_reduce(ctx, 1, TESSEL_F32, &x, &sum, 1, TESSEL_REDUCE_SUM);
      EXPECT_EQ(sum, 3.0f);
    }
    // Out of tag order, and an empty message.
    if (rank == 0) {
      for (int64_t tag : {7, 8, 9}) {
        std::vector<uint8_t> data = p2pPayload(0, 1, tag, 100 + tag);
        tessel_send(ctx, 1, tag, data.data(), 100 + tag);
      }
      tessel_send(ctx, 1, -1, nullptr, 0);
    } else if (rank == 1) {
      tessel_recv(ctx, 0, -1, nullptr, 0);
      for (int64_t tag : {9, 7, 8}) {
        std::vector<uint8_t> got(static_cast<size_t>(100 + tag));
        tessel_recv(ctx, 0, tag, got.data(), 100 + tag);
        EXPECT_EQ(got, p2pPayload(0, 1, tag, 100 + tag));
      }
    }
  }));
}

//===--- Errors -----------------------------------------------------------===//

// A rank with the wrong key is rejected with the reason; rank 0 keeps
// waiting for the real one and times out naming it.
TEST(TcpErrors, WrongKeyIsRejected) {
  const int port = tessel::test::freeLoopbackPort();
  std::string errors[2];
  std::thread zero([&] {
    errors[0] = createError(tcpOptions(Mesh{2}, 0, port, "right", 1.5));
  });
  errors[1] = createError(tcpOptions(Mesh{2}, 1, port, "wrong", 1.5));
  zero.join();
  EXPECT_TRUE(contains(errors[1], "rejected this rank: wrong rendezvous key"))
      << errors[1];
  EXPECT_TRUE(contains(errors[0], "waiting for ranks 1 to join")) << errors[0];
}

// A raw stranger (no tessel protocol at all) does not disturb the
// rendezvous: it is dropped and the world still forms.
TEST(TcpErrors, StrangerIsDroppedAndTheWorldForms) {
  const int port = tessel::test::freeLoopbackPort();
  std::thread stranger([&] {
    std::string err;
    for (int attempt = 0; attempt < 100; ++attempt) {
      int fd = socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      addr.sin_port = htons(uint16_t(port));
      if (connect(fd, reinterpret_cast<sockaddr *>(&addr), sizeof(addr)) == 0) {
        const char junk[] = "GET / HTTP/1.1\r\n\r\n";
        ssize_t ignored = write(fd, junk, sizeof(junk));
        (void)ignored;
        close(fd);
        return;
      }
      close(fd);
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  });
  std::string errors[2];
  std::thread one([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    errors[1] = createError(tcpOptions(Mesh{2}, 1, port, "k", 20));
  });
  errors[0] = createError(tcpOptions(Mesh{2}, 0, port, "k", 20));
  one.join();
  stranger.join();
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
}

// Nobody listens: a rank gives up after its timeout, naming the address.
TEST(TcpErrors, NoRankZeroTimesOut) {
  const int port = tessel::test::freeLoopbackPort();
  tessel_ctx_options o = tcpOptions(Mesh{2}, 1, port, "k", 0.5);
  const auto start = Clock::now();
  tessel_ctx *ctx = tessel_ctx_create(&o);
  EXPECT_EQ(ctx, nullptr);
  const std::string err = tessel_error(nullptr);
  EXPECT_TRUE(
      contains(err, "could not connect to 127.0.0.1:" + std::to_string(port)))
      << err;
  EXPECT_LT(secondsSince(start), 5.0);
}

// A peer that goes away fails the ranks waiting for it at once, not after
// the timeout.
// (Rank 0 may name rank 1, which fails on rank 2 and leaves first.)
TEST(TcpErrors, PeerGoneFailsTheOthersQuickly) {
  const auto start = Clock::now();
  std::vector<std::string> errors = runTcpRanks(
      Mesh{3},
      [](tessel_ctx *ctx, int rank) {
        if (rank == 2)
          return; // destroys its context at once
        std::vector<float> in(1000, 1.0f), out(1000);
        tessel_all_reduce(ctx, 1, TESSEL_F32, in.data(), out.data(), 1000,
                          TESSEL_REDUCE_SUM);
      },
      /*timeout=*/60);
  EXPECT_LT(secondsSince(start), 20.0);
  EXPECT_EQ(errors[2], "");
  for (int r : {0, 1})
    EXPECT_TRUE(contains(errors[size_t(r)], "closed its connection"))
        << errors[size_t(r)];
}

// A peer that stays but never calls: the collective fails after the
// timeout naming it, and a receive names the peer and the tag.
TEST(TcpErrors, TimeoutsNameTheMissingRank) {
  std::vector<std::string> errors = runTcpRanks(
      Mesh{2},
      [](tessel_ctx *ctx, int rank) {
        if (rank == 1) {
          std::this_thread::sleep_for(std::chrono::milliseconds(1200));
          return;
        }
        std::vector<float> in(16, 1.0f), out(16);
        tessel_all_reduce(ctx, 1, TESSEL_F32, in.data(), out.data(), 16,
                          TESSEL_REDUCE_SUM);
      },
      /*timeout=*/0.3);
  EXPECT_TRUE(contains(errors[0], "tessel_all_reduce: timed out after 0.3 s"))
      << errors[0];
  EXPECT_TRUE(contains(errors[0], "waiting for rank(s) 1")) << errors[0];

  errors = runTcpRanks(
      Mesh{2},
      [](tessel_ctx *ctx, int rank) {
        if (rank == 1) {
          tessel_send(ctx, 0, 5, "x", 1);
          std::this_thread::sleep_for(std::chrono::milliseconds(1200));
          return;
        }
        char c = 0;
        tessel_recv(ctx, 1, 4, &c, 1);
      },
      /*timeout=*/0.3);
  EXPECT_TRUE(contains(errors[0], "tag 4")) << errors[0];
  EXPECT_TRUE(contains(errors[0], "tag(s) 5")) << errors[0];
}

// Members that disagree on a call fail instead of misreading.
TEST(TcpErrors, MismatchedCallsFail) {
  std::vector<std::string> errors =
      runTcpRanks(Mesh{2}, [](tessel_ctx *ctx, int rank) {
        std::vector<float> in(8, 1.0f), out(8);
        tessel_all_reduce(ctx, 1, TESSEL_F32, in.data(), out.data(),
                          rank == 0 ? 4 : 8, TESSEL_REDUCE_SUM);
      });
  for (const std::string &err : errors)
    EXPECT_TRUE(contains(err, "made different calls")) << err;
}

// A size mismatch on a receive names both sizes; the link stays usable.
TEST(TcpErrors, ReceiveSizeMismatch) {
  std::vector<std::string> errors =
      runTcpRanks(Mesh{2}, [](tessel_ctx *ctx, int rank) {
        char buf[8] = {};
        if (rank == 0)
          tessel_send(ctx, 1, 3, buf, 8);
        else
          tessel_recv(ctx, 0, 3, buf, 4);
      });
  EXPECT_EQ(errors[0], "");
  EXPECT_TRUE(contains(errors[1], "8")) << errors[1];
}

TEST(TcpErrors, BadPortIsRefused) {
  tessel_ctx_options o = tcpOptions(Mesh{2}, 0, 70000, "k", 1);
  EXPECT_EQ(tessel_ctx_create(&o), nullptr);
  EXPECT_TRUE(contains(tessel_error(nullptr), "rendezvous_port in [1, 65535]"))
      << tessel_error(nullptr);
}

// The rendezvous' all-gather of blobs (what carries the NCCL unique id).
TEST(TcpRendezvous, GathersEveryRanksBlob) {
  const int port = tessel::test::freeLoopbackPort();
  constexpr int world = 4;
  std::vector<tessel::RendezvousResult> results(world);
  std::vector<std::string> errors(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      tessel::RendezvousOptions o;
      o.port = port;
      o.key = "blob";
      o.rank = r;
      o.worldSize = world;
      o.timeoutSeconds = 20;
      tessel::rendezvous(o, std::string(size_t(r) * 1000, char('a' + r)),
                         results[size_t(r)], errors[size_t(r)]);
    });
  for (std::thread &t : threads)
    t.join();
  for (int r = 0; r < world; ++r) {
    EXPECT_EQ(errors[size_t(r)], "");
    ASSERT_EQ(results[size_t(r)].blobs.size(), size_t(world));
    for (int q = 0; q < world; ++q)
      EXPECT_EQ(results[size_t(r)].blobs[size_t(q)],
                std::string(size_t(q) * 1000, char('a' + q)));
    EXPECT_EQ(results[size_t(r)].sockets[size_t(r)], -1);
    tessel::closeSockets(results[size_t(r)].sockets);
  }
}

} // namespace
