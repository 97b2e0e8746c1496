//===- PipelineStep.cpp - One pp rank running its stages' schedule --------===//

#include "runtime/launcher/PipelineStep.h"
#include "runtime/launcher/Arena.h"
#include "runtime/launcher/Error.h"
#include "runtime/launcher/Ranks.h"

#include <algorithm>

using namespace tessel::run;
namespace pipeline = tessel::pipeline;
using pipeline::Action;
using pipeline::ActionKind;

namespace {

/// Device buffers of `bytes` each, one per (stage, microbatch) held and
/// reused once released by any of the rank's stages whose slots are this
/// size: the pool never shrinks, so it allocates as many as those stages
/// ever held at once (pipeline::peakHoldingTogether).
struct SharedPool {
  int64_t bytes = 0;
  std::map<std::pair<int, int>, void *> held; // (stage, microbatch) -> slot
  std::vector<void *> free;
  int64_t allocated = 0;

  void *acquire(tessel_ctx *ctx, std::pair<int, int> key,
                const std::string &what) {
    void *slot = nullptr;
    if (!free.empty()) {
      slot = free.back();
      free.pop_back();
    } else {
      slot = tessel_alloc(ctx, std::max<int64_t>(bytes, 64));
      if (!slot)
        throw RunError("cannot allocate " + std::to_string(bytes) +
                       " bytes to keep " + what);
      ++allocated;
    }
    return held[key] = slot;
  }
  void *find(std::pair<int, int> key) const {
    auto it = held.find(key);
    return it == held.end() ? nullptr : it->second;
  }
  void release(std::pair<int, int> key) {
    auto it = held.find(key);
    if (it == held.end())
      return;
    free.push_back(it->second);
    held.erase(it);
  }
  void clear(tessel_ctx *ctx) {
    for (auto &[m, slot] : held)
      tessel_free(ctx, slot);
    for (void *slot : free)
      tessel_free(ctx, slot);
    held.clear();
    free.clear();
  }
};

/// One stage's view of its rank's pool of one kind: slots by microbatch.
/// A stage that keeps nothing of the kind has no pool.
struct SlotPool {
  SharedPool *pool = nullptr;
  int stage = 0;

  void *acquire(tessel_ctx *ctx, int microbatch, const std::string &what) {
    if (!pool)
      throw RunError("pipeline stage " + std::to_string(stage) +
                     " has no slots to keep " + what);
    return pool->acquire(ctx, {stage, microbatch}, what);
  }
  void *find(int microbatch) const {
    return pool ? pool->find({stage, microbatch}) : nullptr;
  }
  void release(int microbatch) {
    if (pool)
      pool->release({stage, microbatch});
  }
};

/// A pool per slot size: a rank's stages share the pools of their sizes.
using PoolsBySize = std::map<int64_t, SharedPool>;

/// A slot's layout: `tensors` packed one after another, 64-byte aligned.
int64_t packedBytes(const std::vector<const TensorDesc *> &tensors) {
  int64_t bytes = 0;
  for (const TensorDesc *t : tensors)
    bytes += (t->bytes + 63) / 64 * 64;
  return bytes;
}

/// Calls `f(t, place)` for each tensor and its place in a packed slot.
template <typename F>
void forEachPacked(const std::vector<const TensorDesc *> &tensors, void *slot,
                   F f) {
  char *cursor = static_cast<char *>(slot);
  for (const TensorDesc *t : tensors) {
    f(*t, cursor);
    cursor += (t->bytes + 63) / 64 * 64;
  }
}

} // namespace

/// The rank's slot pools of each kind.
struct PipelineRank::Slots {
  PoolsBySize inputs, weight, kept, gradients;

  /// Every pool of every kind.
  template <class F> void forEachPool(F f) {
    for (PoolsBySize *kind : {&inputs, &weight, &kept, &gradients})
      for (auto &[bytes, pool] : *kind)
        f(pool);
  }
};

