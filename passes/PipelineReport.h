//===- PipelineReport.h - tessel-compile --report for a pipeline -*- C++
//-*-===//
//
// The report of a model split into pipeline stages (tessel-pipeline-split):
// per stage its layers, flops, memory and communication; the imbalance of
// the stages; and per schedule the bubble and the activations held, from
// pipeline::simulate run on the stages' costs. Read in two steps, as the
// report of one model is: on the planned module (nested stage modules and
// nn.pipeline), then from the lowered pipeline's description.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_PASSES_PIPELINEREPORT_H
#define TESSEL_PASSES_PIPELINEREPORT_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>
#include <string>

namespace tessel {

/// The report's "pipeline", read on the planned top module (after
/// tessel-plan-memory on each stage, before the lowering): per stage its
/// layers, the model's forward flops (nn.pipeline's), the flops one rank
/// spends in each entry per microbatch, the bytes one microbatch keeps on
/// the stage until its backward, and planReport's figures; the imbalance;
/// the compiled schedule and the others that fit the same stages,
/// simulated. nullopt for a module that is not a pipeline (or a
/// malformed one, diagnosed).
std::optional<llvm::json::Object> pipelinePlanReport(mlir::ModuleOp top);

/// The compiled schedule as pipeline::scheduleJson writes it; nullopt for
/// a module that is not a pipeline.
std::optional<std::string> pipelineScheduleJson(mlir::ModuleOp top);

/// Adds what the lowered pipeline's description says to a report made by
/// pipelinePlanReport (under "pipeline"): per stage its arena and regions
/// and its communication per rank, the point-to-point bytes of a step; and
/// the description's "source", "function", "mesh" and "abi_version".
void completePipelineReport(llvm::json::Object &report,
                            const llvm::json::Object &description);

/// The text of a pipeline's report (printHumanReport calls it for a report
/// with "pipeline").
void printPipelineReport(llvm::raw_ostream &os,
                         const llvm::json::Object &report);

} // namespace tessel

#endif // TESSEL_PASSES_PIPELINEREPORT_H
