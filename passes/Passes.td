//===- Passes.td - every Tessel pass -----------------------*- tablegen -*-===//

#ifndef TESSEL_PASSES_PASSES_TD
#define TESSEL_PASSES_PASSES_TD

include "mlir/Pass/PassBase.td"

def AutodiffPass : Pass<"tessel-autodiff", "mlir::ModuleOp"> {
  let summary = "Derive the training step of a model: backward and optimizer update";
  let description = [{
    For the model function `@f` (arguments with nn.param / nn.input /
    nn.label, scalar loss first), adds two entry functions and leaves `@f`
    as the evaluation entry:

    - `@f_backward` {nn.entry = "backward"}: `@f`'s arguments, then one
      gradient accumulator per trained parameter (`nn.grad = "<name>"`);
      returns the loss and every accumulator plus d loss / d parameter.
      Reverse mode: each op's cotangents come from its `VJPOpInterface`;
      a value used several times (a tied embedding) sums its cotangents.
      An `nn.repeat` becomes a repeat that also stacks what each layer's
      backward needs, and a reversed repeat of the layer's derivative,
      whose stacked results are the stacked parameters' gradients. What a
      layer keeps is its recompute policy (`recompute` option, or
      `nn.recompute` on the layer function): `none` keeps every activation
      its backward reads, `selective` keeps only results that cost more
      than 8 flops per element (matmuls, attention) and recomputes the
      rest, `full` keeps only the layer's input and recomputes the layer.
    - `@f_update` {nn.entry = "update"}: parameters, gradients, optimizer
      state (`nn.state`) and the gradient scale (`nn.grad_scale`, 1 / the
      number of microbatches); global-norm clipping, the learning-rate
      schedule and an in-place `nn.optimizer_step` per parameter. A
      parameter whose name a `no_decay` pattern matches
      (`no-decay=*.bias,*ln*`: '*' any characters, '?' one) steps with
      weight_decay 0; a pattern that matches no parameter is a warning.

    The optimizer comes from the options, else from the module's `nn.train`
    dictionary, else PyTorch's AdamW defaults; the resolved settings are
    written back to `nn.train`. The options are the training settings of
    `runtime/config/TrainSettings.def`, one per setting under its flag name
    (`tessel-autodiff{optimizer=sgd lr=0.1 momentum=0.9}`), declared by the
    pass from that list so that tessel-compile, tessel-run and the pass
    share one.

    Before:
    ```mlir
    func.func @f(%w: tensor<4xf32> {nn.param = "w", nn.init = #nn.init<zeros>},
                 %x: tensor<4xf32> {nn.input}) -> tensor<f32> {
      %y = nn.mul %w, %x : tensor<4xf32>
      %l = nn.reduce_sum %y dims = [0] : tensor<4xf32> -> tensor<f32>
      return %l : tensor<f32>
    }
    ```
    After (besides `@f`):
    ```mlir
    func.func @f_backward(%w: ..., %x: ..., %gw: tensor<4xf32> {nn.grad = "w"})
        -> (tensor<f32>, tensor<4xf32> {nn.grad = "w"}) attributes {nn.entry = "backward"} {
      %y = nn.mul %w, %x : tensor<4xf32>
      %l = nn.reduce_sum %y dims = [0] : tensor<4xf32> -> tensor<f32>
      %one = nn.constant dense<1.0> : tensor<f32>
      %dy = nn.broadcast %one dims = [] : tensor<f32> -> tensor<4xf32>
      %dw = nn.mul %dy, %x : tensor<4xf32>
      %acc = nn.accumulate %dw outs(%gw) : tensor<4xf32>
      return %l, %acc : tensor<f32>, tensor<4xf32>
    }
    func.func @f_update(%w: ... {nn.param = "w"}, %g: ... {nn.grad = "w"},
                        %m: ... {nn.state = "w.m"}, %v: ... {nn.state = "w.v"},
                        %scale: tensor<f32> {nn.grad_scale}) -> (...) attributes {nn.entry = "update"} {
      %w2, %m2, %v2 = nn.optimizer_step %g, %scale outs(%w, %m, %v) {optimizer = adamw, ...}
      return %w2, %m2, %v2 : ...
    }
    ```
  }];
  let dependentDialects = ["tessel::nn::NNDialect", "mlir::func::FuncDialect"];
}

