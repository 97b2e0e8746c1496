//===- Training.cpp - The training step and its flags against the .so -----===//

#include "runtime/launcher/Training.h"
#include "runtime/launcher/Error.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

using namespace tessel;
using namespace tessel::run;

namespace {

/// Whether a flag's value is the one the model was compiled with.
bool sameValue(const TrainingFlag &flag, const TrainConfig &compiled) {
  const TrainSetting &setting = *flag.setting;
  switch (setting.kind) {
  case TrainSettingKind::Switch:
    return compiled.number(setting) != 0;
  case TrainSettingKind::Choice:
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

std::string flagText(const TrainingFlag &flag) {
  return flag.isSwitch() ? flag.flag() : flag.flag() + " " + flag.value;
}

void *at(void *arena, const TensorDesc &t) {
  return static_cast<char *>(arena) + t.offset;
}

} // namespace

/// --mesh and the partitioning flags, as tessel-compile takes them.
static std::vector<std::string> partitionArgs(const Options &options) {
  if (!options.mesh)
    return {};
  std::vector<std::string> args = {"--mesh", options.mesh->toString()};
  if (!options.rules.empty())
    args.insert(args.end(), {"--rules", options.rules});
  if (options.sequenceParallel)
    args.push_back("--sequence-parallel");
  if (options.localBatchnorm)
    args.push_back("--local-batchnorm");
  if (!options.bucketMb.empty())
    args.insert(args.end(), {"--bucket-mb", options.bucketMb});
  return args;
}

std::vector<std::string> tessel::run::compileArgs(const Options &options) {
  std::vector<std::string> args = compileTrainingArgs(options);
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
    std::string compiled = model.train->text(*flag.setting);
    std::string given = flag.isSwitch() ? "true" : flag.value;
    if (compiledHere)
      throw RunError("tessel-compile ignored " + flagText(flag) + ": '" +
                     options.model + "' was compiled with " + key + " " +
                     compiled);
    throw RunError(
        flag.flag() + " " + given + " differs from the " + key + " " +
        compiled + " that model '" + file +
        "' was compiled with (training options are compiled in); " + recompile);
  }
}

void tessel::run::checkMesh(const Options &options, const ModelDesc &model,
                            const std::string &file, bool compiledHere) {
  auto meshText = [](const std::optional<Mesh> &mesh) {
    return mesh ? "mesh " + mesh->toString() : std::string("one device");
  };
  if (options.checkGrads && model.mesh)
    throw RunError("--check-grads only on one device: model '" + file +
                   "' is partitioned for " + meshText(model.mesh));
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

/// Runs `entry` (forward or backward) once per microbatch of `step`, each
/// on its own samples and with its own dropout masks; the mean loss.
static double runMicrobatches(const LoadedModel &model, RankRuntime &rt,
                              BatchSource &batches, int64_t step,
                              int64_t microbatches, EntryFn entry,
                              const std::string &what) {
  double lossSum = 0;
  for (int64_t m = 0; m < microbatches; ++m) {
    batches.fill(step * microbatches + m, rt.ctx, rt.arena);
    tessel_set_microbatch(rt.ctx, uint64_t(m));
    entry(rt.ctx, rt.arena);
    tessel_synchronize(rt.ctx);
    checkKernelError(rt.ctx, "step " + std::to_string(step + 1) + " (" + what +
                                 ", microbatch " + std::to_string(m + 1) + ")");
    lossSum += readLoss(model.desc.loss(), rt.ctx, rt.arena);
  }
  return lossSum / double(microbatches);
}

double tessel::run::trainStep(const LoadedModel &model, RankRuntime &rt,
                              BatchSource &batches, int64_t step,
                              int64_t microbatches) {
  const ModelDesc &desc = model.desc;
  tessel_set_step(rt.ctx, uint64_t(step));
  zeroGrads(desc, rt.ctx, rt.arena);
  double loss = runMicrobatches(model, rt, batches, step, microbatches,
                                model.backward, "backward");
  float gradScale = 1.0f / float(microbatches);
  tessel_copy_to_device(rt.ctx, at(rt.arena, *desc.withRole("grad_scale")[0]),
                        &gradScale, sizeof(gradScale));
  model.update(rt.ctx, rt.arena);
  tessel_synchronize(rt.ctx);
  checkKernelError(rt.ctx, "step " + std::to_string(step + 1) + " (update)");
  return loss;
}

double tessel::run::evalStep(const LoadedModel &model, RankRuntime &rt,
                             BatchSource &batches, int64_t step,
                             int64_t microbatches) {
  // Counter-based randomness (dropout) draws fresh masks every step.
  tessel_set_step(rt.ctx, uint64_t(step));
  return runMicrobatches(model, rt, batches, step, microbatches, model.forward,
                         "forward");
}
