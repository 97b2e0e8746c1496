//===- Torchrun.cpp - Parsing and checking torchrun's environment ---------===//

#include "runtime/launcher/Torchrun.h"
#include "runtime/launcher/Error.h"

#include <cerrno>
#include <cstdlib>

using namespace tessel::run;

namespace {

const char *kNeeded = "--comm tcp needs RANK, WORLD_SIZE, MASTER_ADDR and "
                      "MASTER_PORT, as torchrun sets them";

/// The variable's value; throws when unset or empty and `required`.
const char *lookup(const EnvLookup &env, const char *name, bool required) {
  const char *value = env(name);
  if (value && *value)
    return value;
  if (required)
    throw UsageError(std::string("torchrun environment: ") + name +
                     " is not set (" + kNeeded + ")");
  return nullptr;
}

/// A decimal integer in [lo, hi]; throws naming the variable otherwise.
int64_t integer(const char *name, const char *value, int64_t lo, int64_t hi) {
  errno = 0;
  char *end = nullptr;
  long long v = std::strtoll(value, &end, 10);
  if (end == value || *end != '\0' || errno == ERANGE)
    throw UsageError(std::string("torchrun environment: ") + name + "='" +
                     value + "' is not an integer");
  if (v < lo || v > hi)
    throw UsageError(std::string("torchrun environment: ") + name + "=" +
                     value + " is out of range [" + std::to_string(lo) + ", " +
                     std::to_string(hi) + "]");
  return v;
}

bool isTrue(const char *value) {
  if (!value)
    return false;
  const std::string v = value;
  return v == "True" || v == "true" || v == "TRUE" || v == "1";
}

} // namespace

EnvLookup tessel::run::processEnv() {
  return [](const char *name) -> const char * { return std::getenv(name); };
}

bool tessel::run::torchrunDetected(const EnvLookup &env) {
  return lookup(env, "RANK", false) && lookup(env, "WORLD_SIZE", false);
}

TorchrunEnv tessel::run::parseTorchrunEnv(const EnvLookup &env) {
  // Ranks are int32 in the runtime; a million processes is far beyond any
  // launch and keeps the arithmetic below exact.
  constexpr int64_t kMaxWorld = 1 << 20;
  TorchrunEnv t;
  t.worldSize = int32_t(
      integer("WORLD_SIZE", lookup(env, "WORLD_SIZE", true), 1, kMaxWorld));
  t.rank =
      int32_t(integer("RANK", lookup(env, "RANK", true), 0, t.worldSize - 1));
  if (const char *v = lookup(env, "LOCAL_WORLD_SIZE", false))
    t.localWorldSize =
        int32_t(integer("LOCAL_WORLD_SIZE", v, 1, int64_t(t.worldSize)));
  if (const char *v = lookup(env, "LOCAL_RANK", false))
    t.localRank = int32_t(integer("LOCAL_RANK", v, 0,
                                  lookup(env, "LOCAL_WORLD_SIZE", false)
                                      ? int64_t(t.localWorldSize) - 1
                                      : kMaxWorld));
  t.masterAddr = lookup(env, "MASTER_ADDR", true);
  t.masterPort = int32_t(
      integer("MASTER_PORT", lookup(env, "MASTER_PORT", true), 1, 65535));
  t.agentStore = isTrue(env("TORCHELASTIC_USE_AGENT_STORE"));
  t.rendezvousPort = t.masterPort;
  if (t.agentStore) {
    if (t.masterPort == 65535)
      throw UsageError("torchrun environment: MASTER_PORT=65535 is taken by "
                       "torchrun's store (TORCHELASTIC_USE_AGENT_STORE) and "
                       "the rendezvous needs MASTER_PORT + 1");
    t.rendezvousPort = t.masterPort + 1;
  }
  if (const char *key = lookup(env, "TESSEL_RENDEZVOUS_KEY", false)) {
    t.key = key;
    if (t.key.size() > 4096)
      throw UsageError("TESSEL_RENDEZVOUS_KEY is longer than 4096 bytes");
  } else {
    const char *runId = lookup(env, "TORCHELASTIC_RUN_ID", false);
    t.key = std::string("tessel:") + (runId ? runId : "none") + ":" +
            std::to_string(t.worldSize) + ":" + t.masterAddr + ":" +
            std::to_string(t.masterPort);
  }
  return t;
}