def MaskIgnoredLabelsPass
    : Pass<"tessel-mask-ignored-labels", "mlir::ModuleOp"> {
  let summary = "Write a cross-entropy's ignore_index as masked labels and weights";
  let description = [{
    Runs on the forward model, before autodiff (tessel-compile runs it
    first on the model or each pipeline stage). Each `nn.cross_entropy`
    with `ignore_index` becomes `nn.mask_labels`, the cross-entropy of each
    position (`reduction = none`) of the safe labels times their weights,
    and for `sum` / `mean` a `nn.reduce_sum` over the positions; `mean`
    divides by `max(Σ weights, 1)` (written `relu(n - 1) + 1`, before the
    loss: the backward's seed then exists where tessel-fuse-epilogues
    fuses the loss with its gradient). Every sum is
    over all positions, so a split batch all-reduces the loss and the
    count and divides the whole batch's loss by the whole batch's count,
    as one device does.

    Where that mean is the model's loss itself (its only use is the
    return), the model returns the sum as its loss and the count after it
    (`nn.loss_count`) instead of dividing: the launcher divides the sum of
    a step's microbatch losses by the sum of their counts and scales the
    gradients by one over it, so that gradient accumulation gives the mean
    over every labelled position of the step (Megatron's
    calculate_per_token_loss, Hugging Face's num_items_in_batch), the loss
    and parameters of one microbatch of the whole batch.

    ```mlir
    %l = nn.cross_entropy %z, %y {ignore_index = -100 : i64} : (tensor<4x10xf32>, tensor<4xi32>) -> tensor<f32>
    // becomes
    %safe, %w = nn.mask_labels %y ignore_index -100 : (tensor<4xi32>) -> (tensor<4xi32>, tensor<4xf32>)
    %n = nn.reduce_sum %w dims = [0] : tensor<4xf32> -> tensor<f32>
    ...  // %d = relu(%n - 1) + 1
    %each = nn.cross_entropy %z, %safe {reduction = #nn.reduction<none>} : (tensor<4x10xf32>, tensor<4xi32>) -> tensor<4xf32>
    %lw = nn.mul %each, %w : tensor<4xf32>
    %s = nn.reduce_sum %lw dims = [0] : tensor<4xf32> -> tensor<f32>
    %l = nn.div %s, %d : tensor<f32>
    ```
  }];
  let dependentDialects = ["tessel::nn::NNDialect"];
}

def FuseLogitSoftcapPass : Pass<"tessel-fuse-logit-softcap", "mlir::ModuleOp"> {
  let summary = "Fold soft-capped logits into the cross-entropy that reads them";
  let description = [{
    Runs on the forward model after tessel-mask-ignored-labels and before
    autodiff. `c · tanh(z / c)` (a splat `c > 0`, Gemma 2's
    `final_logit_softcapping`) read by an `nn.cross_entropy` alone becomes
    that loss's `logit_softcap`:

    ```mlir
    %q = nn.div %z, %c : tensor<4x10xf32>
    %t = nn.tanh %q : tensor<4x10xf32>
    %y = nn.mul %t, %c : tensor<4x10xf32>
    %l = nn.cross_entropy %y, %labels : (tensor<4x10xf32>, tensor<4xi32>) -> tensor<f32>
    // becomes
    %l = nn.cross_entropy %z, %labels {logit_softcap = 30.0 : f64} : (tensor<4x10xf32>, tensor<4xi32>) -> tensor<f32>
    ```

    The loss and its gradient cap inside their kernels: neither the capped
    logits nor their tanh is stored, with or without a label smoothing. A
    chain another op reads stays. The rewrite is nn.cross_entropy's
    canonicalization, applied alone (no other folding before autodiff).
  }];
  let dependentDialects = ["tessel::nn::NNDialect"];
}

def RepeatKvHeadsPass : Pass<"tessel-repeat-kv-heads", "mlir::ModuleOp"> {
  let summary = "Repeat grouped-query attention's key/value heads up to the ranks that split its heads";
  let description = [{
    Runs on the forward model before autodiff, on a mesh. Where the rules
    split the logical axis `heads` over n ranks and an `nn.attention` has
    fewer key/value heads Hkv than n (n a multiple of Hkv, its query heads
    H a multiple of n), its key and value are repeated to n heads, each
    head R = n / Hkv times in a row (Hugging Face's `repeat_kv`; Megatron
    replicates a kv head on the ranks that share it):

    ```mlir
    // mesh=tp=4: 4 query heads over 2 kv heads
    %a = nn.attention %q, %k, %v causal : (tensor<8x64x4x32xf32>, tensor<8x64x2x32xf32>, tensor<8x64x2x32xf32>) -> tensor<8x64x4x32xf32>
    // becomes
    %kb = nn.broadcast %k dims = [0, 1, 2, 4] : tensor<8x64x2x32xf32> -> tensor<8x64x2x2x32xf32>
    %kn = nn.reshape %kb : tensor<8x64x2x2x32xf32> -> tensor<8x64x4x32xf32>
    ... (%v alike)
    %a = nn.attention %q, %kn, %vn causal : (tensor<8x64x4x32xf32>, tensor<8x64x4x32xf32>, tensor<8x64x4x32xf32>) -> tensor<8x64x4x32xf32>
    ```

    Where the key (or value) is a projection `reshape(matmul(x, W))`, with
    or without a bias, through ops that treat each head alike (`nn.rope`, a
    per-head norm), the projection's weight columns (and bias) are
    repeated instead (W [E, Hkv·D] to [E, n·D]) and the chain runs on the
    n heads: a rank then needs its
    head's columns of W, a weight-sized gather rather than an
    activation-sized one.

    Each query head reads the kv head it read before, so the model is the
    same; the kv heads then split with the query heads, one per rank,
    where the partitioner gathered q, k and v whole and ran the whole
    attention on every rank. Without a mesh, or with `heads` unsplit,
    nothing changes.
  }];
  let dependentDialects = ["tessel::nn::NNDialect"];
  let options = [
    Option<"mesh", "mesh", "std::string", "\"\"",
           "Mesh axes and sizes, e.g. dp=2,tp=2 (tessel-propagate-sharding's)">,
    Option<"rules", "rules", "std::string",
           "::tessel::kDefaultShardingRules.str()",
           "Logical axis to mesh axis rules (tessel-propagate-sharding's); "
           "the mesh axes of `heads` split the attention's heads">
  ];
}

