//===- VocabParallel.cpp - vocabulary-parallel embedding and cross-entropy ===//
//
// The partitioner's strategies for the ops whose class or vocabulary loop
// is split across ranks (Megatron's vocabulary parallelism):
//
// - nn.embedding, nn.embedding_grad, nn.label_logit, nn.sub_label keep
//   their local computation on the rank's block of rows or classes: the
//   local op records the grid axes whose group index selects the block
//   (`block_axes`) and the runtime kernel zeroes or skips what falls
//   outside. The embedding's output is then a partial sum over those axes,
//   which the partitioner completes (an all-reduce, or a reduce-scatter
//   under sequence parallelism).
// - nn.cross_entropy over split classes (Megatron's fused vocab-parallel
//   loss): nn.vocab_loss_stats reads the rank's block once for each
//   position's max, Σ e^(y − max), label logit and Σ y (y the logits,
//   soft-capped inside the kernel by a logit_softcap), each completed by
//   one all-reduce of one value a position (the sum of exponentials
//   rescaled to the whole row's max first; Σ y only for a label
//   smoothing); the loss is log(Σexp) + max − logit, plus ε·(logit − Σy/V)
//   smoothed. Its gradient recomputes the statistics (the forward's, merged
//   by cse in the training step) and nn.vocab_loss_grad writes the block's
//   g · (softmax − target) in one pass, the cap's slope and the smoothed
//   target inside: no exponentials of the block are stored. For 16-bit
//   logits the statistics, their all-reduces and the per-position loss
//   are f32 (Megatron computes the loss of bf16 logits in f32), the block
//   read and written in 16 bits; a 16-bit loss is rounded once, from the
//   reduced f32 loss.
// - a split `mean` cross-entropy gradient scales its dloss by the local
//   share of the positions.
//
// The local programs run after autodiff: their ops need no derivative.
//
//===----------------------------------------------------------------------===//

#include "dialect/NN/NNOps.h"
#include "dialect/NN/NNOpsUtils.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/IR/TypeUtilities.h"

using namespace mlir;
using namespace tessel::nn;

namespace {

/// Marks `local` as the rank's block of its vocabulary (or class) loop.
LogicalResult markVocabularyBlock(Operation *global, Operation *local,
                                  const LocalSplit &split, int64_t loop) {
  return tessel::nn::detail::markRankBlock(global, local, split, loop,
                                           "vocabulary");
}

/// The position dimensions of logits of rank `rank` (all but the last).
SmallVector<int64_t> positionDims(int64_t rank) {
  return llvm::to_vector(llvm::seq<int64_t>(0, rank - 1));
}

/// The whole rows' statistics of logits split over class blocks.
struct VocabRowStats {
  Value max, sumExp, labelLogit, logitSum;
};

/// Builds the per-position statistics of logits split over class blocks.
class VocabParallelBuilder {
public:
  /// Statistics in f32 for 16-bit logits (whatever the loss's type, as
  /// Megatron computes the loss of bf16 logits in f32), else in the
  /// logits' type.
  VocabParallelBuilder(ImplicitLocOpBuilder &b, Value logits,
                       const LocalSplit &split, ArrayRef<int16_t> classAxes)
      : b(b), logits(logits), split(split), classAxes(classAxes) {
    auto type = cast<RankedTensorType>(logits.getType());
    rowsType = RankedTensorType::get(type.getShape().drop_back(),
                                     tessel::nn::detail::isHalfFloatTensor(type)
                                         ? b.getF32Type()
                                         : type.getElementType());
  }

  /// `value` in the statistics' element type (a 16-bit loss's or dloss's
  /// values widened), or itself.
  Value inStatsType(Value value) {
    auto type = cast<RankedTensorType>(value.getType());
    if (type.getElementType() == rowsType.getElementType())
      return value;
    return CastOp::create(b, type.clone(rowsType.getElementType()), value);
  }

