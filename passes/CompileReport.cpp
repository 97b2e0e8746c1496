//===- CompileReport.cpp - What tessel-compile --report says about a model ===//

#include "passes/CompileReport.h"
#include "passes/Communication.h"
#include "passes/PipelineReport.h"

#include "dialect/NN/NNDialect.h"
#include "dialect/NN/NNInterfaces.h"
#include "dialect/NN/NNOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "llvm/Support/Format.h"

#include <algorithm>

using namespace mlir;
using namespace tessel;

namespace {

/// The flops of every function of the planned module, before lowering.
llvm::json::Object costReport(ModuleOp module) {
  llvm::json::Object perFunction;
  for (auto func : module.getOps<func::FuncOp>())
    if (!func.isExternal())
      // A helper's symbol may be any bytes; a JSON key must be UTF-8.
      perFunction[llvm::json::fixUTF8(func.getSymName())] =
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

/// Bytes of the bf16 copies of the parameters tessel-mixed-precision casts
/// each step (every float parameter, at its local shape; a repeat's layers
/// each cast their slice): what mixed precision adds to the f32 master
/// weights, gradients and state.
int64_t weightCopyBytes(ModuleOp module) {
  int64_t bytes = 0;
  for (auto func : module.getOps<func::FuncOp>()) {
    if (func.isExternal() ||
        func->hasAttr(tessel::nn::NNDialect::kEntryAttrName) ||
        !tessel::nn::NNDialect::isModelFunction(func))
      continue;
    for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i)
      if (func.getArgAttr(i, tessel::nn::NNDialect::kParamAttrName))
        bytes += tessel::nn::detail::tensorBytes(func.getArgumentTypes()[i]) / 2;
  }
  return bytes;
}

} // namespace

llvm::json::Object tessel::planReport(ModuleOp module) {
  llvm::json::Object report;
  report["flops"] = costReport(module);
  report["kept_activation_bytes"] = keptActivationBytes(module);
  if (auto train = module->getAttrOfType<DictionaryAttr>(
          nn::NNDialect::kTrainAttrName))
    if (auto policy = train.getAs<StringAttr>("recompute"))
      report["recompute"] = policy.getValue().str();
  if (auto precision = module->getAttrOfType<StringAttr>(
          nn::NNDialect::kPrecisionAttrName)) {
    report["precision"] = precision.str();
    report["weight_copy_bytes"] = weightCopyBytes(module);
  }
  return report;
}

/// The model's description, read back from the lowered module: the same
/// numbers the launcher will read from the .so.
std::optional<llvm::json::Value> tessel::modelDescription(ModuleOp module) {
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

namespace {

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

} // namespace

/// The report's "communication": per entry and collective the calls, the
/// payload bytes (what the runtime's counters show) and the bytes a rank
/// sends with the ring algorithms; and one step's total: backward + update
/// with one microbatch (forward for an evaluation-only model).
std::optional<llvm::json::Object>
tessel::communicationReport(const llvm::json::Object &description) {
  const llvm::json::Object *meshJson = description.getObject("mesh");
  const llvm::json::Object *collectives = description.getObject("collectives");
  if (!meshJson || !collectives)
    return std::nullopt;
  tessel::Mesh mesh;
  if (const llvm::json::Array *axes = meshJson->getArray("axes"))
    for (const llvm::json::Value &axis : *axes)
      mesh.axes.push_back(axis.getAsString().value_or("").str());
  if (const llvm::json::Array *shape = meshJson->getArray("shape"))
    for (const llvm::json::Value &size : *shape)
      mesh.shape.push_back(size.getAsInteger().value_or(1));
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
      {"mesh", mesh.toString()},
      {"collectives", std::move(rows)},
      {"step", llvm::json::Object{{"entries", std::move(stepNames)},
                                  {"calls", stepCalls},
                                  {"bytes", stepBytes},
                                  {"ring_bytes", stepRing}}}};
}

void tessel::printCommunication(llvm::raw_ostream &os,
                                const llvm::json::Object &communication,
                                StringRef title) {
  os << "  " << title << " (mesh "
     << communication.getString("mesh").value_or("") << ")\n";
  os << llvm::format("    %-9s %-15s %-9s %8s %16s %16s\n", "entry",
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
      os << llvm::format(
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
  os << llvm::format(
      "    %-35s %8lld %16lld %16lld\n", label.c_str(),
      (long long)step.getInteger("calls").value_or(0),
      (long long)step.getInteger("bytes").value_or(0),
      (long long)step.getInteger("ring_bytes").value_or(0));
}

void tessel::printHumanReport(llvm::raw_ostream &os,
                              const llvm::json::Object &report) {
  if (report.getObject("pipeline"))
    return printPipelineReport(os, report);
  os << "model " << *report.getString("source") << " (@"
               << *report.getString("function") << ")\n";
  if (const llvm::json::Object *flops = report.getObject("flops"))
    for (const auto &[name, value] : *flops)
      os << llvm::format("  flops of @%-20s %16lld\n",
                                   name.str().c_str(),
                                   (long long)*value.getAsInteger());
  if (std::optional<int64_t> kept = report.getInteger("kept_activation_bytes");
      kept && *kept > 0)
    os << llvm::format(
        "  %-29s %16lld bytes (recompute %s)\n", "layer activations kept",
        (long long)*kept,
        report.getString("recompute").value_or("none").str().c_str());
  if (std::optional<int64_t> copies = report.getInteger("weight_copy_bytes"))
    os << llvm::format("  %-29s %16lld bytes (in scratch; params, grads "
                       "and states stay f32)\n",
                       (report.getString("precision")->str() +
                        " weight copies").c_str(),
                       (long long)*copies);
  os << llvm::format("  %-29s %16lld bytes\n", "arena (one rank)",
                               (long long)*report.getInteger("arena_bytes"));
  if (const llvm::json::Object *regions = report.getObject("regions"))
    for (StringRef name :
         {"params", "grads", "states", "inputs", "control", "outputs", "scratch"})
      if (const llvm::json::Object *region = regions->getObject(name);
          region && *region->getInteger("bytes") > 0)
        os << llvm::format("    %-27s %16lld bytes at %lld\n",
                                     name.str().c_str(),
                                     (long long)*region->getInteger("bytes"),
                                     (long long)*region->getInteger("offset"));
  if (const llvm::json::Object *communication =
          report.getObject("communication"))
    printCommunication(os, *communication);
}
