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

/// One stage this rank runs: its entries, its arena, its data and the
/// stash of its input activations per microbatch in flight.
struct PipelineRank::Stage {
  int index = 0;
  const ModelDesc *desc = nullptr;
  LoadedModel::StageEntries entries;
  void *arena = nullptr;
  std::unique_ptr<BatchSource> batches;
  std::vector<const TensorDesc *> inputs, outputs, outputGrads, inputGrads;
  int64_t stashBytes = 0; // one microbatch's inputs, packed
  std::map<int, void *> stash;  // microbatch -> its slot
  std::vector<void *> freeSlots;
  int64_t slotsAllocated = 0;
  int64_t peakSlots = 0;
  // Zero bubble: what the backward's input part leaves for its weight part
  // (the stash, and the output gradient it may read), kept per microbatch
  // between the two.
  std::vector<const TensorDesc *> weightInputs;
  int64_t weightBytes = 0;
  std::map<int, void *> weightStash;
  std::vector<void *> freeWeightSlots;
  int64_t peakWeightSlots = 0, weightSlotsAllocated = 0;
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
      coordinates(coordinates), ppRank(coordinates.at(pipe.axis)) {
  for (int s : pipe.stagesOfRank(ppRank)) {
    auto stage = std::make_unique<Stage>();
    stage->index = s;
    stage->desc = &pipe.stages[s];
    stage->entries = model.stages.at(s);
    stage->arena = tessel_alloc(ctx, std::max<int64_t>(stage->desc->arenaBytes, 64));
    if (!stage->arena)
      throw RunError("cannot allocate the arena of pipeline stage " +
                     std::to_string(s) + " (" +
                     std::to_string(stage->desc->arenaBytes) + " bytes)");
    stage->batches = makeRankFeeds(*stage->desc, makeGlobal, coordinates, ctx);
    stage->inputs = stage->desc->withRole("stage_input");
    stage->outputs = stage->desc->withRole("stage_output");
    stage->outputGrads = stage->desc->withRole("output_grad");
    stage->inputGrads = stage->desc->withRole("input_grad");
    for (const TensorDesc *t : stage->inputs)
      stage->stashBytes += (t->bytes + 63) / 64 * 64;
    if (stage->entries.backwardInput && stage->entries.backwardWeight) {
      stage->weightInputs = stage->desc->withRole("stash");
      for (const TensorDesc *t : stage->outputGrads)
        stage->weightInputs.push_back(t);
      for (const TensorDesc *t : stage->weightInputs)
        stage->weightBytes += (t->bytes + 63) / 64 * 64;
    }
    stages.push_back(std::move(stage));
  }
}

PipelineRank::~PipelineRank() {
  for (auto &stage : stages) {
    for (auto &[m, slot] : stage->stash)
      tessel_free(ctx, slot);
    for (void *slot : stage->freeSlots)
      tessel_free(ctx, slot);
    for (auto &[m, slot] : stage->weightStash)
      tessel_free(ctx, slot);
    for (void *slot : stage->freeWeightSlots)
      tessel_free(ctx, slot);
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

int32_t PipelineRank::worldRankOf(int64_t peer) const {
  // Row-major, last axis fastest: the pp coordinate's stride.
  const Mesh &mesh = *model.desc.mesh;
  int64_t stride = 1;
  for (size_t a = pipe.axis + 1; a < mesh.shape.size(); ++a)
    stride *= mesh.shape[a];
  return int32_t(rank + (peer - ppRank) * stride);
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
  std::vector<pipeline::StageHolding> expected =
      pipeline::peakHolding(pipe.actions);
  std::string text;
  for (const auto &stage : stages) {
    const pipeline::StageHolding &want = expected.at(stage->index);
    int64_t wantWeight = stage->weightBytes ? want.weightStash : 0;
    if (stage->slotsAllocated == want.inputs &&
        stage->weightSlotsAllocated == wantWeight)
      continue;
    text += (text.empty() ? "" : "; ") + std::string("stage ") +
            std::to_string(stage->index) + " keeps " +
            std::to_string(stage->slotsAllocated) + " input and " +
            std::to_string(stage->weightSlotsAllocated) +
            " weight-stash slots (schedule: " + std::to_string(want.inputs) +
            " and " + std::to_string(wantWeight) + ")";
  }
  return text;
}

void PipelineRank::send(Stage &stage, int microbatch, bool gradient, int peer) {
  int64_t tag = pipelineTag(pipe.numStages(), stage.index, microbatch, gradient);
  for (const TensorDesc *t : gradient ? stage.inputGrads : stage.outputs)
    tessel_send(ctx, worldRankOf(peer), tag, at(stage.arena, *t), t->bytes);
  check("sending the " + std::string(gradient ? "input gradient" : "output") +
        " of " + stageText(stage.index, microbatch) + " to pp rank " +
        std::to_string(peer));
}

void PipelineRank::recv(Stage &stage, int microbatch, bool gradient, int peer) {
  int producer = gradient ? stage.index + 1 : stage.index - 1;
  int64_t tag = pipelineTag(pipe.numStages(), producer, microbatch, gradient);
  if (gradient) {
    // The backward that needs it comes next: straight into the arena.
    for (const TensorDesc *t : stage.outputGrads)
      tessel_recv(ctx, worldRankOf(peer), tag, at(stage.arena, *t), t->bytes);
  } else {
    void *slot = nullptr;
    if (!stage.freeSlots.empty()) {
      slot = stage.freeSlots.back();
      stage.freeSlots.pop_back();
    } else {
      slot = tessel_alloc(ctx, std::max<int64_t>(stage.stashBytes, 64));
      if (!slot)
        throw RunError("cannot allocate " + std::to_string(stage.stashBytes) +
                       " bytes to keep the input of " +
                       stageText(stage.index, microbatch));
      ++stage.slotsAllocated;
    }
    stage.stash[microbatch] = slot;
    stage.peakSlots =
        std::max<int64_t>(stage.peakSlots, int64_t(stage.stash.size()));
    char *cursor = static_cast<char *>(slot);
    for (const TensorDesc *t : stage.inputs) {
      tessel_recv(ctx, worldRankOf(peer), tag, cursor, t->bytes);
      cursor += (t->bytes + 63) / 64 * 64;
    }
  }
  check("receiving the " +
        std::string(gradient ? "output gradient" : "input") + " of " +
        stageText(stage.index, microbatch) + " from pp rank " +
        std::to_string(peer));
}

/// Restores microbatch `microbatch`'s feeds and stage inputs in the arena.
static void restoreInputs(PipelineRank::Stage &stage, tessel_ctx *ctx,
                          int64_t globalIndex, int microbatch) {
  stage.batches->fill(globalIndex, ctx, stage.arena);
  if (stage.inputs.empty())
    return;
  auto it = stage.stash.find(microbatch);
  if (it == stage.stash.end())
    throw RunError("pipeline " + stageText(stage.index, microbatch) +
                   " runs before its input was received (a schedule "
                   "without the Recv)");
  const char *cursor = static_cast<const char *>(it->second);
  for (const TensorDesc *t : stage.inputs) {
    tessel_copy(ctx, at(stage.arena, *t), cursor, t->bytes);
    cursor += (t->bytes + 63) / 64 * 64;
  }
}

void PipelineRank::forward(Stage &stage, int microbatch, int64_t step,
                           bool evaluating) {
  restoreInputs(stage, ctx, step * pipe.microbatches + microbatch, microbatch);
  tessel_set_microbatch(ctx, uint64_t(microbatch));
  stage.entries.forward(ctx, stage.arena);
  tessel_synchronize(ctx);
  check("step " + std::to_string(step + 1) + " (forward of " +
        stageText(stage.index, microbatch) + ")");
  if (evaluating && stage.index == pipe.numStages() - 1)
    lossSum += readLoss(stage.desc->loss(), ctx, stage.arena);
}

void PipelineRank::backward(Stage &stage, int microbatch, int64_t step,
                            BackwardPart part) {
  restoreInputs(stage, ctx, step * pipe.microbatches + microbatch, microbatch);
  tessel_set_microbatch(ctx, uint64_t(microbatch));
  bool split = stage.entries.backwardInput && stage.entries.backwardWeight;
  if (part == BackwardPart::Weight) {
    if (!split)
      return; // Computed with the input part.
    // The input part's stash and output gradient, back in the arena.
    auto it = stage.weightStash.find(microbatch);
    if (it == stage.weightStash.end())
      throw RunError("pipeline " + stageText(stage.index, microbatch) +
                     ": the weight part runs before the input part");
    const char *cursor = static_cast<const char *>(it->second);
    for (const TensorDesc *t : stage.weightInputs) {
      tessel_copy(ctx, at(stage.arena, *t), cursor, t->bytes);
      cursor += (t->bytes + 63) / 64 * 64;
    }
    stage.entries.backwardWeight(ctx, stage.arena);
    tessel_synchronize(ctx);
    check("step " + std::to_string(step + 1) + " (weight gradients of " +
          stageText(stage.index, microbatch) + ")");
    stage.freeWeightSlots.push_back(it->second);
    stage.weightStash.erase(it);
    return;
  }
  bool inputOnly = part == BackwardPart::Input && split;
  (inputOnly ? stage.entries.backwardInput : stage.entries.backward)(
      ctx, stage.arena);
  tessel_synchronize(ctx);
  check("step " + std::to_string(step + 1) + " (backward of " +
        stageText(stage.index, microbatch) + ")");
  if (stage.index == pipe.numStages() - 1)
    lossSum += readLoss(stage.desc->loss(), ctx, stage.arena);
  if (!inputOnly)
    return;
  void *slot = nullptr;
  if (!stage.freeWeightSlots.empty()) {
    slot = stage.freeWeightSlots.back();
    stage.freeWeightSlots.pop_back();
  } else {
    slot = tessel_alloc(ctx, std::max<int64_t>(stage.weightBytes, 64));
    ++stage.weightSlotsAllocated;
    if (!slot)
      throw RunError("cannot allocate " + std::to_string(stage.weightBytes) +
                     " bytes to keep the weight-gradient inputs of " +
                     stageText(stage.index, microbatch));
  }
  stage.weightStash[microbatch] = slot;
  stage.peakWeightSlots =
      std::max<int64_t>(stage.peakWeightSlots, int64_t(stage.weightStash.size()));
  char *cursor = static_cast<char *>(slot);
  for (const TensorDesc *t : stage.weightInputs) {
    tessel_copy(ctx, cursor, at(stage.arena, *t), t->bytes);
    cursor += (t->bytes + 63) / 64 * 64;
  }
}

void PipelineRank::runAction(const Action &action, int64_t step) {
  Stage &stage = stageAt(action.stage);
  auto release = [&] {
    auto it = stage.stash.find(action.microbatch);
    if (it == stage.stash.end())
      return;
    stage.freeSlots.push_back(it->second);
    stage.stash.erase(it);
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
    int64_t tag = -int64_t(k + 1);
    // Send this rank's copies' gradients to every other holder first
    // (sends never wait), then receive and add theirs: every holder ends
    // with the same sum.
    for (auto &stage : stages) {
      if (!std::count(holders.begin(), holders.end(), stage->index))
        continue;
      const TensorDesc *grad = stage->desc->gradOf(name);
      for (int64_t other : holders)
        if (other != stage->index && other % pipe.ranks != ppRank)
          tessel_send(ctx, worldRankOf(other % pipe.ranks), tag,
                      at(stage->arena, *grad), grad->bytes);
    }
    for (auto &stage : stages) {
      if (!std::count(holders.begin(), holders.end(), stage->index))
        continue;
      const TensorDesc *grad = stage->desc->gradOf(name);
      void *incoming = tessel_alloc(ctx, std::max<int64_t>(grad->bytes, 64));
      if (!incoming)
        throw RunError("cannot allocate " + std::to_string(grad->bytes) +
                       " bytes for the tied gradient of '" + name + "'");
      for (int64_t other : holders) {
        if (other == stage->index)
          continue;
        if (other % pipe.ranks == ppRank) {
          // Both copies on this rank (interleaved stages).
          const TensorDesc *theirs = stageAt(int(other)).desc->gradOf(name);
          tessel_copy(ctx, incoming, at(stageAt(int(other)).arena, *theirs),
                      grad->bytes);
        } else {
          tessel_recv(ctx, worldRankOf(other % pipe.ranks), tag, incoming,
                      grad->bytes);
        }
        tessel_binary(ctx, TESSEL_ADD, grad->dtypeCode, at(stage->arena, *grad),
                      incoming, at(stage->arena, *grad), grad->numElements());
      }
      tessel_synchronize(ctx);
      tessel_free(ctx, incoming);
    }
    check("summing the gradients of tied parameter '" + name + "'");
  }
}

double PipelineRank::shareLoss(double sum) {
  // The last stage's ranks hold the losses; the others add zero.
  double *device = static_cast<double *>(tessel_alloc(ctx, 64));
  if (!device)
    throw RunError("cannot allocate the loss's buffer");
  tessel_copy_to_device(ctx, device, &sum, sizeof(sum));
  tessel_all_reduce(ctx, 1u << pipe.axis, TESSEL_F64, device, device, 1,
                    TESSEL_REDUCE_SUM);
  double total = 0;
  tessel_copy_to_host(ctx, &total, device, sizeof(total));
  tessel_free(ctx, device);
  check("sharing the loss over the pipeline");
  return total / double(pipe.microbatches);
}

double PipelineRank::trainStep(int64_t step) {
  tessel_set_step(ctx, uint64_t(step));
  for (auto &stage : stages)
    zeroGrads(*stage->desc, ctx, stage->arena);
  lossSum = 0;
  for (const Action &action : pipe.actions.ranks.at(ppRank))
    runAction(action, step);
  exchangeTiedGradients();
  float gradScale = 1.0f / float(pipe.microbatches);
  for (auto &stage : stages) {
    tessel_copy_to_device(
        ctx, at(stage->arena, *stage->desc->withRole("grad_scale").at(0)),
        &gradScale, sizeof(gradScale));
    stage->entries.update(ctx, stage->arena);
    tessel_synchronize(ctx);
    check("step " + std::to_string(step + 1) + " (update of stage " +
          std::to_string(stage->index) + ")");
  }
  return shareLoss(lossSum);
}

double PipelineRank::evalStep(int64_t step) {
  tessel_set_step(ctx, uint64_t(step));
  lossSum = 0;
  int last = pipe.numStages() - 1;
  for (int m = 0; m < int(pipe.microbatches); ++m)
    for (auto &stage : stages) {
      if (stage->index > 0)
        recv(*stage, m, false, int((stage->index - 1) % pipe.ranks));
      forward(*stage, m, step, true);
      auto it = stage->stash.find(m);
      if (it != stage->stash.end()) {
        stage->freeSlots.push_back(it->second);
        stage->stash.erase(it);
      }
      if (stage->index < last)
        send(*stage, m, false, int((stage->index + 1) % pipe.ranks));
    }
  return shareLoss(lossSum);
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
    // The stages holding `w`, and which rows of it each holds.
    for (int s = 0; s < pipe.numStages(); ++s) {
      const ModelDesc &desc = pipe.stages[s];
      const TensorDesc *t = desc.find(w->role, w->name);
      if (!t)
        continue;
      bool mine = s % pipe.ranks == ppRank;
      std::vector<char> slice;
      if (mine)
        slice = gatherGlobalTensor(desc, *t, ctx, stageAt(s).arena,
                                   sliceLeader);
      // A tied tensor (whole on each holder) is written from its first
      // holder; a stacked one from every stage, its rows each.
      bool first = true;
      for (int earlier = 0; earlier < s && !t->layers; ++earlier)
        if (pipe.stages[earlier].find(w->role, w->name))
          first = false;
      if (!first)
        continue;
      // Stage s holds rows [offset, offset + rowsHere) of `rowsTotal`.
      int64_t rowsTotal = w->globalShape.empty() ? 1 : w->globalShape[0];
      int64_t rowsHere = t->layers ? t->shape[0] : rowsTotal;
      int64_t rowBytes = rowsTotal ? w->globalBytes() / rowsTotal : 0;
      int64_t sliceBytes = rowBytes * rowsHere;
      int64_t offset = t->layers ? t->layers->offset : 0;
      int64_t tag = tagBase - s;
      int64_t holderPp = s % pipe.ranks;
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
