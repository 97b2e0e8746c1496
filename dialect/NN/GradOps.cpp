//===- GradOps.cpp - gradients of softmax, norms, loss, lookups, slices ---===//
//
// The ops the VJP rules build. Shapes and attributes mirror the forward op of
// the same name; the activation gradients and nn.equal take their cost and
// sharding rule from NN_ElementwiseOp in NNOps.td.
//
//===----------------------------------------------------------------------===//

#include "dialect/NN/NNOps.h"
#include "dialect/NN/NNOpsUtils.h"
#include "dialect/NN/NormRules.h"

#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace tessel;
using namespace tessel::nn;

/// Checks that the gradient of an output has the output's type.
static LogicalResult verifySameAs(std::optional<Location> loc, StringRef name,
                                  Type type, StringRef what, Type expected) {
  if (type != expected)
    return nn::detail::inferError(loc, name, " must have ", what, " type ",
                                  expected, ", got ", type);
  return success();
}

//===----------------------------------------------------------------------===//
// SoftmaxGradOp
//===----------------------------------------------------------------------===//

int64_t SoftmaxGradOp::getNormalizedDim() {
  auto dim = static_cast<int64_t>(getDim());
  return dim < 0 ? dim + getType().getRank() : dim;
}

LogicalResult SoftmaxGradOp::verify() {
  int64_t rank = getType().getRank();
  if (rank == 0)
    return emitOpError() << "needs a tensor of rank >= 1";
  int64_t dim = getDim();
  if (dim < -rank || dim >= rank)
    return emitOpError() << "dim " << dim << " is out of range for rank "
                         << rank;
  return success();
}

// Per element: dy·y, its sum, the difference, the product with y.
int64_t SoftmaxGradOp::getFlops() {
  return nn::detail::satMul(4, nn::detail::numElements(getType()));
}

SmallVector<utils::IteratorType> SoftmaxGradOp::getLoopIteratorTypes() {
  return nn::detail::parallelLoops(getType().getRank());
}

SmallVector<AffineMap> SoftmaxGradOp::getIndexingMaps() {
  return nn::detail::identityMaps(*this);
}

SmallVector<ReductionKind> SoftmaxGradOp::getReductionLoopIteratorKinds() {
  return {};
}

SmallVector<int64_t> SoftmaxGradOp::getUnsplittableLoops() {
  return {getNormalizedDim()};
}

//===----------------------------------------------------------------------===//
// LayerNormGradOp and RmsNormGradOp: normalised over the last dimension
//===----------------------------------------------------------------------===//

static LogicalResult inferLastDimNormGrad(std::optional<Location> loc,
                                          Type inputType, Type gammaType,
                                          Type dyType, int64_t numParamGrads,
                                          SmallVectorImpl<Type> &results) {
  auto input = cast<RankedTensorType>(inputType);
  if (input.getRank() == 0)
    return nn::detail::inferError(loc, "input must have rank >= 1");
  if (failed(nn::detail::verifyNormParam(loc, "gamma", gammaType, input.getShape().back(),
                             input.getElementType(), "last")) ||
      failed(verifySameAs(loc, "dy", dyType, "the input's", input)))
    return failure();
  results.push_back(input);
  results.append(numParamGrads, gammaType);
  return success();
}

LogicalResult
LayerNormGradOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                  Adaptor adaptor,
                                  SmallVectorImpl<Type> &results) {
  return inferLastDimNormGrad(loc, adaptor.getInput().getType(),
                              adaptor.getGamma().getType(),
                              adaptor.getDy().getType(), 2, results);
}

// dgamma and dbeta in gamma's type, or f32 for a 16-bit gamma.
bool LayerNormGradOp::isCompatibleReturnTypes(TypeRange inferred,
                                              TypeRange actual) {
  return nn::detail::areInferredOrAllF32(inferred, actual, /*kept=*/1);
}

LogicalResult LayerNormGradOp::verify() {
  return nn::detail::verifyNormEpsilon(*this, getEpsilon());
}

// Recompute x̂ (4), dgamma and dbeta (3), dx from dy·gamma and the two row
// sums (8).
int64_t LayerNormGradOp::getFlops() {
  return nn::detail::satMul(15, nn::detail::numElements(getInput().getType()));
}