/// One stage this rank runs: its entries, its arena, its data and what it
/// keeps per microbatch between actions (in the rank's pools).
struct PipelineRank::Stage {
  int index = 0;
  const ModelDesc *desc = nullptr;
  LoadedModel::StageEntries entries;
  void *arena = nullptr;
  std::unique_ptr<BatchSource> batches;
  // --eval-every's, swapped with `batches` while the held-out loss runs.
  std::unique_ptr<BatchSource> heldOut;
  std::vector<const TensorDesc *> inputs, outputs, outputGrads, inputGrads;
  // The input activations of each microbatch in flight, from their
  // receipt until its backward.
  SlotPool inputSlots;
  // Zero bubble: what the backward's input part leaves for its weight part
  // (the stash, and the output gradient it may read), from one to the
  // other.
  std::vector<const TensorDesc *> weightInputs;
  SlotPool weightSlots;
  // A stage that keeps its activations: what its training forward
  // (forward_keep) leaves for the backward, from one to the other. One
  // microbatch's stay where forward_keep wrote them (`keptResident`, -1
  // for none); the others' wait in slots, copied there only when another
  // microbatch needs the arena's place.
  std::vector<const TensorDesc *> kept;
  SlotPool keptSlots;
  int keptResident = -1;
  // The output gradients the next stage, on this rank too, handed over,
  // from its input part until this stage's backward receives them.
  SlotPool gradientSlots;
};

namespace {

char *at(void *arena, const TensorDesc &t) {
  return static_cast<char *>(arena) + t.offset;
}

std::string stageText(int stage, int microbatch) {
  return "stage " + std::to_string(stage) + ", microbatch " +
         std::to_string(microbatch + 1);
}

} // namespace

PipelineRank::PipelineRank(const LoadedModel &model, tessel_ctx *ctx,
                           int32_t rank,
                           const std::vector<int64_t> &coordinates,
                           const BatchSourceFactory &makeGlobal)
    : model(model), pipe(*model.desc.pipeline), ctx(ctx), rank(rank),
      coordinates(coordinates), ppRank(coordinates.at(pipe.axis)),
      slots(std::make_unique<Slots>()) {
  for (int s : pipe.stagesOfRank(ppRank)) {
    auto stage = std::make_unique<Stage>();
    stage->index = s;
    stage->desc = &pipe.stages[s];
    stage->entries = model.stages.at(s);
    // The entries this rank's actions run, chosen once: a step of several
    // microbatches accumulates their gradients unreduced and reduces them
    // once after the schedule (reduceGradients); one microbatch reduces in
    // its backward.
    LoadedModel::StageEntries &entries = stage->entries;
    if (stage->desc->reducesGradientsOnce(pipe.microbatches)) {
      entries.backward = entries.backwardNoSync;
      entries.backwardWeight = entries.backwardWeightNoSync;
    } else {
      entries.reduceGrads = nullptr;
    }
    stage->arena = tessel_alloc(ctx, std::max<int64_t>(stage->desc->arenaBytes, 64));
    if (!stage->arena)
      throw RunError("cannot allocate the arena of pipeline stage " +
                     std::to_string(s) + " on rank " + std::to_string(rank) +
                     " (" + std::to_string(stage->desc->arenaBytes) +
                     " bytes: " + describeArena(*stage->desc) + ")");
    stage->batches = makeRankFeeds(*stage->desc, makeGlobal, coordinates, ctx);
    stage->inputs = stage->desc->withRole("stage_input");
    stage->outputs = stage->desc->withRole("stage_output");
    stage->outputGrads = stage->desc->withRole("output_grad");
    stage->inputGrads = stage->desc->withRole("input_grad");
    auto share = [&](SlotPool &view, PoolsBySize &pools, int64_t bytes) {
      view.pool = &pools[bytes];
      view.pool->bytes = bytes;
      view.stage = s;
    };
    share(stage->inputSlots, slots->inputs, packedBytes(stage->inputs));
    share(stage->gradientSlots, slots->gradients,
          packedBytes(stage->outputGrads));
    if (stage->entries.backwardInput && stage->entries.backwardWeight) {
      stage->weightInputs = stage->desc->withRole("stash");
      for (const TensorDesc *t : stage->outputGrads)
        stage->weightInputs.push_back(t);
      share(stage->weightSlots, slots->weight,
            packedBytes(stage->weightInputs));
    }
    if (stage->entries.forwardKeep) {
      stage->kept = stage->desc->withRole("kept");
      share(stage->keptSlots, slots->kept, packedBytes(stage->kept));
    }
    stages.push_back(std::move(stage));
  }
}

