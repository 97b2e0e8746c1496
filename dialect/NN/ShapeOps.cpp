//===- ShapeOps.cpp - broadcast, reshape, transpose, slice, concat --------===//
//
// Data movement: no flops. Their sharding rules map result loops back to the
// operand with affine maps (strides, offsets, (de)linearisation).
//
//===----------------------------------------------------------------------===//

#include "dialect/NN/NNOps.h"
#include "dialect/NN/NNOpsUtils.h"

#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace tessel::nn;
using namespace tessel;

//===----------------------------------------------------------------------===//
// BroadcastOp
//===----------------------------------------------------------------------===//

LogicalResult BroadcastOp::verify() {
  RankedTensorType inType = getInput().getType();
  RankedTensorType outType = getType();
  ArrayRef<int64_t> dims = getDims();
  if (inType.getElementType() != outType.getElementType())
    return emitOpError() << "changes the element type from "
                         << inType.getElementType() << " to "
                         << outType.getElementType() << "; use nn.cast";
  if (static_cast<int64_t>(dims.size()) != inType.getRank())
    return emitOpError() << "dims has " << dims.size()
                         << " entries but the operand has rank "
                         << inType.getRank();
  for (auto [i, dim] : llvm::enumerate(dims)) {
    if (dim < 0 || dim >= outType.getRank())
      return emitOpError() << "dims[" << i << "] = " << dim
                           << " is out of range for a result of rank "
                           << outType.getRank();
    if (i > 0 && dim <= dims[i - 1])
      return emitOpError() << "dims must be strictly increasing, got ["
                           << dims << "]";
    int64_t inSize = inType.getDimSize(i), outSize = outType.getDimSize(dim);
    if (inSize != outSize && inSize != 1)
      return emitOpError() << "operand dimension " << i << " of size " << inSize
                           << " cannot broadcast to result dimension " << dim
                           << " of size " << outSize;
  }
  return success();
}

OpFoldResult BroadcastOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType())
    return getInput();
  // A splat folds here only where that adds no element; a larger one is
  // SplatBroadcastToConstant's (which looks at the users).
  auto splat = dyn_cast_if_present<SplatElementsAttr>(adaptor.getInput());
  if (splat && splat.getNumElements() == getType().getNumElements())
    return SplatElementsAttr::get(getType(), splat.getSplatValue<Attribute>());
  return {};
}

namespace {
/// broadcast(broadcast(x)) -> broadcast(x) with the composed dimension map.
struct ComposeBroadcasts : public OpRewritePattern<BroadcastOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(BroadcastOp op,
                                PatternRewriter &rewriter) const override {
    auto inner = op.getInput().getDefiningOp<BroadcastOp>();
    if (!inner)
      return failure();
    SmallVector<int64_t> dims;
    for (int64_t dim : inner.getDims())
      dims.push_back(op.getDims()[dim]);
    rewriter.replaceOpWithNewOp<BroadcastOp>(op, op.getType(), inner.getInput(),
                                             dims);
    return success();
  }
};

/// broadcast(splat constant) -> a splat constant of the result type, where
/// some user is not an elementwise binary op: that user reads a buffer of
/// the full shape either way, and one fill beats a fill and a copy. Read
/// by binary ops alone the broadcast stays: the memory plan makes it a view
/// of the small constant (a scalar over logits, a multiplier over
/// activations), where the larger splat would be a buffer of its own.
struct SplatBroadcastToConstant : public OpRewritePattern<BroadcastOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(BroadcastOp op,
                                PatternRewriter &rewriter) const override {
    DenseElementsAttr splat = nn::detail::splatConstantOf(op.getInput());
    if (!splat)
      return failure();
    if (llvm::all_of(op->getUsers(), [](Operation *user) {
          return isa<AddOp, SubOp, MulOp, DivOp, EqualOp>(user);
        }))
      return failure();
    rewriter.replaceOpWithNewOp<ConstantOp>(op, op.getType(),
                                            splat.resizeSplat(op.getType()));
    return success();
  }
};
} // namespace

void BroadcastOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                              MLIRContext *context) {
  results.add<ComposeBroadcasts, SplatBroadcastToConstant>(context);
}

int64_t BroadcastOp::getFlops() { return 0; }

