//===- Zero.cpp - tessel-zero: training state sharded over dp·cp (ZeRO) ---===//
//
// ZeRO (Rajbhandari et al.) and FSDP on a partitioned step. Every trained
// parameter's local block is flattened — a stacked layer parameter [L, ...]
// row by row, so each layer shards on its own — and zero-padded to G·s
// elements, G the group of its data axes and s = ceil(elements / G); rank g
// of the group keeps elements [g·s, (g+1)·s). The padding never changes:
// its gradient is 0, so the optimizer keeps it at 0.
//
// The data axes are dp and cp, as Megatron's distributed optimizer shards
// over its data-parallel group with the context-parallel ranks in it: a
// parameter is whole on every rank of both and its gradient is summed over
// both. A parameter split over cp (a position table under `seq`) shards
// over dp alone.
//
//===----------------------------------------------------------------------===//

#include "passes/GradientBuckets.h"
#include "passes/Passes.h"
#include "passes/Sharding.h"

#include "dialect/NN/NNDialect.h"
#include "dialect/NN/NNOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

namespace tessel {
#define GEN_PASS_DEF_ZEROPASS
#include "passes/Passes.h.inc"
} // namespace tessel

using namespace mlir;
using namespace tessel;

namespace {

constexpr StringLiteral kZeroAttr = nn::NNDialect::kZeroAttrName;
constexpr StringLiteral kZeroStageAttr = nn::NNDialect::kZeroStageAttrName;

/// How one parameter (and its gradient and states) is split.
struct ShardPlan {
  RankedTensorType block; // the rank's block before ZeRO
  int64_t dims = 0;       // leading dimensions kept whole (1: a layer stack)
  int64_t inner = 0;      // elements of one row: block[dims:]
  int64_t chunk = 0;      // s: a rank's elements of one row
  int64_t group = 1;      // G
  SmallVector<int16_t> axes; // the data axes it shards over, in mesh order

  SmallVector<int64_t> prefix() const {
    return SmallVector<int64_t>(block.getShape().take_front(dims));
  }
  RankedTensorType withRow(int64_t row) const {
    SmallVector<int64_t> shape = prefix();
    shape.push_back(row);
    return RankedTensorType::get(shape, block.getElementType());
  }
  RankedTensorType flat() const { return withRow(inner); }
  RankedTensorType padded() const { return withRow(chunk * group); }
  RankedTensorType shard() const { return withRow(chunk); }
  /// The same split of the same shape in another element type (a bf16
  /// gradient reduced before its cast to f32).
  ShardPlan withElement(Type element) const {
    ShardPlan plan = *this;
    plan.block = RankedTensorType::get(block.getShape(), element);
    return plan;
  }
  /// The same split of one row: what a layer function sees of a stack.
  ShardPlan row() const {
    ShardPlan plan = *this;
    plan.block = RankedTensorType::get(block.getShape().drop_front(dims),
                                       block.getElementType());
    plan.dims = 0;
    return plan;
  }
};

class ZeroRewriter {
public:
  ZeroRewriter(ModuleOp module, const Mesh &mesh, ArrayRef<int16_t> dataAxes,
               int64_t stage, bool reshardAfterForward)
      : module(module), builder(module.getContext()), mesh(mesh),
        dataAxes(dataAxes), stage(stage),
        reshardAfterForward(reshardAfterForward) {}

  LogicalResult run();

private:
  // Building blocks, at the builder's insertion point.
  Value flattenPadded(Location loc, Value block, const ShardPlan &plan);
  Value unflatten(Location loc, Value padded, const ShardPlan &plan);
  Value reduceScatter(Location loc, Value padded, const ShardPlan &plan);
  Value allGather(Location loc, Value shard, const ShardPlan &plan);
  Value localChunk(Location loc, Value padded, const ShardPlan &plan);
  Value allReduce(Location loc, Value value, ArrayRef<int16_t> axes);
  /// The full block of a parameter from its chunk.
  Value gather(Location loc, Value shard, const ShardPlan &plan) {
    return unflatten(loc, allGather(loc, shard, plan), plan);
  }
  /// A gradient's chunk, from `value` (the block's gradient: a dp partial
  /// sum when it comes from an all-reduce over dp, else whole).
  Value gradientChunk(Location loc, Value value, const ShardPlan &plan);

