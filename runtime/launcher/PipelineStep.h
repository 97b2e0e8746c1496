//===- PipelineStep.h - One pp rank running its stages' schedule -*- C++
//-*-===//
//
// A rank of a pipeline holds its stages (s mod P = its pp coordinate, or
// ZB-V's two: PipelineDesc::stagesOfRank), each with its own arena, and
// runs its list of the schedule's actions:
//   - Forward(s, m): the stage's forward entry on microbatch m, its input
//     activations restored from the microbatch's slot; in training, a
//     stage with forward_keep runs that instead and keeps what it returns
//     for the backward: in the arena until another microbatch needs the
//     place, then in a slot of the microbatch's;
//   - Backward(s, m): the stage's backward entry (backward_no_sync when
//     the stage reduces its gradients once per step) on the restored kept
//     activations, or, compiled with --stage-recompute, recomputing the
//     stage's forward from its input (GPipe's re-materialisation: a stage
//     keeps only its input per microbatch in flight); it accumulates the
//     parameters' gradients and leaves the gradient of its input;
//   - BackwardInput / BackwardWeight (zb-h1): the stage's backward_input
//     entry (the input gradient; it also leaves a stash of what the weight
//     gradients read, which is kept per microbatch) and, later, its
//     backward_weight entry on that stash (tessel-split-backward);
//   - Send / Recv: the boundary tensors, one message each, tagged by
//     (microbatch, producing stage, direction) (pipeline::messageTag, as
//     the compiler's communication check tags them); between two stages
//     of this rank (ZB-V's turn) a copy into the receiver's slot.
// After the actions: a stage whose microbatches accumulated their gradients
// unreduced (backward_no_sync) reduces them over dp once (reduce_grads);
// the tied parameters' gradients are exchanged between
// the stages holding them and summed; a clipping pipeline's stages each
// compute their part of the gradient norm (grad_norm entries), summed on
// the rank and then over the pp axis into every stage's
// grad_sum_squares; each stage's update runs, and the step's loss (the
// last stage's mean) is shared over the pp axis.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_LAUNCHER_PIPELINESTEP_H
#define TESSEL_LAUNCHER_PIPELINESTEP_H

#include "runtime/launcher/Arena.h"
#include "runtime/launcher/Data.h"
#include "runtime/launcher/Distributed.h"
#include "runtime/launcher/ModelLibrary.h"
#include "runtime/launcher/Pipeline.h"
#include "runtime/launcher/Safetensors.h"

#include <map>
#include <memory>
#include <vector>

namespace tessel::run {

class PipelineRank {
public:
  /// The stages of world rank `rank` (at `coordinates`) of `model`, on the
  /// rank's context `ctx`; `makeGlobal` draws one device's microbatches.
  PipelineRank(const LoadedModel &model, tessel_ctx *ctx, int32_t rank,
               const std::vector<int64_t> &coordinates,
               const BatchSourceFactory &makeGlobal);
  ~PipelineRank();
  PipelineRank(const PipelineRank &) = delete;
  PipelineRank &operator=(const PipelineRank &) = delete;

  /// Parameters from the seed (as one device draws them) and zero states.
  void initialise(uint64_t seed);
  /// Every stage's block of `checkpoint`'s tensors.
  void load(const CheckpointReader &checkpoint, bool training);
  /// One training step: the schedule, the tied gradients, the updates;
  /// the step's loss (StepLoss's mean, on every rank).
  double trainStep(int64_t step);
  /// The step's schedule without the update: every stage's gradients
  /// summed over the step's microbatches (reduced over dp, tied copies
  /// summed); the step's loss and the gradients' scale (on every rank).
  StepLoss accumulateGradients(int64_t step);
  /// The forward of every microbatch in stage order; the step's loss.
  double evalStep(int64_t step);
  /// --eval-every: each stage's held-out batches, its block of those
  /// `makeHeldOut` draws.
  void holdOut(const BatchSourceFactory &makeHeldOut);
  /// The held-out loss over batches 0 .. `steps` - 1 (the forwards in
  /// stage order, dropout off), one StepLoss over all; on every rank.
  double heldOutLoss(int64_t steps);
  /// The global checkpoint tensors (parameters, and states when
  /// `withStates`), gathered on the mesh's rank 0 (`keep`); every rank
  /// takes part.
  std::map<std::string, std::vector<char>> gatherCheckpoint(bool withStates,
                                                            bool keep);
  /// The arena of stage `s`, one of this rank's (a sharded checkpoint
  /// writes its tensors as they are, the gradient check perturbs them);
  /// throws RunError for another stage.
  void *stageArena(int s);
  /// How the slots this rank allocated to keep microbatches between
  /// actions (inputs, kept activations, the weight part's stash and
  /// handed-over gradients, one pool of each for all its stages) differ
  /// from what the schedule holds at most (pipeline::peakHoldingPerRank,
  /// which the report's activation bytes count): "" when they agree.
  std::string stashDifference() const;
  /// The bytes of every slot this rank allocated to keep microbatches
  /// between actions (what the report's activation bytes count).
  int64_t heldBytes() const;

  /// One of this rank's stages (PipelineStep.cpp).
  struct Stage;

private:
  void runAction(const pipeline::Action &action, int64_t step);
  void forward(Stage &stage, int microbatch, int64_t step, bool keepStash);
  enum class BackwardPart { Whole, Input, Weight };
  void backward(Stage &stage, int microbatch, int64_t step, BackwardPart part);
  void send(Stage &stage, int microbatch, bool gradient, int peer);
  void recv(Stage &stage, int microbatch, bool gradient, int peer);
  /// A send between two of this rank's stages: the tensors go straight
  /// into the receiving stage's slot (its input slot for an activation,
  /// its gradient slot for a gradient); the receive takes them from there.
  void handOver(Stage &from, int microbatch, bool gradient);
  void takeOver(Stage &stage, int microbatch, bool gradient);
  /// Each stage's reduce_grads, where its microbatches ran backward_no_sync.
  void reduceGradients();
  void exchangeTiedGradients();
  void shareGradientNorm();
  /// The last stage's StepLoss, on every rank of the pipeline.
  StepLoss shareLoss();
  /// Step `step`'s forwards, every microbatch in stage order, adding the
  /// last stage's losses to stepLoss.
  void forwardInStageOrder(int64_t step);
  Stage &stageAt(int s);
  int32_t worldRankOf(int64_t ppRank) const;
  void check(const std::string &when);

  const LoadedModel &model;
  const PipelineDesc &pipe;
  tessel_ctx *ctx;
  int32_t rank;
  std::vector<int64_t> coordinates;
  int64_t ppRank;
  struct Slots;
  std::unique_ptr<Slots> slots;
  std::vector<std::unique_ptr<Stage>> stages;
  StepLoss stepLoss; // the last stage's; empty on the others
};

} // namespace tessel::run

#endif // TESSEL_LAUNCHER_PIPELINESTEP_H
