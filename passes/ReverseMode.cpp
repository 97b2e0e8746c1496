//===- ReverseMode.cpp - Reverse mode over nn functions -------------------===//
//
// Reverse mode over nn ops: every op's derivative comes from its
// VJPOpInterface; nn.repeat, whose derivative needs new layer functions and
// changes what the forward keeps, is differentiated here.
//
//===----------------------------------------------------------------------===//

#include "passes/ReverseMode.h"

#include "dialect/NN/NNInterfaces.h"

#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SetVector.h"

using namespace mlir;
using namespace tessel;
using namespace tessel::autodiff;

namespace {

RankedTensorType tensorType(Value value) {
  return cast<RankedTensorType>(value.getType());
}

bool isFloat(Type type) {
  return isa<FloatType>(cast<RankedTensorType>(type).getElementType());
}

/// Flops per result element: what selective recompute weighs an op by.
double flopsPerElement(Operation *op) {
  auto cost = dyn_cast<nn::CostOpInterface>(op);
  if (!cost || op->getNumResults() == 0)
    return 0;
  int64_t elements = 0;
  for (Value result : op->getResults())
    elements += tensorType(result).getNumElements();
  return elements ? static_cast<double>(cost.getFlops()) / elements : 0;
}

} // namespace

Value tessel::autodiff::zerosLike(OpBuilder &b, Location loc, Type type) {
  auto tensor = cast<RankedTensorType>(type);
  return nn::ConstantOp::create(
      b, loc,
      DenseElementsAttr::get(
          tensor, b.getFloatAttr(tensor.getElementType(), 0.0)));
}

bool tessel::autodiff::hasMasterWeights(ModuleOp module, Type paramType) {
  auto precision =
      module->getAttrOfType<StringAttr>(nn::NNDialect::kPrecisionAttrName);
  return precision && precision.getValue() == "bf16" &&
         cast<RankedTensorType>(paramType).getElementType().isBF16();
}

Type tessel::autodiff::gradientType(ModuleOp module, Type paramType) {
  auto grads =
      module->getAttrOfType<StringAttr>(nn::NNDialect::kGradPrecisionAttrName);
  if (!hasMasterWeights(module, paramType) || !grads ||
      grads.getValue() != "f32")
    return paramType;
  return RankedTensorType::get(cast<RankedTensorType>(paramType).getShape(),
                               Float32Type::get(paramType.getContext()));
}

