//===- LibraryTestSupport.h - Calling the launcher library in tests -------===//
//
// The helpers the in-process tests of the launcher library share: the
// message of a RunError or UsageError, and the command line parsed as
// tessel-run parses it.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_RUN_TEST_LIBRARYTESTSUPPORT_H
#define TESSEL_RUN_TEST_LIBRARYTESTSUPPORT_H

#include "runtime/launcher/Args.h"
#include "runtime/launcher/Error.h"

#include <functional>
#include <string>
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

} // namespace tessel::run::test

#endif // TESSEL_RUN_TEST_LIBRARYTESTSUPPORT_H
