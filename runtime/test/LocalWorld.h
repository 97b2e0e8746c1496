//===- LocalWorld.h - Ranks as threads of a local world ---------*- C++ -*-===//
//
// The collectives' and point-to-point tests run one thread per rank of a
// tessel_local_world; these build each rank's options and run a body on
// every rank, collecting the error each context ends with.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_RUNTIME_TEST_LOCALWORLD_H
#define TESSEL_RUNTIME_TEST_LOCALWORLD_H

#include "CommReference.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace tt {

/// A CPU context's options for `rank` of a world shaped `mesh` whose
/// ranks talk through `comm`.
inline tessel_ctx_options rankOptions(const Mesh &mesh, int rank, int32_t comm,
                                      double timeout) {
  tessel_ctx_options options{};
  options.backend = TESSEL_BACKEND_CPU;
  options.rank = rank;
  options.world_size = int32_t(meshRanks(mesh));
  options.comm = comm;
  options.mesh_rank = int32_t(mesh.size());
  for (size_t a = 0; a < mesh.size(); ++a)
    options.mesh_shape[a] = mesh[a];
  options.comm_timeout_seconds = timeout;
  return options;
}

inline tessel_ctx_options meshOptions(const Mesh &mesh, int rank,
                                      tessel_local_world *world,
                                      double timeout) {
  tessel_ctx_options options =
      rankOptions(mesh, rank, TESSEL_COMM_LOCAL, timeout);
  options.local_world = world;
  return options;
}

using RankBody =
    std::function<void(tessel_ctx *, int rank, tessel_local_world *)>;

/// Runs `body` on one thread per rank of a local world shaped `mesh` and
/// returns the error each rank's context holds afterwards ("" for none). A
/// rank that ends with an error aborts the world, so a failing test returns
/// instead of leaving its peers waiting.
inline std::vector<std::string> runRanks(const Mesh &mesh, const RankBody &body,
                                         double timeout = 30) {
  const int world = int(meshRanks(mesh));
  tessel_local_world *localWorld = tessel_local_world_create(world);
  std::vector<std::string> errors(static_cast<size_t>(world));
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      tessel_ctx_options options = meshOptions(mesh, r, localWorld, timeout);
      tessel_ctx *ctx = tessel_ctx_create(&options);
      if (!ctx) {
        errors[size_t(r)] = std::string("create: ") + tessel_error(nullptr);
        tessel_local_world_abort(localWorld, r, "no context");
        return;
      }
      body(ctx, r, localWorld);
      if (const char *err = tessel_error(ctx)) {
        errors[size_t(r)] = err;
        tessel_local_world_abort(localWorld, r, err);
      }
      tessel_ctx_destroy(ctx);
    });
  for (std::thread &t : threads)
    t.join();
  tessel_local_world_destroy(localWorld);
  return errors;
}

inline void expectNoErrors(const std::vector<std::string> &errors) {
  for (size_t r = 0; r < errors.size(); ++r)
    EXPECT_EQ(errors[r], "") << "rank " << r;
}

} // namespace tt

#endif // TESSEL_RUNTIME_TEST_LOCALWORLD_H
