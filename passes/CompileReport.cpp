//===- CompileReport.cpp - What tessel-compile --report says about a model ===//

#include "passes/CompileReport.h"
#include "passes/Communication.h"
#include "passes/PipelineReport.h"
#include "passes/Sharding.h"

#include "dialect/NN/NNDialect.h"
#include "dialect/NN/NNInterfaces.h"
#include "dialect/NN/NNOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringSet.h"
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

/// Bytes of the activations the backward entry (or, on a stage that keeps
/// its activations, forward_keep) keeps from its forward for the repeated
/// layers' derivatives (the stacks the recompute policy decides); 0 for a
/// model that is not trained.
int64_t keptActivationBytes(ModuleOp module) {
  int64_t bytes = 0;
  for (auto func : module.getOps<func::FuncOp>()) {
    auto entry = func->getAttrOfType<StringAttr>(
        tessel::nn::NNDialect::kEntryAttrName);
    if (!entry ||
        !llvm::is_contained({"backward", "forward_keep"}, entry.getValue()))
      continue;
    func.walk([&](tessel::nn::RepeatOp repeat) {
      if (!repeat.getReverse())
        for (Value stacked : repeat.getStackedResults())
          bytes += tessel::nn::detail::tensorBytes(stacked.getType());
    });
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
    if (auto grads = module->getAttrOfType<StringAttr>(
            nn::NNDialect::kGradPrecisionAttrName))
      report["grad_precision"] = grads.str();
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
/// payload bytes (what the runtime's counters show), the bytes a rank
/// sends with the ring algorithms and the payload bytes that overlap
/// compute (started asynchronously: tessel_comm_async_bytes); and one
/// step's total: backward (a zero-bubble stage's backward_input and
/// backward_weight) + update (+ a clipping pipeline stage's grad_norm, + a
/// stage's forward_keep, which its backward no longer recomputes) with one
/// microbatch (forward for an evaluation-only model).
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
  // A zero-bubble stage runs its backward as backward_input and
  // backward_weight (the description lists both, or neither).
  bool split = collectives->getArray("backward_weight") != nullptr;
  SmallVector<StringRef> stepEntries =
      !trained ? SmallVector<StringRef>{"forward"}
      : split  ? SmallVector<StringRef>{"backward_input", "backward_weight",
                                        "update"}
               : SmallVector<StringRef>{"backward", "update"};
  // A clipping pipeline stage's part of the gradient norm.
  if (trained && collectives->getArray("grad_norm"))
    stepEntries.push_back("grad_norm");
  // A stage that keeps its activations runs its forward in training as
  // forward_keep, and its backward without it.
  if (trained && collectives->getArray("forward_keep"))
    stepEntries.insert(stepEntries.begin(), "forward_keep");
  llvm::json::Array rows;
  int64_t stepCalls = 0, stepBytes = 0, stepRing = 0, stepOverlapped = 0,
          stepStarted = 0;
  // Payload bytes per entry: a step of several microbatches' figures.
  llvm::StringMap<int64_t> entryBytes;
  // Every entry's rows (a zero-bubble stage runs backward_input and
  // backward_weight instead of the backward).
  for (StringRef entry :
       {"forward", "forward_keep", "backward", "backward_input",
        "backward_weight", "update", "grad_norm", "backward_no_sync",
        "backward_weight_no_sync", "reduce_grads"}) {
    const llvm::json::Array *list = collectives->getArray(entry);
    if (!list)
      continue;
    for (const llvm::json::Value &value : *list) {
      const llvm::json::Object *collective = value.getAsObject();
      if (!collective)
        continue;
      int64_t calls = collective->getInteger("calls").value_or(0);
      int64_t bytes = collective->getInteger("bytes").value_or(0);
      // Started early, and of those overlapping kernels (a description
      // before the split has only the first).
      int64_t started = collective->getInteger("async_bytes").value_or(0);
      int64_t overlapped =
          collective->getInteger("overlapped_bytes").value_or(started);
      int64_t ring = ringBytesOf(*collective, mesh);
      entryBytes[entry] += bytes;
      if (llvm::is_contained(stepEntries, entry)) {
        stepCalls += calls;
        stepBytes += bytes;
        stepRing += ring;
        stepOverlapped += overlapped;
        stepStarted += started;
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
          {"ring_bytes", ring},
          {"started_bytes", started},
          {"overlapped_bytes", overlapped}});
    }
  }
  llvm::json::Array stepNames;
  for (StringRef entry : stepEntries)
    stepNames.push_back(entry.str());
  llvm::json::Object report{
      {"mesh", mesh.toString()},
      {"collectives", std::move(rows)},
      {"step", llvm::json::Object{{"entries", std::move(stepNames)},
                                  {"calls", stepCalls},
                                  {"bytes", stepBytes},
                                  {"ring_bytes", stepRing},
                                  {"started_bytes", stepStarted},
                                  {"overlapped_bytes", stepOverlapped}}}};
  // M > 1 microbatches: each the backward without its gradient
  // reductions (a zero-bubble stage's two parts), then the gradients
  // reduced once, and the update.
  if (trained && collectives->getArray("reduce_grads")) {
    bool keeps = collectives->getArray("forward_keep") != nullptr;
    int64_t perMicrobatch = entryBytes["forward_keep"] +
                            (split ? entryBytes["backward_input"] +
                                         entryBytes["backward_weight_no_sync"]
                                   : entryBytes["backward_no_sync"]);
    std::string parts =
        std::string(keeps ? "forward_keep+" : "") +
        (split ? "backward_input+backward_weight_no_sync" : "backward_no_sync");
    report["microbatch_step"] = llvm::json::Object{
        {"per_microbatch", parts},
        {"per_microbatch_bytes", perMicrobatch},
        {"once_bytes", entryBytes["reduce_grads"] + entryBytes["update"]}};
  }
  return report;
}