// The forward's loops; the row loops are sum reductions for dgamma and dbeta.
nn::detail::NormShardingRule LayerNormGradOp::getNormShardingRule() {
  int64_t rank = getInput().getType().getRank();
  return {getContext(), rank, rank - 1, 2};
}

SmallVector<utils::IteratorType> LayerNormGradOp::getLoopIteratorTypes() {
  return getNormShardingRule().gradLoops();
}

SmallVector<AffineMap> LayerNormGradOp::getIndexingMaps() {
  return getNormShardingRule().gradMaps();
}

SmallVector<ReductionKind> LayerNormGradOp::getReductionLoopIteratorKinds() {
  return getNormShardingRule().gradReductionKinds();
}

SmallVector<int64_t> LayerNormGradOp::getUnsplittableLoops() {
  return {getInput().getType().getRank() - 1};
}

LogicalResult RmsNormGradOp::inferReturnTypes(MLIRContext *,
                                              std::optional<Location> loc,
                                              Adaptor adaptor,
                                              SmallVectorImpl<Type> &results) {
  return inferLastDimNormGrad(loc, adaptor.getInput().getType(),
                              adaptor.getGamma().getType(),
                              adaptor.getDy().getType(), 1, results);
}

bool RmsNormGradOp::isCompatibleReturnTypes(TypeRange inferred,
                                            TypeRange actual) {
  return nn::detail::areInferredOrAllF32(inferred, actual, /*kept=*/1);
}

LogicalResult RmsNormGradOp::verify() {
  return nn::detail::verifyNormEpsilon(*this, getEpsilon());
}

// Recompute x̂ (3), dgamma (2), dx from dy·gamma and one row sum (6).
int64_t RmsNormGradOp::getFlops() {
  return nn::detail::satMul(11, nn::detail::numElements(getInput().getType()));
}

nn::detail::NormShardingRule RmsNormGradOp::getNormShardingRule() {
  int64_t rank = getInput().getType().getRank();
  return {getContext(), rank, rank - 1, 1};
}

SmallVector<utils::IteratorType> RmsNormGradOp::getLoopIteratorTypes() {
  return getNormShardingRule().gradLoops();
}

SmallVector<AffineMap> RmsNormGradOp::getIndexingMaps() {
  return getNormShardingRule().gradMaps();
}

SmallVector<ReductionKind> RmsNormGradOp::getReductionLoopIteratorKinds() {
  return getNormShardingRule().gradReductionKinds();
}

SmallVector<int64_t> RmsNormGradOp::getUnsplittableLoops() {
  return {getInput().getType().getRank() - 1};
}

//===----------------------------------------------------------------------===//
// BatchNormGradOp: statistics over every dimension but the feature dimension
//===----------------------------------------------------------------------===//

LogicalResult
BatchNormGradOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                  Adaptor adaptor,
                                  SmallVectorImpl<Type> &results) {
  auto input = cast<RankedTensorType>(adaptor.getInput().getType());
  int64_t featureDim = adaptor.getFeatureDim();
  if (input.getRank() < 2)
    return nn::detail::inferError(
        loc, "input must be [batch, features, ...], got ", input);
  if (featureDim < 0 || featureDim >= input.getRank())
    return nn::detail::inferError(loc, "feature_dim ", featureDim,
                                  " is out of range for rank ",
                                  input.getRank());
  Type gamma = adaptor.getGamma().getType();
  if (failed(nn::detail::verifyNormParam(loc, "gamma", gamma, input.getDimSize(featureDim),
                             input.getElementType(), "feature")) ||
      failed(verifySameAs(loc, "dy", adaptor.getDy().getType(), "the input's",
                          input)))
    return failure();
  results.append({input, gamma, gamma});
  return success();
}

LogicalResult BatchNormGradOp::verify() {
  return nn::detail::verifyNormEpsilon(*this, getEpsilon());
}

int64_t BatchNormGradOp::getFlops() {
  return nn::detail::satMul(15, nn::detail::numElements(getInput().getType()));
}

// The forward's loops; the statistics loops are sum reductions for dgamma and
// dbeta (SyncBatchNorm completes them itself: SyncBatchNorm.cpp).
nn::detail::NormShardingRule BatchNormGradOp::getNormShardingRule() {
  return {getContext(), getInput().getType().getRank(),
          int64_t(getFeatureDim()), 2};
}

