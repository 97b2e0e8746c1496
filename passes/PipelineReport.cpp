//===- PipelineReport.cpp - tessel-compile --report for a pipeline --------===//
//
// The figures of a pipeline come from three places: nn.pipeline (layers
// and the model's forward flops per stage, as tessel-pipeline-split
// balanced them), each planned stage module (the flops one rank spends in
// each entry, the bytes of its per-microbatch arguments) and the lowered
// description (each stage's arena and collectives). The schedules are
// simulated on the stages' per-rank flops: a stage's forward takes its
// forward entry's flops (forward_keep's where the stage keeps its
// activations), its backward its backward entry's (which, with
// --stage-recompute, recomputes the stage's forward from its input, as
// GPipe does).
//
//===----------------------------------------------------------------------===//

#include "passes/PipelineReport.h"
#include "passes/CompileReport.h"
#include "passes/PipelinePlan.h"

#include "dialect/NN/NNDialect.h"
#include "dialect/NN/NNInterfaces.h"
#include "runtime/config/PipelineSchedule.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <map>
#include <numeric>

using namespace mlir;
using namespace tessel;
namespace json = llvm::json;

namespace {

/// What one rank of stage `stage` computes and keeps per microbatch, read
/// on its planned module (local shapes, after tessel-partition).
struct StageFigures {
  int64_t forwardFlops = 0, backwardFlops = 0, updateFlops = 0;
  /// A zero-bubble stage's backward parts (0 without tessel-split-backward).
  int64_t backwardInputFlops = 0, backwardWeightFlops = 0;
  /// What the launcher keeps of one microbatch between the stage's actions
  /// (64-byte aligned, as it allocates them): its input activations, from
  /// their receipt until its backward (the feeds are drawn again); what
  /// forward_keep keeps for the backward, from the forward until the
  /// backward (none where the backward recomputes the forward); and,
  /// split, the weight part's stash and the output gradient, from the
  /// input part until the weight part.
  int64_t microbatchBytes = 0, keptBytes = 0, weightStashBytes = 0;
  bool keepsActivations = false;
  /// The activations it receives and sends (one microbatch).
  int64_t stageInputBytes = 0, stageOutputBytes = 0;
};

StageFigures stageFigures(ModuleOp stage) {
  StageFigures figures;
  for (auto func : stage.getOps<func::FuncOp>()) {
    if (func.isExternal())
      continue;
    int64_t flops = nn::sumCost(func.getBody().front()).flops;
    auto entry = func->getAttrOfType<StringAttr>(nn::NNDialect::kEntryAttrName);
    auto aligned = [](Type type) {
      return (nn::detail::tensorBytes(type) + 63) / 64 * 64;
    };
    if (entry && entry.getValue() == "backward") {
      figures.backwardFlops = flops;
    } else if (entry && entry.getValue() == "backward_input") {
      figures.backwardInputFlops = flops;
      for (unsigned i = 0; i < func.getNumResults(); ++i)
        if (func.getResultAttr(i, nn::NNDialect::kStashAttrName))
          figures.weightStashBytes += aligned(func.getResultTypes()[i]);
      for (unsigned i = 0; i < func.getNumArguments(); ++i)
        if (func.getArgAttr(i, nn::NNDialect::kOutputGradAttrName))
          figures.weightStashBytes += aligned(func.getArgument(i).getType());
    } else if (entry && entry.getValue() == "backward_weight") {
      figures.backwardWeightFlops = flops;
    } else if (entry && entry.getValue() == "forward_keep") {
      figures.keepsActivations = true;
      figures.forwardFlops = flops;
      for (unsigned i = 0; i < func.getNumResults(); ++i)
        if (func.getResultAttr(i, nn::NNDialect::kKeptAttrName))
          figures.keptBytes += aligned(func.getResultTypes()[i]);
    } else if (entry && (entry.getValue() == "update" ||
                         entry.getValue() == "grad_norm")) {
      // A clipping stage's gradient norm is part of its update.
      figures.updateFlops += flops;
    } else if (nn::NNDialect::isModelFunction(func)) {
      if (!figures.keepsActivations)
        figures.forwardFlops = flops;
      for (unsigned i = 0; i < func.getNumArguments(); ++i) {
        int64_t bytes = nn::detail::tensorBytes(func.getArgument(i).getType());
        bool stageInput =
            func.getArgAttr(i, nn::NNDialect::kStageInputAttrName) != nullptr;
        if (stageInput) {
          figures.stageInputBytes += bytes;
          figures.microbatchBytes += (bytes + 63) / 64 * 64;
        }
      }
      for (unsigned i = 0; i < func.getNumResults(); ++i)
        if (func.getResultAttr(i, nn::NNDialect::kStageOutputAttrName))
          figures.stageOutputBytes +=
              nn::detail::tensorBytes(func.getResultTypes()[i]);
    }
  }
  return figures;
}

/// The pipeline's stage modules, in stage order.
SmallVector<ModuleOp> stageModules(ModuleOp top) {
  SmallVector<ModuleOp> stages(top.getOps<ModuleOp>());
  llvm::stable_sort(stages, [](ModuleOp a, ModuleOp b) {
    auto stageOf = [](ModuleOp m) {
      auto attr = m->getAttrOfType<IntegerAttr>(nn::NNDialect::kStageAttrName);
      return attr ? attr.getInt() : int64_t(0);
    };
    return stageOf(a) < stageOf(b);
  });
  return stages;
}

/// The bubble of `kind` with every stage equal and sends free, where
/// there is a closed form: (P-1)/(M+P-1) for GPipe and 1F1B (Huang et al.,
/// Narayanan et al.), (P-1)/(V·M+P-1) for interleaved 1F1B.
std::optional<double> equalStageBubble(pipeline::ScheduleKind kind,
                                       pipeline::ScheduleShape shape) {
  double p = shape.ranks, m = shape.microbatches, v = shape.virtualStages;
  switch (kind) {
  case pipeline::ScheduleKind::GPipe:
  case pipeline::ScheduleKind::OneFOneB:
    return (p - 1) / (m + p - 1);
  case pipeline::ScheduleKind::Interleaved:
    return (p - 1) / (v * m + p - 1);
  case pipeline::ScheduleKind::ZeroBubbleH1:
  case pipeline::ScheduleKind::ZeroBubbleV:
  case pipeline::ScheduleKind::DualPipeV:
    return std::nullopt;
  }
  return std::nullopt;
}

/// `kind` simulated on the stages: the bubble, and per rank and per stage
/// the microbatches in flight and the bytes they keep. A microbatch's
/// stage input is kept from its forward until the last part of its
/// backward (B, or W when the backward is split: the weight gradient
/// recomputes from it too); an output gradient handed over on one rank
/// (ZB-V's turn) from the next stage's input part to its own.
json::Object simulateSchedule(pipeline::ScheduleKind kind,
                              pipeline::ScheduleShape shape,
                              ArrayRef<pipeline::StageTimes> times,
                              ArrayRef<int64_t> microbatchBytes,
                              ArrayRef<int64_t> keptBytes,
                              ArrayRef<int64_t> weightStashBytes,
                              ArrayRef<int64_t> gradientSlotBytes) {
  json::Object result{{"schedule", pipeline::scheduleName(kind)},
                      {"virtual_stages", shape.virtualStages}};
  std::string problem = pipeline::checkShape(kind, shape);
  if (!problem.empty()) {
    result["error"] = problem;
    return result;
  }
  pipeline::Schedule schedule = pipeline::buildSchedule(kind, shape);
  std::string error;
  pipeline::Timeline timeline =
      pipeline::simulate(schedule, times.vec(), /*sendTime=*/0, &error);
  if (!error.empty()) {
    result["error"] = error;
    return result;
  }
  result["bubble_fraction"] = timeline.bubbleFraction;
  if (std::optional<double> ideal = equalStageBubble(kind, shape))
    result["equal_stage_bubble_fraction"] = *ideal;
  result["makespan_flops"] = timeline.makespan;

  int stages = shape.ranks * shape.virtualStages;
  json::Array ranks;
  // The launcher keeps a pool of slots of each kind for each slot size
  // on a rank, as many as the rank's stages of that size ever hold at
  // once: what it allocates. Per stage, what the stage alone would.
  std::vector<pipeline::StageHolding> holding = pipeline::peakHolding(schedule);
  SmallVector<int64_t> stageBytes(stages, 0);
  bool split = pipeline::splitsBackward(kind);
  using Kind = int pipeline::StageHolding::*;
  const std::pair<Kind, ArrayRef<int64_t>> kinds[] = {
      {&pipeline::StageHolding::inputs, microbatchBytes},
      {&pipeline::StageHolding::kept, keptBytes},
      {&pipeline::StageHolding::weightStash,
       split ? weightStashBytes : ArrayRef<int64_t>()},
      {&pipeline::StageHolding::gradients, gradientSlotBytes}};
  for (int s = 0; s < stages; ++s)
    for (auto [held, bytes] : kinds)
      if (!bytes.empty())
        stageBytes[s] += holding[s].*held * bytes[s];
  // A group of stages is walked once for every kind it pools.
  std::map<std::vector<int>, pipeline::StageHolding> together;
  auto heldTogether = [&](const std::vector<int> &group) {
    auto it = together.find(group);
    if (it == together.end())
      it = together
               .emplace(group, pipeline::peakHoldingTogether(schedule, group))
               .first;
    return it->second;
  };
  for (int r = 0; r < shape.ranks; ++r) {
    std::vector<int> own =
        pipeline::stagesOfRank(r, shape, pipeline::placementOf(kind));
    int64_t peakBytes = 0;
    for (auto [held, bytes] : kinds) {
      if (bytes.empty())
        continue;
      std::map<int64_t, std::vector<int>> bySize;
      for (int s : own)
        bySize[bytes[s]].push_back(s);
      for (const auto &[size, group] : bySize)
        peakBytes += heldTogether(group).*held * size;
    }
    ranks.push_back(
        json::Object{{"busy_flops", timeline.busy[r]},
                     {"peak_activations", timeline.peakActivations[r]},
                     {"peak_weight_pending", timeline.peakWeightPending[r]},
                     {"activation_bytes", peakBytes}});
  }
  json::Array perStage;
  for (int s = 0; s < stages; ++s)
    perStage.push_back(
        json::Object{{"in_flight", holding[s].inputs},
                     {"weight_stash_in_flight", holding[s].weightStash},
                     {"kept_in_flight", holding[s].kept},
                     {"gradients_handed_over", holding[s].gradients},
                     {"activation_bytes", stageBytes[s]}});
  result["ranks"] = std::move(ranks);
  result["stages"] = std::move(perStage);
  return result;
}

} // namespace