  void markArgument(func::FuncOp func, unsigned i, const ShardPlan &plan);
  void retypeArgument(func::FuncOp func, unsigned i, const ShardPlan &plan);
  static void syncFunctionType(func::FuncOp func);
  /// `repeat`'s layer function, cloned first when another op also uses it.
  func::FuncOp ownLayer(nn::RepeatOp repeat);

  LogicalResult planParameters();
  LogicalResult rewriteUpdate();
  void rewriteGradients(func::FuncOp func);
  /// `results`: the stacked results of `repeat` (a reversed layer
  /// derivative) that are gradients, with their parameters' names.
  void rewriteLayerGradients(nn::RepeatOp repeat,
                             ArrayRef<std::pair<unsigned, StringRef>> results);
  void shardParameters(func::FuncOp func, bool backward);
  void gatherInLayers(Value stack, const ShardPlan &plan);

  /// The axes the chunks of a clipping norm's sum of squares are sharded
  /// over (their plans' axes, which one sum shares), or failure.
  FailureOr<SmallVector<int16_t>> chunkAxes(nn::SumSquaresOp squares);

  ModuleOp module;
  OpBuilder builder;
  const Mesh &mesh;
  SmallVector<int16_t> dataAxes;
  int64_t stage;
  bool reshardAfterForward;
  func::FuncOp model, backward, update;
  llvm::StringMap<ShardPlan> plans; // by parameter name
  /// Stage 1: the parameters whose accumulator holds this rank's partial
  /// sum (the backward no longer reduces it over dp).
  llvm::StringSet<> partialGrads;
};

//===----------------------------------------------------------------------===//
// Building blocks
//===----------------------------------------------------------------------===//

// Each building block splits `plan`'s shape in the element type of the
// value it is given: an f32 gradient (or master state) beside a bf16
// parameter.

/// `plan` in the element type of `value`.
static ShardPlan typedLike(const ShardPlan &plan, Value value) {
  return plan.withElement(
      cast<RankedTensorType>(value.getType()).getElementType());
}

Value ZeroRewriter::flattenPadded(Location loc, Value block,
                                  const ShardPlan &planIn) {
  ShardPlan plan = typedLike(planIn, block);
  Value flat = block;
  if (block.getType() != plan.flat())
    flat = nn::ReshapeOp::create(builder, loc, plan.flat(), block);
  int64_t pad = plan.chunk * plan.group - plan.inner;
  if (pad == 0)
    return flat;
  RankedTensorType zerosType = plan.withRow(pad);
  Value zeros = nn::ConstantOp::create(
      builder, loc,
      DenseElementsAttr::get(
          zerosType, builder.getFloatAttr(zerosType.getElementType(), 0.0)));
  return nn::ConcatOp::create(builder, loc, plan.padded(),
                              ValueRange{flat, zeros}, plan.dims);
}

Value ZeroRewriter::unflatten(Location loc, Value padded,
                              const ShardPlan &planIn) {
  ShardPlan plan = typedLike(planIn, padded);
  Value flat = padded;
  if (plan.chunk * plan.group != plan.inner) {
    SmallVector<int64_t> start(plan.dims + 1, 0);
    SmallVector<int64_t> limit = plan.prefix();
    limit.push_back(plan.inner);
    flat = nn::SliceOp::create(builder, loc, plan.flat(), padded,
                               builder.getDenseI64ArrayAttr(start),
                               builder.getDenseI64ArrayAttr(limit), nullptr);
  }
  if (plan.flat() == plan.block)
    return flat;
  return nn::ReshapeOp::create(builder, loc, plan.block, flat);
}

Value ZeroRewriter::reduceScatter(Location loc, Value padded,
                                  const ShardPlan &plan) {
  return shard::ReduceScatterOp::create(
      builder, loc, typedLike(plan, padded).shard(), kMeshName, plan.axes,
      padded, shard::ReductionKind::Sum, APInt(64, plan.dims));
}

Value ZeroRewriter::allGather(Location loc, Value shard,
                              const ShardPlan &plan) {
  return shard::AllGatherOp::create(builder, loc,
                                    typedLike(plan, shard).padded(), kMeshName,
                                    plan.axes, shard, APInt(64, plan.dims));
}

Value ZeroRewriter::localChunk(Location loc, Value padded,
                               const ShardPlan &plan) {
  return shard::AllSliceOp::create(builder, loc,
                                   typedLike(plan, padded).shard(), padded,
                                   kMeshName, plan.axes, plan.dims);
}

Value ZeroRewriter::allReduce(Location loc, Value value,
                              ArrayRef<int16_t> axes) {
  if (axes.empty())
    return value;
  return shard::AllReduceOp::create(
      builder, loc, value.getType(),
      FlatSymbolRefAttr::get(builder.getContext(), kMeshName),
      builder.getDenseI16ArrayAttr(axes), value,
      shard::ReductionKindAttr::get(builder.getContext(),
                                    shard::ReductionKind::Sum));
}

/// The sum over every one of `axes` that `value` comes from, looking
/// through a widening cast (under bf16 the gradient is reduced in bf16,
/// then cast to the f32 accumulator): the all-reduce, or null.
static shard::AllReduceOp dataParallelSum(Value value, ArrayRef<int16_t> axes,
                                          nn::CastOp &widen) {
  widen = value.getDefiningOp<nn::CastOp>();
  auto reduce = (widen ? widen.getInput() : value)
                    .getDefiningOp<shard::AllReduceOp>();
  if (!reduce || reduce.getReduction() != shard::ReductionKind::Sum ||
      llvm::any_of(axes, [&](int16_t axis) {
        return !llvm::is_contained(reduce.getGridAxes(), axis);
      }))
    return nullptr;
  return reduce;
}

/// The axes of `reduce` but `axes`.
static SmallVector<int16_t> otherAxes(shard::AllReduceOp reduce,
                                      ArrayRef<int16_t> axes) {
  SmallVector<int16_t> others;
  for (int16_t a : reduce.getGridAxes())
    if (!llvm::is_contained(axes, a))
      others.push_back(a);
  return others;
}

Value ZeroRewriter::gradientChunk(Location loc, Value value,
                                  const ShardPlan &plan) {
  nn::CastOp widen;
  if (shard::AllReduceOp reduce = dataParallelSum(value, plan.axes, widen)) {
    // Sum over the data axes by the reduce-scatter, then over the other
    // axes on the chunk only; in the reduction's own type.
    Value chunk = reduceScatter(
        loc, flattenPadded(loc, reduce.getInput(), plan), plan);
    chunk = allReduce(loc, chunk, otherAxes(reduce, plan.axes));
    if (widen)
      chunk = nn::CastOp::create(builder, loc,
                                 typedLike(plan, widen).shard(), chunk);
    return chunk;
  }
  // Already whole on every rank of the data axes: each keeps its chunk.
  return localChunk(loc, flattenPadded(loc, value, plan), plan);
}

//===----------------------------------------------------------------------===//
// Signatures
//===----------------------------------------------------------------------===//

void ZeroRewriter::markArgument(func::FuncOp func, unsigned i,
                                const ShardPlan &plan) {
  SmallVector<NamedAttribute> entries = {
      builder.getNamedAttr("block",
                           builder.getDenseI64ArrayAttr(plan.block.getShape())),
      builder.getNamedAttr("dims", builder.getI64IntegerAttr(plan.dims))};
  // The axes where they are not dp alone (the attribute's default).
  SmallVector<StringRef> names = llvm::map_to_vector(
      plan.axes, [&](int16_t axis) -> StringRef { return mesh.axes[axis]; });
  if (names != ArrayRef<StringRef>{kDataAxisName})
    entries.push_back(
        builder.getNamedAttr("axes", builder.getStrArrayAttr(names)));
  func.setArgAttr(i, kZeroAttr, builder.getDictionaryAttr(entries));
}

void ZeroRewriter::retypeArgument(func::FuncOp func, unsigned i,
                                  const ShardPlan &plan) {
  // In its own element type: a master copy and its states are f32 beside
  // a bf16 parameter.
  BlockArgument arg = func.getArgument(i);
  arg.setType(
      plan.withElement(cast<RankedTensorType>(arg.getType()).getElementType())
          .shard());
  markArgument(func, i, plan);
}

void ZeroRewriter::syncFunctionType(func::FuncOp func) {
  Block &body = func.getBody().front();
  func.setType(FunctionType::get(
      func.getContext(), body.getArgumentTypes(),
      body.getTerminator()->getOperandTypes()));
}

func::FuncOp ZeroRewriter::ownLayer(nn::RepeatOp repeat) {
  func::FuncOp layer = repeat.getLayerFunction();
  std::optional<SymbolTable::UseRange> uses =
      SymbolTable::getSymbolUses(layer, module);
  if (uses && llvm::hasSingleElement(*uses))
    return layer;
  func::FuncOp clone = layer.clone();
  clone.setSymName((layer.getSymName() + "_zero").str());
  SymbolTable(module).insert(clone, std::next(Block::iterator(layer)));
  repeat->setAttr("layer", FlatSymbolRefAttr::get(clone.getSymNameAttr()));
  return clone;
}

//===----------------------------------------------------------------------===//
// Plans
//===----------------------------------------------------------------------===//

/// A stacked layer parameter: every use feeds an nn.repeat's parameters.
static bool feedsOnlyRepeats(Value param) {
  return !param.use_empty() &&
         llvm::all_of(param.getUses(), [](OpOperand &use) {
           auto repeat = dyn_cast<nn::RepeatOp>(use.getOwner());
           return repeat && !llvm::is_contained(repeat.getCarried(), use.get());
         });
}

LogicalResult ZeroRewriter::planParameters() {
  for (auto step : update.getBody().front().getOps<nn::OptimizerStepOp>()) {
    auto param = dyn_cast<BlockArgument>(step.getParam());
    auto name = param ? update.getArgAttrOfType<StringAttr>(
                            param.getArgNumber(), nn::NNDialect::kParamAttrName)
                      : StringAttr();
    if (!name)
      return step.emitOpError()
             << "updates a value that is not a parameter of '"
             << update.getSymName() << "'; tessel-zero needs the update of "
             << "tessel-autodiff";
    ShardPlan plan;
    plan.block = cast<RankedTensorType>(param.getType());
    // The data axes that do not split the parameter already.
    MeshAxes split;
    if (Attribute sharding =
            update.getArgAttr(param.getArgNumber(), kShardingAttr)) {
      std::string error;
      if (std::optional<DimSharding> dims =
              shardingFromAttr(sharding, mesh, error))
        split = usedAxes(*dims);
    }
    for (int16_t axis : dataAxes)
      if (!llvm::is_contained(split, axis)) {
        plan.axes.push_back(axis);
        plan.group *= mesh.shape[axis];
      }
    // Split over every data axis already: nothing left to shard.
    if (plan.group == 1)
      continue;
    // A layer stack shards per layer: each layer gathers only its own.
    for (unsigned i = 0, e = backward.getNumArguments(); i < e; ++i)
      if (backward.getArgAttr(i, nn::NNDialect::kParamAttrName) ==
          static_cast<Attribute>(name))
        plan.dims = plan.block.getRank() >= 2 &&
                            feedsOnlyRepeats(backward.getArgument(i))
                        ? 1
                        : 0;
    plan.inner = 1;
    for (int64_t size : plan.block.getShape().drop_front(plan.dims))
      plan.inner *= size;
    plan.chunk = (plan.inner + plan.group - 1) / plan.group;
    plans[name.getValue()] = plan;
  }
  return success();
}

//===----------------------------------------------------------------------===//
// The update
//===----------------------------------------------------------------------===//

LogicalResult ZeroRewriter::rewriteUpdate() {
  Block &body = update.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  SmallVector<nn::OptimizerStepOp> steps(body.getOps<nn::OptimizerStepOp>());
  for (nn::OptimizerStepOp step : steps) {
    auto param = cast<BlockArgument>(step.getParam());
    StringRef name = update
                         .getArgAttrOfType<StringAttr>(
                             param.getArgNumber(), nn::NNDialect::kParamAttrName)
                         .getValue();
    auto found = plans.find(name);
    if (found == plans.end())
      continue;
    const ShardPlan &plan = found->second;
    Location loc = step.getLoc();
    for (Value state : step.getStates()) {
      auto arg = dyn_cast<BlockArgument>(state);
      if (!arg)
        return step.emitOpError() << "has an optimizer state that is not an "
                                     "argument of the update";
      retypeArgument(update, arg.getArgNumber(), plan);
    }
    // The gradient's chunk: reduce-scattered here (stage 1), or the
    // accumulator itself (2, 3), before its first use (the clipping norm).
    auto grad = dyn_cast<BlockArgument>(step.getGrad());
    if (!grad)
      return step.emitOpError()
             << "has a gradient that is not an argument of the update";
    if (stage == 1) {
      SmallVector<OpOperand *> uses =
          llvm::map_to_vector(grad.getUses(), [](OpOperand &use) { return &use; });
      Operation *first = step;
      for (OpOperand *use : uses)
        if (use->getOwner()->isBeforeInBlock(first))
          first = use->getOwner();
      builder.setInsertionPoint(first);
      Value padded = flattenPadded(loc, grad, plan);
      Value chunk = partialGrads.contains(name)
                        ? reduceScatter(loc, padded, plan)
                        : localChunk(loc, padded, plan);
      for (OpOperand *use : uses)
        use->set(chunk);
    } else {
      retypeArgument(update, grad.getArgNumber(), plan);
    }
    // The parameter's chunk: sliced from the whole parameter, stepped, and
    // gathered back into it (stages 1, 2); the parameter itself (3).
    if (stage == 3) {
      retypeArgument(update, param.getArgNumber(), plan);
    } else {
      builder.setInsertionPoint(step);
      Value chunk = localChunk(loc, flattenPadded(loc, param, plan), plan);
      step.getOutsMutable()[0].set(chunk);
    }
    for (auto [result, init] : llvm::zip(step.getResults(), step.getOuts()))
      result.setType(init.getType());
    if (stage != 3) {
      builder.setInsertionPoint(ret);
      Value whole = gather(loc, step.getResult(0), plan);
      for (OpOperand &operand : ret->getOpOperands())
        if (operand.get() == step.getResult(0))
          operand.set(whole);
    }
  }
  // The clipping norm: a sum over every rank's chunks.
  for (auto squares :
       llvm::make_early_inc_range(body.getOps<nn::SumSquaresOp>())) {
    FailureOr<SmallVector<int16_t>> axes = chunkAxes(squares);
    if (failed(axes))
      return failure();
    if (axes->empty())
      continue;
    builder.setInsertionPointAfter(squares);
    Value total = allReduce(squares.getLoc(), squares.getResult(), *axes);
    squares.getResult().replaceAllUsesExcept(total, total.getDefiningOp());
  }
  syncFunctionType(update);
  return success();
}

FailureOr<SmallVector<int16_t>>
ZeroRewriter::chunkAxes(nn::SumSquaresOp squares) {
  std::optional<SmallVector<int16_t>> common;
  for (Value operand : squares->getOperands()) {
    // A chunk is an argument (stages 2, 3) or a reduce-scatter or slice of
    // the gradient (1), perhaps widened.
    if (auto cast = operand.getDefiningOp<nn::CastOp>())
      operand = cast.getInput();
    SmallVector<int16_t> axes;
    if (auto arg = dyn_cast<BlockArgument>(operand)) {
      if (auto name = update.getArgAttrOfType<StringAttr>(
              arg.getArgNumber(), nn::NNDialect::kGradAttrName);
          name && plans.count(name.getValue()))
        axes = plans[name.getValue()].axes;
    } else if (auto scatter = operand.getDefiningOp<shard::ReduceScatterOp>()) {
      axes = llvm::to_vector(scatter.getGridAxes());
    } else if (auto slice = operand.getDefiningOp<shard::AllSliceOp>()) {
      axes = llvm::to_vector(slice.getGridAxes());
    }
    if (common && *common != axes)
      return squares.emitOpError()
             << "sums the squares of gradients sharded over different mesh "
                "axes; tessel-zero cannot complete the norm";
    common = axes;
  }
  return common ? *common : SmallVector<int16_t>();
}

//===----------------------------------------------------------------------===//
// The backward: gradients
//===----------------------------------------------------------------------===//

/// The parameter a gradient accumulator argument of `func` belongs to.
static StringRef gradName(func::FuncOp func, Value acc) {
  auto arg = dyn_cast<BlockArgument>(acc);
  if (!arg || arg.getOwner()->getParentOp() != func)
    return {};
  auto name = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                nn::NNDialect::kGradAttrName);
  return name ? name.getValue() : StringRef();
}

