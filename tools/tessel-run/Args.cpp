//===- Args.cpp - Parsing tessel-run's command line -----------------------===//

#include "Args.h"
#include "Error.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <map>

using namespace tessel::run;

std::string tessel::run::usageText() {
  return R"(usage: tessel-run MODEL.so|MODEL.mlir [flags]

Runs a model compiled by tessel-compile on the CPU runtime: on one device,
or on every rank of the mesh a partitioned model was compiled for (see
parallel flags). A model compiled for training (backward and update entries)
trains by default: each step zeroes the gradients, runs the backward entry on
each microbatch (gradients accumulate), writes 1/M to the gradient scale and
applies the optimizer once. A model compiled without training evaluates the
loss. A .mlir model is first compiled with the tessel-compile found next to
tessel-run, given the training and parallel flags below.

flags:
  --steps N             steps to run (default 10); a run resumed with --load
                        continues the step count of the checkpoint
  --microbatches M      microbatches per step (default 1): the model's inputs
                        are one microbatch of batch B, a step sees the global
                        batch M x B (the samples one batch of M x B would
                        see); its loss is the mean of the M losses
  --eval                evaluate the loss only (the forward entry), no update;
                        a .mlir is compiled without training (--no-train)
  --check-grads         gradient check (as torch.autograd.gradcheck): for each
                        trainable parameter compare the backward entry's
                        gradient (one call on the first microbatch) with
                        central finite differences of the forward entry's
                        loss on up to 32 sampled elements (the largest
                        |gradient| among them); prints one line per
                        parameter and exits 1 when a relative error exceeds
                        --grad-tol. Relative error: |a - f| / max(|a|, |f|,
                        1e-3 * s), a the backward's value, f the finite
                        difference, s the largest |gradient| element over
                        all parameters. f: the four-point stencil from step
                        h = 0.1 * max(1, |x|) (f64: 1e-3 * max(1, |x|)),
                        halved until two estimates agree within the loss's
                        rounding noise
  --grad-tol T          tolerance of --check-grads (default 1e-6 for f64
                        parameters, 2e-2 for f32, 2e-1 for f16/bf16)
  --seed S              seed of parameter init and synthetic data (default 0);
                        synthetic samples are N(0, 1) floats and uniform
                        integers, except a classifier's labels: the class a
                        fixed random linear teacher gives the first 16
                        features (a task it can learn)
  --data FILE           token file for a language model: .bin (see
                        --data-dtype) or a 1-D .npy of i4/u2/i8; batch rows are
                        consecutive windows, labels shifted by one token
  --data-dtype u8|u16|i32  element type of a .bin token file (default u16;
                        u8 reads any file as bytes: a character-level corpus)
  --metrics FILE        write one JSON object per step (step, loss, lr,
                        microbatches, tokens_per_s, step_ms, allocated_bytes)
  --save FILE           write the parameters as .safetensors at the end; a
                        training run adds the optimizer state and the step
                        count (metadata "tessel.step")
  --load FILE           read the parameters (and optimizer state and step, if
                        saved by a training run) from a .safetensors file
                        instead of initialising them
  --log-every N         progress line every N steps when stderr is not a
                        terminal (default 10)
  --quiet               no progress and no summary
  --help                this text

training flags (compiled into the model: passed to tessel-compile for a
.mlir, checked against the values a .so was compiled with otherwise):
  --optimizer sgd|adam|adamw
  --lr X                learning rate (the peak of a schedule)
  --beta1 X, --beta2 X, --eps X  Adam and AdamW
  --weight-decay X      L2 for sgd and adam, decoupled for adamw
  --momentum X          SGD momentum
  --nesterov            SGD with Nesterov momentum
  --schedule constant|warmup-cosine  learning-rate schedule
  --warmup N            warm-up steps (linear from 0)
  --min-lr X            learning rate at the end of the cosine
  --total-steps N       step where the cosine ends (default for a .mlir with
                        warmup-cosine: --steps)
  --clip X              clip the global gradient norm to X (0: no clipping)
  --recompute none|selective|full  activation recomputation in the backward

parallel flags (a model partitioned over a device mesh; docs/tessel-run.md):
  --mesh AXIS=N,...     the mesh, e.g. dp=2,tp=2 (row-major: rank r has
                        coordinates (r / 2, r % 2)); a .mlir is compiled for
                        it, a .so must have been (without --mesh a .so runs
                        on the mesh it was compiled for). The losses, the
                        global batch and the checkpoints (global tensors,
                        loadable on any mesh) are one device's
  --comm local|mpi      local (default): every rank is a thread of this
                        process; mpi: one process per rank, started by
                        `mpirun -np WORLD tessel-run ... --comm mpi` (each
                        rank compiles a .mlir itself)
  --rules R, --sequence-parallel, --local-batchnorm, --bucket-mb X
                        partitioning flags passed to tessel-compile with
                        --mesh (a .mlir model only; see tessel-compile
                        --help)
)";
}

