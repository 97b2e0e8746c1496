//===- PipelinePlan.cpp - Stages, layers and schedule of a pipeline -------===//

#include "passes/PipelinePlan.h"

#include "dialect/NN/NNDialect.h"
#include "runtime/config/PipelineSchedule.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/StringExtras.h"

#include <limits>

using namespace mlir;
using namespace tessel;

std::pair<int64_t, int64_t> PipelinePlan::layerRange(int s) const {
  int64_t first = 0;
  for (int i = 0; i < s; ++i)
    first += layers[i];
  return {first, layers[s]};
}

DictionaryAttr PipelinePlan::toAttr(
    MLIRContext *ctx,
    ArrayRef<std::pair<std::string, SmallVector<int64_t>>> tiedParams) const {
  Builder b(ctx);
  SmallVector<NamedAttribute> tiedAttrs;
  for (auto &[name, stages] : tiedParams)
    tiedAttrs.push_back(b.getNamedAttr(name, b.getDenseI64ArrayAttr(stages)));
  return b.getDictionaryAttr(
      {b.getNamedAttr("ranks", b.getI64IntegerAttr(ranks)),
       b.getNamedAttr("virtual_stages", b.getI64IntegerAttr(virtualStages)),
       b.getNamedAttr("microbatches", b.getI64IntegerAttr(microbatches)),
       b.getNamedAttr("schedule", b.getStringAttr(schedule)),
       b.getNamedAttr("layers", b.getDenseI64ArrayAttr(layers)),
       b.getNamedAttr("flops", b.getDenseI64ArrayAttr(flops)),
       b.getNamedAttr("tied", b.getDictionaryAttr(tiedAttrs))});
}

FailureOr<std::optional<PipelinePlan>>
PipelinePlan::fromModule(ModuleOp module) {
  auto dict =
      module->getAttrOfType<DictionaryAttr>(nn::NNDialect::kPipelineAttrName);
  if (!dict)
    return std::optional<PipelinePlan>();
  auto fail = [&](StringRef what) {
    return module.emitError()
           << "malformed '" << nn::NNDialect::kPipelineAttrName << "': " << what;
  };
  PipelinePlan plan;
  auto integer = [&](StringRef key, int64_t &out) {
    auto attr = dict.getAs<IntegerAttr>(key);
    if (!attr || attr.getInt() < 1)
      return false;
    out = attr.getInt();
    return true;
  };
  if (!integer("ranks", plan.ranks) ||
      !integer("virtual_stages", plan.virtualStages) ||
      !integer("microbatches", plan.microbatches))
    return fail("needs positive ranks, virtual_stages and microbatches");
  auto schedule = dict.getAs<StringAttr>("schedule");
  auto layers = dict.getAs<DenseI64ArrayAttr>("layers");
  auto flops = dict.getAs<DenseI64ArrayAttr>("flops");
  auto tied = dict.getAs<DictionaryAttr>("tied");
  if (!schedule || !layers || !flops || !tied ||
      layers.size() != plan.ranks * plan.virtualStages ||
      flops.size() != layers.size())
    return fail("needs a schedule, layers and flops per stage, and tied");
  plan.schedule = schedule.getValue().str();
  plan.layers.assign(layers.asArrayRef().begin(), layers.asArrayRef().end());
  plan.flops.assign(flops.asArrayRef().begin(), flops.asArrayRef().end());
  for (NamedAttribute entry : tied) {
    auto stages = dyn_cast<DenseI64ArrayAttr>(entry.getValue());
    if (!stages)
      return fail("tied parameters list their stages");
    plan.tied.push_back({entry.getName().str(),
                         SmallVector<int64_t>(stages.asArrayRef())});
  }
  if (Attribute actions = dict.get("actions"))
    if (failed(plan.parseActions(actions, fail)))
      return failure();
  return std::optional<PipelinePlan>(std::move(plan));
}

