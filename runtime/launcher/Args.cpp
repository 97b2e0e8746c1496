//===- Args.cpp - Parsing tessel-run's command line -----------------------===//

#include "runtime/launcher/Args.h"
#include "runtime/config/NamePattern.h"
#include "runtime/launcher/Error.h"
#include "tessel/runtime.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <map>

using namespace tessel;
using namespace tessel::run;

namespace {

/// The training flags' part of --help, one entry per setting of
/// TrainSettings.def.
std::string trainingFlagsHelp() {
  std::string text = "training flags (compiled into the model: passed to "
                     "tessel-compile for a\n.mlir, checked against the "
                     "values a .so was compiled with otherwise):\n";
  const size_t column = 24, width = 78;
  for (const TrainSetting &setting : trainSettings()) {
    std::string entry = std::string("  --") + setting.flag;
    if (setting.kind == TrainSettingKind::Choice) {
      entry += " ";
      for (const std::string &choice : setting.choices)
        entry += (entry.back() == ' ' ? "" : "|") + choice;
      std::replace(entry.begin(), entry.end(), '_', '-');
    } else if (setting.kind == TrainSettingKind::Count) {
      entry += " N";
    } else if (setting.kind == TrainSettingKind::Patterns) {
      entry += " P,P...";
    } else if (setting.kind != TrainSettingKind::Switch) {
      entry += " X";
    }
    // The help, word-wrapped at `width` from `column`.
    std::string line = entry.size() + 2 <= column
                           ? entry + std::string(column - entry.size(), ' ')
                           : entry + "\n" + std::string(column, ' ');
    std::string help = setting.help;
    for (size_t begin = 0; begin < help.size();) {
      size_t end = help.find(' ', begin);
      std::string word = help.substr(begin, end - begin);
      size_t lineLength = line.size() - line.rfind('\n') - 1;
      if (lineLength + word.size() > width && lineLength > column) {
        text += line + "\n";
        line = std::string(column, ' ');
      } else if (lineLength > column) {
        line += " ";
      }
      line += word;
      begin = end == std::string::npos ? help.size() : end + 1;
    }
    text += line + "\n";
  }
  return text;
}

} // namespace

