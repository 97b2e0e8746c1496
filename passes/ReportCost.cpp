//===- ReportCost.cpp - tessel-report-cost: flops and bytes per op --------===//

#include "passes/Passes.h"

#include "dialect/NN/NNOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Matchers.h"

namespace tessel {
#define GEN_PASS_DEF_REPORTCOSTPASS
#include "passes/Passes.h.inc"
} // namespace tessel

using namespace mlir;
using namespace tessel;

namespace {

/// Ops that do no work of their own: terminators and constants.
bool isFree(Operation *op) {
  return op->hasTrait<OpTrait::IsTerminator>() ||
         op->hasTrait<OpTrait::ConstantLike>();
}

struct ReportCostPass : public tessel::impl::ReportCostPassBase<ReportCostPass> {
  using Base::Base;

  void runOnOperation() override {
    WalkResult result = getOperation().walk([&](func::FuncOp func) {
      if (func.isExternal())
        return WalkResult::advance();
      for (Operation &op : func.getBody().getOps()) {
        auto cost = dyn_cast<nn::CostOpInterface>(op);
        if (!cost) {
          if (isFree(&op))
            continue;
          op.emitOpError() << "has no cost model; inline calls (-inline) and "
                              "express the model in nn ops before costing it";
          return WalkResult::interrupt();
        }
        if (perOp)
          op.emitRemark() << "flops " << cost.getFlops() << ", bytes "
                          << cost.getBytesAccessed();
      }
      nn::CostSummary total = nn::sumCost(func.getBody().front());
      func.emitRemark() << "function @" << func.getSymName() << ": "
                        << total.numOps << " ops, flops " << total.flops
                        << ", bytes " << total.bytes;
      return WalkResult::advance();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace
