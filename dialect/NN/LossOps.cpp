//===- LossOps.cpp - cross_entropy and its fused gradient -----------------===//

#include "dialect/NN/NNOps.h"
#include "dialect/NN/NNOpsUtils.h"

#include "mlir/IR/PatternMatch.h"
#include "llvm/ADT/STLExtras.h"

#include <cmath>
#include <optional>

using namespace mlir;
using namespace tessel::nn;
using namespace tessel;

FailureOr<RankedTensorType>
nn::detail::inferCrossEntropyType(std::optional<Location> loc,
                                  RankedTensorType logits,
                                  RankedTensorType labels, bool keepPositions) {
  if (logits.getRank() < 1)
    return nn::detail::inferError(loc, "logits must be [..., classes], got ",
                                  logits);
  if (logits.getShape().drop_back() != labels.getShape())
    return nn::detail::inferError(
        loc, "labels ", labels, " must have the shape of the logits ", logits,
        " without the class dimension (",
        nn::detail::shapeString(logits.getShape().drop_back()), ")");
  return RankedTensorType::get(
      keepPositions ? labels.getShape() : ArrayRef<int64_t>{},
      logits.getElementType());
}

// The loss in the logits' type, or in f32 for 16-bit logits.
bool CrossEntropyOp::isCompatibleReturnTypes(TypeRange inferred,
                                             TypeRange actual) {
  return inferred.size() == 1 && actual.size() == 1 &&
         nn::detail::isInferredOrF32(inferred.front(), actual.front());
}

LogicalResult CrossEntropyOp::inferReturnTypes(MLIRContext *,
                                               std::optional<Location> loc,
                                               Adaptor adaptor,
                                               SmallVectorImpl<Type> &results) {
  FailureOr<RankedTensorType> loss = nn::detail::inferCrossEntropyType(
      loc, cast<RankedTensorType>(adaptor.getLogits().getType()),
      cast<RankedTensorType>(adaptor.getLabels().getType()),
      adaptor.getReduction() == LossReduction::none);
  if (failed(loss))
    return failure();
  results.push_back(*loss);
  return success();
}

// Per position: max, subtract, exp and sum over the classes (4 per logit),
// then log and pick (2 per position). The mean's division is in the pick.
// Its options: nn::detail::lossOptionFlops.
int64_t CrossEntropyOp::getFlops() {
  using nn::detail::satAdd, nn::detail::satMul;
  int64_t perLogit =
      4 + nn::detail::lossOptionFlops(getLabelSmoothing().has_value(),
                                      getLogitSoftcap().has_value());
  return satAdd(
      satMul(perLogit, nn::detail::numElements(getLogits().getType())),
      satMul(2, nn::detail::numElements(getLabels().getType())));
}

// Loops: the label dimensions..., then the class loop.
SmallVector<utils::IteratorType> CrossEntropyOp::getLoopIteratorTypes() {
  int64_t numPositions = getLabels().getType().getRank();
  SmallVector<int64_t> reductions;
  if (getReduction() != LossReduction::none)
    reductions = llvm::to_vector(llvm::seq<int64_t>(0, numPositions));
  reductions.push_back(numPositions);
  return nn::detail::loopsWithReductions(numPositions + 1, reductions);
}

SmallVector<AffineMap> CrossEntropyOp::getIndexingMaps() {
  MLIRContext *ctx = getContext();
  int64_t numPositions = getLabels().getType().getRank();
  int64_t numLoops = numPositions + 1;
  SmallVector<int64_t> positions =
      llvm::to_vector(llvm::seq<int64_t>(0, numPositions));
  AffineMap result = getReduction() == LossReduction::none
                         ? nn::detail::projection(numLoops, positions, ctx)
                         : AffineMap::get(numLoops, 0, {}, ctx);
  return {AffineMap::getMultiDimIdentityMap(numLoops, ctx),
          nn::detail::projection(numLoops, positions, ctx), result};
}

SmallVector<ReductionKind> CrossEntropyOp::getReductionLoopIteratorKinds() {
  SmallVector<ReductionKind> kinds;
  if (getReduction() != LossReduction::none)
    kinds.assign(getLabels().getType().getRank(),
                 getReduction() == LossReduction::mean ? ReductionKind::Average
                                                       : ReductionKind::Sum);
  kinds.push_back(ReductionKind::Generic); // log-sum-exp over the classes
  return kinds;
}

LogicalResult nn::detail::verifyLossOptions(Operation *op,
                                            std::optional<APFloat> smoothing,
                                            std::optional<APFloat> cap) {
  if (smoothing) {
    double e = smoothing->convertToDouble();
    if (!(e >= 0.0 && e <= 1.0))
      return op->emitOpError()
             << "label_smoothing must be in [0, 1], got " << e;
  }
  if (cap) {
    double c = cap->convertToDouble();
    if (!std::isfinite(c) || c <= 0.0)
      return op->emitOpError()
             << "logit_softcap " << c << " must be finite and positive";
  }
  return success();
}