PipelineRank::~PipelineRank() {
  slots->forEachPool([&](SharedPool &pool) { pool.clear(ctx); });
  for (auto &stage : stages) {
    tessel_free(ctx, stage->arena);
  }
}

PipelineRank::Stage &PipelineRank::stageAt(int s) {
  for (auto &stage : stages)
    if (stage->index == s)
      return *stage;
  throw RunError("pipeline stage " + std::to_string(s) +
                 " does not run on pp rank " + std::to_string(ppRank));
}

void *PipelineRank::stageArena(int s) { return stageAt(s).arena; }

int32_t PipelineRank::worldRankOf(int64_t peer) const {
  return int32_t(model.desc.mesh->withCoordinate(rank, pipe.axis, peer));
}

void PipelineRank::check(const std::string &when) {
  checkKernelError(ctx, when);
}

void PipelineRank::initialise(uint64_t seed) {
  for (auto &stage : stages) {
    initParams(*stage->desc, ctx, stage->arena, seed, coordinates);
    zeroStates(*stage->desc, ctx, stage->arena);
  }
  check("initialising parameters");
}

void PipelineRank::load(const CheckpointReader &checkpoint, bool training) {
  for (auto &stage : stages) {
    checkpoint.load(ctx, stage->arena, coordinates, stage->desc);
    if (training && checkpoint.info().paramsOnly)
      zeroStates(*stage->desc, ctx, stage->arena);
  }
  check("loading the checkpoint");
}

std::string PipelineRank::stashDifference() const {
  std::string text;
  auto compare = [&](const char *what, const PoolsBySize &pools,
                     SlotPool Stage::*view, int pipeline::StageHolding::*kind) {
    for (const auto &[bytes, pool] : pools) {
      std::vector<int> group;
      for (const auto &stage : stages)
        if (((*stage).*view).pool == &pool)
          group.push_back(stage->index);
      int64_t want = pipeline::peakHoldingTogether(pipe.actions, group).*kind;
      if (pool.allocated == want)
        continue;
      std::string stagesText;
      for (int s : group)
        stagesText += (stagesText.empty() ? "" : ",") + std::to_string(s);
      text += (text.empty() ? "" : "; ") + std::string("stage") +
              (group.size() > 1 ? "s " : " ") + stagesText + " keep " +
              std::to_string(pool.allocated) + " " + what + " slots of " +
              std::to_string(bytes) +
              " bytes (schedule: " + std::to_string(want) + ")";
    }
  };
  compare("input", slots->inputs, &Stage::inputSlots,
          &pipeline::StageHolding::inputs);
  compare("kept", slots->kept, &Stage::keptSlots,
          &pipeline::StageHolding::kept);
  compare("weight-stash", slots->weight, &Stage::weightSlots,
          &pipeline::StageHolding::weightStash);
  compare("handed-over gradient", slots->gradients, &Stage::gradientSlots,
          &pipeline::StageHolding::gradients);
  return text;
}

int64_t PipelineRank::heldBytes() const {
  int64_t bytes = 0;
  slots->forEachPool(
      [&](const SharedPool &pool) { bytes += pool.allocated * pool.bytes; });
  return bytes;
}

void PipelineRank::send(Stage &stage, int microbatch, bool gradient, int peer) {
  if (peer == ppRank) {
    handOver(stage, microbatch, gradient);
    return;
  }
  int64_t tag = pipeline::messageTag(pipe.numStages(), stage.index, microbatch,
                                    gradient);
  for (const TensorDesc *t : gradient ? stage.inputGrads : stage.outputs)
    tessel_send(ctx, worldRankOf(peer), tag, at(stage.arena, *t), t->bytes);
  check("sending the " + std::string(gradient ? "input gradient" : "output") +
        " of " + stageText(stage.index, microbatch) + " to pp rank " +
        std::to_string(peer));
}