std::optional<std::string> tessel::pipelineScheduleJson(ModuleOp top) {
  FailureOr<std::optional<PipelinePlan>> plan = PipelinePlan::fromModule(top);
  if (failed(plan) || !*plan)
    return std::nullopt;
  std::optional<pipeline::ScheduleKind> kind =
      pipeline::parseScheduleKind((*plan)->schedule);
  pipeline::ScheduleShape shape{int((*plan)->ranks), int((*plan)->microbatches),
                                int((*plan)->virtualStages)};
  if (!kind || !pipeline::checkShape(*kind, shape).empty())
    return std::nullopt;
  return pipeline::scheduleJson(pipeline::buildSchedule(*kind, shape));
}

std::optional<json::Object> tessel::pipelinePlanReport(ModuleOp top) {
  FailureOr<std::optional<PipelinePlan>> parsed = PipelinePlan::fromModule(top);
  if (failed(parsed) || !*parsed)
    return std::nullopt;
  const PipelinePlan &plan = **parsed;
  SmallVector<ModuleOp> modules = stageModules(top);
  if (int(modules.size()) != plan.stages())
    return std::nullopt;

  json::Array stages;
  SmallVector<pipeline::StageTimes> times;
  SmallVector<int64_t> microbatchBytes, keptBytes, weightStashBytes,
      gradientSlotBytes;
  bool splitFlops = false;
  for (auto [s, module] : llvm::enumerate(modules)) {
    StageFigures figures = stageFigures(module);
    auto [first, count] = plan.layerRange(int(s));
    json::Object stage = planReport(module);
    stage["stage"] = int64_t(s);
    stage["rank"] = plan.rankOf(int(s));
    stage["first_layer"] = first;
    stage["layers"] = count;
    stage["model_flops"] = plan.flops[s];
    stage["forward_flops"] = figures.forwardFlops;
    stage["backward_flops"] = figures.backwardFlops;
    stage["update_flops"] = figures.updateFlops;
    if (figures.backwardInputFlops || figures.backwardWeightFlops) {
      stage["backward_input_flops"] = figures.backwardInputFlops;
      stage["backward_weight_flops"] = figures.backwardWeightFlops;
    }
    stage["microbatch_bytes"] = figures.microbatchBytes;
    stage["weight_stash_bytes"] = figures.weightStashBytes;
    stage["kept_bytes"] = figures.keptBytes;
    stage["stage_input_bytes"] = figures.stageInputBytes;
    stage["stage_output_bytes"] = figures.stageOutputBytes;
    stages.push_back(std::move(stage));
    // One flop, one unit of time; without a backward (--no-train) the
    // schedule still runs the forwards.
    double backward = double(figures.backwardFlops);
    splitFlops |= figures.backwardInputFlops || figures.backwardWeightFlops;
    if (figures.backwardInputFlops || figures.backwardWeightFlops)
      times.push_back({double(figures.forwardFlops),
                       double(figures.backwardInputFlops),
                       double(figures.backwardWeightFlops)});
    else
      times.push_back(
          {double(figures.forwardFlops), backward / 2, backward / 2});
    microbatchBytes.push_back(figures.microbatchBytes);
    keptBytes.push_back(figures.keptBytes);
    weightStashBytes.push_back(figures.weightStashBytes);
  }
  // A gradient handed over to stage s fills a slot laid out as the next
  // stage's input slot (the same tensors, packed alike).
  for (size_t s = 0; s < microbatchBytes.size(); ++s)
    gradientSlotBytes.push_back(
        s + 1 < microbatchBytes.size() ? microbatchBytes[s + 1] : 0);

  double total = 0, largest = 0;
  for (int64_t flops : plan.flops) {
    total += double(flops);
    largest = std::max(largest, double(flops));
  }
  double imbalance =
      total > 0 ? largest / (total / double(plan.flops.size())) : 1.0;

  json::Object tied;
  for (auto &[name, holders] : plan.tied)
    tied[name] = json::Array(holders);

  // The compiled schedule, and the others that run the same stages (one
  // per rank; several: interleaving, and ZB-V's two).
  std::optional<pipeline::ScheduleKind> compiled =
      pipeline::parseScheduleKind(plan.schedule);
  pipeline::ScheduleShape shape{int(plan.ranks), int(plan.microbatches),
                                int(plan.virtualStages)};
  SmallVector<pipeline::ScheduleKind> kinds;
  if (plan.virtualStages == 2)
    kinds = {pipeline::ScheduleKind::Interleaved,
             pipeline::ScheduleKind::ZeroBubbleV,
             pipeline::ScheduleKind::DualPipeV};
  else if (plan.virtualStages > 1)
    kinds = {pipeline::ScheduleKind::Interleaved};
  else
    kinds = {pipeline::ScheduleKind::GPipe, pipeline::ScheduleKind::OneFOneB,
             pipeline::ScheduleKind::ZeroBubbleH1};
  json::Array schedules;
  json::Object chosen;
  for (pipeline::ScheduleKind kind : kinds) {
    json::Object simulated =
        simulateSchedule(kind, shape, times, microbatchBytes, keptBytes,
                         weightStashBytes, gradientSlotBytes);
    if (compiled && kind == *compiled)
      chosen = simulated;
    schedules.push_back(std::move(simulated));
  }

  json::Object pipelineReport{{"ranks", plan.ranks},
                              {"virtual_stages", plan.virtualStages},
                              {"microbatches", plan.microbatches},
                              {"schedule", plan.schedule},
                              {"layers", json::Array(plan.layers)},
                              {"flops", json::Array(plan.flops)},
                              {"tied", std::move(tied)},
                              {"imbalance", imbalance},
                              {"stages", std::move(stages)},
                              {"send_time", 0},
                              {"backward_split", splitFlops ? "compiled" : "even"},
                              {"schedules", std::move(schedules)}};
  for (StringRef key : {"bubble_fraction", "equal_stage_bubble_fraction",
                        "makespan_flops", "ranks", "error"})
    if (json::Value *value = chosen.get(key))
      pipelineReport[(key == "ranks" ? "timeline" : key)] = std::move(*value);
  if (compiled && pipeline::checkShape(*compiled, shape).empty()) {
    std::string text =
        pipeline::formatSchedule(pipeline::buildSchedule(*compiled, shape));
    json::Array lines;
    for (StringRef line : llvm::split(StringRef(text).rtrim('\n'), '\n'))
      lines.push_back(line.str());
    pipelineReport["actions"] = std::move(lines);
  }
  return json::Object{{"pipeline", std::move(pipelineReport)}};
}

