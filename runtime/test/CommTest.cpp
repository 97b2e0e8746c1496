//===- CommTest.cpp - Mesh, groups and collectives on the local backend ---===//

#include "CommReference.h"
#include "LocalWorld.h"
#include "TestUtil.h"

#include <chrono>
#include <functional>
#include <mutex>
#include <thread>

using namespace tt;

namespace {

/// A checker whose failures become gtest failures (thread-safe).
CommChecker checkerFor(tessel_ctx *ctx, const Mesh &mesh, int rank) {
  return CommChecker(ctx, mesh, rank,
                     [](const std::string &msg) { ADD_FAILURE() << msg; });
}

class CommMesh : public ::testing::TestWithParam<Mesh> {};

std::string meshName(const ::testing::TestParamInfo<Mesh> &info) {
  return shapeText(info.param);
}

INSTANTIATE_TEST_SUITE_P(Meshes, CommMesh,
                         ::testing::Values(Mesh{4}, Mesh{2, 2}, Mesh{2, 3}),
                         meshName);

const std::vector<int32_t> kReduceTypes = {TESSEL_F32, TESSEL_F16, TESSEL_BF16,
                                           TESSEL_F64, TESSEL_I32, TESSEL_I64};
const std::vector<int32_t> kMoveTypes = {TESSEL_F32, TESSEL_BF16, TESSEL_F64,
                                         TESSEL_I64};

// The mesh coordinates are row-major, and every mask's group size and index
// follow the definition (checked against a plain enumeration of the ranks).
TEST_P(CommMesh, CoordinatesAndGroups) {
  const Mesh mesh = GetParam();
  const int world = int(meshRanks(mesh));
  tessel_local_world *localWorld = tessel_local_world_create(world);
  for (int r = 0; r < world; ++r) {
    tessel_ctx_options options = meshOptions(mesh, r, localWorld, 0);
    tessel_ctx *ctx = tessel_ctx_create(&options);
    ASSERT_NE(ctx, nullptr) << tessel_error(nullptr);
    ASSERT_EQ(tessel_ctx_mesh_rank(ctx), int32_t(mesh.size()));
    std::vector<int64_t> coords = meshCoords(mesh, r);
    for (int32_t a = 0; a < int32_t(mesh.size()); ++a) {
      EXPECT_EQ(tessel_ctx_mesh_size(ctx, a), mesh[size_t(a)]);
      EXPECT_EQ(tessel_ctx_mesh_coord(ctx, a), coords[size_t(a)]);
    }
    EXPECT_EQ(tessel_ctx_mesh_size(ctx, int32_t(mesh.size())), 0);
    EXPECT_EQ(tessel_ctx_mesh_coord(ctx, -1), -1);
    for (uint32_t mask : meshMasks(mesh)) {
      std::vector<int> group = groupRanks(mesh, mask, r);
      EXPECT_EQ(tessel_group_size(ctx, mask), int64_t(group.size()))
          << "rank " << r << " mask " << mask;
      EXPECT_EQ(tessel_group_index(ctx, mask), groupIndexOf(group, r))
          << "rank " << r << " mask " << mask;
    }
    const uint32_t beyond = 1u << mesh.size();
    EXPECT_EQ(tessel_group_size(ctx, beyond), -1);
    EXPECT_EQ(tessel_group_index(ctx, beyond | 1u), -1);
    tessel_ctx_destroy(ctx);
  }
  tessel_local_world_destroy(localWorld);
}

// Every mask, integer and float dtypes, SUM/MEAN/MAX, small and chunked
// sizes, in place and not: bit for bit the reduction in group-index order.
TEST_P(CommMesh, AllReduceMatchesOrderedReference) {
  const Mesh mesh = GetParam();
  expectNoErrors(
      runRanks(mesh, [&](tessel_ctx *ctx, int rank, tessel_local_world *) {
        checkerFor(ctx, mesh, rank).allReduces(kReduceTypes, /*large=*/true);
      }));
}

TEST_P(CommMesh, AllGatherAlongEveryDim) {
  const Mesh mesh = GetParam();
  expectNoErrors(
      runRanks(mesh, [&](tessel_ctx *ctx, int rank, tessel_local_world *) {
        checkerFor(ctx, mesh, rank).allGathers(kMoveTypes);
      }));
}

TEST_P(CommMesh, ReduceScatterAlongEveryDim) {
  const Mesh mesh = GetParam();
  expectNoErrors(
      runRanks(mesh, [&](tessel_ctx *ctx, int rank, tessel_local_world *) {
        checkerFor(ctx, mesh, rank)
            .reduceScatters({TESSEL_F32, TESSEL_BF16, TESSEL_F64, TESSEL_I32});
      }));
}

TEST_P(CommMesh, AllToAllEverySplitAndConcatDim) {
  const Mesh mesh = GetParam();
  expectNoErrors(
      runRanks(mesh, [&](tessel_ctx *ctx, int rank, tessel_local_world *) {
        checkerFor(ctx, mesh, rank).allToAlls({TESSEL_F32, TESSEL_BF16});
      }));
}

TEST_P(CommMesh, AllSliceTakesTheOwnBlock) {
  const Mesh mesh = GetParam();
  expectNoErrors(
      runRanks(mesh, [&](tessel_ctx *ctx, int rank, tessel_local_world *) {
        checkerFor(ctx, mesh, rank).allSlices({TESSEL_F32, TESSEL_F64});
      }));
}

// Counters hold exactly the spec's payload per (collective, mask); groups
// of one and all_slice count nothing; a reset zeroes them.
TEST(CommCounters, BytesAndCallsPerCollectiveAndMask) {
  const Mesh mesh{2, 2};
  expectNoErrors(runRanks(mesh, [&](tessel_ctx *ctx, int,
                                    tessel_local_world *) {
    // A second all_reduce over mask 1 adds to the first's counters.
    std::vector<uint8_t> in(40), out(40);
    tessel_all_reduce(ctx, 1, TESSEL_F32, in.data(), out.data(), 10,
                      TESSEL_REDUCE_SUM);
    tt::issueOneOfEachCollective(ctx);
    EXPECT_EQ(tessel_comm_bytes(ctx, TESSEL_COLL_ALL_REDUCE, 1), 80);
    EXPECT_EQ(tessel_comm_calls(ctx, TESSEL_COLL_ALL_REDUCE, 1), 2);
    EXPECT_EQ(tessel_comm_bytes(ctx, TESSEL_COLL_ALL_REDUCE, 3), 14);
    EXPECT_EQ(tessel_comm_calls(ctx, TESSEL_COLL_ALL_REDUCE, 3), 1);
    EXPECT_EQ(tessel_comm_calls(ctx, TESSEL_COLL_ALL_REDUCE, 0), 0);
    EXPECT_EQ(tessel_comm_bytes(ctx, TESSEL_COLL_ALL_REDUCE, 0), 0);
    EXPECT_EQ(tessel_comm_calls(ctx, TESSEL_COLL_ALL_REDUCE, 2), 0);
    // all_gather: the output, 3 x (2·2) f32.
    EXPECT_EQ(tessel_comm_bytes(ctx, TESSEL_COLL_ALL_GATHER, 2), 48);
    EXPECT_EQ(tessel_comm_calls(ctx, TESSEL_COLL_ALL_GATHER, 2), 1);
    // reduce_scatter: the input, 8 x 3 f64.
    EXPECT_EQ(tessel_comm_bytes(ctx, TESSEL_COLL_REDUCE_SCATTER, 3), 192);
    EXPECT_EQ(tessel_comm_calls(ctx, TESSEL_COLL_REDUCE_SCATTER, 3), 1);
    // all_to_all: the input, 4 x 3 f32; all_slice added nothing.
    EXPECT_EQ(tessel_comm_bytes(ctx, TESSEL_COLL_ALL_TO_ALL, 1), 48);
    EXPECT_EQ(tessel_comm_calls(ctx, TESSEL_COLL_ALL_TO_ALL, 1), 1);
    EXPECT_EQ(tessel_comm_calls(ctx, TESSEL_NUM_COLLECTIVES, 1), 0);
    EXPECT_EQ(tessel_comm_calls(ctx, -1, 1), 0);
    tessel_reset_counters(ctx);
    for (int32_t coll = 0; coll < TESSEL_NUM_COLLECTIVES; ++coll)
      for (uint32_t mask = 0; mask < 4; ++mask) {
        EXPECT_EQ(tessel_comm_bytes(ctx, coll, mask), 0);
        EXPECT_EQ(tessel_comm_calls(ctx, coll, mask), 0);
      }
  }));
}

// One device (COMM_NONE, the old options): every collective over its one
// axis is a copy of the input and counts nothing; another axis is an error.
TEST(CommGroupOfOne, OneDeviceCollectivesAreCopies) {
  tessel_ctx_options options{TESSEL_BACKEND_CPU, 0, 1, 0};
  tessel_ctx *ctx = tessel_ctx_create(&options);
  ASSERT_NE(ctx, nullptr);
  EXPECT_EQ(tessel_ctx_mesh_rank(ctx), 1);
  EXPECT_EQ(tessel_ctx_mesh_size(ctx, 0), 1);
  EXPECT_EQ(tessel_ctx_mesh_coord(ctx, 0), 0);
  EXPECT_EQ(tessel_group_size(ctx, 1), 1);
  EXPECT_EQ(tessel_group_index(ctx, 1), 0);
  CommChecker checker(ctx, Mesh{1}, 0,
                      [](const std::string &msg) { ADD_FAILURE() << msg; });
  checker.allReduces({TESSEL_F32, TESSEL_BF16, TESSEL_I32}, /*large=*/false);
  checker.allGathers({TESSEL_F32});
  checker.reduceScatters({TESSEL_F32});
  checker.allToAlls({TESSEL_F32});
  checker.allSlices({TESSEL_F32});
  for (int32_t coll = 0; coll < TESSEL_NUM_COLLECTIVES; ++coll)
    for (uint32_t mask = 0; mask < 2; ++mask)
      EXPECT_EQ(tessel_comm_calls(ctx, coll, mask), 0);
  float x = 1, y = 0;
  tessel_all_reduce(ctx, 2, TESSEL_F32, &x, &y, 1, TESSEL_REDUCE_SUM);
  ASSERT_NE(tessel_error(ctx), nullptr);
  EXPECT_NE(std::string(tessel_error(ctx)).find("beyond the mesh"),
            std::string::npos)
      << tessel_error(ctx);
  tessel_ctx_destroy(ctx);
}

// Bad arguments fail on the calling rank before any communication.
TEST(CommArguments, BadCallsRecordErrors) {
  const Mesh mesh{2, 2};
  tessel_local_world *localWorld = tessel_local_world_create(4);
  tessel_ctx_options options = meshOptions(mesh, 1, localWorld, 0);
  tessel_ctx *ctx = tessel_ctx_create(&options);
  ASSERT_NE(ctx, nullptr) << tessel_error(nullptr);
  std::vector<float> in(64), out(64);
  auto expectError = [&](const char *needle) {
    const char *err = tessel_error(ctx);
    ASSERT_NE(err, nullptr) << needle;
    EXPECT_NE(std::string(err).find(needle), std::string::npos) << err;
    tessel_clear_error(ctx);
  };
  const int64_t shape[] = {3, 4};
  tessel_reduce_scatter(ctx, 3, TESSEL_F32, in.data(), out.data(), 2, shape, 0,
                        TESSEL_REDUCE_SUM);
  expectError("does not split over a group of 4");
  tessel_all_slice(ctx, 1, TESSEL_F32, in.data(), out.data(), 2, shape, 0);
  expectError("does not split");
  tessel_all_to_all(ctx, 1, TESSEL_F32, in.data(), out.data(), 2, shape, 0, 1);
  expectError("does not split");
  tessel_all_gather(ctx, 1, TESSEL_F32, in.data(), out.data(), 2, shape, 2);
  expectError("dim 2 outside a tensor of rank 2");
  tessel_all_to_all(ctx, 1, TESSEL_F32, in.data(), out.data(), 2, shape, 1, -1);
  expectError("concat_dim -1");
  tessel_all_gather(ctx, 1, TESSEL_F32, in.data(), in.data(), 2, shape, 0);
  expectError("distinct buffers");
  tessel_all_reduce(ctx, 4, TESSEL_F32, in.data(), out.data(), 4,
                    TESSEL_REDUCE_SUM);
  expectError("axes mask 0x4 names an axis beyond the mesh's 2");
  tessel_all_reduce(ctx, 1, 9, in.data(), out.data(), 4, TESSEL_REDUCE_SUM);
  expectError("unsupported dtype 9");
  tessel_all_reduce(ctx, 1, TESSEL_F32, in.data(), out.data(), 4, 7);
  expectError("unknown reduction kind 7");
  tessel_all_reduce(ctx, 1, TESSEL_F32, in.data(), out.data(), -1,
                    TESSEL_REDUCE_SUM);
  expectError("bad count");
  tessel_all_reduce(ctx, 1, TESSEL_F32, nullptr, out.data(), 4,
                    TESSEL_REDUCE_SUM);
  expectError("null buffer");
  const int64_t negative[] = {3, -4};
  tessel_all_gather(ctx, 1, TESSEL_F32, in.data(), out.data(), 2, negative, 0);
  expectError("bad size -4");
  tessel_all_gather(ctx, 1, TESSEL_F32, in.data(), out.data(), 0, shape, 0);
  expectError("bad tensor rank 0");
  EXPECT_EQ(tessel_comm_calls(ctx, TESSEL_COLL_ALL_REDUCE, 1), 0);
  tessel_ctx_destroy(ctx);
  tessel_local_world_destroy(localWorld);
}

// Members that disagree on a call all fail (instead of reading past a
// buffer) and none hangs.
TEST(CommLocal, MismatchedCallsFailOnEveryMember) {
  std::vector<std::string> errors =
      runRanks(Mesh{2}, [](tessel_ctx *ctx, int rank, tessel_local_world *) {
        std::vector<float> in(8, 1.0f), out(8);
        tessel_all_reduce(ctx, 1, TESSEL_F32, in.data(), out.data(),
                          rank == 0 ? 4 : 8, TESSEL_REDUCE_SUM);
      });
  for (const std::string &err : errors)
    EXPECT_NE(err.find("made different calls"), std::string::npos) << err;
}

// A rank that fails aborts the world: its peers waiting in a collective,
// and any entering one later, return at once with its message.
TEST(CommLocal, AbortWakesEveryRank) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::string> errors = runRanks(
      Mesh{4},
      [](tessel_ctx *ctx, int rank, tessel_local_world *world) {
        if (rank == 2) {
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
          tessel_local_world_abort(world, 2, "out of memory");
          return;
        }
        if (rank == 3) // Enters after the abort.
          std::this_thread::sleep_for(std::chrono::milliseconds(300));
        std::vector<float> in(1000, 1.0f), out(1000);
        tessel_all_reduce(ctx, 1, TESSEL_F32, in.data(), out.data(), 1000,
                          TESSEL_REDUCE_SUM);
      },
      /*timeout=*/60);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  EXPECT_LT(seconds, 10.0);
  EXPECT_EQ(errors[2], "");
  for (int r : {0, 1, 3})
    EXPECT_EQ(errors[size_t(r)], "rank 2 failed: out of memory") << r;
}