void PipelineRank::recv(Stage &stage, int microbatch, bool gradient, int peer) {
  if (peer == ppRank) {
    takeOver(stage, microbatch, gradient);
    return;
  }
  int producer = gradient ? stage.index + 1 : stage.index - 1;
  int64_t tag = pipeline::messageTag(pipe.numStages(), producer, microbatch,
                                    gradient);
  if (gradient) {
    // The backward that needs it comes next: straight into the arena.
    for (const TensorDesc *t : stage.outputGrads)
      tessel_recv(ctx, worldRankOf(peer), tag, at(stage.arena, *t), t->bytes);
  } else {
    void *slot = stage.inputSlots.acquire(
        ctx, microbatch, "the input of " + stageText(stage.index, microbatch));
    forEachPacked(stage.inputs, slot, [&](const TensorDesc &t, char *place) {
      tessel_recv(ctx, worldRankOf(peer), tag, place, t.bytes);
    });
  }
  check("receiving the " +
        std::string(gradient ? "output gradient" : "input") + " of " +
        stageText(stage.index, microbatch) + " from pp rank " +
        std::to_string(peer));
}

void PipelineRank::handOver(Stage &from, int microbatch, bool gradient) {
  Stage &to = stageAt(gradient ? from.index - 1 : from.index + 1);
  const std::vector<const TensorDesc *> &sent =
      gradient ? from.inputGrads : from.outputs;
  const std::vector<const TensorDesc *> &layout =
      gradient ? to.outputGrads : to.inputs;
  std::string what =
      std::string(gradient ? "the output gradient" : "the input") + " of " +
      stageText(to.index, microbatch);
  if (sent.size() != layout.size())
    throw RunError("pipeline stage " + std::to_string(from.index) + " hands " +
                   std::to_string(sent.size()) + " tensors over as " + what +
                   ", which takes " + std::to_string(layout.size()));
  SlotPool &pool = gradient ? to.gradientSlots : to.inputSlots;
  void *slot = pool.acquire(ctx, microbatch, what);
  size_t k = 0;
  forEachPacked(layout, slot, [&](const TensorDesc &t, char *place) {
    const TensorDesc &source = *sent[k++];
    if (source.bytes != t.bytes)
      throw RunError(
          "pipeline stage " + std::to_string(from.index) + " hands over '" +
          source.name + "' (" + std::to_string(source.bytes) + " bytes) as '" +
          t.name + "' of " + what + " (" + std::to_string(t.bytes) + " bytes)");
    tessel_copy(ctx, place, at(from.arena, source), t.bytes);
  });
  check("handing over " + what);
}

void PipelineRank::takeOver(Stage &stage, int microbatch, bool gradient) {
  SlotPool &pool = gradient ? stage.gradientSlots : stage.inputSlots;
  void *slot = pool.find(microbatch);
  if (!slot)
    throw RunError("pipeline " + stageText(stage.index, microbatch) +
                   " receives its " + (gradient ? "output gradient" : "input") +
                   " from its own rank before the stage handing it over ran");
  if (!gradient)
    return; // Already in the input slot, where the forward reads it.
  // The backward that needs it comes next: into the arena, as a message.
  forEachPacked(stage.outputGrads, slot, [&](const TensorDesc &t, char *place) {
    tessel_copy(ctx, at(stage.arena, t), place, t.bytes);
  });
  pool.release(microbatch);
  check("taking over the output gradient of " +
        stageText(stage.index, microbatch));
}

/// Restores microbatch `microbatch`'s feeds and stage inputs in the arena.
static void restoreInputs(PipelineRank::Stage &stage, tessel_ctx *ctx,
                          int64_t globalIndex, int microbatch) {
  stage.batches->fill(globalIndex, ctx, stage.arena);
  if (stage.inputs.empty())
    return;
  void *slot = stage.inputSlots.find(microbatch);
  if (!slot)
    throw RunError("pipeline " + stageText(stage.index, microbatch) +
                   " runs before its input was received (a schedule "
                   "without the Recv)");
  forEachPacked(stage.inputs, slot, [&](const TensorDesc &t, char *place) {
    tessel_copy(ctx, at(stage.arena, t), place, t.bytes);
  });
}

