//===- Autodiff.cpp - tessel-autodiff: the training step of a model -------===//
//
// Reverse mode over nn ops: every op's derivative comes from its
// VJPOpInterface; nn.repeat, whose derivative needs new layer functions and
// changes what the forward keeps, is differentiated here.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"
#include "passes/TrainSettings.h"
#include "runtime/config/NamePattern.h"

#include "dialect/NN/NNInterfaces.h"
#include "dialect/NN/NNOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringSwitch.h"

#include <optional>
#include <string>

namespace tessel {
#define GEN_PASS_DEF_AUTODIFFPASS
#include "passes/Passes.h.inc"
} // namespace tessel

using namespace mlir;
using namespace tessel;

namespace {

//===----------------------------------------------------------------------===//
// Reverse mode
//===----------------------------------------------------------------------===//

RankedTensorType tensorType(Value value) {
  return cast<RankedTensorType>(value.getType());
}

bool isFloat(Type type) {
  return isa<FloatType>(cast<RankedTensorType>(type).getElementType());
}

Value zerosLike(OpBuilder &b, Location loc, Type type) {
  auto tensor = cast<RankedTensorType>(type);
  return nn::ConstantOp::create(
      b, loc,
      DenseElementsAttr::get(
          tensor, b.getFloatAttr(tensor.getElementType(), 0.0)));
}

//===----------------------------------------------------------------------===//
// Mixed precision (tessel-mixed-precision's module attributes)
//===----------------------------------------------------------------------===//

ModuleOp moduleOf(func::FuncOp func) {
  return func->getParentOfType<ModuleOp>();
}

/// A parameter of type `paramType` stored in bf16 by mixed precision: its
/// optimizer keeps an f32 master copy, the first of its states.
bool hasMasterWeights(ModuleOp module, Type paramType) {
  auto precision =
      module->getAttrOfType<StringAttr>(nn::NNDialect::kPrecisionAttrName);
  return precision && precision.getValue() == "bf16" &&
         cast<RankedTensorType>(paramType).getElementType().isBF16();
}

/// The type a parameter of type `paramType` gets its gradient in: f32 for a
/// bf16 parameter when the module's nn.grad_precision is f32, else its own.
Type gradientType(ModuleOp module, Type paramType) {
  auto grads =
      module->getAttrOfType<StringAttr>(nn::NNDialect::kGradPrecisionAttrName);
  if (!hasMasterWeights(module, paramType) || !grads ||
      grads.getValue() != "f32")
    return paramType;
  return RankedTensorType::get(cast<RankedTensorType>(paramType).getShape(),
                               Float32Type::get(paramType.getContext()));
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

class ReverseMode {
public:
  ReverseMode(ModuleOp module, SymbolTable &symbols, StringRef recompute)
      : module(module), symbols(symbols), defaultRecompute(recompute) {}

  /// Appends to `func`'s body, before its terminator, the ops that compute
  /// the cotangent of each of `wrt` from the cotangents `seeds` of some of
  /// its values. A null result: that value does not reach a seed.
  FailureOr<SmallVector<Value>>
  differentiate(func::FuncOp func, ArrayRef<std::pair<Value, Value>> seeds,
                ArrayRef<Value> wrt, ArrayRef<std::string> wrtNames,
                SmallVectorImpl<Operation *> *forwardOps = nullptr);

private:
  /// Also replaces `op` by a repeat that keeps what the derivative reads,
  /// returned in `keeping`.
  FailureOr<SmallVector<Value>> differentiateRepeat(nn::RepeatOp op,
                                                    ArrayRef<Value> cotangents,
                                                    OpBuilder &b,
                                                    Operation *&keeping);
  /// The derivative of `layer`: (d outputs, kept values, params) ->
  /// (d carried inputs, d float params). `kept` gets the layer's values the
  /// derivative reads, which its forward must stack.
  FailureOr<func::FuncOp> buildLayerDerivative(func::FuncOp layer,
                                               unsigned numCarried,
                                               SmallVectorImpl<Value> &kept);
  StringRef recomputePolicy(func::FuncOp layer) const {
    if (auto policy =
            layer->getAttrOfType<StringAttr>(nn::NNDialect::kRecomputeAttrName))
      return policy.getValue();
    return defaultRecompute;
  }
  /// A copy of `func` named after it with `suffix`, placed after it.
  func::FuncOp cloneFunction(func::FuncOp func, StringRef suffix,
                             IRMapping &mapping);

  ModuleOp module;
  SymbolTable &symbols;
  StringRef defaultRecompute;
};

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
      grads = differentiateRepeat(repeat, resultCotangents, b, keeping);
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
  for (auto [index, input] : llvm::enumerate(inputs))
    if (isFloat(input.getType())) {
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
                                 OpBuilder &b, Operation *&keeping) {
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

  SmallVector<Value> keptInLayer;
  FailureOr<func::FuncOp> derivative =
      buildLayerDerivative(layer, numCarried, keptInLayer);
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
  SmallVector<unsigned> floatParams;
  for (auto [index, param] : llvm::enumerate(op.getParams()))
    if (isFloat(param.getType())) {
      floatParams.push_back(index);
      // The stacked gradient, in the type the derivative returns it in.
      Type element = cast<RankedTensorType>(
                         derivative->getResultTypes()[numCarried +
                                                      floatParams.size() - 1])
                         .getElementType();
      resultTypes.push_back(
          RankedTensorType::get(tensorType(param).getShape(), element));
    }
  auto backward = nn::RepeatOp::create(
      b, loc, resultTypes,
      FlatSymbolRefAttr::get(derivative->getSymNameAttr()), carried, params);
  backward.setReverse(!op.getReverse());

  // Cotangents of the repeat's operands: carried values, then parameters
  // (integer parameters have none).
  SmallVector<Value> result(backward.getResults().take_front(numCarried));
  SmallVector<Value> paramGrads(op.getParams().size());
  for (auto [slot, index] : llvm::enumerate(floatParams))
    paramGrads[index] = backward.getResult(numCarried + slot);
  result.append(paramGrads.begin(), paramGrads.end());
  op->erase();
  return result;
}

//===----------------------------------------------------------------------===//
// The pass
//===----------------------------------------------------------------------===//

struct AutodiffPass : public tessel::impl::AutodiffPassBase<AutodiffPass> {
  using Base::Base;
  // The setting options register themselves; a copy gets fresh ones, whose
  // values Pass::clone copies.
  AutodiffPass(const AutodiffPass &other)
      : AutodiffPassBase(other), unknownSettings(other.unknownSettings) {}

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (failed(nn::RepeatOp::refuseOuts(module, "tessel-autodiff")))
      return signalPassFailure();
    func::FuncOp model;
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func->hasAttr(nn::NNDialect::kEntryAttrName)) {
        func.emitOpError() << "is already a training entry ('"
                           << nn::NNDialect::kEntryAttrName
                           << "'); tessel-autodiff runs once";
        return signalPassFailure();
      }
      if (nn::NNDialect::isModelFunction(func) && !model)
        model = func;
    }
    if (!model)
      return;
    TrainConfig config;
    if (failed(resolveConfig(module, config)))
      return signalPassFailure();
    // A stage's update sees only its own gradients; the global norm needs
    // every stage's (and a tied parameter's once).
    if (config.clip > 0 && module->hasAttr(nn::NNDialect::kStageAttrName)) {
      model.emitOpError()
          << "is a pipeline stage: gradient clipping (clip = " << config.clip
          << ") needs the norm over every stage's gradients, which pipeline "
             "stages do not compute yet; train without --clip on a pp mesh";
      return signalPassFailure();
    }

