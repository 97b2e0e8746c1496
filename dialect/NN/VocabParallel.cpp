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
// - nn.cross_entropy over split classes: per position, the row maximum,
//   the sum of exponentials and the label's logit of the rank's block, each
//   completed by one all-reduce of one value per position; the loss is
//   log(Σexp) + max − logit. Its gradient recomputes the same two
//   statistics (the forward's all-reduces, merged by cse in the training
//   step) and is g · softmax − onehot(labels) · g on the block.
// - a split `mean` cross-entropy gradient scales its dloss by the local
//   share of the positions.
// - a loss with a logit_softcap c caps its block of logits as ops,
//   c·tanh(z / c), before the statistics, and its gradient multiplies the
//   block's by the cap's slope 1 − (y / c)² (the kernels' fused cap needs
//   whole rows).
// - a loss with a label_smoothing ε adds ε·(logit − Σz / V) per position,
//   Σz the block's sum completed by one more all-reduce, and its gradient
//   subtracts (1 − ε)·g at the label and ε·g / V everywhere.
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

/// Marks `local` as the rank's block of the (vocabulary or class) loop
/// `loop` when the split puts it over grid axes. The block index is the
/// group index of the axes in order, which must be ascending (row-major,
/// as the runtime numbers a group).
LogicalResult markVocabularyBlock(Operation *global, Operation *local,
                           const LocalSplit &split, int64_t loop) {
  if (loop >= static_cast<int64_t>(split.loopAxes.size()) ||
      split.loopAxes[loop].empty())
    return success();
  ArrayRef<int16_t> axes = split.loopAxes[loop];
  if (global->hasAttr("block_axes"))
    return global->emitOpError()
           << "is already a block of a larger vocabulary; it cannot be split "
              "again";
  for (size_t i = 1; i < axes.size(); ++i)
    if (axes[i] <= axes[i - 1])
      return global->emitOpError()
             << "splits its vocabulary over grid axes out of order; a block "
                "is numbered by axes in ascending order";
  local->setAttr("block_axes",
                 DenseI16ArrayAttr::get(global->getContext(), axes));
  return success();
}

/// A vocabulary-parallel loss computes in the logits' type: an f32 loss of
/// 16-bit logits (the fused cast of mixed precision) is refused there.
LogicalResult refuseWidenedLoss(Operation *op, Type logits, Type loss) {
  if (getElementTypeOrSelf(logits) == getElementTypeOrSelf(loss))
    return success();
  return op->emitOpError()
         << "has an f32 loss of " << getElementTypeOrSelf(logits)
         << " logits, which a vocabulary-parallel split does not compute; "
            "cast the logits to f32 before the loss";
}

/// The position dimensions of logits of rank `rank` (all but the last).
SmallVector<int64_t> positionDims(int64_t rank) {
  return llvm::to_vector(llvm::seq<int64_t>(0, rank - 1));
}

