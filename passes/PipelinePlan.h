//===- PipelinePlan.h - Stages, layers and schedule of a pipeline -*- C++ -*-===//
//
// What tessel-pipeline-split decides and later passes read back from the
// module's `nn.pipeline`: how many ranks and virtual stages, which layers
// each stage holds, the microbatches and the schedule, and the parameters
// several stages hold (tied).
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_PASSES_PIPELINEPLAN_H
#define TESSEL_PASSES_PIPELINEPLAN_H

#include "runtime/config/PipelineSchedule.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/SmallVector.h"

#include <string>
#include <utility>

namespace tessel {

/// What the user asked for, and what the model costs.
struct PipelineRequest {
  int64_t ranks = 1;         // the size of the mesh's `pp` axis
  int64_t virtualStages = 1; // chunks per rank (interleaved)
  int64_t microbatches = 0;  // 0: as many as ranks
  std::string schedule;      // gpipe, 1f1b, interleaved, zb-h1, zb-v, dualpipev
  std::string stageLayers;   // "3,4,4,3" pins the layers; "" balances
  int64_t layers = 0;        // L, the repeat's layer count
  int64_t layerFlops = 0, beforeFlops = 0, afterFlops = 0;
};

/// The decided pipeline.
struct PipelinePlan {
  int64_t ranks = 1, virtualStages = 1, microbatches = 1;
  std::string schedule;
  llvm::SmallVector<int64_t> layers; // per (virtual) stage
  llvm::SmallVector<int64_t> flops;  // per stage: forward flops
  /// Parameters held by several stages, with the stages holding them.
  llvm::SmallVector<std::pair<std::string, llvm::SmallVector<int64_t>>> tied;
  /// The module's own schedule (nn.pipeline's `actions`: per rank, its
  /// actions in formatSchedule's notation); empty: the schedule's.
  std::vector<std::vector<pipeline::Action>> actions;

  int stages() const { return static_cast<int>(layers.size()); }
  /// Stage `s`'s layers: {first layer, count}.
  std::pair<int64_t, int64_t> layerRange(int s) const;
  /// The pp rank running virtual stage `s`: Megatron's interleaving, or
  /// ZB-V's V (pipeline::placementOf the schedule).
  int64_t rankOf(int s) const;
  /// The virtual stages pp rank `rank` runs, ascending.
  std::vector<int> stagesOf(int64_t rank) const;

  /// Per pp rank, the actions it runs: `actions` when the module gives
  /// them, else buildSchedule's; nullopt, with `error`, when the schedule
  /// cannot be built for this shape.
  std::optional<std::vector<std::vector<pipeline::Action>>>
  rankActions(std::string &error) const;

  mlir::DictionaryAttr
  toAttr(mlir::MLIRContext *ctx,
         llvm::ArrayRef<std::pair<std::string, llvm::SmallVector<int64_t>>>
             tiedParams) const;
  /// The module's `nn.pipeline`; nullopt without one, failure (diagnosed)
  /// when malformed.
  static mlir::FailureOr<std::optional<PipelinePlan>>
  fromModule(mlir::ModuleOp module);

private:
  /// Reads nn.pipeline's `actions` into `actions`, each checked against
  /// the plan (a stage of its rank, a microbatch in range, another rank as
  /// peer); `fail` reports what is malformed.
  mlir::LogicalResult parseActions(
      mlir::Attribute attr,
      llvm::function_ref<mlir::InFlightDiagnostic(llvm::StringRef)> fail);
};

/// Checks the request (located at `where`) and balances the layers: the
/// stages' forward flops, counting what comes before the layers on the
/// first stage and after them on the last, with the largest as small as
/// it can be; every stage gets at least one layer.
mlir::FailureOr<PipelinePlan> planPipeline(const PipelineRequest &request,
                                           mlir::Operation *where);

} // namespace tessel

#endif // TESSEL_PASSES_PIPELINEPLAN_H
