//===- P2pTest.cpp - Point-to-point send/recv on the local backend --------===//

#include "CommReference.h"
#include "LocalWorld.h"
#include "TestUtil.h"

#include <chrono>
#include <thread>

using namespace tt;

namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

/// Sends p2pPayload(rank, peer, tag, bytes) to peer.
void sendPayload(tessel_ctx *ctx, int rank, int peer, int64_t tag,
                 int64_t bytes) {
  std::vector<uint8_t> data = p2pPayload(rank, peer, tag, bytes);
  tessel_send(ctx, peer, tag, data.data(), bytes);
}

/// Receives from peer and expects p2pPayload(peer, rank, tag, bytes).
void expectPayload(tessel_ctx *ctx, int rank, int peer, int64_t tag,
                   int64_t bytes) {
  std::vector<uint8_t> got(static_cast<size_t>(bytes), 0xee);
  tessel_recv(ctx, peer, tag, got.data(), bytes);
  EXPECT_EQ(got, p2pPayload(peer, rank, tag, bytes))
      << "rank " << rank << " from " << peer << " tag " << tag;
}

bool contains(const std::string &text, const std::string &needle) {
  return text.find(needle) != std::string::npos;
}

class P2pWorld : public ::testing::TestWithParam<int> {};

INSTANTIATE_TEST_SUITE_P(Ranks, P2pWorld, ::testing::Values(2, 4),
                         [](const ::testing::TestParamInfo<int> &info) {
                           return std::to_string(info.param) + "Ranks";
                         });

// Every rank sends every other rank one message (sizes and tags differ per
// pair, one of them empty), then receives one from each: all arrive intact.
TEST_P(P2pWorld, EveryPairExchanges) {
  const int world = GetParam();
  expectNoErrors(runRanks(Mesh{world}, [&](tessel_ctx *ctx, int rank,
                                           tessel_local_world *) {
    auto bytesOf = [](int from, int to) { return int64_t(from * 37 + to); };
    for (int peer = 0; peer < world; ++peer)
      if (peer != rank)
        sendPayload(ctx, rank, peer, 100 * rank + peer, bytesOf(rank, peer));
    for (int peer = world - 1; peer >= 0; --peer)
      if (peer != rank)
        expectPayload(ctx, rank, peer, 100 * peer + rank, bytesOf(peer, rank));
  }));
}

// A pipeline's pattern: activations go forward along the ranks, their
// gradients come back, over several microbatches, with a 1 MiB payload.
TEST_P(P2pWorld, PipelineForwardAndBackward) {
  const int world = GetParam();
  constexpr int64_t kBytes = 1 << 20;
  expectNoErrors(runRanks(
      Mesh{world}, [&](tessel_ctx *ctx, int rank, tessel_local_world *) {
        for (int64_t mb = 0; mb < 3; ++mb) {
          tessel_set_microbatch(ctx, uint64_t(mb));
          if (rank > 0)
            expectPayload(ctx, rank, rank - 1, 2 * mb, kBytes);
          if (rank + 1 < world)
            sendPayload(ctx, rank, rank + 1, 2 * mb, kBytes);
        }
        for (int64_t mb = 0; mb < 3; ++mb) {
          if (rank + 1 < world)
            expectPayload(ctx, rank, rank + 1, 2 * mb + 1, kBytes);
          if (rank > 0)
            sendPayload(ctx, rank, rank - 1, 2 * mb + 1, kBytes);
        }
      }));
}