  Value allReduce(Value value, shard::ReductionKind kind) {
    SmallVector<int16_t> axes(classAxes);
    llvm::sort(axes);
    return shard::AllReduceOp::create(
        b, value.getType(), split.grid, b.getDenseI16ArrayAttr(axes), value,
        shard::ReductionKindAttr::get(b.getContext(), kind));
  }

  /// A constant of every position.
  Value perRow(double value) {
    return tessel::nn::detail::broadcastScalar(b, b.getLoc(), rowsType, value);
  }

  /// The whole rows' statistics from the block's (nn.vocab_loss_stats,
  /// `global`'s block axes and cap), each completed over the class axes;
  /// the logits' sum only for a label smoothing (else null).
  FailureOr<VocabRowStats> rowStats(Operation *global, Value labels,
                                    FloatAttr softcap, bool logitSum,
                                    int64_t classLoop) {
    auto stats = VocabLossStatsOp::create(b, rowsType, rowsType, rowsType,
                                          rowsType, logits, labels,
                                          /*block_axes=*/nullptr, softcap);
    if (failed(markVocabularyBlock(global, stats, split, classLoop)))
      return failure();
    // The sums that need nothing else first, so that they overlap the
    // maximum's all-reduce and the rescaling.
    VocabRowStats whole;
    whole.labelLogit =
        allReduce(stats.getLabelLogit(), shard::ReductionKind::Sum);
    if (logitSum)
      whole.logitSum =
          allReduce(stats.getLogitSum(), shard::ReductionKind::Sum);
    whole.max = allReduce(stats.getMax(), shard::ReductionKind::Max);
    // Σ e^(y − M) = Σ over the blocks of sum_exp · e^(max − M).
    Value rescale =
        ExpOp::create(b, SubOp::create(b, stats.getMax(), whole.max));
    whole.sumExp = allReduce(MulOp::create(b, stats.getSumExp(), rescale),
                             shard::ReductionKind::Sum);
    return whole;
  }

  ImplicitLocOpBuilder &b;
  Value logits;
  const LocalSplit &split;
  ArrayRef<int16_t> classAxes;
  RankedTensorType rowsType;
};

} // namespace

LogicalResult EmbeddingOp::adjustLocalPartition(Operation *local,
                                                LocalSplit &split,
                                                OpBuilder &) {
  return markVocabularyBlock(*this, local, split, getIds().getType().getRank() + 1);
}

LogicalResult EmbeddingGradOp::adjustLocalPartition(Operation *local,
                                                    LocalSplit &split,
                                                    OpBuilder &) {
  return markVocabularyBlock(*this, local, split, getIds().getType().getRank() + 1);
}

LogicalResult LabelLogitOp::adjustLocalPartition(Operation *local,
                                                 LocalSplit &split,
                                                 OpBuilder &) {
  return markVocabularyBlock(*this, local, split, getLabels().getType().getRank());
}

LogicalResult SubLabelOp::adjustLocalPartition(Operation *local,
                                               LocalSplit &split,
                                               OpBuilder &) {
  return markVocabularyBlock(*this, local, split, getLabels().getType().getRank());
}

