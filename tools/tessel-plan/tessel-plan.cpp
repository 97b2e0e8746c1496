//===- tessel-plan.cpp - Rank the ways to split a model over N devices ----===//
//
//   tessel-plan model.mlir --devices 8 [--nodes K] [--device h100|h200]
//               [--microbatches M]
//               [--precision bf16] [--top K] [--json FILE]
//               [training flags: --optimizer sgd --freeze wte ...]
//
// Compiles every (dp, tp, pp, ZeRO stage, schedule) of the device count and
// prints them fastest first by the predicted step time (passes/Planner.h);
// the first line is the mesh to give tessel-compile or tessel-run.
//
//===----------------------------------------------------------------------===//

#include "passes/Pipelines.h"
#include "passes/Planner.h"
#include "tools/ModelFile.h"
#include "tools/ToolStack.h"
#include "tools/TrainingFlags.h"

#include "passes/TrainSettings.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/ToolOutputFile.h"

#include <cmath>

using namespace mlir;
namespace cl = llvm::cl;

namespace {

cl::OptionCategory planCategory("Plan");
cl::OptionCategory trainCategory(
    "Training (every candidate's; --recompute fixes the policy, which is "
    "otherwise searched where a candidate is over memory)");
// One flag per training setting (--optimizer, --lr, ...), made in main.
std::unique_ptr<tessel::tools::TrainingFlags> trainingFlags;

cl::opt<std::string> inputFile(cl::Positional, cl::desc("<model.mlir>"),
                               cl::Required, cl::cat(planCategory));
cl::opt<int64_t> devices("devices", cl::desc("Devices to split the model over"),
                         cl::Required, cl::cat(planCategory));
cl::opt<int64_t> nodes("nodes",
                       cl::desc("Nodes the devices are in, devices / nodes "
                                "each (default 1)"),
                       cl::init(1), cl::cat(planCategory));
cl::opt<std::string>
    device("device", cl::desc("The device model: h100 (default) or h200"),
           cl::init("h100"), cl::cat(planCategory));
cl::opt<double> memoryGib("memory-gib",
                          cl::desc("Memory per device in GiB (default: the "
                                   "device's)"),
                          cl::cat(planCategory));
cl::opt<double> efficiency(
    "efficiency",
    cl::desc("Fraction of the peak flops the kernels reach (default 0.5)"),
    cl::init(0.5), cl::cat(planCategory));
cl::opt<int64_t> microbatches(
    "microbatches",
    cl::desc("Microbatches per step, for every candidate (default: the "
             "device count)"),
    cl::init(0), cl::cat(planCategory));
cl::opt<std::string> precision("precision",
                               cl::desc("f32 (default), bf16 or f64"),
                               cl::init("f32"), cl::cat(planCategory));

cl::opt<bool> sequenceParallel(
    "sequence-parallel",
    cl::desc("Every tp candidate with sequence parallelism (default: each "
             "with and without)"),
    cl::cat(planCategory));
cl::opt<unsigned> top("top",
                      cl::desc("Candidates that fit to list (default 10)"),
                      cl::init(10), cl::cat(planCategory));
cl::opt<unsigned>
    jobs("jobs",
         cl::desc("Candidates compiled at once (default: one per hardware "
                  "thread; the ranking is the same at any count)"),
         cl::init(0), cl::cat(planCategory));
cl::opt<std::string> jsonFile("json",
                              cl::desc("Also write every candidate as JSON"),
                              cl::value_desc("file"), cl::cat(planCategory));

int exitWith(const llvm::Twine &message) {
  llvm::errs() << "tessel-plan: " << message << "\n";
  return 1;
}

int planModel() {
  if (std::string why = tessel::planner::refuseDevices(devices, nodes, device);
      !why.empty())
    return exitWith(why);
  std::optional<tessel::planner::DeviceModel> model =
      tessel::planner::deviceModel(device);
  if (memoryGib.getNumOccurrences() > 0) {
    if (!(memoryGib > 0) || !std::isfinite(memoryGib))
      return exitWith("--memory-gib must be a positive number");
    model->memoryBytes = memoryGib * 1024.0 * 1024.0 * 1024.0;
  }
  if (!(efficiency > 0 && efficiency <= 1))
    return exitWith("--efficiency must be in (0, 1]");
  if (microbatches < 0 || microbatches > 65536)
    return exitWith("--microbatches " + std::to_string(microbatches) +
                    ": expected 1 to 65536");
  if (precision != "f32" && precision != "bf16" && precision != "f64")
    return exitWith("--precision " + precision + ": expected f32, bf16 or f64");
  if (jobs > 1024)
    return exitWith("--jobs " + std::to_string(jobs) + ": expected 0 to 1024");
  if (!jsonFile.empty() && llvm::sys::fs::equivalent(jsonFile, inputFile))
    return exitWith("--json " + jsonFile +
                    " is the model file: refusing to "
                    "overwrite it");

  DialectRegistry registry;
  tessel::tools::insertCompilerDialects(registry);
  MLIRContext context(registry);
  context.printOpOnDiagnostic(false);
  context.loadAllAvailableDialects();
  // The model's errors are printed at their locations; the candidates'
  // are the planner's to collect.
  tessel::tools::ModelFile file(context);
  OwningOpRef<ModuleOp> module = file.parse(inputFile, "tessel-plan");
  if (!module)
    return 1;

  tessel::planner::Settings settings;
  settings.devices = devices;
  settings.nodes = nodes;
  settings.device = *model;
  settings.efficiency = efficiency;
  settings.microbatches =
      microbatches > 0 ? int64_t(microbatches) : int64_t(devices);
  settings.precision = precision;
  settings.source = inputFile;
  settings.jobs = jobs;
  // The training settings given (--optimizer, --freeze, a --recompute
  // policy that every candidate then keeps, ...) are every candidate's,
  // checked once here, at the model, rather than refused by each compile.
  tessel::CompilePipelineOptions given;
  trainingFlags->apply(given);
  tessel::TrainConfig config;
  if (failed(tessel::resolveTrainConfig(*module, given.givenTrainSettings(),
                                        config)))
    return 1;
  settings.configure = [](tessel::CompilePipelineOptions &options) {
    trainingFlags->apply(options);
    options.sequenceParallel = sequenceParallel;
  };
  std::vector<tessel::planner::Candidate> ranked =
      tessel::planner::plan(*module, settings);
  tessel::planner::printPlan(llvm::outs(), ranked, settings, top);
  if (!jsonFile.empty()) {
    std::error_code ec;
    llvm::ToolOutputFile out(jsonFile, ec, llvm::sys::fs::OF_Text);
    if (ec)
      return exitWith("cannot write " + jsonFile + ": " + ec.message());
    out.os() << llvm::json::Value(tessel::planner::planJson(ranked, settings))
             << "\n";
    out.keep();
  }
  bool anyFits = llvm::any_of(
      ranked, [](const auto &c) { return c.refused.empty() && c.fits; });
  return anyFits ? 0 : 1;
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  trainingFlags = std::make_unique<tessel::tools::TrainingFlags>(trainCategory);
  cl::HideUnrelatedOptions({&planCategory, &trainCategory});
  cl::ParseCommandLineOptions(
      argc, argv,
      "tessel-plan: rank the ways to split a model over N devices\n");
  return tessel::tools::runOnToolStack(planModel);
}
