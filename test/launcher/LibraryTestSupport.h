//===- LibraryTestSupport.h - Calling the launcher library in tests -------===//
//
// The helpers the in-process tests of the launcher library share: the
// message of a RunError or UsageError, the command line parsed as
// tessel-run parses it, and a body run on every rank of a local world.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_RUN_TEST_LIBRARYTESTSUPPORT_H
#define TESSEL_RUN_TEST_LIBRARYTESTSUPPORT_H

#include "runtime/launcher/Args.h"
#include "runtime/launcher/Error.h"
#include "runtime/launcher/ModelDescription.h"
#include "runtime/launcher/Ranks.h"

#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace tessel::run::test {

/// The message of the RunError `f` throws ("" if none).
inline std::string errorOf(const std::function<void()> &f) {
  try {
    f();
  } catch (const RunError &e) {
    return e.what();
  }
  return "";
}

/// `args` (without the program name) parsed as tessel-run's command line.
inline Options parseFlags(std::vector<std::string> args) {
  args.insert(args.begin(), "tessel-run");
  std::vector<char *> argv;
  for (std::string &a : args)
    argv.push_back(a.data());
  return parseArgs(int(argv.size()), argv.data());
}

/// The message of the UsageError parsing `args` throws ("" if none).
inline std::string usageErrorOf(std::vector<std::string> args) {
  try {
    parseFlags(std::move(args));
  } catch (const UsageError &e) {
    return e.what();
  }
  return "";
}

/// Runs `body(rank, rt)` on every rank of `model`'s mesh as threads of one
/// local world; returns the first failure ("" if none).
inline std::string
onLocalWorld(const ModelDesc &model,
             const std::function<void(int32_t, RankRuntime &)> &body) {
  int32_t n = int32_t(model.worldSize());
  tessel_local_world *world = tessel_local_world_create(n);
  std::mutex mutex;
  std::string failure;
  std::vector<std::thread> threads;
  for (int32_t r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        RankRuntime rt(model.arenaBytes,
                       rankOptions(model, r, TESSEL_COMM_LOCAL, world));
        body(r, rt);
      } catch (const std::exception &e) {
        std::lock_guard<std::mutex> lock(mutex);
        if (failure.empty())
          failure = "rank " + std::to_string(r) + ": " + e.what();
        tessel_local_world_abort(world, r, e.what());
      }
    });
  for (std::thread &t : threads)
    t.join();
  tessel_local_world_destroy(world);
  return failure;
}

} // namespace tessel::run::test

#endif // TESSEL_RUN_TEST_LIBRARYTESTSUPPORT_H