const std::vector<TrainingFlagSpec> &tessel::run::trainingFlagSpecs() {
  using K = TrainingFlagKind;
  static const std::vector<TrainingFlagSpec> specs = {
      {"--optimizer", "optimizer", K::Name},
      {"--lr", "lr", K::Real},
      {"--beta1", "beta1", K::Real},
      {"--beta2", "beta2", K::Real},
      {"--eps", "eps", K::Real},
      {"--weight-decay", "weight_decay", K::Real},
      {"--momentum", "momentum", K::Real},
      {"--nesterov", "nesterov", K::Switch},
      {"--schedule", "schedule", K::Name},
      {"--warmup", "warmup", K::Count},
      {"--min-lr", "min_lr", K::Real},
      {"--total-steps", "total_steps", K::Count},
      {"--clip", "clip", K::Real},
      {"--recompute", "recompute", K::Name},
  };
  return specs;
}

std::vector<std::string> Options::partitioningFlags() const {
  std::vector<std::string> flags;
  if (!rules.empty())
    flags.push_back("--rules");
  if (sequenceParallel)
    flags.push_back("--sequence-parallel");
  if (localBatchnorm)
    flags.push_back("--local-batchnorm");
  if (!bucketMb.empty())
    flags.push_back("--bucket-mb");
  return flags;
}

const std::string *Options::trainingValue(const std::string &flag) const {
  for (const TrainingFlag &t : training)
    if (flag == t.spec->flag)
      return &t.value;
  return nullptr;
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

double parseReal(const std::string &flag, const std::string &text) {
  errno = 0;
  char *end = nullptr;
  double value = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(value))
    failUsage("bad value '" + text + "' for " + flag + " (expected a number)");
  return value;
}

/// Checks a training flag's value and returns it normalised.
std::string checkTrainingValue(const TrainingFlagSpec &spec,
                               const std::string &text) {
  std::string flag = spec.flag;
  auto oneOf = [&](std::vector<std::string> names) {
    std::string v = text;
    if (flag == "--schedule")
      std::replace(v.begin(), v.end(), '_', '-');
    for (const std::string &n : names)
      if (v == n)
        return v;
    std::string list;
    for (size_t i = 0; i < names.size(); ++i)
      list += (i ? (i + 1 == names.size() ? " or " : ", ") : "") + names[i];
    failUsage("unknown " + flag.substr(2) + " '" + text + "' for " + flag +
              " (expected " + list + ")");
  };
  if (flag == "--optimizer")
    return oneOf({"sgd", "adam", "adamw"});
  if (flag == "--schedule")
    return oneOf({"constant", "warmup-cosine"});
  if (flag == "--recompute")
    return oneOf({"none", "selective", "full"});
  if (spec.kind == TrainingFlagKind::Count)
    return std::to_string(
        parseInteger(flag, text, flag == "--total-steps" ? 1 : 0));
  double v = parseReal(flag, text);
  auto fail = [&](const char *expected) {
    failUsage("bad value '" + text + "' for " + flag + " (expected " +
              expected + ")");
  };
  if ((flag == "--beta1" || flag == "--beta2") && !(v >= 0 && v < 1))
    fail("a number in [0, 1)");
  if (flag == "--eps" && !(v > 0))
    fail("a number > 0");
  if (v < 0)
    fail("a number >= 0");
  return text;
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
  failUsage("bad value '" + text +
            "' for --data-dtype (expected u8, u16 or i32)");
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
      {"--microbatches",
       [](Options &o, const std::string &v) {
         o.microbatches = parseInteger("--microbatches", v, 1);
       }},
      {"--mesh",
       [](Options &o, const std::string &v) { o.mesh = parseMesh(v); }},
      {"--comm",
       [](Options &o, const std::string &v) {
         if (v == "local")
           o.comm = CommBackend::Local;
         else if (v == "mpi")
           o.comm = CommBackend::Mpi;
         else
           failUsage("bad value '" + v +
                     "' for --comm (expected local or mpi)");
       }},
      {"--rules", [](Options &o, const std::string &v) { o.rules = v; }},
      {"--bucket-mb",
       [](Options &o, const std::string &v) {
         if (!(parseReal("--bucket-mb", v) >= 0))
           failUsage("bad value '" + v +
                     "' for --bucket-mb (expected a number >= 0)");
         o.bucketMb = v;
       }},
      {"--grad-tol",
       [](Options &o, const std::string &v) {
         double tol = parseReal("--grad-tol", v);
         if (!(tol > 0))
           failUsage("bad value '" + v +
                     "' for --grad-tol (expected a number > 0)");
         o.gradTol = tol;
       }},
  };
  return flags;
}