/// Elements of a JSON shape.
static int64_t elementsOf(const llvm::json::Array *shape) {
  int64_t n = 1;
  if (shape)
    for (const llvm::json::Value &size : *shape)
      n *= size.getAsInteger().value_or(0);
  return n;
}

/// "4Ψ+12Ψ/N" from the bytes per parameter kept whole and sharded.
static std::string zeroFormula(int64_t whole, int64_t sharded) {
  std::string text;
  if (whole > 0)
    text = std::to_string(whole) + "Ψ";
  if (sharded > 0)
    text += (text.empty() ? "" : "+") + std::to_string(sharded) + "Ψ/N";
  return text.empty() ? "0" : text;
}

std::optional<llvm::json::Object>
tessel::trainingStateReport(const llvm::json::Object &description) {
  const llvm::json::Array *tensors = description.getArray("tensors");
  if (!tensors || !description.getObject("train"))
    return std::nullopt;
  int64_t stage = description.getInteger("zero_stage").value_or(0);
  // A chunk's group: the product of its axes' sizes (dp where it names
  // none). N, the formulas' divisor, is the largest: dp·cp, which every
  // parameter not split over cp shards over.
  llvm::StringMap<int64_t> axisSize;
  if (const llvm::json::Object *mesh = description.getObject("mesh"))
    if (const llvm::json::Array *axes = mesh->getArray("axes"))
      for (auto [i, axis] : llvm::enumerate(*axes))
        axisSize[axis.getAsString().value_or("")] =
            (*mesh->getArray("shape"))[i].getAsInteger().value_or(1);
  std::string zeroAxes = kDataAxisName.str();
  auto groupOf = [&](const llvm::json::Object &zero) {
    int64_t size = 1;
    std::string names;
    if (const llvm::json::Array *axes = zero.getArray("axes"))
      for (const llvm::json::Value &axis : *axes) {
        StringRef name = axis.getAsString().value_or("");
        size *= std::max<int64_t>(1, axisSize.lookup(name));
        names += (names.empty() ? "" : "·") + name.str();
      }
    return std::make_pair(size, names);
  };
  int64_t group = std::max<int64_t>(1, axisSize.lookup(kDataAxisName));
  if (const llvm::json::Array *tensors = description.getArray("tensors"))
    for (const llvm::json::Value &value : *tensors)
      if (const llvm::json::Object *zero =
              value.getAsObject()->getObject("zero")) {
        auto [size, names] = groupOf(*zero);
        if (size > group || (size == group && zeroAxes != names)) {
          group = size;
          zeroAxes = names;
        }
      }
  // Per role: bytes a rank holds, and bytes per parameter element. A
  // parameter's f32 master copy (mixed precision) is a state of its own
  // row, "master".
  llvm::StringMap<int64_t> bytes, perElement;
  int64_t parameters = 0;
  llvm::json::Array padded;
  llvm::StringSet<> paddedNames;
  for (const llvm::json::Value &value : *tensors) {
    const llvm::json::Object &t = *value.getAsObject();
    StringRef role = t.getString("role").value_or("");
    if (role != "param" && role != "grad" && role != "state")
      continue;
    if (role == "state" && t.getString("master_of"))
      role = "master";
    bytes[role] += t.getInteger("bytes").value_or(0);
    const llvm::json::Object *zero = t.getObject("zero");
    int64_t block = elementsOf(zero ? zero->getArray("block")
                                    : t.getArray("shape"));
    int64_t size = std::max<int64_t>(
        1, t.getInteger("bytes").value_or(0) /
               std::max<int64_t>(1, elementsOf(t.getArray("shape"))));
    if (role == "param" && t.getBoolean("trainable").value_or(true))
      parameters += block;
    if (role != "param" || t.getBoolean("trainable").value_or(true))
      perElement[role] = std::max(perElement[role], size);
    if (!zero)
      continue;
    // A padded chunk, named once by its parameter ("w.m" is w's state).
    std::string owner = t.getString("name").value_or("").str();
    if (role == "state" || role == "master")
      owner = owner.substr(0, owner.rfind('.'));
    int64_t dims = zero->getInteger("dims").value_or(0);
    int64_t inner = 1;
    if (const llvm::json::Array *shape = zero->getArray("block"))
      for (auto [d, size] : llvm::enumerate(*shape))
        if (static_cast<int64_t>(d) >= dims)
          inner *= size.getAsInteger().value_or(0);
    int64_t own = std::max<int64_t>(1, groupOf(*zero).first);
    int64_t chunk = (inner + own - 1) / own;
    if (chunk * own != inner && paddedNames.insert(owner).second)
      padded.push_back(llvm::json::Object{
          {"name", owner}, {"elements", inner}, {"padded", chunk * own}});
  }
  // Optimizer states (and master weights) per parameter: their bytes over
  // the parameter's.
  auto perParameter = [&](StringRef role) -> int64_t {
    return perElement.count(role) && parameters > 0
               ? bytes[role] * (stage >= 1 ? group : 1) / parameters
               : 0;
  };
  int64_t stateBytes = perParameter("state");
  int64_t masterBytes = perParameter("master");
  int64_t paramBytes = perElement.lookup("param");
  int64_t gradBytes = perElement.lookup("grad");
  llvm::json::Object report{{"zero_stage", stage},
                            {"dp", group},
                            {"zero_axes", zeroAxes},
                            {"parameters", parameters}};
  int64_t whole = 0, sharded = 0, total = 0;
  double formulaTotal = 0;
  for (auto [role, name, perParam, split] :
       {std::make_tuple("param", "params", paramBytes, stage >= 3),
        std::make_tuple("grad", "grads", gradBytes, stage >= 2),
        std::make_tuple("master", "master", masterBytes, stage >= 1),
        std::make_tuple("state", "states", stateBytes, stage >= 1)}) {
    if (StringRef(role) == "master" && masterBytes == 0)
      continue;
    (split ? sharded : whole) += perParam;
    double formula = double(perParam) * double(parameters) /
                     double(split ? group : 1);
    formulaTotal += formula;
    total += bytes.lookup(role);
    report[name] = llvm::json::Object{
        {"bytes", bytes.lookup(role)},
        {"formula", split ? std::to_string(perParam) + "Ψ/N"
                          : std::to_string(perParam) + "Ψ"},
        {"formula_bytes", formula}};
  }
  report["total"] = llvm::json::Object{{"bytes", total},
                                       {"formula", zeroFormula(whole, sharded)},
                                       {"formula_bytes", formulaTotal}};
  report["padded"] = std::move(padded);
  return report;
}

