//===- Ranks.h - The ranks of a run and their contexts --------------------===//
//
// A run has one rank per device of the model's mesh (one without a mesh),
// each with its own runtime context and arena. The ranks are threads of one
// process on a shared tessel_local_world (LocalRanks), or one MPI process
// each (the caller's rank alone, TESSEL_COMM_MPI). tessel-run and the
// benchmarks set their ranks up with these pieces alike.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_LAUNCHER_RANKS_H
#define TESSEL_LAUNCHER_RANKS_H

#include "runtime/launcher/ModelDescription.h"
#include "tessel/runtime.h"

#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace tessel::run {

/// The GPU a rank's context binds (tessel_ctx_options.device; the CPU
/// ignores it): ranks as threads take one device each (rank r, device r);
/// an MPI process takes its node-local rank from the launcher's environment
/// (OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID, MV2_COMM_WORLD_LOCAL_RANK,
/// SLURM_LOCALID, LOCAL_RANK), else its rank. A mesh needing more GPUs than
/// the host has fails at context creation, naming the device and the count.
int32_t localDeviceOrdinal(int32_t rank, int32_t comm);

/// The context options of rank `rank` of `mesh`: `comm` a tessel_comm_kind
/// (`world` for TESSEL_COMM_LOCAL). Without a mesh: rank 0 of 1, no
/// communication.
tessel_ctx_options rankOptions(const std::optional<Mesh> &mesh, int32_t rank,
                               int32_t comm, tessel_local_world *world);

/// rankOptions of the mesh `model` was compiled for.
tessel_ctx_options rankOptions(const ModelDesc &model, int32_t rank,
                               int32_t comm, tessel_local_world *world);

/// The CPU context of one rank and its arena, freed together.
struct RankRuntime {
  tessel_ctx *ctx = nullptr;
  void *arena = nullptr;

  /// Rank 0 of 1.
  explicit RankRuntime(int64_t arenaBytes);
  /// The rank `options` describe (its mesh and communication).
  /// `contents`: what the arena holds (describeArena), for the error when
  /// it cannot be allocated.
  RankRuntime(int64_t arenaBytes, const tessel_ctx_options &options,
              const std::string &contents = "");
  ~RankRuntime();
  RankRuntime(const RankRuntime &) = delete;
  RankRuntime &operator=(const RankRuntime &) = delete;
};

/// A kernel error (e.g. a label out of range) makes every later number
/// meaningless: throws RunError naming `when`.
void checkKernelError(tessel_ctx *ctx, const std::string &when);

/// `size` ranks as threads of this process, sharing one tessel_local_world
/// (none for a single rank). A rank that fails must not leave its peers
/// waiting for it: the first failure is recorded, the world aborted (a peer
/// in a collective, or entering one, returns with "rank R failed") and the
/// interrupt hook called, so peers waiting on the caller's own
/// synchronisation (a benchmark's barriers) can be released too.
/// The most ranks one process runs as threads (each a thread, a context
/// and an arena); larger meshes run under MPI.
inline constexpr int32_t kMaxLocalRanks = 1024;

/// Throws RunError when `ranks` arenas of `arenaBytes` do not fit in the
/// memory this host has available, before any rank starts.
void checkRanksFitInMemory(int64_t ranks, int64_t arenaBytes,
                           const std::string &contents = "");
/// The bytes of memory this host has free now; nullopt when unknown.
std::optional<int64_t> availableMemoryBytes();

class LocalRanks {
public:
  /// Creates the world; throws RunError for more than kMaxLocalRanks ranks
  /// or when the runtime cannot.
  explicit LocalRanks(int32_t size);
  /// Stops and joins threads still running, then destroys the world (after
  /// every context on it: the ranks' contexts live in their threads).
  ~LocalRanks();
  LocalRanks(const LocalRanks &) = delete;
  LocalRanks &operator=(const LocalRanks &) = delete;

  int32_t size() const { return ranks; }
  /// The shared state the ranks' contexts are created on (TESSEL_COMM_LOCAL);
  /// null for a single rank.
  tessel_local_world *world() const { return localWorld; }

  /// Called on every interruption, after the world is aborted: a rank's
  /// failure (from its thread, with "rank R: ...") or stop() (with its
  /// reason).
  void setInterruptHook(std::function<void(const std::string &why)> hook);

  /// One thread per rank, each running `body(rank)`. A thread that cannot
  /// be started stops the others and throws RunError naming its rank.
  void start(const std::function<void(int32_t rank)> &body);

  /// Makes every rank return from its next collective (or the hook's
  /// synchronisation) with an error: something outside these ranks failed,
  /// and join() will not report the errors that follow.
  void stop(const std::string &why);

  /// Waits for every rank; throws RunError "rank R: ..." (with that rank's
  /// exit code) for the first rank that failed, unless stop() came first.
  void join();

private:
  void fail(int32_t rank, const std::string &what, int exitCode);
  /// Aborts the world as rank `rank` with `message`, then calls the hook.
  void interrupt(int32_t rank, const std::string &message,
                 const std::string &reason);

  int32_t ranks;
  tessel_local_world *localWorld = nullptr;
  std::function<void(const std::string &)> interruptHook;
  std::vector<std::thread> threads;
  std::mutex mutex;
  std::string firstError;
  int exitCode = 1;
  bool stopped = false;
};

} // namespace tessel::run

#endif // TESSEL_LAUNCHER_RANKS_H
