//===- SyncBatchNorm.cpp - batch norm over a batch split across ranks -----===//
//
// The partitioner's strategy for nn.batch_norm and nn.batch_norm_grad when
// their statistics loops (every dimension but the features) are split over
// grid axes, as PyTorch's SyncBatchNorm does it: each rank sums its block,
// one all-reduce of [sum, sum of squares] gives every rank the statistics of
// the whole batch, and the backward all-reduces [Σdy, Σdy·x̂] (which are
// dbeta and dgamma) the same way. With per-rank statistics (PyTorch's plain
// BatchNorm under DDP) the local op is kept: its dgamma and dbeta stay
// partial sums that the gradient all-reduce completes.
//
// The local program is built from nn ops on the local shapes; it runs after
// autodiff, so these ops need no derivative.
//
//===----------------------------------------------------------------------===//

#include "dialect/NN/NNOps.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

using namespace mlir;
using namespace tessel::nn;

namespace {

/// Builds the local statistics and normalisation of one batch-norm input
/// `x` split over `axes` (its statistics dimensions), with `count` elements
/// per feature in the whole batch.
class SyncBatchNormBuilder {
public:
  SyncBatchNormBuilder(ImplicitLocOpBuilder &b, Value x, int64_t featureDim,
                       int64_t count, FlatSymbolRefAttr grid,
                       ArrayRef<int16_t> axes)
      : b(b), x(x), featureDim(featureDim), count(count), grid(grid),
        axes(axes) {
    auto type = cast<RankedTensorType>(x.getType());
    for (int64_t dim = 0; dim < type.getRank(); ++dim)
      if (dim != featureDim)
        statDims.push_back(dim);
    featureType = RankedTensorType::get({type.getDimSize(featureDim)},
                                        type.getElementType());
  }

  /// Σ `value` over the statistics dimensions: [features].
  Value sumOverBatch(Value value) {
    return ReduceSumOp::create(b, value, b.getDenseI64ArrayAttr(statDims));
  }

  /// `first` and `second` (both [features]) summed over the ranks in one
  /// all-reduce.
  std::pair<Value, Value> allReducePair(Value first, Value second) {
    int64_t features = featureType.getDimSize(0);
    auto pairType =
        RankedTensorType::get({2 * features}, featureType.getElementType());
    Value both = ConcatOp::create(b, pairType, ValueRange{first, second},
                                  b.getI64IntegerAttr(0));
    Value reduced = shard::AllReduceOp::create(
        b, pairType, grid, b.getDenseI16ArrayAttr(axes), both,
        shard::ReductionKindAttr::get(b.getContext(),
                                      shard::ReductionKind::Sum));
    auto slice = [&](int64_t start) {
      return SliceOp::create(b, featureType, reduced,
                             b.getDenseI64ArrayAttr({start}),
                             b.getDenseI64ArrayAttr({start + features}),
                             nullptr)
          .getResult();
    };
    return {slice(0), slice(features)};
  }

  /// A [features] constant.
  Value splat(double value) {
    return ConstantOp::create(
        b, featureType,
        DenseElementsAttr::get(
            featureType,
            b.getFloatAttr(featureType.getElementType(), value)));
  }

  /// [features] → x's shape, repeated over the statistics dimensions.
  Value broadcast(Value perFeature) {
    return BroadcastOp::create(b, x.getType(), perFeature,
                               b.getDenseI64ArrayAttr({featureDim}));
  }

  /// The whole batch's mean and 1/sqrt(biased variance + epsilon).
  std::pair<Value, Value> statistics(double epsilon) {
    Value localSum = sumOverBatch(x);
    Value localSumSquares = sumOverBatch(MulOp::create(b, x, x));
    auto [sum, sumSquares] = allReducePair(localSum, localSumSquares);
    Value inverseCount = splat(1.0 / static_cast<double>(count));
    Value mean = MulOp::create(b, sum, inverseCount);
    Value variance =
        SubOp::create(b, MulOp::create(b, sumSquares, inverseCount),
                      MulOp::create(b, mean, mean));
    Value inverseStd =
        RsqrtOp::create(b, AddOp::create(b, variance, splat(epsilon)));
    return {mean, inverseStd};
  }

