//===- Pipeline.cpp - A pipelined model's stages and schedule -------------===//

#include "runtime/launcher/Pipeline.h"
#include "runtime/launcher/Error.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>

using namespace tessel::run;
namespace pipeline = tessel::pipeline;
using json = nlohmann::json;

namespace {

[[noreturn]] void fail(const std::string &file, const std::string &problem) {
  throw RunError("model '" + file + "' has a bad pipeline description: " +
                 problem);
}

pipeline::ActionKind actionKindOf(const std::string &kind,
                                  const std::string &file) {
  static const std::map<std::string, pipeline::ActionKind> kinds = {
      {"forward", pipeline::ActionKind::Forward},
      {"backward", pipeline::ActionKind::Backward},
      {"backward_input", pipeline::ActionKind::BackwardInput},
      {"backward_weight", pipeline::ActionKind::BackwardWeight},
      {"send", pipeline::ActionKind::Send},
      {"recv", pipeline::ActionKind::Recv}};
  auto it = kinds.find(kind);
  if (it == kinds.end())
    fail(file, "unknown schedule action '" + kind + "'");
  return it->second;
}

/// The schedule's actions, checked against the pipeline: every action of
/// rank r on one of r's stages, every peer a pp rank, every microbatch in
/// range.
pipeline::Schedule parseActions(const json &j, const PipelineDesc &p,
                                const std::string &file) {
  pipeline::Schedule schedule;
  std::optional<pipeline::ScheduleKind> kind =
      pipeline::parseScheduleKind(p.schedule);
  if (!kind)
    fail(file, "unknown schedule '" + p.schedule + "'");
  schedule.kind = *kind;
  schedule.shape = {int(p.ranks), int(p.microbatches), int(p.virtualStages)};
  // A send's or receive's peer holds the stage on the boundary's other
  // side (the rank itself for a hand-over between two of its stages).
  auto peerOf = [&](const pipeline::Action &a) {
    int other = pipeline::otherStage(a);
    return other < 0 || other >= p.numStages() ? -1 : p.rankOf(other);
  };
  const json &ranks = j.at("actions");
  if (!ranks.is_array() || int64_t(ranks.size()) != p.ranks)
    fail(file, "the schedule needs one action list per pp rank");
  for (size_t r = 0; r < ranks.size(); ++r) {
    std::vector<pipeline::Action> &list = schedule.ranks.emplace_back();
    for (const json &a : ranks[r]) {
      pipeline::Action action{actionKindOf(a.at("kind").get<std::string>(),
                                           file),
                              a.at("stage").get<int>(),
                              a.at("microbatch").get<int>(),
                              a.value("gradient", false), a.value("peer", -1)};
      bool comm = action.kind == pipeline::ActionKind::Send ||
                  action.kind == pipeline::ActionKind::Recv;
      if (action.stage < 0 || action.stage >= p.numStages() ||
          p.rankOf(action.stage) != int(r) || action.microbatch < 0 ||
          action.microbatch >= p.microbatches ||
          (comm && (action.peer < 0 || action.peer != peerOf(action))))
        fail(file, "schedule action " + pipeline::formatAction(action) +
                       " of pp rank " + std::to_string(r) +
                       " names a stage, microbatch or peer outside the "
                       "pipeline");
      list.push_back(action);
    }
  }
  return schedule;
}

/// The whole model's view of the stages: every parameter, gradient and
/// state once, at its global shape.
ModelDesc wholeModel(const json &j, const PipelineDesc &p) {
  const ModelDesc &first = p.stages.front();
  const ModelDesc &last = p.stages.back();
  ModelDesc whole;
  whole.abiVersion = first.abiVersion;
  whole.source = j.value("source", first.source);
  whole.function = j.value("function", first.function);
  whole.entries = first.entries;
  whole.train = first.train;
  whole.precision = first.precision;
  whole.mesh = first.mesh;
  int64_t largest = 0;
  for (const ModelDesc &stage : p.stages) {
    largest = std::max(largest, stage.arenaBytes);
    whole.peakBytes = std::max(whole.peakBytes, stage.peakBytes);
    for (const TensorDesc &t : stage.tensors) {
      if (t.role != "param" && t.role != "grad" && t.role != "state")
        continue;
      if (whole.find(t.role, t.name))
        continue; // A tied parameter: the first stage's.
      TensorDesc g = t;
      g.shape = t.globalShape;
      g.sharding.clear();
      g.layers.reset();
      g.zero.reset();
      g.bytes = t.globalBytes();
      g.offset = 0;
      whole.tensors.push_back(g);
    }
  }
  for (const TensorDesc *t : first.feeds())
    whole.tensors.push_back(*t);
  for (const TensorDesc *t : first.withRole("grad_scale"))
    whole.tensors.push_back(*t);
  for (const char *role : {"loss", "loss_count"})
    for (const TensorDesc *t : last.withRole(role))
      whole.tensors.push_back(*t);
  whole.arenaBytes = largest * p.virtualStages;
  return whole;
}

} // namespace

