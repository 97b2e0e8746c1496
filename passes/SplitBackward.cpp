//===- SplitBackward.cpp - tessel-split-backward: B and W of a backward ---===//
//
// The zero-bubble schedules (Qi et al., arXiv 2401.10241) run a stage's
// backward in two parts: B, the gradient of the stage's input (what the
// previous stage waits for), and W, the gradients of its weights, which
// fill the pipeline's bubbles. Which op belongs where follows from the
// backward's dataflow, which autodiff built from the ops' VJP rules: B is
// every op the input gradient (and the loss) depends on; W is what only
// the weight gradients need. Values B computes and W reads are the stash,
// results of B and arguments of W (`nn.stash`), which the launcher keeps
// per microbatch between the two calls.
//
// A repeat's derivative is one op, so it is split too: its layer function
// becomes a B layer (run in reverse, as before) that also stacks, per
// layer, what the W layer needs, and a W layer that computes each layer's
// weight gradients from those stacks.
//
//===----------------------------------------------------------------------===//

#include "passes/BlockSlice.h"
#include "passes/NNAttributes.h"
#include "passes/Passes.h"

#include "dialect/NN/NNOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/SetVector.h"

namespace tessel {
#define GEN_PASS_DEF_SPLITBACKWARDPASS
#include "passes/Passes.h.inc"
} // namespace tessel

using namespace mlir;
using namespace tessel;

namespace {

/// Values defined by `from` (or, when `args`, block arguments) that ops of
/// `to` use, in first-use order.
SmallVector<Value> crossing(const OpSet &from, const OpSet &to, bool args) {
  llvm::SetVector<Value> out;
  for (Operation *op : to)
    for (Value operand : op->getOperands()) {
      Operation *def = operand.getDefiningOp();
      if ((def && from.contains(def)) ||
          (args && isa<BlockArgument>(operand)))
        out.insert(operand);
    }
  return SmallVector<Value>(out.begin(), out.end());
}

RankedTensorType stackedType(Type sliceType, int64_t layers) {
  auto tensor = cast<RankedTensorType>(sliceType);
  SmallVector<int64_t> shape{layers};
  shape.append(tensor.getShape().begin(), tensor.getShape().end());
  return RankedTensorType::get(shape, tensor.getElementType());
}

class BackwardSplitter {
public:
  BackwardSplitter(ModuleOp module) : module(module), symbols(module) {}

  /// Splits `backward` into `<f>_backward_input` and `<f>_backward_weight`.
  LogicalResult run(func::FuncOp backward);

private:
  /// Replaces repeat `op` (in the B part) whose stacked results only W
  /// reads by a B repeat and a W repeat; false when there is nothing to
  /// split.
  bool splitRepeat(nn::RepeatOp op, const OpSet &weightOps);

