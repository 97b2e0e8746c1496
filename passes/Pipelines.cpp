//===- Pipelines.cpp - The compile pipeline, built once for every tool ----===//

#include "passes/Pipelines.h"
#include "passes/Passes.h"
#include "passes/Sharding.h"

#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;
using namespace tessel;

TrainSettingTexts CompilePipelineOptions::givenTrainSettings() const {
  TrainSettingTexts given;
#define TESSEL_TRAIN_SETTING(Field, Type, Key, Flag, Kind, Default, Choices,   \
                             Noun, Help)                                       \
  if (Field.hasValue())                                                        \
    given.emplace_back(Key, Field.getValue());
#include "runtime/config/TrainSettings.def"
  return given;
}

bool CompilePipelineOptions::setTrainSetting(const std::string &key,
                                             const std::string &text) {
#define TESSEL_TRAIN_SETTING(Field, Type, Key, Flag, Kind, Default, Choices,   \
                             Noun, Help)                                       \
  if (key == Key) {                                                            \
    Field = text;                                                              \
    return true;                                                               \
  }
#include "runtime/config/TrainSettings.def"
  return false;
}

bool CompilePipelineOptions::pipelined() const {
  std::string error;
  std::optional<Mesh> parsed = Mesh::parse(mesh, error);
  if (!parsed)
    return false; // tessel-propagate-sharding reports it.
  std::optional<int> axis = parsed->axisIndex(kPipelineAxisName);
  return axis && parsed->shape[*axis] > 1;
}

/// The plan pipeline of one model: the whole module's, or a stage's.
static void buildModelPlan(OpPassManager &pm,
                           const CompilePipelineOptions &options) {
  pm.addPass(createMaskIgnoredLabelsPass());
  pm.addPass(createFuseLogitSoftcapPass());
  // Before autodiff, which derives the repeats' gradient sums.
  if (options.mesh.hasValue()) {
    RepeatKvHeadsPassOptions repeat;
    repeat.mesh = options.mesh;
    if (options.rules.hasValue())
      repeat.rules = options.rules;
    pm.addPass(createRepeatKvHeadsPass(repeat));
  }
  if (options.train)
    pm.addPass(createAutodiffPass(options.givenTrainSettings()));
  if (options.mesh.hasValue()) {
    PropagateShardingPassOptions sharding;
    sharding.mesh = options.mesh;
    if (options.rules.hasValue())
      sharding.rules = options.rules;
    sharding.sequenceParallel = options.sequenceParallel;
    pm.addPass(createPropagateShardingPass(sharding));
    PartitionPassOptions partition;
    // ZeRO replaces the dp all-reduces of gradients, then buckets the rest.
    partition.bucketMb = options.zero > 0 ? 0.0 : double(options.bucketMb);
    partition.localBatchnorm = options.localBatchnorm;
    pm.addPass(createPartitionPass(partition));
  }
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  // After CSE, which would merge a ZeRO-3 parameter's second gather (the
  // backward's) into the forward's.
  if (options.mesh.hasValue() && options.zero > 0) {
    ZeroPassOptions zero;
    zero.stage = options.zero;
    zero.reshardAfterForward = options.reshardAfterForward;
    zero.bucketMb = options.bucketMb;
    pm.addPass(createZeroPass(zero));
  }
  // A pipeline stage: its forward keeps what its backward reads (first:
  // the passes below derive their entries from that backward).
  pm.addPass(createKeepStageActivationsPass());
  // A zero-bubble pipeline stage: its backward's input and weight parts.
  pm.addPass(createSplitBackwardPass());
  // A clipping pipeline stage: its gradient norm, summed over the stages
  // by the launcher.
  pm.addPass(createSplitUpdateNormPass());
  // One gradient reduction per step under gradient accumulation, beside
  // the backward that reduces each microbatch.
  if (options.mesh.hasValue() && options.train) {
    DeferGradientReductionPassOptions defer;
    defer.bucketMb = options.bucketMb;
    pm.addPass(createDeferGradientReductionPass(defer));
  }
  // On one rank's program, once ZeRO and the split no longer look for
  // accumulates, and before the overlap orders the collectives around the
  // fused ops. A repeated layer's weight gradients first move to where the
  // layer computes them, so that their GEMMs add them.
  if (options.fuseEpilogues) {
    pm.addPass(createAccumulateInLayersPass());
    FuseEpiloguesPassOptions fuse;
    fuse.residualNorms = options.fuseResidualNorms;
    pm.addPass(createFuseEpiloguesPass(fuse));
  }
  if (options.mesh.hasValue() && options.overlap > 0) {
    OverlapCommunicationPassOptions overlap;
    overlap.inFlight = options.overlap;
    pm.addPass(createOverlapCommunicationPass(overlap));
  }
  // After the overlap, whose windows it keeps covered.
  if (options.fuseEpilogues && options.fuseBiasGrads)
    pm.addPass(createFuseBiasGradsPass());
  pm.addPass(createPlanMemoryPass());
}

void tessel::buildPlanPipeline(OpPassManager &pm,
                               const CompilePipelineOptions &options) {
  // The precision rewrites the forward before anything derives from it
  // (a pipeline's stages then pass bf16 or f64 activations).
  if (options.precision == "f64") {
    pm.addPass(createPromoteF64Pass());
  } else if (options.precision != "f32") {
    MixedPrecisionPassOptions mixed;
    mixed.precision = options.precision;
    mixed.gradPrecision = options.gradPrecision;
    pm.addPass(createMixedPrecisionPass(mixed));
  }
  // Every compile ends with the communication check: each rank's
  // collectives (and a pipeline's sends and receives) must match.
  if (!options.pipelined()) {
    buildModelPlan(pm, options);
    pm.addPass(createCheckCommunicationPass());
    return;
  }
  PipelineSplitPassOptions split;
  split.mesh = options.mesh;
  if (options.rules.hasValue())
    split.rules = options.rules;
  split.sequenceParallel = options.sequenceParallel;
  split.stageLayers = options.stageLayers;
  split.microbatches = options.microbatches;
  split.schedule = options.pipelineSchedule;
  split.virtualStages = options.virtualStages;
  split.stageRecompute = options.stageRecompute;
  if (options.noDecay.hasValue())
    split.noDecay = options.noDecay;
  if (options.freeze.hasValue())
    split.freeze = options.freeze;
  pm.addPass(createPipelineSplitPass(split));
  buildModelPlan(pm.nest<ModuleOp>(), options);
  pm.addPass(createCheckCommunicationPass());
}

void tessel::buildLowerPipeline(OpPassManager &pm,
                                const CompilePipelineOptions &options) {
  LowerToRuntimePassOptions lowering;
  lowering.sourceName = options.source;
  if (options.pipelined()) {
    pm.nest<ModuleOp>().addPass(createLowerToRuntimePass(lowering));
    pm.addPass(createLinkStagesPass());
  } else {
    pm.addPass(createLowerToRuntimePass(lowering));
  }
  pm.addPass(createSCFToControlFlowPass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

void tessel::buildCompilePipeline(OpPassManager &pm,
                                  const CompilePipelineOptions &options) {
  buildPlanPipeline(pm, options);
  buildLowerPipeline(pm, options);
}

void tessel::registerTesselPipelines() {
  PassPipelineRegistration<CompilePipelineOptions>(
      "tessel-pipeline",
      "The whole compile pipeline of tessel-compile, from an nn model to the "
      "LLVM dialect (what tessel-compile --emit=mlir writes)",
      buildCompilePipeline);
}
