//===- Pipelines.h - The compile pipeline, built once for every tool -----===//
//
// nn (forward + loss) → tessel-autodiff → (with a mesh)
// tessel-propagate-sharding → tessel-partition → canonicalize, cse →
// tessel-plan-memory → tessel-lower-to-runtime → scf/arith/cf to LLVM →
// the LLVM dialect. tessel-compile, tessel-opt (--tessel-pipeline) and the
// benchmarks build it through these functions and nothing else.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_PASSES_PIPELINES_H
#define TESSEL_PASSES_PIPELINES_H

#include "passes/TrainSettings.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

namespace tessel {

/// The pipeline's options: tessel-opt --tessel-pipeline="mesh=dp=2,tp=2
/// optimizer=sgd lr=0.1", or set field by field by a tool.
struct CompilePipelineOptions
    : public mlir::PassPipelineOptions<CompilePipelineOptions> {
  Option<bool> train{*this, "train",
                     llvm::cl::desc("Derive the training step: backward and "
                                    "optimizer (false: evaluation only)"),
                     llvm::cl::init(true)};
  // The training settings (runtime/config/TrainSettings.def) under their
  // flag names; unset ones come from the module's nn.train, then defaults.
#define TESSEL_TRAIN_SETTING(Field, Type, Key, Flag, Kind, Default, Choices,   \
                             Noun, Help)                                       \
  Option<std::string> Field{*this, Flag, llvm::cl::desc(Help)};
#include "runtime/config/TrainSettings.def"

  Option<std::string> precision{
      *this, "precision",
      llvm::cl::desc("Compute type of forward and backward: f32, bf16 "
                     "parameters around f32 master weights "
                     "(tessel-mixed-precision), or f64 (tessel-promote-f64)"),
      llvm::cl::init("f32")};
  Option<std::string> gradPrecision{
      *this, "grad-precision",
      llvm::cl::desc("With precision bf16: the gradients' type, f32 "
                     "(reduced and accumulated in f32) or bf16"),
      llvm::cl::init("f32")};
  Option<std::string> mesh{
      *this, "mesh",
      llvm::cl::desc("Device mesh, e.g. dp=2,tp=2 (none: one device)")};
  Option<std::string> rules{
      *this, "rules",
      llvm::cl::desc("Logical axis to mesh axis rules, e.g. batch=dp,mlp=tp "
                     "(default: tessel-propagate-sharding's)")};
  Option<bool> sequenceParallel{
      *this, "sequence-parallel",
      llvm::cl::desc("Split the sequence over tp outside the tensor-parallel "
                     "regions"),
      llvm::cl::init(false)};
  Option<bool> localBatchnorm{
      *this, "local-batchnorm",
      llvm::cl::desc("Batch norm keeps per-rank statistics (no "
                     "SyncBatchNorm)"),
      llvm::cl::init(false)};
  Option<double> bucketMb{
      *this, "bucket-mb",
      llvm::cl::desc("Gradient all-reduce bucket size in MiB (0: one "
                     "all-reduce per gradient)"),
      llvm::cl::init(25.0)};
  Option<int64_t> zero{
      *this, "zero",
      llvm::cl::desc("ZeRO stage over dp: 0 (off), 1 (optimizer state), 2 "
                     "(and gradients), 3 (and parameters)"),
      llvm::cl::init(0)};
  Option<bool> reshardAfterForward{
      *this, "reshard-after-forward",
      llvm::cl::desc("ZeRO-3: gather parameters again for the backward "
                     "(false: keep them from the forward)"),
      llvm::cl::init(true)};
  Option<int64_t> overlap{
      *this, "overlap",
      llvm::cl::desc("Collectives overlapping compute per kind (computed, "
                     "prefetched) at once; 0: every collective blocks "
                     "(tessel-overlap-communication)"),
      llvm::cl::init(2)};
  Option<bool> fuseEpilogues{
      *this, "fuse-epilogues",
      llvm::cl::desc("Fold the accumulate or bias add after a matmul into "
                     "the GEMM (tessel-fuse-epilogues)"),
      llvm::cl::init(true)};
  Option<bool> fuseBiasGrads{
      *this, "fuse-bias-grads",
      llvm::cl::desc("With fuse-epilogues: also fold a bias gradient's sum "
                     "into its weight gradient's GEMM where every overlap "
                     "window keeps a kernel (tessel-fuse-bias-grads)"),
      llvm::cl::init(true)};
  Option<bool> fuseResidualNorms{
      *this, "fuse-residual-norms",
      llvm::cl::desc("Fold a residual add into the norm of its sum and a "
                     "norm's input gradient into the residual gradient's add "
                     "(tessel-fuse-epilogues{residual-norms})"),
      llvm::cl::init(true)};
  Option<std::string> stageLayers{
      *this, "stage-layers",
      llvm::cl::desc("Pipeline: layers per stage, e.g. 3,4,4,3 (default: "
                     "balanced by cost)")};
  Option<int64_t> microbatches{
      *this, "microbatches",
      llvm::cl::desc("Pipeline: microbatches per step (default: as many as "
                     "pp ranks)"),
      llvm::cl::init(0)};
  Option<std::string> pipelineSchedule{
      *this, "pipeline-schedule",
      llvm::cl::desc(
          "Pipeline schedule: gpipe, 1f1b, interleaved, zb-h1, zb-v or "
          "dualpipev"),
      llvm::cl::init("1f1b")};
  Option<int64_t> virtualStages{
      *this, "virtual-stages",
      llvm::cl::desc("Pipeline: stages per rank (interleaved and zb-v; "
                     "default 2 there)"),
      llvm::cl::init(1)};
  Option<bool> stageRecompute{
      *this, "stage-recompute",
      llvm::cl::desc("Pipeline: recompute each stage's forward in its "
                     "backward (GPipe) instead of keeping its activations "
                     "per microbatch"),
      llvm::cl::init(false)};
  Option<std::string> source{
      *this, "source",
      llvm::cl::desc("The model's file name, recorded in its description")};

  /// The mesh has a `pp` axis of more than one rank: the model is split
  /// into pipeline stages, each compiled as a nested module.
  bool pipelined() const;
  /// The training settings that were given, by key.
  TrainSettingTexts givenTrainSettings() const;
  /// Sets the training setting `key` (TrainSettings.def) to `text`; false
  /// for an unknown key.
  bool setTrainSetting(const std::string &key, const std::string &text);
};

/// From the model to the memory plan: the training step, the split over the
/// mesh and the static arena (what the report's flops are counted on).
void buildPlanPipeline(mlir::OpPassManager &pm,
                       const CompilePipelineOptions &options);
/// From the planned module to the LLVM dialect: runtime calls, then
/// upstream's scf/arith/cf-to-LLVM conversions.
void buildLowerPipeline(mlir::OpPassManager &pm,
                        const CompilePipelineOptions &options);
/// Both, in order: the whole compile pipeline.
void buildCompilePipeline(mlir::OpPassManager &pm,
                          const CompilePipelineOptions &options);

/// Registers --tessel-pipeline (the whole pipeline) with the pass registry.
void registerTesselPipelines();

} // namespace tessel

#endif // TESSEL_PASSES_PIPELINES_H