    SmallVector<unsigned> paramArgs;
    for (unsigned i = 0, e = model.getNumArguments(); i < e; ++i)
      if (model.getArgAttr(i, nn::NNDialect::kParamAttrName))
        paramArgs.push_back(i);
    warnUnmatchedPatterns(module, model, paramArgs, config);
    if (paramArgs.empty())
      return; // Nothing to train: the model stays an evaluation.

    SymbolTable symbols(module);
    FailureOr<SmallVector<unsigned>> trained =
        buildBackward(model, paramArgs, config, symbols);
    if (failed(trained))
      return signalPassFailure();
    buildUpdate(model, *trained, config, symbols, backwardFunction);
    module->setAttr(nn::NNDialect::kTrainAttrName,
                    trainConfigToAttr(module.getContext(), config));
  }

  /// A no_decay pattern that names no parameter is most likely a typo: a
  /// warning, as the parameter it meant would silently decay. A pipeline
  /// stage holds only some of the parameters, so it does not warn:
  /// tessel-pipeline-split warns for the whole model before the split.
  static void warnUnmatchedPatterns(ModuleOp module, func::FuncOp model,
                                    ArrayRef<unsigned> paramArgs,
                                    const TrainConfig &config) {
    if (module->hasAttr(nn::NNDialect::kStageAttrName))
      return;
    for (const std::string &pattern : splitNamePatterns(config.noDecay))
      if (llvm::none_of(paramArgs, [&](unsigned index) {
            return matchesNamePattern(pattern, paramName(model, index).str());
          }))
        model.emitWarning() << "no_decay pattern '" << pattern
                            << "' matches no parameter of the model";
  }

  /// The settings: the module's nn.train, then the options given.
  LogicalResult resolveConfig(ModuleOp module, TrainConfig &config) {
    if (auto dict = module->getAttrOfType<DictionaryAttr>(
            nn::NNDialect::kTrainAttrName))
      if (failed(readTrainAttr(module, dict, config)))
        return failure();
    TrainSettingTexts given;
    for (auto [setting, option] : llvm::zip(trainSettings(), settingOptions()))
      if (option->hasValue())
        given.emplace_back(setting.key, option->getValue());
    given.insert(given.end(), unknownSettings.begin(), unknownSettings.end());
    if (failed(applyTrainSettings(module, given, config)))
      return failure();
    config.resolveDefaults();
    return checkTrainConfig(module, config);
  }

  // One option per training setting (runtime/config/TrainSettings.def),
  // with its flag name: tessel-autodiff{lr=3e-4 optimizer=sgd}.