// Several messages in flight before any receive, taken in another order
// than sent; two with one tag arrive in send order; large and negative
// tags and empty messages (null buffer) work.
TEST(P2pLocal, MessagesInFlightAreReceivedOutOfTagOrder) {
  const int64_t bigTag = int64_t(1) << 40;
  expectNoErrors(
      runRanks(Mesh{2}, [&](tessel_ctx *ctx, int rank, tessel_local_world *) {
        if (rank == 0) {
          sendPayload(ctx, 0, 1, 1, 10);
          sendPayload(ctx, 0, 1, 2, 20);
          sendPayload(ctx, 0, 1, 3, 30);
          sendPayload(ctx, 0, 1, bigTag, 5);
          sendPayload(ctx, 0, 1, -4, 6);
          tessel_send(ctx, 1, 9, nullptr, 0);
          std::vector<uint8_t> first(4, 1), second(4, 2);
          tessel_send(ctx, 1, 7, first.data(), 4);
          tessel_send(ctx, 1, 7, second.data(), 4);
          return;
        }
        std::vector<uint8_t> got(4);
        tessel_recv(ctx, 0, 7, got.data(), 4);
        EXPECT_EQ(got, std::vector<uint8_t>(4, 1));
        expectPayload(ctx, 1, 0, 3, 30);
        expectPayload(ctx, 1, 0, bigTag, 5);
        expectPayload(ctx, 1, 0, 1, 10);
        tessel_recv(ctx, 0, 9, nullptr, 0);
        expectPayload(ctx, 1, 0, -4, 6);
        expectPayload(ctx, 1, 0, 2, 20);
        tessel_recv(ctx, 0, 7, got.data(), 4);
        EXPECT_EQ(got, std::vector<uint8_t>(4, 2));
      }));
}

// The sender returns at once while the receiver is late, and the copy is
// taken at the send: the sender may overwrite its buffer straight away.
TEST(P2pLocal, SendDoesNotWaitForTheReceiver) {
  double sendSeconds = -1;
  expectNoErrors(
      runRanks(Mesh{2}, [&](tessel_ctx *ctx, int rank, tessel_local_world *) {
        if (rank == 0) {
          const auto start = Clock::now();
          std::vector<uint8_t> buf;
          for (int64_t tag = 0; tag < 3; ++tag) {
            buf = p2pPayload(0, 1, tag, 4096);
            tessel_send(ctx, 1, tag, buf.data(), 4096);
            std::fill(buf.begin(), buf.end(), 0);
          }
          sendSeconds = secondsSince(start);
          return;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        for (int64_t tag = 0; tag < 3; ++tag)
          expectPayload(ctx, 1, 0, tag, 4096);
      }));
  EXPECT_GE(sendSeconds, 0);
  EXPECT_LT(sendSeconds, 0.05);
}

// A message of another size than the receive's: an error naming both
// sizes, the peer and the tag; the sender is unaffected.
TEST(P2pLocal, SizeMismatchNamesBothSizes) {
  std::vector<std::string> errors =
      runRanks(Mesh{2}, [](tessel_ctx *ctx, int rank, tessel_local_world *) {
        std::vector<uint8_t> buf(32);
        if (rank == 0) {
          tessel_send(ctx, 1, 5, buf.data(), 16);
          return;
        }
        tessel_set_microbatch(ctx, 2);
        tessel_recv(ctx, 0, 5, buf.data(), 32);
        EXPECT_EQ(tessel_p2p_calls(ctx, 0, TESSEL_P2P_RECEIVED), 0);
      });
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "tessel_recv: the message from rank 0 (tag 5, "
                       "microbatch 2) has 16 bytes, the receive expects 32");
}

// A receive that waits past the timeout fails naming the peer, the tag,
// the microbatch and the tags the peer did send.
TEST(P2pLocal, RecvTimeoutNamesPeerTagAndMicrobatch) {
  const auto start = Clock::now();
  std::vector<std::string> errors = runRanks(
      Mesh{2},
      [](tessel_ctx *ctx, int rank, tessel_local_world *) {
        float x = 1;
        if (rank == 0) {
          tessel_send(ctx, 1, 8, &x, 4);
          return;
        }
        tessel_set_microbatch(ctx, 3);
        tessel_recv(ctx, 0, 7, &x, 4);
      },
      /*timeout=*/0.2);
  EXPECT_LT(secondsSince(start), 10.0);
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1],
            "tessel_recv: receive from rank 0 (tag 7, microbatch 3) timed out "
            "after 0.2 s: rank 0 has not sent it (stopped, hung or behind); 1 "
            "other message from it waits unreceived, tags {8}");
}

