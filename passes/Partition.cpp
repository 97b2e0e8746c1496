//===- Partition.cpp - One rank's program: local shapes and collectives ---===//
//
// Walks every function in program order with, for each value, its local
// value on this rank and its state: the mesh axes splitting each dimension
// and the axes over which it is still a partial sum (a contraction or
// reduction split across ranks). An op gets its operands in the sharding
// its loop sharding asks for: the partial sum is completed first, by a
// reduce-scatter where the consumer splits a dimension over those axes and
// an all-reduce otherwise; then all-to-alls move axes between dimensions,
// all-gathers drop axes and local slices add them. Linear ops (additions,
// reshapes, one side of a matmul: PartialSumOpInterface) pass partial sums
// through, so the collective waits until a consumer needs the full value.
//
//===----------------------------------------------------------------------===//

#include "dialect/NN/NNDialect.h"
#include "dialect/NN/NNInterfaces.h"
#include "dialect/NN/NNOps.h"
#include "passes/GradientBuckets.h"
#include "passes/Passes.h"
#include "passes/RowContractions.h"
#include "passes/Sharding.h"

#include "mlir/Dialect/Shard/Interfaces/ShardingInterface.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/SetVector.h"

namespace tessel {
#define GEN_PASS_DEF_PARTITIONPASS
#include "passes/Passes.h.inc"
} // namespace tessel

using namespace mlir;
using namespace tessel;

namespace {

/// A value on this rank: its local value, its split dimensions and the
/// axes over which it is a partial result of `kind`.
struct LocalValue {
  Value local;
  DimSharding sharding;
  MeshAxes partial;
  shard::ReductionKind kind = shard::ReductionKind::Sum;
};

bool isAscending(ArrayRef<int16_t> axes) {
  return llvm::is_sorted(axes) &&
         std::adjacent_find(axes.begin(), axes.end()) == axes.end();
}

class Partitioner {
public:
  Partitioner(MLIRContext *ctx, const Mesh &mesh, bool localBatchStatistics)
      : mesh(mesh), localBatchStatistics(localBatchStatistics), builder(ctx) {}

  LogicalResult partitionFunction(func::FuncOp func);

private:
  const Mesh &mesh;
  // Batch norm over a split batch keeps per-rank statistics.
  bool localBatchStatistics;
  OpBuilder builder;
  DenseMap<Value, LocalValue> values;
  // Reshards already emitted, per global value: a second consumer asking
  // for the same sharding reuses the first one's collectives.
  DenseMap<Value, SmallVector<std::pair<DimSharding, Value>>> reshards;
  DenseSet<Operation *> partitioned;

  FailureOr<DimSharding> readSharding(Operation *where, Attribute attr,
                                      Type type);
  LocalValue &lookup(Value global) { return values[global]; }

  /// The local value of `global` split as `target`, no partial sum left.
  Value reshard(Location loc, Value global, const DimSharding &target,
                bool keepPartial = false);
  Value completePartial(Location loc, LocalValue &state,
                        const DimSharding &target);

  Value allReduce(Location loc, Value input, ArrayRef<int16_t> axes,
                  shard::ReductionKind kind);
  Value reduceScatter(Location loc, Value input, ArrayRef<int16_t> axes,
                      int64_t dim, shard::ReductionKind kind);
  Value allGather(Location loc, Value input, int16_t axis, int64_t dim);
  Value allSlice(Location loc, Value input, int16_t axis, int64_t dim);
  Value allToAll(Location loc, Value input, int16_t axis, int64_t splitDim,
                 int64_t concatDim);