// A rank that never joins: the others fail after the timeout, with an error
// naming the collective and the missing group index.
TEST(CommLocal, TimeoutNamesTheMissingRanks) {
  std::vector<std::string> errors = runRanks(
      Mesh{4},
      [](tessel_ctx *ctx, int rank, tessel_local_world *) {
        if (rank == 3)
          return;
        std::vector<float> in(16, 1.0f), out(16);
        tessel_all_reduce(ctx, 1, TESSEL_F32, in.data(), out.data(), 16,
                          TESSEL_REDUCE_SUM);
      },
      /*timeout=*/0.2);
  EXPECT_EQ(errors[3], "");
  for (int r : {0, 1, 2}) {
    EXPECT_NE(errors[size_t(r)].find("tessel_all_reduce: timed out after "
                                     "0.2 s waiting for group indices {"),
              std::string::npos)
        << errors[size_t(r)];
    EXPECT_NE(errors[size_t(r)].find("3}"), std::string::npos)
        << errors[size_t(r)];
  }
}

// Many back-to-back collectives on alternating groups reuse the slots and
// barriers safely (each rank's result depends on its peers' latest inputs).
TEST(CommLocal, BackToBackCollectivesOnAlternatingGroups) {
  const Mesh mesh{2, 3};
  expectNoErrors(runRanks(mesh, [&](tessel_ctx *ctx, int rank,
                                    tessel_local_world *) {
    CommChecker checker = checkerFor(ctx, mesh, rank);
    for (int i = 0; i < 50; ++i) {
      checker.allReduce(TESSEL_F32, TESSEL_REDUCE_SUM, 5, i % 2, 1u + i % 3);
      checker.allGather(TESSEL_F32, 2u - i % 2, {2, 3}, i % 2);
    }
  }));
}