// loss = log(Σexp) + max − logit[label] per position (smoothed: plus
// ε·(logit − Σy / V)), each statistic one all-reduce over the class axes,
// then the op's reduction over the local positions (the partitioner
// completes a split mean or sum).
LogicalResult CrossEntropyOp::adjustLocalPartition(Operation *localOp,
                                                   LocalSplit &split,
                                                   OpBuilder &builder) {
  if (failed(refuseIgnoreIndex("tessel-partition")))
    return failure();
  int64_t classLoop = getLabels().getType().getRank();
  if (classLoop >= static_cast<int64_t>(split.loopAxes.size()) ||
      split.loopAxes[classLoop].empty())
    return success();
  auto local = cast<CrossEntropyOp>(localOp);
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPoint(local);
  ImplicitLocOpBuilder b(getLoc(), builder);
  VocabParallelBuilder vocab(b, local.getLogits(), split,
                             split.loopAxes[classLoop]);
  std::optional<APFloat> smoothing = getLabelSmoothing();
  FailureOr<VocabRowStats> stats =
      vocab.rowStats(*this, local.getLabels(), getLogitSoftcapAttr(),
                     smoothing.has_value(), classLoop);
  if (failed(stats))
    return failure();
  Value perPosition = SubOp::create(
      b, AddOp::create(b, LogOp::create(b, stats->sumExp), stats->max),
      stats->labelLogit);
  if (smoothing) {
    // + ε·(logit − Σy / V): the plain loss's smoothed target.
    double epsilon = smoothing->convertToDouble();
    int64_t classes = getLogits().getType().getShape().back();
    Value meanLogit = MulOp::create(
        b, stats->logitSum, vocab.perRow(1.0 / static_cast<double>(classes)));
    perPosition = AddOp::create(
        b, perPosition,
        MulOp::create(b, SubOp::create(b, stats->labelLogit, meanLogit),
                      vocab.perRow(epsilon)));
  }
  // Reduced in the statistics' type, then rounded once to a 16-bit loss's.
  Value loss = perPosition;
  auto dims = b.getDenseI64ArrayAttr(positionDims(classLoop + 1));
  RankedTensorType wide =
      local.getType().clone(vocab.rowsType.getElementType());
  if (getReduction() == LossReduction::mean)
    loss = ReduceMeanOp::create(b, wide, perPosition, dims);
  else if (getReduction() == LossReduction::sum)
    loss = ReduceSumOp::create(b, wide, perPosition, dims);
  if (wide != local.getType())
    loss = CastOp::create(b, local.getType(), loss);
  split.replacements = {loss};
  split.resolvedLoops = {classLoop};
  return success();
}

// dlogits = g · (exp(y − max) / Σexp − target) on the block (one kernel),
// with g = dloss / positions (mean over all positions, not the local ones),
// dloss (sum) or dloss[i] (none). Without a class split, a split mean only
// scales dloss by the local share of the positions.
LogicalResult CrossEntropyGradOp::adjustLocalPartition(Operation *localOp,
                                                       LocalSplit &split,
                                                       OpBuilder &builder) {
  auto local = dyn_cast<CrossEntropyGradOp>(localOp);
  if (!local)
    return success();
  int64_t classLoop = getLogits().getType().getRank() - 1;
  bool classesSplit = classLoop < static_cast<int64_t>(split.loopAxes.size()) &&
                      !split.loopAxes[classLoop].empty();
  int64_t globalRows = nn::detail::numElements(getLabels().getType());
  int64_t localRows = nn::detail::numElements(local.getLabels().getType());
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPoint(local);
  ImplicitLocOpBuilder b(getLoc(), builder);
  auto scaleBy = [&](Value value, double factor) -> Value {
    auto type = cast<RankedTensorType>(value.getType());
    Value constant = ConstantOp::create(
        b, type,
        DenseElementsAttr::get(
            type, b.getFloatAttr(type.getElementType(), factor)));
    return MulOp::create(b, value, constant);
  };
  if (!classesSplit) {
    if (getReduction() == LossReduction::mean && localRows != globalRows)
      local.getDlossMutable().assign(
          scaleBy(local.getDloss(), static_cast<double>(localRows) /
                                        static_cast<double>(globalRows)));
    return success();
  }
  VocabParallelBuilder vocab(b, local.getLogits(), split,
                             split.loopAxes[classLoop]);
  Value rowGrad = vocab.inStatsType(local.getDloss());
  if (getReduction() == LossReduction::mean)
    rowGrad = scaleBy(rowGrad, 1.0 / static_cast<double>(globalRows));
  if (getReduction() != LossReduction::none)
    rowGrad = BroadcastOp::create(b, vocab.rowsType, rowGrad,
                                  b.getDenseI64ArrayAttr({}));
  FailureOr<VocabRowStats> stats =
      vocab.rowStats(*this, local.getLabels(), getLogitSoftcapAttr(),
                     /*logitSum=*/false, classLoop);
  if (failed(stats))
    return failure();
  auto result = VocabLossGradOp::create(
      b, local.getType(), local.getLogits(), local.getLabels(), stats->max,
      stats->sumExp, rowGrad, /*in_place=*/nullptr, /*block_axes=*/nullptr,
      getLabelSmoothingAttr(), getLogitSoftcapAttr());
  if (failed(markVocabularyBlock(*this, result, split, classLoop)))
    return failure();
  split.replacements = {result};
  return success();
}