  LogicalResult partitionRuleOp(Operation *op);
  DimSharding keepPartialSumsWhole(Operation *op,
                                   nn::PartialSumOpInterface linear,
                                   const DimSharding &loopSharding,
                                   ArrayRef<AffineMap> maps,
                                   ArrayRef<bool> partialOperands);
  LogicalResult partitionSumSquares(nn::SumSquaresOp op);
  LogicalResult partitionRepeat(nn::RepeatOp repeat);
  LogicalResult partitionReturn(func::ReturnOp ret, func::FuncOp func);
};

FailureOr<DimSharding> Partitioner::readSharding(Operation *where,
                                                 Attribute attr, Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  int64_t rank = tensor ? tensor.getRank() : 0;
  if (!attr)
    return DimSharding(rank);
  std::string error;
  std::optional<DimSharding> sharding = shardingFromAttr(attr, mesh, error);
  if (!sharding)
    return where->emitOpError() << error;
  if (static_cast<int64_t>(sharding->size()) != rank)
    return where->emitOpError()
           << "has a sharding of " << sharding->size()
           << " dimensions for a value of rank " << rank;
  for (auto [dim, axes] : llvm::enumerate(*sharding))
    if (!axes.empty() && tensor.getDimSize(dim) % mesh.groupSize(axes) != 0)
      return where->emitOpError()
             << "dimension " << dim << " of size " << tensor.getDimSize(dim)
             << " does not split evenly over mesh axes '"
             << mesh.axesText(axes) << "' of size " << mesh.groupSize(axes);
  return *sharding;
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

static RankedTensorType withDim(Value value, int64_t dim, int64_t size) {
  auto type = cast<RankedTensorType>(value.getType());
  SmallVector<int64_t> shape(type.getShape());
  shape[dim] = size;
  return RankedTensorType::get(shape, type.getElementType());
}

static int64_t dimSize(Value value, int64_t dim) {
  return cast<RankedTensorType>(value.getType()).getDimSize(dim);
}

Value Partitioner::allReduce(Location loc, Value input, ArrayRef<int16_t> axes,
                             shard::ReductionKind kind) {
  if (mesh.groupSize(axes) == 1)
    return input;
  return shard::AllReduceOp::create(
      builder, loc, input.getType(),
      FlatSymbolRefAttr::get(builder.getContext(), kMeshName),
      builder.getDenseI16ArrayAttr(axes), input,
      shard::ReductionKindAttr::get(builder.getContext(), kind));
}

Value Partitioner::reduceScatter(Location loc, Value input,
                                 ArrayRef<int16_t> axes, int64_t dim,
                                 shard::ReductionKind kind) {
  int64_t group = mesh.groupSize(axes);
  if (group == 1)
    return input;
  return shard::ReduceScatterOp::create(
      builder, loc, withDim(input, dim, dimSize(input, dim) / group), kMeshName,
      axes, input, kind, APInt(64, dim));
}

Value Partitioner::allGather(Location loc, Value input, int16_t axis,
                             int64_t dim) {
  int64_t group = mesh.shape[axis];
  if (group == 1)
    return input;
  return shard::AllGatherOp::create(
      builder, loc, withDim(input, dim, dimSize(input, dim) * group), kMeshName,
      ArrayRef<int16_t>{axis}, input, APInt(64, dim));
}

Value Partitioner::allSlice(Location loc, Value input, int16_t axis,
                            int64_t dim) {
  int64_t group = mesh.shape[axis];
  if (group == 1)
    return input;
  return shard::AllSliceOp::create(builder, loc,
                                   withDim(input, dim, dimSize(input, dim) / group),
                                   input, kMeshName, ArrayRef<int16_t>{axis},
                                   dim);
}

Value Partitioner::allToAll(Location loc, Value input, int16_t axis,
                            int64_t splitDim, int64_t concatDim) {
  int64_t group = mesh.shape[axis];
  if (group == 1)
    return input;
  RankedTensorType type =
      withDim(input, splitDim, dimSize(input, splitDim) / group);
  SmallVector<int64_t> shape(type.getShape());
  shape[concatDim] *= group;
  type = RankedTensorType::get(shape, type.getElementType());
  return shard::AllToAllOp::create(
      builder, loc, type,
      FlatSymbolRefAttr::get(builder.getContext(), kMeshName),
      builder.getDenseI16ArrayAttr({axis}), input,
      builder.getIndexAttr(splitDim), builder.getIndexAttr(concatDim));
}

//===----------------------------------------------------------------------===//
// Resharding
//===----------------------------------------------------------------------===//

// A partial sum becomes whole: a reduce-scatter along a dimension the
// target splits over partial axes (each rank receives only its block), an
// all-reduce over the rest.
Value Partitioner::completePartial(Location loc, LocalValue &state,
                                   const DimSharding &target) {
  Value current = state.local;
  if (state.partial.empty())
    return current;
  bool scatterable = state.kind == shard::ReductionKind::Sum ||
                     state.kind == shard::ReductionKind::Average ||
                     state.kind == shard::ReductionKind::Max;
  for (auto [dim, axes] : llvm::enumerate(target)) {
    if (!scatterable || axes.empty() || !state.sharding[dim].empty())
      continue;
    if (!llvm::all_of(axes, [&](int16_t a) {
          return llvm::is_contained(state.partial, a);
        }))
      continue;
    if (isAscending(axes)) {
      current = reduceScatter(loc, current, axes, dim, state.kind);
    } else {
      for (int16_t axis : axes)
        current = reduceScatter(loc, current, {axis}, dim, state.kind);
    }
    state.sharding[dim] = axes;
    // Captured by name: clang before 16 (the fuzz build) cannot capture a
    // structured binding.
    llvm::erase_if(state.partial, [&axes = axes](int16_t a) {
      return llvm::is_contained(axes, a);
    });
  }
  if (!state.partial.empty()) {
    MeshAxes axes = state.partial;
    llvm::sort(axes);
    current = allReduce(loc, current, axes, state.kind);
    state.partial.clear();
  }
  state.local = current;
  return current;
}

static bool isPrefix(ArrayRef<int16_t> prefix, ArrayRef<int16_t> of) {
  return prefix.size() <= of.size() && of.take_front(prefix.size()) == prefix;
}

Value Partitioner::reshard(Location loc, Value global,
                           const DimSharding &target, bool keepPartial) {
  // A completed partial sum replaces the partial one for every later
  // consumer: the collective runs once.
  if (!keepPartial && !lookup(global).partial.empty()) {
    completePartial(loc, lookup(global), target);
    reshards.erase(global);
  }
  LocalValue state = lookup(global);
  if (state.sharding == target)
    return state.local;
  bool cacheable = state.partial.empty();
  if (cacheable)
    for (auto &[sharding, local] : reshards[global])
      if (sharding == target)
        return local;
  Value current = state.local;
  DimSharding now = state.sharding;

  // All-to-all: an axis that is innermost on one dimension and belongs
  // next on another moves there without gathering.
  for (bool moved = true; moved;) {
    moved = false;
    for (unsigned a = 0; a < now.size() && !moved; ++a) {
      if (now[a].empty() || isPrefix(now[a], target[a]))
        continue;
      int16_t axis = now[a].back();
      for (unsigned b = 0; b < now.size(); ++b) {
        if (b == a)
          continue;
        MeshAxes grown = now[b];
        grown.push_back(axis);
        if (!isPrefix(grown, target[b]))
          continue;
        current = allToAll(loc, current, axis, b, a);
        now[a].pop_back();
        now[b] = grown;
        moved = true;
        break;
      }
    }
  }
  // All-gather the axes a dimension must lose, innermost first.
  for (unsigned d = 0; d < now.size(); ++d)
    while (!isPrefix(now[d], target[d])) {
      current = allGather(loc, current, now[d].back(), d);
      now[d].pop_back();
    }
  // Slice locally along the axes a dimension must gain, outermost first.
  for (unsigned d = 0; d < now.size(); ++d)
    for (size_t k = now[d].size(); k < target[d].size(); ++k) {
      current = allSlice(loc, current, target[d][k], d);
      now[d].push_back(target[d][k]);
    }
  if (cacheable)
    reshards[global].push_back({target, current});
  return current;
}

//===----------------------------------------------------------------------===//
// Ops
//===----------------------------------------------------------------------===//

// A split loop must be the outermost loop of every dimension it indexes,
// and its blocks must hold whole groups of a group index; a loop that must
// stay whole must not be split.
static LogicalResult checkSplitLoops(Operation *op, const Mesh &mesh,
                                     const DimSharding &loopSharding,
                                     ArrayRef<AffineMap> maps) {
  SmallVector<int64_t> extents = loopExtents(op, maps);
  SmallVector<int64_t> unsplittable;
  if (auto constraints = dyn_cast<nn::ShardingConstraintOpInterface>(op))
    unsplittable = constraints.getUnsplittableLoops();
  for (auto [loop, axes] : llvm::enumerate(loopSharding)) {
    if (axes.empty())
      continue;
    if (llvm::is_contained(unsplittable, static_cast<int64_t>(loop)))
      return op->emitOpError() << "loop " << loop
                               << " must stay whole but is split over '"
                               << mesh.axesText(axes) << "'";
    const int64_t blocks = mesh.groupSize(axes);
    for (AffineMap map : maps)
      for (AffineExpr expr : map.getResults()) {
        if (!llvm::is_contained(loopsOf(expr), loop))
          continue;
        if (leadingLoop(expr) != std::optional<unsigned>(loop)) {
          std::string text;
          llvm::raw_string_ostream os(text);
          expr.print(os);
          return op->emitOpError()
                 << "loop " << loop << " is split but indexes a dimension ("
                 << text << ") as an inner loop";
        }
        if (!splitsIntoBlocks(expr, extents[loop], blocks))
          return op->emitOpError()
                 << "loop " << loop << " of " << extents[loop]
                 << " is split over '" << mesh.axesText(axes) << "' in "
                 << blocks << " blocks, which cut its groups of "
                 << groupOfIndex(expr)
                 << " (grouped-query attention splits its query heads only "
                    "where its key/value heads split alike)";
      }
  }
  return success();
}

// A linear op combining several partial sums over the same axes (the
// partial input gradients of q, k and v added up under sequence
// parallelism) whose loops split over those very axes would complete each
// operand by a reduce-scatter of its own. Dropping those axes from its
// loops lets it add the partial sums as they are, whole along the split
// dimension, and its consumer completes one sum: one reduce-scatter instead
// of one per operand. Only when no operand then needs more than a local
// slice, and the axes dropped are the innermost of each loop.
DimSharding Partitioner::keepPartialSumsWhole(
    Operation *op, nn::PartialSumOpInterface linear,
    const DimSharding &loopSharding, ArrayRef<AffineMap> maps,
    ArrayRef<bool> partialOperands) {
  if (llvm::count(partialOperands, true) < 2 ||
      !linear.passesPartialSums(partialOperands))
    return loopSharding;
  MeshAxes partial;
  for (auto [index, operand] : llvm::enumerate(op->getOperands())) {
    if (!partialOperands[index])
      continue;
    const LocalValue &state = lookup(operand);
    MeshAxes sorted = state.partial;
    llvm::sort(sorted);
    if (state.kind != shard::ReductionKind::Sum ||
        (!partial.empty() && sorted != partial))
      return loopSharding;
    partial = sorted;
  }
  DimSharding relaxed = loopSharding;
  for (MeshAxes &axes : relaxed) {
    while (!axes.empty() && llvm::is_contained(partial, axes.back()))
      axes.pop_back();
    if (llvm::any_of(axes, [&](int16_t a) {
          return llvm::is_contained(partial, a);
        }))
      return loopSharding;
  }
  if (relaxed == loopSharding)
    return loopSharding;
  for (auto [index, operand] : llvm::enumerate(op->getOperands())) {
    DimSharding target = shardingOfValue(maps[index], relaxed);
    const DimSharding &now = lookup(operand).sharding;
    for (auto [have, want] : llvm::zip(now, target))
      if (!isPrefix(have, want))
        return loopSharding;
  }
  return relaxed;
}

LogicalResult Partitioner::partitionRuleOp(Operation *op) {
  auto rule = cast<shard::ShardingInterface>(op);
  auto loopAttr = op->getAttrOfType<ArrayAttr>(kLoopShardingAttr);
  SmallVector<AffineMap> maps = rule.getIndexingMaps();
  SmallVector<utils::IteratorType> iterators = rule.getLoopIteratorTypes();
  DimSharding loopSharding(iterators.size());
  if (loopAttr) {
    std::string error;
    std::optional<DimSharding> parsed = shardingFromAttr(loopAttr, mesh, error);
    if (!parsed || parsed->size() != iterators.size())
      return op->emitOpError()
             << "has a malformed nn.loop_sharding"
             << (parsed ? "" : ": " + error);
    loopSharding = *parsed;
  }
  if (auto sumSquares = dyn_cast<nn::SumSquaresOp>(op))
    return partitionSumSquares(sumSquares);

  Location loc = op->getLoc();
  unsigned numOperands = op->getNumOperands();
  if (maps.size() != numOperands + op->getNumResults())
    return op->emitOpError() << "has a sharding rule with " << maps.size()
                             << " maps for "
                             << numOperands + op->getNumResults()
                             << " operands and results";

  if (failed(checkSplitLoops(op, mesh, loopSharding, maps)))
    return failure();
  SmallVector<bool> partialOperands;
  for (Value operand : op->getOperands())
    partialOperands.push_back(!lookup(operand).partial.empty());
  auto linear = dyn_cast<nn::PartialSumOpInterface>(op);
  if (linear)
    loopSharding = keepPartialSumsWhole(op, linear, loopSharding, maps,
                                        partialOperands);
  SmallVector<DimSharding> operandTargets;
  for (unsigned index = 0; index < numOperands; ++index)
    operandTargets.push_back(shardingOfValue(maps[index], loopSharding));

  // Partial operands pass through a linear op, all over the same axes, and
  // only if no loop of the op is split over one of them: the ranks of a
  // partial group must compute the same block from the same operands, so
  // that their local results add up to the whole result's block. A loop
  // split over a partial axis gives each rank of the group another block:
  // a partial operand sliced over it (a reduce-scatter completes it
  // instead), or the other factor of a product split over it (a head split
  // over the vocabulary after a vocabulary-parallel embedding: rank r's
  // addend times block r of the head is no addend of the logits). It also
  // keeps a value's partial axes apart from the axes splitting it, which
  // completing a partial sum relies on. Anything else completes them.
  bool passThrough = linear && llvm::is_contained(partialOperands, true) &&
                     linear.passesPartialSums(partialOperands);
  MeshAxes splitAxes = usedAxes(loopSharding);
  MeshAxes passedPartial;
  for (auto [index, operand] : llvm::enumerate(op->getOperands())) {
    if (!passThrough || !partialOperands[index])
      continue;
    const LocalValue &state = lookup(operand);
    MeshAxes sorted = state.partial;
    llvm::sort(sorted);
    passThrough =
        state.kind == shard::ReductionKind::Sum &&
        (passedPartial.empty() || sorted == passedPartial) &&
        llvm::none_of(splitAxes, [&](int16_t axis) {
          return llvm::is_contained(sorted, axis);
        });
    passedPartial = sorted;
  }
  if (!passThrough)
    passedPartial.clear();

  builder.setInsertionPoint(op);
  IRMapping mapping;
  for (auto [index, operand] : llvm::enumerate(op->getOperands())) {
    if (!lookup(operand).local)
      return op->emitOpError() << "operand #" << index
                               << " has no partitioned value";
    mapping.map(operand,
                reshard(loc, operand, operandTargets[index],
                        /*keepPartial=*/passThrough && partialOperands[index]));
  }
  // Destination-style operands (accumulators, optimizer state) are updated
  // in place: their local value must be the function's argument itself.
  if (auto dps = dyn_cast<DestinationStyleOpInterface>(op))
    for (OpOperand &init : dps.getDpsInitsMutable())
      if (mapping.lookup(init.get()) != lookup(init.get()).local)
        return op->emitOpError()
               << "updates operand #" << init.getOperandNumber()
               << " in place, but its sharding differs from the op's";

  Operation *local = builder.clone(*op, mapping);
  local->removeAttr(kLoopShardingAttr);
  for (auto [index, result] : llvm::enumerate(local->getResults())) {
    DimSharding sharding =
        shardingOfValue(maps[numOperands + index], loopSharding);
    result.setType(localType(cast<RankedTensorType>(op->getResult(index).getType()),
                             sharding, mesh));
  }
  nn::LocalSplit split;
  split.grid = FlatSymbolRefAttr::get(builder.getContext(), kMeshName);
  for (const MeshAxes &axes : loopSharding)
    split.loopAxes.emplace_back(axes.begin(), axes.end());
  split.localBatchStatistics = localBatchStatistics;
  if (auto constraints = dyn_cast<nn::ShardingConstraintOpInterface>(op))
    if (failed(constraints.adjustLocalPartition(local, split, builder)))
      return failure();
  SmallVector<Value> localResults(local->getResults());
  if (!split.replacements.empty()) {
    if (split.replacements.size() != localResults.size())
      return op->emitOpError() << "built " << split.replacements.size()
                               << " local results for "
                               << localResults.size();
    local->erase();
    localResults = split.replacements;
  } else if (failed(verify(local))) {
    return op->emitOpError() << "has no valid local form on this mesh";
  }

  // Results: split where their dimensions are split loops, partial over the
  // split reduction loops they do not index.
  SmallVector<shard::ReductionKind> kinds = rule.getReductionLoopIteratorKinds();
  SmallVector<shard::ReductionKind> loopKinds(iterators.size(),
                                              shard::ReductionKind::Sum);
  for (unsigned loop = 0, r = 0; loop < iterators.size(); ++loop)
    if (iterators[loop] == utils::IteratorType::reduction && r < kinds.size())
      loopKinds[loop] = kinds[r++];
  for (auto [index, result] : llvm::enumerate(op->getResults())) {
    AffineMap map = maps[numOperands + index];
    LocalValue state;
    state.local = localResults[index];
    state.sharding = shardingOfValue(map, loopSharding);
    state.partial = passedPartial;
    SmallVector<unsigned> indexed;
    for (AffineExpr expr : map.getResults())
      llvm::append_range(indexed, loopsOf(expr));
    std::optional<shard::ReductionKind> kind;
    for (auto [loop, axes] : llvm::enumerate(loopSharding)) {
      if (axes.empty() || iterators[loop] != utils::IteratorType::reduction ||
          llvm::is_contained(indexed, static_cast<unsigned>(loop)) ||
          llvm::is_contained(split.resolvedLoops, static_cast<int64_t>(loop)))
        continue;
      if (kind && *kind != loopKinds[loop])
        return op->emitOpError() << "splits reduction loops of different "
                                    "kinds; their partial results cannot be "
                                    "combined";
      kind = loopKinds[loop];
      llvm::append_range(state.partial, axes);
    }
    if (kind) {
      if (!passedPartial.empty() && *kind != shard::ReductionKind::Sum)
        return op->emitOpError() << "mixes partial sums with a split "
                                    "reduction of another kind";
      if (*kind == shard::ReductionKind::Generic)
        return op->emitOpError() << "splits a reduction loop whose partial "
                                    "results no collective can combine";
      state.kind = *kind;
    }
    values[result] = state;
  }
  return success();
}

// The squares of tensors split over different axes: one local sum per
// group of equally split tensors, each completed over its own axes (a
// replicated tensor must not be counted once per rank).
LogicalResult Partitioner::partitionSumSquares(nn::SumSquaresOp op) {
  Location loc = op.getLoc();
  builder.setInsertionPoint(op);
  llvm::MapVector<MeshAxes, SmallVector<Value>> groups;
  for (Value input : op->getOperands()) {
    DimSharding sharding = lookup(input).sharding;
    Value local = reshard(loc, input, sharding);
    MeshAxes axes = usedAxes(sharding);
    llvm::sort(axes);
    groups[axes].push_back(local);
  }
  Value total;
  for (auto &[axes, inputs] : groups) {
    Operation *sum = builder.clone(*op);
    sum->setOperands(inputs);
    sum->removeAttr(kLoopShardingAttr);
    Value partial = allReduce(loc, sum->getResult(0), axes,
                              shard::ReductionKind::Sum);
    total = total ? nn::AddOp::create(builder, loc, total, partial).getResult()
                  : partial;
  }
  LocalValue state;
  state.local = total;
  state.sharding = DimSharding(0);
  values[op.getResult()] = state;
  return success();
}

LogicalResult Partitioner::partitionRepeat(nn::RepeatOp repeat) {
  func::FuncOp layer = repeat.getLayerFunction();
  if (!layer)
    return repeat.emitOpError() << "has no layer function";
  if (failed(partitionFunction(layer)))
    return failure();
  Location loc = repeat.getLoc();
  builder.setInsertionPoint(repeat);
  unsigned numCarried = repeat.getCarried().size();
  SmallVector<Value> carried, params;
  for (auto [i, operand] : llvm::enumerate(repeat.getCarried())) {
    FailureOr<DimSharding> target = readSharding(
        layer, layer.getArgAttr(i, kShardingAttr), operand.getType());
    if (failed(target))
      return failure();
    carried.push_back(reshard(loc, operand, *target));
  }
  for (auto [j, operand] : llvm::enumerate(repeat.getParams())) {
    unsigned arg = numCarried + j;
    auto sliceType = RankedTensorType::get(
        cast<RankedTensorType>(operand.getType()).getShape().drop_front(),
        cast<RankedTensorType>(operand.getType()).getElementType());
    FailureOr<DimSharding> target =
        readSharding(layer, layer.getArgAttr(arg, kShardingAttr), sliceType);
    if (failed(target))
      return failure();
    target->insert(target->begin(), MeshAxes{});
    params.push_back(reshard(loc, operand, *target));
  }
  SmallVector<Type> resultTypes;
  ArrayRef<Type> layerResults = layer.getFunctionType().getResults();
  for (auto [index, type] : llvm::enumerate(layerResults)) {
    if (index < numCarried) {
      resultTypes.push_back(type);
      continue;
    }
    auto slice = cast<RankedTensorType>(type);
    SmallVector<int64_t> shape{repeat.getNumLayers()};
    llvm::append_range(shape, slice.getShape());
    resultTypes.push_back(RankedTensorType::get(shape, slice.getElementType()));
  }
  auto local = nn::RepeatOp::create(builder, loc, resultTypes,
                                    repeat.getLayerAttr(), carried, params,
                                    repeat.getReverseAttr());
  for (auto [index, result] : llvm::enumerate(repeat.getResults())) {
    auto sliceType = index < numCarried
                         ? cast<RankedTensorType>(result.getType())
                         : RankedTensorType::get(
                               cast<RankedTensorType>(result.getType())
                                   .getShape()
                                   .drop_front(),
                               cast<RankedTensorType>(result.getType())
                                   .getElementType());
    FailureOr<DimSharding> sharding = readSharding(
        layer, layer.getResultAttr(index, kShardingAttr), sliceType);
    if (failed(sharding))
      return failure();
    if (index >= numCarried)
      sharding->insert(sharding->begin(), MeshAxes{});
    LocalValue state;
    state.local = local.getResult(index);
    state.sharding = *sharding;
    values[result] = state;
  }
  return success();
}

LogicalResult Partitioner::partitionReturn(func::ReturnOp ret,
                                           func::FuncOp func) {
  builder.setInsertionPoint(ret);
  SmallVector<Value> operands;
  for (auto [index, operand] : llvm::enumerate(ret.getOperands())) {
    FailureOr<DimSharding> target = readSharding(
        func, func.getResultAttr(index, kShardingAttr), operand.getType());
    if (failed(target))
      return failure();
    operands.push_back(reshard(ret.getLoc(), operand, *target));
  }
  func::ReturnOp::create(builder, ret.getLoc(), operands);
  return success();
}

LogicalResult Partitioner::partitionFunction(func::FuncOp func) {
  if (!partitioned.insert(func).second || func.isExternal())
    return success();
  // The global arguments stay as they are until the end: sharding rules
  // and local adjustments read global types. Each gets a local twin.
  Block &body = func.getBody().front();
  unsigned numArgs = body.getNumArguments();
  SmallVector<Type> argTypes;
  for (unsigned i = 0; i < numArgs; ++i) {
    BlockArgument arg = body.getArgument(i);
    FailureOr<DimSharding> sharding = readSharding(
        func, func.getArgAttr(i, kShardingAttr), arg.getType());
    if (failed(sharding))
      return failure();
    Type type = arg.getType();
    if (auto tensor = dyn_cast<RankedTensorType>(type))
      type = localType(tensor, *sharding, mesh);
    BlockArgument local = body.addArgument(type, arg.getLoc());
    values[arg] = LocalValue{local, *sharding, {}, shard::ReductionKind::Sum};
    argTypes.push_back(type);
  }
  SmallVector<Operation *> ops;
  for (Operation &op : body)
    ops.push_back(&op);
  for (Operation *op : ops) {
    LogicalResult result = success();
    if (auto repeat = dyn_cast<nn::RepeatOp>(op))
      result = partitionRepeat(repeat);
    else if (auto ret = dyn_cast<func::ReturnOp>(op))
      result = partitionReturn(ret, func);
    else if (isa<shard::ShardingInterface>(op))
      result = partitionRuleOp(op);
    else
      result = op->emitOpError() << "has no sharding rule to partition by";
    if (failed(result))
      return failure();
  }
  // The global ops are dead now: erase them users first.
  for (Operation *op : llvm::reverse(ops)) {
    op->dropAllUses();
    op->erase();
  }
  for (unsigned i = 0; i < numArgs; ++i)
    body.getArgument(i).dropAllUses();
  body.eraseArguments(0, numArgs);
  SmallVector<Type> resultTypes(
      body.getTerminator()->getOperandTypes().begin(),
      body.getTerminator()->getOperandTypes().end());
  func.setType(FunctionType::get(func.getContext(), argTypes, resultTypes));
  return success();
}

struct PartitionPass : tessel::impl::PartitionPassBase<PartitionPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (failed(nn::RepeatOp::refuseOuts(module, "tessel-partition")))
      return signalPassFailure();
    FailureOr<std::optional<Mesh>> mesh = meshFromModule(module);
    if (failed(mesh))
      return signalPassFailure();
    if (!*mesh) {
      module.emitError() << "tessel-partition needs a mesh: run "
                            "tessel-propagate-sharding first";
      return signalPassFailure();
    }
    if (bucketMb < 0) {
      module.emitError() << "bucket-mb must be 0 or more, not " << bucketMb;
      return signalPassFailure();
    }
    Partitioner partitioner(module.getContext(), **mesh, localBatchnorm);
    for (auto func : llvm::to_vector(module.getOps<func::FuncOp>()))
      if (!func.isPrivate() && failed(partitioner.partitionFunction(func)))
        return signalPassFailure();
    // A rank's rows are contiguous: a summed batch is one GEMM of them, in
    // the flattened form the epilogue fusions know.
    flattenSummedBatches(module);
    // Buckets of 0 bytes hold one gradient each: one all-reduce per
    // gradient, still issued as soon as it is complete.
    bucketGradientAllReduces(
        module, static_cast<int64_t>(bucketMb * 1024.0 * 1024.0));
  }
};

} // namespace
