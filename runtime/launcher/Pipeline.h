//===- Pipeline.h - A pipelined model's stages and schedule -----*- C++ -*-===//
//
// A model compiled for a mesh with a `pp` axis is a pipeline: one shared
// object holding every stage's entries (tessel_s<s>_forward, ...), and a
// description listing the stages' own descriptions, the schedule's
// actions per pp rank and the parameters several stages hold (tied).
// Rank r of the pp axis runs the stages s with s mod P = r, or with ZB-V
// r and 2P - 1 - r (pipeline::placementOf the schedule).
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_LAUNCHER_PIPELINE_H
#define TESSEL_LAUNCHER_PIPELINE_H

#include "runtime/config/PipelineSchedule.h"
#include "runtime/launcher/ModelDescription.h"

#include <nlohmann/json_fwd.hpp>

#include <string>
#include <utility>
#include <vector>

namespace tessel::run {

struct PipelineDesc {
  int64_t ranks = 1, virtualStages = 1, microbatches = 1;
  std::string schedule;
  /// Where the schedule puts each stage.
  pipeline::Placement placement = pipeline::Placement::Looped;
  /// The index of the `pp` axis in the mesh.
  int axis = 0;
  std::vector<int64_t> layers;
  /// Parameters several stages hold, with the stages holding them.
  std::vector<std::pair<std::string, std::vector<int64_t>>> tied;
  /// Every (virtual) stage's own description.
  std::vector<ModelDesc> stages;
  /// What each pp rank runs, in order.
  pipeline::Schedule actions;

  int numStages() const { return int(stages.size()); }
  /// The pp rank that runs stage `s`.
  int rankOf(int s) const {
    return pipeline::rankOfStage(s, int(ranks), placement);
  }
  /// The stages pp rank `rank` runs, in stage order.
  std::vector<int> stagesOfRank(int64_t rank) const;

  /// A stage's part of one of the whole model's tensors: rows [firstRow,
  /// firstRow + rows) of its first dimension, which the stage describes as
  /// `tensor`.
  struct Slice {
    int stage;
    const TensorDesc *tensor;
    int64_t firstRow, rows;
  };
  /// Where the whole model's tensor `w` (a parameter, gradient or state)
  /// lives: every stage holding some of a stacked tensor's layers, and of
  /// a tied or unstacked one the first stage holding it, or with
  /// `everyCopy` every stage (a tied parameter's copies).
  std::vector<Slice> slicesOf(const TensorDesc &w, bool everyCopy) const;
};

/// Parses a pipeline's description (the top level has "pipeline" and
/// "stages") into the whole model's view (see ModelDesc::pipeline).
ModelDesc parsePipelineDescription(const nlohmann::json &j,
                                   const std::string &file);

} // namespace tessel::run

#endif // TESSEL_LAUNCHER_PIPELINE_H