void tessel::printCommunication(llvm::raw_ostream &os,
                                const llvm::json::Object &communication,
                                StringRef title) {
  os << "  " << title << " (mesh "
     << communication.getString("mesh").value_or("") << ")\n";
  os << llvm::format("    %-9s %-15s %-9s %8s %16s %16s %16s\n", "entry",
                     "collective", "axes", "calls", "bytes", "ring bytes",
                     "overlapped");
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
          "    %-9s %-15s %-9s %8lld %16lld %16lld %16lld\n",
          row.getString("entry").value_or("").str().c_str(),
          row.getString("kind").value_or("").str().c_str(),
          joined(row.getArray("axes")).c_str(),
          (long long)row.getInteger("calls").value_or(0),
          (long long)row.getInteger("bytes").value_or(0),
          (long long)row.getInteger("ring_bytes").value_or(0),
          (long long)row.getInteger("overlapped_bytes").value_or(0));
    }
  const llvm::json::Object &step = *communication.getObject("step");
  std::string label = "step (" + joined(step.getArray("entries")) + ")";
  std::replace(label.begin(), label.end(), ',', '+');
  os << llvm::format(
      "    %-35s %8lld %16lld %16lld %16lld\n", label.c_str(),
      (long long)step.getInteger("calls").value_or(0),
      (long long)step.getInteger("bytes").value_or(0),
      (long long)step.getInteger("ring_bytes").value_or(0),
      (long long)step.getInteger("overlapped_bytes").value_or(0));
  if (const llvm::json::Object *several =
          communication.getObject("microbatch_step"))
    os << llvm::format(
        "    step of M > 1 microbatches: M x %lld (%s) + %lld "
        "(reduce_grads+update) bytes\n",
        (long long)several->getInteger("per_microbatch_bytes").value_or(0),
        several->getString("per_microbatch").value_or("").str().c_str(),
        (long long)several->getInteger("once_bytes").value_or(0));
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
  if (std::optional<StringRef> precision = report.getString("precision")) {
    if (*precision == "f64")
      os << "  precision f64: the model's f32 tensors computed in f64 "
            "(parameters, gradients and optimizer state f64)\n";
    else
      os << "  precision " << *precision << ": parameters " << *precision
         << ", f32 master weights in the optimizer state, gradients "
         << report.getString("grad_precision").value_or("f32") << "\n";
  }
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
  if (const llvm::json::Object *state = report.getObject("training_state")) {
    int64_t stage = state->getInteger("zero_stage").value_or(0);
    os << "  training state per rank ("
       << (stage > 0 ? "ZeRO-" + std::to_string(stage) + " over " +
                           state->getString("zero_axes").value_or("dp").str() +
                           "=" + std::to_string(*state->getInteger("dp"))
                     : std::string("not sharded"))
       << "; Ψ = " << *state->getInteger("parameters")
       << " parameters per rank before ZeRO)\n";
    for (StringRef name : {"params", "grads", "master", "states", "total"}) {
      const llvm::json::Object *found = state->getObject(name);
      if (!found)
        continue;
      const llvm::json::Object &row = *found;
      os << llvm::format("    %-14s %-12s %16lld bytes (formula %.1f)\n",
                         name.str().c_str(),
                         row.getString("formula")->str().c_str(),
                         (long long)*row.getInteger("bytes"),
                         *row.getNumber("formula_bytes"));
    }
    for (const llvm::json::Value &value : *state->getArray("padded")) {
      const llvm::json::Object &row = *value.getAsObject();
      os << "    padded for the shard: " << *row.getString("name") << " "
         << *row.getInteger("elements") << " -> "
         << *row.getInteger("padded") << " elements\n";
    }
  }
  if (const llvm::json::Object *communication =
          report.getObject("communication"))
    printCommunication(os, *communication);
}