void tessel::completePipelineReport(json::Object &report,
                                    const json::Object &description) {
  for (StringRef key : {"abi_version", "source", "function", "mesh"})
    if (const json::Value *value = description.get(key))
      report[key] = *value;
  json::Object *pipelineReport = report.getObject("pipeline");
  const json::Array *descriptions = description.getArray("stages");
  if (!pipelineReport || !descriptions)
    return;
  if (const json::Object *described = description.getObject("pipeline"))
    if (const json::Value *actions = described->get("schedule_actions"))
      (*pipelineReport)["schedule_actions"] = *actions;
  json::Array *stages = pipelineReport->getArray("stages");
  if (!stages)
    return;
  int64_t microbatches = pipelineReport->getInteger("microbatches").value_or(1);
  // Each stage's pp rank: two stages on one rank hand over in memory.
  SmallVector<std::optional<int64_t>> rankOfStage;
  for (const json::Value &value : *stages)
    rankOfStage.push_back(value.getAsObject()
                              ? value.getAsObject()->getInteger("rank")
                              : std::nullopt);
  auto crosses = [&](size_t a, size_t b) {
    return b < rankOfStage.size() && rankOfStage[a] != rankOfStage[b];
  };
  bool clips = false;
  for (auto [index, pair] :
       llvm::enumerate(llvm::zip(*stages, *descriptions))) {
    auto [stageValue, describedValue] = pair;
    json::Object *stage = stageValue.getAsObject();
    const json::Object *described = describedValue.getAsObject();
    if (!stage || !described)
      continue;
    if (const json::Object *entries = described->getObject("entries"))
      clips |= entries->get("grad_norm") != nullptr;
    for (StringRef key : {"arena_bytes", "peak_bytes"})
      if (const json::Value *value = described->get(key))
        (*stage)[key] = *value;
    if (const json::Object *regions = described->getObject("regions"))
      (*stage)["regions"] = json::Object(*regions);
    if (std::optional<json::Object> communication =
            communicationReport(*described))
      (*stage)["communication"] = std::move(*communication);
    // Each microbatch's activation goes forward and its gradient back, to
    // stages on other ranks.
    int64_t sent = microbatches *
                   ((crosses(index, index + 1)
                         ? stage->getInteger("stage_output_bytes").value_or(0)
                         : 0) +
                    (index > 0 && crosses(index, index - 1)
                         ? stage->getInteger("stage_input_bytes").value_or(0)
                         : 0));
    (*stage)["p2p_bytes"] = sent;
  }
  // What the launcher sends besides the schedule's messages: each holder
  // of a tied parameter its gradient to the others, and the all-reduces
  // over pp of the loss and, where the stages clip, of the gradient norm.
  json::Object tiedBytes;
  if (const json::Object *tied = pipelineReport->getObject("tied"))
    for (const auto &[name, holders] : *tied) {
      // The first holder's gradient (every holder's is the same size).
      const json::Array *stagesOf = holders.getAsArray();
      std::optional<int64_t> first = stagesOf && !stagesOf->empty()
                                         ? (*stagesOf)[0].getAsInteger()
                                         : std::nullopt;
      const json::Object *described =
          first && *first >= 0 && size_t(*first) < descriptions->size()
              ? (*descriptions)[size_t(*first)].getAsObject()
              : nullptr;
      const json::Array *tensors =
          described ? described->getArray("tensors") : nullptr;
      if (!tensors)
        continue;
      for (const json::Value &value : *tensors) {
        const json::Object *tensor = value.getAsObject();
        if (tensor && tensor->getString("role") == "grad" &&
            tensor->getString("name") == name.str())
          tiedBytes[name] = tensor->getInteger("bytes").value_or(0);
      }
    }
  (*pipelineReport)["tied_grad_bytes"] = std::move(tiedBytes);
  json::Array allReduces{
      json::Object{{"what", "the loss"}, {"bytes", 8}, {"dtype", "f64"}}};
  if (clips)
    allReduces.push_back(json::Object{
        {"what", "the gradient norm"}, {"bytes", 4}, {"dtype", "f32"}});
  (*pipelineReport)["launcher_all_reduces"] = std::move(allReduces);
}

