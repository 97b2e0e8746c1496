//===- ReportCommunication.cpp - tessel-report-communication --------------===//
//
// The communication table of tessel-compile --report, from tessel-opt: the
// figures come from the same functions (CompileReport.h), read on the same
// description the launcher reads from the .so.
//
//===----------------------------------------------------------------------===//

#include "passes/CompileReport.h"
#include "passes/Passes.h"

namespace tessel {
#define GEN_PASS_DEF_REPORTCOMMUNICATIONPASS
#include "passes/Passes.h.inc"
} // namespace tessel

using namespace mlir;

namespace {

struct ReportCommunicationPass
    : public tessel::impl::ReportCommunicationPassBase<
          ReportCommunicationPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::optional<llvm::json::Value> description =
        tessel::modelDescription(module);
    if (!description || !description->getAsObject()) {
      module.emitError() << "has no model description (__tessel_model_json); "
                            "run tessel-lower-to-runtime first";
      return signalPassFailure();
    }
    if (std::optional<llvm::json::Object> communication =
            tessel::communicationReport(*description->getAsObject()))
      tessel::printCommunication(llvm::outs(), *communication);
    markAllAnalysesPreserved();
  }
};

} // namespace