const TrainingFlagSpec *findTrainingFlag(const std::string &name) {
  for (const TrainingFlagSpec &spec : trainingFlagSpecs())
    if (name == spec.flag)
      return &spec;
  return nullptr;
}

void setTrainingFlag(Options &options, const TrainingFlagSpec &spec,
                     const std::string &value) {
  for (TrainingFlag &t : options.training)
    if (t.spec == &spec) {
      t.value = value; // The last one wins, as for every flag.
      return;
    }
  options.training.push_back({&spec, value});
}

/// Combinations no model accepts, caught before any compile or load.
void checkCombinations(const Options &options) {
  if (options.eval && options.checkGrads)
    failUsage("--eval and --check-grads exclude each other");
  if (options.eval && !options.training.empty())
    failUsage(std::string(options.training.front().spec->flag) +
              " has no effect with --eval (no optimizer runs)");
  const std::string *optimizer = options.trainingValue("--optimizer");
  if (options.trainingValue("--nesterov") && optimizer && *optimizer != "sgd")
    failUsage("--nesterov needs --optimizer sgd (got " + *optimizer + ")");
  const std::string *warmup = options.trainingValue("--warmup");
  const std::string *total = options.trainingValue("--total-steps");
  if (warmup && total && std::stoll(*total) <= std::stoll(*warmup))
    failUsage("--total-steps " + *total + " must be greater than --warmup " +
              *warmup);
  // A .so was partitioned when it was compiled; the flags that choose how
  // are tessel-compile's.
  bool mlir = options.model.size() >= 5 &&
              options.model.compare(options.model.size() - 5, 5, ".mlir") == 0;
  for (const std::string &flag : options.partitioningFlags()) {
    if (!mlir && !options.model.empty())
      failUsage(flag + " only with a .mlir model (a .so was partitioned when "
                       "it was compiled)");
    if (!options.mesh)
      failUsage(flag + " needs --mesh");
  }
  if (options.checkGrads && options.mesh)
    failUsage("--check-grads only on one device (drop --mesh " +
              options.mesh->toString() + ")");
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
    if (arg == "--eval") {
      options.eval = true;
      continue;
    }
    if (arg == "--check-grads") {
      options.checkGrads = true;
      continue;
    }
    if (arg == "--sequence-parallel") {
      options.sequenceParallel = true;
      continue;
    }
    if (arg == "--local-batchnorm") {
      options.localBatchnorm = true;
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
      const TrainingFlagSpec *training = findTrainingFlag(name);
      if (training && training->kind == TrainingFlagKind::Switch) {
        if (inlineValue)
          failUsage(name + " takes no value");
        setTrainingFlag(options, *training, "");
        continue;
      }
      auto flag = valueFlags().find(name);
      if (flag == valueFlags().end() && !training)
        failUsage("unknown flag '" + name + "'");
      if (!inlineValue) {
        if (i + 1 >= argc)
          failUsage("missing value for " + name);
        value = argv[++i];
      }
      if (value.empty())
        failUsage("empty value for " + name);
      if (training)
        setTrainingFlag(options, *training,
                        checkTrainingValue(*training, value));
      else
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
  checkCombinations(options);
  return options;
}
