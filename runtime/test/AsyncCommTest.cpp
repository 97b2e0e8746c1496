//===- AsyncCommTest.cpp - Started collectives on the local backend -------===//
//
// tessel_*_start, tessel_comm_wait and tessel_comm_wait_all on worlds of
// ranks as threads: started collectives give the blocking calls' bits,
// overlap the caller, keep the rank's call order among blocking ones,
// count as the blocking ones plus their async bytes, report bad arguments
// at once and a missing or failed peer at the wait, and never hang a
// context's destruction.
//
//===----------------------------------------------------------------------===//

#include "CommReference.h"
#include "LocalWorld.h"
#include "TestUtil.h"

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <thread>

using namespace tt;

namespace {

using Clock = std::chrono::steady_clock;
using Bytes = std::vector<uint8_t>;

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

bool contains(const std::string &text, const std::string &needle) {
  return text.find(needle) != std::string::npos;
}

/// One collective call, to run blocking and started alike.
struct Op {
  int32_t kind;
  uint32_t axes;
  int32_t dtype;
  int32_t reduce;
  std::vector<int64_t> shape; /// all_reduce: {count}
  int32_t dim = 0, concatDim = 0;
};

std::string describe(const Op &op) {
  return "collective " + std::to_string(op.kind) + " axes " +
         std::to_string(op.axes) + " " + dtypeName(op.dtype) + " reduce " +
         std::to_string(op.reduce) + " shape " + shapeText(op.shape) + " dim " +
         std::to_string(op.dim) + " concat " + std::to_string(op.concatDim);
}

/// Bytes of op's output on a group of G.
size_t outBytes(const Op &op, int64_t G) {
  const int64_t bytes = numElements(op.shape) * tessel_dtype_size(op.dtype);
  if (op.kind == TESSEL_COLL_ALL_GATHER)
    return size_t(bytes * G);
  if (op.kind == TESSEL_COLL_REDUCE_SCATTER)
    return size_t(bytes / G);
  return size_t(bytes);
}

/// This rank's input to call number `salt`.
Bytes inputOf(const Op &op, uint64_t salt, int rank) {
  return encode(op.dtype,
                commInput(op.dtype, salt, rank, numElements(op.shape)));
}

void issue(tessel_ctx *ctx, const Op &op, const void *in, void *out,
           bool started) {
  const int32_t rank = int32_t(op.shape.size());
  switch (op.kind) {
  case TESSEL_COLL_ALL_REDUCE:
    (started ? &tessel_all_reduce_start : &tessel_all_reduce)(
        ctx, op.axes, op.dtype, in, out, numElements(op.shape), op.reduce);
    break;
  case TESSEL_COLL_ALL_GATHER:
    (started ? &tessel_all_gather_start : &tessel_all_gather)(
        ctx, op.axes, op.dtype, in, out, rank, op.shape.data(), op.dim);
    break;
  case TESSEL_COLL_REDUCE_SCATTER:
    (started ? &tessel_reduce_scatter_start
             : &tessel_reduce_scatter)(ctx, op.axes, op.dtype, in, out, rank,
                                       op.shape.data(), op.dim, op.reduce);
    break;
  case TESSEL_COLL_ALL_TO_ALL:
    (started ? &tessel_all_to_all_start
             : &tessel_all_to_all)(ctx, op.axes, op.dtype, in, out, rank,
                                   op.shape.data(), op.dim, op.concatDim);
    break;
  }
}

/// The four collectives on every mask of `mesh` with several dtypes,
/// reductions and dims; the small and the chunked all_reduce.
std::vector<Op> opsFor(const Mesh &mesh) {
  std::vector<Op> ops;
  for (uint32_t axes : meshMasks(mesh)) {
    const int64_t G = int64_t(groupRanks(mesh, axes, 0).size());
    for (int32_t dtype : {TESSEL_F32, TESSEL_F16, TESSEL_BF16, TESSEL_F64,
                          TESSEL_I32, TESSEL_I64})
      for (int32_t reduce :
           {TESSEL_REDUCE_SUM, TESSEL_REDUCE_MEAN, TESSEL_REDUCE_MAX}) {
        ops.push_back({TESSEL_COLL_ALL_REDUCE, axes, dtype, reduce, {37}});
        ops.push_back({TESSEL_COLL_REDUCE_SCATTER,
                       axes,
                       dtype,
                       reduce,
                       {3, 2 * G, 5},
                       1});
      }
    // Over 64 KiB: each member reduces one chunk.
    ops.push_back(
        {TESSEL_COLL_ALL_REDUCE, axes, TESSEL_F32, TESSEL_REDUCE_SUM, {20011}});
    for (int32_t dtype : {TESSEL_F32, TESSEL_BF16, TESSEL_F64, TESSEL_I64}) {
      for (int32_t dim : {0, 1, 2})
        ops.push_back({TESSEL_COLL_ALL_GATHER, axes, dtype, 0, {3, 4, 5}, dim});
      ops.push_back({TESSEL_COLL_REDUCE_SCATTER,
                     axes,
                     dtype,
                     TESSEL_REDUCE_SUM,
                     {2 * G, 3},
                     0});
      ops.push_back(
          {TESSEL_COLL_ALL_TO_ALL, axes, dtype, 0, {2 * G, 3, 4}, 0, 2});
      ops.push_back(
          {TESSEL_COLL_ALL_TO_ALL, axes, dtype, 0, {2, 3, 4 * G}, 2, 0});
    }
  }
  return ops;
}

class AsyncCommMesh : public ::testing::TestWithParam<Mesh> {};

std::string meshName(const ::testing::TestParamInfo<Mesh> &info) {
  return shapeText(info.param);
}

INSTANTIATE_TEST_SUITE_P(Meshes, AsyncCommMesh,
                         ::testing::Values(Mesh{2}, Mesh{4}, Mesh{2, 2}),
                         meshName);

//===--- Results ----------------------------------------------------------===//

// Tests that every started collective's output equals the blocking call's
// on the same input, bit for bit.
TEST_P(AsyncCommMesh, StartedMatchesBlockingBitForBit) {
  const Mesh mesh = GetParam();
  expectNoErrors(
      runRanks(mesh, [&](tessel_ctx *ctx, int rank, tessel_local_world *) {
        uint64_t salt = 0;
        for (const Op &op : opsFor(mesh)) {
          const int64_t G = tessel_group_size(ctx, op.axes);
          const Bytes in = inputOf(op, ++salt, rank);
          Bytes blocking(outBytes(op, G)), started(outBytes(op, G), 0xcd);
          issue(ctx, op, in.data(), blocking.data(), /*started=*/false);
          issue(ctx, op, in.data(), started.data(), /*started=*/true);
          tessel_comm_wait(ctx, started.data());
          ASSERT_EQ(tessel_error(ctx), nullptr) << describe(op);
          EXPECT_TRUE(started == blocking) << describe(op) << " rank " << rank;
        }
      }));
}

// Tests that the started forms pass the blocking calls' reference battery
// (every mask, in place and not, chunked sizes), each started collective
// running while the caller computes its reference.
TEST_P(AsyncCommMesh, StartedCollectivesMatchTheReferences) {
  const Mesh mesh = GetParam();
  expectNoErrors(
      runRanks(mesh, [&](tessel_ctx *ctx, int rank, tessel_local_world *) {
        CommChecker checker(ctx, mesh, rank, [](const std::string &msg) {
          ADD_FAILURE() << msg;
        });
        checker.useStart(true);
        checker.allReduces({TESSEL_F32, TESSEL_BF16, TESSEL_I32},
                           /*large=*/true);
        checker.allGathers({TESSEL_F32, TESSEL_F64});
        checker.reduceScatters({TESSEL_F32, TESSEL_I64});
        checker.allToAlls({TESSEL_BF16});
      }));
}

/// One of each collective over the whole mesh, then an all_reduce over
/// axis 0: the workload of the ordering tests.
std::vector<Op> mixedOps(const Mesh &mesh) {
  const uint32_t all = (1u << mesh.size()) - 1;
  const int64_t G = meshRanks(mesh);
  return {
      {TESSEL_COLL_ALL_REDUCE, all, TESSEL_F32, TESSEL_REDUCE_SUM, {1000}},
      {TESSEL_COLL_ALL_GATHER, all, TESSEL_BF16, 0, {4, 3}, 1},
      {TESSEL_COLL_REDUCE_SCATTER,
       all,
       TESSEL_F64,
       TESSEL_REDUCE_MEAN,
       {2 * G, 5},
       0},
      {TESSEL_COLL_ALL_TO_ALL, all, TESSEL_I32, 0, {3, 2 * G}, 1, 0},
      {TESSEL_COLL_ALL_REDUCE, 1, TESSEL_I64, TESSEL_REDUCE_MAX, {300}},
  };
}

/// Every op's input and its blocking output on this rank.
struct Expected {
  std::vector<Bytes> ins, outs;
};
Expected blockingResults(tessel_ctx *ctx, const std::vector<Op> &ops,
                         int rank) {
  Expected e;
  for (size_t i = 0; i < ops.size(); ++i) {
    e.ins.push_back(inputOf(ops[i], i + 1, rank));
    e.outs.emplace_back(outBytes(ops[i], tessel_group_size(ctx, ops[i].axes)));
    issue(ctx, ops[i], e.ins[i].data(), e.outs[i].data(), false);
  }
  return e;
}

// Tests that several collectives started back to back complete: the last
// one's wait gives its result, wait_all everyone's.
TEST_P(AsyncCommMesh, SeveralStartedThenOneWaitOnTheLast) {
  const Mesh mesh = GetParam();
  expectNoErrors(
      runRanks(mesh, [&](tessel_ctx *ctx, int rank, tessel_local_world *) {
        const std::vector<Op> ops = mixedOps(mesh);
        const Expected want = blockingResults(ctx, ops, rank);
        std::vector<Bytes> got;
        for (size_t i = 0; i < ops.size(); ++i)
          got.emplace_back(want.outs[i].size(), 0xcd);
        for (size_t i = 0; i < ops.size(); ++i)
          issue(ctx, ops[i], want.ins[i].data(), got[i].data(), true);
        tessel_comm_wait(ctx, got.back().data());
        EXPECT_TRUE(got.back() == want.outs.back()) << "rank " << rank;
        tessel_comm_wait_all(ctx);
        for (size_t i = 0; i < ops.size(); ++i)
          EXPECT_TRUE(got[i] == want.outs[i])
              << describe(ops[i]) << " rank " << rank;
      }));
}

// Tests that started and blocking calls interleave in one order on every
// rank, each rank starting a different subset (a collective started on one
// rank matches the same call made blocking on another), on alternating
// groups: a blocking call's result is there when it returns, the started
// ones' after wait_all.
TEST_P(AsyncCommMesh, StartedAndBlockingCallsInOneOrder) {
  const Mesh mesh = GetParam();
  expectNoErrors(
      runRanks(mesh, [&](tessel_ctx *ctx, int rank, tessel_local_world *) {
        std::vector<Op> ops;
        for (int round = 0; round < 8; ++round)
          for (const Op &op : mixedOps(mesh)) {
            ops.push_back(op);
            // Alternate the full group with single axes.
            if (round % 2 == 1)
              ops.back().axes = op.kind == TESSEL_COLL_ALL_REDUCE
                                    ? 1u << (round / 2 % mesh.size())
                                    : op.axes;
          }
        const Expected want = blockingResults(ctx, ops, rank);
        std::vector<Bytes> got;
        for (size_t i = 0; i < ops.size(); ++i)
          got.emplace_back(want.outs[i].size(), 0xcd);
        for (size_t i = 0; i < ops.size(); ++i) {
          const bool started = (i + size_t(rank)) % 3 != 0;
          issue(ctx, ops[i], want.ins[i].data(), got[i].data(), started);
          if (!started)
            EXPECT_TRUE(got[i] == want.outs[i])
                << "blocking " << describe(ops[i]) << " rank " << rank;
          if (i % 7 == 6) // Now and then, a wait on an earlier output.
            tessel_comm_wait(ctx, got[i - 3].data());
        }
        tessel_comm_wait_all(ctx);
        for (size_t i = 0; i < ops.size(); ++i)
          EXPECT_TRUE(got[i] == want.outs[i])
              << describe(ops[i]) << " rank " << rank;
      }));
}

//===--- Overlap and waits ------------------------------------------------===//

// Tests that a start returns before the collective can complete: rank 1
// joins only once rank 0's thread, past its start, says so (with a start
// that blocked, both would wait until the timeout). Waits on pointers no
// started collective writes return at once meanwhile.
TEST(AsyncComm, TheCallerGoesOnWhileTheCollectiveRuns) {
  std::atomic<bool> pastStart{false};
  std::atomic<bool> waitedAtOnce{false};
  const auto errors = runRanks(
      Mesh{2},
      [&](tessel_ctx *ctx, int rank, tessel_local_world *) {
        std::vector<float> in(1000, float(rank + 1)), out(1000);
        if (rank == 1) {
          const auto deadline = Clock::now() + std::chrono::seconds(20);
          while (!pastStart && Clock::now() < deadline)
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
          // Let rank 0 wait on unknown pointers while its start is pending.
          std::this_thread::sleep_for(std::chrono::milliseconds(200));
          tessel_all_reduce(ctx, 1, TESSEL_F32, in.data(), out.data(), 1000,
                            TESSEL_REDUCE_SUM);
          EXPECT_EQ(out[999], 3.0f);
          return;
        }
        tessel_all_reduce_start(ctx, 1, TESSEL_F32, in.data(), out.data(), 1000,
                                TESSEL_REDUCE_SUM);
        pastStart = true;
        int unknown = 0;
        const auto before = Clock::now();
        tessel_comm_wait(ctx, &unknown);
        tessel_comm_wait(ctx, in.data());
        tessel_comm_wait(ctx, nullptr);
        waitedAtOnce = secondsSince(before) < 0.15;
        tessel_comm_wait(ctx, out.data());
        EXPECT_EQ(out[0], 3.0f);
        EXPECT_EQ(out[999], 3.0f);
      },
      /*timeout=*/10);
  expectNoErrors(errors);
  EXPECT_TRUE(waitedAtOnce);
}

// Tests that send waits for the started collectives before it reads its
// buffer, and recv before it returns: each may name a started collective's
// output.
TEST(AsyncComm, SendAndRecvWaitForStartedCollectives) {
  expectNoErrors(
      runRanks(Mesh{2}, [](tessel_ctx *ctx, int rank, tessel_local_world *) {
        std::vector<float> buf(256, float(rank + 1)), got(256);
        tessel_all_reduce_start(ctx, 1, TESSEL_F32, buf.data(), buf.data(), 256,
                                TESSEL_REDUCE_SUM);
        if (rank == 0) {
          tessel_send(ctx, 1, 5, buf.data(), 1024);
        } else {
          tessel_recv(ctx, 0, 5, got.data(), 1024);
          EXPECT_EQ(buf[255], 3.0f); // Complete once recv has returned.
          EXPECT_EQ(got[0], 3.0f);
          EXPECT_EQ(got[255], 3.0f);
        }
        tessel_comm_wait_all(ctx);
      }));
}

// Tests that a collective without peers (a group of one) runs at once: its
// output is there when the start returns, and nothing counts.
TEST(AsyncComm, GroupOfOneRunsAtOnce) {
  tessel_ctx_options options{TESSEL_BACKEND_CPU, 0, 1, 0};
  tessel_ctx *ctx = tessel_ctx_create(&options);
  ASSERT_NE(ctx, nullptr);
  const float in[4] = {1, 2, 3, 4};
  float out[4] = {}, gathered[4] = {};
  tessel_all_reduce_start(ctx, 1, TESSEL_F32, in, out, 4, TESSEL_REDUCE_SUM);
  EXPECT_EQ(out[3], 4.0f);
  const int64_t shape[] = {2, 2};
  tessel_all_gather_start(ctx, 1, TESSEL_F32, in, gathered, 2, shape, 0);
  EXPECT_EQ(gathered[2], 3.0f);
  tessel_comm_wait(ctx, out);
  tessel_comm_wait_all(ctx);
  EXPECT_EQ(tessel_error(ctx), nullptr);
  EXPECT_EQ(tessel_comm_calls(ctx, TESSEL_COLL_ALL_REDUCE, 1), 0);
  EXPECT_EQ(tessel_comm_async_bytes(ctx, TESSEL_COLL_ALL_REDUCE, 1), 0);
  tessel_ctx_destroy(ctx);
}

//===--- Counters ---------------------------------------------------------===//

// Tests that started collectives count as the blocking ones do, and their
// payload again as async bytes; blocking ones add no async bytes; a reset
// zeroes them.
TEST(AsyncCommCounters, StartedCountAsBlockingPlusAsyncBytes) {
  expectNoErrors(runRanks(Mesh{2, 2}, [](tessel_ctx *ctx, int,
                                         tessel_local_world *) {
    auto each = [](const std::function<void(int32_t, uint32_t)> &body) {
      for (int32_t coll = 0; coll < TESSEL_NUM_COLLECTIVES; ++coll)
        for (uint32_t mask = 0; mask < 4; ++mask)
          body(coll, mask);
    };
    issueOneOfEachCollective(ctx, /*started=*/false);
    std::map<std::pair<int32_t, uint32_t>, std::pair<int64_t, int64_t>> once;
    each([&](int32_t coll, uint32_t mask) {
      once[{coll, mask}] = {tessel_comm_bytes(ctx, coll, mask),
                            tessel_comm_calls(ctx, coll, mask)};
      EXPECT_EQ(tessel_comm_async_bytes(ctx, coll, mask), 0);
    });
    EXPECT_EQ((once[{TESSEL_COLL_REDUCE_SCATTER, 3}].first), 192);
    tessel_reset_counters(ctx);
    issueOneOfEachCollective(ctx, /*started=*/true);
    each([&](int32_t coll, uint32_t mask) {
      const auto [bytes, calls] = once[{coll, mask}];
      EXPECT_EQ(tessel_comm_bytes(ctx, coll, mask), bytes) << coll << mask;
      EXPECT_EQ(tessel_comm_calls(ctx, coll, mask), calls) << coll << mask;
      EXPECT_EQ(tessel_comm_async_bytes(ctx, coll, mask), bytes)
          << coll << mask;
    });
    issueOneOfEachCollective(ctx, /*started=*/false);
    each([&](int32_t coll, uint32_t mask) {
      const int64_t bytes = once[{coll, mask}].first;
      EXPECT_EQ(tessel_comm_bytes(ctx, coll, mask), 2 * bytes);
      EXPECT_EQ(tessel_comm_async_bytes(ctx, coll, mask), bytes);
    });
    EXPECT_EQ(tessel_comm_async_bytes(ctx, TESSEL_NUM_COLLECTIVES, 1), 0);
    EXPECT_EQ(tessel_comm_async_bytes(ctx, -1, 1), 0);
    tessel_reset_counters(ctx);
    each([&](int32_t coll, uint32_t mask) {
      EXPECT_EQ(tessel_comm_bytes(ctx, coll, mask), 0);
      EXPECT_EQ(tessel_comm_async_bytes(ctx, coll, mask), 0);
    });
  }));
}

//===--- Errors -----------------------------------------------------------===//

// Tests that a start checks its arguments as the blocking call does and
// records the error before it returns, naming the start.
TEST(AsyncCommErrors, BadArgumentsFailAtTheStart) {
  tessel_local_world *localWorld = tessel_local_world_create(4);
  tessel_ctx_options options = meshOptions(Mesh{2, 2}, 1, localWorld, 0);
  tessel_ctx *ctx = tessel_ctx_create(&options);
  ASSERT_NE(ctx, nullptr) << tessel_error(nullptr);
  std::vector<float> in(64), out(64);
  auto expectError = [&](const std::string &want) {
    const char *err = tessel_error(ctx);
    ASSERT_NE(err, nullptr) << want;
    EXPECT_EQ(std::string(err), want);
    tessel_clear_error(ctx);
  };
  const int64_t shape[] = {3, 4};
  tessel_reduce_scatter_start(ctx, 3, TESSEL_F32, in.data(), out.data(), 2,
                              shape, 0, TESSEL_REDUCE_SUM);
  expectError("tessel_reduce_scatter_start: dimension 0 of size 3 does not "
              "split over a group of 4");
  tessel_all_gather_start(ctx, 1, TESSEL_F32, in.data(), out.data(), 2, shape,
                          2);
  expectError("tessel_all_gather_start: dim 2 outside a tensor of rank 2");
  tessel_all_gather_start(ctx, 1, TESSEL_F32, in.data(), in.data(), 2, shape,
                          0);
  expectError("tessel_all_gather_start: in and out must be distinct buffers");
  tessel_all_to_all_start(ctx, 1, TESSEL_F32, in.data(), out.data(), 2, shape,
                          1, -1);
  expectError("tessel_all_to_all_start: concat_dim -1 outside a tensor of "
              "rank 2");
  tessel_all_reduce_start(ctx, 1, 9, in.data(), out.data(), 4,
                          TESSEL_REDUCE_SUM);
  expectError("tessel_all_reduce_start: unsupported dtype 9");
  tessel_all_reduce_start(ctx, 4, TESSEL_F32, in.data(), out.data(), 4,
                          TESSEL_REDUCE_SUM);
  expectError("tessel_all_reduce_start: axes mask 0x4 names an axis beyond "
              "the mesh's 2");
  tessel_all_reduce_start(ctx, 1, TESSEL_F32, nullptr, out.data(), 4,
                          TESSEL_REDUCE_SUM);
  expectError("tessel_all_reduce_start: null buffer");
  // Nothing was issued: the waits return at once, nothing counts.
  tessel_comm_wait(ctx, out.data());
  tessel_comm_wait_all(ctx);
  EXPECT_EQ(tessel_error(ctx), nullptr);
  EXPECT_EQ(tessel_comm_calls(ctx, TESSEL_COLL_ALL_REDUCE, 1), 0);
  tessel_ctx_destroy(ctx);
  tessel_local_world_destroy(localWorld);
  // A null context: no-ops.
  tessel_all_reduce_start(nullptr, 1, TESSEL_F32, in.data(), out.data(), 4,
                          TESSEL_REDUCE_SUM);
  tessel_comm_wait(nullptr, out.data());
  tessel_comm_wait_all(nullptr);
  EXPECT_EQ(tessel_comm_async_bytes(nullptr, TESSEL_COLL_ALL_REDUCE, 1), 0);
}

// Tests that members disagreeing on a started call fail it on every member
// by the time its wait returns.
TEST(AsyncCommErrors, MismatchedStartedCallsFailAtTheWait) {
  std::vector<std::string> seen(2);
  runRanks(Mesh{2}, [&](tessel_ctx *ctx, int rank, tessel_local_world *) {
    std::vector<float> in(8, 1.0f), out(8);
    tessel_all_reduce_start(ctx, 1, TESSEL_F32, in.data(), out.data(),
                            rank == 0 ? 4 : 8, TESSEL_REDUCE_SUM);
    tessel_comm_wait(ctx, out.data());
    const char *err = tessel_error(ctx);
    seen[size_t(rank)] = err ? err : "";
  });
  for (const std::string &err : seen)
    EXPECT_TRUE(contains(err, "tessel_all_reduce_start: the members of the "
                              "group of axes mask 0x1 made different calls"))
        << err;
}

// Tests that a peer that never joins makes the waiting rank fail with the
// timeout, by the time its wait returns, and that what was queued behind
// the failed collective ends at once.
TEST(AsyncCommErrors, APeerThatNeverCallsTimesOut) {
  const auto start = Clock::now();
  const auto errors = runRanks(
      Mesh{2},
      [](tessel_ctx *ctx, int rank, tessel_local_world *) {
        if (rank == 1)
          return;
        std::vector<float> in(16, 1.0f), out(16), gathered(32);
        const int64_t shape[] = {16};
        tessel_all_reduce_start(ctx, 1, TESSEL_F32, in.data(), out.data(), 16,
                                TESSEL_REDUCE_SUM);
        tessel_all_gather_start(ctx, 1, TESSEL_F32, in.data(), gathered.data(),
                                1, shape, 0);
        tessel_comm_wait(ctx, out.data());
        const char *err = tessel_error(ctx);
        ASSERT_NE(err, nullptr);
        EXPECT_TRUE(contains(err, "tessel_all_reduce_start: timed out after "
                                  "0.2 s waiting for group indices {1}"))
            << err;
        tessel_comm_wait_all(ctx);
      },
      /*timeout=*/0.2);
  EXPECT_LT(secondsSince(start), 5.0);
  EXPECT_EQ(errors[1], "");
  EXPECT_TRUE(contains(errors[0], "tessel_all_reduce_start: timed out"))
      << errors[0];
}

//===--- Destruction ------------------------------------------------------===//

// Tests that destroying a context waits for its started collective, which
// completes once the late peer joins.
TEST(AsyncCommDestroy, WaitsForAPendingCollective) {
  std::vector<std::vector<float>> ins{std::vector<float>(16, 1.0f),
                                      std::vector<float>(16, 2.0f)};
  std::vector<std::vector<float>> outs(2, std::vector<float>(16));
  expectNoErrors(
      runRanks(Mesh{2}, [&](tessel_ctx *ctx, int rank, tessel_local_world *) {
        const size_t r = size_t(rank);
        if (rank == 1)
          std::this_thread::sleep_for(std::chrono::milliseconds(200));
        // Rank 0 starts and leaves: runRanks destroys its context at once.
        (rank == 0 ? &tessel_all_reduce_start
                   : &tessel_all_reduce)(ctx, 1, TESSEL_F32, ins[r].data(),
                                         outs[r].data(), 16, TESSEL_REDUCE_SUM);
      }));
  EXPECT_EQ(outs[0][15], 3.0f);
  EXPECT_EQ(outs[1][15], 3.0f);
}

// Tests that destroying a context whose started collective waits for a
// peer, after that peer aborted the world, returns at once instead of
// waiting for the (long) timeout.
TEST(AsyncCommDestroy, APendingCollectiveOfAnAbortedWorldEndsAtOnce) {
  std::vector<float> in(16, 1.0f), out(16);
  std::atomic<bool> aborted{false};
  const auto start = Clock::now();
  const auto errors = runRanks(
      Mesh{2},
      [&](tessel_ctx *ctx, int rank, tessel_local_world *world) {
        if (rank == 1) {
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
          tessel_local_world_abort(world, 1, "gone");
          aborted = true;
          return;
        }
        tessel_all_reduce_start(ctx, 1, TESSEL_F32, in.data(), out.data(), 16,
                                TESSEL_REDUCE_SUM);
        while (!aborted)
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        // No wait: runRanks destroys the context with the collective
        // pending (or just failed).
      },
      /*timeout=*/60);
  EXPECT_LT(secondsSince(start), 10.0);
  EXPECT_TRUE(errors[0].empty() || errors[0] == "rank 1 failed: gone")
      << errors[0];
}

} // namespace
