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
OpFoldResult DropoutOp::fold(FoldAdaptor) {
  if (getRate().isZero())
    return getInput();
  return {};
}
