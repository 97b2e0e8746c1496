//===- NNOps.cpp - op registration, shared helpers, nn.constant -----------===//
//
// Each family of ops (elementwise, reductions, shape, contractions, norms,
// losses, repeat) keeps its verifier, shape rule, folds, cost and sharding rule
// in a file of its own; this file holds what they share.
//
//===----------------------------------------------------------------------===//

#include "dialect/NN/NNOps.h"
#include "dialect/NN/NNOpsUtils.h"

#include "mlir/IR/Builders.h"
#include "mlir/Dialect/Shard/Interfaces/ShardingInterfaceImpl.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/Verifier.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/SmallSet.h"

using namespace mlir;
using namespace tessel;
using namespace tessel::nn;

#define GET_OP_CLASSES
#include "dialect/NN/NNOps.cpp.inc"

void NNDialect::registerOps() {
  addOperations<
#define GET_OP_LIST
#include "dialect/NN/NNOps.cpp.inc"
      >();
}

namespace tessel::nn::detail {

SmallVector<utils::IteratorType> parallelLoops(int64_t rank) {
  return SmallVector<utils::IteratorType>(rank, utils::IteratorType::parallel);
}

SmallVector<AffineMap> identityMaps(Operation *op) {
  auto type = cast<RankedTensorType>(op->getResult(0).getType());
  return SmallVector<AffineMap>(
      op->getNumOperands() + op->getNumResults(),
      AffineMap::getMultiDimIdentityMap(type.getRank(), op->getContext()));
}

std::string shapeString(ArrayRef<int64_t> shape) {
  if (shape.empty())
    return "scalar";
  std::string text;
  llvm::raw_string_ostream os(text);
  llvm::interleave(shape, os, "x");
  return text;
}

bool isHalfFloatTensor(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  return tensor &&
         (tensor.getElementType().isF16() || tensor.getElementType().isBF16());
}

bool isInferredOrF32(Type inferred, Type actual) {
  return actual == inferred ||
         (isHalfFloatTensor(inferred) &&
          actual == cast<RankedTensorType>(inferred).clone(
                        Float32Type::get(inferred.getContext())));
}

StringRef orF32Note(RankedTensorType inferred) {
  Type f32 = inferred.clone(Float32Type::get(inferred.getContext()));
  return f32 != inferred && isInferredOrF32(inferred, f32) ? " (or f32)" : "";
}

bool areInferredOrAllF32(TypeRange inferred, TypeRange actual, unsigned kept) {
  if (inferred.size() != actual.size() || inferred.size() < kept ||
      inferred.take_front(kept) != actual.take_front(kept))
    return false;
  // All widened or none: one dtype per call.
  bool widened = kept < actual.size() && actual[kept] != inferred[kept];
  for (auto [from, to] :
       llvm::zip(inferred.drop_front(kept), actual.drop_front(kept)))
    if (!isInferredOrF32(from, to) || (to != from) != widened)
      return false;
  return true;
}

LogicalResult verifyDimList(std::optional<Location> loc, ArrayRef<int64_t> dims,
                            int64_t rank, StringRef what) {
  llvm::SmallSet<int64_t, 8> seen;
  for (int64_t dim : dims) {
    if (dim < 0 || dim >= rank)
      return inferError(loc, what, " dimension ", dim,
                        " is out of range for rank ", rank);
    if (!seen.insert(dim).second)
      return inferError(loc, what, " dimension ", dim, " is listed twice");
  }
  return success();
}

DenseElementsAttr splatConstantOf(Value value) {
  // A broadcast of a splat is that splat at the broadcast's shape (kept
  // unfolded: BroadcastOp::fold).
  while (auto broadcast = value.getDefiningOp<BroadcastOp>())
    value = broadcast.getInput();
  DenseElementsAttr attr;
  if (!matchPattern(value, m_Constant(&attr)) || !attr.isSplat())
    return {};
  return attr;
}

Value broadcastScalar(OpBuilder &b, Location loc, RankedTensorType type,
                      double value) {
  auto scalar = RankedTensorType::get({}, type.getElementType());
  Value constant = ConstantOp::create(
      b, loc,
      DenseElementsAttr::get(scalar,
                             b.getFloatAttr(type.getElementType(), value)));
  return BroadcastOp::create(b, loc, type, constant,
                             b.getDenseI64ArrayAttr({}));
}

Softcapped softcapOps(OpBuilder &b, Location loc, Value x, double cap) {
  Value c = broadcastScalar(b, loc, cast<RankedTensorType>(x.getType()), cap);
  Value t = TanhOp::create(b, loc, DivOp::create(b, loc, x, c));
  return {t, MulOp::create(b, loc, t, c)};
}

bool isSplatConstant(Value value, double splat) {
  DenseElementsAttr attr = splatConstantOf(value);
  if (!attr)
    return false;
  Type elementType = attr.getElementType();
  if (isa<FloatType>(elementType))
    return attr.getSplatValue<APFloat>().convertToDouble() == splat;
  if (isa<IntegerType>(elementType))
    return static_cast<double>(attr.getSplatValue<APInt>().getSExtValue()) ==
           splat;
  return false;
}

SmallVector<utils::IteratorType> loopsWithReductions(int64_t rank,
                                                     ArrayRef<int64_t> reductions) {
  SmallVector<utils::IteratorType> loops = parallelLoops(rank);
  for (int64_t loop : reductions)
    loops[loop] = utils::IteratorType::reduction;
  return loops;
}

AffineMap projection(int64_t numLoops, ArrayRef<int64_t> loops,
                     MLIRContext *ctx) {
  SmallVector<AffineExpr> results;
  for (int64_t loop : loops)
    results.push_back(getAffineDimExpr(loop, ctx));
  return AffineMap::get(numLoops, 0, results, ctx);
}

LogicalResult markRankBlock(Operation *global, Operation *local,
                            const LocalSplit &split, int64_t loop,
                            StringRef what) {
  if (loop >= static_cast<int64_t>(split.loopAxes.size()) ||
      split.loopAxes[loop].empty())
    return success();
  ArrayRef<int16_t> axes = split.loopAxes[loop];
  if (global->hasAttr("block_axes"))
    return global->emitOpError() << "is already a block of a larger " << what
                                 << "; it cannot be split again";
  for (size_t i = 1; i < axes.size(); ++i)
    if (axes[i] <= axes[i - 1])
      return global->emitOpError()
             << "splits its " << what
             << " over grid axes out of order; a block is numbered by axes in "
                "ascending order";
  local->setAttr("block_axes",
                 DenseI16ArrayAttr::get(global->getContext(), axes));
  return success();
}

LogicalResult partitionLocally(Operation *op, ArrayRef<Value> partitionedOperands,
                               ArrayRef<shard::Sharding> operandShardings,
                               ArrayRef<shard::Sharding> resultShardings,
                               IRMapping &partitionMap,
                               SymbolTableCollection &symbolTable,
                               OpBuilder &builder) {
  auto rule = cast<shard::ShardingInterface>(op);
  SmallVector<utils::IteratorType> loops = rule.getLoopIteratorTypes();
  SmallVector<AffineMap> maps = rule.getIndexingMaps();
  SmallVector<int64_t> unsplittable;
  if (auto constraints = dyn_cast<ShardingConstraintOpInterface>(op))
    unsplittable = constraints.getUnsplittableLoops();
  std::vector<shard::Sharding> shardings(operandShardings.begin(),
                                         operandShardings.end());
  llvm::append_range(shardings, resultShardings);
  for (size_t index = 0; index < shardings.size() && index < maps.size();
       ++index) {
    const shard::Sharding &sharding = shardings[index];
    AffineMap map = maps[index];
    if (!sharding)
      continue;
    for (auto [dim, axes] : llvm::enumerate(sharding.getSplitAxes())) {
      if (axes.empty())
        continue;
      auto loop = dyn_cast<AffineDimExpr>(map.getResult(dim));
      if (!loop)
        return op->emitOpError()
               << "value #" << index << " is split along dimension " << dim
               << ", which is not a single loop of the op's sharding rule; "
                  "upstream shard-partition cannot split it";
      unsigned position = loop.getPosition();
      if (loops[position] == utils::IteratorType::reduction)
        return op->emitOpError()
               << "value #" << index << " splits reduction loop " << position
               << "; upstream shard-partition of nn ops splits parallel loops "
                  "only";
      if (llvm::is_contained(unsplittable, position))
        return op->emitOpError()
               << "value #" << index << " splits loop " << position
               << ", which must stay whole on every rank for this op";
    }
  }
  shard::partitionTriviallyShardableOperation(*op, partitionedOperands,
                                              operandShardings, resultShardings,
                                              partitionMap, symbolTable, builder);
  if (op->getNumResults() == 0)
    return success();
  Operation *local = partitionMap.lookup(op->getResult(0)).getDefiningOp();
  if (!local)
    return success();
  // The op's own local adjustments and strategies (a split mean's divisor,
  // SyncBatchNorm, vocabulary blocks), told which grid axes split each loop.
  if (auto constraints = dyn_cast<ShardingConstraintOpInterface>(op)) {
    LocalSplit split;
    split.loopAxes.resize(loops.size());
    for (size_t index = 0; index < shardings.size() && index < maps.size();
         ++index) {
      const shard::Sharding &sharding = shardings[index];
      if (!sharding)
        continue;
      split.grid = sharding.getGridAttr();
      for (auto [dim, axes] : llvm::enumerate(sharding.getSplitAxes()))
        if (!axes.empty())
          split.loopAxes[cast<AffineDimExpr>(maps[index].getResult(dim))
                             .getPosition()]
              .assign(axes.asArrayRef().begin(), axes.asArrayRef().end());
    }
    if (failed(constraints.adjustLocalPartition(local, split, builder)))
      return failure();
    if (!split.replacements.empty()) {
      for (auto [result, replacement] :
           llvm::zip(op->getResults(), split.replacements))
        partitionMap.map(result, replacement);
      local->erase();
      return success();
    }
  }
  // Attributes that hold global sizes (slice limits, constant values) must
  // still agree with the local shapes.
  return verify(local);
}

} // namespace tessel::nn::detail

