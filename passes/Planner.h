//===- Planner.h - Rank the splits of a model over N devices ----*- C++ -*-===//
//
// tessel-plan's search (DESIGN §2, "Planner"): every (dp, cp, tp, pp) whose
// product is the device count (cp > 1 where the rules split some argument's
// dimension over cp), with each ZeRO stage where dp·cp > 1, each pipeline
// schedule where pp > 1 and with and without sequence parallelism where
// tp > 1, is compiled (the whole plan and lowering
// pipeline, no code generation) and its report read: the flops of a step per
// rank (a pipeline's simulated makespan, bubble included), the bytes each
// rank sends with the ring algorithms less those that overlap compute, the
// point-to-point bytes of the stages and the memory a rank holds. A device
// model (peak flops at an achieved fraction, link bandwidth, memory) turns
// them into a predicted step time; candidates that fit in memory are ranked
// by it. One over memory is compiled again with selective, then full
// activation recomputation, then (a pipeline) with --stage-recompute, as a
// Megatron user turns it on: only where the memory needs it, since it
// costs compute. Alpa searches the same space with an ILP over its own
// cost model; this one compiles each candidate in well under a second, so
// its figures are the generated program's, exactly, and only the time
// model is a model. The compiles run `Settings::jobs` at a time, each
// worker in an MLIRContext of its own with its own parse of the model; the
// ranking is the same at any job count.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_PASSES_PLANNER_H
#define TESSEL_PASSES_PLANNER_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace tessel {
struct CompilePipelineOptions;
} // namespace tessel

namespace tessel::planner {

/// One device of the mesh, as the time model sees it.
struct DeviceModel {
  std::string name;
  double memoryBytes = 0;
  double bf16Flops = 0;       // dense peak, flop/s
  double f32Flops = 0;        // dense peak without TF32, flop/s
  double f64Flops = 0;        // dense peak (FP64 tensor cores), flop/s
  /// The dense peak for `precision` (f32, bf16 or f64).
  double peakFlops(llvm::StringRef precision) const {
    return precision == "bf16"  ? bf16Flops
           : precision == "f64" ? f64Flops
                                : f32Flops;
  }
  double linkBytesPerSec = 0; // a rank's sends per second in a node
  double networkBytesPerSec = 0; // ... to another node
};

/// "h100" (SXM: 80 GiB, 989 TFLOP/s bf16, 67 f32 and f64, NVLink 450 GB/s each
/// way, a 400 Gb/s network port per GPU between nodes) or "h200" (141 GB,
/// the same compute and links); nullopt otherwise.
std::optional<DeviceModel> deviceModel(llvm::StringRef name);
/// Why `devices` over `nodes` of `device` cannot be planned ("--devices 0:
/// expected 1 to 4096", a node count that does not divide the devices, an
/// unknown device), or empty: what tessel-plan and --mesh auto refuse.
std::string refuseDevices(int64_t devices, int64_t nodes,
                          llvm::StringRef device);

struct Settings {
  int64_t devices = 1;
  /// The nodes the devices are in, devices / nodes each (ranks numbered as
  /// Links places them: tp in a node first, then cp, then dp, then pp).
  int64_t nodes = 1;
  DeviceModel device;
  /// The fraction of the peak a rank's kernels reach (MFU-like).
  double efficiency = 0.5;
  /// Microbatches per step, the same for every candidate (so that each
  /// processes the same samples per step): gradient accumulation without
  /// pp, the schedule's microbatches with it.
  int64_t microbatches = 1;
  std::string precision = "f32";
  std::string source; // the model's file name, for the descriptions
  /// The rest of every candidate's compile options (training settings,
  /// rules, ...), set before the planner sets the mesh, ZeRO stage,
  /// schedule, microbatches and precision. Called from the workers at
  /// once: it may only read.
  std::function<void(CompilePipelineOptions &)> configure;
  /// Candidates compiled at once (0: one per hardware thread).
  unsigned jobs = 0;
};

/// One way to split the model, and what its compile says.
struct Candidate {
  int64_t dp = 1, cp = 1, tp = 1, pp = 1, zero = 0;
  std::string schedule; // pp > 1 only
  /// Sequence parallelism (tp > 1): the search's choice or the command
  /// line's.
  bool sequenceParallel = false;
  /// The recompute policy the search set for the candidate to fit
  /// ("selective", "full"), or empty: the command line's (default none).
  std::string recompute;
  /// A pipeline whose stages keep only their inputs and recompute their
  /// forward in the backward (--stage-recompute): the search's last resort
  /// where neither policy fits, or the command line's.
  bool stageRecompute = false;
  /// The compiler's refusal (the first error), or empty.
  std::string refused;
  // Per rank, per step: the busiest rank's figures.
  int64_t flops = 0;        // compute, a pipeline's makespan included
  int64_t ringBytes = 0;    // collectives, ring algorithms
  int64_t exposedBytes = 0; // ringBytes less what overlaps compute
  int64_t p2pBytes = 0;     // a pipeline stage's sends
  int64_t memoryBytes = 0;  // arena (+ a pipeline's held activations)
  double bubble = 0;
  // The collectives' seconds on their links: exposed, and overlapping
  // compute (hidden up to the compute's time).
  double exposedSeconds = 0, overlappedSeconds = 0;
  double computeSeconds = 0, commSeconds = 0, stepSeconds = 0;
  bool fits = false;

  /// The devices the split spans: dp·cp·tp·pp.
  int64_t ranks() const { return dp * cp * tp * pp; }
  /// "pp=2,dp=2,cp=2,tp=2", outermost first (axes of one rank left out;
  /// "one device" for none).
  std::string mesh() const;
  /// A candidate of the same split, not yet compiled.
  Candidate sameSplit() const;
};

/// Every candidate for `settings.devices`, compiled from a clone of
/// `model` each: those that fit first, fastest first, then those over
/// memory, then the refused.
std::vector<Candidate> plan(mlir::ModuleOp model, const Settings &settings);

/// The fastest candidate that fits (the ranking's first), or null.
const Candidate *best(const std::vector<Candidate> &ranked);

/// The ranking as a table (the first `top` that fit), then one line per
/// candidate over memory and per refusal.
void printPlan(llvm::raw_ostream &os, const std::vector<Candidate> &ranked,
               const Settings &settings, size_t top);
/// The same as JSON: the settings and every candidate.
llvm::json::Object planJson(const std::vector<Candidate> &ranked,
                            const Settings &settings);

} // namespace tessel::planner

#endif // TESSEL_PASSES_PLANNER_H