/// Moves the kept activations in the arena, if any, to a slot of their
/// microbatch's: another microbatch is about to take their place.
static void spillKept(PipelineRank::Stage &stage, tessel_ctx *ctx) {
  if (stage.keptResident < 0)
    return;
  int microbatch = stage.keptResident;
  void *slot = stage.keptSlots.acquire(ctx, microbatch,
                                       "the kept activations of " +
                                           stageText(stage.index, microbatch));
  forEachPacked(stage.kept, slot, [&](const TensorDesc &t, char *place) {
    tessel_copy(ctx, place, at(stage.arena, t), t.bytes);
  });
  stage.keptResident = -1;
}

/// Puts microbatch `microbatch`'s kept activations (a stage with
/// forward_keep) where its backward reads them, unless they are there.
static void restoreKept(PipelineRank::Stage &stage, tessel_ctx *ctx,
                        int microbatch) {
  if (!stage.entries.forwardKeep || stage.keptResident == microbatch)
    return;
  void *slot = stage.keptSlots.find(microbatch);
  if (!slot)
    throw RunError("pipeline " + stageText(stage.index, microbatch) +
                   ": its backward runs before its forward");
  spillKept(stage, ctx);
  forEachPacked(stage.kept, slot, [&](const TensorDesc &t, char *place) {
    tessel_copy(ctx, at(stage.arena, t), place, t.bytes);
  });
  stage.keptSlots.release(microbatch);
  stage.keptResident = microbatch;
}

void PipelineRank::forward(Stage &stage, int microbatch, int64_t step,
                           bool evaluating) {
  restoreInputs(stage, ctx, step * pipe.microbatches + microbatch, microbatch);
  tessel_set_microbatch(ctx, uint64_t(microbatch));
  // Training keeps what the backward reads, where the stage can; the
  // microbatch whose kept values are in the arena moves to a slot first.
  bool keeps = !evaluating && stage.entries.forwardKeep;
  if (keeps)
    spillKept(stage, ctx);
  (keeps ? stage.entries.forwardKeep : stage.entries.forward)(ctx, stage.arena);
  tessel_synchronize(ctx);
  check("step " + std::to_string(step + 1) + " (forward of " +
        stageText(stage.index, microbatch) + ")");
  if ((evaluating || keeps) && stage.index == pipe.numStages() - 1)
    stepLoss.add(*stage.desc, ctx, stage.arena);
  if (keeps)
    stage.keptResident = microbatch;
}

void PipelineRank::backward(Stage &stage, int microbatch, int64_t step,
                            BackwardPart part) {
  bool split = stage.entries.backwardInput && stage.entries.backwardWeight;
  if (part == BackwardPart::Weight && !split)
    return; // Computed with the input part.
  restoreInputs(stage, ctx, step * pipe.microbatches + microbatch, microbatch);
  restoreKept(stage, ctx, microbatch);
  tessel_set_microbatch(ctx, uint64_t(microbatch));
  if (part == BackwardPart::Weight) {
    // The input part's stash and output gradient, back in the arena.
    void *slot = stage.weightSlots.find(microbatch);
    if (!slot)
      throw RunError("pipeline " + stageText(stage.index, microbatch) +
                     ": the weight part runs before the input part");
    forEachPacked(stage.weightInputs, slot,
                  [&](const TensorDesc &t, char *place) {
                    tessel_copy(ctx, at(stage.arena, t), place, t.bytes);
                  });
    stage.entries.backwardWeight(ctx, stage.arena);
    tessel_synchronize(ctx);
    check("step " + std::to_string(step + 1) + " (weight gradients of " +
          stageText(stage.index, microbatch) + ")");
    stage.weightSlots.release(microbatch);
    return;
  }
  bool inputOnly = part == BackwardPart::Input && split;
  (inputOnly ? stage.entries.backwardInput
             : stage.entries.backward)(ctx, stage.arena);
  tessel_synchronize(ctx);
  check("step " + std::to_string(step + 1) + " (backward of " +
        stageText(stage.index, microbatch) + ")");
  // The loss, where the forward did not read it.
  if (!stage.entries.forwardKeep && stage.index == pipe.numStages() - 1)
    stepLoss.add(*stage.desc, ctx, stage.arena);
  if (!inputOnly)
    return;
  void *slot = stage.weightSlots.acquire(
      ctx, microbatch,
      "the weight-gradient inputs of " + stageText(stage.index, microbatch));
  forEachPacked(stage.weightInputs, slot, [&](const TensorDesc &t, char *place) {
    tessel_copy(ctx, place, at(stage.arena, t), t.bytes);
  });
}

