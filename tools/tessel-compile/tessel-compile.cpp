//===- tessel-compile.cpp - AOT compiler: nn model to a native .so --------===//
//
// The command line over the compile pipeline (passes/Pipelines.h, the same
// one tessel-opt runs as --tessel-pipeline), then LLVM's code generator and
// the system linker:
//
//   parse + verify → the plan pipeline (tessel-autodiff … tessel-plan-memory)
//   → report of the planned module → the lowering pipeline (runtime calls,
//   LLVM dialect) → LLVM IR (O2) → object (host target, PIC)
//   → cc -shared … -ltessel_runtime → MODEL.so
//
//===----------------------------------------------------------------------===//

#include "dialect/NN/NNDialect.h"
#include "passes/CompileReport.h"
#include "passes/Passes.h"
#include "passes/PipelineReport.h"
#include "passes/Pipelines.h"
#include "passes/Planner.h"
#include "runtime/config/Mesh.h"
#include "tools/ModelFile.h"
#include "tools/ToolStack.h"
#include "tools/TrainingFlags.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"

#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FileUtilities.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Host.h"

#include <algorithm>
#include <deque>
#include <memory>
#include <vector>

using namespace mlir;
namespace cl = llvm::cl;

namespace {

enum class Emit { Mlir, Llvm, Obj, So };

// --help shows these four groups and nothing of LLVM's own options.
cl::OptionCategory modelCategory("Model");
cl::OptionCategory trainCategory("Training step (tessel-autodiff)");
cl::OptionCategory meshCategory("Parallelism (tessel-propagate-sharding, "
                                "tessel-partition)");
cl::OptionCategory
    pipelineCategory("Pipeline parallelism (tessel-pipeline-split, "
                     "on a mesh with a pp axis)");
cl::OptionCategory outputCategory("Output");

cl::opt<std::string> inputFile(cl::Positional, cl::desc("<model.mlir>"),
                               cl::Required, cl::cat(modelCategory));

cl::opt<std::string> outputFile("o", cl::desc("Output file"),
                                cl::value_desc("file"), cl::init(""),
                                cl::cat(outputCategory));
cl::opt<Emit> emitKind(
    "emit", cl::desc("What to write"), cl::init(Emit::So),
    cl::values(clEnumValN(Emit::Mlir, "mlir", "LLVM-dialect MLIR"),
               clEnumValN(Emit::Llvm, "llvm", "LLVM IR"),
               clEnumValN(Emit::Obj, "obj", "an object file"),
               clEnumValN(Emit::So, "so", "a shared object (default)")),
    cl::cat(outputCategory));
cl::opt<bool> printReport("report",
                          cl::desc("Print flops, the memory layout and the "
                                   "communication per rank"),
                          cl::cat(outputCategory));
cl::opt<std::string> reportJson("report-json",
                                cl::desc("Write the report as JSON to FILE"),
                                cl::value_desc("file"), cl::init(""),
                                cl::cat(outputCategory));
cl::opt<std::string>
    dumpSchedule("dump-schedule",
                 cl::desc("Write the pipeline schedule's actions per rank as "
                          "JSON to FILE (needs a pp axis)"),
                 cl::value_desc("file"), cl::init(""), cl::cat(outputCategory));

// Training: --no-train, and one flag per setting of TrainSettings.def (made
// in main, from that list); unset ones fall back to the module's nn.train
// dictionary, then to PyTorch's AdamW defaults.
cl::opt<bool> noTrain("no-train",
                      cl::desc("Compile only the evaluation entry (no "
                               "backward, no optimizer)"),
                      cl::cat(trainCategory));

// Precision: the compute type of forward and backward (docs/precision.md).
cl::opt<std::string>
    precision("precision",
              cl::desc("Compute type: f32 (default); bf16 parameters, "
                       "forward and backward, with f32 master weights in "
                       "the optimizer state; or f64, every f32 tensor "
                       "widened (gradient checks, references)"),
              cl::value_desc("f32|bf16|f64"), cl::init("f32"),
              cl::cat(trainCategory));
cl::opt<std::string> gradPrecision(
    "grad-precision",
    cl::desc("With --precision bf16: the gradients' type, f32 (default: "
             "reduced and accumulated in f32) or bf16 (2 bytes each)"),
    cl::value_desc("f32|bf16"), cl::init("f32"), cl::cat(trainCategory));

// Kernels: fold the add after a matmul into the GEMM (docs/layout.md).
cl::opt<bool> noFuseEpilogues(
    "no-fuse-epilogues",
    cl::desc("Keep a matmul and the accumulate or bias add after it apart "
             "(tessel-fuse-epilogues folds them into one GEMM by default)"),
    cl::cat(trainCategory));
cl::opt<bool> noFuseResidualNorms(
    "no-fuse-residual-norms",
    cl::desc("Keep a residual add and the norm after it apart, and a norm's "
             "input gradient and the residual gradient's add (one pass over "
             "the rows each by default)"),
    cl::cat(trainCategory));
cl::opt<bool> noFuseBiasGrads(
    "no-fuse-bias-grads",
    cl::desc("Keep a bias gradient's sum apart from its weight gradient's "
             "GEMM (fused by default where the overlap of communication "
             "keeps every cover)"),
    cl::cat(trainCategory));

// Parallelism: the device mesh and how the step is split over it
// (docs/parallelism.md).
cl::opt<std::string>
    meshSpec("mesh",
             cl::desc("Device mesh, e.g. dp=2,tp=2 (row-major, "
                      "last axis fastest), or auto (with --devices)"),
             cl::init(""), cl::cat(meshCategory));
cl::opt<int64_t> planDevices(
    "devices",
    cl::desc("With --mesh auto: the devices to split the model over "
             "(tessel-plan's search picks the mesh, ZeRO stage and schedule)"),
    cl::value_desc("n"), cl::init(0), cl::cat(meshCategory));
cl::opt<int64_t> planNodes(
    "nodes",
    cl::desc("With --mesh auto: the nodes the devices are in (default 1)"),
    cl::value_desc("k"), cl::init(1), cl::cat(meshCategory));
cl::opt<std::string> planDevice(
    "device",
    cl::desc("With --mesh auto: the device model, h100 (default) or h200"),
    cl::init("h100"), cl::cat(meshCategory));
cl::opt<std::string>
    shardingRules("rules",
                  cl::desc("Logical axis to mesh axis rules in priority order, "
                           "e.g. batch=dp,mlp=tp (default: the pass's)"),
                  cl::init(""), cl::cat(meshCategory));
cl::opt<bool> sequenceParallel(
    "sequence-parallel",
    cl::desc("Split the sequence over tp outside the tensor-parallel regions"),
    cl::cat(meshCategory));
cl::opt<bool> localBatchnorm(
    "local-batchnorm",
    cl::desc("Batch norm keeps per-rank statistics (no SyncBatchNorm)"),
    cl::cat(meshCategory));
cl::opt<double> bucketMb("bucket-mb",
                         cl::desc("Gradient all-reduce bucket size in MiB (0: "
                                  "one all-reduce per gradient; default 25)"),
                         cl::init(-1), cl::cat(meshCategory));

// Sharded training state (docs/parallelism.md, "ZeRO").
cl::opt<int> zeroStage(
    "zero",
    cl::desc(
        "Shard the training state over dp and cp: 1 optimizer state, 2 and "
        "gradients, 3 and parameters (ZeRO/FSDP; default 0, none)"),
    cl::value_desc("0|1|2|3"), cl::init(0), cl::cat(meshCategory));
cl::opt<bool> noReshardAfterForward(
    "no-reshard-after-forward",
    cl::desc("--zero 3: keep the gathered parameters from the forward for the "
             "backward instead of gathering them again"),
    cl::cat(meshCategory));

cl::opt<int> overlapCollectives(
    "overlap",
    cl::desc("Collectives that overlap compute at once, per kind (computed, "
             "prefetched); 0: every collective blocks (default 2)"),
    cl::value_desc("n"), cl::init(2), cl::cat(meshCategory));

// Pipeline parallelism: only with a pp axis of more than one rank
// (docs/parallelism.md, "Pipeline parallelism").
cl::opt<std::string>
    stageLayers("stage-layers",
                cl::desc("Layers per pipeline stage, e.g. 3,4,4,3 (default: "
                         "balanced by the cost model's flops)"),
                cl::value_desc("n,n,..."), cl::init(""),
                cl::cat(pipelineCategory));
cl::opt<int64_t> microbatches(
    "microbatches",
    cl::desc("Microbatches per step, each of the model's batch (default: as "
             "many as pp ranks)"),
    cl::value_desc("m"), cl::init(0), cl::cat(pipelineCategory));
cl::opt<std::string>
    pipelineSchedule("pipeline-schedule",
                     cl::desc("Pipeline schedule (default 1f1b)"),
                     cl::value_desc("gpipe|1f1b|interleaved|zb-h1|zb-v|"
                                    "dualpipev"),
                     cl::init("1f1b"), cl::cat(pipelineCategory));
cl::opt<int64_t> virtualStages(
    "virtual-stages",
    cl::desc("Stages per pp rank, for the interleaved, zb-v and dualpipev "
             "schedules (default 2 there)"),
    cl::value_desc("v"), cl::init(1), cl::cat(pipelineCategory));
cl::opt<bool> stageRecompute(
    "stage-recompute",
    cl::desc("Recompute each stage's forward in its backward from the "
             "stage's input (GPipe's re-materialisation: one input per "
             "microbatch in flight) instead of keeping the forward's "
             "activations per microbatch (the default, as Megatron)"),
    cl::init(false), cl::cat(pipelineCategory));

/// One string flag per training setting, in TrainSettings.def's order (a
/// switch takes no value: --nesterov), and the names of their values in
/// --help ("sgd|adam|adamw"), which the flags refer to.
// One flag per training setting (--optimizer, --lr, ...), made in main.
std::unique_ptr<tessel::tools::TrainingFlags> trainingFlags;

/// Fails with "tessel-compile: <message>" on stderr.
LogicalResult fail(const llvm::Twine &message) {
  llvm::errs() << "tessel-compile: " << message << "\n";
  return failure();
}

/// Reports `message` and returns the tool's failure exit code.
int exitWith(const llvm::Twine &message) {
  (void)fail(message);
  return 1;
}

/// Checks the parallelism flags before any work: --mesh parses (names
/// distinct identifiers, sizes positive), --rules is logical=mesh entries,
/// --bucket-mb is not negative, and the others come with --mesh.
LogicalResult checkMeshFlags() {
  bool hasMesh = meshSpec.getNumOccurrences() > 0;
  if (!hasMesh) {
    for (const cl::Option *flag : std::initializer_list<const cl::Option *>{
             &shardingRules, &sequenceParallel, &localBatchnorm, &bucketMb,
             &zeroStage, &noReshardAfterForward})
      if (flag->getNumOccurrences() > 0)
        return fail(llvm::Twine("--") + flag->ArgStr +
                    " applies to a step split over a device mesh; give "
                    "--mesh too");
    return success();
  }
  // The passes' parsers, so that the tool and the passes agree.
  if (StringRef(meshSpec).trim().empty())
    return fail("--mesh: expected name=size entries, e.g. dp=2,tp=2");
  std::string error;
  std::optional<tessel::Mesh> mesh =
      tessel::Mesh::parse(meshSpec.getValue(), error);
  if (!mesh)
    return fail("--mesh " + meshSpec + ": " + error);
  if (zeroStage > 0 && !mesh->axisIndex("dp") && !mesh->axisIndex("cp"))
    return fail("--zero shards the training state over the dp and cp axes; "
                "--mesh " +
                meshSpec + " has neither");
  if (shardingRules.getNumOccurrences() > 0 &&
      !tessel::parseRules(shardingRules, error))
    return fail("--rules: " + error);
  if (zeroStage < 0 || zeroStage > 3)
    return fail("--zero " + llvm::Twine(zeroStage.getValue()) +
                ": expected a ZeRO stage 0, 1, 2 or 3");
  if (zeroStage > 0 && noTrain)
    return fail("--zero shards the training state; it does not apply with "
                "--no-train");
  if (noReshardAfterForward && zeroStage != 3)
    return fail("--no-reshard-after-forward applies to --zero 3 (only stage 3 "
                "shards the parameters)");
  if (bucketMb.getNumOccurrences() > 0 && !(bucketMb >= 0))
    return fail("--bucket-mb " + llvm::formatv("{0}", bucketMb.getValue()) +
                ": the bucket size must be >= 0 MiB (0: one all-reduce per "
                "gradient)");
  if (overlapCollectives < 0)
    return fail("--overlap " + llvm::Twine(overlapCollectives.getValue()) +
                ": expected 0 (every collective blocks) or more");
  return success();
}

/// The pipeline flags come with a mesh whose pp axis has more than one
/// rank (each one given without it is refused on a line of its own: the
/// model would compile as if they were not there), and the counts are
/// positive. Whether the stages and the schedule fit the model is
/// tessel-pipeline-split's to say, at the model's location.
LogicalResult checkPipelineFlags(bool pipelined) {
  const cl::Option *flags[] = {&stageLayers,      &microbatches,
                               &pipelineSchedule, &virtualStages,
                               &stageRecompute,   &dumpSchedule};
  bool refused = false;
  if (!pipelined) {
    for (const cl::Option *flag : flags)
      if (flag->getNumOccurrences() > 0) {
        (void)fail(llvm::Twine("--") + flag->ArgStr +
                   " needs a mesh with a pp axis of more than one rank "
                   "(e.g. --mesh dp=2,pp=2)");
        refused = true;
      }
    return failure(refused);
  }
  if (microbatches.getNumOccurrences() > 0 && microbatches < 1)
    return fail("--microbatches " + llvm::Twine(microbatches) +
                ": a step runs at least one microbatch");
  if (virtualStages.getNumOccurrences() > 0 && virtualStages < 1)
    return fail("--virtual-stages " + llvm::Twine(virtualStages) +
                ": every pp rank holds at least one stage");
  return success();
}

/// setPipelineOptions below, forward-declared for checkSplitFlags.
void setPipelineOptions(tessel::CompilePipelineOptions &options);

/// The mesh and pipeline flags, as given or as --mesh auto set them.
LogicalResult checkSplitFlags() {
  if (failed(checkMeshFlags()))
    return failure();
  tessel::CompilePipelineOptions options;
  setPipelineOptions(options);
  return checkPipelineFlags(options.pipelined());
}

/// The pipeline's options from the command line but the split (the mesh,
/// ZeRO stage and pipeline flags): what --mesh auto's candidates share.
void setModelOptions(tessel::CompilePipelineOptions &options) {
  options.train = !noTrain;
  options.precision = precision;
  options.gradPrecision = gradPrecision;
  trainingFlags->apply(options);
  if (shardingRules.getNumOccurrences() > 0)
    options.rules = shardingRules;
  options.sequenceParallel = sequenceParallel;
  options.localBatchnorm = localBatchnorm;
  if (bucketMb.getNumOccurrences() > 0)
    options.bucketMb = bucketMb;
  options.reshardAfterForward = !noReshardAfterForward;
  options.overlap = overlapCollectives;
  options.fuseEpilogues = !noFuseEpilogues;
  options.fuseBiasGrads = !noFuseBiasGrads;
  options.fuseResidualNorms = !noFuseResidualNorms;
  options.stageRecompute = stageRecompute;
  options.source = inputFile;
}

/// The pipeline's options from the command line.
void setPipelineOptions(tessel::CompilePipelineOptions &options) {
  setModelOptions(options);
  if (meshSpec.getNumOccurrences() > 0)
    options.mesh = meshSpec;
  options.zero = zeroStage;
  if (stageLayers.getNumOccurrences() > 0)
    options.stageLayers = stageLayers;
  if (microbatches.getNumOccurrences() > 0)
    options.microbatches = microbatches;
  if (pipelineSchedule.getNumOccurrences() > 0)
    options.pipelineSchedule = pipelineSchedule;
  if (virtualStages.getNumOccurrences() > 0)
    options.virtualStages = virtualStages;
}

/// --mesh auto: --devices is given and the device known, and none of the
/// flags the search chooses (the ZeRO stage, the schedule and its stages)
/// is; a training step (the search ranks steps).
LogicalResult checkAutoMeshFlags() {
  if (planDevices.getNumOccurrences() == 0)
    return fail("--mesh auto needs --devices N: the devices to split the "
                "model over");
  if (std::string why =
          tessel::planner::refuseDevices(planDevices, planNodes, planDevice);
      !why.empty())
    return fail(why);
  for (const cl::Option *flag : std::initializer_list<const cl::Option *>{
           &zeroStage, &noReshardAfterForward, &pipelineSchedule,
           &virtualStages, &stageLayers})
    if (flag->getNumOccurrences() > 0)
      return fail(llvm::Twine("--") + flag->ArgStr +
                  " is what --mesh auto chooses; give --mesh to set it");
  if (noTrain)
    return fail("--mesh auto ranks training steps; it does not apply with "
                "--no-train");
  if (microbatches.getNumOccurrences() > 0 && microbatches < 1)
    return fail("--microbatches " + llvm::Twine(microbatches) +
                ": a step runs at least one microbatch");
  return success();
}

/// --mesh auto: ranks the splits of `module` over --devices (tessel-plan's
/// search, with this command line's other options) and sets the flags of
/// the fastest that fits (sequence parallelism and a recompute policy too,
/// unless the command line sets them), as if they had been given, saying
/// which on stderr. Its microbatches (--microbatches, default the device count)
/// are the schedule's with pp; without, they are tessel-run's to give.
LogicalResult chooseMesh(ModuleOp module) {
  tessel::planner::Settings settings;
  settings.devices = planDevices;
  settings.nodes = planNodes;
  settings.device = *tessel::planner::deviceModel(planDevice);
  settings.microbatches = microbatches.getNumOccurrences() > 0
                              ? int64_t(microbatches)
                              : int64_t(planDevices);
  settings.precision = precision;
  settings.source = inputFile;
  settings.configure = setModelOptions;
  std::vector<tessel::planner::Candidate> ranked =
      tessel::planner::plan(module, settings);
  const tessel::planner::Candidate *best = tessel::planner::best(ranked);
  if (!best &&
      llvm::all_of(ranked, [](const auto &c) { return !c.refused.empty(); }))
    return fail("--mesh auto: the compiler refused every split of the model "
                "over " +
                llvm::Twine(planDevices) + " devices; the first: " +
                StringRef(ranked.front().refused).split('\n').first);
  if (!best)
    return fail("--mesh auto: no split of the model over " +
                llvm::Twine(planDevices) + " x " + planDevice +
                " fits in its memory (tessel-plan " + inputFile +
                " --devices " + llvm::Twine(planDevices) + " lists them)");
  std::string flags =
      best->ranks() > 1 ? "--mesh " + best->mesh() : std::string("one device");
  if (best->zero > 0)
    flags += " --zero " + std::to_string(best->zero);
  if (best->pp > 1)
    flags += " --pipeline-schedule " + best->schedule + " --microbatches " +
             std::to_string(settings.microbatches);
  if (best->sequenceParallel && !sequenceParallel)
    flags += " --sequence-parallel";
  if (!best->recompute.empty())
    flags += " --recompute " + best->recompute;
  if (best->stageRecompute && !stageRecompute)
    flags += " --stage-recompute";
  llvm::errs() << "tessel-compile: --mesh auto on " << planDevices << " x "
               << planDevice << ": " << flags << " (predicted step "
               << llvm::format("%.4g", best->stepSeconds * 1e3)
               << " ms; tessel-plan ranks all " << ranked.size() << ")\n";
  if (best->ranks() == 1)
    meshSpec.reset();
  else
    meshSpec.setValue(best->mesh());
  zeroStage.setValue(int(best->zero));
  sequenceParallel.setValue(best->sequenceParallel);
  if (!best->recompute.empty()) {
    cl::opt<std::string> &recompute = (*trainingFlags)["recompute"];
    recompute.addOccurrence(0, recompute.ArgStr, best->recompute);
  }
  if (best->pp > 1) {
    if (microbatches.getNumOccurrences() == 0)
      microbatches.addOccurrence(0, "microbatches",
                                 std::to_string(settings.microbatches));
    pipelineSchedule.addOccurrence(0, "pipeline-schedule", best->schedule);
    if (best->schedule == "interleaved")
      virtualStages.addOccurrence(0, "virtual-stages", "2");
    stageRecompute.setValue(best->stageRecompute || stageRecompute);
  } else {
    // Pipeline settings of a split without one: M is tessel-run's.
    microbatches.reset();
    stageRecompute.reset();
  }
  return success();
}

/// The compile pipeline on `module`, with the report.
LogicalResult runPipeline(ModuleOp module, llvm::json::Object &report,
                          std::optional<std::string> &schedule) {
  tessel::CompilePipelineOptions options;
  setPipelineOptions(options);
  return tessel::compileWithReport(module, options, report, &schedule);
}

std::unique_ptr<llvm::TargetMachine> hostTargetMachine() {
  std::string triple = llvm::sys::getDefaultTargetTriple();
  std::string error;
  const llvm::Target *target =
      llvm::TargetRegistry::lookupTarget(llvm::Triple(triple), error);
  if (!target) {
    (void)fail("no LLVM target for " + triple + ": " + error);
    return nullptr;
  }
  llvm::TargetOptions options;
  return std::unique_ptr<llvm::TargetMachine>(target->createTargetMachine(
      llvm::Triple(triple), llvm::sys::getHostCPUName(), "", options,
      llvm::Reloc::PIC_));
}

LogicalResult writeObject(llvm::Module &module, llvm::TargetMachine &machine,
                          StringRef path) {
  std::error_code ec;
  llvm::ToolOutputFile out(path, ec, llvm::sys::fs::OF_None);
  if (ec)
    return fail("cannot write " + path + ": " + ec.message());
  llvm::legacy::PassManager codegen;
  if (machine.addPassesToEmitFile(codegen, out.os(), nullptr,
                                  llvm::CodeGenFileType::ObjectFile))
    return fail("the host target cannot emit object files");
  codegen.run(module);
  out.keep();
  return success();
}

/// The directory that holds libtessel_runtime.so: ../lib next to bin/.
std::string runtimeLibraryDir(const char *argv0) {
  std::string exe = llvm::sys::fs::getMainExecutable(
      argv0, reinterpret_cast<void *>(&runtimeLibraryDir));
  llvm::SmallString<256> dir(llvm::sys::path::parent_path(exe));
  llvm::sys::path::append(dir, "..", "lib");
  llvm::SmallString<256> real;
  if (!llvm::sys::fs::real_path(dir, real))
    return std::string(real);
  return std::string(dir);
}

LogicalResult linkSharedObject(StringRef object, StringRef output,
                               const char *argv0) {
  std::string libDir = runtimeLibraryDir(argv0);
  llvm::SmallString<256> library(libDir);
  llvm::sys::path::append(library, "libtessel_runtime.so");
  if (!llvm::sys::fs::exists(library))
    return fail("cannot find the runtime library " + library);
  llvm::ErrorOr<std::string> cc = llvm::sys::findProgramByName("cc");
  if (!cc)
    return fail("cannot find the system linker driver 'cc' (install gcc)");
  std::string rpath = "-Wl,-rpath," + libDir;
  std::string libFlag = "-L" + libDir;
  SmallVector<StringRef> args{*cc,    "-shared",  "-o",
                              output, object,     libFlag,
                              "-ltessel_runtime", rpath};
  std::string error;
  int status = llvm::sys::ExecuteAndWait(*cc, args, std::nullopt, {}, 0, 0,
                                         &error);
  if (status != 0)
    return fail("linking " + output + " failed" +
                (error.empty() ? "" : ": " + error));
  return success();
}

std::string defaultOutput() {
  llvm::SmallString<256> path(inputFile.getValue());
  llvm::sys::path::replace_extension(
      path, emitKind == Emit::So    ? "so"
            : emitKind == Emit::Obj ? "o"
            : emitKind == Emit::Llvm ? "ll"
                                     : "llvm.mlir");
  return std::string(path);
}

/// Whether `a` and `b` name one file: the same inode when both exist (so a
/// symlink or a hard link is caught), else the same canonical path.
bool sameFile(StringRef a, StringRef b) {
  bool result = false;
  if (!llvm::sys::fs::equivalent(a, b, result))
    return result;
  llvm::SmallString<256> realA, realB;
  auto canonical = [](StringRef path, llvm::SmallString<256> &out) {
    // A missing file: its directory's real path and its own name.
    llvm::SmallString<256> dir(llvm::sys::path::parent_path(path));
    if (dir.empty())
      dir = ".";
    if (llvm::sys::fs::real_path(dir, out))
      out = dir;
    llvm::sys::path::append(out, llvm::sys::path::filename(path));
  };
  canonical(a, realA);
  canonical(b, realB);
  return realA == realB;
}

/// Refuses an output that names the input (or another output) before
/// anything is opened for writing: `-o x.mlir` would otherwise replace the
/// source with an ELF. "-" (stdin, stdout) is never a file.
LogicalResult checkOutputPaths(StringRef output) {
  std::vector<std::pair<std::string, std::string>> outputs = {
      {"-o", output.str()}};
  if (!reportJson.empty())
    outputs.push_back({"--report-json", reportJson});
  if (!dumpSchedule.empty())
    outputs.push_back({"--dump-schedule", dumpSchedule});
  for (size_t i = 0; i < outputs.size(); ++i) {
    const auto &[flag, path] = outputs[i];
    if (path == "-")
      continue;
    if (inputFile != "-" && sameFile(path, inputFile))
      return fail(flag + " '" + path + "' is the input file '" + inputFile +
                  "': refusing to overwrite it");
    for (size_t j = 0; j < i; ++j)
      if (sameFile(path, outputs[j].second))
        return fail(flag + " '" + path + "' is also the " + outputs[j].first +
                    " file");
  }
  return success();
}

int compile(int argc, char **argv) {
  if (precision != "f32" && precision != "bf16" && precision != "f64")
    return exitWith("--precision " + precision + ": expected f32, bf16 or f64");
  if (gradPrecision != "f32" && gradPrecision != "bf16")
    return exitWith("--grad-precision " + gradPrecision +
                    ": expected f32 or bf16");
  if (gradPrecision.getNumOccurrences() > 0 && precision != "bf16")
    return exitWith("--grad-precision applies to --precision bf16 (f32 "
                    "and f64 training keep gradients in their type)");
  bool autoMesh = meshSpec == "auto";
  if (autoMesh) {
    if (failed(checkAutoMeshFlags()))
      return 1;
  } else {
    for (const cl::Option *flag : std::initializer_list<const cl::Option *>{
             &planDevices, &planNodes, &planDevice})
      if (flag->getNumOccurrences() > 0)
        return exitWith(llvm::Twine("--") + flag->ArgStr +
                        " applies to --mesh auto");
    if (failed(checkSplitFlags()))
      return 1;
  }
  std::string output = outputFile.empty() ? defaultOutput() : outputFile;
  if (failed(checkOutputPaths(output)))
    return 1;
  DialectRegistry registry;
  tessel::tools::insertCompilerDialects(registry);
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  MLIRContext context(registry);
  // Diagnostics name the op and its location; a dump of the whole module
  // after each one would bury them.
  context.printOpOnDiagnostic(false);
  context.loadAllAvailableDialects();
  tessel::tools::ModelFile file(context);
  OwningOpRef<ModuleOp> module = file.parse(inputFile, "tessel-compile");
  if (!module)
    return 1;

  // The chosen split's flags pass the checks a given one does.
  if (autoMesh && (failed(chooseMesh(*module)) || failed(checkSplitFlags())))
    return 1;
  llvm::json::Object report;
  std::optional<std::string> schedule;
  if (failed(runPipeline(*module, report, schedule)))
    return 1;
  if (printReport)
    tessel::printHumanReport(llvm::outs(), report);
  if (!reportJson.empty()) {
    std::error_code ec;
    llvm::raw_fd_ostream out(reportJson, ec);
    if (ec)
      return exitWith("cannot write " + reportJson + ": " + ec.message());
    out << llvm::json::Value(std::move(report)) << "\n";
  }
  if (!dumpSchedule.empty()) {
    if (!schedule)
      return exitWith("--dump-schedule: the model was not split into "
                      "pipeline stages");
    std::error_code ec;
    llvm::raw_fd_ostream out(dumpSchedule, ec);
    if (ec)
      return exitWith("cannot write " + dumpSchedule + ": " + ec.message());
    out << *schedule << "\n";
  }

  if (emitKind == Emit::Mlir) {
    std::error_code ec;
    llvm::raw_fd_ostream out(output, ec);
    if (ec)
      return exitWith("cannot write " + output + ": " + ec.message());
    module->print(out);
    out << "\n"; // As tessel-opt ends its output.
    return 0;
  }

  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  std::unique_ptr<llvm::TargetMachine> machine = hostTargetMachine();
  if (!machine)
    return 1;
  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> llvmModule =
      translateModuleToLLVMIR(*module, llvmContext, inputFile);
  if (!llvmModule)
    return exitWith("translation to LLVM IR failed");
  llvmModule->setTargetTriple(machine->getTargetTriple());
  llvmModule->setDataLayout(machine->createDataLayout());
  if (llvm::Error err =
          makeOptimizingTransformer(/*optLevel=*/2, /*sizeLevel=*/0,
                                    machine.get())(llvmModule.get())) {
    llvm::errs() << "tessel-compile: optimisation failed: " << err << "\n";
    return 1;
  }

  if (emitKind == Emit::Llvm) {
    std::error_code ec;
    llvm::raw_fd_ostream out(output, ec);
    if (ec)
      return exitWith("cannot write " + output + ": " + ec.message());
    llvmModule->print(out, nullptr);
    return 0;
  }
  if (emitKind == Emit::Obj)
    return failed(writeObject(*llvmModule, *machine, output)) ? 1 : 0;

  llvm::SmallString<256> object;
  if (std::error_code ec =
          llvm::sys::fs::createTemporaryFile("tessel-model", "o", object))
    return exitWith("cannot create a temporary file: " + ec.message());
  llvm::FileRemover removeObject(object);
  if (failed(writeObject(*llvmModule, *machine, object)) ||
      failed(linkSharedObject(object, output, argv[0])))
    return 1;
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  trainingFlags = std::make_unique<tessel::tools::TrainingFlags>(trainCategory);
  cl::HideUnrelatedOptions({&modelCategory, &trainCategory, &meshCategory,
                            &pipelineCategory, &outputCategory});
  cl::ParseCommandLineOptions(
      argc, argv,
      "tessel-compile: compile an nn model ahead of time to a shared object\n");
  return tessel::tools::runOnToolStack([&] { return compile(argc, argv); });
}