/// `value` without its all-reduce over `axes` (the rest of its axes kept,
/// a widening cast redone on the partial sum): this rank's partial sum
/// over the data axes. Null when `value` is not such a sum.
static Value withoutReduction(OpBuilder &builder, Value value,
                              ArrayRef<int16_t> axes) {
  nn::CastOp widen;
  shard::AllReduceOp reduce = dataParallelSum(value, axes, widen);
  if (!reduce)
    return nullptr;
  SmallVector<int16_t> others = otherAxes(reduce, axes);
  Value partial = reduce.getInput();
  builder.setInsertionPoint(reduce);
  if (!others.empty())
    partial = shard::AllReduceOp::create(
        builder, reduce.getLoc(), reduce.getType(), reduce.getGridAttr(),
        builder.getDenseI16ArrayAttr(others), partial,
        reduce.getReductionAttr());
  if (widen) {
    builder.setInsertionPoint(widen);
    partial = nn::CastOp::create(builder, widen.getLoc(), widen.getType(),
                                 partial);
  }
  return partial;
}

void ZeroRewriter::rewriteGradients(func::FuncOp func) {
  Block &body = func.getBody().front();
  // A layer stack's gradients come out of the reversed repeat: rewritten
  // inside its layer, one repeat at a time.
  llvm::MapVector<nn::RepeatOp, SmallVector<std::pair<unsigned, StringRef>>>
      stacked;
  for (auto acc : llvm::make_early_inc_range(body.getOps<nn::AccumulateOp>())) {
    StringRef name = gradName(func, acc.getAcc());
    auto plan = plans.find(name);
    if (name.empty() || plan == plans.end())
      continue;
    Value value = acc.getValue();
    if (auto repeat = value.getDefiningOp<nn::RepeatOp>();
        repeat && plan->second.dims == 1) {
      stacked[repeat].push_back(
          {cast<OpResult>(value).getResultNumber(), plan->first()});
      continue;
    }
    if (stage == 1) {
      if (Value partial = withoutReduction(builder, value, plan->second.axes)) {
        acc.getValueMutable().set(partial);
        partialGrads.insert(name);
      }
      continue;
    }
    builder.setInsertionPoint(acc);
    Value chunk = gradientChunk(acc.getLoc(), value, plan->second);
    acc.getValueMutable().set(chunk);
    acc.getResult().setType(cast<RankedTensorType>(chunk.getType()));
    retypeArgument(func, cast<BlockArgument>(acc.getAcc()).getArgNumber(),
                   plan->second);
  }
  for (auto &[repeat, results] : stacked)
    rewriteLayerGradients(repeat, results);
  // Results (the accumulators) changed type with their arguments.
  syncFunctionType(func);
  for (Operation &op : llvm::make_early_inc_range(llvm::reverse(body)))
    if (isa<shard::AllReduceOp, nn::CastOp>(op) && op.use_empty())
      op.erase();
}

