//===- Training.cpp - The training step and its flags against the .so -----===//

#include "Training.h"
#include "Error.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

using namespace tessel::run;

namespace {

/// The shortest text that reads back as `v`.
std::string formatNumber(double v) {
  char buf[32];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof(buf), "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v)
      break;
  }
  return buf;
}

/// A value of the "train" dictionary: its text (flag spelling) and, for
/// numbers, the number.
struct CompiledValue {
  std::string text;
  double number = 0;
};

CompiledValue compiledValue(const TrainConfig &c, const std::string &key) {
  auto real = [](double v) { return CompiledValue{formatNumber(v), v}; };
  if (key == "optimizer")
    return {c.optimizer};
  if (key == "schedule") {
    std::string s = c.schedule;
    std::replace(s.begin(), s.end(), '_', '-');
    return {s};
  }
  if (key == "recompute")
    return {c.recompute};
  if (key == "nesterov")
    return {c.nesterov ? "true" : "false"};
  if (key == "warmup")
    return {std::to_string(c.warmup), double(c.warmup)};
  if (key == "total_steps")
    return {std::to_string(c.totalSteps), double(c.totalSteps)};
  if (key == "lr")
    return real(c.lr);
  if (key == "beta1")
    return real(c.beta1);
  if (key == "beta2")
    return real(c.beta2);
  if (key == "eps")
    return real(c.eps);
  if (key == "weight_decay")
    return real(c.weightDecay);
  if (key == "momentum")
    return real(c.momentum);
  if (key == "min_lr")
    return real(c.minLr);
  return real(c.clip);
}

bool sameValue(const TrainingFlag &flag, const CompiledValue &compiled) {
  switch (flag.spec->kind) {
  case TrainingFlagKind::Switch:
    return compiled.text == "true";
  case TrainingFlagKind::Name:
    return flag.value == compiled.text;
  case TrainingFlagKind::Count:
    return std::strtoll(flag.value.c_str(), nullptr, 10) ==
           int64_t(compiled.number);
  case TrainingFlagKind::Real: {
    // The description prints doubles; allow for a printer that rounds.
    double given = std::strtod(flag.value.c_str(), nullptr);
    return std::fabs(given - compiled.number) <=
           1e-9 * std::max(std::fabs(given), std::fabs(compiled.number));
  }
  }
  return false;
}

std::string flagText(const TrainingFlag &flag) {
  return flag.spec->kind == TrainingFlagKind::Switch
             ? std::string(flag.spec->flag)
             : std::string(flag.spec->flag) + " " + flag.value;
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
    args.push_back(flag.spec->flag);
    if (flag.spec->kind != TrainingFlagKind::Switch)
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
    CompiledValue compiled = compiledValue(*model.train, flag.spec->jsonKey);
    if (sameValue(flag, compiled))
      continue;
    std::string given =
        flag.spec->kind == TrainingFlagKind::Switch ? "true" : flag.value;
    if (compiledHere)
      throw RunError("tessel-compile ignored " + flagText(flag) + ": '" +
                     options.model + "' was compiled with " +
                     flag.spec->jsonKey + " " + compiled.text);
    throw RunError(
        std::string(flag.spec->flag) + " " + given + " differs from the " +
        flag.spec->jsonKey + " " + compiled.text + " that model '" + file +
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

std::string tessel::run::describeTraining(const TrainConfig &train) {
  std::string text = train.optimizer + " lr " + formatNumber(train.lr);
  if (train.schedule != "constant")
    text += " (" + train.schedule + ", warmup " + std::to_string(train.warmup) +
            ", total " + std::to_string(train.totalSteps) + ")";
  if (train.clip > 0)
    text += ", clip " + formatNumber(train.clip);
  if (train.recompute != "none")
    text += ", recompute " + train.recompute;
  return text;
}