LogicalResult tessel::compileWithReport(ModuleOp module,
                                        const CompilePipelineOptions &options,
                                        llvm::json::Object &report,
                                        std::optional<std::string> *schedule) {
  PassManager plan(module.getContext());
  buildPlanPipeline(plan, options);
  if (failed(plan.run(module)))
    return failure();
  // A pipeline's stages are modules nested in the top one; its report reads
  // each, and the description's "stages".
  std::optional<llvm::json::Object> pipeline = pipelinePlanReport(module);
  if (schedule)
    *schedule = pipelineScheduleJson(module);
  report = pipeline ? std::move(*pipeline) : planReport(module);

  PassManager lower(module.getContext());
  buildLowerPipeline(lower, options);
  if (failed(lower.run(module)))
    return failure();
  std::optional<llvm::json::Value> description = modelDescription(module);
  if (!description || !description->getAsObject())
    return module.emitError()
           << "the module has no model function (a func.func whose arguments "
              "carry nn.param, nn.input or nn.label)";
  if (report.getObject("pipeline")) {
    completePipelineReport(report, *description->getAsObject());
    return success();
  }
  for (auto &[key, value] : *description->getAsObject())
    if (key != "tensors")
      report[key] = value;
  if (std::optional<llvm::json::Object> state =
          trainingStateReport(*description->getAsObject()))
    report["training_state"] = std::move(*state);
  if (std::optional<llvm::json::Object> communication =
          communicationReport(*description->getAsObject()))
    report["communication"] = std::move(*communication);
  return success();
}