SmallVector<utils::IteratorType> BatchNormGradOp::getLoopIteratorTypes() {
  return getNormShardingRule().gradLoops();
}

SmallVector<AffineMap> BatchNormGradOp::getIndexingMaps() {
  return getNormShardingRule().gradMaps();
}

SmallVector<ReductionKind> BatchNormGradOp::getReductionLoopIteratorKinds() {
  return getNormShardingRule().gradReductionKinds();
}

//===----------------------------------------------------------------------===//
// CrossEntropyGradOp
//===----------------------------------------------------------------------===//

LogicalResult
CrossEntropyGradOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                     Adaptor adaptor,
                                     SmallVectorImpl<Type> &results) {
  auto logits = cast<RankedTensorType>(adaptor.getLogits().getType());
  LossReduction reduction = adaptor.getReduction();
  FailureOr<RankedTensorType> loss = nn::detail::inferCrossEntropyType(
      loc, logits, cast<RankedTensorType>(adaptor.getLabels().getType()),
      reduction == LossReduction::none);
  if (failed(loss))
    return failure();
  if (!nn::detail::isInferredOrF32(*loss, adaptor.getDloss().getType()))
    return nn::detail::inferError(loc, "dloss must have the loss's type ",
                                  *loss, nn::detail::orF32Note(*loss),
                                  " (reduction ",
                                  stringifyLossReduction(reduction), "), got ",
                                  adaptor.getDloss().getType());
  results.push_back(logits);
  return success();
}

// Softmax again (4 per logit), normalise and scale by the loss gradient (2
// per logit), subtract the one-hot (1 per position).
// Its options: nn::detail::lossOptionFlops (a cap's division, tanh and
// product again with the slope; smoothing's ε/V).
int64_t CrossEntropyGradOp::getFlops() {
  using nn::detail::satAdd, nn::detail::satMul;
  int64_t perLogit =
      6 + nn::detail::lossOptionFlops(getLabelSmoothing().has_value(),
                                      getLogitSoftcap().has_value());
  return satAdd(
      satMul(perLogit, nn::detail::numElements(getLogits().getType())),
      nn::detail::numElements(getLabels().getType()));
}

LogicalResult CrossEntropyGradOp::verify() {
  return nn::detail::verifyLossOptions(*this, getLabelSmoothing(),
                                       getLogitSoftcap());
}

// Loops: the label dimensions..., then the class loop; all parallel (every
// row's gradient is its own).
SmallVector<utils::IteratorType> CrossEntropyGradOp::getLoopIteratorTypes() {
  return nn::detail::parallelLoops(getLogits().getType().getRank());
}

SmallVector<AffineMap> CrossEntropyGradOp::getIndexingMaps() {
  MLIRContext *ctx = getContext();
  int64_t numLoops = getLogits().getType().getRank();
  SmallVector<int64_t> positions =
      llvm::to_vector(llvm::seq<int64_t>(0, numLoops - 1));
  AffineMap identity = AffineMap::getMultiDimIdentityMap(numLoops, ctx);
  AffineMap rows = nn::detail::projection(numLoops, positions, ctx);
  AffineMap dloss = getReduction() == LossReduction::none
                        ? rows
                        : AffineMap::get(numLoops, 0, {}, ctx);
  return {identity, rows, dloss, identity};
}

SmallVector<ReductionKind> CrossEntropyGradOp::getReductionLoopIteratorKinds() {
  return {};
}

//===----------------------------------------------------------------------===//
// EmbeddingGradOp
//===----------------------------------------------------------------------===//

LogicalResult EmbeddingGradOp::verify() {
  RankedTensorType ids = getIds().getType(), dout = getDout().getType();
  RankedTensorType table = getType();
  if (table.getRank() != 2)
    return emitOpError() << "result must be the table [vocab, hidden], got "
                         << table;
  SmallVector<int64_t> expected = llvm::to_vector(ids.getShape());
  expected.push_back(table.getDimSize(1));
  if (dout.getShape() != ArrayRef<int64_t>(expected))
    return emitOpError() << "dout " << dout
                         << " must have the ids' shape followed by the hidden "
                            "size ("
                         << nn::detail::shapeString(expected) << ")";
  if (!nn::detail::isInferredOrF32(dout.clone(table.getShape()), table))
    return emitOpError() << "table element type " << table.getElementType()
                         << " must be dout's " << dout.getElementType()
                         << nn::detail::orF32Note(dout);
  return success();
}