// A rank that fails aborts the world: its peer waiting in recv returns at
// once with its message, and a send after the abort fails alike.
TEST(P2pLocal, FailedRankStopsAPeerWaitingInRecv) {
  const auto start = Clock::now();
  std::vector<std::string> sendErrors(2);
  std::vector<std::string> errors = runRanks(
      Mesh{3},
      [&](tessel_ctx *ctx, int rank, tessel_local_world *world) {
        float x = 1;
        if (rank == 0) {
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
          tessel_local_world_abort(world, 0, "out of memory");
          return;
        }
        if (rank == 1) {
          tessel_recv(ctx, 0, 1, &x, 4);
          return;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        tessel_send(ctx, 1, 2, &x, 4);
      },
      /*timeout=*/60);
  EXPECT_LT(secondsSince(start), 10.0);
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "rank 0 failed: out of memory");
  EXPECT_EQ(errors[2], "rank 0 failed: out of memory");
}

// Payload bytes and calls per peer and direction, of successful calls
// only; tessel_reset_counters zeroes them.
TEST(P2pCounters, BytesAndCallsPerPeerAndDirection) {
  expectNoErrors(
      runRanks(Mesh{3}, [](tessel_ctx *ctx, int rank, tessel_local_world *) {
        std::vector<uint8_t> buf(64);
        if (rank == 0) {
          tessel_send(ctx, 1, 1, buf.data(), 8);
          tessel_send(ctx, 1, 2, buf.data(), 12);
          tessel_send(ctx, 2, 1, buf.data(), 4);
          tessel_send(ctx, 0, 1, buf.data(), 4); // To itself: fails.
          ASSERT_NE(tessel_error(ctx), nullptr);
          tessel_clear_error(ctx);
          tessel_recv(ctx, 2, 3, buf.data(), 16);
          EXPECT_EQ(tessel_p2p_bytes(ctx, 1, TESSEL_P2P_SENT), 20);
          EXPECT_EQ(tessel_p2p_calls(ctx, 1, TESSEL_P2P_SENT), 2);
          EXPECT_EQ(tessel_p2p_bytes(ctx, 2, TESSEL_P2P_SENT), 4);
          EXPECT_EQ(tessel_p2p_calls(ctx, 2, TESSEL_P2P_SENT), 1);
          EXPECT_EQ(tessel_p2p_calls(ctx, 0, TESSEL_P2P_SENT), 0);
          EXPECT_EQ(tessel_p2p_bytes(ctx, 2, TESSEL_P2P_RECEIVED), 16);
          EXPECT_EQ(tessel_p2p_calls(ctx, 2, TESSEL_P2P_RECEIVED), 1);
          EXPECT_EQ(tessel_p2p_calls(ctx, 1, TESSEL_P2P_RECEIVED), 0);
          EXPECT_EQ(tessel_p2p_calls(ctx, 1, 2), 0);
          EXPECT_EQ(tessel_p2p_calls(ctx, 7, TESSEL_P2P_SENT), 0);
          EXPECT_EQ(tessel_p2p_calls(nullptr, 1, TESSEL_P2P_SENT), 0);
          // The collectives' counters are apart.
          EXPECT_EQ(tessel_comm_calls(ctx, TESSEL_COLL_ALL_REDUCE, 1), 0);
          tessel_reset_counters(ctx);
          for (int peer = 0; peer < 3; ++peer)
            for (int32_t dir : {TESSEL_P2P_SENT, TESSEL_P2P_RECEIVED}) {
              EXPECT_EQ(tessel_p2p_bytes(ctx, peer, dir), 0);
              EXPECT_EQ(tessel_p2p_calls(ctx, peer, dir), 0);
            }
        } else if (rank == 1) {
          tessel_recv(ctx, 0, 2, buf.data(), 12);
          tessel_recv(ctx, 0, 1, buf.data(), 8);
          EXPECT_EQ(tessel_p2p_bytes(ctx, 0, TESSEL_P2P_RECEIVED), 20);
          EXPECT_EQ(tessel_p2p_calls(ctx, 0, TESSEL_P2P_RECEIVED), 2);
          EXPECT_EQ(tessel_p2p_calls(ctx, 0, TESSEL_P2P_SENT), 0);
        } else {
          tessel_send(ctx, 0, 3, buf.data(), 16);
          tessel_recv(ctx, 0, 1, buf.data(), 4);
          EXPECT_EQ(tessel_p2p_bytes(ctx, 0, TESSEL_P2P_SENT), 16);
          EXPECT_EQ(tessel_p2p_bytes(ctx, 0, TESSEL_P2P_RECEIVED), 4);
        }
      }));
}

