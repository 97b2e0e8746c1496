//===- FusionPasses.td - the fusions of a partitioned step -*- tablegen -*-===//
//
// The rewrites of one rank's program after partitioning that fold work
// into fewer kernels or hide communication behind it: the layers'
// accumulating weight gradients, the GEMM and loss epilogues, the bias
// gradients and the overlap of collectives. Passes.td includes this file.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_PASSES_FUSIONPASSES_TD
#define TESSEL_PASSES_FUSIONPASSES_TD

include "mlir/Pass/PassBase.td"

def AccumulateInLayersPass : Pass<"tessel-accumulate-in-layers",
                                  "mlir::ModuleOp"> {
  let summary = "Sum a repeated layer's weight gradients into their buffers where the layer computes them";
  let description = [{
    Runs on a partitioned step (one rank's program), after `tessel-zero`
    and `tessel-split-backward` and right before `tessel-fuse-epilogues`
    (the compile pipeline runs it with the fusion). The derivative of an
    `nn.repeat` stacks every layer's parameter gradients, `[L, ...]` each,
    and the step then adds each stack into its gradient accumulator: a
    second copy of all the layers' weight gradients and a pass over it.
    Here an `nn.accumulate` of a stacked result (its only use) into an
    accumulator that nothing reads between the repeat and the accumulate
    moves into the layer when the layer returns that gradient straight
    from an `nn.matmul` nothing else reads (or from that GEMM's 16-bit
    product cast to its f32 accumulator, under `tessel-mixed-precision`:
    the cast and the add then run per layer): the repeat takes the
    accumulator as `outs`, the layer takes its slice and returns it
    updated by the accumulate, in place, and `tessel-fuse-epilogues` folds
    the add into the GEMM (beta = 1), as llm.c's and Megatron's backward
    do: no stack and no add. So does the accumulate of a gradient the layer
    returns sliced from a collective's result (through reshapes: a DDP
    bucket's all-reduce, unpacked): returned into the stack it is a copy
    per layer; summed into its buffer in the layer it is an add that reads
    the bucket where it lies (`tessel-plan-memory` makes the slice a view),
    and no stack. `tessel-overlap-communication` moves the adds of a
    bucket it leaves in flight into the repeat's finish. The adds go
    before the layer's return in the order the layer makes their
    gradients.

    Left as they are: a gradient the layer computes otherwise (a bias's or
    a norm's, vectors: in the layer its add would be a kernel per layer
    instead of one for all layers, to save a few bytes; a whole
    collective's result, such as a ZeRO reduce-scatter's, which the stack
    holds with no copy), a repeat with a prefetch or a finish, and a layer
    function something else calls too. The program computes the same
    values.

    ```mlir
    %dh, %dw = nn.repeat @layer_derivative(%dy) params(%w, %x) reverse : (...) -> (tensor<4x8xf32>, tensor<3x8x8xf32>)
    %g2 = nn.accumulate %dw outs(%g) : tensor<3x8x8xf32>
    // becomes (the layer takes and returns a slice of %g)
    %dh, %g2 = nn.repeat @layer_derivative(%dy) params(%w, %x) outs(%g) reverse : (...) -> (tensor<4x8xf32>, tensor<3x8x8xf32>)
    ```
  }];
}

def FuseEpiloguesPass : Pass<"tessel-fuse-epilogues", "mlir::ModuleOp"> {
  let summary = "Fold the add, GELU or bias-gradient sum after a matmul into the GEMM";
  let description = [{
    Runs on a partitioned step (one rank's program), after `tessel-zero`
    and `tessel-split-backward` and before `tessel-overlap-communication`.
    In every function:

    - `nn.accumulate` of an `nn.matmul` used only there becomes
      `nn.matmul_accumulate`: the GEMM adds its product into the
      accumulator (beta = 1), as a weight gradient summed over
      microbatches, with no product buffer. It stands where the matmul
      stood when nothing between reads the accumulator, else where the
      accumulate stood. `nn.accumulate` of an `nn.matmul` plus another
      value, the sum used only there, becomes `nn.matmul_accumulate` into
      the accumulator where the matmul stood, then the accumulate of the
      other value (a tied embedding's gradient and its LM head's), when
      nothing reads the accumulator in between.
    - `nn.add` of an `nn.matmul` used only there and an `nn.broadcast` of a
      vector along the last dimension becomes `nn.matmul_bias` (cuBLASLt's
      bias epilogue): a linear layer's forward in one call.
    - `nn.gelu approximate` of an `nn.matmul_bias` becomes
      `nn.matmul_bias_gelu`, whose second result, the GELU's input, the
      GELU's gradient reads (cuBLASLt's GELU_AUX_BIAS).
    - `nn.gelu_grad approximate` of an `nn.matmul` used only there becomes
      `nn.matmul_gelu_grad` (cuBLASLt's DGELU).
    - `nn.add` of two tensors of one type and the `nn.layer_norm` or
      `nn.rms_norm` of its sum becomes `nn.add_norm` (both results kept:
      the residual stream goes on with the sum), where the add stood
      unless the norm's parameters come later (a ZeRO-3 gather), then
      where the norm stood.
    - `nn.layer_norm_grad` or `nn.rms_norm_grad` whose input gradient is
      used only by an `nn.add` becomes `nn.norm_grad_add`, the add done as
      the gradient is written; not when that add is the last work of its
      block and a collective reduces the norm's parameter gradients, since
      the add is what that collective overlaps (a transformer layer's
      first norm under ZeRO; gpt ZeRO-3 dp=4 would block 4,096 bytes).
      Off with `residual-norms=false`.
    - Under bf16 mixed precision: `nn.cross_entropy` of the f32 widening of
      16-bit logits reads the logits themselves (its loss still f32), and
      the rounding of its f32 gradient back to 16 bits folds into
      `nn.cross_entropy_grad` (so too a vocabulary-parallel block's
      `nn.vocab_loss_stats`, its statistics still f32, and
      `nn.vocab_loss_grad`: no f32 block); a step's loss and its gradient become
      `nn.cross_entropy_with_grad`, `in_place` where nothing else reads
      logits a kernel of the block made. A 16-bit norm gradient (or
      embedding gradient) whose parameter gradients are each only widened
      to f32 returns them in f32 (the casts go; the sums are rounded once,
      to f32). The sum of a tied parameter's contributions, widened, folds
      as above: the GEMM sums its product into the f32 accumulator, and the
      other value follows widened. A 16-bit `nn.matmul` used only by its
      widening to f32 (a weight gradient on its way to a data-parallel
      bucket) becomes `nn.matmul_f32` where the matmul stood: the GEMM
      writes f32.
    - A vocabulary-parallel block's gradient (`nn.vocab_loss_grad`) is
      `in_place` where only the block's statistics read its logits before
      it and a kernel of the block made them.
    Anything else is left as it is; the program computes the same values,
    except that parameter gradients written in f32 skip their rounding to
    16 bits, a tied parameter's two contributions are accumulated one by
    one (the same values when the accumulator is zero, as in a step's
    first microbatch), and on the CPU an accumulating GEMM may round in
    another order when K is longer than its block.

    ```mlir
    %p = nn.matmul %x, %dy transpose_lhs : (...) -> tensor<784x1024xf32>
    %g2 = nn.accumulate %p outs(%g) : tensor<784x1024xf32>
    // becomes
    %g2 = nn.matmul_accumulate %x, %dy transpose_lhs outs(%g) : (...) -> tensor<784x1024xf32>
    ```
  }];
  let options = [
    Option<"residualNorms", "residual-norms", "bool", /*default=*/"true",
           "Fold a residual add into the norm of its sum, and a norm's input "
           "gradient into the add of the residual stream's gradient">
  ];
}

def FuseBiasGradsPass : Pass<"tessel-fuse-bias-grads", "mlir::ModuleOp"> {
  let summary = "Fold a bias gradient's sum into its weight gradient's GEMM";
  let description = [{
    Runs on a partitioned step after `tessel-overlap-communication` and
    before `tessel-plan-memory`. `nn.reduce_sum` of an output gradient
    over its leading dimensions beside the weight gradient's `nn.matmul`
    of the same rows (flattened, untransposed) becomes
    `nn.matmul_bias_grad` (cuBLASLt's BGRADB): one kernel and one pass over
    the rows fewer per linear layer. Beside an `nn.matmul_accumulate` (a
    weight gradient added into its buffer) it becomes `nn.matmul_bias_grad
    ... outs(%acc)`, which adds as that did, where the GEMM stood. A 16-bit
    GEMM writing or accumulating f32 (`nn.matmul_f32`, or an f32
    accumulator) takes the sum's f32 widening with it: both results f32.
    The fused GEMM takes the place of one
    of the two, so the other's kernel leaves its place; a place is taken
    only if every started collective in the block still has a kernel
    between its start (or the block's start, for one started before it)
    and its wait (or the block's end): where the earlier op stood, else
    where the later stood, else the two stay apart. The overlapped bytes
    of `tessel-compile --report` are therefore the same as unfused (gpt:
    ZeRO-3 dp=4 9,692,676; ZeRO-3 dp=2,tp=2 6,731,268).

    ```mlir
    %db = nn.reduce_sum %dy dims = [0] : tensor<32x16xf32> -> tensor<16xf32>
    %dw = nn.matmul %x, %dy transpose_lhs : (...) -> tensor<784x16xf32>
    // becomes
    %dw, %db = nn.matmul_bias_grad %x, %dy transpose_lhs : (...) -> (tensor<784x16xf32>, tensor<16xf32>)
    ```
  }];
}

def OverlapCommunicationPass
    : Pass<"tessel-overlap-communication", "mlir::ModuleOp"> {
  let summary = "Overlap collectives with compute: start early, wait late";
  let description = [{
    Runs on a partitioned step, before `tessel-plan-memory`. In every
    function (layer functions too) each collective that moves data
    (all_reduce, all_gather, reduce_scatter, all_to_all) becomes an
    asynchronous one (`nn.async`) completed by an `nn.wait` where its
    result is first needed, whenever compute runs in between:

    - A collective of values the function computes (a gradient bucket's
      all-reduce, a ZeRO reduce-scatter) starts as soon as its input is
      ready: it moves up to just after its input's definition (and the
      reshapes that flatten it), and the slices and reshapes that unpack
      its result move down to their first use. Its wait stands before the
      first use of the result, before any later use of its input, and
      before the collective `in-flight` places later starts, so at most
      `in-flight` such buffers stay alive beyond their blocking lifetime.
    - A collective of the function's arguments alone (a ZeRO-3 parameter
      gather) is a prefetch: in the order in which their results are
      needed, the first `in-flight` start where they stand and each later
      one starts where the one `in-flight` places earlier is waited for, as
      FSDP's forward prefetch does; each waits just before its first use.

    Across a repeated layer's boundary: the gathers of the layer's
    parameter slices move into a prefetch that the repeat runs one layer
    ahead (`nn.repeat` `prefetch`), and the last `in-flight` all-reduces a
    layer starts with no compute after their completion (the bucket that
    fills at the end of a layer's backward) are returned in flight to a
    finish that the repeat runs after the next layer (`nn.repeat`
    `finish`): it waits for them, unpacks them into the layer's per-layer
    outputs, and runs the adds of their gradients into the layer's `outs`
    slices (`tessel-accumulate-in-layers`), which the layer then returns
    as it took them.

    A collective with nothing to overlap stays blocking. The order of a
    function's collectives may change; it changes alike on every rank,
    which runs the same program, so the ranks' calls still match. The
    memory plan keeps an asynchronous collective's input alive until its
    wait; the lowering calls the runtime's `tessel_*_start` and
    `tessel_comm_wait`. The bytes started asynchronously are the report's
    overlap figure and the runtime's `tessel_comm_async_bytes`.
  }];
  let dependentDialects = ["tessel::nn::NNDialect"];
  let options = [
    Option<"inFlight", "in-flight", "int64_t", "2",
           "How many asynchronous collectives of each kind (computed, "
           "prefetched) may be in flight at once (at least 1)">,
  ];
}

#endif // TESSEL_PASSES_FUSIONPASSES_TD
