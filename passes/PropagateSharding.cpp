//===- PropagateSharding.cpp - A sharding for every value of the step -----===//
//
// Seeds: every argument of an entry function is a user annotation — its
// explicit `nn.sharding`, or its logical axes (`nn.axes`) mapped by the
// rules; a gradient or optimizer state takes its parameter's. Seeds never
// change. Every other value starts unsplit and is only ever refined (a
// dimension gains mesh axes), so the walk below terminates.
//
// Each op decides a loop sharding from what its operands and results
// propose through their indexing maps (upstream ShardingInterface): a user
// annotation beats a derived sharding, and between derived ones the larger
// tensor wins, since the loser is the one resharded (fewer bytes moved).
// Loops that must stay whole (ShardingConstraintOpInterface) and splits
// that do not divide a loop are refused. The decision then refines the
// op's operands (a request to their producers) and results.
//
//===----------------------------------------------------------------------===//

#include "dialect/NN/NNDialect.h"
#include "dialect/NN/NNInterfaces.h"
#include "dialect/NN/NNOps.h"
#include "passes/Passes.h"
#include "passes/RowContractions.h"
#include "passes/Sharding.h"

#include "mlir/Dialect/Shard/Interfaces/ShardingInterface.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"

namespace tessel {
#define GEN_PASS_DEF_PROPAGATESHARDINGPASS
#include "passes/Passes.h.inc"
} // namespace tessel

using namespace mlir;
using namespace tessel;

namespace {

/// What one value asks of one loop of an op.
struct Proposal {
  unsigned loop;
  MeshAxes axes;
  bool userAnnotated;
  int64_t bytes;
  unsigned valueIndex;
};

class Propagator {
public:
  /// `explain`: keep, per op, why each loop is split (for --debug).
  Propagator(const Mesh &mesh, bool explain) : mesh(mesh), explain(explain) {}

  LogicalResult seed(ModuleOp module, ArrayRef<MeshRule> rules,
                     bool sequenceParallel);
  void run();
  void writeAttributes(ModuleOp module);
  /// The mesh axes some value or loop is split over.
  MeshAxes axesInUse() const {
    MeshAxes used;
    auto add = [&](const DimSharding &sharding) {
      for (int16_t axis : usedAxes(sharding))
        if (!llvm::is_contained(used, axis))
          used.push_back(axis);
    };
    for (const auto &entry : shardings)
      add(entry.second);
    for (const auto &entry : loopShardings)
      add(entry.second);
    return used;
  }

private:
  const Mesh &mesh;
  bool explain;
  DenseMap<Value, DimSharding> shardings;
  DenseSet<Value> annotated;
  DenseMap<Operation *, DimSharding> loopShardings;
  DenseMap<Operation *, std::string> explanations;
  SmallVector<func::FuncOp> entries;
  llvm::SetVector<func::FuncOp> bodies;
  bool changed = false;

public:
  /// The sharding propagation gave `value` (whole until refined).
  DimSharding shardingOf(Value value) {
    auto it = shardings.find(value);
    if (it != shardings.end())
      return it->second;
    auto tensor = dyn_cast<RankedTensorType>(value.getType());
    return DimSharding(tensor ? tensor.getRank() : 0);
  }

private:
  /// Adds `axes` to dimension `dim` of `value` if it is unsplit, the axes
  /// are unused by the value, and they divide the dimension.
  void refineDim(Value value, unsigned dim, const MeshAxes &axes) {
    if (axes.empty() || annotated.contains(value))
      return;
    auto tensor = dyn_cast<RankedTensorType>(value.getType());
    if (!tensor || dim >= tensor.getRank())
      return;
    DimSharding sharding = shardingOf(value);
    if (!sharding[dim].empty())
      return;
    MeshAxes used = usedAxes(sharding);
    if (llvm::any_of(axes, [&](int16_t a) { return llvm::is_contained(used, a); }))
      return;
    if (tensor.getDimSize(dim) % mesh.groupSize(axes) != 0)
      return;
    sharding[dim] = axes;
    shardings[value] = sharding;
    changed = true;
  }

