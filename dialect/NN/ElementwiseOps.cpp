//===- ElementwiseOps.cpp - arithmetic, activations, cast, dropout --------===//
//
// Cost and sharding rule of every elementwise op come from NN_ElementwiseOp
// in NNOps.td (flops per element, all loops parallel, identity maps); this
// file holds their folds and verifiers.
//
//===----------------------------------------------------------------------===//

#include "dialect/NN/NNOps.h"
#include "dialect/NN/NNOpsUtils.h"

using namespace mlir;
using namespace tessel;
using namespace tessel::nn;
using tessel::nn::detail::isSplatConstant;

// x + 0 -> x, 0 + x -> x.
OpFoldResult AddOp::fold(FoldAdaptor) {
  if (isSplatConstant(getRhs(), 0.0))
    return getLhs();
  if (isSplatConstant(getLhs(), 0.0))
    return getRhs();
  return {};
}

// x - 0 -> x.
OpFoldResult SubOp::fold(FoldAdaptor) {
  if (isSplatConstant(getRhs(), 0.0))
    return getLhs();
  return {};
}

// A product is linear in either factor, not in both.
bool MulOp::passesPartialSums(ArrayRef<bool> partialOperands) {
  return llvm::count(partialOperands, true) == 1;
}

// A quotient is linear in its numerator only.
bool DivOp::passesPartialSums(ArrayRef<bool> partialOperands) {
  return partialOperands[0] && !partialOperands[1];
}

// x * 1 -> x, 1 * x -> x.
OpFoldResult MulOp::fold(FoldAdaptor) {
  if (isSplatConstant(getRhs(), 1.0))
    return getLhs();
  if (isSplatConstant(getLhs(), 1.0))
    return getRhs();
  return {};
}

// x / 1 -> x.
OpFoldResult DivOp::fold(FoldAdaptor) {
  if (isSplatConstant(getRhs(), 1.0))
    return getLhs();
  return {};
}

// neg(neg(x)) -> x.
OpFoldResult NegOp::fold(FoldAdaptor) {
  if (auto inner = getInput().getDefiningOp<NegOp>())
    return inner.getInput();
  return {};
}

// cast to the same type -> x.
OpFoldResult CastOp::fold(FoldAdaptor) {
  if (getInput().getType() == getType())
    return getInput();
  return {};
}

LogicalResult DropoutOp::verify() {
  double rate = getRate().convertToDouble();
  if (!(rate >= 0.0 && rate < 1.0))
    return emitOpError() << "rate must be in [0, 1), got " << rate;
  return success();
}

// Dropout with rate 0 keeps everything.
// The mask bit of an element is a function of its index in the whole
// tensor; the kernel takes one offset, which fits a split of the leading
// dimension only, and the partitioner does not yet pass it.
LogicalResult DropoutOp::adjustLocalPartition(Operation *local, LocalSplit &,
                                            OpBuilder &) {
  if (local->getResult(0).getType() != getType())
    return emitOpError() << "cannot be split across ranks yet: each rank "
                            "would draw the mask of the first elements";
  return success();
}

OpFoldResult DropoutOp::fold(FoldAdaptor) {
  if (getRate().isZero())
    return getInput();
  return {};
}
