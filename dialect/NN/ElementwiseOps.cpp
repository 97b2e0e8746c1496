//===- ElementwiseOps.cpp - arithmetic, activations, cast, dropout --------===//
//
// Cost and sharding rule of every elementwise op come from NN_ElementwiseOp
// in NNOps.td (flops per element, all loops parallel, identity maps); this
// file holds their folds and verifiers.
//
//===----------------------------------------------------------------------===//

#include "dialect/NN/NNOps.h"
#include "dialect/NN/NNOpsUtils.h"

#include "mlir/IR/PatternMatch.h"

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

// A widening float cast is exact, hence linear; a narrowing one rounds.
bool CastOp::passesPartialSums(ArrayRef<bool> partialOperands) {
  auto width = [](Type type) {
    auto element = dyn_cast<FloatType>(getElementTypeOrSelf(type));
    return element ? static_cast<int>(element.getWidth()) : 0;
  };
  int from = width(getInput().getType()), to = width(getResult().getType());
  return partialOperands[0] && from > 0 && to > from;
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

namespace {
/// x + sub_label(s, labels, v) -> sub_label(x + s, labels, v): the values
/// at the labels subtracted last, from the sum. A label logit's gradient
/// (sub_label of zeros) added to the other gradients of its logits then
/// needs no tensor of zeros (x + 0 folds), and a broadcast s is read where
/// it lies by the add instead of copied out for the sub_label.
struct AddIntoSubLabel : public OpRewritePattern<AddOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AddOp op,
                                PatternRewriter &rewriter) const override {
    for (unsigned i = 0; i < 2; ++i) {
      auto subLabel = op->getOperand(i).getDefiningOp<SubLabelOp>();
      if (!subLabel || !subLabel->hasOneUse())
        continue;
      Value sum = AddOp::create(rewriter, op.getLoc(), op->getOperand(1 - i),
                                subLabel.getInput());
      rewriter.replaceOpWithNewOp<SubLabelOp>(
          op, op.getType(), sum, subLabel.getLabels(), subLabel.getValues(),
          subLabel.getBlockAxesAttr());
      return success();
    }
    return failure();
  }
};

/// broadcast(x) · c -> broadcast(x · c), c a splat: the product in x's
/// shape, and the broadcast of it read where it lies, where both
/// broadcasts would otherwise be read and one of them copied out to the
/// full shape (a per-position cotangent scaled over the classes).
struct ScaleBeforeBroadcast : public OpRewritePattern<MulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MulOp op,
                                PatternRewriter &rewriter) const override {
    for (unsigned i = 0; i < 2; ++i) {
      auto spread = op->getOperand(i).getDefiningOp<BroadcastOp>();
      DenseElementsAttr factor =
          nn::detail::splatConstantOf(op->getOperand(1 - i));
      if (!spread || !factor || nn::detail::splatConstantOf(spread.getInput()))
        continue;
      auto small = cast<RankedTensorType>(spread.getInput().getType());
      Location loc = op.getLoc();
      Value scalar =
          ConstantOp::create(rewriter, loc,
                             factor.resizeSplat(RankedTensorType::get(
                                 {}, factor.getElementType())));
      Value scaled =
          MulOp::create(rewriter, loc, spread.getInput(),
                        BroadcastOp::create(rewriter, loc, small, scalar,
                                            rewriter.getDenseI64ArrayAttr({})));
      rewriter.replaceOpWithNewOp<BroadcastOp>(op, op.getType(), scaled,
                                               spread.getDims());
      return success();
    }
    return failure();
  }
};
} // namespace

void AddOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                        MLIRContext *context) {
  results.add<AddIntoSubLabel>(context);
}

void MulOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                        MLIRContext *context) {
  results.add<ScaleBeforeBroadcast>(context);
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
  std::optional<ArrayRef<int64_t>> global = getGlobalShape();
  std::optional<ArrayAttr> split = getSplitAxes();
  if (!global && !split)
    return success();
  if (!global || !split)
    return emitOpError() << "needs both global_shape and split_axes, or "
                            "neither";
  ArrayRef<int64_t> local = getType().getShape();
  if (global->size() != local.size() || split->size() != local.size())
    return emitOpError() << "global_shape and split_axes need one entry per "
                            "dimension ("
                         << local.size() << ")";
  for (auto [dim, axesAttr] : llvm::enumerate(*split)) {
    auto axes = dyn_cast<DenseI16ArrayAttr>(axesAttr);
    if (!axes)
      return emitOpError() << "split_axes[" << dim
                           << "] must be an array<i16> of grid axes";
    ArrayRef<int16_t> list = axes.asArrayRef();
    if (std::adjacent_find(list.begin(), list.end(),
                           std::greater_equal<int16_t>()) != list.end())
      return emitOpError() << "split_axes[" << dim
                           << "] must list grid axes in ascending order";
    int64_t whole = (*global)[dim];
    if (local[dim] <= 0 || whole % local[dim] != 0 ||
        (whole != local[dim]) == axes.empty())
      return emitOpError() << "dimension " << dim << " of size " << local[dim]
                           << " is not a block of size " << whole
                           << " split over " << axes.size() << " grid axes";
  }
  return success();
}

// Dropout with rate 0 keeps everything.
// The mask bit of an element is a function of its index in the whole
// tensor: a split local op records the whole shape and the axes of each
// dimension (its loops, one per dimension), for the runtime to place its
// block.
LogicalResult DropoutOp::adjustLocalPartition(Operation *localOp,
                                              LocalSplit &split, OpBuilder &) {
  auto local = cast<DropoutOp>(localOp);
  if (local.getType() == getType())
    return success();
  if (getGlobalShape())
    return emitOpError() << "is already a block of a larger tensor; it "
                            "cannot be split again";
  SmallVector<Attribute> axes;
  for (ArrayRef<int16_t> loopAxes : split.loopAxes) {
    if (!llvm::is_sorted(loopAxes))
      return emitOpError() << "splits a dimension over grid axes out of "
                              "order; a block is numbered by axes in "
                              "ascending order";
    axes.push_back(DenseI16ArrayAttr::get(getContext(), loopAxes));
  }
  local.setGlobalShapeAttr(
      DenseI64ArrayAttr::get(getContext(), getType().getShape()));
  local.setSplitAxesAttr(ArrayAttr::get(getContext(), axes));
  return success();
}

OpFoldResult DropoutOp::fold(FoldAdaptor) {
  if (getRate().isZero())
    return getInput();
  return {};
}
