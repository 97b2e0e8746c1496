//===- NNDialect.td - the nn model dialect -----------------*- tablegen -*-===//
//
// The model language of Tessel: a forward pass over ranked tensors ending in
// a scalar loss.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_DIALECT_NN_NNDIALECT_TD
#define TESSEL_DIALECT_NN_NNDIALECT_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"

def NN_Dialect : Dialect {
  let name = "nn";
  let cppNamespace = "::tessel::nn";
  let summary = "Tessel's model language: tensors in, a scalar loss out.";
  let description = [{
    A model is a `func.func` whose arguments are annotated as parameters
    (`nn.param = "name"`, `nn.init = #nn.init<...>`), inputs (`nn.input`) and
    labels (`nn.label`), each with one logical axis name per dimension
    (`nn.axes = ["batch", "embed"]`). Its body is a forward pass of `nn` ops
    and its first result is the scalar loss. The mesh and the mapping of
    logical axes to mesh axes come at compile time, so the same model compiles
    for one device or many.

    ```mlir
    func.func @loss(
        %x: tensor<32x784xf32> {nn.input, nn.axes = ["batch", "embed"]},
        %y: tensor<32xi32> {nn.label, nn.axes = ["batch"]},
        %w: tensor<784x10xf32> {nn.param = "fc.weight",
                                nn.init = #nn.init<normal, 0.02>,
                                nn.axes = ["embed", "classes"]}) -> tensor<f32> {
      %z = nn.matmul %x, %w : (tensor<32x784xf32>, tensor<784x10xf32>) -> tensor<32x10xf32>
      %l = nn.cross_entropy %z, %y : (tensor<32x10xf32>, tensor<32xi32>) -> tensor<f32>
      return %l : tensor<f32>
    }
    ```
  }];
  let useDefaultAttributePrinterParser = 1;
  let hasConstantMaterializer = 1;
  let hasRegionArgAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;
  let hasOperationAttrVerify = 1;
  let extraClassDeclaration = [{
    /// Names of the argument attributes that describe a model's interface.
    static constexpr llvm::StringLiteral kParamAttrName = "nn.param";
    static constexpr llvm::StringLiteral kInitAttrName = "nn.init";
    static constexpr llvm::StringLiteral kInputAttrName = "nn.input";
    static constexpr llvm::StringLiteral kLabelAttrName = "nn.label";
    static constexpr llvm::StringLiteral kAxesAttrName = "nn.axes";
    /// Module attribute: extra logical axis names beyond the built-in ones.
    static constexpr llvm::StringLiteral kLogicalAxesAttrName = "nn.logical_axes";
    /// Training (tessel-autodiff): the module's optimizer settings (a
    /// dictionary), a layer function's recompute policy, the role of a
    /// generated entry function ("backward" or "update"), and the arguments
    /// of those entries: gradient accumulators and optimizer state (named
    /// after their parameter) and the gradient scale (1 / microbatches).
    static constexpr llvm::StringLiteral kTrainAttrName = "nn.train";
    /// On a module: the compute type tessel-mixed-precision ("bf16") or
    /// tessel-promote-f64 ("f64") gave the model; absent, as written.
    static constexpr llvm::StringLiteral kPrecisionAttrName = "nn.precision";
    /// On a module with nn.precision = "bf16": the type parameter gradients
    /// are accumulated, reduced and stored in ("f32" or "bf16").
    static constexpr llvm::StringLiteral kGradPrecisionAttrName =
        "nn.grad_precision";
    static constexpr llvm::StringLiteral kRecomputeAttrName = "nn.recompute";
    static constexpr llvm::StringLiteral kEntryAttrName = "nn.entry";
    static constexpr llvm::StringLiteral kGradAttrName = "nn.grad";
    static constexpr llvm::StringLiteral kStateAttrName = "nn.state";
    static constexpr llvm::StringLiteral kGradScaleAttrName = "nn.grad_scale";
    /// On a model's result after the loss: the number of positions the
    /// loss sums over (a tensor of the loss's type). The step's loss is
    /// then the sum of its microbatches' losses over the sum of their
    /// counts, and the gradient is scaled by one over that count
    /// (tessel-mask-ignored-labels writes it for a mean over labelled
    /// positions; Megatron's calculate_per_token_loss).
    static constexpr llvm::StringLiteral kLossCountAttrName = "nn.loss_count";
    /// Sharding (tessel-propagate-sharding, tessel-partition): per tensor
    /// dimension of an argument or result, or per loop of an op's sharding
    /// rule, the mesh axes that split it (`[["dp"], []]`); the mesh axis
    /// names on `shard.grid @mesh`.
    static constexpr llvm::StringLiteral kShardingAttrName = "nn.sharding";
    static constexpr llvm::StringLiteral kLoopShardingAttrName = "nn.loop_sharding";
    static constexpr llvm::StringLiteral kAxisNamesAttrName = "nn.axis_names";
    /// Pipeline parallelism (tessel-pipeline-split): the module's pipeline
    /// (a dictionary: stages, ranks, virtual stages, microbatches, schedule,
    /// layers per stage, tied parameters), a stage's index (on its module
    /// and its model function), the stage's input activations (arguments)
    /// and outputs (results), the cotangent of a stage's outputs that its
    /// backward receives and the gradient of its inputs it returns, and the
    /// rows [offset, offset + size) of the global stacked parameter a
    /// stage's slice holds (`nn.layers = [offset, total]`).
    static constexpr llvm::StringLiteral kPipelineAttrName = "nn.pipeline";
    static constexpr llvm::StringLiteral kStageAttrName = "nn.stage";
    static constexpr llvm::StringLiteral kStageInputAttrName = "nn.stage_input";
    static constexpr llvm::StringLiteral kStageOutputAttrName = "nn.stage_output";
    static constexpr llvm::StringLiteral kOutputGradAttrName = "nn.output_grad";
    static constexpr llvm::StringLiteral kInputGradAttrName = "nn.input_grad";
    static constexpr llvm::StringLiteral kLayersAttrName = "nn.layers";
    /// A stage's copy of a parameter an earlier stage also holds (GPT's
    /// embedding on the head's stage): after the launcher sums the tied
    /// gradients every holder has the whole one, which the clipping norm
    /// counts once, on the first holder (a unit attribute of the param).
    static constexpr llvm::StringLiteral kTiedCopyAttrName = "nn.tied_copy";
    /// Clipping on a pipeline stage (tessel-split-update-norm): the sum of
    /// squares of the stage's gradients its `grad_norm` entry returns, and
    /// the whole pipeline's sum (the launcher adds the stages') its update
    /// takes; a tensor<f32>.
    static constexpr llvm::StringLiteral kGradSumSquaresAttrName =
        "nn.grad_sum_squares";
    /// A stage module's first layer: its repeats' layer l is the model's
    /// layer first + l (dropout draws the model's layer's mask).
    static constexpr llvm::StringLiteral kFirstLayerAttrName = "nn.first_layer";
    /// Zero-bubble schedules: a stage module whose backward splits into
    /// its input part and its weight part (tessel-split-backward), and the
    /// values the first leaves for the second (`nn.stash = k`).
    static constexpr llvm::StringLiteral kSplitBackwardAttrName = "nn.split_backward";
    static constexpr llvm::StringLiteral kStashAttrName = "nn.stash";
    /// A pipeline stage module that keeps its forward's activations per
    /// microbatch instead of recomputing them in its backward
    /// (tessel-keep-stage-activations), and the values its forward_keep
    /// entry returns for the backward (`nn.kept = k`).
    static constexpr llvm::StringLiteral kKeepActivationsAttrName =
        "nn.keep_activations";
    static constexpr llvm::StringLiteral kKeptAttrName = "nn.kept";
    /// ZeRO (tessel-zero): the module's stage, and on a sharded parameter,
    /// gradient or state argument its split: `{block = array<i64: ...>,
    /// dims = k}`, the rank's block before ZeRO and how many leading
    /// dimensions stay whole (the rest is flattened, padded and chunked
    /// over dp).
    static constexpr llvm::StringLiteral kZeroStageAttrName = "nn.zero_stage";
    static constexpr llvm::StringLiteral kZeroAttrName = "nn.zero";
    /// Overlapped communication (tessel-overlap-communication): a shard
    /// collective that starts here and completes at the nn.wait on its
    /// result, while the ops between them run.
    static constexpr llvm::StringLiteral kAsyncAttrName = "nn.async";
    /// Cross-layer prefetch (nn.repeat's `prefetch`): the function that
    /// starts the next layer's collectives, and the layer function's
    /// arguments that arrive from it in flight (waited for with nn.wait).
    static constexpr llvm::StringLiteral kPrefetchAttrName = "nn.prefetch";
    static constexpr llvm::StringLiteral kPrefetchedAttrName = "nn.prefetched";
    /// Deferred completion (nn.repeat's `finish`): the layer function's
    /// results returned while their collective still runs (nn.in_flight),
    /// and the function that waits for them one layer later and unpacks
    /// them (nn.finish).
    static constexpr llvm::StringLiteral kInFlightAttrName = "nn.in_flight";
    static constexpr llvm::StringLiteral kFinishAttrName = "nn.finish";
    /// The block type a ZeRO-sharded argument `i` of `func` stands for
    /// (its own type when it has no valid nn.zero).
    static ::mlir::RankedTensorType blockTypeOf(::mlir::FunctionOpInterface func,
                                                unsigned i);

    /// A function of a pipeline stage that is not the last: it returns its
    /// output activations (nn.stage_output), not a loss.
    static bool returnsStageOutputs(::mlir::Operation *op);

    /// A model function: a function with a body (not a training entry)
    /// whose arguments say nn.param, nn.input or nn.label.
    static bool isModelFunction(::mlir::Operation *op);

    /// The logical axis names every model may use without declaring them.
    static llvm::ArrayRef<llvm::StringLiteral> getBuiltinLogicalAxes();

  private:
    void registerAttributes();
    void registerOps();
  public:
  }];
}

#endif // TESSEL_DIALECT_NN_NNDIALECT_TD
