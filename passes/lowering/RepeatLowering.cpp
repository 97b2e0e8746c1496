//===- RepeatLowering.cpp - nn.repeat to a loop that calls the layer ------===//

#include "passes/lowering/FunctionLowering.h"

#include "passes/MemoryPlan.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;

namespace tessel::lowering {
namespace {

/// Whether `layer`, or a layer it repeats, draws random bits (dropout).
bool drawsRandomBits(func::FuncOp layer) {
  return layer
      .walk([](Operation *op) {
        if (isa<nn::DropoutOp>(op))
          return WalkResult::interrupt();
        if (auto repeat = dyn_cast<nn::RepeatOp>(op))
          if (func::FuncOp inner = repeat.getLayerFunction();
              inner && drawsRandomBits(inner))
            return WalkResult::interrupt();
        return WalkResult::advance();
      })
      .wasInterrupted();
}

/// The per-layer tables (layer_windows, layer_thetas) of the ops of
/// `layer` itself, by op (a nested repeat's layer reads its own).
SmallVector<std::pair<Operation *, int64_t>> layerTables(func::FuncOp layer) {
  SmallVector<std::pair<Operation *, int64_t>> tables;
  layer.walk([&](Operation *op) {
    if (auto attention = dyn_cast<nn::AttentionOp>(op)) {
      if (std::optional<ArrayRef<int64_t>> t = attention.getLayerWindows())
        tables.push_back({op, int64_t(t->size())});
    } else if (auto grad = dyn_cast<nn::AttentionGradOp>(op)) {
      if (std::optional<ArrayRef<int64_t>> t = grad.getLayerWindows())
        tables.push_back({op, int64_t(t->size())});
    } else if (auto rope = dyn_cast<nn::RopeOp>(op)) {
      if (std::optional<ArrayRef<double>> t = rope.getLayerThetas())
        tables.push_back({op, int64_t(t->size())});
      if (std::optional<ArrayRef<double>> t = rope.getLayerScalings())
        tables.push_back({op, int64_t(t->size()) / 4}); // four a layer
    }
  });
  return tables;
}

/// A pipeline stage's entry repeat runs the model's layers first ..
/// first + L - 1: `first`. Any other repeat (one inside a layer counts its
/// own) runs its layers from 0: none.
std::optional<int64_t> stageFirstLayer(nn::RepeatOp op) {
  auto func = op->getParentOfType<func::FuncOp>();
  auto module = op->getParentOfType<ModuleOp>();
  if (auto first = module ? module->getAttrOfType<IntegerAttr>(
                                nn::NNDialect::kFirstLayerAttrName)
                          : IntegerAttr();
      first && func && !func.isPrivate())
    return first.getInt();
  return std::nullopt;
}

/// Every per-layer table of the layer covers the layers `op` runs: exactly
/// its L, or, on a pipeline stage, the model's (first + L at least).
LogicalResult
checkLayerTables(nn::RepeatOp op,
                 ArrayRef<std::pair<Operation *, int64_t>> tables) {
  std::optional<int64_t> stage = stageFirstLayer(op);
  int64_t first = stage.value_or(0), layers = op.getNumLayers();
  for (auto [tableOp, size] : tables)
    if (stage ? size < first + layers : size != layers)
      return op.emitOpError()
             << "runs " << layers << " layers"
             << (stage ? " (the model's " + std::to_string(first) + " to " +
                             std::to_string(first + layers - 1) + ")"
                       : std::string())
             << ", but its layer's '" << tableOp->getName()
             << "' has per-layer attributes for " << size;
  return success();
}

/// The pointers a repeat's loop works on.
struct RepeatBuffers {
  /// The workspace copy of each carried value, and the layer's scratch
  /// after them.
  SmallVector<Value> spare;
  Value layerScratch;
  SmallVector<Value> initial, results;
  /// With a prefetch: its results' two slots, after the layer's scratch.
  SmallVector<Value> slots[2];
  /// With a finish: two slots of what the layer returns in flight, after
  /// the prefetch's.
  SmallVector<Value> inFlight[2];
};

int64_t scratchBytes(func::FuncOp func) {
  auto scratch =
      func ? func->getAttrOfType<IntegerAttr>(memory_plan::kScratchBytesAttr)
           : IntegerAttr();
  return scratch ? scratch.getInt() : 0;
}

RepeatBuffers repeatBuffers(nn::RepeatOp op, FunctionLowering &fl,
                            int64_t workspace) {
  RepeatBuffers buffers;
  int64_t position = workspace;
  for (Value carried : op.getCarried()) {
    buffers.spare.push_back(fl.offset(fl.scratch, position));
    position += memory_plan::alignUp(bytesOf(carried));
  }
  // The layer's scratch, shared by its finish (tessel-plan-memory's
  // workspace layout).
  buffers.layerScratch = fl.offset(fl.scratch, position);
  func::FuncOp finish = op.getFinishFunction();
  position +=
      std::max(scratchBytes(op.getLayerFunction()), scratchBytes(finish));
  auto addSlots = [&](SmallVector<Value>(&slots)[2], TypeRange types) {
    for (SmallVector<Value> &slot : slots)
      for (Type type : types) {
        slot.push_back(fl.offset(fl.scratch, position));
        position += memory_plan::alignUp(nn::detail::tensorBytes(type));
      }
  };
  if (func::FuncOp prefetch = op.getPrefetchFunction())
    addSlots(buffers.slots, prefetch.getFunctionType().getResults());
  if (finish)
    addSlots(buffers.inFlight,
             finish.getArgumentTypes().take_front(op.getNumInFlight()));
  for (Value carried : op.getCarried())
    buffers.initial.push_back(fl.ptr(carried));
  for (Value result : op.getCarriedResults())
    buffers.results.push_back(fl.ptr(result));
  // An outs result is its operand's memory, updated in place.
  for (auto [out, result] : llvm::zip(op.getOuts(), op.getOutsResults()))
    fl.pointers[result] = fl.ptr(out);
  return buffers;
}

/// Layer `layer`'s slice of each of `stacked` (tensors on the layer axis:
/// parameters, outs, stacked results).
SmallVector<Value> layerSlices(nn::RepeatOp op, FunctionLowering &fl,
                               ValueRange stacked, OpBuilder &b, Location loc,
                               Value layer) {
  SmallVector<Value> slices;
  for (Value value : stacked) {
    Value bytes = arith::MulIOp::create(
        b, loc, layer,
        arith::ConstantIntOp::create(b, loc, bytesOf(value) / op.getNumLayers(),
                                     64));
    slices.push_back(fl.emit.offset(b, loc, fl.ptr(value), bytes));
  }
  return slices;
}

/// prefetch(params[layer]) into `slot`: starts the layer's collectives.
void emitPrefetch(nn::RepeatOp op, FunctionLowering &fl,
                  const RepeatBuffers &buffers, OpBuilder &b, Location loc,
                  Value layer, ValueRange slot) {
  SmallVector<Value> args{fl.ctx, buffers.layerScratch};
  llvm::append_range(args, layerSlices(op, fl, op.getParams(), b, loc, layer));
  llvm::append_range(args, slot);
  auto name = b.getStringAttr(kFunctionPrefix + op.getPrefetch()->str());
  LLVM::CallOp::create(b, loc, TypeRange{}, FlatSymbolRefAttr::get(name), args);
}

/// finish(in-flight results in `slot`, outs[layer]) into outs[layer] in
/// place and stacked slice `layer` of the finish's per-layer outputs:
/// completes that layer's deferred collectives.
void emitFinish(nn::RepeatOp op, FunctionLowering &fl,
                const RepeatBuffers &buffers, OpBuilder &b, Location loc,
                Value layer, ValueRange slot) {
  SmallVector<Value> args{fl.ctx, buffers.layerScratch};
  llvm::append_range(args, slot);
  SmallVector<Value> outSlices =
      layerSlices(op, fl, op.getOuts(), b, loc, layer);
  llvm::append_range(args, outSlices);
  llvm::append_range(args, outSlices);
  llvm::append_range(args, layerSlices(op, fl, op.getFinishStackedResults(),
                                       b, loc, layer));
  auto name = b.getStringAttr(kFunctionPrefix + op.getFinish()->str());
  LLVM::CallOp::create(b, loc, TypeRange{}, FlatSymbolRefAttr::get(name), args);
}

/// The body of iteration `iteration`: layer(carried `in`, params[l]) into
/// the results or the spare copies (whichever the last iteration writes
/// the results through) and stacked slice l. Yields the carried outputs.
void emitLayerIteration(nn::RepeatOp op, FunctionLowering &fl,
                        const RepeatBuffers &buffers, Value callerStream,
                        bool setsLayer, OpBuilder &body, Location loc,
                        Value iteration, ValueRange in) {
  int64_t numLayers = op.getNumLayers();
  auto constant = [&](int64_t value) -> Value {
    return arith::ConstantIntOp::create(body, loc, value, 64);
  };
  // Iteration i writes the results when L - 1 - i is even; a reversed
  // repeat runs layer L - 1 - i.
  Value remaining =
      arith::SubIOp::create(body, loc, constant(numLayers - 1), iteration);
  Value layer = op.getReverse() ? remaining : iteration;
  // A pipeline stage's layer l is the model's layer first + l: it draws
  // that layer's masks and reads that layer's per-layer attributes.
  Value modelLayer = layer;
  if (std::optional<int64_t> first = stageFirstLayer(op); first && *first)
    modelLayer = arith::AddIOp::create(body, loc, layer, constant(*first));
  if (callerStream) {
    I64Value stream =
        fl.emit.call(rt::tessel_fold_in, body, loc,
                     {I64Value(callerStream), I64Value(modelLayer)});
    fl.emit.call(rt::tessel_set_rng_stream, body, loc, {fl.ctx, stream});
  }
  if (setsLayer)
    fl.emit.call(rt::tessel_set_layer, body, loc,
                 {fl.ctx, I64Value(modelLayer)});
  Value parity = arith::RemSIOp::create(body, loc, remaining, constant(2));
  Value toResults = arith::CmpIOp::create(body, loc, arith::CmpIPredicate::eq,
                                          parity, constant(0));
  SmallVector<Value> args{fl.ctx, buffers.layerScratch};
  args.append(in.begin(), in.end());
  llvm::append_range(args,
                     layerSlices(op, fl, op.getParams(), body, loc, layer));
  SmallVector<Value> outSlices =
      layerSlices(op, fl, op.getOuts(), body, loc, layer);
  llvm::append_range(args, outSlices);
  // Slots alternate with the iteration's parity: `first` on even ones.
  Value even = arith::CmpIOp::create(
      body, loc, arith::CmpIPredicate::eq,
      arith::RemSIOp::create(body, loc, iteration, constant(2)), constant(0));
  auto pick = [&](const SmallVector<Value>(&slots)[2], int first) {
    SmallVector<Value> slot;
    for (auto [a, b] : llvm::zip(slots[first], slots[1 - first]))
      slot.push_back(LLVM::SelectOp::create(body, loc, even, a, b));
    return slot;
  };
  if (op.getPrefetchAttr()) {
    // Start the next layer's prefetch into the other slot, then run this
    // layer on the slot its prefetch filled.
    SmallVector<Value> current = pick(buffers.slots, 0),
                       next = pick(buffers.slots, 1);
    Value hasNext = arith::CmpIOp::create(body, loc, arith::CmpIPredicate::slt,
                                          iteration, constant(numLayers - 1));
    scf::IfOp::create(body, loc, hasNext, [&](OpBuilder &then, Location at) {
      Value nextLayer =
          op.getReverse()
              ? arith::SubIOp::create(then, at, layer, constant(1)).getResult()
              : arith::AddIOp::create(then, at, layer, constant(1)).getResult();
      emitPrefetch(op, fl, buffers, then, at, nextLayer, next);
      scf::YieldOp::create(then, at);
    });
    args.append(current.begin(), current.end());
  }
  SmallVector<Value> out;
  for (auto [result, copy] : llvm::zip(buffers.results, buffers.spare))
    out.push_back(LLVM::SelectOp::create(body, loc, toResults, result, copy));
  args.append(out.begin(), out.end());
  // The layer returns each outs slice updated where it stands.
  llvm::append_range(args, outSlices);
  llvm::append_range(args, layerSlices(op, fl, op.getLayerStackedResults(),
                                       body, loc, layer));
  // What the layer returns in flight goes to this iteration's slot.
  if (op.getFinishAttr())
    llvm::append_range(args, pick(buffers.inFlight, 0));
  auto layerName = body.getStringAttr(kFunctionPrefix + op.getLayer().str());
  LLVM::CallOp::create(body, loc, TypeRange{},
                       FlatSymbolRefAttr::get(layerName), args);
  if (op.getFinishAttr()) {
    // The previous layer's collectives ran while this layer computed:
    // finish them now.
    Value hasPrevious = arith::CmpIOp::create(
        body, loc, arith::CmpIPredicate::sgt, iteration, constant(0));
    scf::IfOp::create(
        body, loc, hasPrevious, [&](OpBuilder &then, Location at) {
          Value previousLayer =
              op.getReverse()
                  ? arith::AddIOp::create(then, at, layer, constant(1))
                        .getResult()
                  : arith::SubIOp::create(then, at, layer, constant(1))
                        .getResult();
          emitFinish(op, fl, buffers, then, at, previousLayer,
                     pick(buffers.inFlight, 1));
          scf::YieldOp::create(then, at);
        });
  }
  scf::YieldOp::create(body, loc, out);
}

/// for l in [0, L) (or down from L − 1 with `reverse`): layer(carried,
/// params[l], outs[l]) -> next carried, outs[l] in place, stacked[l]. The
/// carried outputs alternate between the op's result buffers and a
/// workspace copy so that the last iteration writes the results; stacked
/// outputs go to slice l. A layer that draws random bits runs layer l on
/// the random stream folded from its caller's and l (tessel_fold_in), so
/// layers draw distinct dropout masks and the backward's layer l draws its
/// forward's.
LogicalResult lowerRepeat(nn::RepeatOp op, FunctionLowering &fl) {
  auto workspace = op->getAttrOfType<IntegerAttr>(memory_plan::kWorkspaceAttr);
  if (!workspace)
    return op.emitOpError() << "has no workspace; run -tessel-plan-memory";
  RepeatBuffers buffers = repeatBuffers(op, fl, workspace.getInt());
  func::FuncOp layerFunction = op.getLayerFunction();
  Value callerStream;
  if (layerFunction && drawsRandomBits(layerFunction))
    callerStream = fl.call(rt::tessel_get_rng_stream, {});
  // A layer reading per-layer attributes runs with its model layer set
  // (tessel_set_layer), the caller's restored after the loop.
  SmallVector<std::pair<Operation *, int64_t>> tables;
  if (layerFunction)
    tables = layerTables(layerFunction);
  if (failed(checkLayerTables(op, tables)))
    return failure();
  Value callerLayer;
  if (!tables.empty())
    callerLayer = fl.call(rt::tessel_get_layer, {});
  Value lower = fl.i64(0);
  Value upper = fl.i64(op.getNumLayers());
  Value one = fl.i64(1);
  // The first layer's prefetch, into slot 0.
  if (op.getPrefetchAttr())
    emitPrefetch(op, fl, buffers, fl.b, fl.loc,
                 fl.i64(op.getReverse() ? op.getNumLayers() - 1 : 0),
                 buffers.slots[0]);
  scf::ForOp::create(
      fl.b, fl.loc, lower, upper, one, buffers.initial,
      [&](OpBuilder &body, Location loc, Value iteration, ValueRange in) {
        emitLayerIteration(op, fl, buffers, callerStream, bool(callerLayer),
                           body, loc, iteration, in);
      });
  // The last layer's deferred collectives, from the last iteration's slot.
  if (op.getFinishAttr()) {
    int64_t last = op.getNumLayers() - 1;
    emitFinish(op, fl, buffers, fl.b, fl.loc,
               fl.i64(op.getReverse() ? 0 : last), buffers.inFlight[last % 2]);
  }
  if (callerStream)
    fl.call(rt::tessel_set_rng_stream, {I64Value(callerStream)});
  if (callerLayer)
    fl.call(rt::tessel_set_layer, {I64Value(callerLayer)});
  return success();
}

} // namespace

void addRepeatLowering(LoweringRegistry &registry) {
  registry.add<nn::RepeatOp>(lowerRepeat);
}

} // namespace tessel::lowering
