//===- Error.h - tessel-run's error type ----------------------------------===//

#ifndef TESSEL_RUN_ERROR_H
#define TESSEL_RUN_ERROR_H

#include <stdexcept>
#include <string>

namespace tessel::run {

/// A fatal, user-facing problem: main() prints the one-line message and exits
/// with `exitCode` (2 for usage errors, 1 for everything else).
struct RunError : std::runtime_error {
  RunError(const std::string &message, int exitCode = 1)
      : std::runtime_error(message), exitCode(exitCode) {}
  int exitCode;
};

/// A bad command line: exit 2 with a hint to read --help.
struct UsageError : RunError {
  explicit UsageError(const std::string &message) : RunError(message, 2) {}
};

} // namespace tessel::run

#endif // TESSEL_RUN_ERROR_H