SmallVector<utils::IteratorType> BroadcastOp::getLoopIteratorTypes() {
  return nn::detail::parallelLoops(getType().getRank());
}

SmallVector<AffineMap> BroadcastOp::getIndexingMaps() {
  MLIRContext *ctx = getContext();
  int64_t rank = getType().getRank();
  SmallVector<AffineExpr> inExprs;
  for (auto [i, dim] : llvm::enumerate(getDims())) {
    // A size-1 dimension that expands reads its only element.
    bool expands = getInput().getType().getDimSize(i) != getType().getDimSize(dim);
    inExprs.push_back(expands ? getAffineConstantExpr(0, ctx)
                              : getAffineDimExpr(dim, ctx));
  }
  return {AffineMap::get(rank, 0, inExprs, ctx),
          AffineMap::getMultiDimIdentityMap(rank, ctx)};
}

SmallVector<ReductionKind> BroadcastOp::getReductionLoopIteratorKinds() {
  return {};
}

//===----------------------------------------------------------------------===//
// ReshapeOp
//===----------------------------------------------------------------------===//

LogicalResult ReshapeOp::verify() {
  RankedTensorType inType = getInput().getType(), outType = getType();
  if (inType.getElementType() != outType.getElementType())
    return emitOpError() << "changes the element type from "
                         << inType.getElementType() << " to "
                         << outType.getElementType() << "; use nn.cast";
  if (inType.getNumElements() != outType.getNumElements())
    return emitOpError() << "cannot reshape " << inType.getNumElements()
                         << " elements (" << nn::detail::shapeString(inType.getShape())
                         << ") into " << outType.getNumElements() << " ("
                         << nn::detail::shapeString(outType.getShape()) << ")";
  return success();
}

OpFoldResult ReshapeOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType())
    return getInput();
  if (auto dense = dyn_cast_if_present<DenseElementsAttr>(adaptor.getInput()))
    return dense.reshape(getType());
  // reshape(reshape(x)) reads x directly.
  if (auto inner = getInput().getDefiningOp<ReshapeOp>()) {
    if (inner.getInput().getType() == getType())
      return inner.getInput();
    getInputMutable().assign(inner.getInput());
    return getResult();
  }
  return {};
}

namespace {
/// The loop nest of a reshape: its shapes split into groups of dimensions
/// with equal element counts ([b, s, h*d] <-> [b, s, h, d] has groups {b},
/// {s}, {h*d <-> h, d}). Each group contributes the dimensions of its finer
/// side as loops; the coarser side reads them linearised. Only the leading
/// non-unit loop of a group with several loops can be split without changing
/// what a rank holds; a group that is many-to-many (6x4 -> 4x6) stays whole.
struct ReshapeLoopNest {
  int64_t numLoops = 0;
  SmallVector<AffineExpr> inExprs, outExprs;
  SmallVector<int64_t> unsplittable;
};
} // namespace

/// Expression of the row-major linear index of `sizes` read through `loops`.
static AffineExpr linearize(ArrayRef<int64_t> sizes, ArrayRef<AffineExpr> loops,
                            MLIRContext *ctx) {
  AffineExpr linear = getAffineConstantExpr(0, ctx);
  for (auto [size, loop] : llvm::zip(sizes, loops))
    linear = linear * size + loop;
  return linear;
}