FailureOr<SmallVector<Value>>
ReverseMode::differentiate(func::FuncOp func,
                           ArrayRef<std::pair<Value, Value>> seeds,
                           ArrayRef<Value> wrt,
                           ArrayRef<std::string> wrtNames,
                           SmallVectorImpl<Operation *> *forwardOps) {
  Block &body = func.getBody().front();
  Operation *terminator = body.getTerminator();
  SmallVector<Operation *> forward = llvm::map_to_vector(
      body.without_terminator(), [](Operation &op) { return &op; });

  // Which of `wrt` each value depends on (the first one found): only these
  // values need cotangents, and a diagnostic names the parameter.
  DenseMap<Value, unsigned> source;
  for (auto [index, value] : llvm::enumerate(wrt))
    source.try_emplace(value, index);
  for (Operation *op : forward) {
    std::optional<unsigned> from;
    for (Value operand : op->getOperands())
      if (auto it = source.find(operand); it != source.end()) {
        from = it->second;
        break;
      }
    if (from)
      for (Value result : op->getResults())
        source.try_emplace(result, *from);
  }

  OpBuilder b(terminator);
  DenseMap<Value, Value> cotangent;
  auto accumulate = [&](Value value, Value grad, Location loc) {
    auto [it, inserted] = cotangent.try_emplace(value, grad);
    if (inserted)
      return;
    // A layer stack's gradient may arrive widened (f32 gradients of bf16
    // parameters): the sum takes the wider type.
    Value sum = it->second;
    auto width = [](Value v) {
      return tensorType(v).getElementType().getIntOrFloatBitWidth();
    };
    if (width(sum) < width(grad))
      sum = nn::CastOp::create(b, loc, grad.getType(), sum);
    else if (width(grad) < width(sum))
      grad = nn::CastOp::create(b, loc, sum.getType(), grad);
    it->second = nn::AddOp::create(b, loc, sum, grad);
  };
  for (auto [value, seed] : seeds)
    accumulate(value, seed, seed.getLoc());

  for (Operation *&op : llvm::reverse(forward)) {
    SmallVector<Value> resultCotangents;
    bool reachesSeed = false;
    for (Value result : op->getResults()) {
      resultCotangents.push_back(cotangent.lookup(result));
      reachesSeed |= resultCotangents.back() != nullptr;
    }
    SmallVector<bool> needed;
    std::optional<unsigned> activeSource;
    for (Value operand : op->getOperands()) {
      auto it = source.find(operand);
      needed.push_back(it != source.end());
      if (it != source.end() && !activeSource)
        activeSource = it->second;
    }
    if (!reachesSeed || !activeSource)
      continue;
    SmallVector<Value> operands = llvm::to_vector(op->getOperands());
    b.setInsertionPoint(terminator);
    FailureOr<SmallVector<Value>> grads;
    if (auto repeat = dyn_cast<nn::RepeatOp>(op)) {
      Operation *keeping = nullptr;
      grads = differentiateRepeat(repeat, resultCotangents, needed, b, keeping);
      if (succeeded(grads))
        op = keeping; // The forward list now holds the keeping repeat.
    } else if (auto vjp = dyn_cast<nn::VJPOpInterface>(op)) {
      grads = vjp.buildVJP(b, resultCotangents, needed);
    } else {
      return op->emitOpError()
             << "has no derivative, but parameter '" << wrtNames[*activeSource]
             << "' reaches the loss through it";
    }
    if (failed(grads))
      return failure();
    for (auto [index, operand] : llvm::enumerate(operands)) {
      if (!needed[index])
        continue;
      Value grad = (*grads)[index];
      if (!grad) {
        // An integer operand (ids, labels, a cast to an integer) that a
        // parameter flows into: its derivative is undefined, not zero.
        return op->emitOpError()
               << "operand #" << index << " is not differentiable, but "
               << "parameter '" << wrtNames[source.lookup(operand)]
               << "' reaches the loss through it";
      }
      accumulate(operand, grad, op->getLoc());
    }
  }
  if (forwardOps)
    forwardOps->assign(forward.begin(), forward.end());
  return llvm::map_to_vector(wrt,
                             [&](Value value) { return cotangent.lookup(value); });
}

func::FuncOp ReverseMode::cloneFunction(func::FuncOp func, StringRef suffix,
                                        IRMapping &mapping) {
  func::FuncOp copy = func.cloneWithoutRegions();
  func.getBody().cloneInto(&copy.getBody(), mapping);
  copy.setSymName((func.getSymName() + suffix).str());
  copy.setPrivate();
  copy->removeAttr(nn::NNDialect::kRecomputeAttrName);
  symbols.insert(copy, std::next(Block::iterator(func)));
  return copy;
}