void ZeroRewriter::rewriteLayerGradients(
    nn::RepeatOp repeat,
    ArrayRef<std::pair<unsigned, StringRef>> results) {
  func::FuncOp layer = ownLayer(repeat);
  Block &body = layer.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  for (auto [index, name] : results) {
    const ShardPlan &plan = plans[name];
    OpOperand &returned = ret->getOpOperand(index);
    Value value = returned.get();
    if (stage == 1) {
      if (Value partial = withoutReduction(builder, value, plan.axes)) {
        returned.set(partial);
        partialGrads.insert(name);
      }
      continue;
    }
    builder.setInsertionPoint(ret);
    Value chunk = gradientChunk(ret.getLoc(), value, plan.row());
    returned.set(chunk);
    // The stack of chunks: [L, s], accumulated into the [L, s] chunk.
    OpResult stack = repeat->getResult(index);
    stack.setType(typedLike(plan, stack).shard());
    for (Operation *user : stack.getUsers())
      if (auto acc = dyn_cast<nn::AccumulateOp>(user)) {
        acc.getResult().setType(cast<RankedTensorType>(stack.getType()));
        func::FuncOp parent = acc->getParentOfType<func::FuncOp>();
        retypeArgument(parent, cast<BlockArgument>(acc.getAcc()).getArgNumber(),
                       plan);
      }
  }
  syncFunctionType(layer);
  for (Operation &op : llvm::make_early_inc_range(llvm::reverse(body)))
    if (isa<shard::AllReduceOp, nn::CastOp>(op) && op.use_empty())
      op.erase();
}

