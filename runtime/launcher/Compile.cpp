//===- Compile.cpp - tessel-compile for a .mlir model, and its flags ------===//

#include "runtime/launcher/Compile.h"
#include "runtime/launcher/Error.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

using namespace tessel;
using namespace tessel::run;

namespace {

bool fileExists(const std::string &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

std::string directoryOfThisExecutable() {
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0)
    return ".";
  std::string exe(buf, n);
  size_t slash = exe.rfind('/');
  return slash == std::string::npos ? "." : exe.substr(0, slash);
}

/// Whether a flag's value is the one the model was compiled with.
bool sameValue(const TrainingFlag &flag, const TrainConfig &compiled) {
  const TrainSetting &setting = *flag.setting;
  switch (setting.kind) {
  case TrainSettingKind::Switch:
    return compiled.number(setting) != 0;
  case TrainSettingKind::Choice:
  case TrainSettingKind::Patterns:
    return flag.value == compiled.text(setting);
  case TrainSettingKind::Count:
    return std::strtoll(flag.value.c_str(), nullptr, 10) ==
           int64_t(compiled.number(setting));
  default: {
    // The description prints doubles; allow for a printer that rounds.
    double given = std::strtod(flag.value.c_str(), nullptr);
    double number = compiled.number(setting);
    return std::fabs(given - number) <=
           1e-9 * std::max(std::fabs(given), std::fabs(number));
  }
  }
}

/// A value as a shell command line takes it: patterns ('*', '?', or none)
/// in single quotes.
std::string shellValue(const TrainSetting &setting, const std::string &value) {
  if (setting.kind != TrainSettingKind::Patterns)
    return value;
  std::string quoted = "'";
  for (char c : value)
    quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

std::string flagText(const TrainingFlag &flag) {
  return flag.isSwitch()
             ? flag.flag()
             : flag.flag() + " " + shellValue(*flag.setting, flag.value);
}

/// --mesh and the partitioning flags, as tessel-compile takes them.
std::vector<std::string> partitionArgs(const Options &options) {
  if (!options.mesh && !options.meshAuto)
    return {};
  std::vector<std::string> args = {
      "--mesh", options.mesh ? options.mesh->toString() : std::string("auto")};
  if (options.meshAuto) {
    args.insert(args.end(), {"--devices", std::to_string(options.planDevices)});
    if (options.planNodes)
      args.insert(args.end(), {"--nodes", std::to_string(options.planNodes)});
    if (!options.planDevice.empty())
      args.insert(args.end(), {"--device", options.planDevice});
    // The plan's microbatches; a pipeline compiles them in.
    if (options.microbatchesGiven)
      args.insert(args.end(),
                  {"--microbatches", std::to_string(options.microbatches)});
  }
  if (!options.rules.empty())
    args.insert(args.end(), {"--rules", options.rules});
  if (options.sequenceParallel)
    args.push_back("--sequence-parallel");
  if (options.localBatchnorm)
    args.push_back("--local-batchnorm");
  if (!options.bucketMb.empty())
    args.insert(args.end(), {"--bucket-mb", options.bucketMb});
  if (!options.zero.empty())
    args.insert(args.end(), {"--zero", options.zero});
  if (!options.overlap.empty())
    args.insert(args.end(), {"--overlap", options.overlap});
  if (options.noReshardAfterForward)
    args.push_back("--no-reshard-after-forward");
  // A pipeline compiles its microbatches and schedule in.
  std::optional<int> pp =
      options.mesh ? options.mesh->axisIndex("pp") : std::nullopt;
  if (pp && options.mesh->shape[*pp] > 1) {
    if (options.microbatchesGiven)
      args.insert(args.end(),
                  {"--microbatches", std::to_string(options.microbatches)});
    if (!options.pipelineSchedule.empty())
      args.insert(args.end(), {"--pipeline-schedule", options.pipelineSchedule});
    if (!options.stageLayers.empty())
      args.insert(args.end(), {"--stage-layers", options.stageLayers});
    if (!options.virtualStages.empty())
      args.insert(args.end(), {"--virtual-stages", options.virtualStages});
  }
  // The pipeline's stages recompute (with --mesh auto: a pipeline's, if
  // the search chooses one).
  if (options.stageRecompute)
    args.push_back("--stage-recompute");
  return args;
}

} // namespace

std::string
tessel::run::compileMlirModel(const std::string &mlirPath,
                              const std::vector<std::string> &extraArgs) {
  if (!fileExists(mlirPath))
    throw RunError("cannot open model '" + mlirPath +
                   "': " + std::strerror(errno));
  std::string compiler = directoryOfThisExecutable() + "/tessel-compile";
  if (::access(compiler.c_str(), X_OK) != 0)
    throw RunError("cannot compile '" + mlirPath +
                   "': tessel-compile not found "
                   "next to tessel-run (looked for " +
                   compiler + "); build it or pass a compiled .so");
  const char *tmp = std::getenv("TMPDIR");
  std::string dirTemplate =
      std::string(tmp && *tmp ? tmp : "/tmp") + "/tessel-run-XXXXXX";
  if (!::mkdtemp(dirTemplate.data()))
    throw RunError("cannot create a temporary directory: " +
                   std::string(std::strerror(errno)));
  std::string output = dirTemplate + "/model.so";
  std::vector<std::string> args = {compiler, mlirPath, "-o", output};
  args.insert(args.end(), extraArgs.begin(), extraArgs.end());
  std::vector<char *> argv;
  for (std::string &a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid;
  if (int err = ::posix_spawn(&pid, compiler.c_str(), nullptr, nullptr,
                              argv.data(), environ))
    throw RunError("cannot run " + compiler + ": " + std::strerror(err));
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || !fileExists(output)) {
    ::unlink(output.c_str());
    ::rmdir(dirTemplate.c_str());
    throw RunError("tessel-compile failed on '" + mlirPath + "'");
  }
  return output;
}

std::vector<std::string> tessel::run::compileArgs(const Options &options) {
  std::vector<std::string> args = compileTrainingArgs(options);
  if (!options.precision.empty())
    args.insert(args.end(), {"--precision", options.precision});
  if (!options.gradPrecision.empty())
    args.insert(args.end(), {"--grad-precision", options.gradPrecision});
  std::vector<std::string> partition = partitionArgs(options);
  args.insert(args.end(), partition.begin(), partition.end());
  return args;
}

std::vector<std::string>
tessel::run::compileTrainingArgs(const Options &options) {
  // An evaluation needs only the forward entry (and no differentiable path).
  if (options.eval)
    return {"--no-train"};
  std::vector<std::string> args;
  for (const TrainingFlag &flag : options.training) {
    args.push_back(flag.flag());
    if (!flag.isSwitch())
      args.push_back(flag.value);
  }
  const std::string *schedule = options.trainingValue("--schedule");
  if (schedule && *schedule == "warmup-cosine" &&
      !options.trainingValue("--total-steps")) {
    const std::string *warmup = options.trainingValue("--warmup");
    if (warmup && options.steps <= std::stoll(*warmup))
      throw UsageError("--schedule warmup-cosine needs --total-steps (default "
                       "--steps " +
                       std::to_string(options.steps) +
                       ") greater than --warmup " + *warmup);
    args.push_back("--total-steps");
    args.push_back(std::to_string(options.steps));
  }
  return args;
}

void tessel::run::checkTrainingFlags(const Options &options,
                                     const ModelDesc &model,
                                     const std::string &file,
                                     bool compiledHere) {
  if (!options.precision.empty() && options.precision != model.precision)
    throw RunError("--precision " + options.precision + " differs from the " +
                   model.precision + " that model '" + file +
                   "' was compiled with; recompile with tessel-compile " +
                   (model.source.empty() ? "MODEL.mlir" : model.source) +
                   " --precision " + options.precision + " -o " + file);
  if (!options.gradPrecision.empty()) {
    // The gradients' type is the grads' dtype (all alike; f32 when none).
    std::vector<const TensorDesc *> gradTensors = model.withRole("grad");
    std::string grads = gradTensors.empty() ? "f32" : gradTensors.front()->dtype;
    if (model.precision != "bf16")
      throw RunError("--grad-precision applies to --precision bf16; model '" +
                     file + "' computes in " + model.precision);
    if (grads != options.gradPrecision)
      throw RunError("--grad-precision " + options.gradPrecision +
                     " differs from the " + grads + " gradients model '" +
                     file + "' was compiled with; recompile with " +
                     "tessel-compile --precision bf16 --grad-precision " +
                     options.gradPrecision);
  }
  if (options.training.empty())
    return;
  std::string recompile = "recompile with tessel-compile " +
                          (model.source.empty() ? "MODEL.mlir" : model.source);
  for (const TrainingFlag &flag : options.training)
    recompile += " " + flagText(flag);
  if (model.mesh)
    recompile += " --mesh " + model.mesh->toString();
  recompile += " -o " + file;
  for (const TrainingFlag &flag : options.training) {
    if (!model.train)
      throw RunError(flagText(flag) + ": model '" + file +
                     "' was compiled without training (no \"train\" in its "
                     "description); " +
                     recompile);
    if (sameValue(flag, *model.train))
      continue;
    std::string key = flag.setting->key;
    std::string compiled =
        shellValue(*flag.setting, model.train->text(*flag.setting));
    std::string given =
        flag.isSwitch() ? "true" : shellValue(*flag.setting, flag.value);
    if (compiledHere)
      throw RunError("tessel-compile ignored " + flagText(flag) + ": '" +
                     options.model + "' was compiled with " + key + " " +
                     compiled);
    throw RunError(flag.flag() + " " + given + " differs from the " + key +
                   " " + compiled + " that model '" + file +
                   "' was compiled with (training options are compiled in); " +
                   recompile);
  }
}

void tessel::run::checkMesh(const Options &options, const ModelDesc &model,
                            const std::string &file, bool compiledHere) {
  auto meshText = [](const std::optional<Mesh> &mesh) {
    return mesh ? "mesh " + mesh->toString() : std::string("one device");
  };
  if (!options.mesh || model.mesh == options.mesh)
    return;
  if (compiledHere)
    throw RunError("tessel-compile ignored --mesh " + options.mesh->toString() +
                   ": '" + options.model + "' was compiled for " +
                   meshText(model.mesh));
  throw RunError("--mesh " + options.mesh->toString() + " differs from the " +
                 meshText(model.mesh) + " that model '" + file +
                 "' was compiled for (the partitioning is compiled in); "
                 "recompile with tessel-compile " +
                 (model.source.empty() ? "MODEL.mlir" : model.source) +
                 " --mesh " + options.mesh->toString() + " -o " + file +
                 ", or drop --mesh");
}