FailureOr<func::FuncOp>
ReverseMode::buildLayerDerivative(func::FuncOp layer, unsigned numCarried,
                                  ArrayRef<bool> wantParam,
                                  SmallVectorImpl<Value> &kept) {
  FunctionType layerType = layer.getFunctionType();
  ArrayRef<Type> outputs = layerType.getResults();
  unsigned numInputs = layerType.getNumInputs();
  Location loc = layer.getLoc();

  // (d outputs..., layer inputs...) -> (d float inputs...); the kept
  // forward values are the layer's own inputs until the recompute policy
  // adds more (below).
  SmallVector<Type> argTypes(outputs.begin(), outputs.end());
  argTypes.append(layerType.getInputs().begin(), layerType.getInputs().end());
  OpBuilder b(module.getContext());
  auto derivative = func::FuncOp::create(
      b, loc, (layer.getSymName() + "_derivative").str(),
      b.getFunctionType(argTypes, {}));
  derivative.setPrivate();
  symbols.insert(derivative, std::next(Block::iterator(layer)));
  Block *entry = derivative.addEntryBlock();
  ValueRange dOutputs = entry->getArguments().take_front(outputs.size());
  ValueRange inputs = entry->getArguments().drop_front(outputs.size());

  // Recompute the layer's forward from its inputs.
  IRMapping mapping;
  mapping.map(layer.getArguments(), inputs);
  b.setInsertionPointToEnd(entry);
  SmallVector<Operation *> recomputed;
  SmallVector<ValueRange> layerResults; // per recomputed op, the layer's
  Operation *layerReturn = layer.getBody().front().getTerminator();
  for (Operation &op : layer.getBody().front().without_terminator()) {
    recomputed.push_back(b.clone(op, mapping));
    layerResults.push_back(op.getResults());
  }
  auto ret = func::ReturnOp::create(b, loc, ValueRange{});

  SmallVector<std::pair<Value, Value>> seeds;
  for (auto [value, dOutput] : llvm::zip(layerReturn->getOperands(), dOutputs))
    seeds.push_back({mapping.lookupOrDefault(value), dOutput});
  SmallVector<Value> wrt;
  SmallVector<std::string> names;
  // Every carried input's cotangent is the next layer's seed; a parameter
  // slice's only where its gradient is wanted.
  for (auto [index, input] : llvm::enumerate(inputs))
    if (isFloat(input.getType()) &&
        (index < numCarried || wantParam[index - numCarried])) {
      wrt.push_back(input);
      names.push_back("@" + layer.getSymName().str() + " argument #" +
                      std::to_string(index));
    }
  // A nested repeat in the layer is replaced by its keeping form while it
  // is differentiated: take the forward ops as they are afterwards.
  FailureOr<SmallVector<Value>> grads =
      differentiate(derivative, seeds, wrt, names, &recomputed);
  if (failed(grads))
    return failure();
  // Recomputed value -> the layer's value (a keeping repeat's first
  // results are the repeat's it replaced).
  DenseMap<Value, Value> original;
  for (auto [op, results] : llvm::zip(recomputed, layerResults))
    for (auto [to, from] : llvm::zip(op->getResults(), results))
      original[to] = from;
  b.setInsertionPoint(ret);
  SmallVector<Value> results;
  for (auto [input, grad] : llvm::zip(wrt, *grads)) {
    Value result = grad ? grad : zerosLike(b, loc, input.getType());
    // A parameter slice's gradient leaves the layer in the gradients' type,
    // so a partitioned step reduces it in that type.
    Type type = gradientType(module, input.getType());
    if (cast<BlockArgument>(input).getArgNumber() >=
            outputs.size() + numCarried &&
        result.getType() != type)
      result = nn::CastOp::create(b, loc, type, result);
    results.push_back(result);
  }
  ret->setOperands(results);

  // Keep, instead of recomputing, what the policy says. `none` keeps every
  // forward value the backward reads. `selective` (JAX's dots_saveable)
  // keeps only results of expensive ops (more than 8 flops per element:
  // matmuls, attention); a cheap value the backward reads is recomputed
  // from its operands, which are kept or recomputed in turn.
  StringRef policy = recomputePolicy(layer);
  llvm::DenseSet<Operation *> isRecomputed(recomputed.begin(), recomputed.end());
  llvm::SetVector<Value> readByBackward;
  // A value the layer itself does not compute (what a nested repeat keeps
  // for its own derivative) cannot be kept by the layer's forward: it is
  // recomputed.
  for (Operation *op : recomputed)
    for (Value result : op->getResults())
      if (isFloat(result.getType()) && original.contains(result) &&
          llvm::any_of(result.getUsers(), [&](Operation *user) {
            return !isRecomputed.contains(user);
          }))
        readByBackward.insert(result);
  llvm::SetVector<Value> keep;
  if (policy == "none")
    keep = readByBackward;
  if (policy == "selective") {
    SmallVector<Value> worklist(readByBackward.begin(), readByBackward.end());
    llvm::DenseSet<Value> visited(worklist.begin(), worklist.end());
    while (!worklist.empty()) {
      Value value = worklist.pop_back_val();
      Operation *def = value.getDefiningOp();
      if (!def || !isRecomputed.contains(def))
        continue; // a layer input: always at hand
      if (flopsPerElement(def) > 8.0 && original.contains(value)) {
        keep.insert(value);
        continue;
      }
      for (Value operand : def->getOperands())
        if (isFloat(operand.getType()) && visited.insert(operand).second)
          worklist.push_back(operand);
    }
  }
  // A reshape is a view: keep what it views, and let the derivative reshape
  // again, instead of stacking the bytes twice when the backward reads both
  // (an attention's output, read by its gradient, and its reshape, read by
  // the projection's weight gradient). A view of a layer input needs
  // nothing kept.
  llvm::SetVector<Value> viewed;
  for (Value value : keep) {
    Value base = value;
    while (auto reshape = base.getDefiningOp<nn::ReshapeOp>()) {
      if (!isRecomputed.contains(reshape))
        break;
      base = reshape.getInput();
    }
    Operation *def = base.getDefiningOp();
    if (!def || !isRecomputed.contains(def))
      continue; // a layer input: at hand
    viewed.insert(original.contains(base) ? base : value);
  }
  keep = std::move(viewed);
  // In forward order, so the stacked results read like the layer.
  SmallVector<Value> keptHere;
  for (Operation *op : recomputed)
    for (Value result : op->getResults())
      if (keep.contains(result))
        keptHere.push_back(result);
  for (Value value : keptHere) {
    BlockArgument arg = entry->addArgument(value.getType(), value.getLoc());
    value.replaceAllUsesWith(arg);
  }
  for (Operation *op : llvm::reverse(recomputed))
    if (op->use_empty() && isPure(op))
      op->erase();

  // The kept values are the layer's inputs (carried activations and
  // parameter slices come in anyway: parameters are not stacked again) and
  // the values above. Drop what the backward no longer reads.
  SmallVector<unsigned> keepArgs;
  for (unsigned i = 0; i < outputs.size(); ++i)
    keepArgs.push_back(i);
  kept.clear();
  for (unsigned i = 0; i < numInputs; ++i)
    keepArgs.push_back(outputs.size() + i);
  for (auto [index, value] : llvm::enumerate(keptHere)) {
    unsigned argIndex = outputs.size() + numInputs + index;
    if (entry->getArgument(argIndex).use_empty())
      continue;
    keepArgs.push_back(argIndex);
    kept.push_back(original.lookup(value));
  }
  llvm::BitVector erase(entry->getNumArguments(), true);
  for (unsigned index : keepArgs)
    erase.reset(index);
  entry->eraseArguments(erase);
  derivative.setFunctionType(b.getFunctionType(
      entry->getArgumentTypes(), ret->getOperandTypes()));
  return derivative;
}

