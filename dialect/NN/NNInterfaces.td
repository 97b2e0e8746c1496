//===- NNInterfaces.td - what every nn op knows about itself -*- tablegen -*-===//
//
// An op's knowledge lives with the op. Passes ask these interfaces; they never
// switch over op names.
//
//   shape inference  upstream InferTypeOpInterface (every op that can infer)
//   sharding rule    upstream shard::ShardingInterface (loops, maps, kinds)
//                    + ShardingConstraintOpInterface below, for what the
//                    upstream rule cannot say
//   cost             CostOpInterface below
//   VJP              VJPOpInterface below
//   linearity        PartialSumOpInterface below (partial sums pass through)
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_DIALECT_NN_NNINTERFACES_TD
#define TESSEL_DIALECT_NN_NNINTERFACES_TD

include "mlir/IR/OpBase.td"

def NN_CostOpInterface : OpInterface<"CostOpInterface"> {
  let cppNamespace = "::tessel::nn";
  let description = [{
    The work an op does on its (local) shapes: floating-point operations and
    bytes read plus written. Planners and reports sum these; the formulas of
    each op are in its description and tested against hand-derived values.
  }];
  let methods = [
    InterfaceMethod<[{
        Floating-point operations (a fused multiply-add counts as 2).
      }], "int64_t", "getFlops">,
    InterfaceMethod<[{
        Bytes read from operands plus bytes written to results.
      }], "int64_t", "getBytesAccessed", (ins), "",
      [{ return ::tessel::nn::detail::operandAndResultBytes($_op); }]>
  ];
  // After the op's own verifier (and its regions'): getFlops may assume the
  // shapes it checks.
  let verify = [{ return ::tessel::nn::detail::verifyCountsFit($_op); }];
  let verifyWithRegions = 1;
}

def NN_ShardingConstraintOpInterface
    : OpInterface<"ShardingConstraintOpInterface"> {
  let cppNamespace = "::tessel::nn";
  let description = [{
    What upstream `shard::ShardingInterface` cannot express: loops of the
    op's iteration space (as numbered by `getLoopIteratorTypes`) that must
    stay whole on every rank for the op's local computation to be right,
    e.g. the normalised dimension of a softmax or layer_norm, or the merged
    dimensions of a reshape. Splitting such a loop needs a strategy of its
    own (vocabulary-parallel cross-entropy, SyncBatchNorm), which the
    partitioner provides explicitly.
  }];
  let methods = [
    InterfaceMethod<[{
        Loop indices that may not be split across ranks by a plain local
        computation.
      }], "::llvm::SmallVector<int64_t>", "getUnsplittableLoops", (ins), "",
      [{ return {}; }]>,
    InterfaceMethod<[{
        Called by the partitioner after it cloned this (global) op as
        `local`, on the local shapes of one rank, with `split` saying which
        grid axes split each loop: fix what the local computation derives
        from global sizes (a mean's divisor), build a strategy of the op's
        own for a split that a plain local computation cannot do
        (SyncBatchNorm's all-reduced statistics: `split.replacements`,
        `split.resolvedLoops`), or fail with a diagnostic.
      }], "::mlir::LogicalResult", "adjustLocalPartition",
      (ins "::mlir::Operation *":$local, "::tessel::nn::LocalSplit &":$split,
           "::mlir::OpBuilder &":$builder), "",
      [{ return ::mlir::success(); }]>
  ];
}

def NN_PartialSumOpInterface : OpInterface<"PartialSumOpInterface"> {
  let cppNamespace = "::tessel::nn";
  let description = [{
    A linear op: run on partial sums of some operands (each rank holding an
    addend of the whole value, the other operands whole), it computes a
    partial sum of its result. The partitioner then lets the partial sums
    through and completes them once, where a consumer needs the whole value
    (the three partial input gradients of q, k and v are added before one
    all-reduce). Linearity is the op's to say; where the split allows it is
    the partitioner's: the ranks of a partial group must compute the same
    block, so no loop of the op may be split over a partial axis (a product
    whose other factor is split over it is no partial sum of anything).
  }];
  let methods = [
    InterfaceMethod<[{
        Whether the result is a partial sum when the operands marked in
        `partialOperands` are partial sums and the others whole. By default
        the op is linear in all its operands together (add, reshape): every
        operand must be partial.
      }], "bool", "passesPartialSums",
      (ins "::llvm::ArrayRef<bool>":$partialOperands), "",
      [{ return ::llvm::all_of(partialOperands, [](bool p) { return p; }); }]>
  ];
}

def NN_VJPOpInterface : OpInterface<"VJPOpInterface"> {
  let cppNamespace = "::tessel::nn";
  let description = [{
    Reverse-mode derivative of an op: given the cotangents of its results,
    build the cotangents of its operands. The autodiff pass calls this for
    every op on a path from a parameter to the loss, asking only for the
    operands that lead back to a parameter.
  }];
  let methods = [
    InterfaceMethod<[{
        Emit the operand cotangents at the builder's insertion point.
        `resultCotangents` has one entry per result (null when the result does
        not reach the loss; at least one is non-null); `needed[i]` says
        whether operand i's cotangent is wanted. Returns one Value per
        operand: the cotangent (of the operand's type), or null when it was
        not needed or the operand is not differentiable (integer labels or
        ids, a cast to an integer). Fails with a diagnostic on the op when
        the op cannot be differentiated in this form.
      }], "::mlir::FailureOr<::llvm::SmallVector<::mlir::Value>>", "buildVJP",
      (ins "::mlir::OpBuilder &":$builder,
           "::mlir::ValueRange":$resultCotangents,
           "::llvm::ArrayRef<bool>":$needed)>
  ];
}

#endif // TESSEL_DIALECT_NN_NNINTERFACES_TD