#define TESSEL_TRAIN_SETTING(Field, Type, Key, Flag, Kind, Default, Choices,   \
                             Noun, Help)                                       \
  Option<std::string> Field##Option{*this, Flag, llvm::cl::desc(Help)};
#include "runtime/config/TrainSettings.def"

  /// The setting options, in trainSettings() order.
  std::vector<Option<std::string> *> settingOptions() {
    return {
#define TESSEL_TRAIN_SETTING(Field, Type, Key, Flag, Kind, Default, Choices,   \
                             Noun, Help)                                       \
  &Field##Option,
#include "runtime/config/TrainSettings.def"
    };
  }

  /// Sets the options from `settings` (by key or flag name; an unknown one
  /// is reported when the pass runs).
  void setOptions(const TrainSettingTexts &settings) {
    for (const auto &[name, text] : settings) {
      const TrainSetting *setting = findTrainSetting(name);
      if (!setting) {
        unknownSettings.push_back({name, text});
        continue;
      }
      *settingOptions()[setting - trainSettings().data()] = text;
    }
  }
  /// Names setOptions did not know, reported when the pass runs.
  TrainSettingTexts unknownSettings;

  /// Every nn.attention outside the evaluation `model` (the backward's, and
  /// its layer functions') also returns its log-sum-exp, which its gradient
  /// reads with the output instead of running the forward again. The
  /// canonicalizer drops the ones no gradient reads.
  static void keepAttentionStatistics(func::FuncOp model) {
    SmallVector<nn::AttentionOp> plain;
    model->getParentOfType<ModuleOp>().walk([&](nn::AttentionOp op) {
      if (!op.getLse() && op->getParentOfType<func::FuncOp>() != model)
        plain.push_back(op);
    });
    for (nn::AttentionOp op : plain) {
      OpBuilder b(op);
      op.getResult().replaceAllUsesWith(op.buildAgain(b, true).getResult());
      op.erase();
    }
  }

  /// @f_backward; returns the indices (into @f's arguments) of the
  /// parameters the loss depends on.
  FailureOr<SmallVector<unsigned>>
  buildBackward(func::FuncOp model, ArrayRef<unsigned> paramArgs,
                const TrainConfig &config, SymbolTable &symbols) {
    func::FuncOp backward = model.clone();
    backward.setSymName((model.getSymName() + "_backward").str());
    backward->setAttr(nn::NNDialect::kEntryAttrName,
                      StringAttr::get(&getContext(), "backward"));
    symbols.insert(backward, std::next(Block::iterator(model)));
    backwardFunction = backward;
    keepAttentionStatistics(model);

    Block &body = backward.getBody().front();
    Operation *terminator = body.getTerminator();
    OpBuilder b(terminator);
    FailureOr<SmallVector<std::pair<Value, Value>>> seeds =
        seedsOf(backward, b);
    if (failed(seeds))
      return failure();

    // A pipeline stage also returns the gradient of its input activations,
    // which the previous stage's backward receives.
    SmallVector<unsigned> stageInputs;
    for (unsigned i = 0, e = model.getNumArguments(); i < e; ++i)
      if (model.getArgAttr(i, nn::NNDialect::kStageInputAttrName))
        stageInputs.push_back(i);
    SmallVector<Value> wrt;
    SmallVector<std::string> names;
    for (unsigned index : stageInputs) {
      wrt.push_back(backward.getArgument(index));
      names.push_back("stage input #" + std::to_string(index));
    }
    for (unsigned index : paramArgs) {
      wrt.push_back(backward.getArgument(index));
      names.push_back(paramName(model, index).str());
    }
    ReverseMode reverse(getOperation(), symbols, config.recompute);
    FailureOr<SmallVector<Value>> cotangents =
        reverse.differentiate(backward, *seeds, wrt, names);
    if (failed(cotangents))
      return failure();

    SmallVector<unsigned> trained;
    SmallVector<Value> returned(terminator->getOperands());
    b.setInsertionPoint(terminator);
    for (auto [index, grad] :
         llvm::zip(stageInputs, ArrayRef(*cotangents).take_front(
                                    stageInputs.size()))) {
      Value arg = backward.getArgument(index);
      returned.push_back(grad ? grad : zerosLike(b, arg.getLoc(), arg.getType()));
    }
    unsigned firstGrad = returned.size();
    ArrayRef<Value> grads = ArrayRef(*cotangents).drop_front(stageInputs.size());
    for (auto [index, grad] : llvm::zip(paramArgs, grads)) {
      if (!grad) {
        mlir::emitWarning(model.getArgument(index).getLoc())
            << "parameter '" << paramName(model, index)
            << "' does not reach the loss: it gets no gradient and is not "
               "updated";
        continue;
      }
      trained.push_back(index);
      Type type = gradientType(moduleOf(model), model.getArgumentTypes()[index]);
      unsigned position = backward.getNumArguments();
      // A pipeline stage's accumulator holds its parameter's rows.
      SmallVector<NamedAttribute> attrs{b.getNamedAttr(
          nn::NNDialect::kGradAttrName,
          b.getStringAttr(paramName(model, index)))};
      if (Attribute rows =
              model.getArgAttr(index, nn::NNDialect::kLayersAttrName))
        attrs.push_back(b.getNamedAttr(nn::NNDialect::kLayersAttrName, rows));
      if (failed(backward.insertArgument(position, type,
                                         b.getDictionaryAttr(attrs),
                                         model.getArgument(index).getLoc())))
        return failure();
      Value accumulator = backward.getArgument(position);
      // A bf16 parameter's gradient leaves the backward widened when
      // gradients are f32 (the partitioner reduces it after the cast).
      Value value = grad;
      if (value.getType() != type)
        value = nn::CastOp::create(b, grad.getLoc(), type, value);
      returned.push_back(
          nn::AccumulateOp::create(b, grad.getLoc(), TypeRange{type},
                                   ValueRange{value, accumulator})
              .getResult());
    }
    if (trained.empty())
      return model.emitOpError()
             << "has parameters, but none of them reaches the loss";
    func::ReturnOp::create(b, terminator->getLoc(), returned);
    terminator->erase();
    backward.setFunctionType(b.getFunctionType(
        backward.getArgumentTypes(), ValueRange(returned).getTypes()));
    // One attribute dictionary per result: the model's results keep theirs.
    SmallVector<DictionaryAttr> resultAttrs(returned.size(),
                                            b.getDictionaryAttr({}));
    for (unsigned i = 0, e = model.getNumResults(); i < e; ++i)
      if (DictionaryAttr dict = model.getResultAttrDict(i))
        resultAttrs[i] = dict;
    backward.setAllResultAttrs(resultAttrs);
    for (auto [slot, index] : llvm::enumerate(stageInputs)) {
      unsigned result = model.getNumResults() + slot;
      backward.setResultAttr(result, nn::NNDialect::kInputGradAttrName,
                             b.getUnitAttr());
      if (Attribute sharding =
              model.getArgAttr(index, nn::NNDialect::kShardingAttrName))
        backward.setResultAttr(result, nn::NNDialect::kShardingAttrName,
                               sharding);
    }
    for (auto [slot, index] : llvm::enumerate(trained))
      backward.setResultAttr(firstGrad + slot, nn::NNDialect::kGradAttrName,
                             b.getStringAttr(paramName(model, index)));
    return trained;
  }

  /// The cotangents the reverse mode starts from: 1 for the loss, or, for
  /// a pipeline stage before the last, one new argument per output
  /// activation (nn.output_grad), which the next stage's backward sends.
  FailureOr<SmallVector<std::pair<Value, Value>>>
  seedsOf(func::FuncOp backward, OpBuilder &b) {
    Operation *terminator = backward.getBody().front().getTerminator();
    SmallVector<std::pair<Value, Value>> seeds;
    if (!nn::NNDialect::returnsStageOutputs(backward)) {
      Value loss = terminator->getOperand(0);
      auto lossType = cast<RankedTensorType>(loss.getType());
      Value one = nn::ConstantOp::create(
          b, backward.getLoc(),
          DenseElementsAttr::get(
              lossType, b.getFloatAttr(lossType.getElementType(), 1.0)));
      seeds.push_back({loss, one});
      return seeds;
    }
    for (unsigned i = 0, e = backward.getNumResults(); i < e; ++i) {
      Value output = terminator->getOperand(i);
      SmallVector<NamedAttribute> attrs{b.getNamedAttr(
          nn::NNDialect::kOutputGradAttrName, b.getUnitAttr())};
      if (Attribute sharding =
              backward.getResultAttr(i, nn::NNDialect::kShardingAttrName))
        attrs.push_back(
            b.getNamedAttr(nn::NNDialect::kShardingAttrName, sharding));
      unsigned position = backward.getNumArguments();
      if (failed(backward.insertArgument(position, output.getType(),
                                         b.getDictionaryAttr(attrs),
                                         output.getLoc())))
        return failure();
      seeds.push_back({output, backward.getArgument(position)});
    }
    return seeds;
  }

  /// @f_update: clipping, schedule and one in-place optimizer step per
  /// trained parameter.
  void buildUpdate(func::FuncOp model, ArrayRef<unsigned> trained,
                   const TrainConfig &config, SymbolTable &symbols,
                   func::FuncOp backward) {
    MLIRContext *ctx = &getContext();
    OpBuilder b(ctx);
    Location loc = model.getLoc();
    std::vector<std::string> stateNames = config.stateNames();
    SmallVector<Type> argTypes;
    SmallVector<DictionaryAttr> argAttrs;
    // A gradient or state takes its parameter's logical axes and, on a
    // pipeline stage, its rows of the stacked parameter.
    auto axesOf = [&](unsigned index) {
      SmallVector<NamedAttribute> attrs;
      for (StringRef name :
           {nn::NNDialect::kAxesAttrName, nn::NNDialect::kLayersAttrName})
        if (Attribute value = model.getArgAttr(index, name))
          attrs.push_back(b.getNamedAttr(name, value));
      return attrs;
    };
    auto stateType = [&](Type paramType) -> Type {
      auto tensor = cast<RankedTensorType>(paramType);
      return RankedTensorType::get(tensor.getShape(), b.getF32Type());
    };
    for (unsigned index : trained) {
      argTypes.push_back(model.getArgumentTypes()[index]);
      argAttrs.push_back(model.getArgAttrDict(index));
    }
    for (unsigned index : trained) {
      argTypes.push_back(
          gradientType(moduleOf(model), model.getArgumentTypes()[index]));
      SmallVector<NamedAttribute> attrs = axesOf(index);
      attrs.push_back(b.getNamedAttr(nn::NNDialect::kGradAttrName,
                                     b.getStringAttr(paramName(model, index))));
      argAttrs.push_back(b.getDictionaryAttr(attrs));
    }
    // Per parameter: its master weights (mixed precision), then the
    // optimizer's states.
    auto statesOf = [&](unsigned index) {
      std::vector<std::string> names;
      if (hasMasterWeights(moduleOf(model), model.getArgumentTypes()[index]))
        names.push_back("master");
      names.insert(names.end(), stateNames.begin(), stateNames.end());
      return names;
    };
    for (unsigned index : trained)
      for (const std::string &state : statesOf(index)) {
        argTypes.push_back(stateType(model.getArgumentTypes()[index]));
        SmallVector<NamedAttribute> attrs = axesOf(index);
        attrs.push_back(b.getNamedAttr(
            nn::NNDialect::kStateAttrName,
            b.getStringAttr(paramName(model, index) + "." + state)));
        argAttrs.push_back(b.getDictionaryAttr(attrs));
      }
    argTypes.push_back(RankedTensorType::get({}, b.getF32Type()));
    argAttrs.push_back(b.getDictionaryAttr(
        b.getNamedAttr(nn::NNDialect::kGradScaleAttrName, b.getUnitAttr())));

    auto update = func::FuncOp::create(
        b, loc, (model.getSymName() + "_update").str(),
        b.getFunctionType(argTypes, {}));
    update->setAttr(nn::NNDialect::kEntryAttrName, b.getStringAttr("update"));
    symbols.insert(update, std::next(Block::iterator(backward)));
    update.setAllArgAttrs(argAttrs);
    Block *entry = update.addEntryBlock();
    b.setInsertionPointToStart(entry);
    size_t numTrained = trained.size();
    ValueRange params = entry->getArguments().take_front(numTrained);
    ValueRange grads = entry->getArguments().slice(numTrained, numTrained);
    ValueRange states = entry->getArguments().drop_front(2 * numTrained)
                            .drop_back();
    Value scale = entry->getArguments().back();
    if (config.clip > 0) {
      Value sumSquares =
          nn::SumSquaresOp::create(b, loc,
                                   TypeRange{RankedTensorType::get({}, b.getF32Type())},
                                   grads)
              .getResult();
      scale = nn::ClipScaleOp::create(
                  b, loc, TypeRange{scale.getType()},
                  ValueRange{sumSquares, scale},
                  {b.getNamedAttr("max_norm", b.getF64FloatAttr(config.clip))})
                  .getResult();
    }
    SmallVector<NamedAttribute> stepAttrs = optimizerAttrs(b, config);
    SmallVector<Value> newParams, newStates;
    size_t firstState = 0;
    for (unsigned i = 0; i < numTrained; ++i) {
      // The parameter's group: no weight decay when a no_decay pattern
      // matches its name.
      NamedAttrList attrs(stepAttrs);
      attrs.set("weight_decay", b.getF64FloatAttr(config.weightDecayOf(
                                    paramName(model, trained[i]).str())));
      bool master = hasMasterWeights(moduleOf(model),
                                     model.getArgumentTypes()[trained[i]]);
      if (master)
        attrs.set("master", b.getUnitAttr());
      SmallVector<Value> operands{grads[i], scale, params[i]};
      size_t numStates = statesOf(trained[i]).size();
      ValueRange paramStates = states.slice(firstState, numStates);
      firstState += numStates;
      operands.append(paramStates.begin(), paramStates.end());
      SmallVector<Type> types{params[i].getType()};
      for (Value state : paramStates)
        types.push_back(state.getType());
      auto step = nn::OptimizerStepOp::create(b, loc, types, operands,
                                              attrs.getAttrs());
      newParams.push_back(step->getResult(0));
      for (Value state : step->getResults().drop_front())
        newStates.push_back(state);
    }
    SmallVector<Value> returned(newParams);
    returned.append(newStates);
    func::ReturnOp::create(b, loc, returned);
    update.setFunctionType(
        b.getFunctionType(argTypes, ValueRange(returned).getTypes()));
    for (auto [slot, index] : llvm::enumerate(trained))
      update.setResultAttr(slot, nn::NNDialect::kParamAttrName,
                           b.getStringAttr(paramName(model, index)));
    for (unsigned i = 0; i < states.size(); ++i)
      update.setResultAttr(
          numTrained + i, nn::NNDialect::kStateAttrName,
          update.getArgAttr(2 * numTrained + i, nn::NNDialect::kStateAttrName));
  }

  /// The attributes every parameter's step shares (all but weight_decay).
  static SmallVector<NamedAttribute> optimizerAttrs(OpBuilder &b,
                                                    const TrainConfig &config) {
    MLIRContext *ctx = b.getContext();
    auto kind = llvm::StringSwitch<nn::OptimizerKind>(config.optimizer)
                    .Case("sgd", nn::OptimizerKind::sgd)
                    .Case("adam", nn::OptimizerKind::adam)
                    .Default(nn::OptimizerKind::adamw);
    auto schedule = config.schedule == "warmup_cosine"
                        ? nn::LrSchedule::warmup_cosine
                        : nn::LrSchedule::constant;
    SmallVector<NamedAttribute> attrs{
        b.getNamedAttr("optimizer", nn::OptimizerKindAttr::get(ctx, kind)),
        b.getNamedAttr("lr", b.getF64FloatAttr(config.lr)),
        b.getNamedAttr("beta1", b.getF64FloatAttr(config.beta1)),
        b.getNamedAttr("beta2", b.getF64FloatAttr(config.beta2)),
        b.getNamedAttr("eps", b.getF64FloatAttr(config.eps)),
        b.getNamedAttr("momentum", b.getF64FloatAttr(config.momentum)),
        b.getNamedAttr("schedule", nn::LrScheduleAttr::get(ctx, schedule)),
        b.getNamedAttr("warmup", b.getI64IntegerAttr(config.warmup)),
        b.getNamedAttr("min_lr", b.getF64FloatAttr(config.minLr)),
        b.getNamedAttr("total_steps", b.getI64IntegerAttr(config.totalSteps))};
    if (config.nesterov)
      attrs.push_back(b.getNamedAttr("nesterov", b.getUnitAttr()));
    return attrs;
  }

  /// The backward entry, once built.
  func::FuncOp backwardFunction;

  static StringRef paramName(func::FuncOp model, unsigned index) {
    return model.getArgAttrOfType<StringAttr>(index,
                                              nn::NNDialect::kParamAttrName)
        .getValue();
  }
};

} // namespace

std::unique_ptr<Pass>
tessel::createAutodiffPass(const TrainSettingTexts &settings) {
  auto pass = std::make_unique<AutodiffPass>();
  pass->setOptions(settings);
  return pass;
}