static ReshapeLoopNest computeReshapeLoops(ArrayRef<int64_t> in,
                                           ArrayRef<int64_t> out,
                                           MLIRContext *ctx) {
  ReshapeLoopNest nest;
  size_t i = 0, j = 0;
  while (i < in.size() || j < out.size()) {
    size_t i0 = i, j0 = j;
    int64_t inCount = 1, outCount = 1;
    if (i < in.size())
      inCount *= in[i++];
    if (j < out.size())
      outCount *= out[j++];
    while (inCount != outCount) {
      if (inCount < outCount && i < in.size())
        inCount *= in[i++];
      else if (j < out.size())
        outCount *= out[j++];
      else
        break;
    }
    ArrayRef<int64_t> inGroup = in.slice(i0, i - i0);
    ArrayRef<int64_t> outGroup = out.slice(j0, j - j0);
    bool outIsFiner = outGroup.size() >= inGroup.size();
    ArrayRef<int64_t> fine = outIsFiner ? outGroup : inGroup;
    ArrayRef<int64_t> coarse = outIsFiner ? inGroup : outGroup;
    SmallVector<AffineExpr> loops;
    for (size_t k = 0; k < fine.size(); ++k)
      loops.push_back(getAffineDimExpr(nest.numLoops + k, ctx));
    SmallVector<AffineExpr> &fineExprs = outIsFiner ? nest.outExprs : nest.inExprs;
    SmallVector<AffineExpr> &coarseExprs = outIsFiner ? nest.inExprs : nest.outExprs;
    llvm::append_range(fineExprs, loops);
    AffineExpr linear = linearize(fine, loops, ctx);
    if (coarse.size() == 1) {
      coarseExprs.push_back(linear);
    } else if (coarse.size() > 1) {
      int64_t stride = 1;
      SmallVector<AffineExpr> delinearized(coarse.size());
      for (size_t k = coarse.size(); k-- > 0;) {
        delinearized[k] = linear.floorDiv(stride) % coarse[k];
        stride *= coarse[k];
      }
      llvm::append_range(coarseExprs, delinearized);
    }
    // Which loops of the group may be split.
    bool manyToMany = coarse.size() > 1;
    bool leadingSeen = false;
    for (size_t k = 0; k < fine.size(); ++k) {
      if (fine[k] == 1)
        continue;
      if (manyToMany || leadingSeen)
        nest.unsplittable.push_back(nest.numLoops + k);
      leadingSeen = true;
    }
    nest.numLoops += fine.size();
  }
  return nest;
}

int64_t ReshapeOp::getFlops() { return 0; }

SmallVector<utils::IteratorType> ReshapeOp::getLoopIteratorTypes() {
  return nn::detail::parallelLoops(
      computeReshapeLoops(getInput().getType().getShape(), getType().getShape(),
                          getContext())
          .numLoops);
}

SmallVector<AffineMap> ReshapeOp::getIndexingMaps() {
  ReshapeLoopNest nest = computeReshapeLoops(
      getInput().getType().getShape(), getType().getShape(), getContext());
  return {AffineMap::get(nest.numLoops, 0, nest.inExprs, getContext()),
          AffineMap::get(nest.numLoops, 0, nest.outExprs, getContext())};
}

SmallVector<ReductionKind> ReshapeOp::getReductionLoopIteratorKinds() {
  return {};
}

SmallVector<int64_t> ReshapeOp::getUnsplittableLoops() {
  return computeReshapeLoops(getInput().getType().getShape(),
                             getType().getShape(), getContext())
      .unsplittable;
}

//===----------------------------------------------------------------------===//
// TransposeOp
//===----------------------------------------------------------------------===//

LogicalResult TransposeOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &results) {
  auto type = cast<RankedTensorType>(adaptor.getInput().getType());
  ArrayRef<int64_t> perm = adaptor.getPerm();
  if (static_cast<int64_t>(perm.size()) != type.getRank())
    return nn::detail::inferError(loc, "perm has ", perm.size(),
                              " entries but the operand has rank ",
                              type.getRank());
  if (failed(nn::detail::verifyDimList(loc, perm, type.getRank(), "perm")))
    return failure();
  SmallVector<int64_t> shape;
  for (int64_t dim : perm)
    shape.push_back(type.getDimSize(dim));
  results.push_back(RankedTensorType::get(shape, type.getElementType()));
  return success();
}

OpFoldResult TransposeOp::fold(FoldAdaptor) {
  // transpose(transpose(x, p1), p2) == transpose(x, p1[p2[i]]).
  if (auto inner = getInput().getDefiningOp<TransposeOp>()) {
    SmallVector<int64_t> composed;
    for (int64_t dim : getPerm())
      composed.push_back(inner.getPerm()[dim]);
    getInputMutable().assign(inner.getInput());
    setPerm(composed);
    if (getInput().getType() == getType() && llvm::equal(composed, llvm::seq<int64_t>(0, composed.size())))
      return getInput();
    return getResult();
  }
  if (llvm::equal(getPerm(), llvm::seq<int64_t>(0, getPerm().size())))
    return getInput();
  return {};
}

int64_t TransposeOp::getFlops() { return 0; }

SmallVector<utils::IteratorType> TransposeOp::getLoopIteratorTypes() {
  return nn::detail::parallelLoops(getType().getRank());
}

