//===- PipelineSplit.cpp - tessel-pipeline-split: stages over `pp` --------===//
//
// Splits the model's layers (its nn.repeat) into stages over the mesh's
// `pp` axis. Each stage becomes a nested module holding a model of its
// own: stage 0 takes what comes before the layers (embeddings), the last
// stage what comes after (final norm, head, loss), and every stage a
// contiguous run of the layers, whose stacked parameters it holds as the
// rows [offset, offset + k) of the global tensor (`nn.layers`). A stage's
// model takes the previous stage's activations (`nn.stage_input`) and
// returns its own (`nn.stage_output`); autodiff, sharding, the memory plan
// and the lowering then run on each stage's module as on any model.
//
// Why modules and not functions: every later pass works on "the model of a
// module"; a stage as a module needs no pass to learn about stages, and
// the pass manager runs them nested (tessel-link-stages joins them).
//
//===----------------------------------------------------------------------===//

#include "passes/NNAttributes.h"
#include "passes/Passes.h"
#include "passes/PipelinePlan.h"
#include "passes/Sharding.h"
#include "passes/TrainSettings.h"

#include "dialect/NN/NNInterfaces.h"
#include "dialect/NN/NNOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"

namespace tessel {
#define GEN_PASS_DEF_PIPELINESPLITPASS
#include "passes/Passes.h.inc"
} // namespace tessel

using namespace mlir;
using namespace tessel;

