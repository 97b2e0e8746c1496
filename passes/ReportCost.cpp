//===- ReportCost.cpp - tessel-report-cost: flops, bytes, communication ---===//

#include "passes/Communication.h"
#include "passes/MemoryPlan.h"
#include "passes/Passes.h"
#include "passes/Views.h"

#include "dialect/NN/NNOps.h"
#include "runtime/include/tessel/runtime.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/StringSet.h"

#include <map>

namespace tessel {
#define GEN_PASS_DEF_REPORTCOSTPASS
#include "passes/Passes.h.inc"
} // namespace tessel

using namespace mlir;
using namespace tessel;

namespace {

/// Ops that do no work of their own: terminators and constants.
bool isFree(Operation *op) {
  return op->hasTrait<OpTrait::IsTerminator>() ||
         op->hasTrait<OpTrait::ConstantLike>();
}

struct ReportCostPass : public tessel::impl::ReportCostPassBase<ReportCostPass> {
  using Base::Base;

  void runOnOperation() override {
    WalkResult result = getOperation().walk([&](func::FuncOp func) {
      if (func.isExternal())
        return WalkResult::advance();
      for (Operation &op : func.getBody().getOps()) {
        auto cost = dyn_cast<nn::CostOpInterface>(op);
        if (!cost) {
          if (isFree(&op))
            continue;
          op.emitOpError() << "has no cost model; inline calls (-inline) and "
                              "express the model in nn ops before costing it";
          return WalkResult::interrupt();
        }
        if (perOp)
          op.emitRemark() << "flops " << cost.getFlops() << ", bytes "
                          << cost.getBytesAccessed();
      }
      nn::CostSummary total = nn::sumCost(func.getBody().front());
      // Each op's counts fit (the verifier); their sum saturates.
      if (total.flops == nn::detail::kCountOverflow ||
          total.bytes == nn::detail::kCountOverflow) {
        func.emitOpError() << "flops or bytes of @" << func.getSymName()
                           << " do not fit in int64";
        return WalkResult::interrupt();
      }
      func.emitRemark() << "function @" << func.getSymName() << ": "
                        << total.numOps << " ops, flops " << total.flops
                        << ", bytes " << total.bytes;
      return WalkResult::advance();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace

//===----------------------------------------------------------------------===//
// The collectives of a partitioned program (passes/Communication.h)
//===----------------------------------------------------------------------===//

namespace tessel::communication {


StringRef collectiveName(Collective kind) {
  switch (kind) {
  case Collective::AllReduce:
    return "all_reduce";
  case Collective::AllGather:
    return "all_gather";
  case Collective::ReduceScatter:
    return "reduce_scatter";
  case Collective::AllToAll:
    return "all_to_all";
  }
  return "";
}

std::optional<Collective> parseCollective(StringRef name) {
  for (Collective kind : {Collective::AllReduce, Collective::AllGather,
                          Collective::ReduceScatter, Collective::AllToAll})
    if (collectiveName(kind) == name)
      return kind;
  return std::nullopt;
}

SmallVector<int16_t> axesOfMask(uint32_t mask) {
  SmallVector<int16_t> axes;
  for (int16_t axis = 0; axis < 32; ++axis)
    if (mask & (uint32_t(1) << axis))
      axes.push_back(axis);
  return axes;
}

bool isLowerableCollective(Operation *op) {
  return isa<shard::AllReduceOp, shard::AllGatherOp, shard::ReduceScatterOp,
             shard::AllToAllOp, shard::AllSliceOp>(op);
}

/// The grid of a collective (every one has `grid` and `grid_axes`).
static StringRef gridOf(Operation *op) {
  return op->getAttrOfType<FlatSymbolRefAttr>("grid").getValue();
}
static ArrayRef<int16_t> gridAxesOf(Operation *op) {
  if (auto axes = op->getAttrOfType<DenseI16ArrayAttr>("grid_axes"))
    return axes.asArrayRef();
  return {};
}

LogicalResult verifyLowerableCollective(Operation *op) {
  if (gridOf(op) != kMeshName)
    return op->emitOpError()
           << "runs on the grid @" << gridOf(op) << "; only the mesh @"
           << kMeshName << " lowers to the runtime";
  auto grid = SymbolTable::lookupNearestSymbolFrom<shard::GridOp>(
      op, op->getAttrOfType<FlatSymbolRefAttr>("grid"));
  if (!grid)
    return op->emitOpError() << "runs on @" << kMeshName
                             << ", which is not a shard.grid of the module";
  if (grid.getRank() > TESSEL_MAX_MESH_AXES ||
      llvm::any_of(grid.getShape(), ShapedType::isDynamic))
    return op->emitOpError() << "runs on a mesh the runtime cannot hold "
                                "(dynamic, or more than "
                             << TESSEL_MAX_MESH_AXES << " axes)";
  Type input = op->getOperand(0).getType(), result = op->getResult(0).getType();
  for (Type type : {input, result}) {
    auto tensor = dyn_cast<RankedTensorType>(type);
    if (!tensor)
      return op->emitOpError() << "operates on " << type
                               << "; the runtime's collectives take tensors";
    if (!tensor.hasStaticShape())
      return op->emitOpError()
             << "has the dynamic shape " << type
             << "; the runtime's collectives need static shapes";
  }
  // Collectives that only move data (gather, all-to-all, slice) also move
  // integer tensors: token ids and labels under sequence parallelism.
  Type element = cast<RankedTensorType>(input).getElementType();
  bool reduces = isa<shard::AllReduceOp, shard::ReduceScatterOp>(op);
  bool isFloat = element.isF32() || element.isF16() || element.isBF16() ||
                 element.isF64();
  bool isIndex = element.isSignlessInteger(32) || element.isSignlessInteger(64);
  if (!isFloat && (reduces || !isIndex))
    return op->emitOpError()
           << "communicates " << element
           << "; the runtime's collectives take f32, f16, bf16 and f64 (and "
              "i32, i64 when they only move data)";
  if (element != cast<RankedTensorType>(result).getElementType())
    return op->emitOpError()
           << "converts " << element << " to "
           << cast<RankedTensorType>(result).getElementType()
           << "; the runtime's collectives keep the element type";
  std::optional<shard::ReductionKind> reduction;
  if (auto reduce = dyn_cast<shard::AllReduceOp>(op))
    reduction = reduce.getReduction();
  if (auto scatter = dyn_cast<shard::ReduceScatterOp>(op))
    reduction = scatter.getReduction();
  if (reduction && *reduction != shard::ReductionKind::Sum &&
      *reduction != shard::ReductionKind::Average &&
      *reduction != shard::ReductionKind::Max)
    return op->emitOpError()
           << "reduces with '" << shard::stringifyReductionKind(*reduction)
           << "'; the runtime reduces with sum, average and max";
  // The runtime numbers a group's ranks in axis order; upstream in the
  // order of grid_axes. They agree when the axes increase. (An all-reduce
  // gives every rank the same sum either way.)
  ArrayRef<int16_t> axes = gridAxesOf(op);
  if (!isa<shard::AllReduceOp>(op))
    for (size_t i = 1; i < axes.size(); ++i)
      if (axes[i] <= axes[i - 1])
        return op->emitOpError()
               << "lists grid_axes out of order; the runtime orders a "
                  "group's ranks by increasing mesh axis";
  return success();
}

uint32_t axesMask(Operation *op) {
  uint32_t mask = 0;
  for (int16_t axis : gridAxesOf(op))
    mask |= uint32_t(1) << axis;
  return mask;
}

/// The kind and the counted payload of one collective call (all_slice:
/// none, it moves no data).
static std::optional<std::pair<Collective, int64_t>> payloadOf(Operation *op) {
  auto bytes = [](Value value) {
    return nn::detail::tensorBytes(value.getType());
  };
  if (isa<shard::AllReduceOp>(op))
    return std::make_pair(Collective::AllReduce, bytes(op->getOperand(0)));
  if (isa<shard::AllGatherOp>(op))
    return std::make_pair(Collective::AllGather, bytes(op->getResult(0)));
  if (isa<shard::ReduceScatterOp>(op))
    return std::make_pair(Collective::ReduceScatter, bytes(op->getOperand(0)));
  if (isa<shard::AllToAllOp>(op))
    return std::make_pair(Collective::AllToAll, bytes(op->getOperand(0)));
  return std::nullopt;
}

/// Whether `op` issues a kernel (what the runtime's trace counts between a
/// started collective and its wait): not a view (a reshape, or a slice the
/// memory plan made one), a wait, a collective or a terminator.
static bool issuesKernel(Operation &op) {
  return !isa<nn::ReshapeOp, nn::WaitOp>(op) &&
         !op.hasAttr(memory_plan::kViewAttr) &&
         !op.hasTrait<OpTrait::IsTerminator>() &&
         !isa<shard::ShardDialect>(op.getDialect());
}

// A slice's copy moves with the collective it unpacks
// (tessel-overlap-communication), a concat's inputs are computed where it
// puts them (tessel-plan-memory: a bucket costs no copy), and a broadcast
// only binary ops read may be read where its input lies (a view), so none
// is a cover of its own.
bool isOverlapCover(Operation &op) {
  if (auto broadcast = dyn_cast<nn::BroadcastOp>(op);
      broadcast && views::mayBeView(broadcast))
    return false;
  return !isa<nn::SliceOp, nn::ConcatOp>(op) && issuesKernel(op);
}

/// The collectives of `repeat`'s prefetch whose first run, before the loop
/// for the first layer, overlaps no kernel: the layer waits for their
/// result before it issues any.
static llvm::SmallPtrSet<Operation *, 4>
firstPrefetchAlone(nn::RepeatOp repeat) {
  llvm::SmallPtrSet<Operation *, 4> alone;
  func::FuncOp prefetch = repeat.getPrefetchFunction();
  func::FuncOp layer = repeat.getLayerFunction();
  if (!prefetch || prefetch.isExternal() || !layer || layer.isExternal())
    return alone;
  Operation *ret = prefetch.getBody().front().getTerminator();
  if (ret->getNumOperands() > layer.getNumArguments())
    return alone;
  unsigned first = layer.getNumArguments() - ret->getNumOperands();
  for (OpOperand &operand : ret->getOpOperands()) {
    Operation *collective = operand.get().getDefiningOp();
    Value arrives = layer.getArgument(first + operand.getOperandNumber());
    if (!collective)
      continue;
    bool kernelFirst = false;
    for (Operation &op : layer.getBody().getOps()) {
      if (isa<nn::WaitOp>(op) && op.getOperand(0) == arrives)
        break;
      if ((kernelFirst = issuesKernel(op)))
        break;
    }
    if (!kernelFirst)
      alone.insert(collective);
  }
  return alone;
}

/// The collectives `repeat`'s layer returns in flight whose last run, the
/// last layer's, overlaps no kernel: none follows them in the layer, and
/// the repeat finishes that layer right after the loop, where only the
/// previous layer's finish runs in between (none with one layer, no kernel
/// when the finish only waits and views).
static llvm::SmallPtrSet<Operation *, 4> lastFinishAlone(nn::RepeatOp repeat) {
  llvm::SmallPtrSet<Operation *, 4> alone;
  func::FuncOp finish = repeat.getFinishFunction();
  func::FuncOp layer = repeat.getLayerFunction();
  if (!finish || finish.isExternal() || !layer || layer.isExternal())
    return alone;
  if (repeat.getNumLayers() > 1 &&
      llvm::any_of(finish.getBody().getOps(), issuesKernel))
    return alone;
  Operation *ret = layer.getBody().front().getTerminator();
  if (repeat.getNumInFlight() > ret->getNumOperands())
    return alone;
  for (Value inFlight : ret->getOperands().take_back(repeat.getNumInFlight()))
    if (Operation *collective = inFlight.getDefiningOp();
        collective && collective->getBlock() == ret->getBlock() &&
        llvm::none_of(llvm::make_range(std::next(collective->getIterator()),
                                       ret->getIterator()),
                      issuesKernel))
      alone.insert(collective);
  return alone;
}

/// Adds `times` calls of `func`'s collectives to `traffic`; `active` holds
/// the functions being counted (a layer that repeats itself is counted
/// once, not forever). `alone` collectives overlap nothing on `aloneTimes`
/// of their calls.
static void
addCollectives(func::FuncOp func, const Mesh &mesh, int64_t times,
               std::map<std::pair<int32_t, uint32_t>, Traffic> &traffic,
               llvm::SmallPtrSetImpl<Operation *> &active,
               const llvm::SmallPtrSetImpl<Operation *> *alone = nullptr,
               int64_t aloneTimes = 0) {
  if (!func || func.isExternal() || !active.insert(func).second)
    return;
  for (Operation &op : func.getBody().getOps()) {
    if (auto repeat = dyn_cast<nn::RepeatOp>(op)) {
      llvm::SmallPtrSet<Operation *, 4> last = lastFinishAlone(repeat);
      addCollectives(repeat.getLayerFunction(), mesh,
                     times * repeat.getNumLayers(), traffic, active, &last,
                     times);
      llvm::SmallPtrSet<Operation *, 4> first = firstPrefetchAlone(repeat);
      addCollectives(repeat.getPrefetchFunction(), mesh,
                     times * repeat.getNumLayers(), traffic, active, &first,
                     times);
      continue;
    }
    if (!isLowerableCollective(&op))
      continue;
    std::optional<std::pair<Collective, int64_t>> payload = payloadOf(&op);
    uint32_t mask = axesMask(&op);
    if (!payload || mesh.groupSize(axesOfMask(mask)) == 1)
      continue;
    Traffic &entry = traffic[{static_cast<int32_t>(payload->first), mask}];
    entry.kind = payload->first;
    entry.axes = mask;
    entry.calls += times;
    entry.bytes += times * payload->second;
    if (op.hasAttr(nn::NNDialect::kAsyncAttrName)) {
      entry.asyncBytes += times * payload->second;
      entry.overlappedBytes +=
          (times - (alone && alone->contains(&op) ? aloneTimes : 0)) *
          payload->second;
    }
  }
  active.erase(func);
}

SmallVector<Traffic> countCollectives(func::FuncOp func, const Mesh &mesh) {
  std::map<std::pair<int32_t, uint32_t>, Traffic> traffic;
  llvm::SmallPtrSet<Operation *, 4> active;
  addCollectives(func, mesh, 1, traffic, active);
  SmallVector<Traffic> result;
  for (auto &[key, entry] : traffic)
    result.push_back(entry);
  return result;
}

int64_t ringWireBytes(Collective kind, int64_t payload, int64_t groupSize) {
  if (groupSize <= 1)
    return 0;
  int64_t steps =
      kind == Collective::AllReduce ? 2 * (groupSize - 1) : groupSize - 1;
  // payload · steps / G without overflowing for payloads of many GiB.
  return payload / groupSize * steps + payload % groupSize * steps / groupSize;
}

} // namespace tessel::communication
