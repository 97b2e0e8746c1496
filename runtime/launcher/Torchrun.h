//===- Torchrun.h - The rank and rendezvous torchrun's environment names -===//
//
// `torchrun --nproc-per-node N ... tessel-run MODEL` starts N processes and
// tells each who it is through the environment: RANK, WORLD_SIZE,
// LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT (and
// TORCHELASTIC_USE_AGENT_STORE=True when torchrun's own TCP store already
// listens on MASTER_PORT). tessel-run reads them, checks them, and runs its
// rank over TESSEL_COMM_TCP with rank 0 listening on the rendezvous port.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_RUN_TORCHRUN_H
#define TESSEL_RUN_TORCHRUN_H

#include <cstdint>
#include <functional>
#include <string>

namespace tessel::run {

/// Looks a variable up (null when unset); std::getenv by default, a map in
/// tests.
using EnvLookup = std::function<const char *(const char *)>;
EnvLookup processEnv();

/// This process's place in a torchrun (or torchrun-like) launch.
struct TorchrunEnv {
  int32_t rank = 0;
  int32_t worldSize = 1;
  int32_t localRank = 0;      /// picks the GPU
  int32_t localWorldSize = 1; /// LOCAL_WORLD_SIZE, or 1 when unset
  std::string masterAddr;
  int32_t masterPort = 0;
  /// TORCHELASTIC_USE_AGENT_STORE is true: torchrun's store owns
  /// MASTER_PORT, so the rendezvous listens on MASTER_PORT + 1.
  bool agentStore = false;
  int32_t rendezvousPort = 0;
  /// Shared by the processes of one launch and by no other:
  /// TESSEL_RENDEZVOUS_KEY, else one made of TORCHELASTIC_RUN_ID, the
  /// world size and the master's address.
  std::string key;
};

/// Whether the environment is a torchrun launch: RANK and WORLD_SIZE are
/// set (tessel-run then uses --comm tcp unless --comm says otherwise).
bool torchrunDetected(const EnvLookup &env);

/// Reads and checks the variables; throws UsageError naming the variable
/// and what is wrong (missing, not an integer, out of range) otherwise.
TorchrunEnv parseTorchrunEnv(const EnvLookup &env);

} // namespace tessel::run

#endif // TESSEL_RUN_TORCHRUN_H
