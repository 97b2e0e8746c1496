//===- comm_mpi_check.cpp - The MPI backend against reference collectives -===//
//
// Run as 4 MPI processes (mpirun -np 4): a 2x2 mesh, every collective on
// every mask against the same plain-loop references as the local backend's
// tests (CommReference.h), bit for bit, plus the counters. Each process
// exits non-zero if any of its checks failed; rank 0 prints OK when the whole
// world passed.
//
//===----------------------------------------------------------------------===//

#include "CommReference.h"

#include <cstdio>

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
  int failed = checker.failures() + checkCounters(ctx, rank);

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
