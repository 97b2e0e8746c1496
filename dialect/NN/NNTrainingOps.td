//===- NNTrainingOps.td - update step, repeated layers -*- tablegen -*-===//
//
// Included by NNOps.td after the types and base classes it uses.
//
//===----------------------------------------------------------------------===//

//===----------------------------------------------------------------------===//
// Training ops (the update step)
//===----------------------------------------------------------------------===//

// tensor<f32> or tensor<f64>: the device scalars of the update step (f64
// in an f64 model, so its norm, clipping factor and gradient scale are not
// rounded to f32).
def NN_UpdateScalar : Type<
    And<[NN_TensorOf<[F32, F64]>.predicate,
         CPred<"::llvm::cast<::mlir::RankedTensorType>($_self).getRank() == 0">]>,
    "tensor<f32> or tensor<f64>", "::mlir::RankedTensorType">;

def NN_SumSquaresOp : NN_ShardableOp<"sum_squares", [Pure]> {
  let summary = "sum of the squares of every element of float tensors";
  let description = [{
    `Σ x²` over every element of every operand, accumulated in f64 and
    returned in the result's type, f32 or f64 (the pieces of a global
    gradient norm; f64 in an f64 model). Two flops per element. Every loop (the operands'
    dimensions, one after the other) is a `sum` reduction.

    ```mlir
    %ss = nn.sum_squares %g1, %g2 : (tensor<8x16xf32>, tensor<16xbf16>) -> tensor<f32>
    ```
  }];
  let arguments = (ins Variadic<NN_FloatTensor>:$inputs);
  let results = (outs NN_UpdateScalar:$result);
  let assemblyFormat = "$inputs attr-dict `:` functional-type($inputs, $result)";
  let hasVerifier = 1;
}