//===----------------------------------------------------------------------===//
// Stage 3: parameters
//===----------------------------------------------------------------------===//

/// The ops the loss (the first result) depends on: a backward entry's
/// forward part.
static DenseSet<Operation *> forwardPart(func::FuncOp func) {
  DenseSet<Operation *> part;
  SmallVector<Value> work{func.getBody().front().getTerminator()->getOperand(0)};
  while (!work.empty()) {
    Operation *def = work.pop_back_val().getDefiningOp();
    if (!def || !part.insert(def).second)
      continue;
    llvm::append_range(work, def->getOperands());
  }
  return part;
}

void ZeroRewriter::gatherInLayers(Value stack, const ShardPlan &plan) {
  ShardPlan row = plan.row();
  for (OpOperand &use : llvm::make_early_inc_range(stack.getUses())) {
    auto repeat = cast<nn::RepeatOp>(use.getOwner());
    unsigned position =
        use.getOperandNumber() - repeat.getParams().getBeginOperandIndex();
    func::FuncOp layer = ownLayer(repeat);
    BlockArgument slice =
        layer.getArgument(repeat.getCarried().size() + position);
    slice.setType(row.shard());
    markArgument(layer, slice.getArgNumber(), row);
    Block &body = layer.getBody().front();
    // A layer that does not read its slice (a bias in the backward)
    // gathers nothing.
    if (slice.use_empty()) {
      syncFunctionType(layer);
      continue;
    }
    builder.setInsertionPointToStart(&body);
    Value gathered = allGather(layer.getLoc(), slice, row);
    Value whole = unflatten(layer.getLoc(), gathered, row);
    slice.replaceAllUsesExcept(whole, gathered.getDefiningOp());
    syncFunctionType(layer);
  }
}