void PipelineRank::runAction(const Action &action, int64_t step) {
  Stage &stage = stageAt(action.stage);
  auto release = [&] {
    stage.inputSlots.release(action.microbatch);
    if (stage.keptResident == action.microbatch)
      stage.keptResident = -1;
    stage.keptSlots.release(action.microbatch);
  };
  switch (action.kind) {
  case ActionKind::Forward:
    forward(stage, action.microbatch, step, false);
    return;
  case ActionKind::Backward:
    backward(stage, action.microbatch, step, BackwardPart::Whole);
    release();
    return;
  case ActionKind::BackwardInput:
    backward(stage, action.microbatch, step, BackwardPart::Input);
    return;
  case ActionKind::BackwardWeight:
    // The weight part recomputes nothing of the forward, but may read the
    // feeds and the stage input: released after it.
    backward(stage, action.microbatch, step, BackwardPart::Weight);
    release();
    return;
  case ActionKind::Send:
    send(stage, action.microbatch, action.gradient, action.peer);
    return;
  case ActionKind::Recv:
    recv(stage, action.microbatch, action.gradient, action.peer);
    return;
  }
}

void PipelineRank::exchangeTiedGradients() {
  for (size_t k = 0; k < pipe.tied.size(); ++k) {
    const auto &[name, holders] = pipe.tied[k];
    // A frozen parameter (--freeze) has no gradient on any holder.
    if (!pipe.stages[size_t(holders.front())].gradOf(name))
      continue;
    int64_t tag = -int64_t(k + 1);
    std::vector<Stage *> mine;
    for (auto &stage : stages)
      if (std::count(holders.begin(), holders.end(), stage->index))
        mine.push_back(stage.get());
    // Send this rank's copies' gradients to every other rank holding one
    // first (sends never wait), then sum each copy's from every holder's
    // into a buffer of its own, and only then write the sums back: a
    // second copy on this rank (interleaved stages, or ZB-V's first and
    // last) adds the first's gradient, not its sum.
    for (Stage *stage : mine) {
      const TensorDesc *grad = stage->desc->gradOf(name);
      for (int64_t other : holders)
        if (other != stage->index && pipe.rankOf(int(other)) != ppRank)
          tessel_send(ctx, worldRankOf(pipe.rankOf(int(other))), tag,
                      at(stage->arena, *grad), grad->bytes);
    }
    std::vector<void *> sums;
    auto release = [&] {
      for (void *sum : sums)
        tessel_free(ctx, sum);
    };
    for (Stage *stage : mine) {
      const TensorDesc *grad = stage->desc->gradOf(name);
      void *sum = tessel_alloc(ctx, std::max<int64_t>(grad->bytes, 64));
      void *incoming = tessel_alloc(ctx, std::max<int64_t>(grad->bytes, 64));
      if (!sum || !incoming) {
        tessel_free(ctx, sum);
        tessel_free(ctx, incoming);
        release();
        throw RunError("cannot allocate " + std::to_string(grad->bytes) +
                       " bytes for the tied gradient of '" + name + "'");
      }
      sums.push_back(sum);
      tessel_copy(ctx, sum, at(stage->arena, *grad), grad->bytes);
      for (int64_t other : holders) {
        if (other == stage->index)
          continue;
        if (pipe.rankOf(int(other)) == ppRank) {
          const TensorDesc *theirs = stageAt(int(other)).desc->gradOf(name);
          tessel_copy(ctx, incoming, at(stageAt(int(other)).arena, *theirs),
                      grad->bytes);
        } else {
          tessel_recv(ctx, worldRankOf(pipe.rankOf(int(other))), tag, incoming,
                      grad->bytes);
        }
        tessel_binary(ctx, TESSEL_ADD, grad->dtypeCode, sum, incoming, sum,
                      grad->numElements());
      }
      tessel_synchronize(ctx);
      tessel_free(ctx, incoming);
    }
    for (size_t i = 0; i < mine.size(); ++i) {
      const TensorDesc *grad = mine[i]->desc->gradOf(name);
      tessel_copy(ctx, at(mine[i]->arena, *grad), sums[i], grad->bytes);
    }
    tessel_synchronize(ctx);
    release();
    check("summing the gradients of tied parameter '" + name + "'");
  }
}

