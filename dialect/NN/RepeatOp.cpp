//===- RepeatOp.cpp - nn.repeat: a layer function applied L times ---------===//

#include "dialect/NN/NNOps.h"
#include "dialect/NN/NNOpsUtils.h"

#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallPtrSet.h"

using namespace mlir;
using namespace tessel;
using namespace tessel::nn;

int64_t RepeatOp::getNumLayers() {
  return cast<RankedTensorType>(getParams().front().getType()).getDimSize(0);
}

func::FuncOp RepeatOp::getLayerFunction() {
  return SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(*this,
                                                            getLayerAttr());
}

func::FuncOp RepeatOp::getPrefetchFunction() {
  if (!getPrefetchAttr())
    return nullptr;
  return SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(*this,
                                                            getPrefetchAttr());
}

func::FuncOp RepeatOp::getFinishFunction() {
  if (!getFinishAttr())
    return nullptr;
  return SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(*this,
                                                            getFinishAttr());
}

/// How many of `op`'s stacked results its finish function returns (after
/// the outs slices it returns first).
static unsigned numFinishResults(RepeatOp op) {
  func::FuncOp finish = op.getFinishFunction();
  if (!finish || finish.getNumResults() < op.getOuts().size())
    return 0;
  return std::min<unsigned>(finish.getNumResults() - op.getOuts().size(),
                            op.getStackedResults().size());
}

ResultRange RepeatOp::getLayerStackedResults() {
  ResultRange stacked = getStackedResults();
  return stacked.take_front(stacked.size() - numFinishResults(*this));
}

ResultRange RepeatOp::getFinishStackedResults() {
  ResultRange stacked = getStackedResults();
  return stacked.drop_front(stacked.size() - numFinishResults(*this));
}

unsigned RepeatOp::getNumInFlight() {
  func::FuncOp finish = getFinishFunction();
  if (!finish || finish.getNumArguments() < getOuts().size())
    return 0;
  return finish.getNumArguments() - getOuts().size();
}

LogicalResult RepeatOp::refuseOuts(Operation *root, StringRef pass) {
  WalkResult result = root->walk([&](RepeatOp repeat) {
    if (repeat.getOuts().empty())
      return WalkResult::advance();
    repeat.emitOpError() << "has outs (updated in place, the form "
                            "tessel-accumulate-in-layers makes after the "
                            "passes that differentiate, split, shard or cast "
                            "a repeat); "
                         << pass << " takes repeats without outs";
    return WalkResult::interrupt();
  });
  return failure(result.wasInterrupted());
}

LogicalResult RepeatOp::verify() {
  if (getCarried().empty())
    return emitOpError() << "needs at least one carried value (the layer's "
                            "input activation)";
  if (getParams().empty())
    return emitOpError() << "needs at least one stacked parameter; a layer "
                            "without parameters can be written inline";
  if (getNumResults() < getCarried().size() ||
      !llvm::equal(getCarriedResults().getTypes(), getCarried().getTypes()))
    return emitOpError() << "results (" << getResultTypes()
                         << ") must start with the types of the carried "
                            "values ("
                         << getCarried().getTypes() << ")";
  if (getNumResults() < getCarried().size() + getOuts().size() ||
      !llvm::equal(getOutsResults().getTypes(), getOuts().getTypes()))
    return emitOpError() << "results (" << getResultTypes()
                         << ") must continue with the types of the outs ("
                         << getOuts().getTypes()
                         << ") after the carried values";
  int64_t numLayers = -1;
  for (auto [index, param] : llvm::enumerate(getParams())) {
    auto type = cast<RankedTensorType>(param.getType());
    if (type.getRank() == 0 || type.getDimSize(0) < 1)
      return emitOpError() << "stacked parameter #" << index
                           << " needs a leading layer axis, got " << type;
    if (numLayers >= 0 && type.getDimSize(0) != numLayers)
      return emitOpError() << "stacked parameter #" << index << " has "
                           << type.getDimSize(0)
                           << " layers on its leading axis but #0 has "
                           << numLayers;
    numLayers = type.getDimSize(0);
    // A model argument stacked for repeat says so in its logical axes.
    auto arg = dyn_cast<BlockArgument>(param);
    auto func = arg ? dyn_cast<FunctionOpInterface>(arg.getOwner()->getParentOp())
                    : FunctionOpInterface();
    if (func && arg.getOwner()->isEntryBlock())
      if (auto axes = func.getArgAttrOfType<ArrayAttr>(arg.getArgNumber(),
                                                       NNDialect::kAxesAttrName))
        if (!axes.empty() && axes[0] != StringAttr::get(getContext(), "layers"))
          return emitOpError()
                 << "stacked parameter #" << index << " (argument #"
                 << arg.getArgNumber() << ") must name its leading axis "
                 << "\"layers\" in nn.axes, got " << axes[0];
  }
  // The outs and the stacked results are on the parameters' layer axis.
  auto onLayerAxis = [&](ValueRange values, StringRef what) -> LogicalResult {
    for (auto [index, value] : llvm::enumerate(values)) {
      auto type = cast<RankedTensorType>(value.getType());
      if (type.getRank() == 0 || type.getDimSize(0) != numLayers)
        return emitOpError() << what << " #" << index
                             << " needs a leading layer axis of size "
                             << numLayers << ", got " << type;
    }
    return success();
  };
  if (failed(onLayerAxis(getOuts(), "outs")))
    return failure();
  return onLayerAxis(getStackedResults(), "stacked result");
}

