//===- CheckCommunication.cpp - tessel-check-communication --------------===//
//
// Builds every world rank's communication in one step (the collectives of
// the entries it calls, the pipeline's sends and receives, in the order
// the launcher runs them) and matches the ranks' programs with
// runtime/config/CommCheck.h, so that a step that would deadlock or pair
// mismatched buffers is a compile-time error with locations rather than a
// hang on the cluster. The launcher must run exactly what is modelled
// here; the order is documented in Passes.td and docs/parallelism.md.
//
//===----------------------------------------------------------------------===//

#include "passes/Communication.h"
#include "passes/Passes.h"
#include "passes/PipelinePlan.h"
#include "passes/Sharding.h"

#include "dialect/NN/NNDialect.h"
#include "dialect/NN/NNInterfaces.h"
#include "dialect/NN/NNOps.h"
#include "runtime/config/CommCheck.h"
#include "runtime/config/PipelineSchedule.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/Support/Path.h"

#include <map>

namespace tessel {
#define GEN_PASS_DEF_CHECKCOMMUNICATIONPASS
#include "passes/Passes.h.inc"
} // namespace tessel

using namespace mlir;
using namespace tessel;
using commcheck::Event;
using pipeline::Action;
using pipeline::ActionKind;

namespace {

/// "gpt.mlir:93:10": a location as messages name it.
std::string locationText(Location loc) {
  if (auto file = loc->findInstanceOf<FileLineColLoc>())
    return (llvm::sys::path::filename(file.getFilename().getValue()) + ":" +
            Twine(file.getLine()) + ":" + Twine(file.getColumn()))
        .str();
  std::string text;
  llvm::raw_string_ostream os(text);
  loc.print(os);
  return text;
}

std::string elementTypeText(Type type) {
  std::string text;
  llvm::raw_string_ostream os(text);
  if (auto shaped = dyn_cast<ShapedType>(type))
    shaped.getElementType().print(os);
  else
    type.print(os);
  return text;
}

/// One collective of a function, what every call of it communicates.
struct Collective {
  std::string op;
  uint32_t mask;
  int64_t bytes;
  std::string dtype;
  Location loc;
  std::string at; // locationText(loc)
};

/// One tensor a pipeline action sends or receives.
struct Message {
  int64_t bytes;
  std::string dtype;
  Location loc;
  std::string at; // locationText(loc)
};

/// What the check needs of one model (a stage's module, or the module).
struct StageEntries {
  ModuleOp module;
  func::FuncOp forward, backward, update;
  /// Indices into the collectives table, in program order, repeats
  /// expanded.
  std::vector<int> forwardCollectives, backwardCollectives, updateCollectives;
  /// A zero-bubble stage's backward parts (tessel-split-backward).
  func::FuncOp backwardInput, backwardWeight;
  std::vector<int> inputCollectives, weightCollectives;
  /// A clipping stage's gradient norm (tessel-split-update-norm).
  func::FuncOp gradNorm;
  std::vector<int> gradNormCollectives;
  /// The backward without its gradient reductions and their step's
  /// reduction (tessel-defer-gradient-reduction).
  func::FuncOp backwardNoSync, reduceGrads, backwardWeightNoSync;
  std::vector<int> noSyncCollectives, reduceGradsCollectives,
      weightNoSyncCollectives;
  /// The forward that keeps what the backward reads, which a training
  /// Forward action runs (tessel-keep-stage-activations).
  func::FuncOp forwardKeep;
  std::vector<int> forwardKeepCollectives;
  SmallVector<Message> inputs, outputs, inputGrads, outputGrads;
  /// nn.grad name -> the backward's gradient of that parameter.
  llvm::StringMap<Message> grads;
};

/// The training entries by their kind (nn.entry), each with the list of
/// its collectives.
struct EntrySlot {
  StringLiteral kind;
  func::FuncOp StageEntries::*func;
  std::vector<int> StageEntries::*collectives;
};
constexpr EntrySlot kEntrySlots[] = {
    {"backward", &StageEntries::backward, &StageEntries::backwardCollectives},
    {"update", &StageEntries::update, &StageEntries::updateCollectives},
    {"backward_input", &StageEntries::backwardInput,
     &StageEntries::inputCollectives},
    {"backward_weight", &StageEntries::backwardWeight,
     &StageEntries::weightCollectives},
    {"grad_norm", &StageEntries::gradNorm, &StageEntries::gradNormCollectives},
    {"backward_no_sync", &StageEntries::backwardNoSync,
     &StageEntries::noSyncCollectives},
    {"backward_weight_no_sync", &StageEntries::backwardWeightNoSync,
     &StageEntries::weightNoSyncCollectives},
    {"reduce_grads", &StageEntries::reduceGrads,
     &StageEntries::reduceGradsCollectives},
    {"forward_keep", &StageEntries::forwardKeep,
     &StageEntries::forwardKeepCollectives},
};

Message messageOf(Type type, Location loc) {
  return {nn::detail::tensorBytes(type), elementTypeText(type), loc,
          locationText(loc)};
}

struct CheckCommunicationPass
    : tessel::impl::CheckCommunicationPassBase<CheckCommunicationPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp top = getOperation();
    FailureOr<std::optional<PipelinePlan>> plan = PipelinePlan::fromModule(top);
    if (failed(plan))
      return signalPassFailure();
    LogicalResult result =
        *plan ? checkPipeline(top, **plan) : checkPartitioned(top);
    if (failed(result))
      signalPassFailure();
  }

