//===- ReduceOps.cpp - reduce_sum, reduce_mean, reduce_max ----------------===//

#include "dialect/NN/NNOps.h"
#include "dialect/NN/NNOpsUtils.h"

#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace tessel::nn;
using namespace tessel;

/// The result of reducing `input` over `dims`: reduced dimensions dropped,
/// or kept with size 1.
static LogicalResult inferReducedType(std::optional<Location> loc, Type input,
                                      ArrayRef<int64_t> dims, bool keepDims,
                                      SmallVectorImpl<Type> &results) {
  auto type = cast<RankedTensorType>(input);
  if (failed(nn::detail::verifyDimList(loc, dims, type.getRank(), "reduced")))
    return failure();
  SmallVector<int64_t> shape;
  for (auto [dim, size] : llvm::enumerate(type.getShape())) {
    if (!llvm::is_contained(dims, static_cast<int64_t>(dim)))
      shape.push_back(size);
    else if (keepDims)
      shape.push_back(1);
  }
  results.push_back(RankedTensorType::get(shape, type.getElementType()));
  return success();
}

/// Reduction flops: one combine per input element beyond the first of each
/// output element.
template <typename ReduceOpT> static int64_t combineFlops(ReduceOpT op) {
  return nn::detail::numElements(op.getInput().getType()) -
         nn::detail::numElements(op.getType());
}

/// Loops are the input's dimensions; the reduced ones are reductions. With
/// keep_dims, a reduced dimension of the result is the constant index 0.
template <typename ReduceOpT>
static SmallVector<AffineMap> reduceIndexingMaps(ReduceOpT op) {
  MLIRContext *ctx = op.getContext();
  int64_t rank = op.getInput().getType().getRank();
  SmallVector<AffineExpr> resultExprs;
  for (int64_t dim = 0; dim < rank; ++dim) {
    if (!llvm::is_contained(op.getDims(), dim))
      resultExprs.push_back(getAffineDimExpr(dim, ctx));
    else if (op.getKeepDims())
      resultExprs.push_back(getAffineConstantExpr(0, ctx));
  }
  return {AffineMap::getMultiDimIdentityMap(rank, ctx),
          AffineMap::get(rank, 0, resultExprs, ctx)};
}

template <typename ReduceOpT>
static SmallVector<utils::IteratorType> reduceLoops(ReduceOpT op) {
  return nn::detail::loopsWithReductions(op.getInput().getType().getRank(),
                                     op.getDims());
}

/// Reducing over no dimension is the identity.
template <typename ReduceOpT> static OpFoldResult foldEmptyReduce(ReduceOpT op) {
  if (op.getDims().empty() && op.getInput().getType() == op.getType())
    return op.getInput();
  return {};
}

#define TESSEL_DEFINE_REDUCE_OP(OpT, Kind, Flops)                              \
  LogicalResult OpT::inferReturnTypes(MLIRContext *, std::optional<Location> loc, \
                                      Adaptor adaptor,                         \
                                      SmallVectorImpl<Type> &results) {        \
    return inferReducedType(loc, adaptor.getInput().getType(),                 \
                            adaptor.getDims(), adaptor.getKeepDims(), results); \
  }                                                                            \
  OpFoldResult OpT::fold(FoldAdaptor) { return foldEmptyReduce(*this); }       \
  int64_t OpT::getFlops() { return Flops; }                                    \
  SmallVector<utils::IteratorType> OpT::getLoopIteratorTypes() {               \
    return reduceLoops(*this);                                                 \
  }                                                                            \
  SmallVector<AffineMap> OpT::getIndexingMaps() {                              \
    return reduceIndexingMaps(*this);                                          \
  }                                                                            \
  SmallVector<ReductionKind> OpT::getReductionLoopIteratorKinds() {            \
    return SmallVector<ReductionKind>(getDims().size(), Kind);                 \
  }

TESSEL_DEFINE_REDUCE_OP(ReduceSumOp, ReductionKind::Sum, combineFlops(*this))
// The mean adds the division of every output element.
TESSEL_DEFINE_REDUCE_OP(ReduceMeanOp, ReductionKind::Average,
                        nn::detail::numElements(getInput().getType()))
TESSEL_DEFINE_REDUCE_OP(ReduceMaxOp, ReductionKind::Max, combineFlops(*this))

#undef TESSEL_DEFINE_REDUCE_OP

// The sum of a 16-bit tensor as inferred or in f32.
bool ReduceSumOp::isCompatibleReturnTypes(TypeRange inferred,
                                          TypeRange actual) {
  return nn::detail::areInferredOrAllF32(inferred, actual, /*kept=*/0);
}

LogicalResult ReduceMeanOp::verify() {
  if (!isa<FloatType>(getType().getElementType()))
    return emitOpError() << "needs a float tensor, not " << getInput().getType();
  return success();
}