// Bad peers and sizes fail on the calling rank, before any communication.
TEST(P2pArguments, BadPeersAndSizesRecordErrors) {
  tessel_local_world *world = tessel_local_world_create(2);
  tessel_ctx_options options = meshOptions(Mesh{2}, 1, world, 0);
  tessel_ctx *ctx = tessel_ctx_create(&options);
  ASSERT_NE(ctx, nullptr) << tessel_error(nullptr);
  float x = 0;
  auto expectError = [&](const char *needle) {
    const char *err = tessel_error(ctx);
    ASSERT_NE(err, nullptr) << needle;
    EXPECT_TRUE(contains(err, needle)) << err;
    tessel_clear_error(ctx);
  };
  tessel_send(ctx, 1, 0, &x, 4);
  expectError("tessel_send: peer rank 1 is the calling rank");
  tessel_recv(ctx, 2, 0, &x, 4);
  expectError("tessel_recv: peer rank 2 outside the world of 2 ranks");
  tessel_send(ctx, -1, 0, &x, 4);
  expectError("peer rank -1 outside the world");
  tessel_send(ctx, 0, 0, &x, -4);
  expectError("tessel_send: bad size -4 bytes");
  tessel_recv(ctx, 0, 0, nullptr, 4);
  expectError("tessel_recv: null buffer");
  EXPECT_EQ(tessel_p2p_calls(ctx, 0, TESSEL_P2P_SENT), 0);
  tessel_send(nullptr, 0, 0, &x, 4); // A null context: a no-op.
  tessel_ctx_destroy(ctx);
  tessel_local_world_destroy(world);
}

// A context without a communicator (TESSEL_COMM_NONE) has no peer: every
// send and recv is an error, never a crash or a wait.
TEST(P2pNoCommunicator, EveryPeerIsAnError) {
  tessel_ctx_options options{TESSEL_BACKEND_CPU, 0, 1, 0};
  tessel_ctx *ctx = tessel_ctx_create(&options);
  ASSERT_NE(ctx, nullptr);
  float x = 0;
  for (int32_t peer : {0, 1, -1}) {
    tessel_send(ctx, peer, 1, &x, 4);
    ASSERT_NE(tessel_error(ctx), nullptr);
    EXPECT_EQ(std::string(tessel_error(ctx)),
              "tessel_send: no peer rank " + std::to_string(peer) +
                  ": the context has no communicator (TESSEL_COMM_NONE, a "
                  "world of one rank)");
    tessel_clear_error(ctx);
    tessel_recv(ctx, peer, 1, &x, 4);
    ASSERT_NE(tessel_error(ctx), nullptr);
    EXPECT_TRUE(contains(tessel_error(ctx), "tessel_recv: no peer rank"));
    tessel_clear_error(ctx);
  }
  EXPECT_EQ(tessel_p2p_calls(ctx, 1, TESSEL_P2P_SENT), 0);
  tessel_ctx_destroy(ctx);
}

} // namespace