  void refine(Value value, const DimSharding &wanted) {
    for (auto [dim, axes] : llvm::enumerate(wanted))
      refineDim(value, dim, axes);
  }

  void walk(func::FuncOp func, bool backward);
  void visit(Operation *op);
  void decide(Operation *op);
  void visitRepeat(nn::RepeatOp repeat);
  void visitReturn(func::ReturnOp ret);
  DimSharding requiredResult(func::FuncOp func, unsigned index);

  llvm::StringMap<DimSharding> paramShardings;
};

LogicalResult Propagator::seed(ModuleOp module, ArrayRef<MeshRule> rules,
                               bool sequenceParallel) {
  // Entries: the public functions (the model and its training entries);
  // private ones are layers of nn.repeat, reached through their repeats.
  for (auto func : module.getOps<func::FuncOp>())
    if (!func.isPrivate() && !func.isExternal())
      entries.push_back(func);

  auto seedArgument = [&](func::FuncOp func, unsigned index) -> LogicalResult {
    BlockArgument arg = func.getArgument(index);
    auto tensor = dyn_cast<RankedTensorType>(arg.getType());
    if (!tensor)
      return success();
    auto where = [&]() {
      InFlightDiagnostic diag = func.emitError();
      diag << "argument #" << index;
      if (auto name = func.getArgAttrOfType<StringAttr>(
              index, nn::NNDialect::kParamAttrName))
        diag << " ('" << name.getValue() << "')";
      return diag;
    };
    DimSharding sharding(tensor.getRank());
    if (Attribute explicitSharding = func.getArgAttr(index, kShardingAttr)) {
      std::string error;
      std::optional<DimSharding> parsed =
          shardingFromAttr(explicitSharding, mesh, error);
      if (!parsed)
        return where() << ": " << error;
      if (parsed->size() != static_cast<size_t>(tensor.getRank()))
        return where() << ": nn.sharding has " << parsed->size()
                       << " dimensions, the tensor " << tensor.getRank();
      sharding = *parsed;
    } else if (auto axes = func.getArgAttrOfType<ArrayAttr>(
                   index, nn::NNDialect::kAxesAttrName)) {
      // The labels stay whole along the sequence: the vocabulary-parallel
      // cross-entropy reads every position of the rank's class block.
      bool activation =
          func.getArgAttr(index, nn::NNDialect::kInputAttrName) != nullptr;
      MeshAxes used;
      for (auto [dim, logical] : llvm::enumerate(axes)) {
        auto name = dyn_cast<StringAttr>(logical);
        if (!name || dim >= sharding.size())
          continue;
        // dim by name: clang before 16 cannot capture a structured binding.
        auto tryAxis = [&, dim = dim](int16_t axis) {
          if (!sharding[dim].empty() || llvm::is_contained(used, axis))
            return;
          sharding[dim].push_back(axis);
          used.push_back(axis);
        };
        for (auto &[logicalName, axis] : rules)
          if (logicalName == name.getValue())
            tryAxis(axis);
        // Megatron sequence parallelism: the inputs split their sequence
        // over tp wherever the tensor-parallel weights leave it free; the
        // activations follow (through a reduce-scatter where the
        // vocabulary-parallel embedding's partial sum meets it).
        if (sequenceParallel && activation && name.getValue() == "seq")
          if (std::optional<int16_t> tp = mesh.axisIndex("tp"))
            tryAxis(*tp);
      }
    } else {
      StringAttr owner =
          func.getArgAttrOfType<StringAttr>(index, nn::NNDialect::kGradAttrName);
      if (!owner)
        owner = func.getArgAttrOfType<StringAttr>(index,
                                                  nn::NNDialect::kStateAttrName);
      if (owner) {
        StringRef name = owner.getValue();
        auto it = paramShardings.find(name);
        // A state "w.m" belongs to parameter "w".
        while (it == paramShardings.end() && name.contains('.')) {
          name = name.rsplit('.').first;
          it = paramShardings.find(name);
        }
        if (it != paramShardings.end() &&
            it->second.size() == static_cast<size_t>(tensor.getRank()))
          sharding = it->second;
      }
    }
    for (auto [dim, axes] : llvm::enumerate(sharding)) {
      int64_t group = mesh.groupSize(axes);
      if (!axes.empty() && tensor.getDimSize(dim) % group != 0)
        return where() << ": dimension " << dim << " of size "
                       << tensor.getDimSize(dim)
                       << " does not split evenly over mesh axes '"
                       << mesh.axesText(axes) << "' of size " << group;
    }
    shardings[arg] = sharding;
    annotated.insert(arg);
    if (auto name = func.getArgAttrOfType<StringAttr>(
            index, nn::NNDialect::kParamAttrName))
      paramShardings.try_emplace(name.getValue(), sharding);
    return success();
  };

  // Parameters first, so gradients and states can take their shardings.
  for (func::FuncOp func : entries)
    for (unsigned i = 0; i < func.getNumArguments(); ++i)
      if (func.getArgAttr(i, nn::NNDialect::kParamAttrName) &&
          failed(seedArgument(func, i)))
        return failure();
  for (func::FuncOp func : entries)
    for (unsigned i = 0; i < func.getNumArguments(); ++i)
      if (!func.getArgAttr(i, nn::NNDialect::kParamAttrName) &&
          failed(seedArgument(func, i)))
        return failure();
  return success();
}

void Propagator::run() {
  // Every pass refines at least one dimension of one value, so the number
  // of passes is bounded by the number of (value, dimension) pairs; the cap
  // only guards against a bug.
  for (int iteration = 0; iteration < 64; ++iteration) {
    changed = false;
    for (func::FuncOp func : entries) {
      walk(func, /*backward=*/false);
      walk(func, /*backward=*/true);
    }
    if (!changed)
      break;
  }
}

void Propagator::walk(func::FuncOp func, bool backward) {
  Block &body = func.getBody().front();
  if (!backward) {
    for (Operation &op : body)
      visit(&op);
    return;
  }
  for (Operation &op : llvm::reverse(body))
    visit(&op);
}

void Propagator::visit(Operation *op) {
  if (auto repeat = dyn_cast<nn::RepeatOp>(op))
    return visitRepeat(repeat);
  if (auto ret = dyn_cast<func::ReturnOp>(op))
    return visitReturn(ret);
  // A cast changes only the element type: the cast of an annotated value (a
  // parameter's bf16 copy under mixed precision) is annotated as it is, so
  // it keeps a parameter's priority over activations.
  if (auto cast = dyn_cast<nn::CastOp>(op);
      cast && annotated.contains(cast.getInput()) &&
      !annotated.contains(cast.getResult())) {
    shardings[cast.getResult()] = shardingOf(cast.getInput());
    annotated.insert(cast.getResult());
    changed = true;
    return;
  }
  if (isa<shard::ShardingInterface>(op))
    decide(op);
}

void Propagator::decide(Operation *op) {
  auto rule = cast<shard::ShardingInterface>(op);
  SmallVector<AffineMap> maps = rule.getIndexingMaps();
  SmallVector<utils::IteratorType> loops = rule.getLoopIteratorTypes();
  SmallVector<int64_t> unsplittable;
  if (auto constraints = dyn_cast<nn::ShardingConstraintOpInterface>(op))
    unsplittable = constraints.getUnsplittableLoops();
  SmallVector<int64_t> extents = loopExtents(op, maps);
  SmallVector<Value> values(op->getOperands());
  llvm::append_range(values, op->getResults());
  if (maps.size() != values.size())
    return;

  SmallVector<Proposal> proposals;
  for (auto [index, value] : llvm::enumerate(values)) {
    auto it = shardings.find(value);
    if (it == shardings.end())
      continue;
    for (auto [dim, axes] : llvm::enumerate(it->second)) {
      if (axes.empty() || dim >= maps[index].getNumResults())
        continue;
      std::optional<unsigned> loop = leadingLoop(maps[index].getResult(dim));
      if (!loop)
        continue;
      proposals.push_back({*loop, axes, annotated.contains(value),
                           nn::detail::tensorBytes(value.getType()),
                           static_cast<unsigned>(index)});
    }
  }
  llvm::stable_sort(proposals, [](const Proposal &a, const Proposal &b) {
    if (a.userAnnotated != b.userAnnotated)
      return a.userAnnotated;
    return a.bytes > b.bytes;
  });

  unsigned numOperands = op->getNumOperands();
  auto describeValue = [&](unsigned index) {
    std::string text = index < numOperands
                           ? "operand #" + std::to_string(index)
                           : "result #" + std::to_string(index - numOperands);
    return text;
  };
  DimSharding loopSharding(loops.size());
  MeshAxes used;
  // Explanations are written only for --debug.
  std::string why;
  llvm::raw_string_ostream whyStream(why);
  llvm::raw_ostream &os = explain ? static_cast<llvm::raw_ostream &>(whyStream)
                                  : llvm::nulls();
  // An op updating a value in place (an accumulator, optimizer state)
  // computes it exactly as that value is split: its loops are pinned.
  SmallVector<bool> pinned(loops.size(), false);
  if (auto dps = dyn_cast<DestinationStyleOpInterface>(op))
    for (OpOperand &init : dps.getDpsInitsMutable()) {
      DimSharding sharding = shardingOf(init.get());
      AffineMap map = maps[init.getOperandNumber()];
      for (auto [dim, axes] : llvm::enumerate(sharding)) {
        std::optional<unsigned> loop =
            dim < map.getNumResults() ? leadingLoop(map.getResult(dim))
                                      : std::nullopt;
        if (!loop || *loop >= loops.size() || pinned[*loop])
          continue;
        pinned[*loop] = true;
        loopSharding[*loop] = axes;
        llvm::append_range(used, axes);
        if (!axes.empty())
          os << "; loop " << *loop << " over '" << mesh.axesText(axes)
             << "' pinned by in-place operand #" << init.getOperandNumber();
      }
    }
  // Requests of operands that lose their axes to a split sum reduction the
  // result does not index: the result is then a partial sum over those
  // axes, and a reduce-scatter completes it straight into the split that
  // was asked for (the token ids' sequence split under sequence
  // parallelism, where the vocabulary-parallel embedding takes tp).
  SmallVector<std::pair<const Proposal *, MeshAxes>> deferred;
  for (const Proposal &p : proposals) {
    if (p.loop >= loops.size())
      continue;
    if (loopSharding[p.loop] == p.axes)
      continue;
    if (explain)
      os << "; loop " << p.loop << " over '" << mesh.axesText(p.axes)
         << "' asked by " << describeValue(p.valueIndex)
         << (p.userAnnotated ? " (user annotation)" : "");
    if (llvm::is_contained(unsplittable, static_cast<int64_t>(p.loop))) {
      os << ": refused, the loop must stay whole";
      continue;
    }
    if (pinned[p.loop]) {
      os << ": refused, the in-place operand fixes it";
      continue;
    }
    if (!loopSharding[p.loop].empty()) {
      os << ": lost, already split over '"
         << mesh.axesText(loopSharding[p.loop]) << "'";
      continue;
    }
    if (llvm::any_of(p.axes,
                     [&](int16_t a) { return llvm::is_contained(used, a); })) {
      os << ": lost, the axis already splits another loop";
      if (p.valueIndex < op->getNumOperands())
        deferred.push_back({&p, p.axes});
      continue;
    }
    if (extents[p.loop] <= 0 || extents[p.loop] % mesh.groupSize(p.axes) != 0) {
      os << ": refused, size " << extents[p.loop] << " does not divide";
      continue;
    }
    if (llvm::any_of(maps, [&](AffineMap map) {
          return llvm::any_of(map.getResults(), [&](AffineExpr expr) {
            return leadingLoop(expr) == std::optional<unsigned>(p.loop) &&
                   !splitsIntoBlocks(expr, extents[p.loop],
                                     mesh.groupSize(p.axes));
          });
        })) {
      os << ": refused, its blocks would cut a group index's groups";
      continue;
    }
    loopSharding[p.loop] = p.axes;
    llvm::append_range(used, p.axes);
    os << ": taken";
  }
  loopShardings[op] = loopSharding;

  SmallVector<DimSharding> valueShardings;
  for (auto [index, value] : llvm::enumerate(values))
    valueShardings.push_back(shardingOfValue(maps[index], loopSharding));
  SmallVector<shard::ReductionKind> kinds = rule.getReductionLoopIteratorKinds();
  SmallVector<std::optional<shard::ReductionKind>> loopKinds(loops.size());
  for (unsigned loop = 0, r = 0; loop < loops.size(); ++loop)
    if (loops[loop] == utils::IteratorType::reduction && r < kinds.size())
      loopKinds[loop] = kinds[r++];
  for (auto &[p, axes] : deferred) {
    // The loops now holding the axes: all sum reductions.
    SmallVector<unsigned> holders;
    for (auto [loop, loopAxes] : llvm::enumerate(loopSharding))
      // By name: clang before 16 cannot capture a structured binding.
      if (llvm::any_of(axes, [&loopAxes = loopAxes](int16_t a) {
            return llvm::is_contained(loopAxes, a);
          }))
        holders.push_back(loop);
    if (holders.empty() || llvm::any_of(holders, [&](unsigned loop) {
          return loopKinds[loop] != shard::ReductionKind::Sum;
        }))
      continue;
    if (extents[p->loop] <= 0 ||
        extents[p->loop] % mesh.groupSize(axes) != 0)
      continue;
    for (unsigned index = numOperands; index < values.size(); ++index) {
      AffineMap map = maps[index];
      SmallVector<unsigned> indexed;
      for (AffineExpr expr : map.getResults())
        llvm::append_range(indexed, loopsOf(expr));
      if (llvm::any_of(holders, [&](unsigned loop) {
            return llvm::is_contained(indexed, loop);
          }))
        continue;
      for (unsigned dim = 0; dim < map.getNumResults(); ++dim)
        if (leadingLoop(map.getResult(dim)) == std::optional<unsigned>(p->loop) &&
            valueShardings[index][dim].empty()) {
          valueShardings[index][dim] = axes;
          os << "; result #" << index - numOperands << " dimension " << dim
             << " over '" << mesh.axesText(axes)
             << "' by reduce-scattering the partial sum (asked by "
             << describeValue(p->valueIndex) << ")";
        }
    }
  }
  if (explain)
    explanations[op] = why.empty() ? std::string("; nothing split") : why;

  for (auto [index, value] : llvm::enumerate(values))
    refine(value, valueShardings[index]);
}

void Propagator::visitRepeat(nn::RepeatOp repeat) {
  func::FuncOp layer = repeat.getLayerFunction();
  if (!layer)
    return;
  bodies.insert(layer);
  unsigned numCarried = repeat.getCarried().size();
  auto strip = [](DimSharding sharding) {
    if (!sharding.empty())
      sharding.erase(sharding.begin());
    return sharding;
  };
  auto stack = [](DimSharding sharding) {
    sharding.insert(sharding.begin(), MeshAxes{});
    return sharding;
  };
  // Caller to layer: a parameter slice is annotated when its stack is.
  for (auto [i, operand] : llvm::enumerate(repeat.getCarried())) {
    BlockArgument arg = layer.getArgument(i);
    refine(arg, shardingOf(operand));
    refine(arg, shardingOf(repeat.getResult(i)));
  }
  for (auto [j, operand] : llvm::enumerate(repeat.getParams())) {
    BlockArgument arg = layer.getArgument(numCarried + j);
    if (annotated.contains(operand) && !annotated.contains(arg)) {
      shardings[arg] = strip(shardingOf(operand));
      annotated.insert(arg);
      changed = true;
    } else {
      refine(arg, strip(shardingOf(operand)));
    }
  }
  auto ret = cast<func::ReturnOp>(layer.getBody().front().getTerminator());
  for (auto [k, stacked] : llvm::enumerate(repeat.getStackedResults()))
    refine(ret.getOperand(numCarried + k), strip(shardingOf(stacked)));

  walk(layer, /*backward=*/false);
  walk(layer, /*backward=*/true);

  // Layer to caller.
  for (unsigned i = 0; i < numCarried; ++i) {
    refine(repeat.getCarried()[i], shardingOf(layer.getArgument(i)));
    refine(repeat.getResult(i), shardingOf(layer.getArgument(i)));
  }
  for (auto [j, operand] : llvm::enumerate(repeat.getParams()))
    refine(operand, stack(shardingOf(layer.getArgument(numCarried + j))));
  for (auto [k, stacked] : llvm::enumerate(repeat.getStackedResults()))
    refine(stacked, stack(shardingOf(ret.getOperand(numCarried + k))));
}

DimSharding Propagator::requiredResult(func::FuncOp func, unsigned index) {
  auto tensor = dyn_cast<RankedTensorType>(func.getResultTypes()[index]);
  DimSharding none(tensor ? tensor.getRank() : 0);
  if (bodies.contains(func)) {
    // A carried value returns to the next layer's argument.
    if (index < func.getNumArguments() &&
        func.getArgument(index).getType() == func.getResultTypes()[index])
      return shardingOf(func.getArgument(index));
    return none;
  }
  // A pipeline stage's output: the sharding the next stage receives it in.
  if (Attribute given = func.getResultAttr(index, kShardingAttr)) {
    std::string error;
    if (std::optional<DimSharding> parsed =
            shardingFromAttr(given, mesh, error);
        parsed && parsed->size() == none.size())
      return *parsed;
  }
  for (StringRef attr : {nn::NNDialect::kGradAttrName,
                         nn::NNDialect::kStateAttrName,
                         nn::NNDialect::kParamAttrName}) {
    auto name = func.getResultAttrOfType<StringAttr>(index, attr);
    if (!name)
      continue;
    // The argument with the same role and name holds the same tensor.
    for (unsigned i = 0; i < func.getNumArguments(); ++i)
      if (func.getArgAttr(i, attr) == name)
        return shardingOf(func.getArgument(i));
  }
  return none;
}

void Propagator::visitReturn(func::ReturnOp ret) {
  auto func = ret->getParentOfType<func::FuncOp>();
  bool isBody = bodies.contains(func);
  for (auto [index, operand] : llvm::enumerate(ret.getOperands())) {
    refine(operand, requiredResult(func, index));
    // Carried values: the argument and the returned value are one value of
    // the loop, refined together.
    if (isBody && index < func.getNumArguments() &&
        func.getArgument(index).getType() == operand.getType())
      refine(func.getArgument(index), shardingOf(operand));
  }
}

void Propagator::writeAttributes(ModuleOp module) {
  MLIRContext *ctx = module.getContext();
  SmallVector<func::FuncOp> funcs(entries);
  llvm::append_range(funcs, bodies);
  for (func::FuncOp func : funcs) {
    for (BlockArgument arg : func.getArguments()) {
      DimSharding sharding = shardingOf(arg);
      if (isa<RankedTensorType>(arg.getType()) && !isReplicated(sharding))
        func.setArgAttr(arg.getArgNumber(), kShardingAttr,
                        shardingToAttr(ctx, mesh, sharding));
      else
        func.removeArgAttr(arg.getArgNumber(), kShardingAttr);
    }
    auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
    for (unsigned i = 0; i < func.getNumResults(); ++i) {
      DimSharding sharding = requiredResult(func, i);
      // A layer's per-layer outputs keep whatever their producer gives.
      if (bodies.contains(func) && isReplicated(sharding))
        sharding = shardingOf(ret.getOperand(i));
      if (!isReplicated(sharding))
        func.setResultAttr(i, kShardingAttr, shardingToAttr(ctx, mesh, sharding));
      else
        func.removeResultAttr(i, StringAttr::get(ctx, kShardingAttr));
    }
    func.walk([&](Operation *op) {
      auto it = loopShardings.find(op);
      if (it == loopShardings.end())
        return;
      op->setAttr(kLoopShardingAttr, shardingToAttr(ctx, mesh, it->second));
      if (explain)
        op->emitRemark() << "sharding: "
                         << StringRef(explanations[op]).drop_front(2);
    });
  }
}

struct PropagateShardingPass
    : tessel::impl::PropagateShardingPassBase<PropagateShardingPass> {
  using Base::Base;

  /// An axis nothing is split over runs its ranks on copies of the same
  /// work (a mistyped --mesh, a rule that names another axis): say so.
  void warnUnusedAxes(ModuleOp module, const Mesh &mesh,
                      const MeshAxes &used) {
    // A pipeline stage's module: its stages are the pipeline axis's split.
    std::optional<int> pipelineAxis;
    if (module->hasAttr(nn::NNDialect::kStageAttrName))
      pipelineAxis = mesh.axisIndex(kPipelineAxisName);
    for (auto [index, size] : llvm::enumerate(mesh.shape))
      if (size > 1 && !llvm::is_contained(used, int16_t(index)) &&
          pipelineAxis != int(index))
        module.emitWarning()
            << "mesh axis '" << mesh.axes[index] << "' (size " << size
            << ") splits nothing (rules: " << this->rules
            << "; no annotation names it): its " << size
            << " ranks repeat the same work";
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (failed(nn::RepeatOp::refuseOuts(module, "tessel-propagate-sharding")))
      return signalPassFailure();
    std::string error;
    std::optional<Mesh> mesh = Mesh::parse(this->mesh, error);
    if (!mesh) {
      module.emitError() << "tessel-propagate-sharding: " << error;
      return signalPassFailure();
    }
    FailureOr<std::optional<Mesh>> existing = meshFromModule(module);
    if (failed(existing))
      return signalPassFailure();
    if (*existing && ((*existing)->axes != mesh->axes ||
                      (*existing)->shape != mesh->shape)) {
      module.emitError() << "the module already holds a different @mesh";
      return signalPassFailure();
    }
    std::optional<std::vector<std::pair<std::string, std::string>>> named =
        parseRules(this->rules, error);
    if (!named) {
      module.emitError() << "tessel-propagate-sharding: rules: " << error;
      return signalPassFailure();
    }
    // Rules naming an axis this mesh lacks are skipped for the defaults
    // (they serve any mesh) and refused when the user wrote them.
    std::optional<SmallVector<MeshRule>> rules =
        meshRules(*mesh, *named,
                  /*dropUnknown=*/this->rules == kDefaultShardingRules, error);
    if (!rules) {
      module.emitError() << error;
      return signalPassFailure();
    }
    if (sequenceParallel && !mesh->axisIndex("tp")) {
      module.emitError() << "sequence parallelism splits the sequence over "
                            "'tp', which the mesh lacks";
      return signalPassFailure();
    }
    materializeMesh(module, *mesh);
    auto propagate = [&]() -> std::unique_ptr<Propagator> {
      auto propagator = std::make_unique<Propagator>(*mesh, debug);
      if (failed(propagator->seed(module, *rules, sequenceParallel)))
        return nullptr;
      propagator->run();
      return propagator;
    };
    std::unique_ptr<Propagator> propagator = propagate();
    if (!propagator)
      return signalPassFailure();
    // Weight gradients whose rows a split sequence cannot reach are
    // rewritten to sum their rows' dimensions (RowContractions.h), then
    // propagated again.
    if (splitRowContractions(module, [&](Value value) {
          return propagator->shardingOf(value);
        })) {
      propagator = propagate();
      if (!propagator)
        return signalPassFailure();
    }
    propagator->writeAttributes(module);
    warnUnusedAxes(module, *mesh, propagator->axesInUse());
  }
};

} // namespace