namespace {

/// The model's parts around its one top-level nn.repeat.
struct ModelParts {
  func::FuncOp model;
  nn::RepeatOp repeat;
  SmallVector<Operation *> before, after;
};

FailureOr<ModelParts> findParts(ModuleOp module) {
  ModelParts parts;
  for (auto func : module.getOps<func::FuncOp>())
    if (nn::NNDialect::isModelFunction(func)) {
      if (parts.model)
        return func.emitOpError()
               << "is a second model function; pipeline stages split one";
      parts.model = func;
    }
  if (!parts.model)
    return module.emitError()
           << "pipeline parallelism needs a model function (nn.param, "
              "nn.input or nn.label arguments)";
  Block &body = parts.model.getBody().front();
  for (Operation &op : body.without_terminator()) {
    if (auto repeat = dyn_cast<nn::RepeatOp>(op)) {
      if (parts.repeat)
        return repeat.emitOpError()
               << "is a second nn.repeat of the model: pipeline stages split "
                  "the layers of one (first at "
               << parts.repeat.getLoc() << ")";
      parts.repeat = repeat;
      continue;
    }
    (parts.repeat ? parts.after : parts.before).push_back(&op);
  }
  if (!parts.repeat)
    return parts.model.emitOpError()
           << "has no nn.repeat: pipeline stages split the layers of an "
              "nn.repeat over 'pp'";
  if (parts.repeat.getReverse())
    return parts.repeat.emitOpError() << "runs backwards; pipeline stages "
                                         "split a forward nn.repeat";
  if (!parts.repeat.getStackedResults().empty())
    return parts.repeat.emitOpError()
           << "returns per-layer outputs; pipeline stages split a repeat "
              "whose layers only carry activations";
  for (Value param : parts.repeat.getParams()) {
    auto arg = dyn_cast<BlockArgument>(param);
    if (!arg || arg.getOwner() != &body ||
        !parts.model.getArgAttr(arg.getArgNumber(),
                                nn::NNDialect::kParamAttrName))
      return parts.repeat.emitOpError()
             << "takes a stacked parameter that is not an nn.param argument "
                "of the model; pipeline stages split the model's own "
                "parameters";
  }
  // Only the layers' carried values may cross from the part before the
  // layers into the part after them: the middle stages pass nothing else.
  llvm::DenseSet<Operation *> beforeSet(parts.before.begin(),
                                        parts.before.end());
  SmallVector<Operation *> afterAndReturn(parts.after);
  afterAndReturn.push_back(body.getTerminator());
  for (Operation *op : afterAndReturn)
    for (Value operand : op->getOperands())
      if (Operation *def = operand.getDefiningOp(); def && beforeSet.contains(def))
        return op->emitOpError()
               << "uses a value computed before the repeated layers (at "
               << def->getLoc()
               << "); pipeline stages pass only the layers' carried "
                  "activations from stage to stage";
  for (Operation *op : parts.before)
    for (Value result : op->getResults())
      for (Operation *user : result.getUsers())
        if (user != parts.repeat.getOperation() && !beforeSet.contains(user))
          return user->emitOpError()
                 << "uses a value computed before the repeated layers (at "
                 << op->getLoc()
                 << ") from outside the first stage; pipeline stages pass "
                    "only the layers' carried activations from stage to stage";
  return parts;
}

/// The flops of `ops` (the cost interface; ops without one count 0).
int64_t flopsOf(ArrayRef<Operation *> ops) {
  int64_t flops = 0;
  for (Operation *op : ops)
    if (auto cost = dyn_cast<nn::CostOpInterface>(op))
      flops = nn::detail::satAdd(flops, cost.getFlops());
  return flops;
}

/// The boundary activations' sharding: the layer function's carried
/// arguments after propagating the forward model alone on the mesh.
FailureOr<SmallVector<Attribute>>
boundarySharding(ModuleOp module, ModelParts &parts, StringRef meshText,
                 StringRef rules, bool sequenceParallel) {
  unsigned carried = parts.repeat.getCarried().size();
  SmallVector<Attribute> shardings(carried);
  OwningOpRef<ModuleOp> copy = cast<ModuleOp>(module->clone());
  PassManager pm(module.getContext());
  PropagateShardingPassOptions sharding;
  sharding.mesh = meshText.str();
  if (!rules.empty())
    sharding.rules = rules.str();
  sharding.sequenceParallel = sequenceParallel;
  pm.addPass(createPropagateShardingPass(sharding));
  // The diagnostics of a failure are the real pipeline's to report.
  ScopedDiagnosticHandler quiet(module.getContext(),
                                [](Diagnostic &) { return success(); });
  if (failed(pm.run(*copy)))
    return shardings; // Unsplit; the stage's own propagation reports why.
  auto layer = copy->lookupSymbol<func::FuncOp>(parts.repeat.getLayer());
  for (unsigned i = 0; layer && i < carried; ++i)
    shardings[i] = layer.getArgAttr(i, kShardingAttr);
  return shardings;
}

struct PipelineSplitPass
    : tessel::impl::PipelineSplitPassBase<PipelineSplitPass> {
  using Base::Base;

  /// A no_decay or freeze pattern that matches no parameter of the whole
  /// model (a typo: the parameter it meant would silently decay or train).
  /// Said here, before the split, because each stage's autodiff sees only
  /// its parameters.
  void warnUnmatchedPatterns(ModuleOp module, func::FuncOp model) {
    SmallVector<std::string> names;
    for (unsigned i = 0; i < model.getNumArguments(); ++i)
      if (auto name = model.getArgAttrOfType<StringAttr>(
              i, nn::NNDialect::kParamAttrName))
        names.push_back(name.getValue().str());
    // The options given, else the module's nn.train patterns.
    auto train =
        module->getAttrOfType<DictionaryAttr>(nn::NNDialect::kTrainAttrName);
    auto patterns = [&](const std::string &option, StringRef key) {
      if (option.empty() && train)
        if (auto given = train.getAs<StringAttr>(key))
          return given.getValue().str();
      return option;
    };
    tessel::warnUnmatchedPatterns(model, names, patterns(noDecay, "no_decay"),
                                  patterns(freeze, "freeze"));
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (failed(nn::RepeatOp::refuseOuts(module, "tessel-pipeline-split")))
      return signalPassFailure();
    std::string error;
    std::optional<Mesh> mesh = Mesh::parse(this->mesh, error);
    if (!mesh) {
      module.emitError() << "tessel-pipeline-split: " << error;
      return signalPassFailure();
    }
    std::optional<int> axis = mesh->axisIndex(kPipelineAxisName);
    if (!axis || mesh->shape[*axis] == 1) {
      if (!stageLayers.empty()) {
        module.emitError() << "--stage-layers needs a mesh with a 'pp' axis "
                              "of more than one rank";
        return signalPassFailure();
      }
      return; // No pipeline: the module stays one model.
    }
    if (module->hasAttr(nn::NNDialect::kPipelineAttrName))
      return; // Already split.
    FailureOr<ModelParts> parts = findParts(module);
    if (failed(parts))
      return signalPassFailure();
    warnUnmatchedPatterns(module, parts->model);

    PipelineRequest request;
    request.ranks = mesh->shape[*axis];
    request.virtualStages = virtualStages;
    request.microbatches = microbatches;
    request.schedule = schedule;
    request.stageLayers = stageLayers;
    request.layers = parts->repeat.getNumLayers();
    // The repeat costs L times its layer (its cost interface).
    request.layerFlops =
        cast<nn::CostOpInterface>(parts->repeat.getOperation()).getFlops() /
        std::max<int64_t>(request.layers, 1);
    request.beforeFlops = flopsOf(parts->before);
    request.afterFlops = flopsOf(parts->after);
    FailureOr<PipelinePlan> plan = planPipeline(request, parts->repeat);
    if (failed(plan))
      return signalPassFailure();
    FailureOr<SmallVector<Attribute>> sharding =
        boundarySharding(module, *parts, this->mesh, this->rules,
                         sequenceParallel);
    if (failed(sharding))
      return signalPassFailure();

    SmallVector<ModuleOp> stages;
    for (int s = 0; s < plan->stages(); ++s)
      stages.push_back(buildStage(module, *parts, *plan, s, *sharding));
    // The stages replace the model.
    for (Operation &op : llvm::make_early_inc_range(module.getBody()->getOperations()))
      if (!isa<ModuleOp>(op) || !llvm::is_contained(stages, cast<ModuleOp>(op)))
        op.erase();
    auto tied = tiedParams(stages);
    markTiedCopies(stages, tied);
    module->setAttr(nn::NNDialect::kPipelineAttrName,
                    plan->toAttr(module.getContext(), tied));
  }

  /// Marks each tied parameter on every holder but the first `nn.tied_copy`
  /// (the gradient norm counts it once).
  static void
  markTiedCopies(SmallVector<ModuleOp> &stages,
                 ArrayRef<std::pair<std::string, SmallVector<int64_t>>> tied) {
    for (auto &[name, holders] : tied)
      for (int64_t s : ArrayRef<int64_t>(holders).drop_front())
        for (auto func : stages[size_t(s)].getOps<func::FuncOp>()) {
          if (!func->hasAttr(nn::NNDialect::kStageAttrName))
            continue;
          for (unsigned i = 0; i < func.getNumArguments(); ++i)
            if (auto param = func.getArgAttrOfType<StringAttr>(
                    i, nn::NNDialect::kParamAttrName);
                param && param.getValue() == name)
              func.setArgAttr(i, nn::NNDialect::kTiedCopyAttrName,
                              UnitAttr::get(func.getContext()));
        }
  }

  /// Stage `s`'s module: the layer functions and its model.
  ModuleOp buildStage(ModuleOp module, ModelParts &parts,
                      const PipelinePlan &plan, int s,
                      ArrayRef<Attribute> boundary) {
    MLIRContext *ctx = module.getContext();
    OpBuilder b(ctx);
    b.setInsertionPointToEnd(module.getBody());
    Location loc = parts.model.getLoc();
    auto stage = ModuleOp::create(b, loc, ("stage" + Twine(s)).str());
    copyNNAttributes(module, stage);
    stage->setAttr(nn::NNDialect::kStageAttrName, b.getI64IntegerAttr(s));
    if (std::optional<pipeline::ScheduleKind> kind =
            pipeline::parseScheduleKind(plan.schedule);
        kind && pipeline::splitsBackward(*kind))
      stage->setAttr(nn::NNDialect::kSplitBackwardAttrName, b.getUnitAttr());
    if (!stageRecompute)
      stage->setAttr(nn::NNDialect::kKeepActivationsAttrName, b.getUnitAttr());
    stage->setAttr(nn::NNDialect::kFirstLayerAttrName,
                   b.getI64IntegerAttr(plan.layerRange(s).first));
    b.setInsertionPointToEnd(stage.getBody());
    for (Operation &op : module.getBody()->getOperations())
      if (&op != parts.model.getOperation() && !isa<ModuleOp>(op))
        b.clone(op);

    bool first = s == 0, last = s == plan.stages() - 1;
    func::FuncOp model = parts.model;
    Block &body = model.getBody().front();
    // The model's arguments this stage reads, in the model's order.
    llvm::SetVector<unsigned> used;
    auto useArgsOf = [&](ArrayRef<Operation *> ops) {
      for (Operation *op : ops)
        op->walk([&](Operation *nested) {
          for (Value operand : nested->getOperands())
            if (auto arg = dyn_cast<BlockArgument>(operand);
                arg && arg.getOwner() == &body)
              used.insert(arg.getArgNumber());
        });
    };
    // Every stage takes every input and label: the launcher draws one
    // microbatch's feeds alike on every stage (what a stage does not read
    // costs its few bytes).
    for (unsigned i = 0, e = model.getNumArguments(); i < e; ++i)
      if (model.getArgAttr(i, nn::NNDialect::kInputAttrName) ||
          model.getArgAttr(i, nn::NNDialect::kLabelAttrName))
        used.insert(i);
    if (first)
      useArgsOf(parts.before);
    useArgsOf({parts.repeat.getOperation()});
    if (last)
      useArgsOf(parts.after);
    SmallVector<unsigned> args(used.begin(), used.end());
    llvm::sort(args);

    SmallVector<Type> types;
    SmallVector<DictionaryAttr> attrs;
    auto carried = parts.repeat.getCarried();
    if (!first)
      for (auto [i, value] : llvm::enumerate(carried)) {
        types.push_back(value.getType());
        SmallVector<NamedAttribute> named{b.getNamedAttr(
            nn::NNDialect::kStageInputAttrName, b.getUnitAttr())};
        if (boundary[i])
          named.push_back(b.getNamedAttr(kShardingAttr, boundary[i]));
        attrs.push_back(b.getDictionaryAttr(named));
      }
    auto [offset, count] = plan.layerRange(s);
    llvm::DenseSet<Value> stacked(parts.repeat.getParams().begin(),
                                  parts.repeat.getParams().end());
    SmallVector<unsigned> kept; // model argument -> position in `args`
    for (unsigned index : args) {
      Value arg = model.getArgument(index);
      // Carried values that are model arguments come in as stage inputs
      // after the first stage.
      bool feed = model.getArgAttr(index, nn::NNDialect::kInputAttrName) ||
                  model.getArgAttr(index, nn::NNDialect::kLabelAttrName);
      if (!first && !feed && llvm::is_contained(carried, arg) &&
          !llvm::any_of(parts.after, [&](Operation *op) {
            return llvm::is_contained(op->getOperands(), arg);
          }))
        continue;
      kept.push_back(index);
      Type type = arg.getType();
      DictionaryAttr dict = model.getArgAttrDict(index);
      if (stacked.contains(arg)) {
        auto tensor = cast<RankedTensorType>(type);
        SmallVector<int64_t> shape(tensor.getShape());
        shape[0] = count;
        type = tensor.clone(shape);
        NamedAttrList named(dict);
        named.set(nn::NNDialect::kLayersAttrName,
                  b.getDenseI64ArrayAttr({offset, tensor.getDimSize(0)}));
        dict = named.getDictionary(ctx);
      }
      types.push_back(type);
      attrs.push_back(dict ? dict : b.getDictionaryAttr({}));
    }

    SmallVector<Type> results;
    if (last)
      results.append(model.getResultTypes().begin(),
                     model.getResultTypes().end());
    else
      for (Value value : parts.repeat.getCarriedResults())
        results.push_back(value.getType());
    auto func = func::FuncOp::create(b, loc, model.getSymName(),
                                     b.getFunctionType(types, results));
    copyNNAttributes(model, func);
    func->setAttr(nn::NNDialect::kStageAttrName, b.getI64IntegerAttr(s));
    func.setAllArgAttrs(attrs);
    Block *entry = func.addEntryBlock();
    IRMapping map;
    unsigned position = first ? 0 : carried.size();
    for (unsigned index : kept)
      map.map(model.getArgument(index), entry->getArgument(position++));
    b.setInsertionPointToStart(entry);
    if (first)
      for (Operation *op : parts.before)
        b.clone(*op, map);
    SmallVector<Value> operands;
    for (auto [i, value] : llvm::enumerate(carried))
      operands.push_back(first ? map.lookupOrDefault(value)
                               : entry->getArgument(i));
    for (Value param : parts.repeat.getParams())
      operands.push_back(map.lookup(param));
    auto repeat = nn::RepeatOp::create(
        b, parts.repeat.getLoc(), parts.repeat.getResultTypes(),
        parts.repeat.getLayerAttr(),
        ValueRange(operands).take_front(carried.size()),
        ValueRange(operands).drop_front(carried.size()), UnitAttr());
    repeat->setDiscardableAttrs(parts.repeat->getDiscardableAttrDictionary());
    map.map(parts.repeat.getResults(), repeat.getResults());
    if (last) {
      for (Operation *op : parts.after)
        b.clone(*op, map);
      auto ret = cast<func::ReturnOp>(body.getTerminator());
      func::ReturnOp::create(
          b, ret.getLoc(),
          llvm::map_to_vector(ret.getOperands(), [&](Value v) {
            return map.lookupOrDefault(v);
          }));
      for (unsigned i = 0; i < model.getNumResults(); ++i)
        if (DictionaryAttr dict = model.getResultAttrDict(i))
          func.setResultAttrs(i, dict);
    } else {
      func::ReturnOp::create(b, loc, repeat.getCarriedResults());
      for (unsigned i = 0; i < results.size(); ++i) {
        func.setResultAttr(i, nn::NNDialect::kStageOutputAttrName,
                           b.getUnitAttr());
        if (boundary[i])
          func.setResultAttr(i, kShardingAttr, boundary[i]);
      }
    }
    return stage;
  }

  /// Parameters more than one stage holds (GPT's embedding and its tied
  /// head): name -> stages, in order.
  static SmallVector<std::pair<std::string, SmallVector<int64_t>>>
  tiedParams(SmallVector<ModuleOp> &stages) {
    llvm::StringMap<SmallVector<int64_t>> holders;
    SmallVector<std::string> order;
    for (auto [s, stage] : llvm::enumerate(stages))
      for (auto func : ModuleOp(stage).getOps<func::FuncOp>()) {
        if (!func->hasAttr(nn::NNDialect::kStageAttrName))
          continue;
        for (unsigned i = 0; i < func.getNumArguments(); ++i) {
          auto name = func.getArgAttrOfType<StringAttr>(
              i, nn::NNDialect::kParamAttrName);
          if (!name || func.getArgAttr(i, nn::NNDialect::kLayersAttrName))
            continue;
          auto &list = holders[name.getValue()];
          if (list.empty())
            order.push_back(name.getValue().str());
          list.push_back(int64_t(s));
        }
      }
    SmallVector<std::pair<std::string, SmallVector<int64_t>>> tied;
    for (const std::string &name : order)
      if (holders[name].size() > 1)
        tied.push_back({name, holders[name]});
    return tied;
  }
};

} // namespace