void PipelineRank::reduceGradients() {
  for (auto &stage : stages) {
    if (!stage->entries.reduceGrads)
      continue; // One microbatch: reduced in the backward.
    stage->entries.reduceGrads(ctx, stage->arena);
    tessel_synchronize(ctx);
    check("reducing the gradients of stage " + std::to_string(stage->index));
  }
}

void PipelineRank::shareGradientNorm() {
  std::vector<Stage *> clipping;
  for (auto &stage : stages)
    if (stage->entries.gradNorm)
      clipping.push_back(stage.get());
  if (clipping.empty())
    return;
  auto normOf = [](Stage &stage) {
    return at(stage.arena, *stage.desc->withRole("grad_sum_squares").at(0));
  };
  // This rank's stages' parts, added in stage order, then the pipeline's
  // sum over pp: every stage's update reads the same total.
  for (Stage *stage : clipping)
    stage->entries.gradNorm(ctx, stage->arena);
  // f32, or f64 in an f64 model.
  const TensorDesc &norm =
      *clipping.front()->desc->withRole("grad_sum_squares").at(0);
  void *total = normOf(*clipping.front());
  for (size_t k = 1; k < clipping.size(); ++k)
    tessel_binary(ctx, TESSEL_ADD, norm.dtypeCode, total, normOf(*clipping[k]),
                  total, 1);
  tessel_all_reduce(ctx, 1u << pipe.axis, norm.dtypeCode, total, total, 1,
                    TESSEL_REDUCE_SUM);
  for (size_t k = 1; k < clipping.size(); ++k)
    tessel_copy(ctx, normOf(*clipping[k]), total, norm.bytes);
  check("summing the gradient norm over the pipeline");
}

StepLoss PipelineRank::shareLoss() {
  // The last stage's ranks hold the losses (and their counts); the others
  // add zero.
  std::vector<double> total = {stepLoss.sum, stepLoss.count};
  allReduceOnHost(ctx, 1u << pipe.axis, total, TESSEL_REDUCE_SUM,
                  "sharing the loss over the pipeline");
  return {total[0], total[1]};
}

StepLoss PipelineRank::accumulateGradients(int64_t step) {
  tessel_set_step(ctx, uint64_t(step));
  for (auto &stage : stages)
    zeroGrads(*stage->desc, ctx, stage->arena);
  stepLoss = {};
  for (const Action &action : pipe.actions.ranks.at(ppRank))
    runAction(action, step);
  reduceGradients();
  exchangeTiedGradients();
  return shareLoss();
}

double PipelineRank::trainStep(int64_t step) {
  StepLoss loss = accumulateGradients(step);
  shareGradientNorm();
  for (auto &stage : stages) {
    writeGradScale(*stage->desc, ctx, stage->arena, loss.divisor());
    stage->entries.update(ctx, stage->arena);
    tessel_synchronize(ctx);
    check("step " + std::to_string(step + 1) + " (update of stage " +
          std::to_string(stage->index) + ")");
  }
  return loss.mean();
}

double PipelineRank::evalStep(int64_t step) {
  tessel_set_step(ctx, uint64_t(step));
  stepLoss = {};
  forwardInStageOrder(step);
  return shareLoss().mean();
}

void PipelineRank::holdOut(const BatchSourceFactory &makeHeldOut) {
  for (auto &stage : stages)
    stage->heldOut = makeRankFeeds(*stage->desc, makeHeldOut, coordinates, ctx);
}