def ReportCostPass : Pass<"tessel-report-cost", "mlir::ModuleOp"> {
  let summary = "Report the flops and bytes of every nn op and function";
  let description = [{
    Asks every op for its cost (`CostOpInterface`) and reports it as a remark
    on the op, then the totals of each function as a remark on the function.
    An op with work but no cost model (e.g. a `func.call` that was not
    inlined) is an error: the report would otherwise be silently low.

    Before:
    ```mlir
    func.func @f(%a: tensor<2x3xf32>, %b: tensor<3x4xf32>) -> tensor<2x4xf32> {
      %c = nn.matmul %a, %b : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
      return %c : tensor<2x4xf32>
    }
    ```
    Reports (the IR is unchanged):
    ```
    remark: flops 48, bytes 104
    remark: function @f: 1 ops, flops 48, bytes 104
    ```
  }];
  let options = [
    Option<"perOp", "per-op", "bool", /*default=*/"true",
           "Report every op, not only the function totals">
  ];
  let dependentDialects = ["tessel::nn::NNDialect"];
}

def ReportCommunicationPass
    : Pass<"tessel-report-communication", "mlir::ModuleOp"> {
  let summary = "Print what each rank of a lowered model communicates per step";
  let description = [{
    Reads the model description that `tessel-lower-to-runtime` writes into
    the module (`__tessel_model_json`: the mesh and, per entry, the
    collectives one call runs) and prints the table of
    `tessel-compile --report`: per entry and collective the calls, the
    payload bytes (what the runtime's counters show after a step) and the
    bytes a rank sends with the ring algorithms, then one step's total. A
    model on one device prints nothing; a module that was not lowered is an
    error.

    On `tessel-pipeline="mesh=dp=2"` of the MLP (the IR is unchanged):
    ```
      communication per rank (mesh dp=2)
        entry     collective      axes         calls            bytes       ring bytes
        backward  all_reduce      dp               1          3248200          3248200
        step (backward+update)                     1          3248200          3248200
    ```
  }];
}

def PlanMemoryPass : Pass<"tessel-plan-memory", "mlir::ModuleOp"> {
  let summary = "Give every tensor of every nn function an offset in a static arena";
  let description = [{
    Plans the scratch memory of each function with nn ops: every op result
    gets a byte offset (64-byte aligned) in the function's scratch region,
    reusing space between values whose live ranges do not overlap (greedy
    by size: the largest buffers first, each at the lowest free offset).
    With `report`, each function's peak is printed next to its floor, the
    most bytes alive at one op. A reshape is a view: its result shares
    its operand's buffer, whose live range grows to cover the view's uses.
    So is an `nn.slice` whose window is one contiguous run of its operand
    (a gradient of a bucket, a block of rows), at its byte offset there,
    marked `tessel.view` for the lowering (no copy), unless something
    updates the operand's memory in place (the view would see the update).
    An `nn.repeat` reserves a workspace for the whole loop: one buffer per
    carried value plus the layer function's own scratch (layers are planned
    before their callers). Function arguments live in memory the caller
    provides and take no scratch; so does a returned value that has a
    buffer of its own: it is computed straight into the caller's memory for
    that result (offset -2 - i for result i), with no copy at the return.
    An in-place update (`DestinationStyleOpInterface`: `nn.accumulate`,
    `nn.optimizer_step`) takes its init's bytes, and an init read after its
    update is an error. An `nn.concat` input is computed straight where the
    concat puts it (a gradient bucket costs no copy; the concat's
    `tessel.in_place_inputs` says which) when it is a contiguous slab of the
    result at a 16-byte aligned offset, made by an op of the function into
    a buffer of its own (not an argument, a view, an update in place or
    another concat), given once and read by nothing after the concat: the
    concat's buffer then opens where the first such input is made, and an
    all-reduce may still sum it in place. Inside a returned buffer the
    input's byte offset from the result's memory is `tessel.sub_offsets`.

    Before:
    ```mlir
    func.func @f(%a: tensor<4x8xf32>) -> tensor<4x8xf32> {
      %0 = nn.exp %a : tensor<4x8xf32>
      %1 = nn.tanh %0 : tensor<4x8xf32>
      %2 = nn.exp %1 : tensor<4x8xf32>
      return %2 : tensor<4x8xf32>
    }
    ```
    After (%0 and %1 are alive together; %2, returned, is computed in the
    caller's result memory):
    ```mlir
    func.func @f(%a: tensor<4x8xf32>) -> tensor<4x8xf32>
        attributes {tessel.scratch_bytes = 256 : i64} {
      %0 = nn.exp %a {tessel.offsets = array<i64: 0>} : tensor<4x8xf32>
      %1 = nn.tanh %0 {tessel.offsets = array<i64: 128>} : tensor<4x8xf32>
      %2 = nn.exp %1 {tessel.offsets = array<i64: -2>} : tensor<4x8xf32>
      return %2 : tensor<4x8xf32>
    }
    ```
  }];
  let options = [
    Option<"report", "report", "bool", /*default=*/"false",
           "Report each function's scratch peak as a remark">
  ];
  let dependentDialects = ["tessel::nn::NNDialect"];
}

def LowerToRuntimePass : Pass<"tessel-lower-to-runtime", "mlir::ModuleOp"> {
  let summary = "Lower memory-planned nn functions to calls of the runtime C ABI";
  let description = [{
    Runs after `tessel-plan-memory`. Every function with nn ops becomes an
    `llvm.func @tessel_fn_<name>(ctx, scratch, args..., results...)` whose
    tensors are pointers: arguments and results in memory the caller owns,
    every other value at its planned offset in `scratch`. Each nn op becomes
    one call of its runtime kernel (`tessel_matmul`, `tessel_unary`,
    `tessel_strided_copy`, ...), a reshape becomes nothing (a view), and an
    `nn.repeat` becomes an `scf.for` over the layers that calls the layer's
    function on parameter slices, alternating two carried buffers.

    The model function (the one whose arguments carry nn.param, nn.input or
    nn.label) also gets the two symbols of the compiled model's ABI
    (docs/model-abi.md): `tessel_forward(ctx, arena)`, which lays the arena
    out as [params | inputs | outputs | scratch], and `tessel_model_json()`,
    the model's description for the launcher.

    Before:
    ```mlir
    func.func @f(%a: tensor<4x8xf32>) -> tensor<4x8xf32>
        attributes {tessel.scratch_bytes = 128 : i64} {
      %0 = nn.exp %a {tessel.offsets = array<i64: 0>} : tensor<4x8xf32>
      %1 = nn.tanh %0 {tessel.offsets = array<i64: -2>} : tensor<4x8xf32>
      return %1 : tensor<4x8xf32>
    }
    ```
    After (%1 is computed in the result memory, so the return copies
    nothing):
    ```mlir
    llvm.func @tessel_fn_f(%ctx: !llvm.ptr, %scratch: !llvm.ptr, %a: !llvm.ptr, %out: !llvm.ptr) {
      %0 = llvm.getelementptr %scratch[%c0] : (!llvm.ptr, i64) -> !llvm.ptr, i8
      llvm.call @tessel_unary(%ctx, %exp, %f32, %a, %0, %c32) : (...) -> ()
      llvm.call @tessel_unary(%ctx, %tanh, %f32, %0, %out, %c32) : (...) -> ()
      llvm.return
    }
    ```
  }];
  let options = [
    Option<"sourceName", "source", "std::string", /*default=*/"\"\"",
           "Name of the model's source file, recorded in its description">
  ];
  let dependentDialects = ["mlir::LLVM::LLVMDialect", "mlir::scf::SCFDialect",
                           "mlir::arith::ArithDialect"];
}

def PropagateShardingPass : Pass<"tessel-propagate-sharding", "mlir::ModuleOp"> {
  let summary = "Give every value of the training step a sharding on a device mesh";
  let description = [{
    Creates the mesh as an upstream `shard.grid @mesh` (axis names in
    `nn.axis_names`), maps each argument's logical axes (`nn.axes`) to mesh
    axes by the rules (Flax-style: rules in order, a mesh axis already used
    by an earlier dimension of the same value is skipped), and propagates
    through every op's upstream `shard::ShardingInterface` rule, forward and
    backward until nothing changes. An explicit `nn.sharding` argument
    attribute (a user annotation) always wins; where two operands ask for
    different splits of the same loop, the cheaper one in bytes to reshard
    wins. Gradients and optimizer states take their parameter's sharding.
    Every op gets `nn.loop_sharding` (per loop, the mesh axes splitting it);
    every argument and result `nn.sharding`. With `debug`, a remark on each
    op says which value decided each split.

    A contraction over flattened rows (a weight's gradient, `[B·S, K]ᵀ ·
    [B·S, N]`) whose operands split an inner row dimension (the sequence
    under context parallelism), which a reshape cannot pass in blocks, is
    rewritten over the rows' own dimensions (`nn.matmul [B, S, K], [B, S, N]
    transpose_lhs sum_batch`) and propagated again: each rank multiplies its
    own rows (`passes/RowContractions.h`).

    Before (`mesh=dp=2`):
    ```mlir
    func.func @f(%x: tensor<8x4xf32> {nn.input, nn.axes = ["batch", "embed"]},
                 %w: tensor<4x4xf32> {nn.param = "w", nn.axes = ["embed", "mlp"]}) -> ...
      %h = nn.matmul %x, %w : (tensor<8x4xf32>, tensor<4x4xf32>) -> tensor<8x4xf32>
    ```
    After:
    ```mlir
    shard.grid @mesh(shape = 2) {nn.axis_names = ["dp"]}
    func.func @f(%x: tensor<8x4xf32> {..., nn.sharding = [["dp"], []]}, %w: ...) -> ...
      %h = nn.matmul %x, %w {nn.loop_sharding = [["dp"], [], []]} : ...
    ```
  }];
  let dependentDialects = ["mlir::shard::ShardDialect"];
  let options = [
    Option<"mesh", "mesh", "std::string", "\"\"",
           "Mesh axes and sizes, e.g. dp=2,tp=2 (row-major, last axis fastest)">,
    Option<"rules", "rules", "std::string",
           "::tessel::kDefaultShardingRules.str()",
           "Logical axis to mesh axis rules, in priority order">,
    Option<"sequenceParallel", "sequence-parallel", "bool", "false",
           "Split the sequence over tp outside the tensor-parallel regions "
           "(Megatron sequence parallelism)">,
    Option<"debug", "debug", "bool", "false",
           "Emit a remark per op explaining each split">
  ];
}

def PipelineSplitPass : Pass<"tessel-pipeline-split", "mlir::ModuleOp"> {
  let summary = "Split the model's layers into pipeline stages over the mesh's pp axis";
  let description = [{
    With a mesh whose `pp` axis has P > 1 ranks, splits the layers of the
    model's `nn.repeat` into P·V contiguous stages (V virtual stages per rank
    with the interleaved and zb-v schedules; stage s runs on pp rank s mod
    P, or with zb-v on rank s for s < P and 2P - 1 - s after). Each
    stage becomes a nested `module @stage<s>` {nn.stage = s} holding a model
    of its own: stage 0 also takes the ops before the layers, the last stage
    the ops after them and the loss. A stage's stacked parameters are its
    rows of the global ones (`nn.layers = [offset, total]`); stages after
    the first take the previous stage's activations (`nn.stage_input`),
    stages before the last return theirs (`nn.stage_output`), sharded as
    the layers carry them. A parameter that several stages use (a tied
    embedding and head) is held by each. The layers are balanced by the
    cost interface's flops (the first stage counts the embedding, the last
    the head), unless `stage-layers` pins them; the schedule's constraints
    are checked here. The module gets `nn.pipeline` (ranks, virtual stages,
    microbatches, schedule, layers and flops per stage, tied parameters).
    Without a pp axis (or pp=1) the module is left alone.
  }];
  let options = [
    Option<"mesh", "mesh", "std::string", "\"\"",
           "Mesh axes and sizes, e.g. dp=2,pp=2">,
    Option<"rules", "rules", "std::string", "\"\"",
           "Logical axis rules (for the stage boundary's sharding)">,
    Option<"sequenceParallel", "sequence-parallel", "bool", "false",
           "Megatron sequence parallelism (for the boundary's sharding)">,
    Option<"stageLayers", "stage-layers", "std::string", "\"\"",
           "Layers per stage, e.g. 3,4,4,3 (default: balanced by cost)">,
    Option<"microbatches", "microbatches", "int64_t", "0",
           "Microbatches per step (default: as many as pp ranks)">,
    Option<"schedule", "schedule", "std::string", "\"1f1b\"",
           "Pipeline schedule: gpipe, 1f1b, interleaved, zb-h1, zb-v or dualpipev">,
    Option<"virtualStages", "virtual-stages", "int64_t", "1",
           "Stages per rank (interleaved and zb-v; default 2 there)">,
    Option<"stageRecompute", "stage-recompute", "bool", "false",
           "Recompute each stage's forward in its backward from its input "
           "(GPipe's re-materialisation) instead of keeping its activations "
           "per microbatch">,
    Option<"noDecay", "no-decay", "std::string", "\"\"",
           "The training step's no_decay patterns (else the module's "
           "nn.train ones): a pattern that matches no parameter of the whole "
           "model is a warning here, since each stage's tessel-autodiff sees "
           "only its own parameters">,
    Option<"freeze", "freeze", "std::string", "\"\"",
           "The training step's freeze patterns (else the module's nn.train "
           "ones), warned about as the no_decay ones">
  ];
}

def MixedPrecisionPass : Pass<"tessel-mixed-precision", "mlir::ModuleOp"> {
  let summary = "Store a model's parameters and compute its forward (and so its backward) in bf16; f32 master weights";
  let description = [{
    Mixed precision as Megatron and ZeRO train, decided at compile time.
    The model's f32 parameters become bf16 arguments (what the forward and
    backward read; tessel-autodiff keeps an f32 master copy of each in the
    optimizer state, steps it and rounds it back). Every f32 input is cast
    to bf16 at its use, and every op computing in f32 computes in bf16
    instead (the runtime's kernels accumulate reductions, norms and GEMMs
    in f32 and store bf16). The loss runs in f32: the logits are cast up
    for `nn.cross_entropy`, and the returned loss is f32. Constants and
    explicit casts keep their types. Layer functions of `nn.repeat` are
    converted with their repeats. The module records `nn.precision` and
    `nn.grad_precision` (gradients in f32, widened as they leave the
    backward and so reduced and accumulated in f32; or in bf16, the ZeRO
    paper's 2 bytes each). Runs before tessel-autodiff; f64 models are
    refused.
  }];
  let options = [
    Option<"precision", "precision", "std::string", /*default=*/"\"bf16\"",
           "The forward's compute type: bf16, or f32 (the pass does nothing)">,
    Option<"gradPrecision", "grad-precision", "std::string",
           /*default=*/"\"f32\"",
           "The parameter gradients' type: f32 (reduced and accumulated in f32) or bf16">
  ];
}

def PromoteF64Pass : Pass<"tessel-promote-f64", "mlir::ModuleOp"> {
  let summary = "Compute an f32 model in f64 (gradient checks, references)";
  let description = [{
    What PyTorch's `model.double()` is to torch.autograd.gradcheck: every
    f32 tensor of the forward model and its layer functions (parameters,
    inputs, activations, the loss) becomes f64, and a constant's dense
    value is widened exactly, so tessel-autodiff (run after) derives a
    step computing, accumulating and updating in f64. Other types keep
    theirs; ops that infer their result types infer them again, and a
    written cast left converting f64 to f64 is removed. The module records
    `nn.precision = "f64"`. Runs before tessel-autodiff; a module already
    in bf16 mixed precision is refused.
  }];
}

def KeepStageActivationsPass
    : Pass<"tessel-keep-stage-activations", "mlir::ModuleOp"> {
  let summary = "Keep a pipeline stage's forward activations for its backward instead of recomputing them";
  let description = [{
    On a stage module marked `nn.keep_activations` (tessel-pipeline-split
    sets it unless `stage-recompute`), moves the forward part of
    `@f_backward` (every op its loss or output activations depend on) into
    `@f_forward_keep` {nn.entry = "forward_keep"}, which returns those, then
    the values the rest of the backward reads (`nn.kept = k`); the backward
    takes them as arguments instead, and returns only the input gradients
    and the accumulators. The launcher runs a training Forward action as
    forward_keep and keeps the kept values per microbatch until its
    backward, as Megatron does, instead of recomputing the stage's forward
    there (GPipe's re-materialisation). A value computed from parameters and
    constants only is recomputed by the backward rather than kept. Runs
    after partitioning and ZeRO, before the passes that derive entries from
    the backward; other modules are left alone.
  }];
}

def SplitBackwardPass : Pass<"tessel-split-backward", "mlir::ModuleOp"> {
  let summary = "Split a pipeline stage's backward into its input and weight parts (zero bubble)";
  let description = [{
    On a stage module marked `nn.split_backward` (tessel-pipeline-split sets
    it for the zb-h1 and zb-v schedules), derives from `@f_backward` two entries:
    `@f_backward_input` {nn.entry = "backward_input"}, every op the loss,
    the output activations and the input gradients depend on, and
    `@f_backward_weight` {nn.entry = "backward_weight"}, the ops only the
    weight gradients need. Values the first computes and the second reads
    are returned by the first and taken by the second (`nn.stash = k`).
    The derivative of an `nn.repeat` is split the same way, layer by layer:
    a reversed repeat of the layer's input part that also stacks what each
    layer's weight part reads, and a repeat of the weight part. The full
    backward stays. Other modules are left alone.
  }];
}

def SplitUpdateNormPass : Pass<"tessel-split-update-norm", "mlir::ModuleOp"> {
  let summary = "Move a clipping pipeline stage's gradient norm into an entry of its own";
  let description = [{
    On a stage module (`nn.stage`) whose update clips (`nn.clip_scale`),
    moves the ops that compute the clip's sum of squares (`nn.sum_squares`
    of the stage's gradients and the all-reduces that complete it over dp
    and tp) into `@f_grad_norm` {nn.entry = "grad_norm"}, which returns it
    (`nn.grad_sum_squares`), and gives the update an argument
    `nn.grad_sum_squares` that its clip scale reads instead: the launcher
    adds every stage's part over the pipeline between the two calls.
    Tied parameters' copies (`nn.tied_copy`) are not in the sum
    (tessel-autodiff leaves them out). Other modules are left alone.
  }];
}

def DeferGradientReductionPass
    : Pass<"tessel-defer-gradient-reduction", "mlir::ModuleOp"> {
  let summary = "Reduce the gradients once per step, not once per microbatch";
  let description = [{
    On a partitioned module whose backward reduces every gradient by
    all-reduces that only feed its accumulator (tessel-partition's DDP
    buckets, in the backward or in a repeated layer's function), adds
    `@f_backward_no_sync` {nn.entry = "backward_no_sync"}, the backward
    without those all-reduces, and `@f_reduce_grads` {nn.entry =
    "reduce_grads"}, which all-reduces the accumulated gradients over the
    same axes in buckets of `bucket-mb`. The launcher runs M > 1
    microbatches as M backward_no_sync calls and one reduce_grads before
    the update (PyTorch's `no_sync`), one microbatch as the backward; a
    pipeline stage's backward actions likewise. A gradient reduced
    otherwise (ZeRO's reduce-scatters, a sum of reductions) keeps its
    reduction in the backward; a backward with a gradient reduced only in
    part, and a zero-bubble stage's split backward, are left alone.
  }];
  let options = [
    Option<"bucketMb", "bucket-mb", "double", /*default=*/"25.0",
           "reduce_grads' all-reduce bucket size in MiB (0: one all-reduce per gradient)">,
  ];
}

def LinkStagesPass : Pass<"tessel-link-stages", "mlir::ModuleOp"> {
  let summary = "Join the lowered pipeline stages into one module";
  let description = [{
    After each stage's module was lowered to the runtime ABI, moves every
    stage's symbols into the top module: stage s's entries become
    `tessel_s<s>_forward`, `_backward` and `_update`, its private functions
    and globals get the prefix `s<s>.`, and the runtime's declarations are
    kept once. `tessel_model_json()` describes the pipeline: the stages'
    descriptions, the schedule and the tied parameters.
  }];
  let dependentDialects = ["mlir::LLVM::LLVMDialect"];
}

def CheckCommunicationPass
    : Pass<"tessel-check-communication", "mlir::ModuleOp"> {
  let summary = "Reject a partitioned or pipelined step whose ranks' communication does not match";
  let description = [{
    Builds what every world rank communicates in one training step, in
    program order, and matches the ranks' programs against each other
    (runtime/config/CommCheck.h): a collective meets the same kind, size and
    element type on every rank of its group (the ranks differing only in
    its mesh axes), a receive meets a send of the same size and type, and
    no rank waits forever (a receive nobody sends, a cycle of waits, ranks
    of a group standing at different collectives). A step that could
    deadlock or corrupt data is an error at compile time, naming the two
    ranks, the two operations and their locations.

    Without a mesh the module is left alone. A partitioned module runs
    `@loss_backward` then `@loss_update` on every rank (SPMD programs always
    match; the check is cheap). A pipelined module (`nn.pipeline`, one
    `module @stage<s>` per stage) runs what the launcher runs: each pp
    rank's schedule (nn.pipeline's `actions` when the module gives its own,
    in formatSchedule's notation, else the named schedule), a forward or
    backward calling the stage's entry and its collectives, a send or
    receive one message per `nn.stage_output`/`nn.stage_input` (or
    `nn.input_grad`/`nn.output_grad`) tensor to the rank of the same
    coordinates on the peer's pp coordinate, tagged
    `pipeline::messageTag`; then the tied parameters' gradients exchanged
    between their holders, every stage's `@loss_update`, and the loss's
    all-reduce over pp. Stage boundaries are also compared directly: stage
    s's outputs must have the local types of stage s+1's inputs, and its
    output gradients those of stage s+1's input gradients.

    The module is not changed. Example: with stage 1 of
    ```mlir
    func.func @loss(%x: tensor<4x16xf32> {nn.stage_input}, ...)
    ```
    after a stage 0 returning `tensor<4x8xf32> {nn.stage_output}`:
    ```
    error: stage 1's input #0 is 'tensor<4x16xf32>' but stage 0's output
    #0 is 'tensor<4x8xf32>': the pipeline would send 128 bytes where 256
    are received
    ```
  }];
  let options = [
    Option<"remark", "remark", "bool", /*default=*/"false",
           "Say in a remark how many ranks and events were checked">
  ];
}

// The fusions of a partitioned step (tessel-accumulate-in-layers,
// tessel-fuse-epilogues, tessel-fuse-bias-grads, tessel-overlap-communication).
include "passes/FusionPasses.td"

def ZeroPass : Pass<"tessel-zero", "mlir::ModuleOp"> {
  let summary = "Shard the training state over the data-parallel axis (ZeRO-1/2/3, FSDP)";
  let description = [{
    Runs on a partitioned training step (after `tessel-partition`). Each
    trained parameter's local block is flattened (a stacked layer parameter
    `[L, ...]` per layer) and zero-padded to a multiple of the `dp` group
    G; rank g of the group keeps chunk g of it, `ceil(elements / G)` long:

    - `stage=1`: the optimizer states are chunks. The backward no longer
      all-reduces gradients over `dp`: each rank accumulates its own
      partial gradient over the microbatches, and the update
      reduce-scatters it, steps its chunk and all-gathers the parameter.
    - `stage=2`: the gradient accumulators are chunks too: the backward
      reduce-scatters each gradient where it used to all-reduce it (a
      stacked layer's inside the layer), so microbatches accumulate into
      the chunk.
    - `stage=3`: the parameters are chunks too. Each use all-gathers its
      parameter (a repeated layer's inside the layer, per layer); in the
      backward entry the forward's and the backward's uses gather
      separately, so nothing full lives across the loss, unless
      `reshard-after-forward=false`, which gathers once (a stack of layers
      as a whole) and keeps it to the backward. The update steps chunks.

    Gradients clip by a norm summed over the chunks and all-reduced over
    `dp`. The rewritten arguments carry `nn.zero = {block, dims}` (their
    block before the split, and the dimensions kept whole in front) and
    the module `nn.zero_stage`. A mesh without a `dp` axis larger than one
    is left alone.
  }];
  let dependentDialects = ["mlir::shard::ShardDialect"];
  let options = [
    Option<"stage", "stage", "int64_t", "0",
           "ZeRO stage: 0 (off), 1 (optimizer state), 2 (and gradients) or 3 "
           "(and parameters)">,
    Option<"reshardAfterForward", "reshard-after-forward", "bool", "true",
           "Stage 3: gather parameters again for the backward instead of "
           "keeping them from the forward">,
    Option<"bucketMb", "bucket-mb", "double", "25.0",
           "Bucket size in MiB for the gradient all-reduces left on other "
           "axes (0: one per gradient)">,
  ];
}

def PartitionPass : Pass<"tessel-partition", "mlir::ModuleOp"> {
  let summary = "Rewrite the sharded program into one rank's program with collectives";
  let description = [{
    Reads the shardings of `tessel-propagate-sharding` and gives every value
    its local shape. A contracted or reduced loop that is split leaves a
    partial sum: the all-reduce waits until a consumer needs the full value,
    and becomes a reduce-scatter when that consumer is split along a
    dimension. Between any two shardings of a value the pass inserts the
    upstream `shard` collectives that convert them (all-gather, all-to-all,
    local slice). Data-parallel gradient all-reduces are fused into buckets
    of `bucket-mb` MiB, issued as soon as each bucket is complete.
    Batch norm over a split batch all-reduces its statistics
    (SyncBatchNorm) unless `local-batchnorm`.

    Before (`mesh=dp=2`, a weight gradient):
    ```mlir
    %g = nn.matmul %x, %dy transpose_lhs {nn.loop_sharding = [[], [], ["dp"]]}
        : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
    ```
    After:
    ```mlir
    %p = nn.matmul %x, %dy transpose_lhs : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    %g = shard.all_reduce %p on @mesh grid_axes = [0] : tensor<4x4xf32> -> tensor<4x4xf32>
    ```
  }];
  let dependentDialects = ["mlir::shard::ShardDialect"];
  let options = [
    Option<"bucketMb", "bucket-mb", "double", "25.0",
           "Data-parallel gradient all-reduce bucket size in MiB (0: one "
           "all-reduce per gradient)">,
    Option<"localBatchnorm", "local-batchnorm", "bool", "false",
           "Batch norm keeps per-rank statistics (PyTorch BatchNorm under DDP)">
  ];
}

#endif // TESSEL_PASSES_PASSES_TD