def NN_ClipScaleOp : NN_ShardableOp<"clip_scale",
    [Pure, SameOperandsAndResultType, InferTypeOpInterface]> {
  let summary = "the gradient factor of global-norm clipping";
  let description = [{
    With `g = grad_scale` and `ss = sum_squares` (of the unscaled
    gradients), `scale = min(1, max_norm / (sqrt(ss) · g + 1e-6)) · g`, or
    `g` when `max_norm <= 0` (no clipping): the clipping sees the norm of
    the scaled gradient, as torch.nn.utils.clip_grad_norm_ after `loss / M`.
    The three scalars are f32, or f64 in an f64 model. Six flops.

    ```mlir
    %scale = nn.clip_scale %ss, %gs {max_norm = 1.0 : f64} : tensor<f32>
    ```
  }];
  let arguments = (ins NN_UpdateScalar:$sum_squares,
                       NN_UpdateScalar:$grad_scale,
                       DefaultValuedAttr<F64Attr, "1.0">:$max_norm);
  let results = (outs NN_UpdateScalar:$result);
  let assemblyFormat = "$sum_squares `,` $grad_scale attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def NN_OptimizerStepOp : NN_ShardableOp<"optimizer_step",
    [Pure, InferTypeOpAdaptor, DestinationStyleOpInterface,
     TypesMatchWith<"scale is tensor<f64> beside an f64 grad, else tensor<f32>",
                    "grad", "scale", "::tessel::nn::updateScalarType($_self)">]> {
  let summary = "one optimizer update of a parameter and its state";
  let description = [{
    Updates `outs = (param, states...)` in place (destination style: result
    `i` is `outs[i]` updated) from `grad` (the parameter's type) times the
    device scalar `scale`, as torch.optim.SGD / Adam / AdamW do: `sgd`
    (with `momentum`, dampening 0, optionally `nesterov`), `adam` (L2
    `weight_decay` added to the gradient), `adamw` (decoupled weight decay).
    States are in the parameter's shape, f32 (f64 for an f64 parameter,
    whose `scale` is f64 too): none for SGD without momentum, the momentum
    buffer for SGD with momentum, `m` and `v` for Adam(W).
    With `master` (mixed precision, `tessel-compile --precision bf16`) the
    parameter is a bf16 or f16 copy and the first state is its f32 master
    weights: the step runs on the master, from `grad` widened (f32 or the
    parameter's type), and the parameter becomes the master rounded to
    nearest even; the optimizer's own states follow the master.
    The learning rate of 1-based step `t` (the runtime's step + 1) follows
    `schedule`: `constant`, or `warmup_cosine` (linear warm-up over
    `warmup` steps, then cosine to `min_lr` at `total_steps`).
    Flops per element: 1 (scale) + 2 (weight decay, when nonzero) + for SGD
    2 (update), 2 (momentum), 2 (Nesterov); for Adam(W) 3 (m) + 4 (v) + 7
    (update). All loops are parallel.

    ```mlir
    %p2, %m2, %v2 = nn.optimizer_step adamw %g, %scale outs(%p, %m, %v : tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>) {lr = 3.0e-4 : f64} : tensor<8x16xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$grad, NN_UpdateScalar:$scale,
      Variadic<NN_FloatTensor>:$outs,
      DefaultValuedAttr<NN_OptimizerKindAttr, "OptimizerKind::adamw">:$optimizer,
      DefaultValuedAttr<F64Attr, "1e-3">:$lr,
      DefaultValuedAttr<F64Attr, "0.9">:$beta1,
      DefaultValuedAttr<F64Attr, "0.999">:$beta2,
      DefaultValuedAttr<F64Attr, "1e-8">:$eps,
      DefaultValuedAttr<F64Attr, "0.0">:$weight_decay,
      DefaultValuedAttr<F64Attr, "0.0">:$momentum,
      DefaultValuedAttr<NN_LrScheduleAttr, "LrSchedule::constant">:$schedule,
      DefaultValuedAttr<I64Attr, "0">:$warmup,
      DefaultValuedAttr<F64Attr, "0.0">:$min_lr,
      DefaultValuedAttr<I64Attr, "0">:$total_steps,
      UnitAttr:$nesterov,
      UnitAttr:$master);
  let results = (outs Variadic<NN_FloatTensor>:$results);
  let assemblyFormat = [{
    custom<OptimizerKind>($optimizer) $grad `,` $scale
    `outs` `(` $outs `:` type($outs) `)` attr-dict `:` type($grad)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::mlir::MutableOperandRange getDpsInitsMutable() { return getOutsMutable(); }
    /// The parameter (the first of the outs) and its optimizer states.
    ::mlir::Value getParam() { return getOuts().front(); }
    ::mlir::OperandRange getStates() { return getOuts().drop_front(); }
    /// The f32 master weights (`master`), or null.
    ::mlir::Value getMasterWeights() {
      return getMaster() ? getStates().front() : ::mlir::Value();
    }
    /// The optimizer's own states (m and v, the momentum buffer): the
    /// states after the master weights.
    ::mlir::OperandRange getOptimizerStates() {
      return getStates().drop_front(getMaster() ? 1 : 0);
    }
    /// How many states `optimizer` (with `momentum`) keeps per parameter.
    static int64_t getNumStates(OptimizerKind optimizer, double momentum);
  }];
}

def NN_AccumulateOp : NN_ShardableOp<"accumulate",
    [Pure, SameOperandsAndResultType, InferTypeOpInterface,
     DestinationStyleOpInterface]> {
  let summary = "add into an accumulator in place";
  let description = [{
    `acc + value`, written in place into `acc` (destination style: the one
    init). Gradient accumulation over microbatches. One flop per element;
    all loops parallel.

    ```mlir
    %acc2 = nn.accumulate %g outs(%acc) : tensor<8x16xf32>
    ```
  }];
  let arguments = (ins NN_Tensor:$value, NN_Tensor:$acc);
  let results = (outs NN_Tensor:$result);
  let assemblyFormat = "$value `outs` `(` $acc `)` attr-dict `:` type($result)";
  let extraClassDeclaration = [{
    ::mlir::MutableOperandRange getDpsInitsMutable() { return getAccMutable(); }
  }];
}

//===----------------------------------------------------------------------===//
// Repeated layers
//===----------------------------------------------------------------------===//

def NN_RepeatOp : NN_Op<"repeat", [Pure,
    AttrSizedOperandSegments,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>,
    DeclareOpInterfaceMethods<NN_CostOpInterface, ["getBytesAccessed"]>]> {
  let summary = "apply a layer function L times over stacked parameters";
  let description = [{
    Runs `layer` L times, threading the `carried` values (the activations)
    from one application to the next, as JAX's `scan`. Each of `params` is
    stacked on a leading layer axis of size L; application `l` receives
    slice `l` of every stacked parameter. The layer function takes the
    carried values followed by one parameter slice each, and returns new
    carried values of the same types, optionally followed by per-layer
    outputs that the repeat stacks on a new leading axis of size L (JAX's
    `ys`; autodiff uses them to keep each layer's activations). With
    `reverse` the layers run from L − 1 down to 0 (the backward of a
    repeat). With `prefetch @p` (tessel-overlap-communication), `@p`
    (marked `nn.prefetch`) takes one slice of each stacked parameter and
    starts collectives of them whose results it returns in flight; the
    repeat runs it for the first layer before the loop and for layer l + 1
    (l − 1 reversed) before layer l, into two alternating slots, and the
    layer function takes those results after its parameter slices (marked
    `nn.prefetched`) and waits for them where it needs them: the next
    layer's parameters gather while this one computes. With `finish @f`
    (tessel-overlap-communication), the layer function returns, after its
    per-layer outputs, collectives still in flight (results marked
    `nn.in_flight`: the gradient bucket that fills at the layer's end);
    `@f` (marked `nn.finish`) takes them, then one slice of each `outs` as
    the layer does, waits for them and returns those slices updated in
    place (the bucket's gradients summed into their buffers), then the
    last per-layer outputs. The repeat keeps the in-flight results in two
    alternating slots and runs `@f` for a layer after the next layer has
    run (after the loop for the last one): that bucket's all-reduce
    overlaps the next layer's compute. A 48-layer model is as short as a
    1-layer one, and pipeline parallelism splits the layer axis.

    With `outs(...)` (tessel-accumulate-in-layers), tensors stacked on the
    same layer axis are updated in place, destination style: layer `l` takes slice
    `l` of each after its parameter slices (before what the prefetch
    returns) and returns the slice updated in place of it, right after the
    carried values; the repeat's results after its carried values are the
    updated tensors, in the same memory (nothing reads an `outs` operand
    after the repeat). A layer's weight gradient is then summed into its
    gradient buffer where the layer computes it (a GEMM with beta = 1)
    instead of into a stack of all the layers' gradients that is added to
    the buffer afterwards.

    Cost: L times the summed cost of the layer's body. The sharding rule is
    the layer body's: propagation and partitioning look inside `layer`.

    ```mlir
    func.func private @block(%h: tensor<8x768xf32>, %w: tensor<768x768xf32>) -> tensor<8x768xf32> {
      %y = nn.matmul %h, %w : (tensor<8x768xf32>, tensor<768x768xf32>) -> tensor<8x768xf32>
      return %y : tensor<8x768xf32>
    }
    ...
    %out = nn.repeat @block(%h) params(%w_stacked) : (tensor<8x768xf32>, tensor<12x768x768xf32>) -> tensor<8x768xf32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$layer, Variadic<NN_Tensor>:$carried,
                       Variadic<NN_Tensor>:$params,
                       Variadic<NN_Tensor>:$outs, UnitAttr:$reverse,
                       OptionalAttr<FlatSymbolRefAttr>:$prefetch,
                       OptionalAttr<FlatSymbolRefAttr>:$finish);
  let results = (outs Variadic<NN_Tensor>:$results);
  let assemblyFormat = [{
    $layer `(` $carried `)` `params` `(` $params `)`
    (`outs` `(` $outs^ `)`)? (`reverse` $reverse^)?
    (`prefetch` $prefetch^)? (`finish` $finish^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let builders = [
    // A repeat without outs, a prefetch or a finish (what every pass but
    // tessel-accumulate-in-layers and tessel-overlap-communication builds).
    OpBuilder<(ins "::mlir::TypeRange":$resultTypes,
                   "::mlir::FlatSymbolRefAttr":$layer,
                   "::mlir::ValueRange":$carried, "::mlir::ValueRange":$params,
                   CArg<"::mlir::UnitAttr", "{}">:$reverse), [{
      build($_builder, $_state, resultTypes, layer, carried, params,
            ::mlir::ValueRange(), reverse, ::mlir::FlatSymbolRefAttr(),
            ::mlir::FlatSymbolRefAttr());
    }]>
  ];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// L, the size of the stacked parameters' leading axis.
    int64_t getNumLayers();
    /// The final carried values (the first results).
    ::mlir::ResultRange getCarriedResults() {
      return getResults().take_front(getCarried().size());
    }
    /// The `outs` operands updated in place, after the carried values.
    ::mlir::ResultRange getOutsResults() {
      return getResults().slice(getCarried().size(), getOuts().size());
    }
    /// The per-layer outputs, stacked on a leading axis of size L (after
    /// the carried values and the updated `outs`).
    ::mlir::ResultRange getStackedResults() {
      return getResults().drop_front(getCarried().size() + getOuts().size());
    }
    /// The layer function, or null when the symbol does not resolve.
    ::mlir::func::FuncOp getLayerFunction();
    /// The prefetch function, or null when there is none.
    ::mlir::func::FuncOp getPrefetchFunction();
    /// The finish function, or null when there is none.
    ::mlir::func::FuncOp getFinishFunction();
    /// The per-layer outputs the layer function returns itself (the
    /// finish's, when there is one, come after them).
    ::mlir::ResultRange getLayerStackedResults();
    /// The per-layer outputs the finish function returns (none without
    /// one).
    ::mlir::ResultRange getFinishStackedResults();
    /// How many results the layer returns in flight to its finish (the
    /// finish's first arguments, before the outs slices; 0 without one).
    unsigned getNumInFlight();
    /// Fails with a diagnostic at the first repeat under `root` with outs:
    /// `pass` runs before tessel-accumulate-in-layers makes them and takes
    /// repeats without.
    static ::llvm::LogicalResult refuseOuts(::mlir::Operation *root,
                                            ::llvm::StringRef pass);
  }];
}

//===----------------------------------------------------------------------===//
// Overlapped communication
//===----------------------------------------------------------------------===//

def NN_WaitOp : NN_Op<"wait", [SameOperandsAndResultType,
    DeclareOpInterfaceMethods<NN_CostOpInterface, ["getBytesAccessed"]>]> {
  let summary = "the point where an asynchronous collective's result is needed";
  let description = [{
    Completes the shard collective marked `nn.async` that produced `input`
    (tessel-overlap-communication places it): the collective starts where
    it stands, the ops between it and the wait run while it communicates,
    and the result is the collective's, in the same memory. Every use of an
    asynchronous collective's result goes through its wait. No flops and
    no bytes of its own; it has effects, so nothing moves or removes it.

    ```mlir
    %r = shard.all_reduce %g on @mesh grid_axes = [0] {nn.async} : tensor<1024xf32> -> tensor<1024xf32>
    %y = nn.gelu %x : tensor<8x512xf32>    // runs while %g is reduced
    %s = nn.wait %r : tensor<1024xf32>
    ```
  }];
  let arguments = (ins NN_Tensor:$input);
  let results = (outs NN_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let hasVerifier = 1;
}
