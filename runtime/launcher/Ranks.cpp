//===- Ranks.cpp - The ranks of a run and their contexts ------------------===//

#include "runtime/launcher/Ranks.h"
#include "runtime/launcher/Error.h"

#include <cstdlib>
#include <system_error>
#include <unistd.h>

using namespace tessel::run;

int32_t tessel::run::localDeviceOrdinal(int32_t rank, int32_t comm) {
  if (comm == TESSEL_COMM_LOCAL)
    return rank; // one process, a thread (and a GPU) per rank
  if (comm != TESSEL_COMM_MPI && comm != TESSEL_COMM_TCP)
    return 0;
  // One process per GPU: the launcher's local rank names the GPU (Open
  // MPI, MPICH/MVAPICH, Slurm, torchrun), else the rank itself.
  for (const char *name : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
                           "MV2_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID",
                           "LOCAL_RANK"})
    if (const char *value = std::getenv(name); value && *value) {
      char *end = nullptr;
      long local = std::strtol(value, &end, 10);
      if (*end == '\0' && local >= 0 && local < (1L << 20))
        return int32_t(local);
    }
  return rank;
}

tessel_ctx_options tessel::run::rankOptions(const std::optional<Mesh> &mesh,
                                            int32_t rank, int32_t comm,
                                            tessel_local_world *world) {
  tessel_ctx_options options = {};
  options.backend = TESSEL_BACKEND_CPU;
  options.rank = rank;
  options.world_size = int32_t(mesh ? mesh->worldSize() : 1);
  options.device = localDeviceOrdinal(rank, mesh ? comm : TESSEL_COMM_NONE);
  if (!mesh)
    return options;
  options.comm = comm;
  options.mesh_rank = int32_t(mesh->axes.size());
  for (size_t a = 0; a < mesh->shape.size(); ++a)
    options.mesh_shape[a] = mesh->shape[a];
  options.local_world = comm == TESSEL_COMM_LOCAL ? world : nullptr;
  return options;
}

tessel_ctx_options tessel::run::rankOptions(const ModelDesc &model,
                                            int32_t rank, int32_t comm,
                                            tessel_local_world *world) {
  return rankOptions(model.mesh, rank, comm, world);
}

std::optional<int64_t> tessel::run::availableMemoryBytes() {
  long pages = sysconf(_SC_AVPHYS_PAGES), pageSize = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || pageSize <= 0)
    return std::nullopt;
  return int64_t(pages) * int64_t(pageSize);
}

void tessel::run::checkRanksFitInMemory(int64_t ranks, int64_t arenaBytes,
                                        const std::string &contents) {
  std::optional<int64_t> available = availableMemoryBytes();
  if (!available || ranks <= 0 || arenaBytes <= 0)
    return; // Unknown: the allocations themselves will say.
  if (arenaBytes > *available / ranks)
    throw RunError("the arenas of " + std::to_string(ranks) + " ranks need " +
                   std::to_string(ranks) + " x " + std::to_string(arenaBytes) +
                   " bytes" + (contents.empty() ? "" : " (" + contents + ")") +
                   "; this host has " + std::to_string(*available) +
                   " bytes of memory available");
}

RankRuntime::RankRuntime(int64_t arenaBytes)
    : RankRuntime(arenaBytes, rankOptions(std::nullopt, /*rank=*/0,
                                          TESSEL_COMM_NONE, nullptr)) {}

RankRuntime::RankRuntime(int64_t arenaBytes,
                         const tessel_ctx_options &options,
                         const std::string &contents) {
  ctx = tessel_ctx_create(&options);
  if (!ctx) {
    const char *why = tessel_error(nullptr);
    throw RunError(std::string("cannot create the CPU context: ") +
                   (why ? why : "unknown error"));
  }
  arena = tessel_alloc(ctx, arenaBytes);
  if (!arena) {
    tessel_ctx_destroy(ctx);
    std::optional<int64_t> available = availableMemoryBytes();
    throw RunError(
        "cannot allocate the arena of rank " + std::to_string(options.rank) +
        " (" + std::to_string(arenaBytes) + " bytes" +
        (contents.empty() ? "" : ": " + contents) + ")" +
        (available ? "; this host has " + std::to_string(*available) +
                         " bytes of memory available"
                   : std::string()));
  }
}

RankRuntime::~RankRuntime() {
  tessel_free(ctx, arena);
  tessel_ctx_destroy(ctx);
}

void tessel::run::checkKernelError(tessel_ctx *ctx, const std::string &when) {
  if (const char *error = tessel_error(ctx))
    throw RunError(when + ": " + error);
}

LocalRanks::LocalRanks(int32_t size) : ranks(size) {
  if (size > kMaxLocalRanks)
    throw RunError("a mesh of " + std::to_string(size) +
                   " ranks: ranks as threads run at most " +
                   std::to_string(kMaxLocalRanks) +
                   " in one process (use --comm mpi to spread them over "
                   "processes)");
  if (size == 1)
    return;
  localWorld = tessel_local_world_create(size);
  if (!localWorld) {
    const char *why = tessel_error(nullptr);
    throw RunError("cannot create the ranks' shared state (" +
                   std::to_string(size) +
                   " ranks): " + (why ? why : "unknown error"));
  }
}

LocalRanks::~LocalRanks() {
  if (!threads.empty()) {
    stop("the ranks were stopped");
    for (std::thread &t : threads)
      t.join();
  }
  if (localWorld)
    tessel_local_world_destroy(localWorld);
}

void LocalRanks::setInterruptHook(
    std::function<void(const std::string &why)> hook) {
  interruptHook = std::move(hook);
}

void LocalRanks::start(const std::function<void(int32_t rank)> &body) {
  for (int32_t rank = 0; rank < ranks; ++rank) {
    try {
      threads.emplace_back([this, body, rank] {
        try {
          body(rank);
        } catch (const RunError &e) {
          fail(rank, e.what(), e.exitCode);
        } catch (const std::exception &e) {
          fail(rank, e.what(), 1);
        } catch (...) {
          fail(rank, "unknown error", 1);
        }
      });
    } catch (const std::system_error &e) {
      // The ranks already running wait in a collective for this one: stop
      // them, then report the rank that could not start.
      std::string why = "cannot start rank " + std::to_string(rank) + " of " +
                        std::to_string(ranks) + " as a thread: " + e.what();
      stop(why);
      for (std::thread &t : threads)
        t.join();
      threads.clear();
      throw RunError(why);
    }
  }
}

void LocalRanks::stop(const std::string &why) {
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (firstError.empty())
      stopped = true;
  }
  // No rank failed: the peers' errors name rank 0, and join() drops them.
  interrupt(0, why, why);
}

void LocalRanks::join() {
  for (std::thread &t : threads)
    t.join();
  threads.clear();
  if (!firstError.empty() && !stopped)
    throw RunError(firstError, exitCode);
}

void LocalRanks::fail(int32_t rank, const std::string &what, int code) {
  std::string named = "rank " + std::to_string(rank) + ": " + what;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (firstError.empty()) {
      firstError = named;
      exitCode = code;
    }
  }
  // After recording: the peers' "rank R failed" errors come second.
  interrupt(rank, what, named);
}

void LocalRanks::interrupt(int32_t rank, const std::string &message,
                           const std::string &reason) {
  if (localWorld)
    tessel_local_world_abort(localWorld, rank, message.c_str());
  if (interruptHook)
    interruptHook(reason);
}