SmallVector<AffineMap> TransposeOp::getIndexingMaps() {
  int64_t rank = getType().getRank();
  return {AffineMap::getMultiDimIdentityMap(rank, getContext()),
          nn::detail::projection(rank, getPerm(), getContext())};
}

SmallVector<ReductionKind> TransposeOp::getReductionLoopIteratorKinds() {
  return {};
}

//===----------------------------------------------------------------------===//
// SliceOp
//===----------------------------------------------------------------------===//

SmallVector<int64_t> SliceOp::getStridesOrOnes() {
  if (std::optional<ArrayRef<int64_t>> strides = getStrides())
    return llvm::to_vector(*strides);
  return SmallVector<int64_t>(getStart().size(), 1);
}

FailureOr<RankedTensorType>
nn::detail::inferSliceType(std::optional<Location> loc, RankedTensorType type,
                           ArrayRef<int64_t> start, ArrayRef<int64_t> limit,
                           std::optional<ArrayRef<int64_t>> given,
                           StringRef sliced) {
  int64_t rank = type.getRank();
  SmallVector<int64_t> strides(rank, 1);
  if (given)
    strides.assign(given->begin(), given->end());
  for (auto [what, list] :
       {std::pair<StringRef, size_t>{"start", start.size()},
        {"limit", limit.size()},
        {"strides", strides.size()}})
    if (static_cast<int64_t>(list) != rank)
      return nn::detail::inferError(loc, what, " has ", list, " entries but ",
                                    sliced, " has rank ", rank);
  SmallVector<int64_t> shape;
  for (int64_t dim = 0; dim < rank; ++dim) {
    int64_t size = type.getDimSize(dim);
    if (strides[dim] < 1)
      return nn::detail::inferError(loc, "stride of dimension ", dim,
                                " must be at least 1, got ", strides[dim]);
    if (start[dim] < 0 || start[dim] > limit[dim] || limit[dim] > size)
      return nn::detail::inferError(loc, "dimension ", dim, " of size ", size,
                                " cannot be sliced from ", start[dim], " to ",
                                limit[dim],
                                " (need 0 <= start <= limit <= size)");
    shape.push_back(llvm::divideCeil(limit[dim] - start[dim], strides[dim]));
  }
  return RankedTensorType::get(shape, type.getElementType());
}

LogicalResult SliceOp::inferReturnTypes(MLIRContext *,
                                        std::optional<Location> loc,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &results) {
  FailureOr<RankedTensorType> type = nn::detail::inferSliceType(
      loc, cast<RankedTensorType>(adaptor.getInput().getType()),
      adaptor.getStart(), adaptor.getLimit(), adaptor.getStrides());
  if (failed(type))
    return failure();
  results.push_back(*type);
  return success();
}

/// True when the slice keeps dimension `dim` whole.
static bool keepsWhole(SliceOp op, int64_t dim) {
  return op.getStart()[dim] == 0 &&
         op.getLimit()[dim] == op.getInput().getType().getDimSize(dim) &&
         op.getStridesOrOnes()[dim] == 1;
}

/// The input of `concat` that `slice` takes whole (slicing only the concat
/// dimension, at that input's place), or null.
static Value concatInputSliced(SliceOp slice, ConcatOp concat) {
  int64_t dim = concat.getDim(), offset = 0;
  for (int64_t d = 0, e = slice.getType().getRank(); d < e; ++d)
    if (d != dim && !keepsWhole(slice, d))
      return {};
  if (slice.getStridesOrOnes()[dim] != 1)
    return {};
  for (Value input : concat.getInputs()) {
    int64_t size = cast<RankedTensorType>(input.getType()).getDimSize(dim);
    if (slice.getStart()[dim] == offset &&
        slice.getLimit()[dim] == offset + size)
      return input;
    offset += size;
  }
  return {};
}

OpFoldResult SliceOp::fold(FoldAdaptor) {
  // slice(concat(..., x, ...)) at x's place is x (a gradient bucket's
  // slices once its all-reduce is gone: tessel-defer-gradient-reduction).
  if (auto concat = getInput().getDefiningOp<ConcatOp>())
    if (Value input = concatInputSliced(*this, concat))
      return input;
  for (int64_t dim = 0, e = getType().getRank(); dim < e; ++dim)
    if (!keepsWhole(*this, dim))
      return {};
  return getInput();
}