LogicalResult PipelinePlan::parseActions(
    Attribute attr, llvm::function_ref<InFlightDiagnostic(StringRef)> fail) {
  auto perRank = dyn_cast<ArrayAttr>(attr);
  if (!perRank || int64_t(perRank.size()) != ranks)
    return fail("actions: one array of strings per pp rank (" +
                std::to_string(ranks) + ")");
  const int stageCount = stages();
  for (auto [rank, list] : llvm::enumerate(perRank)) {
    auto strings = dyn_cast<ArrayAttr>(list);
    if (!strings)
      return fail("actions: one array of strings per pp rank (" +
                  std::to_string(ranks) + ")");
    std::vector<pipeline::Action> &rankList = actions.emplace_back();
    for (Attribute item : strings) {
      auto text = dyn_cast<StringAttr>(item);
      std::string error;
      std::optional<pipeline::Action> action =
          text ? pipeline::parseAction(text.getValue(), error) : std::nullopt;
      std::string prefix = "actions of rank " + std::to_string(rank) + ": ";
      if (!text)
        return fail(prefix + "expected strings such as \"F0.0\"");
      if (!action)
        return fail(prefix + error);
      bool transfer = action->kind == pipeline::ActionKind::Send ||
                      action->kind == pipeline::ActionKind::Recv;
      std::string quoted = "'" + text.getValue().str() + "' ";
      if (action->stage >= stageCount || action->microbatch >= microbatches)
        return fail(prefix + quoted +
                    "names a stage or microbatch beyond the " +
                    std::to_string(stageCount) + " stages and " +
                    std::to_string(microbatches) + " microbatches");
      if (rankOf(action->stage) != int64_t(rank))
        return fail(prefix + quoted + "is stage " +
                    std::to_string(action->stage) + "'s, which rank " +
                    std::to_string(rankOf(action->stage)) + " holds");
      // The peer holds the other side's stage: the rank itself for two
      // stages it holds (a hand-over in memory).
      if (transfer) {
        int other = pipeline::otherStage(*action);
        if (other < 0 || other >= stageCount)
          return fail(prefix + quoted + "crosses no stage boundary (stage " +
                      std::to_string(action->stage) + " of " +
                      std::to_string(stageCount) + ")");
        if (action->peer != rankOf(other))
          return fail(prefix + quoted + "names peer " +
                      std::to_string(action->peer) + ", but stage " +
                      std::to_string(other) + " is on rank " +
                      std::to_string(rankOf(other)));
      }
      rankList.push_back(*action);
    }
  }
  return success();
}

/// The placement of the plan's schedule; an unknown schedule (diagnosed
/// where it is read) places as most do.
static pipeline::Placement placementOfSchedule(const std::string &schedule) {
  std::optional<pipeline::ScheduleKind> kind =
      pipeline::parseScheduleKind(schedule);
  return kind ? pipeline::placementOf(*kind) : pipeline::Placement::Looped;
}

int64_t PipelinePlan::rankOf(int s) const {
  return pipeline::rankOfStage(s, int(ranks), placementOfSchedule(schedule));
}

std::vector<int> PipelinePlan::stagesOf(int64_t rank) const {
  return pipeline::stagesOfRank(
      int(rank), {int(ranks), int(microbatches), int(virtualStages)},
      placementOfSchedule(schedule));
}

std::optional<std::vector<std::vector<pipeline::Action>>>
PipelinePlan::rankActions(std::string &error) const {
  if (!actions.empty())
    return actions;
  std::optional<pipeline::ScheduleKind> kind =
      pipeline::parseScheduleKind(schedule);
  if (!kind) {
    error = "unknown pipeline schedule '" + schedule + "'";
    return std::nullopt;
  }
  pipeline::ScheduleShape shape{int(ranks), int(microbatches),
                                int(virtualStages)};
  error = pipeline::checkShape(*kind, shape);
  if (!error.empty())
    return std::nullopt;
  return pipeline::buildSchedule(*kind, shape).ranks;
}

/// The split of `layers` layers over `stages` stages (each >= 1) whose
/// largest stage cost is smallest; costs: layerFlops per layer, plus
/// `before` on the first stage and `after` on the last. Dynamic
/// programming over (stage, layers used), O(stages · layers²).
static SmallVector<int64_t> balance(int64_t stages, int64_t layers,
                                    double layerFlops, double before,
                                    double after) {
  const double inf = std::numeric_limits<double>::infinity();
  auto cost = [&](int64_t s, int64_t n) {
    return n * layerFlops + (s == 0 ? before : 0) +
           (s == stages - 1 ? after : 0);
  };
  // best[s][l]: the smallest largest cost of stages 0..s holding l layers.
  std::vector<std::vector<double>> best(stages,
                                        std::vector<double>(layers + 1, inf));
  std::vector<std::vector<int64_t>> choice(
      stages, std::vector<int64_t>(layers + 1, 0));
  for (int64_t l = 1; l <= layers; ++l) {
    best[0][l] = cost(0, l);
    choice[0][l] = l;
  }
  for (int64_t s = 1; s < stages; ++s)
    for (int64_t l = s + 1; l <= layers; ++l)
      for (int64_t n = 1; n <= l - s; ++n) {
        double value = std::max(best[s - 1][l - n], cost(s, n));
        // Ties go to the split that gives later stages fewer layers: the
        // last stage also holds the head and the loss.
        if (value < best[s][l]) {
          best[s][l] = value;
          choice[s][l] = n;
        }
      }
  SmallVector<int64_t> split(stages);
  for (int64_t s = stages - 1, l = layers; s >= 0; --s) {
    split[s] = choice[s][l];
    l -= split[s];
  }
  return split;
}