  ModuleOp module;
  SymbolTable symbols;
};

bool BackwardSplitter::splitRepeat(nn::RepeatOp op, const OpSet &weightOps) {
  func::FuncOp layer = op.getLayerFunction();
  if (!layer)
    return false;
  unsigned numCarried = op.getCarried().size();
  // Stacked results read only by W move to the W repeat.
  SmallVector<unsigned> toWeight, toInput;
  for (auto [k, result] : llvm::enumerate(op.getStackedResults())) {
    bool inputUse = llvm::any_of(result.getUsers(), [&](Operation *user) {
      return !weightOps.contains(user);
    });
    (inputUse ? toInput : toWeight).push_back(k);
  }
  if (toWeight.empty())
    return false;
  Block &body = layer.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  SmallVector<Value> inputRoots(ret.getOperands().take_front(numCarried));
  for (unsigned k : toInput)
    inputRoots.push_back(ret.getOperand(numCarried + k));
  SmallVector<Value> weightRoots;
  for (unsigned k : toWeight)
    weightRoots.push_back(ret.getOperand(numCarried + k));
  OpSet inputOps = sliceOf(body, inputRoots);
  OpSet weightOnly;
  for (Operation *w : sliceOf(body, weightRoots))
    if (!inputOps.contains(w))
      weightOnly.insert(w);
  // What the W layer reads: values of the B layer and carried arguments
  // (both differ per layer: stacked by the B repeat), and parameter slices
  // (the B repeat's own stacked operands).
  SmallVector<Value> stacked, paramArgs;
  for (Value v : crossing(inputOps, weightOnly, /*args=*/true)) {
    auto arg = dyn_cast<BlockArgument>(v);
    if (arg && arg.getArgNumber() >= numCarried)
      paramArgs.push_back(v);
    else
      stacked.push_back(v);
  }
  // A returned value may also be an argument or a B value directly.
  for (Value root : weightRoots) {
    auto arg = dyn_cast<BlockArgument>(root);
    Operation *def = root.getDefiningOp();
    if ((arg && arg.getArgNumber() < numCarried) ||
        (def && inputOps.contains(def)))
      if (!llvm::is_contained(stacked, root))
        stacked.push_back(root);
    if (arg && arg.getArgNumber() >= numCarried &&
        !llvm::is_contained(paramArgs, root))
      paramArgs.push_back(root);
  }

  MLIRContext *ctx = module.getContext();
  OpBuilder b(ctx);
  int64_t layers = op.getNumLayers();
  // The B layer: the carried results, the stacked results B keeps, then
  // the stacks for W.
  b.setInsertionPointAfter(layer);
  SmallVector<Type> inputResults(
      TypeRange(ret.getOperands().take_front(numCarried).getTypes()));
  for (unsigned k : toInput)
    inputResults.push_back(ret.getOperand(numCarried + k).getType());
  for (Value v : stacked)
    inputResults.push_back(v.getType());
  auto inputLayer = func::FuncOp::create(
      b, layer.getLoc(), (layer.getSymName() + "_input").str(),
      b.getFunctionType(layer.getArgumentTypes(), inputResults));
  inputLayer.setPrivate();
  symbols.insert(inputLayer);
  {
    Block *entry = inputLayer.addEntryBlock();
    IRMapping map;
    map.map(body.getArguments(), entry->getArguments());
    SmallVector<Value> results(inputRoots);
    results.append(stacked.begin(), stacked.end());
    cloneAndReturn(entry, inputOps.getArrayRef(), results, map, ret.getLoc());
  }
  // The W layer: (a scalar carried through, the slices of the stacks, the
  // parameter slices) -> (the scalar, the weight gradients).
  auto scalar = RankedTensorType::get({}, b.getF32Type());
  SmallVector<Type> weightArgs{scalar};
  for (Value v : stacked)
    weightArgs.push_back(v.getType());
  for (Value v : paramArgs)
    weightArgs.push_back(v.getType());
  SmallVector<Type> weightResults{scalar};
  for (Value v : weightRoots)
    weightResults.push_back(v.getType());
  b.setInsertionPointAfter(inputLayer);
  auto weightLayer = func::FuncOp::create(
      b, layer.getLoc(), (layer.getSymName() + "_weight").str(),
      b.getFunctionType(weightArgs, weightResults));
  weightLayer.setPrivate();
  symbols.insert(weightLayer);
  {
    Block *entry = weightLayer.addEntryBlock();
    IRMapping map;
    for (auto [i, v] : llvm::enumerate(stacked))
      map.map(v, entry->getArgument(1 + i));
    for (auto [i, v] : llvm::enumerate(paramArgs))
      map.map(v, entry->getArgument(1 + stacked.size() + i));
    SmallVector<Value> results{entry->getArgument(0)};
    results.append(weightRoots.begin(), weightRoots.end());
    cloneAndReturn(entry, weightOnly.getArrayRef(), results, map, ret.getLoc());
  }

  // The two repeats in place of `op`.
  b.setInsertionPoint(op);
  SmallVector<Type> inputTypes(
      TypeRange(op.getResults().take_front(numCarried).getTypes()));
  for (unsigned k : toInput)
    inputTypes.push_back(op.getStackedResults()[k].getType());
  for (Value v : stacked)
    inputTypes.push_back(stackedType(v.getType(), layers));
  auto inputRepeat = nn::RepeatOp::create(
      b, op.getLoc(), inputTypes, FlatSymbolRefAttr::get(inputLayer),
      op.getCarried(), op.getParams(), op.getReverseAttr());
  SmallVector<Value> weightParams(
      inputRepeat.getResults().drop_front(numCarried + toInput.size()));
  for (Value v : paramArgs)
    weightParams.push_back(
        op.getParams()[cast<BlockArgument>(v).getArgNumber() - numCarried]);
  Value zero = nn::ConstantOp::create(
      b, op.getLoc(),
      DenseElementsAttr::get(scalar, b.getFloatAttr(b.getF32Type(), 0.0)));
  SmallVector<Type> weightTypes{scalar};
  for (unsigned k : toWeight)
    weightTypes.push_back(op.getStackedResults()[k].getType());
  auto weightRepeat = nn::RepeatOp::create(
      b, op.getLoc(), weightTypes, FlatSymbolRefAttr::get(weightLayer),
      ValueRange{zero}, weightParams, UnitAttr());
  for (unsigned i = 0; i < numCarried; ++i)
    op.getResult(i).replaceAllUsesWith(inputRepeat.getResult(i));
  for (auto [j, k] : llvm::enumerate(toInput))
    op.getStackedResults()[k].replaceAllUsesWith(
        inputRepeat.getResult(numCarried + j));
  for (auto [j, k] : llvm::enumerate(toWeight))
    op.getStackedResults()[k].replaceAllUsesWith(
        weightRepeat.getResult(1 + j));
  op.erase();
  return true;
}

LogicalResult BackwardSplitter::run(func::FuncOp original) {
  MLIRContext *ctx = module.getContext();
  OpBuilder b(ctx);
  // Work on a copy: the full backward stays for the other schedules.
  b.setInsertionPointAfter(original);
  auto split = cast<func::FuncOp>(b.clone(*original));
  StringRef base = original.getSymName().drop_back(strlen("_backward"));
  split.setSymName((base + "_backward_input").str());
  symbols.insert(split);
  Block &block = split.getBody().front();
  auto ret = cast<func::ReturnOp>(block.getTerminator());

  // B: the loss or output activations and the input gradients; W: the
  // weight gradients.
  SmallVector<unsigned> inputResults, weightResults;
  for (unsigned i = 0; i < split.getNumResults(); ++i)
    (split.getResultAttr(i, nn::NNDialect::kGradAttrName) ? weightResults
                                                          : inputResults)
        .push_back(i);
  auto slices = [&](OpSet &inputOps, OpSet &weightOps) {
    SmallVector<Value> inputRoots, weightRoots;
    for (unsigned i : inputResults)
      inputRoots.push_back(ret.getOperand(i));
    for (unsigned i : weightResults)
      weightRoots.push_back(ret.getOperand(i));
    inputOps = sliceOf(block, inputRoots);
    weightOps.clear();
    for (Operation *op : sliceOf(block, weightRoots))
      if (!inputOps.contains(op))
        weightOps.insert(op);
  };
  OpSet inputOps, weightOps;
  slices(inputOps, weightOps);
  for (Operation *op : llvm::to_vector(inputOps))
    if (auto repeat = dyn_cast<nn::RepeatOp>(op))
      if (splitRepeat(repeat, weightOps))
        slices(inputOps, weightOps);

  SmallVector<Value> stash = crossing(inputOps, weightOps, /*args=*/false);
  // W: the original arguments (W reads parameters and accumulators), then
  // the stash.
  SmallVector<Type> argTypes(split.getArgumentTypes());
  SmallVector<DictionaryAttr> argAttrs;
  for (unsigned i = 0; i < split.getNumArguments(); ++i)
    argAttrs.push_back(split.getArgAttrDict(i) ? split.getArgAttrDict(i)
                                               : b.getDictionaryAttr({}));
  for (auto [k, v] : llvm::enumerate(stash)) {
    argTypes.push_back(v.getType());
    argAttrs.push_back(b.getDictionaryAttr(b.getNamedAttr(
        nn::NNDialect::kStashAttrName, b.getI64IntegerAttr(int64_t(k)))));
  }
  SmallVector<Type> resultTypes;
  SmallVector<DictionaryAttr> resultAttrs;
  for (unsigned i : weightResults) {
    resultTypes.push_back(split.getResultTypes()[i]);
    DictionaryAttr dict = split.getResultAttrDict(i);
    resultAttrs.push_back(dict ? dict : b.getDictionaryAttr({}));
  }
  b.setInsertionPointAfter(split);
  auto weight = func::FuncOp::create(b, original.getLoc(),
                                     (base + "_backward_weight").str(),
                                     b.getFunctionType(argTypes, resultTypes));
  symbols.insert(weight);
  copyNNAttributes(original, weight);
  weight->setAttr(nn::NNDialect::kEntryAttrName,
                  b.getStringAttr("backward_weight"));
  weight.setAllArgAttrs(argAttrs);
  weight.setAllResultAttrs(resultAttrs);
  Block *entry = weight.addEntryBlock();
  IRMapping map;
  map.map(block.getArguments(),
          entry->getArguments().take_front(block.getNumArguments()));
  for (auto [k, v] : llvm::enumerate(stash))
    map.map(v, entry->getArgument(block.getNumArguments() + k));
  SmallVector<Value> weightReturned;
  for (unsigned i : weightResults)
    weightReturned.push_back(ret.getOperand(i));
  cloneAndReturn(entry, weightOps.getArrayRef(), weightReturned, map,
                 ret.getLoc());

  // B: the input part's results, then the stash.
  SmallVector<Value> inputReturned;
  SmallVector<DictionaryAttr> inputAttrs;
  for (unsigned i : inputResults) {
    inputReturned.push_back(ret.getOperand(i));
    DictionaryAttr dict = split.getResultAttrDict(i);
    inputAttrs.push_back(dict ? dict : b.getDictionaryAttr({}));
  }
  for (auto [k, v] : llvm::enumerate(stash)) {
    inputReturned.push_back(v);
    inputAttrs.push_back(b.getDictionaryAttr(b.getNamedAttr(
        nn::NNDialect::kStashAttrName, b.getI64IntegerAttr(int64_t(k)))));
  }
  OpBuilder rb(ret);
  func::ReturnOp::create(rb, ret.getLoc(), inputReturned);
  ret.erase();
  // Drop what only W (or nothing) needed, last use first.
  SmallVector<Operation *> ops = llvm::map_to_vector(
      block.without_terminator(), [](Operation &op) { return &op; });
  for (Operation *op : llvm::reverse(ops))
    if (!inputOps.contains(op) && op->use_empty())
      op->erase();
  split.setFunctionType(
      b.getFunctionType(split.getArgumentTypes(), ValueRange(inputReturned).getTypes()));
  split.setAllResultAttrs(inputAttrs);
  split->setAttr(nn::NNDialect::kEntryAttrName,
                 b.getStringAttr("backward_input"));
  return success();
}

struct SplitBackwardPass
    : tessel::impl::SplitBackwardPassBase<SplitBackwardPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (!module->hasAttr(nn::NNDialect::kSplitBackwardAttrName))
      return;
    if (failed(nn::RepeatOp::refuseOuts(module, "tessel-split-backward")))
      return signalPassFailure();
    func::FuncOp backward;
    for (auto func : module.getOps<func::FuncOp>())
      if (auto entry =
              func->getAttrOfType<StringAttr>(nn::NNDialect::kEntryAttrName);
          entry && entry.getValue() == "backward")
        backward = func;
    if (!backward)
      return; // Evaluation only.
    BackwardSplitter splitter(module);
    if (failed(splitter.run(backward)))
      return signalPassFailure();
  }
};

} // namespace
