//===- Args.cpp - Parsing tessel-run's command line -----------------------===//

#include "Args.h"
#include "Error.h"

#include <cerrno>
#include <cstdlib>
#include <functional>
#include <map>

using namespace tessel::run;

std::string tessel::run::usageText() {
  return R"(usage: tessel-run MODEL.so|MODEL.mlir [flags]

Runs a model compiled by tessel-compile on the CPU runtime (rank 0 of 1).
Each step evaluates the loss; training comes with autodiff. A .mlir model is
first compiled with the tessel-compile found next to tessel-run.

flags:
  --steps N             steps to run (default 10)
  --seed S              seed of parameter init and synthetic data (default 0)
  --data FILE           token file for a language model: .bin (see
                        --data-dtype) or a 1-D .npy of i4/u2/i8; batch rows are
                        consecutive windows, labels shifted by one token
  --data-dtype u8|u16|i32  element type of a .bin token file (default u16;
                        u8 reads any file as bytes: a character-level corpus)
  --metrics FILE        write one JSON object per step (step, loss,
                        tokens_per_s, step_ms)
  --save FILE           write the parameters as .safetensors at the end
  --load FILE           read the parameters from a .safetensors file instead
                        of initialising them
  --log-every N         progress line every N steps when stderr is not a
                        terminal (default 10)
  --quiet               no progress and no summary
  --help                this text
)";
}

namespace {

[[noreturn]] void failUsage(const std::string &message) {
  throw UsageError(message);
}

int64_t parseInteger(const std::string &flag, const std::string &text,
                     int64_t min) {
  errno = 0;
  char *end = nullptr;
  long long value = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno == ERANGE || value < min)
    failUsage("bad value '" + text + "' for " + flag + " (expected an integer" +
              (min > 0 ? " >= " + std::to_string(min) : "") + ")");
  return value;
}

uint64_t parseSeed(const std::string &text) {
  errno = 0;
  char *end = nullptr;
  unsigned long long value = std::strtoull(text.c_str(), &end, 10);
  // strtoull accepts "-1" and wraps it; a seed is written as a plain number.
  if (text.empty() || text[0] == '-' || *end != '\0' || errno == ERANGE)
    failUsage("bad value '" + text +
              "' for --seed (expected a non-negative integer)");
  return value;
}

TokenDtype parseTokenDtype(const std::string &text) {
  if (text == "u8")
    return TokenDtype::U8;
  if (text == "u16")
    return TokenDtype::U16;
  if (text == "i32")
    return TokenDtype::I32;
  failUsage("bad value '" + text + "' for --data-dtype (expected u8, u16 or i32)");
}

using ValueSetter = std::function<void(Options &, const std::string &)>;

const std::map<std::string, ValueSetter> &valueFlags() {
  static const std::map<std::string, ValueSetter> flags = {
      {"--steps",
       [](Options &o, const std::string &v) {
         o.steps = parseInteger("--steps", v, 1);
       }},
      {"--seed",
       [](Options &o, const std::string &v) { o.seed = parseSeed(v); }},
      {"--data", [](Options &o, const std::string &v) { o.data = v; }},
      {"--data-dtype",
       [](Options &o, const std::string &v) {
         o.dataDtype = parseTokenDtype(v);
       }},
      {"--metrics", [](Options &o, const std::string &v) { o.metrics = v; }},
      {"--save", [](Options &o, const std::string &v) { o.save = v; }},
      {"--load", [](Options &o, const std::string &v) { o.load = v; }},
      {"--log-every",
       [](Options &o, const std::string &v) {
         o.logEvery = parseInteger("--log-every", v, 1);
       }},
  };
  return flags;
}

} // namespace

Options tessel::run::parseArgs(int argc, char **argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      options.help = true;
      continue;
    }
    if (arg == "--quiet") {
      options.quiet = true;
      continue;
    }
    if (arg.size() > 1 && arg[0] == '-') {
      // Both "--flag value" and "--flag=value".
      std::string name = arg, value;
      bool inlineValue = false;
      if (size_t eq = arg.find('='); eq != std::string::npos) {
        name = arg.substr(0, eq);
        value = arg.substr(eq + 1);
        inlineValue = true;
      }
      auto flag = valueFlags().find(name);
      if (flag == valueFlags().end())
        failUsage("unknown flag '" + name + "'");
      if (!inlineValue) {
        if (i + 1 >= argc)
          failUsage("missing value for " + name);
        value = argv[++i];
      }
      if (value.empty())
        failUsage("empty value for " + name);
      flag->second(options, value);
      continue;
    }
    if (!options.model.empty())
      failUsage("more than one model given ('" + options.model + "' and '" +
                arg + "')");
    options.model = arg;
  }
  if (options.model.empty() && !options.help)
    failUsage("no model given");
  return options;
}