std::vector<int> PipelineDesc::stagesOfRank(int64_t rank) const {
  return pipeline::stagesOfRank(
      int(rank), {int(ranks), int(microbatches), int(virtualStages)},
      placement);
}

std::vector<PipelineDesc::Slice> PipelineDesc::slicesOf(const TensorDesc &w,
                                                        bool everyCopy) const {
  std::vector<Slice> out;
  int64_t rowsTotal = w.globalShape.empty() ? 1 : w.globalShape[0];
  for (int s = 0; s < numStages(); ++s) {
    const TensorDesc *t = stages[s].find(w.role, w.name);
    if (!t)
      continue;
    if (t->layers)
      out.push_back({s, t, t->layers->offset, t->blockShape()[0]});
    else if (out.empty() || everyCopy)
      out.push_back({s, t, 0, rowsTotal});
  }
  return out;
}

ModelDesc tessel::run::parsePipelineDescription(const json &j,
                                                const std::string &file) {
  auto p = std::make_shared<PipelineDesc>();
  const json &pj = j.at("pipeline");
  p->ranks = pj.at("ranks").get<int64_t>();
  p->virtualStages = pj.at("virtual_stages").get<int64_t>();
  p->microbatches = pj.at("microbatches").get<int64_t>();
  p->schedule = pj.at("schedule").get<std::string>();
  if (std::optional<pipeline::ScheduleKind> kind =
          pipeline::parseScheduleKind(p->schedule))
    p->placement = pipeline::placementOf(*kind);
  p->layers = pj.at("layers").get<std::vector<int64_t>>();
  if (p->ranks < 2 || p->virtualStages < 1 || p->microbatches < 1 ||
      p->ranks > 4096 || p->virtualStages > 4096 ||
      p->microbatches > (int64_t(1) << 20))
    fail(file, "needs 2 to 4096 ranks, 1 to 4096 virtual stages and 1 to "
               "2^20 microbatches");
  for (auto &[name, holders] : pj.at("tied").items())
    p->tied.push_back({name, holders.get<std::vector<int64_t>>()});
  const json &stages = j.at("stages");
  if (!stages.is_array() ||
      int64_t(stages.size()) != p->ranks * p->virtualStages)
    fail(file, "needs one description per stage (" +
                   std::to_string(p->ranks * p->virtualStages) + ")");
  for (size_t s = 0; s < stages.size(); ++s) {
    if (stages[s].contains("pipeline"))
      fail(file, "a stage cannot be a pipeline itself");
    p->stages.push_back(parseModelDescription(
        stages[s].dump(), file + " (stage " + std::to_string(s) + ")"));
    const ModelDesc &stage = p->stages.back();
    if (!stage.mesh)
      fail(file, "stage " + std::to_string(s) + " has no mesh");
  }
  // Every stage takes every feed, but only the stage reading an integer
  // feed knows its range (the labels' classes) and the label value its loss
  // ignores: share both, so that every stage draws the same synthetic
  // samples.
  std::map<std::string, int64_t> limits, ignored;
  for (const ModelDesc &stage : p->stages)
    for (const TensorDesc *t : stage.feeds()) {
      if (t->limit)
        limits[t->role + " " + t->name] = *t->limit;
      if (t->ignoreIndex)
        ignored[t->role + " " + t->name] = *t->ignoreIndex;
    }
  for (ModelDesc &stage : p->stages)
    for (TensorDesc &t : stage.tensors) {
      if (t.role != "input" && t.role != "label")
        continue;
      if (auto it = limits.find(t.role + " " + t.name);
          !t.limit && it != limits.end())
        t.limit = it->second;
      if (auto it = ignored.find(t.role + " " + t.name);
          !t.ignoreIndex && it != ignored.end())
        t.ignoreIndex = it->second;
    }
  std::optional<int> axis = p->stages.front().mesh->axisIndex("pp");
  if (!axis || p->stages.front().mesh->shape[*axis] != p->ranks)
    fail(file, "the mesh's 'pp' axis must have the pipeline's " +
                   std::to_string(p->ranks) + " ranks");
  p->axis = *axis;
  for (auto &[name, holders] : p->tied) {
    if (holders.empty())
      fail(file, "tied parameter '" + name + "' names no stage");
    for (int64_t s : holders)
      if (s < 0 || s >= p->numStages() ||
          !p->stages[s].find("param", name))
        fail(file, "tied parameter '" + name + "' names stage " +
                       std::to_string(s) + ", which does not hold it");
    // Trained on every holder (its gradients summed), or frozen on all.
    size_t withGrad = 0;
    for (int64_t s : holders)
      withGrad += p->stages[s].gradOf(name) ? 1 : 0;
    if (withGrad != 0 && withGrad != holders.size())
      fail(file, "tied parameter '" + name + "' has a gradient on " +
                     std::to_string(withGrad) + " of its " +
                     std::to_string(holders.size()) +
                     " stages (every holder trains it, or none)");
  }
  if (pj.contains("schedule_actions"))
    p->actions = parseActions(pj.at("schedule_actions"), *p, file);
  else
    fail(file, "has no schedule");
  ModelDesc whole = wholeModel(j, *p);
  whole.pipeline = std::move(p);
  return whole;
}