  ImplicitLocOpBuilder &b;
  Value x;
  int64_t featureDim, count;
  FlatSymbolRefAttr grid;
  ArrayRef<int16_t> axes;
  SmallVector<int64_t> statDims;
  RankedTensorType featureType;
};

/// The statistics loops of a batch norm of rank `rank` (every loop but the
/// features, which are loop `featureDim`), and the elements per feature of
/// the whole batch.
SmallVector<int64_t> statisticsLoops(RankedTensorType global,
                                     int64_t featureDim, int64_t &count) {
  SmallVector<int64_t> loops;
  count = 1;
  for (int64_t dim = 0; dim < global.getRank(); ++dim)
    if (dim != featureDim) {
      loops.push_back(dim);
      count *= global.getDimSize(dim);
    }
  return loops;
}

} // namespace

// y = x · (γ·invstd) + (β − mean·γ·invstd), with the whole batch's statistics.
LogicalResult BatchNormOp::adjustLocalPartition(Operation *localOp,
                                                LocalSplit &split,
                                                OpBuilder &builder) {
  int64_t featureDim = getFeatureDim(), count = 0;
  SmallVector<int64_t> loops =
      statisticsLoops(getType(), featureDim, count);
  SmallVector<int16_t> axes = split.axesOf(loops);
  if (axes.empty() || split.localBatchStatistics)
    return success();
  auto local = cast<BatchNormOp>(localOp);
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPoint(local);
  ImplicitLocOpBuilder b(getLoc(), builder);
  SyncBatchNormBuilder sync(b, local.getInput(), featureDim, count,
                            split.grid, axes);
  auto [mean, inverseStd] = sync.statistics(getEpsilon().convertToDouble());
  Value scale = MulOp::create(b, local.getGamma(), inverseStd);
  Value shift = SubOp::create(b, local.getBeta(), MulOp::create(b, mean, scale));
  Value y = AddOp::create(
      b, MulOp::create(b, local.getInput(), sync.broadcast(scale)),
      sync.broadcast(shift));
  split.replacements = {y};
  return success();
}

// dbeta = Σdy, dgamma = Σdy·x̂ over the whole batch (one all-reduce), then
// dx = γ·invstd · (dy − dbeta/M − x̂·dgamma/M).
LogicalResult BatchNormGradOp::adjustLocalPartition(Operation *localOp,
                                                    LocalSplit &split,
                                                    OpBuilder &builder) {
  int64_t featureDim = getFeatureDim(), count = 0;
  SmallVector<int64_t> loops =
      statisticsLoops(getInput().getType(), featureDim, count);
  SmallVector<int16_t> axes = split.axesOf(loops);
  if (axes.empty() || split.localBatchStatistics)
    return success();
  auto local = cast<BatchNormGradOp>(localOp);
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPoint(local);
  ImplicitLocOpBuilder b(getLoc(), builder);
  Value x = local.getInput(), dy = local.getDy();
  SyncBatchNormBuilder sync(b, x, featureDim, count, split.grid, axes);
  auto [mean, inverseStd] = sync.statistics(getEpsilon().convertToDouble());
  Value normalized = MulOp::create(
      b, SubOp::create(b, x, sync.broadcast(mean)), sync.broadcast(inverseStd));
  Value localDbeta = sync.sumOverBatch(dy);
  Value localDgamma = sync.sumOverBatch(MulOp::create(b, dy, normalized));
  auto [dbeta, dgamma] = sync.allReducePair(localDbeta, localDgamma);
  Value inverseCount = sync.splat(1.0 / static_cast<double>(count));
  Value centered = SubOp::create(
      b, SubOp::create(b, dy,
                       sync.broadcast(MulOp::create(b, dbeta, inverseCount))),
      MulOp::create(b, normalized,
                    sync.broadcast(MulOp::create(b, dgamma, inverseCount))));
  Value dx = MulOp::create(
      b, sync.broadcast(MulOp::create(b, local.getGamma(), inverseStd)),
      centered);
  split.replacements = {dx, dgamma, dbeta};
  split.resolvedLoops = loops;
  return success();
}