// One add per element of dout.
int64_t EmbeddingGradOp::getFlops() {
  return nn::detail::numElements(getDout().getType());
}

// Loops as the forward: ids dimensions..., h, v. The id loops are sum
// reductions (every position adds into its row).
SmallVector<utils::IteratorType> EmbeddingGradOp::getLoopIteratorTypes() {
  int64_t numIds = getIds().getType().getRank();
  return nn::detail::loopsWithReductions(
      numIds + 2, llvm::to_vector(llvm::seq<int64_t>(0, numIds)));
}

SmallVector<AffineMap> EmbeddingGradOp::getIndexingMaps() {
  MLIRContext *ctx = getContext();
  int64_t numIds = getIds().getType().getRank();
  int64_t numLoops = numIds + 2, h = numIds, v = numIds + 1;
  SmallVector<int64_t> idLoops = llvm::to_vector(llvm::seq<int64_t>(0, numIds));
  SmallVector<int64_t> doutLoops = idLoops;
  doutLoops.push_back(h);
  return {nn::detail::projection(numLoops, idLoops, ctx),
          nn::detail::projection(numLoops, doutLoops, ctx),
          nn::detail::projection(numLoops, {v, h}, ctx)};
}

SmallVector<ReductionKind> EmbeddingGradOp::getReductionLoopIteratorKinds() {
  return SmallVector<ReductionKind>(getIds().getType().getRank(),
                                    ReductionKind::Sum);
}


//===----------------------------------------------------------------------===//
// AttentionGradOp
//===----------------------------------------------------------------------===//

LogicalResult
AttentionGradOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                  Adaptor adaptor,
                                  SmallVectorImpl<Type> &results) {
  auto q = cast<RankedTensorType>(adaptor.getQuery().getType());
  auto k = cast<RankedTensorType>(adaptor.getKey().getType());
  auto v = cast<RankedTensorType>(adaptor.getValue().getType());
  FailureOr<RankedTensorType> out = nn::detail::inferAttentionType(
      loc, q, k, v, adaptor.getCausal(), bool(adaptor.getBlockAxesAttr()));
  if (failed(out) ||
      failed(verifySameAs(loc, "out", adaptor.getOut().getType(),
                          "the attention result's", *out)) ||
      failed(verifySameAs(loc, "lse", adaptor.getLse().getType(),
                          "the attention log-sum-exp's",
                          nn::detail::attentionLseType(q))) ||
      failed(verifySameAs(loc, "dout", adaptor.getDout().getType(),
                          "the attention result's", *out)))
    return failure();
  results.append({q, k, v});
  return success();
}

LogicalResult AttentionGradOp::verify() {
  return nn::detail::verifyAttentionAttrs(
      *this, getScale(), getCausal(), getWindow(), getLayerWindows(),
      getSoftcap(), bool(getBlockAxesAttr()));
}

int64_t AttentionGradOp::getFlops() {
  ArrayRef<int64_t> q = getQuery().getType().getShape();
  int64_t valueDim = getValue().getType().getDimSize(3);
  using nn::detail::satAdd, nn::detail::satMul;
  int64_t scores = nn::detail::attentionScores(
      q, getKey().getType().getDimSize(1), getWindow(),
      getLayerWindows()); // B·H·S·T'
  int64_t rowDots = satMul(2, q[0], q[2], q[1], valueDim);
  // A soft cap recomputes the capped scores (3) and their slope (3).
  int64_t perScore = getSoftcap() ? 11 : 5;
  return satAdd(satAdd(satMul(6, scores, q[3]), satMul(4, scores, valueDim)),
                satAdd(satMul(perScore, scores), rowDots));
}

// Loops as the forward: b, s, h, t, d, e.
enum AttentionGradLoop : int64_t { kB, kS, kH, kT, kD, kE, kNumLoops };

SmallVector<utils::IteratorType> AttentionGradOp::getLoopIteratorTypes() {
  return nn::detail::loopsWithReductions(kNumLoops, {kS, kT, kD});
}