/// Builds the per-position statistics of logits split over class blocks.
class VocabParallelBuilder {
public:
  VocabParallelBuilder(ImplicitLocOpBuilder &b, Value logits,
                       const LocalSplit &split, ArrayRef<int16_t> classAxes)
      : b(b), logits(logits), split(split), classAxes(classAxes) {
    auto type = cast<RankedTensorType>(logits.getType());
    classDim = type.getRank() - 1;
    rowsType = RankedTensorType::get(type.getShape().drop_back(),
                                     type.getElementType());
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

  /// [positions] → the logits' shape, repeated over the classes.
  Value perClass(Value rows) {
    return BroadcastOp::create(
        b, logits.getType(), rows,
        b.getDenseI64ArrayAttr(positionDims(classDim + 1)));
  }

  /// The whole rows' maximum and exp(logits − maximum) on the block.
  std::pair<Value, Value> shiftedExp() {
    Value localMax = ReduceMaxOp::create(
        b, rowsType, logits, b.getDenseI64ArrayAttr({classDim}));
    Value max = allReduce(localMax, shard::ReductionKind::Max);
    Value exps = ExpOp::create(b, SubOp::create(b, logits, perClass(max)));
    return {max, exps};
  }

  /// Σ exp over the whole rows.
  Value sumOfExp(Value exps) {
    Value local = ReduceSumOp::create(b, rowsType, exps,
                                      b.getDenseI64ArrayAttr({classDim}));
    return allReduce(local, shard::ReductionKind::Sum);
  }

  ImplicitLocOpBuilder &b;
  Value logits;
  const LocalSplit &split;
  ArrayRef<int16_t> classAxes;
  int64_t classDim;
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

// loss = log(Σexp) + max − logit[label] per position, each statistic one
// all-reduce over the class axes, then the op's reduction over the local
// positions (the partitioner completes a split mean or sum).
LogicalResult CrossEntropyOp::adjustLocalPartition(Operation *localOp,
                                                   LocalSplit &split,
                                                   OpBuilder &builder) {
  if (failed(refuseIgnoreIndex("tessel-partition")))
    return failure();
  int64_t classLoop = getLabels().getType().getRank();
  if (classLoop >= static_cast<int64_t>(split.loopAxes.size()) ||
      split.loopAxes[classLoop].empty())
    return success();
  if (failed(refuseWidenedLoss(*this, getLogits().getType(), getType())))
    return failure();
  auto local = cast<CrossEntropyOp>(localOp);
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPoint(local);
  ImplicitLocOpBuilder b(getLoc(), builder);
  Value logits = local.getLogits();
  if (std::optional<APFloat> cap = getLogitSoftcap())
    logits =
        nn::detail::softcapOps(b, b.getLoc(), logits, cap->convertToDouble())
            .capped;
  VocabParallelBuilder vocab(b, logits, split, split.loopAxes[classLoop]);
  auto [max, exps] = vocab.shiftedExp();
  Value sum = vocab.sumOfExp(exps);
  auto pick = LabelLogitOp::create(b, vocab.rowsType, logits, local.getLabels(),
                                   nullptr);
  if (failed(markVocabularyBlock(*this, pick, split, classLoop)))
    return failure();
  Value logit = vocab.allReduce(pick, shard::ReductionKind::Sum);
  Value perPosition =
      SubOp::create(b, AddOp::create(b, LogOp::create(b, sum), max), logit);
  if (std::optional<APFloat> smoothing = getLabelSmoothing()) {
    // + ε·(logit − Σz / V): the plain loss's smoothed target.
    double epsilon = smoothing->convertToDouble();
    int64_t classes = getLogits().getType().getShape().back();
    Value blockSum = ReduceSumOp::create(b, vocab.rowsType, logits,
                                         b.getDenseI64ArrayAttr({classLoop}));
    Value meanLogit =
        MulOp::create(b, vocab.allReduce(blockSum, shard::ReductionKind::Sum),
                      vocab.perRow(1.0 / static_cast<double>(classes)));
    perPosition =
        AddOp::create(b, perPosition,
                      MulOp::create(b, SubOp::create(b, logit, meanLogit),
                                    vocab.perRow(epsilon)));
  }
  Value loss = perPosition;
  auto dims = b.getDenseI64ArrayAttr(positionDims(classLoop + 1));
  if (getReduction() == LossReduction::mean)
    loss = ReduceMeanOp::create(b, local.getType(), perPosition, dims);
  else if (getReduction() == LossReduction::sum)
    loss = ReduceSumOp::create(b, local.getType(), perPosition, dims);
  split.replacements = {loss};
  split.resolvedLoops = {classLoop};
  return success();
}

// dlogits = g · exp(logits − max) / Σexp − onehot(labels) · g on the block,
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
  if (failed(refuseWidenedLoss(*this, getLogits().getType(),
                               getDloss().getType())))
    return failure();
  // A capped loss's block of logits, and its tanh for the cap's slope.
  Value logits = local.getLogits(), capTanh;
  if (std::optional<APFloat> cap = getLogitSoftcap()) {
    nn::detail::Softcapped capped =
        nn::detail::softcapOps(b, b.getLoc(), logits, cap->convertToDouble());
    logits = capped.capped;
    capTanh = capped.tanh;
  }
  VocabParallelBuilder vocab(b, logits, split, split.loopAxes[classLoop]);
  Value rowGrad = local.getDloss();
  if (getReduction() == LossReduction::mean)
    rowGrad = scaleBy(rowGrad, 1.0 / static_cast<double>(globalRows));
  if (getReduction() != LossReduction::none)
    rowGrad = BroadcastOp::create(b, vocab.rowsType, rowGrad,
                                  b.getDenseI64ArrayAttr({}));
  auto [max, exps] = vocab.shiftedExp();
  Value sum = vocab.sumOfExp(exps);
  Value softmaxGrad =
      MulOp::create(b, exps, vocab.perClass(DivOp::create(b, rowGrad, sum)));
  Value labelGrad = rowGrad;
  if (std::optional<APFloat> smoothing = getLabelSmoothing()) {
    // The smoothed target: (1 − ε)·g at the label, ε·g / V everywhere.
    double epsilon = smoothing->convertToDouble();
    int64_t classes = getLogits().getType().getShape().back();
    labelGrad = MulOp::create(b, rowGrad, vocab.perRow(1.0 - epsilon));
    Value everyGrad = MulOp::create(
        b, rowGrad, vocab.perRow(epsilon / static_cast<double>(classes)));
    softmaxGrad = SubOp::create(b, softmaxGrad, vocab.perClass(everyGrad));
  }
  auto dlogits = SubLabelOp::create(b, local.getType(), softmaxGrad,
                                    local.getLabels(), labelGrad, nullptr);
  if (failed(markVocabularyBlock(*this, dlogits, split, classLoop)))
    return failure();
  Value result = dlogits;
  if (capTanh) { // through the cap: times 1 − tanh²
    Value one = nn::detail::broadcastScalar(
        b, b.getLoc(), cast<RankedTensorType>(logits.getType()), 1.0);
    result = MulOp::create(
        b, dlogits, SubOp::create(b, one, MulOp::create(b, capTanh, capTanh)));
  }
  split.replacements = {result};
  return success();
}
