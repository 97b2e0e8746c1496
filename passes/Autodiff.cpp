//===- Autodiff.cpp - tessel-autodiff: the training step of a model -------===//
//
// The backward entry (the reverse mode of ReverseMode.cpp from the loss's
// seed, or a pipeline stage's output gradients) and the update entry
// (clipping, the learning-rate schedule, one optimizer step per parameter)
// of a model's forward.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"
#include "passes/ReverseMode.h"
#include "passes/TrainSettings.h"
#include "runtime/config/NamePattern.h"

#include "dialect/NN/NNOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSwitch.h"

#include <string>

namespace tessel {
#define GEN_PASS_DEF_AUTODIFFPASS
#include "passes/Passes.h.inc"
} // namespace tessel

using namespace mlir;
using namespace tessel;
using namespace tessel::autodiff;

namespace {

ModuleOp moduleOf(func::FuncOp func) {
  return func->getParentOfType<ModuleOp>();
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
    SmallVector<unsigned> paramArgs;
    for (unsigned i = 0, e = model.getNumArguments(); i < e; ++i)
      if (model.getArgAttr(i, nn::NNDialect::kParamAttrName))
        paramArgs.push_back(i);
    warnUnmatchedPatterns(module, model, paramArgs, config);
    if (paramArgs.empty())
      return; // Nothing to train: the model stays an evaluation.
    // Frozen parameters are read as constants: no gradient, no state.
    llvm::erase_if(paramArgs, [&](unsigned index) {
      return matchesAny(config.freeze, paramName(model, index).str());
    });
    if (paramArgs.empty()) {
      if (module->hasAttr(nn::NNDialect::kStageAttrName))
        model.emitOpError()
            << "is a pipeline stage with every parameter frozen (freeze '"
            << config.freeze
            << "'): each stage trains at least one (freeze fewer, or move "
               "the stage boundaries with --stage-layers)";
      else
        model.emitOpError()
            << "has every parameter frozen (freeze '" << config.freeze
            << "'): there is nothing to train (compile it "
               "without training to evaluate it)";
      return signalPassFailure();
    }

    SymbolTable symbols(module);
    FailureOr<SmallVector<unsigned>> trained =
        buildBackward(model, paramArgs, config, symbols);
    if (failed(trained))
      return signalPassFailure();
    buildUpdate(model, *trained, config, symbols, backwardFunction);
    module->setAttr(nn::NNDialect::kTrainAttrName,
                    trainConfigToAttr(module.getContext(), config));
  }

  /// A pipeline stage holds only some of the parameters, so it does not
  /// warn about patterns naming none of them: tessel-pipeline-split warns
  /// for the whole model before the split.
  static void warnUnmatchedPatterns(ModuleOp module, func::FuncOp model,
                                    ArrayRef<unsigned> paramArgs,
                                    const TrainConfig &config) {
    if (module->hasAttr(nn::NNDialect::kStageAttrName))
      return;
    SmallVector<std::string> names;
    for (unsigned index : paramArgs)
      names.push_back(paramName(model, index).str());
    tessel::warnUnmatchedPatterns(model, names, config.noDecay, config.freeze);
  }

  /// The settings: the module's nn.train, then the options given.
  LogicalResult resolveConfig(ModuleOp module, TrainConfig &config) {
    TrainSettingTexts given;
    for (auto [setting, option] : llvm::zip(trainSettings(), settingOptions()))
      if (option->hasValue())
        given.emplace_back(setting.key, option->getValue());
    given.insert(given.end(), unknownSettings.begin(), unknownSettings.end());
    return resolveTrainConfig(module, given, config);
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
    // States are f32, or f64 for an f64 parameter; the update's scalars
    // (the gradient scale, the norm, the clipping factor) are f64 when any
    // trained parameter is, so an f64 model's update is never rounded to
    // f32. An f32 parameter beside them reads the scale rounded.
    auto stateElement = [&](Type paramType) -> Type {
      Type element = cast<RankedTensorType>(paramType).getElementType();
      return element.isF64() ? element : b.getF32Type();
    };
    auto stateType = [&](Type paramType) -> Type {
      auto tensor = cast<RankedTensorType>(paramType);
      return RankedTensorType::get(tensor.getShape(), stateElement(tensor));
    };
    Type scalarElement = b.getF32Type();
    for (unsigned index : trained)
      if (stateElement(model.getArgumentTypes()[index]).isF64())
        scalarElement = b.getF64Type();
    auto scalarType = RankedTensorType::get({}, scalarElement);
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
    argTypes.push_back(scalarType);
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
      // A pipeline stage's tied copy is counted on the first holder (its
      // sum with the other stages' is tessel-split-update-norm's).
      SmallVector<Value> counted;
      for (auto [index, grad] : llvm::zip(trained, grads))
        if (!model.getArgAttr(index, nn::NNDialect::kTiedCopyAttrName))
          counted.push_back(grad);
      Value sumSquares =
          nn::SumSquaresOp::create(b, loc, TypeRange{scalarType}, counted)
              .getResult();
      scale = nn::ClipScaleOp::create(
                  b, loc, TypeRange{scale.getType()},
                  ValueRange{sumSquares, scale},
                  {b.getNamedAttr("max_norm", b.getF64FloatAttr(config.clip))})
                  .getResult();
    }
    SmallVector<NamedAttribute> stepAttrs = optimizerAttrs(b, config);
    SmallVector<Value> newParams, newStates;
    Value f32Scale; // the scale rounded, once, for f32 parameters
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
      Value paramScale = scale;
      if (!stateElement(model.getArgumentTypes()[trained[i]]).isF64() &&
          scalarElement.isF64()) {
        if (!f32Scale)
          f32Scale = nn::CastOp::create(
              b, loc, RankedTensorType::get({}, b.getF32Type()), scale);
        paramScale = f32Scale;
      }
      SmallVector<Value> operands{grads[i], paramScale, params[i]};
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
