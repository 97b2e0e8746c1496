//===- LinkStages.cpp - tessel-link-stages: one module for every stage ----===//
//
// Each pipeline stage was planned and lowered as a module of its own
// (tessel-pipeline-split); the shared object needs one. This pass moves the
// stages' LLVM-dialect symbols into the top module under per-stage names
// and writes the pipeline's description (docs/model-abi.md): the stages'
// own descriptions, the schedule's actions per rank and the tied
// parameters.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"
#include "passes/PipelinePlan.h"
#include "runtime/config/EntryKinds.h"
#include "runtime/config/PipelineSchedule.h"

#include "runtime/include/tessel/runtime.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/Support/JSON.h"

namespace tessel {
#define GEN_PASS_DEF_LINKSTAGESPASS
#include "passes/Passes.h.inc"
} // namespace tessel

using namespace mlir;
using namespace tessel;
namespace json = llvm::json;

namespace {

/// The ABI's entry points of one model (tessel_<kind>, and its
/// description), renamed per stage.
bool isEntrySymbol(StringRef name) {
  return name == "tessel_model_json" ||
         (name.consume_front("tessel_") && tessel::entries::isEntryKind(name));
}

struct LinkStagesPass : tessel::impl::LinkStagesPassBase<LinkStagesPass> {
  void runOnOperation() override {
    ModuleOp top = getOperation();
    FailureOr<std::optional<PipelinePlan>> plan = PipelinePlan::fromModule(top);
    if (failed(plan))
      return signalPassFailure();
    if (!*plan)
      return; // Not a pipeline: nothing to link.
    SmallVector<ModuleOp> stages(top.getOps<ModuleOp>());
    json::Array descriptions;
    SymbolTable topSymbols(top);
    for (auto [s, stage] : llvm::enumerate(stages)) {
      FailureOr<json::Value> description = describeStage(stage);
      if (failed(description))
        return signalPassFailure();
      descriptions.push_back(std::move(*description));
      if (failed(moveSymbols(top, topSymbols, stage, int64_t(s))))
        return signalPassFailure();
      stage.erase();
    }
    if (int64_t(descriptions.size()) != (*plan)->stages()) {
      top.emitError() << "the pipeline has " << (*plan)->stages()
                      << " stages but " << descriptions.size()
                      << " stage modules";
      return signalPassFailure();
    }
    emitDescription(top, **plan, std::move(descriptions));
  }

  /// The description stage `stage`'s lowering wrote.
  FailureOr<json::Value> describeStage(ModuleOp stage) {
    auto global = stage.lookupSymbol<LLVM::GlobalOp>("__tessel_model_json");
    auto text = global ? dyn_cast_or_null<StringAttr>(global.getValueOrNull())
                       : StringAttr();
    if (!text)
      return stage.emitError() << "stage has no lowered description: run "
                                  "tessel-lower-to-runtime on each stage first";
    llvm::Expected<json::Value> parsed =
        json::parse(text.getValue().rtrim(StringRef("\0", 1)));
    if (!parsed) {
      llvm::consumeError(parsed.takeError());
      return stage.emitError() << "stage's description is not JSON";
    }
    return std::move(*parsed);
  }

  /// Renames stage `s`'s symbols (entries to tessel_s<s>_..., the rest
  /// prefixed "s<s>.") and moves them into `top`; the runtime's
  /// declarations are kept once.
  LogicalResult moveSymbols(ModuleOp top, SymbolTable &topSymbols,
                            ModuleOp stage, int64_t s) {
    SymbolTable symbols(stage);
    for (Operation &op : llvm::make_early_inc_range(*stage.getBody())) {
      auto symbol = dyn_cast<SymbolOpInterface>(op);
      if (!symbol || !isa<LLVM::LLVMFuncOp, LLVM::GlobalOp>(op)) {
        op.erase(); // The mesh and what else only the passes needed.
        continue;
      }
      StringRef name = symbol.getName();
      auto func = dyn_cast<LLVM::LLVMFuncOp>(op);
      if (func && func.isExternal()) {
        // A runtime function: one declaration serves every stage.
        if (Operation *existing = topSymbols.lookup(name)) {
          auto other = dyn_cast<LLVM::LLVMFuncOp>(existing);
          if (!other || other.getFunctionType() != func.getFunctionType())
            return func.emitOpError()
                   << "declares '" << name
                   << "' unlike another stage; cannot link the stages";
          op.erase();
          continue;
        }
      } else {
        std::string renamed = isEntrySymbol(name)
                                  ? pipeline::stageEntrySymbol(s, name.str())
                                  : ("s" + Twine(s) + "." + name).str();
        if (failed(symbols.rename(&op, StringAttr::get(&getContext(), renamed))))
          return op.emitOpError() << "cannot be renamed for stage " << s;
      }
      op.moveBefore(top.getBody(), top.getBody()->end());
      topSymbols.insert(&op);
    }
    return success();
  }

  /// tessel_model_json() of the pipeline.
  void emitDescription(ModuleOp top, const PipelinePlan &plan,
                       json::Array stages) {
    json::Object tied;
    for (auto &[name, holders] : plan.tied)
      tied[name] = json::Array(holders);
    json::Object pipeline{{"axis", "pp"},
                          {"ranks", plan.ranks},
                          {"virtual_stages", plan.virtualStages},
                          {"microbatches", plan.microbatches},
                          {"schedule", plan.schedule},
                          {"layers", json::Array(plan.layers)},
                          {"flops", json::Array(plan.flops)},
                          {"tied", std::move(tied)}};
    // The actions the communication check simulated: the module's own
    // when it gives them, else the schedule's.
    std::string error;
    std::optional<pipeline::ScheduleKind> kind =
        pipeline::parseScheduleKind(plan.schedule);
    std::optional<std::vector<std::vector<pipeline::Action>>> rankActions =
        plan.rankActions(error);
    if (kind && rankActions) {
      pipeline::Schedule schedule{
          *kind,
          {int(plan.ranks), int(plan.microbatches), int(plan.virtualStages)},
          std::move(*rankActions)};
      if (llvm::Expected<json::Value> actions =
              json::parse(pipeline::scheduleJson(schedule)))
        pipeline["schedule_actions"] = std::move(*actions);
      else
        llvm::consumeError(actions.takeError());
    }
    json::Object description{{"abi_version", TESSEL_ABI_VERSION},
                             {"pipeline", std::move(pipeline)}};
    // What every stage shares: the source, the model and the mesh.
    if (!stages.empty())
      if (json::Object *first = stages.front().getAsObject())
        for (StringRef key : {"source", "function", "mesh"})
          if (const json::Value *value = first->get(key))
            description[key] = *value;
    description["stages"] = std::move(stages);

    std::string text;
    llvm::raw_string_ostream(text) << json::Value(std::move(description));
    text.push_back('\0');
    OpBuilder b(top.getContext());
    b.setInsertionPointToEnd(top.getBody());
    Location loc = top.getLoc();
    auto ptr = LLVM::LLVMPointerType::get(top.getContext());
    auto describeFn = LLVM::LLVMFuncOp::create(
        b, loc, "tessel_model_json", LLVM::LLVMFunctionType::get(ptr, {}));
    Block *entry = describeFn.addEntryBlock(b);
    b.setInsertionPointToStart(entry);
    Value global = LLVM::createGlobalString(loc, b, "__tessel_model_json", text,
                                            LLVM::Linkage::Private);
    LLVM::ReturnOp::create(b, loc, global);
    top->removeAttr(nn::NNDialect::kPipelineAttrName);
  }
};

} // namespace