void ZeroRewriter::shardParameters(func::FuncOp func, bool isBackward) {
  DenseSet<Operation *> forward;
  if (isBackward && reshardAfterForward)
    forward = forwardPart(func);
  for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i) {
    auto name =
        func.getArgAttrOfType<StringAttr>(i, nn::NNDialect::kParamAttrName);
    auto plan = name ? plans.find(name.getValue()) : plans.end();
    if (plan == plans.end())
      continue;
    BlockArgument param = func.getArgument(i);
    SmallVector<OpOperand *> uses = llvm::map_to_vector(
        param.getUses(), [](OpOperand &use) { return &use; });
    retypeArgument(func, i, plan->second);
    if (uses.empty())
      continue;
    if (plan->second.dims == 1 && (!isBackward || reshardAfterForward)) {
      gatherInLayers(param, plan->second);
      continue;
    }
    // One gather per group of uses, before the group's first: the forward's
    // and the backward's apart when the backward reshards.
    SmallVector<SmallVector<OpOperand *>, 2> groups(2);
    for (OpOperand *use : uses)
      groups[forward.empty() || forward.contains(use->getOwner()) ? 0 : 1]
          .push_back(use);
    for (ArrayRef<OpOperand *> group : groups) {
      if (group.empty())
        continue;
      Operation *first = group.front()->getOwner();
      for (OpOperand *use : group)
        if (use->getOwner()->isBeforeInBlock(first))
          first = use->getOwner();
      builder.setInsertionPoint(first);
      Value whole = gather(func.getLoc(), param, plan->second);
      for (OpOperand *use : group)
        use->set(whole);
    }
  }
  syncFunctionType(func);
}