double PipelineRank::heldOutLoss(int64_t steps) {
  for (auto &stage : stages)
    std::swap(stage->batches, stage->heldOut);
  tessel_set_dropout(ctx, 0);
  stepLoss = {};
  for (int64_t k = 0; k < steps; ++k)
    forwardInStageOrder(k);
  tessel_set_dropout(ctx, 1);
  for (auto &stage : stages)
    std::swap(stage->batches, stage->heldOut);
  return shareLoss().mean();
}

void PipelineRank::forwardInStageOrder(int64_t step) {
  int last = pipe.numStages() - 1;
  for (int m = 0; m < int(pipe.microbatches); ++m)
    for (auto &stage : stages) {
      if (stage->index > 0)
        recv(*stage, m, false, pipe.rankOf(stage->index - 1));
      forward(*stage, m, step, true);
      stage->inputSlots.release(m);
      if (stage->index < last)
        send(*stage, m, false, pipe.rankOf(stage->index + 1));
    }
}

std::map<std::string, std::vector<char>>
PipelineRank::gatherCheckpoint(bool withStates, bool keep) {
  const ModelDesc &whole = model.desc;
  std::map<std::string, std::vector<char>> global;
  // Each stage's global slices, gathered over its dp/tp group; the first
  // rank of each pp slice (every other coordinate 0) holds them.
  bool sliceLeader = true;
  for (size_t a = 0; a < coordinates.size(); ++a)
    if (int(a) != pipe.axis && coordinates[a] != 0)
      sliceLeader = false;
  int64_t tagBase = -(int64_t(1) << 40);
  for (const TensorDesc *w : checkpointTensors(whole, withStates)) {
    // A tied tensor (whole on each holder) is written from its first
    // holder, the others are not even gathered; a stacked one from every
    // stage, its rows each.
    int64_t rowsTotal = w->globalShape.empty() ? 1 : w->globalShape[0];
    int64_t rowBytes = rowsTotal ? w->globalBytes() / rowsTotal : 0;
    for (const PipelineDesc::Slice &part : pipe.slicesOf(*w, false)) {
      int s = part.stage;
      bool mine = pipe.rankOf(s) == ppRank;
      std::vector<char> slice;
      if (mine)
        slice = gatherGlobalTensor(pipe.stages[s], *part.tensor, ctx,
                                   stageAt(s).arena, sliceLeader);
      int64_t sliceBytes = rowBytes * part.rows;
      int64_t offset = part.firstRow;
      int64_t tag = tagBase - s;
      int64_t holderPp = pipe.rankOf(s);
      if (mine && sliceLeader && rank != 0) {
        void *device = tessel_alloc(ctx, std::max<int64_t>(sliceBytes, 64));
        tessel_copy_to_device(ctx, device, slice.data(), sliceBytes);
        tessel_send(ctx, 0, tag, device, sliceBytes);
        tessel_synchronize(ctx);
        tessel_free(ctx, device);
      }
      if (rank == 0 && keep) {
        if (!(mine && sliceLeader)) {
          void *device = tessel_alloc(ctx, std::max<int64_t>(sliceBytes, 64));
          tessel_recv(ctx, worldRankOf(holderPp), tag, device, sliceBytes);
          slice.resize(sliceBytes);
          tessel_copy_to_host(ctx, slice.data(), device, sliceBytes);
          tessel_free(ctx, device);
        }
        std::vector<char> &out = global[w->name];
        out.resize(w->globalBytes());
        // Rows [offset, offset + k) of the global tensor are contiguous.
        if (int64_t(slice.size()) != sliceBytes)
          throw RunError("gathering '" + w->name + "' of stage " +
                         std::to_string(s) + ": " +
                         std::to_string(slice.size()) + " bytes, expected " +
                         std::to_string(sliceBytes));
        std::copy(slice.begin(), slice.end(), out.begin() + offset * rowBytes);
      }
      check("gathering '" + w->name + "' of stage " + std::to_string(s) +
            " for the checkpoint");
    }
  }
  return global;
}