Value nn::flattenRows(OpBuilder &b, Location loc, Value value) {
  auto type = cast<RankedTensorType>(value.getType());
  int64_t rows = 1;
  for (int64_t size : type.getShape().drop_back())
    rows *= size;
  return ReshapeOp::create(b, loc,
                           RankedTensorType::get({rows, type.getShape().back()},
                                                 type.getElementType()),
                           value);
}

//===----------------------------------------------------------------------===//
// ConstantOp
//===----------------------------------------------------------------------===//

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

int64_t ConstantOp::getFlops() { return 0; }

SmallVector<utils::IteratorType> ConstantOp::getLoopIteratorTypes() {
  return nn::detail::parallelLoops(getType().getRank());
}

SmallVector<AffineMap> ConstantOp::getIndexingMaps() {
  return nn::detail::identityMaps(*this);
}

SmallVector<ReductionKind> ConstantOp::getReductionLoopIteratorKinds() {
  return {};
}

// A split constant on one rank: a splat is the same value in the local
// shape; any other value is the whole constant sliced locally (no
// communication: every rank holds it).
LogicalResult ConstantOp::adjustLocalPartition(Operation *localOp,
                                               LocalSplit &split,
                                               OpBuilder &builder) {
  auto local = cast<ConstantOp>(localOp);
  auto localType = cast<RankedTensorType>(local.getType());
  if (localType == getType())
    return success();
  if (auto dense = dyn_cast<DenseElementsAttr>(getValue());
      dense && dense.isSplat()) {
    local.setValueAttr(dense.resizeSplat(localType));
    return success();
  }
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPoint(local);
  Value whole = ConstantOp::create(builder, getLoc(), getType(), getValue());
  for (auto [dim, axes] : llvm::enumerate(split.loopAxes)) {
    if (axes.empty())
      continue;
    auto type = cast<RankedTensorType>(whole.getType());
    SmallVector<int64_t> shape(type.getShape());
    shape[dim] = localType.getDimSize(dim);
    whole = shard::AllSliceOp::create(
        builder, getLoc(), RankedTensorType::get(shape, type.getElementType()),
        whole, split.grid.getValue(), axes, static_cast<int64_t>(dim));
  }
  split.replacements = {whole};
  return success();
}