SmallVector<AffineMap> AttentionGradOp::getIndexingMaps() {
  MLIRContext *ctx = getContext();
  auto d = [&](int64_t loop) { return getAffineDimExpr(loop, ctx); };
  int64_t group =
      getQuery().getType().getDimSize(2) / getKey().getType().getDimSize(2);
  AffineExpr kvHead = group == 1 ? d(kH) : d(kH).floorDiv(group);
  auto map = [&](ArrayRef<AffineExpr> exprs) {
    return AffineMap::get(kNumLoops, 0, exprs, ctx);
  };
  AffineMap query = map({d(kB), d(kS), d(kH), d(kD)});
  AffineMap key = map({d(kB), d(kT), kvHead, d(kD)});
  AffineMap value = map({d(kB), d(kT), kvHead, d(kE)});
  AffineMap out = map({d(kB), d(kS), d(kH), d(kE)});
  AffineMap lse = map({d(kB), d(kH), d(kS)});
  return {query, key, value, out, lse, out, query, key, value};
}

// dk and dv sum over the queries S: a block of them gives its share (the
// rows of dq that index S are the block's own).
SmallVector<ReductionKind> AttentionGradOp::getReductionLoopIteratorKinds() {
  return {ReductionKind::Sum, ReductionKind::Generic, ReductionKind::Generic};
}

// Each of T, D and E is summed over for some gradient inside the op (dq
// over T, the recomputed scores over D, dP = dout·vᵀ over E): they stay
// whole.
SmallVector<int64_t> AttentionGradOp::getUnsplittableLoops() {
  return {kT, kD, kE};
}

// A block of the queries of a causal mask is told which block, as the
// forward.
LogicalResult AttentionGradOp::adjustLocalPartition(Operation *local,
                                                    LocalSplit &split,
                                                    OpBuilder &) {
  if (!getCausal())
    return success();
  return nn::detail::markRankBlock(*this, local, split, kS, "query sequence");
}

//===----------------------------------------------------------------------===//
// SliceGradOp
//===----------------------------------------------------------------------===//

SmallVector<int64_t> SliceGradOp::getStridesOrOnes() {
  if (std::optional<ArrayRef<int64_t>> strides = getStrides())
    return llvm::to_vector(*strides);
  return SmallVector<int64_t>(getStart().size(), 1);
}

LogicalResult SliceGradOp::verify() {
  FailureOr<RankedTensorType> sliced = nn::detail::inferSliceType(
      getLoc(), getType(), getStart(), getLimit(), getStrides(), "the result");
  if (failed(sliced))
    return failure();
  if (*sliced != getDy().getType())
    return emitOpError() << "dy must have the type of the slice of the result "
                         << getType() << " (" << *sliced << "), got "
                         << getDy().getType();
  return success();
}

int64_t SliceGradOp::getFlops() { return 0; }

/// True when the slice keeps dimension `dim` of the result whole.
static bool keepsWhole(SliceGradOp op, int64_t dim) {
  return op.getStart()[dim] == 0 &&
         op.getLimit()[dim] == op.getType().getDimSize(dim) &&
         op.getStridesOrOnes()[dim] == 1;
}

// Loops are dy's (the forward slice's result loops).
SmallVector<utils::IteratorType> SliceGradOp::getLoopIteratorTypes() {
  return nn::detail::parallelLoops(getDy().getType().getRank());
}

SmallVector<AffineMap> SliceGradOp::getIndexingMaps() {
  MLIRContext *ctx = getContext();
  int64_t rank = getDy().getType().getRank();
  SmallVector<int64_t> strides = getStridesOrOnes();
  SmallVector<AffineExpr> outExprs;
  for (int64_t dim = 0; dim < rank; ++dim)
    outExprs.push_back(getAffineDimExpr(dim, ctx) * strides[dim] +
                       getStart()[dim]);
  return {AffineMap::getMultiDimIdentityMap(rank, ctx),
          AffineMap::get(rank, 0, outExprs, ctx)};
}

SmallVector<ReductionKind> SliceGradOp::getReductionLoopIteratorKinds() {
  return {};
}

SmallVector<int64_t> SliceGradOp::getUnsplittableLoops() {
  SmallVector<int64_t> loops;
  for (int64_t dim = 0, e = getType().getRank(); dim < e; ++dim)
    if (!keepsWhole(*this, dim))
      loops.push_back(dim);
  return loops;
}
