//===- BenchSupport.h - What the benchmarks share ---------------*- C++ -*-===//
//
// Timing helpers, errors, the benchmarks' command line, and the two pieces
// of state a training-step benchmark keeps around a timed run: a pool of
// batches drawn before timing and the parameters and optimizer state to
// restart from.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_BENCH_BENCHSUPPORT_H
#define TESSEL_BENCH_BENCHSUPPORT_H

#include "runtime/launcher/Data.h"
#include "runtime/launcher/ModelDescription.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace tessel::bench {

/// A benchmark's failure: printed and exit 1.
struct BenchError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// The flags every benchmark takes.
struct CommonOptions {
  std::vector<std::string> models; // MODEL.mlir arguments
  int runs = 7;
  double minTime = 0.2;
  uint64_t seed = 0;
  bool header = true;
  bool verbose = false;
};

/// The benchmarks' one command-line parser. parse() walks argv; a
/// benchmark's own flags read their values with value(i), the argument
/// after flag argv[i] (moving i to it), and number(i), that value as a
/// positive number; each throws a BenchError naming the flag.
class FlagReader {
public:
  FlagReader(int argc, char **argv) : argc(argc), argv(argv) {}

  /// Takes the benchmark's own flag argv[i] (`flag`); false when it is not
  /// one of them.
  using OwnFlag = std::function<bool(const std::string &flag, int &i)>;

  /// MODEL arguments, -h/--help (usage(0)), --runs, --min-time, --seed,
  /// --no-header and --verbose into `options`, any other flag through
  /// `own`. Then usage(2) when `nothingToRun()`; throws BenchError on an
  /// unknown option or --runs below 1.
  void parse(CommonOptions &options, const OwnFlag &own,
             void (*usage)(int status),
             const std::function<bool()> &nothingToRun) const {
    for (int i = 1; i < argc; ++i) {
      std::string arg = argv[i];
      if (arg == "-h" || arg == "--help")
        usage(0);
      else if (arg == "--runs")
        options.runs = int(number(i));
      else if (arg == "--min-time")
        options.minTime = number(i);
      else if (arg == "--seed")
        options.seed = uint64_t(std::strtoull(value(i).c_str(), nullptr, 10));
      else if (arg == "--no-header")
        options.header = false;
      else if (arg == "--verbose" || arg == "-v")
        options.verbose = true;
      else if (own(arg, i))
        continue;
      else if (!arg.empty() && arg[0] == '-')
        throw BenchError("unknown option " + arg + " (see --help)");
      else
        options.models.push_back(arg);
    }
    if (nothingToRun())
      usage(2);
    if (options.runs < 1)
      throw BenchError("--runs must be at least 1");
  }

  std::string value(int &i) const {
    if (i + 1 >= argc)
      throw BenchError(std::string(argv[i]) + " needs a value");
    return argv[++i];
  }

  double number(int &i) const {
    std::string flag = argv[i], text = value(i);
    char *end = nullptr;
    double v = std::strtod(text.c_str(), &end);
    if (text.empty() || *end || !std::isfinite(v) || v <= 0)
      throw BenchError(flag + " needs a positive number, got '" + text + "'");
    return v;
  }

private:
  int argc;
  char **argv;
};

/// Seconds on a steady clock.
inline double now() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

inline double median(std::vector<double> v) {
  if (v.empty())
    return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/// A progress line on stderr, after the program's name.
inline void progress(const char *program, const std::string &line) {
  std::fprintf(stderr, "%s: %s\n", program, line.c_str());
}

/// Batches drawn once from `source` (global microbatches 0, 1, ...) and
/// kept on the host; a step copies the next one into the arena, as
/// tessel-run's data source does. Fresh samples keep a model from
/// memorising one batch; drawing them before timing keeps data generation
/// (whose cost depends on the mesh in its own way) out of the step's time.
/// The copy stays in.
class BatchPool : public tessel::run::BatchSource {
public:
  /// At most 64 batches and 64 MiB; step i reads batch i mod that count.
  BatchPool(const tessel::run::ModelDesc &desc,
            tessel::run::BatchSource &source, tessel_ctx *ctx, void *arena)
      : feeds(desc.feeds()) {
    int64_t bytes = 0;
    for (const tessel::run::TensorDesc *t : feeds)
      bytes += t->bytes;
    int64_t count = std::clamp<int64_t>(
        (int64_t(64) << 20) / std::max<int64_t>(bytes, 1), 1, 64);
    const char *base = static_cast<const char *>(arena);
    for (int64_t b = 0; b < count; ++b) {
      source.fill(b, ctx, arena);
      std::vector<std::vector<char>> batch;
      for (const tessel::run::TensorDesc *t : feeds) {
        batch.emplace_back(size_t(t->bytes));
        tessel_copy_to_host(ctx, batch.back().data(), base + t->offset,
                            t->bytes);
      }
      batches.push_back(std::move(batch));
    }
    tessel_synchronize(ctx);
  }

  void fill(int64_t index, tessel_ctx *ctx, void *arena) override {
    const std::vector<std::vector<char>> &batch =
        batches[size_t(index) % batches.size()];
    for (size_t i = 0; i < feeds.size(); ++i)
      tessel_copy_to_device(ctx, static_cast<char *>(arena) + feeds[i]->offset,
                            batch[i].data(), int64_t(batch[i].size()));
  }

  size_t size() const { return batches.size(); }

private:
  std::vector<const tessel::run::TensorDesc *> feeds;
  std::vector<std::vector<std::vector<char>>> batches;
};

/// The parameters and optimizer state, copied aside once, so that every
/// timed run of training steps starts from the same point (on every mesh).
/// The grads need no copy: each step zeroes them.
class TrainingState {
public:
  TrainingState(const tessel::run::ModelDesc &desc, tessel_ctx *ctx,
                void *arena)
      : ctx(ctx), arena(static_cast<char *>(arena)) {
    for (const char *role : {"param", "state"})
      for (const tessel::run::TensorDesc *t : desc.withRole(role)) {
        saved.push_back({t->offset, std::vector<char>(size_t(t->bytes))});
        tessel_copy_to_host(ctx, saved.back().second.data(),
                            this->arena + t->offset, t->bytes);
      }
    tessel_synchronize(ctx);
  }

  void restore() {
    for (const auto &[offset, bytes] : saved)
      tessel_copy_to_device(ctx, arena + offset, bytes.data(),
                            int64_t(bytes.size()));
    tessel_synchronize(ctx);
  }

private:
  tessel_ctx *ctx;
  char *arena;
  std::vector<std::pair<int64_t, std::vector<char>>> saved;
};

} // namespace tessel::bench

#endif // TESSEL_BENCH_BENCHSUPPORT_H