FailureOr<SmallVector<Value>>
ReverseMode::differentiateRepeat(nn::RepeatOp op, ArrayRef<Value> cotangents,
                                 ArrayRef<bool> needed, OpBuilder &b,
                                 Operation *&keeping) {
  func::FuncOp layer = op.getLayerFunction();
  Location loc = op.getLoc();
  unsigned numCarried = op.getCarried().size();
  int64_t numLayers = op.getNumLayers();
  // Cotangents flow through every carried value and per-layer output.
  for (Type type : op.getResultTypes())
    if (!isFloat(type))
      return op.emitOpError()
             << "carries or stacks an integer tensor (" << type
             << "); a repeat on a parameter's path to the loss can only "
                "carry float tensors";
  auto stacked = [&](Type type) -> Type {
    auto tensor = cast<RankedTensorType>(type);
    SmallVector<int64_t> shape{numLayers};
    shape.append(tensor.getShape().begin(), tensor.getShape().end());
    return RankedTensorType::get(shape, tensor.getElementType());
  };

  // The parameters whose gradients are wanted: not frozen ones, nor
  // integer tables.
  SmallVector<bool> wantParam;
  for (auto [index, param] : llvm::enumerate(op.getParams()))
    wantParam.push_back(isFloat(param.getType()) && needed[numCarried + index]);
  SmallVector<Value> keptInLayer;
  FailureOr<func::FuncOp> derivative =
      buildLayerDerivative(layer, numCarried, wantParam, keptInLayer);
  if (failed(derivative))
    return failure();
  FunctionType layerType = layer.getFunctionType();
  ArrayRef<Type> carriedTypes = layerType.getInputs().take_front(numCarried);

  // The forward keeps, per layer, its carried inputs and the values the
  // derivative reads: a layer function that also returns them, stacked by
  // the repeat. The derivative's arguments after the output cotangents
  // are the layer's inputs and then the kept values; its carried inputs
  // come from the stack, its parameter slices from the parameters.
  SmallVector<Value> forwardKept;
  {
    IRMapping mapping;
    func::FuncOp keepingLayer = cloneFunction(layer, "_keep", mapping);
    Operation *ret = keepingLayer.getBody().front().getTerminator();
    SmallVector<Value> returned = llvm::to_vector(ret->getOperands());
    for (BlockArgument carried :
         keepingLayer.getArguments().take_front(numCarried))
      returned.push_back(carried);
    for (Value value : keptInLayer)
      returned.push_back(mapping.lookup(value));
    ret->setOperands(returned);
    keepingLayer.setFunctionType(b.getFunctionType(layerType.getInputs(),
                                              ValueRange(returned).getTypes()));

    SmallVector<Type> resultTypes = llvm::to_vector(op.getResultTypes());
    for (Value value : ValueRange(returned).drop_front(op.getNumResults()))
      resultTypes.push_back(stacked(value.getType()));
    OpBuilder forwardBuilder(op);
    auto keepingRepeat = nn::RepeatOp::create(
        forwardBuilder, loc, resultTypes,
        FlatSymbolRefAttr::get(keepingLayer.getSymNameAttr()), op.getCarried(),
        op.getParams());
    keepingRepeat.setReverse(op.getReverse());
    op->replaceAllUsesWith(
        keepingRepeat.getResults().take_front(op.getNumResults()));
    keeping = keepingRepeat;
    for (Value kept : keepingRepeat.getResults().drop_front(op.getNumResults()))
      forwardKept.push_back(kept);
  }

  // The backward repeat: carried = d carried outputs; per layer: d stacked
  // outputs, the kept carried inputs, parameter slices, other kept values.
  SmallVector<Value> carried, params;
  for (auto [index, type] : llvm::enumerate(op.getResultTypes())) {
    Value grad = cotangents[index];
    if (!grad)
      grad = zerosLike(b, loc, type);
    (index < numCarried ? carried : params).push_back(grad);
  }
  ValueRange keptCarried = ValueRange(forwardKept).take_front(numCarried);
  ValueRange keptValues = ValueRange(forwardKept).drop_front(numCarried);
  params.append(keptCarried.begin(), keptCarried.end());
  params.append(op.getParams().begin(), op.getParams().end());
  // Only the kept values the derivative still reads: buildLayerDerivative
  // dropped the others and listed the rest in order in keptInLayer.
  params.append(keptValues.begin(), keptValues.end());

  SmallVector<Type> resultTypes(carriedTypes.begin(), carriedTypes.end());
  SmallVector<unsigned> wantedParams;
  for (auto [index, param] : llvm::enumerate(op.getParams()))
    if (wantParam[index]) {
      wantedParams.push_back(index);
      // The stacked gradient, in the type the derivative returns it in.
      Type element =
          cast<RankedTensorType>(
              derivative
                  ->getResultTypes()[numCarried + wantedParams.size() - 1])
              .getElementType();
      resultTypes.push_back(
          RankedTensorType::get(tensorType(param).getShape(), element));
    }
  auto backward = nn::RepeatOp::create(
      b, loc, resultTypes,
      FlatSymbolRefAttr::get(derivative->getSymNameAttr()), carried, params);
  backward.setReverse(!op.getReverse());

  // Cotangents of the repeat's operands: carried values, then parameters
  // (integer parameters and those not wanted have none).
  SmallVector<Value> result(backward.getResults().take_front(numCarried));
  SmallVector<Value> paramGrads(op.getParams().size());
  for (auto [slot, index] : llvm::enumerate(wantedParams))
    paramGrads[index] = backward.getResult(numCarried + slot);
  result.append(paramGrads.begin(), paramGrads.end());
  op->erase();
  return result;
}