int64_t SliceOp::getFlops() { return 0; }

SmallVector<utils::IteratorType> SliceOp::getLoopIteratorTypes() {
  return nn::detail::parallelLoops(getType().getRank());
}

SmallVector<AffineMap> SliceOp::getIndexingMaps() {
  MLIRContext *ctx = getContext();
  int64_t rank = getType().getRank();
  SmallVector<int64_t> strides = getStridesOrOnes();
  SmallVector<AffineExpr> inExprs;
  for (int64_t dim = 0; dim < rank; ++dim)
    inExprs.push_back(getAffineDimExpr(dim, ctx) * strides[dim] +
                      getStart()[dim]);
  return {AffineMap::get(rank, 0, inExprs, ctx),
          AffineMap::getMultiDimIdentityMap(rank, ctx)};
}

SmallVector<ReductionKind> SliceOp::getReductionLoopIteratorKinds() {
  return {};
}

SmallVector<int64_t> SliceOp::getUnsplittableLoops() {
  SmallVector<int64_t> loops;
  for (int64_t dim = 0, e = getType().getRank(); dim < e; ++dim)
    if (!keepsWhole(*this, dim))
      loops.push_back(dim);
  return loops;
}

//===----------------------------------------------------------------------===//
// ConcatOp
//===----------------------------------------------------------------------===//

LogicalResult ConcatOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &results) {
  ValueRange inputs = adaptor.getInputs();
  if (inputs.empty())
    return nn::detail::inferError(loc, "needs at least one input");
  auto first = cast<RankedTensorType>(inputs.front().getType());
  int64_t dim = adaptor.getDim(), rank = first.getRank();
  if (dim < 0 || dim >= rank)
    return nn::detail::inferError(loc, "dim ", dim, " is out of range for rank ",
                              rank);
  SmallVector<int64_t> shape = llvm::to_vector(first.getShape());
  for (auto [index, input] : llvm::enumerate(inputs.drop_front())) {
    auto type = cast<RankedTensorType>(input.getType());
    if (type.getElementType() != first.getElementType() ||
        type.getRank() != rank)
      return nn::detail::inferError(loc, "input #", index + 1, " ", type,
                                " differs in rank or element type from input "
                                "#0 ",
                                first);
    for (int64_t d = 0; d < rank; ++d)
      if (d != dim && type.getDimSize(d) != shape[d])
        return nn::detail::inferError(loc, "input #", index + 1, " has size ",
                                  type.getDimSize(d), " in dimension ", d,
                                  " but input #0 has ", shape[d],
                                  " (only dimension ", dim, " may differ)");
    shape[dim] += type.getDimSize(dim);
  }
  results.push_back(RankedTensorType::get(shape, first.getElementType()));
  return success();
}

OpFoldResult ConcatOp::fold(FoldAdaptor) {
  if (getInputs().size() == 1)
    return getInputs().front();
  return {};
}

int64_t ConcatOp::getFlops() { return 0; }

SmallVector<utils::IteratorType> ConcatOp::getLoopIteratorTypes() {
  return nn::detail::parallelLoops(getType().getRank());
}

SmallVector<AffineMap> ConcatOp::getIndexingMaps() {
  MLIRContext *ctx = getContext();
  int64_t rank = getType().getRank(), dim = getDim(), offset = 0;
  SmallVector<AffineMap> maps;
  for (Value input : getInputs()) {
    SmallVector<AffineExpr> exprs;
    for (int64_t d = 0; d < rank; ++d)
      exprs.push_back(d == dim ? getAffineDimExpr(d, ctx) - offset
                               : getAffineDimExpr(d, ctx));
    maps.push_back(AffineMap::get(rank, 0, exprs, ctx));
    offset += cast<RankedTensorType>(input.getType()).getDimSize(dim);
  }
  maps.push_back(AffineMap::getMultiDimIdentityMap(rank, ctx));
  return maps;
}

SmallVector<ReductionKind> ConcatOp::getReductionLoopIteratorKinds() {
  return {};
}

SmallVector<int64_t> ConcatOp::getUnsplittableLoops() {
  if (getInputs().size() == 1)
    return {};
  return {static_cast<int64_t>(getDim())};
}