private:
  Mesh mesh;
  std::vector<Collective> collectives;
  llvm::DenseMap<Operation *, std::vector<int>> sequenceOf;
  /// (world rank, axes mask) -> the sorted ranks of that group.
  std::map<std::pair<int64_t, uint32_t>, std::vector<int>> groups;
  std::vector<std::vector<Event>> programs;
  /// Per rank, per event: the location of the IR it comes from.
  std::vector<std::vector<Location>> sites;

  /// The collectives one call of `func` runs, in program order: an
  /// nn.repeat's layer function (and its prefetch) as many times as it
  /// repeats. Collectives
  /// over a group of one, and all_slice, move nothing and are left out.
  FailureOr<std::vector<int>> sequence(func::FuncOp func) {
    if (!func || func.isExternal())
      return std::vector<int>();
    if (auto it = sequenceOf.find(func); it != sequenceOf.end())
      return it->second;
    sequenceOf[func] = {}; // a layer that repeats itself is counted once
    std::vector<int> result;
    for (Operation &op : func.getBody().getOps()) {
      if (auto repeat = dyn_cast<nn::RepeatOp>(op)) {
        FailureOr<std::vector<int>> layer = sequence(repeat.getLayerFunction());
        FailureOr<std::vector<int>> prefetch =
            sequence(repeat.getPrefetchFunction());
        if (failed(layer) || failed(prefetch))
          return failure();
        // A prefetch runs for the first layer, then for each next layer
        // before the current one.
        result.insert(result.end(), prefetch->begin(), prefetch->end());
        for (int64_t i = 0; i < repeat.getNumLayers(); ++i) {
          if (i + 1 < repeat.getNumLayers())
            result.insert(result.end(), prefetch->begin(), prefetch->end());
          result.insert(result.end(), layer->begin(), layer->end());
        }
        continue;
      }
      if (!communication::isLowerableCollective(&op) ||
          isa<shard::AllSliceOp>(op))
        continue;
      uint32_t mask = communication::axesMask(&op);
      if (mask >> mesh.axes.size())
        return op.emitOpError()
               << "runs over a grid axis beyond the mesh " << mesh.toString();
      if (mesh.groupSize(communication::axesOfMask(mask)) == 1)
        continue;
      StringRef name = op.getName().stripDialect();
      Type operand = op.getOperand(0).getType();
      result.push_back(int(collectives.size()));
      collectives.push_back({name.str(), mask, nn::detail::tensorBytes(operand),
                             elementTypeText(operand), op.getLoc(),
                             locationText(op.getLoc())});
    }
    return sequenceOf[func] = std::move(result);
  }

  /// The entries of `module`'s model and what crosses its stage boundary.
  FailureOr<StageEntries> entriesOf(ModuleOp module) {
    StageEntries entries;
    entries.module = module;
    for (auto func : module.getOps<func::FuncOp>()) {
      auto role =
          func->getAttrOfType<StringAttr>(nn::NNDialect::kEntryAttrName);
      const EntrySlot *slot =
          role ? llvm::find_if(kEntrySlots,
                               [&](const EntrySlot &slot) {
                                 return slot.kind == role.getValue();
                               })
               : std::end(kEntrySlots);
      if (slot != std::end(kEntrySlots))
        entries.*slot->func = func;
      else if (!role && nn::NNDialect::isModelFunction(func))
        entries.forward = func;
    }
    FailureOr<std::vector<int>> forward = sequence(entries.forward);
    if (failed(forward))
      return failure();
    entries.forwardCollectives = std::move(*forward);
    for (const EntrySlot &slot : kEntrySlots) {
      FailureOr<std::vector<int>> found = sequence(entries.*slot.func);
      if (failed(found))
        return failure();
      entries.*slot.collectives = std::move(*found);
    }
    auto arguments = [](func::FuncOp func, StringRef attr,
                        SmallVector<Message> &out) {
      if (func)
        for (BlockArgument arg : func.getArguments())
          if (func.getArgAttr(arg.getArgNumber(), attr))
            out.push_back(messageOf(arg.getType(), arg.getLoc()));
    };
    auto results = [](func::FuncOp func, StringRef attr,
                      SmallVector<Message> &out) {
      if (!func)
        return;
      Location loc = func.getBody().back().getTerminator()->getLoc();
      for (auto [i, type] : llvm::enumerate(func.getResultTypes()))
        if (func.getResultAttr(i, attr))
          out.push_back(messageOf(type, loc));
    };
    arguments(entries.forward, nn::NNDialect::kStageInputAttrName,
              entries.inputs);
    results(entries.forward, nn::NNDialect::kStageOutputAttrName,
            entries.outputs);
    arguments(entries.backward, nn::NNDialect::kOutputGradAttrName,
              entries.outputGrads);
    results(entries.backward, nn::NNDialect::kInputGradAttrName,
            entries.inputGrads);
    if (entries.backward) {
      Location loc =
          entries.backward.getBody().back().getTerminator()->getLoc();
      for (auto [i, type] : llvm::enumerate(entries.backward.getResultTypes()))
        if (auto name = entries.backward.getResultAttrOfType<StringAttr>(
                i, nn::NNDialect::kGradAttrName))
          entries.grads.try_emplace(name.getValue(), messageOf(type, loc));
    }
    return entries;
  }

  const std::vector<int> &groupOf(int64_t rank, uint32_t mask) {
    std::vector<int> &group = groups[{rank, mask}];
    if (!group.empty())
      return group;
    std::vector<int64_t> coordinates = mesh.coordinates(rank);
    int64_t base = rank, stride = 1;
    std::vector<std::pair<int64_t, int64_t>> spans; // (stride, size)
    for (int axis = int(mesh.axes.size()) - 1; axis >= 0; --axis) {
      if (mask & (uint32_t(1) << axis)) {
        base -= coordinates[axis] * stride;
        spans.push_back({stride, mesh.shape[axis]});
      }
      stride *= mesh.shape[axis];
    }
    group.push_back(int(base));
    for (auto [step, size] : spans) {
      size_t count = group.size();
      for (int64_t c = 1; c < size; ++c)
        for (size_t i = 0; i < count; ++i)
          group.push_back(int(group[i] + c * step));
    }
    llvm::sort(group);
    return group;
  }

  void append(int64_t rank, Event event, Location loc, StringRef at,
              StringRef label) {
    event.where = (at + " (" + label + ")").str();
    programs[rank].push_back(std::move(event));
    sites[rank].push_back(loc);
  }

  void appendCollectives(int64_t rank, const std::vector<int> &sequence,
                         StringRef label) {
    for (int index : sequence) {
      const Collective &c = collectives[index];
      Event event{Event::Kind::Collective};
      event.op = c.op;
      event.group = groupOf(rank, c.mask);
      event.axes = mesh.axesText(communication::axesOfMask(c.mask));
      event.bytes = c.bytes;
      event.dtype = c.dtype;
      append(rank, std::move(event), c.loc, c.at, label);
    }
  }

  void appendTransfer(int64_t rank, bool send, int64_t peer, int64_t tag,
                      const Message &message, StringRef label) {
    Event event{send ? Event::Kind::Send : Event::Kind::Recv};
    event.op = send ? "send" : "recv";
    event.peer = int(peer);
    event.tag = tag;
    event.bytes = message.bytes;
    event.dtype = message.dtype;
    append(rank, std::move(event), message.loc, message.at, label);
  }

  void resetPrograms() {
    programs.assign(mesh.worldSize(), {});
    sites.assign(mesh.worldSize(), {});
  }

  /// Matches the programs; a finding becomes an error at the first event's
  /// IR (or `top`) with a note at the other's.
  LogicalResult match(ModuleOp top) {
    std::optional<commcheck::Finding> finding = commcheck::check(programs);
    if (!finding) {
      if (remark) {
        int64_t counts[3] = {0, 0, 0};
        for (const std::vector<Event> &program : programs)
          for (const Event &event : program)
            ++counts[int(event.kind)];
        top.emitRemark() << "communication check: " << programs.size()
                         << " ranks match: "
                         << counts[int(Event::Kind::Collective)]
                         << " collective calls, "
                         << counts[int(Event::Kind::Send)] << " sends, "
                         << counts[int(Event::Kind::Recv)] << " receives";
      }
      return success();
    }
    auto siteOf = [&](int rank, int event) -> std::optional<Location> {
      if (rank < 0 || event < 0 || rank >= int(sites.size()) ||
          event >= int(sites[rank].size()))
        return std::nullopt;
      return sites[rank][event];
    };
    std::optional<Location> first = siteOf(finding->rankA, finding->eventA);
    InFlightDiagnostic diag = emitError(first ? *first : top.getLoc())
                              << "communication check: " << finding->message;
    // (The loss's all-reduce has no IR of its own; the message names it.)
    std::optional<Location> second = siteOf(finding->rankB, finding->eventB);
    if (second && *second != top.getLoc())
      diag.attachNote(*second)
          << "rank " << finding->rankB << "'s "
          << programs[finding->rankB][finding->eventB].op << " is here";
    return failure();
  }

  LogicalResult checkPartitioned(ModuleOp top) {
    FailureOr<std::optional<Mesh>> found = meshFromModule(top);
    if (failed(found))
      return failure();
    if (!*found)
      return success(); // Not partitioned: one rank, nothing to match.
    mesh = **found;
    FailureOr<StageEntries> entries = entriesOf(top);
    if (failed(entries))
      return failure();
    resetPrograms();
    for (int64_t rank = 0; rank < mesh.worldSize(); ++rank) {
      if (!entries->backward) {
        appendCollectives(rank, entries->forwardCollectives, "forward");
        continue;
      }
      appendCollectives(rank, entries->backwardCollectives, "backward");
      appendCollectives(rank, entries->updateCollectives, "update");
      // A step of several microbatches (one stands for them all).
      if (entries->reduceGrads) {
        appendCollectives(rank, entries->noSyncCollectives, "backward_no_sync");
        appendCollectives(rank, entries->reduceGradsCollectives,
                          "reduce_grads");
        appendCollectives(rank, entries->updateCollectives, "update");
      }
    }
    return match(top);
  }

  /// Stage s's outputs against stage s+1's inputs, and the gradients back.
  LogicalResult checkBoundary(StageEntries &from, int s, StageEntries &to) {
    auto compare = [&](const SmallVector<Message> &sent, StringRef sentName,
                       int sender, const SmallVector<Message> &received,
                       StringRef receivedName, int receiver,
                       ArrayRef<Type> sentTypes,
                       ArrayRef<Type> receivedTypes) -> LogicalResult {
      if (sent.size() != received.size()) {
        Location at = received.empty() ? to.module.getLoc() : received[0].loc;
        return emitError(at)
               << "stage " << receiver << " takes " << received.size() << " "
               << receivedName << "s but stage " << sender << " sends "
               << sent.size() << " " << sentName << "s";
      }
      for (size_t i = 0; i < sent.size(); ++i)
        if (sentTypes[i] != receivedTypes[i]) {
          InFlightDiagnostic diag =
              emitError(received[i].loc)
              << "stage " << receiver << "'s " << receivedName << " #" << i
              << " is " << receivedTypes[i] << " but stage " << sender << "'s "
              << sentName << " #" << i << " is " << sentTypes[i]
              << ": the pipeline would send " << sent[i].bytes
              << " bytes where " << received[i].bytes << " are received";
          diag.attachNote(sent[i].loc)
              << "stage " << sender << "'s " << sentName << " #" << i;
          return failure();
        }
      return success();
    };
    auto typesOf = [](func::FuncOp func, StringRef attr, bool args) {
      SmallVector<Type> types;
      if (!func)
        return types;
      for (unsigned i = 0,
                    e = args ? func.getNumArguments() : func.getNumResults();
           i < e; ++i)
        if (args ? bool(func.getArgAttr(i, attr))
                 : bool(func.getResultAttr(i, attr)))
          types.push_back(args ? func.getArgument(i).getType()
                               : func.getResultTypes()[i]);
      return types;
    };
    if (failed(compare(
            from.outputs, "output", s, to.inputs, "input", s + 1,
            typesOf(from.forward, nn::NNDialect::kStageOutputAttrName, false),
            typesOf(to.forward, nn::NNDialect::kStageInputAttrName, true))))
      return failure();
    if (!from.backward || !to.backward)
      return success();
    return compare(
        to.inputGrads, "input gradient", s + 1, from.outputGrads,
        "output gradient", s,
        typesOf(to.backward, nn::NNDialect::kInputGradAttrName, false),
        typesOf(from.backward, nn::NNDialect::kOutputGradAttrName, true));
  }

  LogicalResult checkPipeline(ModuleOp top, const PipelinePlan &plan) {
    const int stageCount = plan.stages();
    const int P = int(plan.ranks);
    SmallVector<ModuleOp> stageModules(stageCount);
    for (auto module : top.getOps<ModuleOp>()) {
      auto s =
          module->getAttrOfType<IntegerAttr>(nn::NNDialect::kStageAttrName);
      if (!s || s.getInt() < 0 || s.getInt() >= stageCount ||
          stageModules[s.getInt()])
        return module.emitError()
               << "is not one of the pipeline's " << stageCount
               << " stage modules (each with a distinct nn.stage)";
      stageModules[s.getInt()] = module;
    }
    for (int s = 0; s < stageCount; ++s)
      if (!stageModules[s])
        return top.emitError() << "the pipeline has no module for stage " << s;

    // One mesh for every stage; without one (not yet partitioned), the
    // pp axis alone.
    std::optional<Mesh> common;
    for (int s = 0; s < stageCount; ++s) {
      FailureOr<std::optional<Mesh>> found = meshFromModule(stageModules[s]);
      if (failed(found))
        return failure();
      if (s > 0 && *found != common)
        return stageModules[s].emitError()
               << "stage " << s << "'s mesh "
               << (*found ? (*found)->toString() : "(none)")
               << " differs from stage 0's "
               << (common ? common->toString() : "(none)");
      common = *found;
    }
    mesh = common ? *common : Mesh{{kPipelineAxisName.str()}, {plan.ranks}};
    std::optional<int> ppAxis = mesh.axisIndex(kPipelineAxisName);
    if (!ppAxis || mesh.shape[*ppAxis] != plan.ranks)
      return top.emitError()
             << "the pipeline has " << plan.ranks
             << " ranks but the stages' mesh " << mesh.toString()
             << " has no pp axis of " << plan.ranks;

    std::vector<StageEntries> stages;
    for (int s = 0; s < stageCount; ++s) {
      FailureOr<StageEntries> entries = entriesOf(stageModules[s]);
      if (failed(entries))
        return failure();
      stages.push_back(std::move(*entries));
    }
    for (int s = 0; s + 1 < stageCount; ++s)
      if (failed(checkBoundary(stages[s], s, stages[s + 1])))
        return failure();

    std::string error;
    std::optional<std::vector<std::vector<Action>>> actions =
        plan.rankActions(error);
    if (!actions)
      return top.emitError() << "pipeline schedule: " << error;

    // As the launcher runs it: several microbatches accumulate unreduced
    // gradients in backward_no_sync and reduce them once after the
    // schedule (tessel-defer-gradient-reduction).
    auto defers = [&](const StageEntries &stage) {
      return stage.reduceGrads && plan.microbatches > 1;
    };
    auto wholeBackward =
        [&](const StageEntries &stage) -> const std::vector<int> & {
      return defers(stage) ? stage.noSyncCollectives
                           : stage.backwardCollectives;
    };
    resetPrograms();
    const std::string topAt = locationText(top.getLoc());
    const uint32_t ppMask = uint32_t(1) << *ppAxis;
    // The ranks of one pp coordinate run programs of one length.
    std::vector<size_t> programLength(P, 0);
    for (int64_t rank = 0; rank < mesh.worldSize(); ++rank) {
      const int p = int(mesh.coordinates(rank)[*ppAxis]);
      programs[rank].reserve(programLength[p]);
      sites[rank].reserve(programLength[p]);
      auto worldRank = [&](int64_t pp) {
        return mesh.withCoordinate(rank, *ppAxis, pp);
      };
      const std::vector<int> ownStages = plan.stagesOf(p);
      for (const Action &action : (*actions)[p]) {
        const StageEntries &stage = stages[action.stage];
        const std::string label = pipeline::formatAction(action);
        switch (action.kind) {
        case ActionKind::Forward:
          appendCollectives(rank,
                            stage.forwardKeep ? stage.forwardKeepCollectives
                                              : stage.forwardCollectives,
                            label);
          break;
        case ActionKind::Backward:
          appendCollectives(rank, wholeBackward(stage), label);
          break;
        case ActionKind::BackwardInput:
          // Without split entries (as the launcher runs it), I runs the
          // stage's whole backward and W has nothing left to do.
          appendCollectives(rank,
                            stage.backwardWeight ? stage.inputCollectives
                                                 : wholeBackward(stage),
                            label);
          break;
        case ActionKind::BackwardWeight:
          if (stage.backwardWeight)
            appendCollectives(rank,
                              defers(stage) ? stage.weightNoSyncCollectives
                                            : stage.weightCollectives,
                              label);
          break;
        case ActionKind::Send:
        case ActionKind::Recv: {
          // Two stages of this rank hand over in memory: no message.
          if (action.peer == p)
            break;
          const bool send = action.kind == ActionKind::Send;
          const int producer = send              ? action.stage
                               : action.gradient ? action.stage + 1
                                                 : action.stage - 1;
          const SmallVector<Message> &messages =
              send ? (action.gradient ? stage.inputGrads : stage.outputs)
                   : (action.gradient ? stage.outputGrads : stage.inputs);
          const int64_t tag = pipeline::messageTag(
              stageCount, producer, action.microbatch, action.gradient);
          for (const Message &message : messages)
            appendTransfer(rank, send, worldRank(action.peer), tag, message,
                           label);
          break;
        }
        }
      }
      // The gradients accumulated unreduced, reduced once per stage.
      for (int s : ownStages)
        if (defers(stages[s]))
          appendCollectives(rank, stages[s].reduceGradsCollectives,
                            "gradient reduction of stage " + std::to_string(s));
      // The tied parameters' gradients, summed over the ranks holding them.
      for (auto [k, tied] : llvm::enumerate(plan.tied)) {
        SmallVector<int> holders; // pp ranks, in stage order
        int ownStage = -1;
        for (int64_t s : tied.second) {
          int holder = int(plan.rankOf(int(s)));
          if (!llvm::is_contained(holders, holder))
            holders.push_back(holder);
          if (holder == p && ownStage < 0)
            ownStage = int(s);
        }
        if (ownStage < 0 || ownStage >= stageCount)
          continue;
        auto grad = stages[ownStage].grads.find(tied.first);
        if (grad == stages[ownStage].grads.end())
          continue; // not trained
        const std::string label = "tied " + tied.first;
        for (bool send : {true, false})
          for (int holder : holders)
            if (holder != p)
              appendTransfer(rank, send, worldRank(holder), -int64_t(k + 1),
                             grad->second, label);
      }
      // What the launcher itself all-reduces over pp (no IR of its own).
      auto appendOverPipeline = [&](int64_t bytes, StringRef dtype,
                                    StringRef label) {
        Event event{Event::Kind::Collective};
        event.op = "all_reduce";
        event.group = groupOf(rank, ppMask);
        event.axes = kPipelineAxisName.str();
        event.bytes = bytes;
        event.dtype = dtype.str();
        append(rank, std::move(event), top.getLoc(), topAt, label);
      };
      // Clipping: each stage's part of the gradient norm, then their sum
      // over pp (tessel-split-update-norm), before any update.
      bool clipped = false;
      for (int s : ownStages)
        if (stages[s].gradNorm) {
          appendCollectives(rank, stages[s].gradNormCollectives,
                            "gradient norm of stage " + std::to_string(s));
          clipped = true;
        }
      if (clipped)
        appendOverPipeline(4, "f32", "the gradient norm over pp");
      for (int s : ownStages)
        appendCollectives(rank, stages[s].updateCollectives,
                          "update of stage " + std::to_string(s));
      appendOverPipeline(8, "f64", "the loss over pp");
      programLength[p] = programs[rank].size();
    }
    return match(top);
  }
};

} // namespace
