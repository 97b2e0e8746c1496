//===- Args.h - tessel-run's command line ---------------------------------===//

#ifndef TESSEL_RUN_ARGS_H
#define TESSEL_RUN_ARGS_H

#include <cstdint>
#include <string>

namespace tessel::run {

enum class TokenDtype { U8, U16, I32 };

struct Options {
  std::string model; // MODEL.so or MODEL.mlir
  int64_t steps = 10;
  uint64_t seed = 0;
  std::string data;
  TokenDtype dataDtype = TokenDtype::U16;
  std::string metrics;
  std::string save;
  std::string load;
  int64_t logEvery = 10;
  bool quiet = false;
  bool help = false;
};

/// Parses argv; throws UsageError on an unknown flag, a missing or bad value
/// or a missing model path (unless --help).
Options parseArgs(int argc, char **argv);

/// The full --help text.
std::string usageText();

} // namespace tessel::run

#endif // TESSEL_RUN_ARGS_H