//===--- Options ----------------------------------------------------------===//

std::string createFailure(const tessel_ctx_options &options) {
  tessel_ctx *ctx = tessel_ctx_create(&options);
  if (ctx) {
    tessel_ctx_destroy(ctx);
    return "(created)";
  }
  const char *err = tessel_error(nullptr);
  return err ? err : "(no error)";
}

TEST(CommOptions, BadMeshAndCommOptionsFailWithReason) {
  tessel_local_world *world4 = tessel_local_world_create(4);
  tessel_local_world *world2 = tessel_local_world_create(2);
  auto base = [&] { return meshOptions(Mesh{2, 2}, 0, world4, 0); };

  tessel_ctx_options o = base();
  o.mesh_shape[1] = 3;
  EXPECT_NE(createFailure(o).find("mesh 2x3 has 6 ranks, world_size is 4"),
            std::string::npos)
      << createFailure(o);
  o = base();
  o.mesh_rank = 9;
  EXPECT_NE(createFailure(o).find("mesh_rank 9 outside [0, 8]"),
            std::string::npos);
  o = base();
  o.mesh_rank = -1;
  EXPECT_NE(createFailure(o).find("mesh_rank -1"), std::string::npos);
  o = base();
  o.mesh_shape[0] = 0;
  EXPECT_NE(createFailure(o).find("bad mesh axis size 0"), std::string::npos);
  o = base();
  o.local_world = nullptr;
  EXPECT_NE(createFailure(o).find("TESSEL_COMM_LOCAL without a local_world"),
            std::string::npos);
  o = base();
  o.local_world = world2;
  EXPECT_NE(createFailure(o).find("local world has 2 ranks"), std::string::npos)
      << createFailure(o);
  o = base();
  o.comm = TESSEL_COMM_NONE;
  EXPECT_NE(createFailure(o).find("TESSEL_COMM_NONE runs one rank"),
            std::string::npos);
  o = base();
  o.comm = 7;
  EXPECT_NE(createFailure(o).find("unknown comm kind 7"), std::string::npos);
  o = base();
  o.comm_timeout_seconds = -1;
  EXPECT_NE(createFailure(o).find("comm_timeout_seconds"), std::string::npos);
  o = base();
  o.comm_timeout_seconds = NAN;
  EXPECT_NE(createFailure(o).find("comm_timeout_seconds"), std::string::npos);
  // MPI in this process is never initialised (or not built in).
  o = base();
  o.comm = TESSEL_COMM_MPI;
  o.local_world = nullptr;
  std::string mpi = createFailure(o);
  EXPECT_TRUE(mpi.find("MPI is not initialised") != std::string::npos ||
              mpi.find("built without MPI") != std::string::npos)
      << mpi;

  // One context per rank of a local world; a destroyed one frees the rank.
  o = base();
  tessel_ctx *first = tessel_ctx_create(&o);
  ASSERT_NE(first, nullptr) << tessel_error(nullptr);
  EXPECT_NE(createFailure(o).find("rank 0 already has a context"),
            std::string::npos);
  tessel_ctx_destroy(first);
  EXPECT_EQ(createFailure(o), "(created)");

  tessel_local_world_destroy(world4);
  tessel_local_world_destroy(world2);
  EXPECT_EQ(tessel_local_world_create(0), nullptr);
}

// mesh_rank 0: the mesh is one axis of world_size ranks.
TEST(CommOptions, DefaultMeshIsOneAxisOfTheWorld) {
  tessel_local_world *world = tessel_local_world_create(3);
  tessel_ctx_options o{};
  o.backend = TESSEL_BACKEND_CPU;
  o.rank = 2;
  o.world_size = 3;
  o.comm = TESSEL_COMM_LOCAL;
  o.local_world = world;
  tessel_ctx *ctx = tessel_ctx_create(&o);
  ASSERT_NE(ctx, nullptr) << tessel_error(nullptr);
  EXPECT_EQ(tessel_ctx_mesh_rank(ctx), 1);
  EXPECT_EQ(tessel_ctx_mesh_size(ctx, 0), 3);
  EXPECT_EQ(tessel_ctx_mesh_coord(ctx, 0), 2);
  EXPECT_EQ(tessel_group_size(ctx, 1), 3);
  EXPECT_EQ(tessel_group_index(ctx, 1), 2);
  EXPECT_EQ(tessel_group_size(ctx, 0), 1);
  EXPECT_EQ(tessel_group_index(ctx, 0), 0);
  tessel_ctx_destroy(ctx);
  tessel_local_world_destroy(world);
}

} // namespace