//===----------------------------------------------------------------------===//
// VocabLossStatsOp and VocabLossGradOp: the fused vocabulary-parallel loss
//===----------------------------------------------------------------------===//

using PerPositionValue = std::pair<StringRef, Value>;

/// Fails on `op` unless `labels` index the positions of `logits` and each
/// of `perPosition` is one value a position of the statistics' type (the
/// first's element type): the logits' or, for 16-bit logits, f32.
static LogicalResult verifyPerPosition(Operation *op, Value logits,
                                       Value labels,
                                       ArrayRef<PerPositionValue> perPosition) {
  FailureOr<RankedTensorType> rows = tessel::nn::detail::inferCrossEntropyType(
      op->getLoc(), cast<RankedTensorType>(logits.getType()),
      cast<RankedTensorType>(labels.getType()), /*keepPositions=*/true);
  if (failed(rows))
    return failure();
  Type stats = getElementTypeOrSelf(perPosition.front().second.getType());
  RankedTensorType expected = rows->clone(stats);
  if (!tessel::nn::detail::isInferredOrF32(*rows, expected))
    return op->emitOpError()
           << "statistics must be of the logits' type "
           << rows->getElementType()
           << (tessel::nn::detail::isHalfFloatTensor(*rows) ? " or f32" : "")
           << ", got " << stats;
  for (auto [what, value] : perPosition)
    if (value.getType() != expected)
      return op->emitOpError()
             << what << " must be " << expected << " (one per position), got "
             << value.getType();
  return success();
}

LogicalResult VocabLossStatsOp::verify() {
  if (failed(verifyPerPosition(*this, getLogits(), getLabels(),
                               {{"max", getMax()},
                                {"sum_exp", getSumExp()},
                                {"label_logit", getLabelLogit()},
                                {"logit_sum", getLogitSum()}})))
    return failure();
  return nn::detail::verifyLossOptions(*this, std::nullopt, getLogitSoftcap());
}

// Per logit: the max, the subtraction, exp and sum of the exponentials,
// and the logits' sum (5); a cap 3 more.
int64_t VocabLossStatsOp::getFlops() {
  int64_t perLogit =
      5 + nn::detail::lossOptionFlops(
              /*smoothing=*/false, getLogitSoftcap().has_value());
  return nn::detail::satMul(perLogit,
                            nn::detail::numElements(getLogits().getType()));
}

LogicalResult VocabLossGradOp::verify() {
  if (failed(verifyPerPosition(*this, getLogits(), getLabels(),
                               {{"max", getMax()},
                                {"sum_exp", getSumExp()},
                                {"row_grad", getRowGrad()}})))
    return failure();
  if (getDlogits().getType() != getLogits().getType())
    return emitOpError() << "dlogits must have the logits' type "
                         << getLogits().getType() << ", got "
                         << getDlogits().getType();
  return nn::detail::verifyLossOptions(*this, getLabelSmoothing(),
                                       getLogitSoftcap());
}

// Per logit: subtract the max, exp, scale by g / Σ (3); the options' own
// (smoothing's ε·g/V, the cap again with its slope); the label's one per
// position.
int64_t VocabLossGradOp::getFlops() {
  using nn::detail::satAdd, nn::detail::satMul;
  int64_t perLogit =
      3 + nn::detail::lossOptionFlops(getLabelSmoothing().has_value(),
                                      getLogitSoftcap().has_value());
  return satAdd(
      satMul(perLogit, nn::detail::numElements(getLogits().getType())),
      nn::detail::numElements(getLabels().getType()));
}