/// Fails when following nn.repeat layers from `layer` reaches a function
/// already on the path.
static LogicalResult checkNoRecursion(Operation *user, func::FuncOp layer,
                                      SymbolTableCollection &symbolTable,
                                      llvm::SmallPtrSetImpl<Operation *> &path) {
  if (!path.insert(layer).second)
    return user->emitOpError() << "layer @" << layer.getSymName()
                               << " repeats itself (recursive nn.repeat)";
  WalkResult result = layer.walk([&](RepeatOp inner) {
    auto innerLayer = symbolTable.lookupNearestSymbolFrom<func::FuncOp>(
        inner, inner.getLayerAttr());
    if (innerLayer &&
        failed(checkNoRecursion(user, innerLayer, symbolTable, path)))
      return WalkResult::interrupt();
    return WalkResult::advance();
  });
  path.erase(layer);
  return failure(result.wasInterrupted());
}

LogicalResult RepeatOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  auto layer =
      symbolTable.lookupNearestSymbolFrom<func::FuncOp>(*this, getLayerAttr());
  if (!layer)
    return emitOpError() << "layer '" << getLayer()
                         << "' does not name a func.func";
  if (layer.isExternal())
    return emitOpError() << "layer @" << getLayer()
                         << " is a declaration; nn.repeat needs its body";
  auto unstacked = [](Value stacked) -> Type {
    auto type = cast<RankedTensorType>(stacked.getType());
    return RankedTensorType::get(type.getShape().drop_front(),
                                 type.getElementType());
  };
  SmallVector<Type> expectedInputs = llvm::to_vector(getCarried().getTypes());
  SmallVector<Type> slices = llvm::map_to_vector(getParams(), unstacked);
  SmallVector<Type> outSlices = llvm::map_to_vector(getOuts(), unstacked);
  expectedInputs.append(slices);
  expectedInputs.append(outSlices);
  if (getPrefetchAttr()) {
    auto prefetch = symbolTable.lookupNearestSymbolFrom<func::FuncOp>(
        *this, getPrefetchAttr());
    if (!prefetch || prefetch.isExternal() ||
        !prefetch->hasAttr(NNDialect::kPrefetchAttrName))
      return emitOpError() << "prefetch '" << *getPrefetch()
                           << "' does not name a func.func with a body marked '"
                           << NNDialect::kPrefetchAttrName << "'";
    if (prefetch.getFunctionType().getInputs() != ArrayRef<Type>(slices))
      return emitOpError() << "prefetch @" << *getPrefetch() << " has type "
                           << prefetch.getFunctionType()
                           << " but must take one slice of each stacked "
                              "parameter ("
                           << slices << ")";
    llvm::append_range(expectedInputs,
                       prefetch.getFunctionType().getResults());
  }
  SmallVector<Type> expectedResults = llvm::to_vector(getCarried().getTypes());
  expectedResults.append(outSlices);
  unsigned numInFlight = 0;
  if (getFinishAttr()) {
    auto finish = symbolTable.lookupNearestSymbolFrom<func::FuncOp>(
        *this, getFinishAttr());
    if (!finish || finish.isExternal() ||
        !finish->hasAttr(NNDialect::kFinishAttrName))
      return emitOpError() << "finish '" << *getFinish()
                           << "' does not name a func.func with a body marked '"
                           << NNDialect::kFinishAttrName << "'";
    FunctionType finishType = finish.getFunctionType();
    if (finish.getNumResults() < outSlices.size() ||
        finish.getNumResults() - outSlices.size() > getStackedResults().size())
      return emitOpError() << "finish @" << *getFinish() << " returns "
                           << finish.getNumResults() << " results but this "
                           << "repeat has " << outSlices.size()
                           << " outs and stacks only "
                           << getStackedResults().size() << " results";
    // The outs slices, updated in place, then the last stacked results.
    SmallVector<Type> stackedSlices =
        llvm::map_to_vector(getFinishStackedResults(), unstacked);
    SmallVector<Type> finished(outSlices);
    llvm::append_range(finished, stackedSlices);
    if (finishType.getResults() != ArrayRef<Type>(finished) ||
        finish.getNumArguments() < outSlices.size() ||
        finishType.getInputs().take_back(outSlices.size()) !=
            ArrayRef<Type>(outSlices))
      return emitOpError() << "finish @" << *getFinish() << " has type "
                           << finishType
                           << " but must take what the layer returns in "
                              "flight, then one slice of each outs ("
                           << outSlices << "), and return those slices, then "
                           << "one slice of each of the repeat's last stacked "
                              "results ("
                           << stackedSlices << ")";
    numInFlight = finish.getNumArguments() - outSlices.size();
  }
  llvm::append_range(expectedResults,
                     llvm::map_range(getLayerStackedResults(), unstacked));
  if (func::FuncOp finish = getFinishFunction())
    llvm::append_range(expectedResults,
                       finish.getArgumentTypes().take_front(numInFlight));
  FunctionType layerType = layer.getFunctionType();
  if (layerType.getInputs() != ArrayRef<Type>(expectedInputs) ||
      layerType.getResults() != ArrayRef<Type>(expectedResults))
    return emitOpError() << "layer @" << getLayer() << " has type " << layerType
                         << " but this repeat needs "
                         << FunctionType::get(getContext(), expectedInputs,
                                              expectedResults)
                         << " (carried values, then one slice of each stacked "
                            "parameter and of each outs, then what the "
                            "prefetch returns; the carried values, then one "
                            "slice of each outs, then of each stacked result "
                            "the finish does not return, then what the finish "
                            "takes)";
  for (unsigned i = layerType.getNumResults() - numInFlight;
       i < layerType.getNumResults(); ++i)
    if (!layer.getResultAttr(i, NNDialect::kInFlightAttrName))
      return emitOpError() << "layer @" << getLayer() << " result #" << i
                           << " goes to the finish, so it must be marked '"
                           << NNDialect::kInFlightAttrName << "'";
  llvm::SmallPtrSet<Operation *, 4> path;
  if (auto parent = (*this)->getParentOfType<func::FuncOp>())
    path.insert(parent);
  return checkNoRecursion(*this, layer, symbolTable, path);
}

/// The cost of every layer application: L times the layer body's.
static CostSummary repeatedBodyCost(RepeatOp op) {
  func::FuncOp layer = op.getLayerFunction();
  if (!layer || layer.isExternal())
    return {};
  CostSummary perLayer = sumCost(layer.getBody().front());
  if (func::FuncOp finish = op.getFinishFunction();
      finish && !finish.isExternal()) {
    CostSummary finishing = sumCost(finish.getBody().front());
    perLayer.flops = nn::detail::satAdd(perLayer.flops, finishing.flops);
    perLayer.bytes = nn::detail::satAdd(perLayer.bytes, finishing.bytes);
    perLayer.numOps += finishing.numOps;
  }
  return {nn::detail::satMul(op.getNumLayers(), perLayer.flops),
          nn::detail::satMul(op.getNumLayers(), perLayer.bytes),
          perLayer.numOps};
}

int64_t RepeatOp::getFlops() { return repeatedBodyCost(*this).flops; }

int64_t RepeatOp::getBytesAccessed() { return repeatedBodyCost(*this).bytes; }