namespace {

std::string joinIntegers(const json::Array *values) {
  std::string text;
  if (values)
    for (const json::Value &value : *values)
      text += (text.empty() ? "" : ",") +
              std::to_string(value.getAsInteger().value_or(0));
  return text;
}

int64_t integerOf(const json::Object &object, StringRef key) {
  return object.getInteger(key).value_or(0);
}

int64_t regionBytes(const json::Object &stage, StringRef name) {
  if (const json::Object *regions = stage.getObject("regions"))
    if (const json::Object *region = regions->getObject(name))
      return region->getInteger("bytes").value_or(0);
  return 0;
}

} // namespace

void tessel::printPipelineReport(llvm::raw_ostream &os,
                                 const json::Object &report) {
  const json::Object &pipe = *report.getObject("pipeline");
  int64_t ranks = integerOf(pipe, "ranks");
  int64_t virtualStages = integerOf(pipe, "virtual_stages");
  int64_t microbatches = integerOf(pipe, "microbatches");
  std::string meshText;
  if (const json::Object *mesh = report.getObject("mesh")) {
    const json::Array *axes = mesh->getArray("axes");
    const json::Array *shape = mesh->getArray("shape");
    for (size_t i = 0; axes && shape && i < axes->size() && i < shape->size();
         ++i)
      meshText += (i ? "," : "") + (*axes)[i].getAsString().value_or("").str() +
                  "=" + std::to_string((*shape)[i].getAsInteger().value_or(0));
  }
  const json::Array &stages = *pipe.getArray("stages");
  os << "model " << report.getString("source").value_or("") << " (@"
     << report.getString("function").value_or("") << ")\n";
  os << "  pipeline over pp=" << ranks << " (mesh " << meshText
     << "): " << pipe.getString("schedule").value_or("") << ", " << microbatches
     << " microbatches, " << stages.size() << " stages (" << virtualStages
     << " per rank)\n";
  os << "  flops per microbatch (model: the whole forward; entries: one "
        "rank's)\n";
  os << llvm::format("    %-5s %-4s %-9s %16s %16s %16s %14s\n", "stage",
                     "rank", "layers", "model forward", "forward", "backward",
                     "update");
  for (const json::Value &value : stages) {
    const json::Object &stage = *value.getAsObject();
    int64_t first = integerOf(stage, "first_layer");
    std::string layers = std::to_string(first) + "-" +
                         std::to_string(first + integerOf(stage, "layers") - 1);
    os << llvm::format("    %-5lld %-4lld %-9s %16lld %16lld %16lld %14lld\n",
                       (long long)integerOf(stage, "stage"),
                       (long long)integerOf(stage, "rank"), layers.c_str(),
                       (long long)integerOf(stage, "model_flops"),
                       (long long)integerOf(stage, "forward_flops"),
                       (long long)integerOf(stage, "backward_flops"),
                       (long long)integerOf(stage, "update_flops"));
  }
  os << llvm::format("    %-43s %.4f\n", "imbalance (max / mean model forward)",
                     pipe.getNumber("imbalance").value_or(1));
  if (const json::Object *tied = pipe.getObject("tied"); tied && !tied->empty())
    for (const auto &[name, holders] : *tied)
      os << "    tied parameter " << name.str() << " held by stages "
         << joinIntegers(holders.getAsArray()) << " (a copy on each)\n";

  const json::Object *compiled = nullptr;
  if (const json::Array *schedules = pipe.getArray("schedules"))
    for (const json::Value &value : *schedules)
      if (value.getAsObject()->getString("schedule") ==
          pipe.getString("schedule"))
        compiled = value.getAsObject();
  os << "  memory per rank of each stage (bytes; per microbatch: its input "
        "and what its forward keeps; activations: what the "
     << pipe.getString("schedule").value_or("") << " schedule keeps)\n";
  os << llvm::format("    %-5s %12s %12s %12s %12s %12s %12s %12s %12s\n",
                     "stage", "params", "grads", "states", "scratch", "arena",
                     "microbatch", "kept", "activations");
  for (const json::Value &value : stages) {
    const json::Object &stage = *value.getAsObject();
    int64_t s = integerOf(stage, "stage");
    int64_t activations = 0;
    if (compiled)
      if (const json::Array *perStage = compiled->getArray("stages");
          perStage && s < int64_t(perStage->size()))
        activations =
            integerOf(*(*perStage)[s].getAsObject(), "activation_bytes");
    os << llvm::format(
        "    %-5lld %12lld %12lld %12lld %12lld %12lld %12lld %12lld %12lld\n",
        (long long)s, (long long)regionBytes(stage, "params"),
        (long long)regionBytes(stage, "grads"),
        (long long)regionBytes(stage, "states"),
        (long long)regionBytes(stage, "scratch"),
        (long long)integerOf(stage, "arena_bytes"),
        (long long)integerOf(stage, "microbatch_bytes"),
        (long long)integerOf(stage, "kept_bytes"), (long long)activations);
  }

  bool compiledSplit = pipe.getString("backward_split") == "compiled";
  os << "  schedules on these stages (time: each stage's flops per rank; "
        "sends free; zero bubble's I and W: "
     << (compiledSplit ? "the compiled backward_input and backward_weight"
                       : "the backward split evenly")
     << ")\n";
  os << llvm::format("    %-13s %8s %14s  %-20s %s\n", "schedule", "bubble",
                     "equal stages", "in flight per rank",
                     "activation bytes per rank");
  if (const json::Array *schedules = pipe.getArray("schedules"))
    for (const json::Value &value : *schedules) {
      const json::Object &entry = *value.getAsObject();
      std::string name = entry.getString("schedule").value_or("").str();
      if (entry.getArray("ranks") == nullptr && entry.get("error")) {
        os << llvm::format(
            "    %-13s %s\n", name.c_str(),
            ("not built: " + entry.getString("error").value_or("").str())
                .c_str());
        continue;
      }
      std::string inFlight, bytes;
      if (const json::Array *perRank = entry.getArray("ranks"))
        for (const json::Value &rank : *perRank) {
          const json::Object &r = *rank.getAsObject();
          inFlight += (inFlight.empty() ? "" : ",") +
                      std::to_string(integerOf(r, "peak_activations"));
          bytes += (bytes.empty() ? "" : ",") +
                   std::to_string(integerOf(r, "activation_bytes"));
        }
      std::string ideal = "-";
      if (std::optional<double> value =
              entry.getNumber("equal_stage_bubble_fraction"))
        ideal = llvm::formatv("{0:F4}", *value).str();
      os << llvm::format("    %-13s %8.4f %14s  %-20s %s\n",
                         ((&entry == compiled ? "* " : "  ") + name).c_str(),
                         entry.getNumber("bubble_fraction").value_or(0),
                         ideal.c_str(), inFlight.c_str(), bytes.c_str());
    }
  if (const json::Array *actions = pipe.getArray("actions")) {
    os << "  " << pipe.getString("schedule").value_or("")
       << " actions per rank (F forward, B backward, I/W its input/weight "
          "parts, s>p send to rank p, r<p receive from rank p)\n";
    for (const json::Value &line : *actions)
      os << "    " << line.getAsString().value_or("") << "\n";
  }

  os << "  point-to-point per step (bytes a rank of each stage sends: "
     << microbatches << " activations forward, " << microbatches
     << " gradients back)\n";
  for (const json::Value &value : stages) {
    const json::Object &stage = *value.getAsObject();
    os << llvm::format("    stage %-3lld %16lld\n",
                       (long long)integerOf(stage, "stage"),
                       (long long)integerOf(stage, "p2p_bytes"));
  }
  if (const json::Object *tied = pipe.getObject("tied_grad_bytes"))
    for (const auto &[name, bytes] : *tied)
      os << "    tied " << name.str() << ": "
         << bytes.getAsInteger().value_or(0)
         << " bytes (its gradient) from each holder to each other\n";
  if (const json::Array *reduces = pipe.getArray("launcher_all_reduces")) {
    os << "  the launcher's all-reduces over pp per step:";
    for (const json::Value &value : *reduces) {
      const json::Object &reduce = *value.getAsObject();
      os << (&value == &reduces->front() ? " " : ", ")
         << reduce.getString("what").value_or("") << " ("
         << reduce.getInteger("bytes").value_or(0) << " bytes "
         << reduce.getString("dtype").value_or("") << ")";
    }
    os << "\n";
  }
  for (const json::Value &value : stages) {
    const json::Object &stage = *value.getAsObject();
    if (const json::Object *communication = stage.getObject("communication")) {
      printCommunication(os, *communication,
                         "stage " + std::to_string(integerOf(stage, "stage")) +
                             " communication per rank");
    }
  }
}