//===----------------------------------------------------------------------===//
// The pass
//===----------------------------------------------------------------------===//

LogicalResult ZeroRewriter::run() {
  for (auto func : module.getOps<func::FuncOp>()) {
    auto entry =
        func->getAttrOfType<StringAttr>(nn::NNDialect::kEntryAttrName);
    if (entry && entry.getValue() == "backward")
      backward = func;
    else if (entry && entry.getValue() == "update")
      update = func;
    else if (!entry && !func.isPrivate())
      model = func;
  }
  if (!backward || !update)
    return module.emitError()
           << "tessel-zero shards the training state, but the module has no "
              "training step (nn.entry \"backward\" and \"update\"): run "
              "tessel-autodiff first";
  if (failed(planParameters()))
    return failure();
  rewriteGradients(backward);
  if (failed(rewriteUpdate()))
    return failure();
  if (stage == 3) {
    if (model)
      shardParameters(model, /*isBackward=*/false);
    shardParameters(backward, /*isBackward=*/true);
  }
  return success();
}

struct ZeroPass : public tessel::impl::ZeroPassBase<ZeroPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (stage < 0 || stage > 3) {
      module.emitError() << "tessel-zero: stage must be 0, 1, 2 or 3, not "
                         << static_cast<int64_t>(stage);
      return signalPassFailure();
    }
    if (stage == 0)
      return;
    if (failed(nn::RepeatOp::refuseOuts(module, "tessel-zero")))
      return signalPassFailure();
    FailureOr<std::optional<Mesh>> mesh = meshFromModule(module);
    if (failed(mesh))
      return signalPassFailure();
    // The data axes, dp and cp, in mesh order.
    SmallVector<int16_t> dataAxes;
    int64_t group = 1;
    if (*mesh)
      for (auto [index, name] : llvm::enumerate((*mesh)->axes))
        if (name == kDataAxisName || name == kContextAxisName) {
          dataAxes.push_back(static_cast<int16_t>(index));
          group *= (*mesh)->shape[index];
        }
    if (dataAxes.empty()) {
      module.emitError() << "tessel-zero shards the training state over the "
                            "mesh axes '"
                         << kDataAxisName << "' and '" << kContextAxisName
                         << "', and "
                         << (*mesh ? "mesh " + (*mesh)->toString() +
                                         " has neither"
                                   : std::string("the module has no mesh"))
                         << " (e.g. --mesh dp=4)";
      return signalPassFailure();
    }
    module->setAttr(kZeroStageAttr,
                    IntegerAttr::get(IntegerType::get(&getContext(), 64),
                                     group > 1 ? stage : 0));
    // Nothing to shard over one data-parallel rank.
    if (group == 1)
      return;
    ZeroRewriter rewriter(module, **mesh, dataAxes, stage, reshardAfterForward);
    if (failed(rewriter.run()))
      return signalPassFailure();
    // What is left to all-reduce of the gradients (over other axes) is
    // bucketed as before.
    bucketGradientAllReduces(
        module, static_cast<int64_t>(bucketMb * 1024.0 * 1024.0));
    // A bucket is issued where its last gradient is complete: the
    // accumulations of its earlier gradients move after it, to the end.
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      Block &body = func.getBody().front();
      SmallVector<nn::AccumulateOp> accumulates(body.getOps<nn::AccumulateOp>());
      for (nn::AccumulateOp acc : accumulates)
        acc->moveBefore(body.getTerminator());
    }
  }
};

} // namespace