/// ZB-V's split: rank r runs stages r and 2P - 1 - r, so its load is the
/// two together (rank 0 holding both what comes before the layers and
/// what comes after). Every rank starts with a layer a stage; each further
/// layer goes to the least loaded rank (the later one on a tie), which
/// makes the largest rank load smallest; a rank's layers then split
/// between its two stages as evenly as their extra costs allow.
static SmallVector<int64_t> balanceV(int64_t ranks, int64_t layers,
                                     double layerFlops, double before,
                                     double after) {
  SmallVector<int64_t> perRank(ranks, 2);
  SmallVector<double> load(ranks, 2 * layerFlops);
  load[0] += before + after;
  for (int64_t extra = layers - 2 * ranks; extra > 0; --extra) {
    int64_t lightest = ranks - 1;
    for (int64_t r = ranks - 1; r >= 0; --r)
      if (load[r] < load[lightest])
        lightest = r;
    ++perRank[lightest];
    load[lightest] += layerFlops;
  }
  SmallVector<int64_t> split(2 * ranks);
  for (int64_t r = 0; r < ranks; ++r) {
    double down = r == 0 ? before : 0, up = r == 0 ? after : 0;
    int64_t best = 1;
    auto largest = [&](int64_t n) {
      return std::max(n * layerFlops + down,
                      (perRank[r] - n) * layerFlops + up);
    };
    for (int64_t n = 2; n < perRank[r]; ++n)
      if (largest(n) < largest(best))
        best = n;
    split[r] = best;
    split[2 * ranks - 1 - r] = perRank[r] - best;
  }
  return split;
}

FailureOr<PipelinePlan> tessel::planPipeline(const PipelineRequest &request,
                                             Operation *where) {
  PipelinePlan plan;
  plan.ranks = request.ranks;
  plan.virtualStages = request.virtualStages;
  plan.schedule = request.schedule;
  std::optional<pipeline::ScheduleKind> kind =
      pipeline::parseScheduleKind(request.schedule);
  if (!kind)
    return where->emitError()
           << "unknown pipeline schedule '" << request.schedule
           << "' (expected gpipe, 1f1b, interleaved, zb-h1, zb-v or "
              "dualpipev)";
  if (request.virtualStages < 1)
    return where->emitError() << "--virtual-stages " << request.virtualStages
                              << ": every pp rank holds at least one stage";
  // Interleaving, ZB-V and DualPipeV run several stages per rank (two
  // unless told).
  bool severalPerRank =
      *kind == pipeline::ScheduleKind::Interleaved ||
      pipeline::placementOf(*kind) == pipeline::Placement::VShape;
  if (request.virtualStages > 1 && !severalPerRank)
    return where->emitError()
           << "--virtual-stages " << request.virtualStages
           << " needs the interleaved, zb-v or dualpipev schedule ("
           << request.schedule << " runs one stage per rank)";
  int64_t virtualStages =
      severalPerRank && request.virtualStages == 1 ? 2 : request.virtualStages;
  plan.virtualStages = virtualStages;
  if (request.microbatches < 0)
    return where->emitError() << "--microbatches " << request.microbatches
                              << ": a step runs at least one microbatch (0: "
                                 "as many as pp ranks)";
  plan.microbatches =
      request.microbatches > 0 ? request.microbatches : request.ranks;
  if (request.ranks > 4096 || virtualStages > 4096 ||
      plan.microbatches > (int64_t(1) << 20))
    return where->emitError() << "pipeline of " << request.ranks
                              << " ranks, " << virtualStages
                              << " virtual stages and " << plan.microbatches
                              << " microbatches is beyond what tessel plans";
  pipeline::ScheduleShape shape{int(request.ranks), int(plan.microbatches),
                                int(virtualStages)};
  std::string problem = pipeline::checkShape(*kind, shape);
  if (!problem.empty())
    return where->emitError() << "pipeline schedule: " << problem;

  int64_t stages = request.ranks * virtualStages;
  if (request.layers < stages)
    return where->emitError()
           << "the nn.repeat has " << request.layers
           << " layers, fewer than the " << stages
           << " pipeline stages (pp=" << request.ranks
           << (virtualStages > 1
                   ? " x " + std::to_string(virtualStages) + " virtual stages"
                   : std::string())
           << ") need: every stage holds at least one layer";
  if (!request.stageLayers.empty()) {
    SmallVector<StringRef> parts;
    StringRef(request.stageLayers).split(parts, ',');
    int64_t sum = 0;
    for (StringRef part : parts) {
      int64_t n = 0;
      if (part.trim().getAsInteger(10, n) || n < 1)
        return where->emitError()
               << "--stage-layers '" << request.stageLayers
               << "': each stage's layer count must be a positive integer";
      plan.layers.push_back(n);
      sum += n;
    }
    if (int64_t(plan.layers.size()) != stages || sum != request.layers)
      return where->emitError()
             << "--stage-layers '" << request.stageLayers << "' gives "
             << plan.layers.size() << " stages " << sum
             << " layers; the pipeline has " << stages << " stages and the "
             << "repeat " << request.layers << " layers";
  } else if (pipeline::placementOf(*kind) == pipeline::Placement::VShape) {
    plan.layers =
        balanceV(request.ranks, request.layers, double(request.layerFlops),
                 double(request.beforeFlops), double(request.afterFlops));
  } else {
    plan.layers = balance(stages, request.layers, double(request.layerFlops),
                          double(request.beforeFlops),
                          double(request.afterFlops));
  }
  for (int64_t s = 0; s < stages; ++s) {
    int64_t flops = plan.layers[s] * request.layerFlops;
    if (s == 0)
      flops += request.beforeFlops;
    if (s == stages - 1)
      flops += request.afterFlops;
    plan.flops.push_back(flops);
  }
  return plan;
}
