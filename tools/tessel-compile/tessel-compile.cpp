//===- tessel-compile.cpp - AOT compiler: nn model to a native .so --------===//
//
// Assembles the pipeline of Tessel passes and upstream conversions, then
// LLVM's code generator and the system linker:
//
//   parse + verify → tessel-autodiff → (with --mesh) tessel-propagate-sharding
//   → tessel-partition → canonicalize, cse → tessel-plan-memory
//   → tessel-lower-to-runtime → scf/arith/cf to LLVM → LLVM IR (O2)
//   → object (host target, PIC) → cc -shared … -ltessel_runtime → MODEL.so
//
//===----------------------------------------------------------------------===//

#include "dialect/NN/NNDialect.h"
#include "dialect/NN/NNOps.h"
#include "passes/Communication.h"
#include "passes/Passes.h"

#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
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
#include "mlir/Transforms/Passes.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FileUtilities.h"
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

using namespace mlir;
namespace cl = llvm::cl;

namespace {

enum class Emit { Mlir, Llvm, Obj, So };

cl::opt<std::string> inputFile(cl::Positional, cl::desc("<model.mlir>"),
                               cl::Required);
cl::opt<std::string> outputFile("o", cl::desc("Output file"),
                                cl::value_desc("file"), cl::init(""));
cl::opt<Emit> emitKind(
    "emit", cl::desc("What to write"), cl::init(Emit::So),
    cl::values(clEnumValN(Emit::Mlir, "mlir", "LLVM-dialect MLIR"),
               clEnumValN(Emit::Llvm, "llvm", "LLVM IR"),
               clEnumValN(Emit::Obj, "obj", "an object file"),
               clEnumValN(Emit::So, "so", "a shared object (default)")));
cl::opt<bool> printReport("report",
                          cl::desc("Print flops and the memory layout"));
cl::opt<std::string> reportJson("report-json",
                                cl::desc("Write the report as JSON to FILE"),
                                cl::value_desc("file"), cl::init(""));

// Training: the options of tessel-autodiff (unset ones fall back to the
// module's nn.train dictionary, then to PyTorch's AdamW defaults).
cl::OptionCategory trainCategory("Training step (tessel-autodiff)");
cl::opt<bool> noTrain("no-train",
                      cl::desc("Compile only the evaluation entry (no "
                               "backward, no optimizer)"),
                      cl::cat(trainCategory));
cl::opt<std::string> optimizerName("optimizer", cl::desc("sgd, adam or adamw"),
                                   cl::init(""), cl::cat(trainCategory));
cl::opt<double> learningRate("lr", cl::desc("Peak learning rate"),
                             cl::init(-1), cl::cat(trainCategory));
cl::opt<double> beta1("beta1", cl::desc("Adam beta1"), cl::init(-1),
                      cl::cat(trainCategory));
cl::opt<double> beta2("beta2", cl::desc("Adam beta2"), cl::init(-1),
                      cl::cat(trainCategory));
cl::opt<double> adamEps("eps", cl::desc("Adam epsilon"), cl::init(-1),
                        cl::cat(trainCategory));
cl::opt<double> weightDecay("weight-decay", cl::desc("Weight decay"),
                            cl::init(-1), cl::cat(trainCategory));
cl::opt<double> momentum("momentum", cl::desc("SGD momentum"), cl::init(-1),
                         cl::cat(trainCategory));
cl::opt<bool> nesterov("nesterov", cl::desc("SGD with Nesterov momentum"),
                       cl::cat(trainCategory));
cl::opt<std::string> schedule("schedule",
                              cl::desc("constant or warmup-cosine"),
                              cl::init(""), cl::cat(trainCategory));
cl::opt<int64_t> warmupSteps("warmup", cl::desc("Linear warm-up steps"),
                             cl::init(-1), cl::cat(trainCategory));
cl::opt<double> minLr("min-lr", cl::desc("Learning rate after the decay"),
                      cl::init(-1), cl::cat(trainCategory));
cl::opt<int64_t> totalSteps("total-steps",
                            cl::desc("Steps of the run (end of the decay)"),
                            cl::init(-1), cl::cat(trainCategory));
cl::opt<double> clipNorm("clip", cl::desc("Global gradient-norm clipping"),
                         cl::init(-1), cl::cat(trainCategory));
cl::opt<std::string> recompute("recompute",
                               cl::desc("Activation recomputation of repeated "
                                        "layers: none, selective or full"),
                               cl::init(""), cl::cat(trainCategory));

// Parallelism: the device mesh and how the step is split over it
// (tessel-propagate-sharding, tessel-partition; docs/parallelism.md).
cl::OptionCategory meshCategory("Parallelism (tessel-propagate-sharding, "
                                "tessel-partition)");
cl::opt<std::string>
    meshSpec("mesh",
             cl::desc("Device mesh, e.g. dp=2,tp=2 (row-major, "
                      "last axis fastest)"),
             cl::init(""), cl::cat(meshCategory));
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

/// The flops of every function of the planned module, before lowering.
llvm::json::Object costReport(ModuleOp module) {
  llvm::json::Object perFunction;
  for (auto func : module.getOps<func::FuncOp>())
    if (!func.isExternal())
      perFunction[func.getSymName()] =
          tessel::nn::sumCost(func.getBody().front()).flops;
  return perFunction;
}

/// Bytes of the activations the backward entry keeps from its forward for
/// the repeated layers' derivatives (the stacks the recompute policy
/// decides); 0 for a model that is not trained.
int64_t keptActivationBytes(ModuleOp module) {
  int64_t bytes = 0;
  for (auto func : module.getOps<func::FuncOp>()) {
    auto entry = func->getAttrOfType<StringAttr>(
        tessel::nn::NNDialect::kEntryAttrName);
    if (!entry || entry.getValue() != "backward")
      continue;
    func.walk([&](tessel::nn::RepeatOp repeat) {
      if (!repeat.getReverse())
        for (Value stacked : repeat.getStackedResults())
          bytes += tessel::nn::detail::tensorBytes(stacked.getType());
    });
  }
  return bytes;
}

/// The model's description, read back from the lowered module: the same
/// numbers the launcher will read from the .so.
std::optional<llvm::json::Value> modelDescription(ModuleOp module) {
  auto global = module.lookupSymbol<LLVM::GlobalOp>("__tessel_model_json");
  if (!global)
    return std::nullopt;
  auto text = dyn_cast_or_null<StringAttr>(global.getValueOrNull());
  if (!text)
    return std::nullopt;
  llvm::Expected<llvm::json::Value> parsed =
      llvm::json::parse(text.getValue().rtrim(StringRef("\0", 1)));
  if (!parsed) {
    llvm::consumeError(parsed.takeError());
    return std::nullopt;
  }
  return std::move(*parsed);
}

/// Checks the parallelism flags before any work: --mesh parses (names
/// distinct identifiers, sizes positive), --rules is logical=mesh entries,
/// --bucket-mb is not negative, and the others come with --mesh.
LogicalResult checkMeshFlags() {
  bool hasMesh = meshSpec.getNumOccurrences() > 0;
  if (!hasMesh) {
    for (const cl::Option *flag : std::initializer_list<const cl::Option *>{
             &shardingRules, &sequenceParallel, &localBatchnorm, &bucketMb})
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
  if (!tessel::Mesh::parse(meshSpec, error))
    return fail("--mesh " + meshSpec + ": " + error);
  if (shardingRules.getNumOccurrences() > 0 &&
      !tessel::parseRules(shardingRules, error))
    return fail("--rules: " + error);
  if (bucketMb.getNumOccurrences() > 0 && !(bucketMb >= 0))
    return fail("--bucket-mb " + llvm::formatv("{0}", bucketMb.getValue()) +
                ": the bucket size must be >= 0 MiB (0: one all-reduce per "
                "gradient)");
  return success();
}

/// The bytes one rank sends for one entry of the description's
/// "collectives" with the ring algorithms, on `mesh` (the description's
/// "mesh").
int64_t ringBytesOf(const llvm::json::Object &collective,
                    const tessel::Mesh &mesh) {
  SmallVector<int16_t> axes;
  if (const llvm::json::Array *names = collective.getArray("axes"))
    for (const llvm::json::Value &name : *names)
      if (std::optional<int16_t> axis =
              mesh.axisIndex(name.getAsString().value_or("")))
        axes.push_back(*axis);
  std::optional<tessel::communication::Collective> kind =
      tessel::communication::parseCollective(
          collective.getString("kind").value_or(""));
  if (!kind)
    return 0;
  return tessel::communication::ringWireBytes(
      *kind, collective.getInteger("bytes").value_or(0), mesh.groupSize(axes));
}

/// "dp=2,tp=2".
std::string meshText(const tessel::Mesh &mesh) {
  std::string text;
  for (auto [name, size] : llvm::zip(mesh.names, mesh.sizes))
    text += (text.empty() ? "" : ",") + name + "=" + std::to_string(size);
  return text;
}

/// The report's "communication": per entry and collective the calls, the
/// payload bytes (what the runtime's counters show) and the bytes a rank
/// sends with the ring algorithms; and one step's total: backward + update
/// with one microbatch (forward for an evaluation-only model).
std::optional<llvm::json::Object>
communicationReport(const llvm::json::Object &description) {
  const llvm::json::Object *meshJson = description.getObject("mesh");
  const llvm::json::Object *collectives = description.getObject("collectives");
  if (!meshJson || !collectives)
    return std::nullopt;
  tessel::Mesh mesh;
  if (const llvm::json::Array *axes = meshJson->getArray("axes"))
    for (const llvm::json::Value &axis : *axes)
      mesh.names.push_back(axis.getAsString().value_or("").str());
  if (const llvm::json::Array *shape = meshJson->getArray("shape"))
    for (const llvm::json::Value &size : *shape)
      mesh.sizes.push_back(size.getAsInteger().value_or(1));
  bool trained = collectives->getArray("backward") != nullptr;
  SmallVector<StringRef> stepEntries =
      trained ? SmallVector<StringRef>{"backward", "update"}
              : SmallVector<StringRef>{"forward"};
  llvm::json::Array rows;
  int64_t stepCalls = 0, stepBytes = 0, stepRing = 0;
  for (StringRef entry : {"forward", "backward", "update"}) {
    const llvm::json::Array *list = collectives->getArray(entry);
    if (!list)
      continue;
    for (const llvm::json::Value &value : *list) {
      const llvm::json::Object *collective = value.getAsObject();
      if (!collective)
        continue;
      int64_t calls = collective->getInteger("calls").value_or(0);
      int64_t bytes = collective->getInteger("bytes").value_or(0);
      int64_t ring = ringBytesOf(*collective, mesh);
      if (llvm::is_contained(stepEntries, entry)) {
        stepCalls += calls;
        stepBytes += bytes;
        stepRing += ring;
      }
      llvm::json::Array axes;
      if (const llvm::json::Array *names = collective->getArray("axes"))
        axes = *names;
      rows.push_back(llvm::json::Object{
          {"entry", entry.str()},
          {"kind", collective->getString("kind").value_or("").str()},
          {"axes", std::move(axes)},
          {"calls", calls},
          {"bytes", bytes},
          {"ring_bytes", ring}});
    }
  }
  llvm::json::Array stepNames;
  for (StringRef entry : stepEntries)
    stepNames.push_back(entry.str());
  return llvm::json::Object{
      {"mesh", meshText(mesh)},
      {"collectives", std::move(rows)},
      {"step", llvm::json::Object{{"entries", std::move(stepNames)},
                                  {"calls", stepCalls},
                                  {"bytes", stepBytes},
                                  {"ring_bytes", stepRing}}}};
}

void printCommunication(const llvm::json::Object &communication) {
  llvm::outs() << "  communication per rank (mesh "
               << communication.getString("mesh").value_or("") << ")\n";
  llvm::outs() << llvm::format("    %-9s %-15s %-9s %8s %16s %16s\n", "entry",
                               "collective", "axes", "calls", "bytes",
                               "ring bytes");
  auto joined = [](const llvm::json::Array *values) {
    std::string text;
    if (values)
      for (const llvm::json::Value &value : *values)
        text +=
            (text.empty() ? "" : ",") + value.getAsString().value_or("").str();
    return text;
  };
  if (const llvm::json::Array *rows = communication.getArray("collectives"))
    for (const llvm::json::Value &value : *rows) {
      const llvm::json::Object &row = *value.getAsObject();
      llvm::outs() << llvm::format(
          "    %-9s %-15s %-9s %8lld %16lld %16lld\n",
          row.getString("entry").value_or("").str().c_str(),
          row.getString("kind").value_or("").str().c_str(),
          joined(row.getArray("axes")).c_str(),
          (long long)row.getInteger("calls").value_or(0),
          (long long)row.getInteger("bytes").value_or(0),
          (long long)row.getInteger("ring_bytes").value_or(0));
    }
  const llvm::json::Object &step = *communication.getObject("step");
  std::string label = "step (" + joined(step.getArray("entries")) + ")";
  std::replace(label.begin(), label.end(), ',', '+');
  llvm::outs() << llvm::format(
      "    %-35s %8lld %16lld %16lld\n", label.c_str(),
      (long long)step.getInteger("calls").value_or(0),
      (long long)step.getInteger("bytes").value_or(0),
      (long long)step.getInteger("ring_bytes").value_or(0));
}

void printHumanReport(const llvm::json::Object &report) {
  llvm::outs() << "model " << *report.getString("source") << " (@"
               << *report.getString("function") << ")\n";
  if (const llvm::json::Object *flops = report.getObject("flops"))
    for (const auto &[name, value] : *flops)
      llvm::outs() << llvm::format("  flops of @%-20s %16lld\n",
                                   name.str().c_str(),
                                   (long long)*value.getAsInteger());
  if (std::optional<int64_t> kept = report.getInteger("kept_activation_bytes");
      kept && *kept > 0)
    llvm::outs() << llvm::format(
        "  %-29s %16lld bytes (recompute %s)\n", "layer activations kept",
        (long long)*kept,
        report.getString("recompute").value_or("none").str().c_str());
  llvm::outs() << llvm::format("  %-29s %16lld bytes\n", "arena (one rank)",
                               (long long)*report.getInteger("arena_bytes"));
  if (const llvm::json::Object *regions = report.getObject("regions"))
    for (StringRef name :
         {"params", "grads", "states", "inputs", "control", "outputs", "scratch"})
      if (const llvm::json::Object *region = regions->getObject(name);
          region && *region->getInteger("bytes") > 0)
        llvm::outs() << llvm::format("    %-27s %16lld bytes at %lld\n",
                                     name.str().c_str(),
                                     (long long)*region->getInteger("bytes"),
                                     (long long)*region->getInteger("offset"));
  if (const llvm::json::Object *communication =
          report.getObject("communication"))
    printCommunication(*communication);
}

LogicalResult runPipeline(ModuleOp module, llvm::json::Object &report) {
  MLIRContext *ctx = module.getContext();
  if (!noTrain) {
    tessel::AutodiffPassOptions options;
    options.optimizer = optimizerName;
    options.lr = learningRate;
    options.beta1 = beta1;
    options.beta2 = beta2;
    options.eps = adamEps;
    options.weightDecay = weightDecay;
    options.momentum = momentum;
    if (nesterov)
      options.nesterov = "true";
    options.schedule = schedule;
    options.warmup = warmupSteps;
    options.minLr = minLr;
    options.totalSteps = totalSteps;
    options.clip = clipNorm;
    options.recompute = recompute;
    PassManager train(ctx);
    train.addPass(tessel::createAutodiffPass(options));
    if (failed(train.run(module)))
      return failure();
  }
  PassManager plan(ctx);
  if (meshSpec.getNumOccurrences() > 0) {
    tessel::PropagateShardingPassOptions sharding;
    sharding.mesh = meshSpec;
    if (shardingRules.getNumOccurrences() > 0)
      sharding.rules = shardingRules;
    sharding.sequenceParallel = sequenceParallel;
    plan.addPass(tessel::createPropagateShardingPass(sharding));
    tessel::PartitionPassOptions partition;
    if (bucketMb.getNumOccurrences() > 0)
      partition.bucketMb = bucketMb;
    partition.localBatchnorm = localBatchnorm;
    plan.addPass(tessel::createPartitionPass(partition));
  }
  plan.addPass(createCanonicalizerPass());
  plan.addPass(createCSEPass());
  plan.addPass(tessel::createPlanMemoryPass());
  if (failed(plan.run(module)))
    return failure();
  report["flops"] = costReport(module);
  report["kept_activation_bytes"] = keptActivationBytes(module);
  if (auto train = module->getAttrOfType<DictionaryAttr>(
          tessel::nn::NNDialect::kTrainAttrName))
    if (auto policy = train.getAs<StringAttr>("recompute"))
      report["recompute"] = policy.getValue().str();

  PassManager lower(ctx);
  tessel::LowerToRuntimePassOptions options;
  options.sourceName = inputFile;
  lower.addPass(tessel::createLowerToRuntimePass(options));
  lower.addPass(createSCFToControlFlowPass());
  lower.addPass(createArithToLLVMConversionPass());
  lower.addPass(createConvertControlFlowToLLVMPass());
  lower.addPass(createReconcileUnrealizedCastsPass());
  lower.addPass(createCanonicalizerPass());
  lower.addPass(createCSEPass());
  if (failed(lower.run(module)))
    return failure();
  std::optional<llvm::json::Value> description = modelDescription(module);
  if (!description || !description->getAsObject())
    return module.emitError()
           << "the module has no model function (a func.func whose arguments "
              "carry nn.param, nn.input or nn.label)";
  for (auto &[key, value] : *description->getAsObject())
    if (key != "tensors")
      report[key] = value;
  if (std::optional<llvm::json::Object> communication =
          communicationReport(*description->getAsObject()))
    report["communication"] = std::move(*communication);
  return success();
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

int compile(int argc, char **argv) {
  if (failed(checkMeshFlags()))
    return 1;
  DialectRegistry registry;
  registry.insert<tessel::nn::NNDialect, func::FuncDialect,
                  arith::ArithDialect, scf::SCFDialect, cf::ControlFlowDialect,
                  LLVM::LLVMDialect, shard::ShardDialect, tensor::TensorDialect>();
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  MLIRContext context(registry);
  // Diagnostics name the op and its location; a dump of the whole module
  // after each one would bury them.
  context.printOpOnDiagnostic(false);
  context.loadAllAvailableDialects();

  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> input = openInputFile(inputFile, &error);
  if (!input)
    return exitWith(inputFile + ": " + error);
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(std::move(input), llvm::SMLoc());
  SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sourceMgr, &context);
  if (!module)
    return 1;

  llvm::json::Object report;
  if (failed(runPipeline(*module, report)))
    return 1;
  if (printReport)
    printHumanReport(report);
  if (!reportJson.empty()) {
    std::error_code ec;
    llvm::raw_fd_ostream out(reportJson, ec);
    if (ec)
      return exitWith("cannot write " + reportJson + ": " + ec.message());
    out << llvm::json::Value(std::move(report)) << "\n";
  }

  std::string output = outputFile.empty() ? defaultOutput() : outputFile;
  if (emitKind == Emit::Mlir) {
    std::error_code ec;
    llvm::raw_fd_ostream out(output, ec);
    if (ec)
      return exitWith("cannot write " + output + ": " + ec.message());
    module->print(out);
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
  cl::ParseCommandLineOptions(
      argc, argv,
      "tessel-compile: compile an nn model ahead of time to a shared object\n");
  return compile(argc, argv);
}