int64_t nn::detail::lossOptionFlops(bool smoothing, bool cap) {
  return (smoothing ? 1 : 0) + (cap ? 3 : 0);
}

LogicalResult CrossEntropyOp::verify() {
  return nn::detail::verifyLossOptions(*this, getLabelSmoothing(),
                                       getLogitSoftcap());
}

namespace {
/// The value of a positive, finite splat float constant `value` is
/// (through broadcasts and a cast: mixed precision's bf16 copy of an f32
/// constant, whose unrounded value it takes), or nothing.
std::optional<double> positiveSplat(Value value) {
  while (auto broadcast = value.getDefiningOp<BroadcastOp>())
    value = broadcast.getInput();
  if (auto cast = value.getDefiningOp<CastOp>())
    value = cast.getInput();
  DenseElementsAttr splat = nn::detail::splatConstantOf(value);
  if (!splat || !isa<FloatType>(splat.getElementType()))
    return std::nullopt;
  double c = splat.getSplatValue<APFloat>().convertToDouble();
  if (!std::isfinite(c) || !(c > 0.0))
    return std::nullopt;
  return c;
}

/// cross_entropy(c · tanh(z / c)) -> cross_entropy(z) {logit_softcap = c}
/// (Gemma 2's final_logit_softcapping as the model writes it), where the
/// capped logits, their tanh and the quotient have no other reader: the
/// loss and its gradient then cap inside the kernels, and neither the
/// capped logits nor the tanh are stored. Under mixed precision the capped
/// 16-bit logits are widened before the loss: the widening moves onto z
/// (the kernel caps in f32, and tessel-fuse-epilogues folds the widening
/// into it). A smoothed loss smooths the capped logits' target: the cap
/// folds as well.
struct FoldLogitSoftcap : public OpRewritePattern<CrossEntropyOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(CrossEntropyOp op,
                                PatternRewriter &rewriter) const override {
    if (op.getLogitSoftcap())
      return failure();
    Value capped = op.getLogits();
    auto widening = capped.getDefiningOp<CastOp>();
    if (widening) {
      if (!widening->hasOneUse())
        return failure();
      capped = widening.getInput();
    }
    auto mul = capped.getDefiningOp<MulOp>();
    if (!mul || !mul->hasOneUse())
      return failure();
    TanhOp tanh;
    std::optional<double> cap;
    for (auto [t, c] : {std::pair(mul.getLhs(), mul.getRhs()),
                        std::pair(mul.getRhs(), mul.getLhs())})
      if (auto candidate = t.getDefiningOp<TanhOp>()) {
        tanh = candidate;
        cap = positiveSplat(c);
        break;
      }
    if (!tanh || !cap || !tanh->hasOneUse())
      return failure();
    auto div = tanh.getInput().getDefiningOp<DivOp>();
    if (!div || !div->hasOneUse() || positiveSplat(div.getRhs()) != cap ||
        div.getLhs().getType() != capped.getType())
      return failure();
    Value logits = div.getLhs();
    if (widening)
      logits = CastOp::create(rewriter, widening.getLoc(), widening.getType(),
                              logits);
    rewriter.modifyOpInPlace(op, [&] {
      op.getLogitsMutable().assign(logits);
      op.setLogitSoftcapAttr(rewriter.getF64FloatAttr(*cap));
    });
    return success();
  }
};
} // namespace

void CrossEntropyOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                                 MLIRContext *context) {
  results.add<FoldLogitSoftcap>(context);
}

LogicalResult CrossEntropyOp::refuseIgnoreIndex(StringRef pass) {
  if (getIgnoreIndex())
    return emitOpError() << "has an ignore_index, which " << pass
                         << " does not take: run tessel-mask-ignored-labels "
                            "before it";
  return success();
}

//===----------------------------------------------------------------------===//
// MaskLabelsOp: the labels of a loss that ignores positions
//===----------------------------------------------------------------------===//

LogicalResult MaskLabelsOp::verify() {
  if (getSafe().getType() != getLabels().getType())
    return emitOpError() << "safe labels must have the labels' type "
                         << getLabels().getType() << ", got "
                         << getSafe().getType();
  if (getWeights().getType().getShape() != getLabels().getType().getShape())
    return emitOpError() << "weights must have the labels' shape ("
                         << nn::detail::shapeString(
                                getLabels().getType().getShape())
                         << "), got " << getWeights().getType();
  return success();
}

// A comparison per position.
int64_t MaskLabelsOp::getFlops() {
  return nn::detail::numElements(getLabels().getType());
}

SmallVector<utils::IteratorType> MaskLabelsOp::getLoopIteratorTypes() {
  return nn::detail::parallelLoops(getLabels().getType().getRank());
}

SmallVector<AffineMap> MaskLabelsOp::getIndexingMaps() {
  AffineMap identity = AffineMap::getMultiDimIdentityMap(
      getLabels().getType().getRank(), getContext());
  return {identity, identity, identity};
}

SmallVector<ReductionKind> MaskLabelsOp::getReductionLoopIteratorKinds() {
  return {};
}

