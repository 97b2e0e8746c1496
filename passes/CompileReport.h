//===- CompileReport.h - What tessel-compile --report says about a model --===//
//
// The report of a compiled model, as JSON and as text: the flops of each
// function and the activations the backward keeps (read on the planned
// module, before lowering), and the description the lowering writes into the
// module (arena regions, mesh) with the communication per rank that follows
// from its "collectives". tessel-compile prints it; the pass
// tessel-report-communication prints the communication part from
// tessel-opt, so lit sees the same figures.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_PASSES_COMPILEREPORT_H
#define TESSEL_PASSES_COMPILEREPORT_H

#include "passes/Pipelines.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>

namespace tessel {

/// "flops" per function, "kept_activation_bytes" (the stacks the backward
/// keeps of the repeated layers) and "recompute", read on a module after
/// tessel-plan-memory and before tessel-lower-to-runtime.
llvm::json::Object planReport(mlir::ModuleOp module);

/// The model's description, read back from a lowered module's
/// __tessel_model_json: the same numbers the launcher reads from the .so.
std::optional<llvm::json::Value> modelDescription(mlir::ModuleOp module);

/// The report's "communication" of a description: per entry and collective
/// the calls, the payload bytes (what the runtime's counters show) and the
/// bytes a rank sends with the ring algorithms, and one step's total
/// (backward + update with one microbatch; forward for an evaluation-only
/// model). nullopt for a model without a mesh.
std::optional<llvm::json::Object>
communicationReport(const llvm::json::Object &description);

/// The report's "training_state" of a description of a trained model: per
/// rank the bytes of the parameters, gradients, master weights (mixed
/// precision) and optimizer states next to
/// the ZeRO paper's formula for its stage (Ψ the parameters a rank holds
/// before ZeRO — its tensor-parallel blocks —, N the dp ranks sharing
/// them), and the tensors padded for the shard. nullopt without training.
std::optional<llvm::json::Object>
trainingStateReport(const llvm::json::Object &description);

/// The compile pipeline on `module` (buildPlanPipeline, then
/// buildLowerPipeline), and its report in `report`: what the planned module
/// says (planReport, or pipelinePlanReport for a pipeline), then what the
/// lowered module's description says. `schedule` (when given) gets a
/// pipeline's pipelineScheduleJson. Failure after the diagnostics.
mlir::LogicalResult
compileWithReport(mlir::ModuleOp module, const CompilePipelineOptions &options,
                  llvm::json::Object &report,
                  std::optional<std::string> *schedule = nullptr);

/// The communication table of a report's "communication", under `title`.
void printCommunication(llvm::raw_ostream &os,
                        const llvm::json::Object &communication,
                        llvm::StringRef title = "communication per rank");
/// The whole report as text: flops, kept activations, arena regions,
/// communication; a pipeline's (with "pipeline") as printPipelineReport
/// writes it.
void printHumanReport(llvm::raw_ostream &os, const llvm::json::Object &report);

} // namespace tessel

#endif // TESSEL_PASSES_COMPILEREPORT_H