std::string tessel::run::usageText() {
  return R"(usage: tessel-run MODEL.so|MODEL.mlir [flags]

Runs a model compiled by tessel-compile on the CPU runtime: on one device,
or on every rank of the mesh a partitioned model was compiled for (see
parallel flags). A model compiled for training (backward and update entries)
trains by default: each step zeroes the gradients, runs the backward entry on
each microbatch (gradients accumulate), writes 1/M to the gradient scale
(one over the step's count of labelled positions, for a loss that returns
it) and applies the optimizer once. A model compiled without training
evaluates the
loss. A .mlir model is first compiled with the tessel-compile found next to
tessel-run, given the training and parallel flags below.

flags:
  --steps N             steps to run (default 10); a run resumed with --load
                        continues the step count of the checkpoint
  --microbatches M      microbatches per step (default 1): the model's inputs
                        are one microbatch of batch B, a step sees the global
                        batch M x B (the samples one batch of M x B would
                        see); its loss is the mean of the M losses, or for
                        a loss over labelled positions (ignore_index) their
                        sum over the step's count: the whole batch's mean
  --eval                evaluate the loss only (the forward entry, dropout
                        off as PyTorch's model.eval()), no update; a .mlir
                        is compiled without training (--no-train)
  --eval-every N        training: also evaluate a held-out loss after every
                        N-th step and after the last (dropout off, no
                        update): the metrics' and progress's eval_loss,
                        over the same --eval-steps batches each time
  --eval-steps K        the held-out batches of --eval-every (default 10),
                        each a step's global batch (M microbatches)
  --eval-data FILE      the held-out tokens of --eval-every (as --data;
                        needed with --data); without --data a synthetic
                        run holds out samples of another stream
  --eval-labels FILE    with --eval-data: their labels (as --labels)
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
                        rounding noise or a quarter of the tolerance; an
                        element where five halvings never agree (a ReLU or
                        max kink within the step) is passed over for
                        another (up to 128 tried), and a parameter with
                        fewer than half its samples compared fails as
                        inconclusive. With --mesh (dp, tp, ZeRO, pp) every
                        rank takes part: the reduced gradients are
                        gathered, the loss averaged over the ranks, and an
                        element perturbed wherever a copy of it is held; a
                        pipeline checks its step (the mean over its
                        compiled microbatches) through its schedule
  --grad-tol T          tolerance of --check-grads (default 1e-6 for f64
                        parameters, 2e-2 for f32, 2e-1 for f16/bf16)
  --grad-params P,P...  check only the trainable parameters matching these
                        name patterns ('*' any characters, '?' one, as
                        --no-decay), e.g. 'h.attn.*,wte'; one matching none
                        is an error
  --seed S              seed of parameter init and synthetic data (default 0);
                        synthetic samples are N(0, 1) floats and uniform
                        integers, except a classifier's labels: the class a
                        fixed random linear teacher gives the first 16
                        features (a task it can learn)
  --data FILE           token file for a language model: .bin (see
                        --data-dtype) or a 1-D .npy of i4/u2/i8; batch rows are
                        consecutive windows, labels shifted by one token
  --labels FILE         with --data: one label per token of the data file
                        (a .npy of i4/i8, or a .bin of --data-dtype), aligned
                        as Hugging Face's: input position t's label is
                        labels[t + 1]; the model's ignore_index (e.g. -100)
                        where its loss ignores a position (prompt, padding)
  --data-dtype u8|u16|i32  element type of a .bin token file (default u16;
                        u8 reads any file as bytes: a character-level corpus)
  --metrics FILE        write one JSON object per step (step, loss, lr,
                        microbatches, tokens_per_s, step_ms, allocated_bytes)
  --trace FILE          record one training step (the second, or the only
                        one) on every rank and write it as a Chrome trace
                        (chrome://tracing, Perfetto): per rank its kernels,
                        waits and collectives. Prints rank 0's totals and
                        warns when the started bytes that overlapped kernels
                        differ from the compiled report's overlapped bytes.
                        Under MPI, rank R > 0 writes FILE with ".rank<R>"
                        before its extension
  --save FILE           write the parameters as .safetensors at the end; a
                        training run adds the optimizer state and the step
                        count (metadata "tessel.step"). Written to a
                        temporary beside FILE, synced and renamed over it:
                        FILE is always a whole checkpoint. FILE, like
                        --metrics, may not be the model, --data or (for
                        --metrics) --load, and its directory must exist
  --save-sharded DIR    like --save, but every rank writes its own tensors
                        (its blocks, ZeRO chunks included) without gathering:
                        DIR/rank-<r>-of-<W>.safetensors per rank and
                        DIR/index.json, written into a temporary directory
                        beside DIR and swapped in at once (DIR is always one
                        whole checkpoint); with or without --save. DIR must
                        be new, empty or a sharded checkpoint
  --save-every N        also save to the --save FILE (and --save-sharded DIR)
                        after every N-th step (step count divisible by N), so
                        a crash loses at most N steps; resume with --load
  --load PATH           read the parameters (and optimizer state and step, if
                        saved by a training run) from a .safetensors file, or
                        a --save-sharded directory saved on any mesh, instead
                        of initialising them
  --log-every N         progress line every N steps when stderr is not a
                        terminal (default 10)
  --graph               capture the step once (after the first, which warms
                        up) and launch it every step after: a CUDA graph on
                        a GPU (one launch per step instead of one per
                        kernel); on the CPU the recorded calls are replayed.
                        Training or --eval; not with a pipeline (its stages
                        exchange activations through host memory)
  --quiet               no progress and no summary
  --help                this text

A first SIGINT (Ctrl-C) or SIGTERM finishes the current step (every rank of
a mesh stops after the same step), writes its metrics line, saves to --save
FILE and --save-sharded DIR if given and exits 130 (SIGINT) or 143
(SIGTERM); a second one exits at once.

)" + trainingFlagsHelp() +
         R"(
parallel flags (a model partitioned over a device mesh; docs/tessel-run.md):
  --mesh AXIS=N,...     the mesh, e.g. dp=2,tp=2 (row-major: rank r has
                        coordinates (r / 2, r % 2)); a .mlir is compiled for
                        it, a .so must have been (without --mesh a .so runs
                        on the mesh it was compiled for). The losses, the
                        global batch and the checkpoints (global tensors,
                        loadable on any mesh) are one device's
  --mesh auto --devices N [--nodes K] [--device h100|h200]
                        a .mlir is compiled for the split tessel-compile
                        --mesh auto picks over N devices (tessel-plan's
                        ranking: mesh, ZeRO stage, schedule; docs/
                        tessel-plan.md), which the run then takes
  --comm-timeout S      a rank waiting longer than S seconds for its peers in
                        a collective fails, naming the operation and the
                        ranks that did not arrive; every rank then exits
                        (default 600)
  --backend cpu|cuda    the runtime backend the ranks run on (default cuda
                        when a GPU is visible, else cpu; a rank per GPU;
                        docs/runtime-backends.md); one compiled .so runs on
                        any backend
  --comm local|mpi|tcp  local (default): every rank is a thread of this
                        process; mpi: one process per rank, started by
                        `mpirun -np WORLD tessel-run ... --comm mpi` (each
                        rank compiles a .mlir itself); tcp: one process per
                        rank, started by `torchrun --nproc-per-node WORLD
                        tessel-run ...`, joined over TCP at MASTER_ADDR:
                        MASTER_PORT (+1 when torchrun's store holds it);
                        LOCAL_RANK picks the GPU. Under torchrun (RANK and
                        WORLD_SIZE set) tcp is the default
  --precision f32|bf16|f64
                        compute type of a .mlir model: bf16 stores the
                        parameters in bf16 and runs forward and backward in
                        bf16, with f32 master weights in the optimizer state;
                        f64 widens every f32 tensor, for --check-grads and
                        references (docs/precision.md); with a .so, the
                        precision it was compiled with
  --grad-precision f32|bf16
                        with --precision bf16: the gradients' type, f32
                        (default: reduced and accumulated in f32) or bf16
  --zero 1|2|3          shard the training state over dp and cp (ZeRO: 1
                        optimizer state, 2 and gradients, 3 and parameters;
                        with --no-reshard-after-forward stage 3 keeps the
                        gathered parameters from the forward to the backward)
  --rules R, --sequence-parallel, --local-batchnorm, --bucket-mb X,
  --overlap N           partitioning flags passed to tessel-compile with
                        --mesh (a .mlir model only; see tessel-compile
                        --help; --overlap 0 makes every collective block)
  --pipeline-schedule S, --stage-layers L, --virtual-stages V,
  --stage-recompute     pipeline flags passed to tessel-compile with a mesh
                        whose pp axis has more than one rank, with
                        --microbatches (a .mlir model only; a compiled
                        pipeline runs its own schedule and microbatches);
                        --stage-recompute keeps only each stage's input per
                        microbatch and recomputes its forward (GPipe)
)";
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
  if (!overlap.empty())
    flags.push_back("--overlap");
  if (!zero.empty())
    flags.push_back("--zero");
  if (noReshardAfterForward)
    flags.push_back("--no-reshard-after-forward");
  if (!pipelineSchedule.empty())
    flags.push_back("--pipeline-schedule");
  if (!stageLayers.empty())
    flags.push_back("--stage-layers");
  if (!virtualStages.empty())
    flags.push_back("--virtual-stages");
  if (stageRecompute)
    flags.push_back("--stage-recompute");
  return flags;
}

bool Options::isPipelineFlag(const std::string &flag) {
  return flag == "--pipeline-schedule" || flag == "--stage-layers" ||
         flag == "--virtual-stages" || flag == "--stage-recompute";
}

const std::string *Options::trainingValue(const std::string &flag) const {
  for (const TrainingFlag &t : training)
    if (flag == t.flag())
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

/// Checks a training flag's value (TrainConfig's rules) and returns it
/// normalised.
std::string checkTrainingValue(const TrainSetting &setting,
                               const std::string &text) {
  std::string flag = std::string("--") + setting.flag;
  TrainConfig scratch;
  if (std::optional<TrainSettingProblem> problem = scratch.set(setting, text)) {
    if (problem->unknownChoice)
      failUsage("unknown " + std::string(setting.flag) + " '" + text +
                "' for " + flag + " (expected " + problem->expected + ")");
    failUsage("bad value '" + text + "' for " + flag + " (expected " +
              problem->expected + ")");
  }
  // A run has at least one step: a total of 0 only means "not given".
  if (setting.kind == TrainSettingKind::Count && setting.key == std::string("total_steps") &&
      scratch.totalSteps < 1)
    failUsage("bad value '" + text + "' for " + flag +
              " (expected an integer >= 1)");
  return setting.isText() ? scratch.text(setting) : text;
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
      {"--labels", [](Options &o, const std::string &v) { o.labels = v; }},
      {"--eval-data",
       [](Options &o, const std::string &v) { o.evalData = v; }},
      {"--eval-labels",
       [](Options &o, const std::string &v) { o.evalLabels = v; }},
      {"--eval-every",
       [](Options &o, const std::string &v) {
         o.evalEvery = parseInteger("--eval-every", v, 1);
       }},
      {"--eval-steps",
       [](Options &o, const std::string &v) {
         o.evalSteps = parseInteger("--eval-steps", v, 1);
         o.evalStepsGiven = true;
       }},
      {"--data-dtype",
       [](Options &o, const std::string &v) {
         o.dataDtype = parseTokenDtype(v);
       }},
      {"--metrics", [](Options &o, const std::string &v) { o.metrics = v; }},
      {"--trace", [](Options &o, const std::string &v) { o.trace = v; }},
      {"--save", [](Options &o, const std::string &v) { o.save = v; }},
      {"--save-sharded",
       [](Options &o, const std::string &v) {
         // "DIR/" is DIR: its temporary goes beside it, not inside.
         o.saveSharded = v;
         while (o.saveSharded.size() > 1 && o.saveSharded.back() == '/')
           o.saveSharded.pop_back();
       }},
      {"--save-every",
       [](Options &o, const std::string &v) {
         o.saveEvery = parseInteger("--save-every", v, 1);
       }},
      {"--load", [](Options &o, const std::string &v) { o.load = v; }},
      {"--log-every",
       [](Options &o, const std::string &v) {
         o.logEvery = parseInteger("--log-every", v, 1);
       }},
      {"--microbatches",
       [](Options &o, const std::string &v) {
         o.microbatches = parseInteger("--microbatches", v, 1);
         o.microbatchesGiven = true;
       }},
      {"--mesh",
       [](Options &o, const std::string &v) {
         o.meshAuto = v == "auto";
         o.mesh = o.meshAuto ? std::nullopt : std::optional(parseMesh(v));
       }},
      {"--devices",
       [](Options &o, const std::string &v) {
         o.planDevices = parseInteger("--devices", v, 1);
       }},
      {"--nodes",
       [](Options &o, const std::string &v) {
         o.planNodes = parseInteger("--nodes", v, 1);
       }},
      {"--device", [](Options &o, const std::string &v) { o.planDevice = v; }},
      {"--comm-timeout",
       [](Options &o, const std::string &v) {
         double seconds = parseReal("--comm-timeout", v);
         if (!(seconds > 0))
           failUsage("bad value '" + v +
                     "' for --comm-timeout (expected a number of seconds > "
                     "0)");
         o.commTimeoutSeconds = seconds;
       }},
      {"--backend",
       [](Options &o, const std::string &v) {
         // Checked here, before any rank starts: the runtime knows which
         // backends it was built with and can run on this host.
         if (!tessel_backend_available(v.c_str()))
           failUsage("bad value '" + v +
                     "' for --backend (expected cpu, or cuda where the "
                     "runtime was built with CUDA and a GPU is visible)");
         o.backend = v;
       }},
      {"--comm",
       [](Options &o, const std::string &v) {
         o.commGiven = true;
         if (v == "local")
           o.comm = CommBackend::Local;
         else if (v == "mpi")
           o.comm = CommBackend::Mpi;
         else if (v == "tcp")
           o.comm = CommBackend::Tcp;
         else
           failUsage("bad value '" + v +
                     "' for --comm (expected local, mpi or tcp)");
       }},
      {"--rules", [](Options &o, const std::string &v) { o.rules = v; }},
      {"--precision",
       [](Options &o, const std::string &v) {
         if (v != "f32" && v != "bf16" && v != "f64")
           failUsage("bad value '" + v +
                     "' for --precision (expected f32, bf16 or f64)");
         o.precision = v;
       }},
      {"--grad-precision",
       [](Options &o, const std::string &v) {
         if (v != "f32" && v != "bf16")
           failUsage("bad value '" + v +
                     "' for --grad-precision (expected f32 or bf16)");
         o.gradPrecision = v;
       }},
      {"--pipeline-schedule",
       [](Options &o, const std::string &v) { o.pipelineSchedule = v; }},
      {"--stage-layers",
       [](Options &o, const std::string &v) { o.stageLayers = v; }},
      {"--virtual-stages",
       [](Options &o, const std::string &v) { o.virtualStages = v; }},
      {"--zero",
       [](Options &o, const std::string &v) {
         if (v != "0" && v != "1" && v != "2" && v != "3")
           failUsage("bad value '" + v +
                     "' for --zero (expected a ZeRO stage 0, 1, 2 or 3)");
         o.zero = v;
       }},
      {"--bucket-mb",
       [](Options &o, const std::string &v) {
         if (!(parseReal("--bucket-mb", v) >= 0))
           failUsage("bad value '" + v +
                     "' for --bucket-mb (expected a number >= 0)");
         o.bucketMb = v;
       }},
      {"--overlap",
       [](Options &o, const std::string &v) {
         o.overlap = std::to_string(parseInteger("--overlap", v, 0));
       }},
      {"--grad-tol",
       [](Options &o, const std::string &v) {
         double tol = parseReal("--grad-tol", v);
         if (!(tol > 0))
           failUsage("bad value '" + v +
                     "' for --grad-tol (expected a number > 0)");
         o.gradTol = tol;
       }},
      {"--grad-params",
       [](Options &o, const std::string &v) {
         if (std::optional<std::string> why = checkNamePatterns(v))
           failUsage("bad value '" + v +
                     "' for --grad-params (expected comma-separated name "
                     "patterns: " +
                     *why + ")");
         o.gradParams = v;
       }},
  };
  return flags;
}

/// The training setting of flag `name` ("--lr"), or null.
const TrainSetting *findTrainingFlag(const std::string &name) {
  if (name.size() < 3 || name.compare(0, 2, "--") != 0)
    return nullptr;
  const TrainSetting *setting = findTrainSetting(name.substr(2));
  return setting && name.substr(2) == setting->flag ? setting : nullptr;
}

void setTrainingFlag(Options &options, const TrainSetting &setting,
                     const std::string &value) {
  for (TrainingFlag &t : options.training)
    if (t.setting == &setting) {
      t.value = value; // The last one wins, as for every flag.
      return;
    }
  options.training.push_back({&setting, value});
}

/// --mesh auto: a training run of a .mlir over --devices, without the
/// flags the search chooses.
void checkMeshAuto(const Options &options, bool mlir) {
  if (!options.planDevices)
    failUsage("--mesh auto needs --devices N: the devices to split the model "
              "over");
  if (!mlir && !options.model.empty())
    failUsage("--mesh auto compiles a .mlir model (a .so was partitioned when "
              "it was compiled)");
  if (options.eval || options.checkGrads)
    failUsage(std::string("--mesh auto ranks training steps; not with ") +
              (options.eval ? "--eval" : "--check-grads"));
  for (const std::string &flag : options.partitioningFlags())
    // --stage-recompute, like --sequence-parallel, is a constraint on the
    // search: a pipeline it chooses recomputes its stages.
    if (flag == "--zero" || flag == "--no-reshard-after-forward" ||
        (Options::isPipelineFlag(flag) && flag != "--stage-recompute"))
      failUsage(flag + " is what --mesh auto chooses; give --mesh to set it");
}

/// Combinations no model accepts, caught before any compile or load.
void checkCombinations(const Options &options) {
  if (options.eval && options.checkGrads)
    failUsage("--eval and --check-grads exclude each other");
  if (options.eval && !options.training.empty())
    failUsage(options.training.front().flag() +
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
  if ((options.planDevices || options.planNodes ||
       !options.planDevice.empty()) &&
      !options.meshAuto)
    failUsage(std::string(options.planDevices ? "--devices"
                          : options.planNodes ? "--nodes"
                                              : "--device") +
              " applies to --mesh auto");
  if (options.meshAuto)
    checkMeshAuto(options, mlir);
  for (const std::string &flag : options.partitioningFlags()) {
    if (!mlir && !options.model.empty())
      failUsage(flag + " only with a .mlir model (a .so was partitioned when "
                       "it was compiled)");
    if (options.meshAuto)
      continue; // checkMeshAuto refused those it chooses.
    if (!options.mesh)
      failUsage(flag + " needs --mesh");
    std::optional<int> pp = options.mesh->axisIndex("pp");
    bool pipelineFlag = Options::isPipelineFlag(flag);
    bool zeroFlag = flag == "--zero" || flag == "--no-reshard-after-forward";
    if (zeroFlag && options.eval)
      failUsage(flag + " shards the training state; not with --eval");
    if (zeroFlag && !options.mesh->axisIndex("dp") &&
        !options.mesh->axisIndex("cp"))
      failUsage(flag +
                " shards the training state over the dp and cp axes; --mesh " +
                options.mesh->toString() + " has neither");
    if (flag == "--no-reshard-after-forward" && options.zero != "3")
      failUsage(flag + " applies to --zero 3");
    if (pipelineFlag && !(pp && options.mesh->shape[*pp] > 1))
      failUsage(flag + " needs a mesh whose pp axis has more than one rank "
                       "(e.g. --mesh dp=2,pp=2)");
  }
  if (!options.labels.empty() && options.data.empty())
    failUsage("--labels needs --data FILE (the tokens they label)");
  if (!options.evalLabels.empty() && options.evalData.empty())
    failUsage("--eval-labels needs --eval-data FILE (the tokens they label)");
  if (!options.evalEvery &&
      (!options.evalData.empty() || options.evalStepsGiven))
    failUsage(
        std::string(options.evalData.empty() ? "--eval-steps" : "--eval-data") +
        " applies to --eval-every N (a held-out loss while training)");
  if (options.evalEvery && (options.eval || options.checkGrads))
    failUsage(std::string("--eval-every evaluates while training; not with ") +
              (options.eval ? "--eval" : "--check-grads"));
  if (options.evalEvery && !options.data.empty() && options.evalData.empty())
    failUsage("--eval-every with --data needs --eval-data FILE: the held-out "
              "tokens (the training file's are not held out)");
  if (options.saveEvery && options.save.empty() && options.saveSharded.empty())
    failUsage("--save-every needs --save FILE or --save-sharded DIR (the "
              "checkpoint it rewrites)");
  if (options.saveEvery && (options.eval || options.checkGrads))
    failUsage(std::string("--save-every has no effect with ") +
              (options.eval ? "--eval" : "--check-grads") +
              " (no step changes the parameters)");
  if (!options.checkGrads && (options.gradTol || !options.gradParams.empty()))
    failUsage(std::string(options.gradTol ? "--grad-tol" : "--grad-params") +
              " only with --check-grads");
  if (options.graph && options.checkGrads)
    failUsage("--graph captures a step; --check-grads runs the backward "
              "entry on perturbed parameters, not steps");
  if (options.graph && options.mesh)
    if (std::optional<int> pp = options.mesh->axisIndex("pp");
        pp && options.mesh->shape[*pp] > 1)
      failUsage(kGraphPipelineRefusal);
  if (options.graph && !options.trace.empty())
    failUsage("--trace records every kernel and collective as it is issued; "
              "a captured step runs them as one launch (drop --graph to "
              "trace)");
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
    if (arg == "--graph") {
      options.graph = true;
      continue;
    }
    if (arg == "--check-grads") {
      options.checkGrads = true;
      continue;
    }
    if (arg == "--no-reshard-after-forward") {
      options.noReshardAfterForward = true;
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
    if (arg == "--stage-recompute") {
      options.stageRecompute = true;
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
      const TrainSetting *training = findTrainingFlag(name);
      if (training && training->kind == TrainSettingKind::Switch) {
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
      // An empty list of patterns is a value: no parameter is exempt.
      if (value.empty() &&
          !(training && training->kind == TrainSettingKind::Patterns))
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