//===----------------------------------------------------------------------===//
// LabelLogitOp and SubLabelOp: the label's entry of each position
//===----------------------------------------------------------------------===//

LogicalResult LabelLogitOp::inferReturnTypes(MLIRContext *,
                                             std::optional<Location> loc,
                                             Adaptor adaptor,
                                             SmallVectorImpl<Type> &results) {
  FailureOr<RankedTensorType> rows = nn::detail::inferCrossEntropyType(
      loc, cast<RankedTensorType>(adaptor.getLogits().getType()),
      cast<RankedTensorType>(adaptor.getLabels().getType()),
      /*keepPositions=*/true);
  if (failed(rows))
    return failure();
  results.push_back(*rows);
  return success();
}

int64_t LabelLogitOp::getFlops() { return 0; }

// Loops: the label dimensions..., then the class loop (a sum: the one-hot
// view).
SmallVector<utils::IteratorType> LabelLogitOp::getLoopIteratorTypes() {
  int64_t numPositions = getLabels().getType().getRank();
  return nn::detail::loopsWithReductions(numPositions + 1, {numPositions});
}

SmallVector<AffineMap> LabelLogitOp::getIndexingMaps() {
  MLIRContext *ctx = getContext();
  int64_t numPositions = getLabels().getType().getRank();
  AffineMap rows = nn::detail::projection(
      numPositions + 1, llvm::to_vector(llvm::seq<int64_t>(0, numPositions)),
      ctx);
  return {AffineMap::getMultiDimIdentityMap(numPositions + 1, ctx), rows,
          rows};
}

SmallVector<ReductionKind> LabelLogitOp::getReductionLoopIteratorKinds() {
  return {ReductionKind::Sum};
}

LogicalResult SubLabelOp::inferReturnTypes(MLIRContext *,
                                           std::optional<Location> loc,
                                           Adaptor adaptor,
                                           SmallVectorImpl<Type> &results) {
  auto input = cast<RankedTensorType>(adaptor.getInput().getType());
  FailureOr<RankedTensorType> rows = nn::detail::inferCrossEntropyType(
      loc, input, cast<RankedTensorType>(adaptor.getLabels().getType()),
      /*keepPositions=*/true);
  if (failed(rows))
    return failure();
  if (adaptor.getValues().getType() != *rows)
    return nn::detail::inferError(loc, "values must be ", *rows,
                                  " (one per position), got ",
                                  adaptor.getValues().getType());
  results.push_back(input);
  return success();
}

int64_t SubLabelOp::getFlops() {
  return nn::detail::numElements(getLabels().getType());
}

SmallVector<utils::IteratorType> SubLabelOp::getLoopIteratorTypes() {
  return nn::detail::parallelLoops(getType().getRank());
}

SmallVector<AffineMap> SubLabelOp::getIndexingMaps() {
  MLIRContext *ctx = getContext();
  int64_t numLoops = getType().getRank();
  AffineMap identity = AffineMap::getMultiDimIdentityMap(numLoops, ctx);
  AffineMap rows = nn::detail::projection(
      numLoops, llvm::to_vector(llvm::seq<int64_t>(0, numLoops - 1)), ctx);
  return {identity, rows, rows, identity};
}

SmallVector<ReductionKind> SubLabelOp::getReductionLoopIteratorKinds() {
  return {};
}

//===----------------------------------------------------------------------===//
// CrossEntropyWithGradOp
//===----------------------------------------------------------------------===//

LogicalResult CrossEntropyWithGradOp::verify() {
  if (failed(nn::detail::verifyLossOptions(*this, getLabelSmoothing(),
                                           getLogitSoftcap())))
    return failure();
  FailureOr<RankedTensorType> loss = nn::detail::inferCrossEntropyType(
      getLoc(), getLogits().getType(), getLabels().getType(),
      getReduction() == LossReduction::none);
  if (failed(loss))
    return failure();
  if (!nn::detail::isInferredOrF32(*loss, getLoss().getType()))
    return emitOpError() << "loss must have type " << *loss
                         << nn::detail::orF32Note(*loss) << ", got "
                         << getLoss().getType();
  if (getDloss().getType() != getLoss().getType())
    return emitOpError() << "dloss must have the loss's type "
                         << getLoss().getType() << ", got "
                         << getDloss().getType();
  if (getDlogits().getType() != getLogits().getType())
    return emitOpError() << "dlogits must have the logits' type "
                         << getLogits().getType() << ", got "
                         << getDlogits().getType();
  return success();
}

// nn.cross_entropy's 4·N + 2·R and nn.cross_entropy_grad's 6·N + R, less
// the row max and sum the gradient recomputed (2 per logit); the options
// each way.
int64_t CrossEntropyWithGradOp::getFlops() {
  using nn::detail::satAdd, nn::detail::satMul;
  int64_t perLogit =
      8 + 2 * nn::detail::lossOptionFlops(getLabelSmoothing().has_value(),
                                          getLogitSoftcap().has_value());
  return satAdd(
      satMul(perLogit, nn::detail::numElements(getLogits().getType())),
      satMul(3, nn::detail::numElements(getLabels().getType())));
}
