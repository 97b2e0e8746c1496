//===- SplitUpdateNorm.cpp - tessel-split-update-norm: clipping on stages ===//
//
// Global-norm clipping scales every gradient by max_norm / ‖g‖, where ‖g‖
// runs over all the model's gradients. A pipeline stage's update sees only
// its own, so on a stage the norm's sum of squares moves out of the update
// into an entry of its own, `grad_norm`, that returns the stage's part
// (with its dp and tp all-reduces: tessel-partition and tessel-zero have
// already made it this rank's whole stage's). The launcher calls every
// stage's grad_norm after the step's microbatches and the tied gradients'
// sum, adds the stages' parts over the pipeline (an all-reduce over pp),
// and the update reads the total (`nn.grad_sum_squares`) where its clip
// scale read its own. Megatron does the same: each pipeline rank squares
// its gradients and one all-reduce over the model-parallel group adds them.
// A tied parameter's copies (nn.tied_copy) were left out of the sum by
// tessel-autodiff, so it counts once.
//
//===----------------------------------------------------------------------===//

#include "passes/BlockSlice.h"
#include "passes/NNAttributes.h"
#include "passes/Passes.h"

#include "dialect/NN/NNOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace tessel {
#define GEN_PASS_DEF_SPLITUPDATENORMPASS
#include "passes/Passes.h.inc"
} // namespace tessel

using namespace mlir;
using namespace tessel;

namespace {

/// Moves the sum of squares that `clip` reads out of `update` into
/// `<model>_grad_norm`.
LogicalResult splitNorm(ModuleOp module, func::FuncOp update,
                        nn::ClipScaleOp clip) {
  OpBuilder b(module.getContext());
  Block &block = update.getBody().front();
  Value squares = clip.getSumSquares();
  OpSet slice = sliceOf(block, squares);
  // The norm is computed elsewhere: it may read only the update's
  // arguments, through ops that write nothing but their results (shard's
  // collectives included).
  for (Operation *op : slice)
    if (op->getNumRegions() != 0 || isa<nn::OptimizerStepOp>(op) ||
        (!isMemoryEffectFree(op) &&
         op->getDialect()->getNamespace() != "shard"))
      return clip.emitOpError()
             << "reads a gradient sum of squares that '" << op->getName()
             << "' computes, which a pipeline stage's grad_norm entry cannot "
                "run apart from the update (it updates state, writes memory "
                "or holds regions)";

  // The arguments the slice reads, in the update's order.
  llvm::SetVector<unsigned> used;
  if (auto arg = dyn_cast<BlockArgument>(squares))
    used.insert(arg.getArgNumber());
  for (Operation *op : slice)
    for (Value operand : op->getOperands())
      if (auto arg = dyn_cast<BlockArgument>(operand);
          arg && arg.getOwner() == &block)
        used.insert(arg.getArgNumber());
  SmallVector<unsigned> args(used.begin(), used.end());
  llvm::sort(args);

  StringRef base = update.getSymName();
  base.consume_back("_update");
  SmallVector<Type> argTypes;
  SmallVector<DictionaryAttr> argAttrs;
  for (unsigned i : args) {
    argTypes.push_back(update.getArgumentTypes()[i]);
    DictionaryAttr dict = update.getArgAttrDict(i);
    argAttrs.push_back(dict ? dict : b.getDictionaryAttr({}));
  }
  b.setInsertionPointAfter(update);
  auto norm =
      func::FuncOp::create(b, clip.getLoc(), (base + "_grad_norm").str(),
                           b.getFunctionType(argTypes, {squares.getType()}));
  SymbolTable(module).insert(norm);
  copyNNAttributes(update, norm);
  norm->setAttr(nn::NNDialect::kEntryAttrName, b.getStringAttr("grad_norm"));
  norm.setAllArgAttrs(argAttrs);
  norm.setResultAttr(0, nn::NNDialect::kGradSumSquaresAttrName,
                     b.getUnitAttr());
  Block *entry = norm.addEntryBlock();
  IRMapping map;
  for (auto [k, i] : llvm::enumerate(args))
    map.map(block.getArgument(i), entry->getArgument(k));
  OpBuilder nb = OpBuilder::atBlockEnd(entry);
  for (Operation *op : slice)
    nb.clone(*op, map);
  func::ReturnOp::create(nb, clip.getLoc(), map.lookupOrDefault(squares));

  // The update reads the pipeline's total instead.
  unsigned total = update.getNumArguments();
  if (failed(update.insertArgument(
          total, squares.getType(),
          b.getDictionaryAttr(b.getNamedAttr(
              nn::NNDialect::kGradSumSquaresAttrName, b.getUnitAttr())),
          clip.getLoc())))
    return failure();
  clip.getSumSquaresMutable().assign(update.getArgument(total));
  for (Operation *op : llvm::reverse(slice))
    if (op->use_empty())
      op->erase();
  return success();
}

struct SplitUpdateNormPass
    : tessel::impl::SplitUpdateNormPassBase<SplitUpdateNormPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (!module->hasAttr(nn::NNDialect::kStageAttrName))
      return;
    func::FuncOp update;
    for (auto func : module.getOps<func::FuncOp>()) {
      auto entry =
          func->getAttrOfType<StringAttr>(nn::NNDialect::kEntryAttrName);
      if (entry && entry.getValue() == "grad_norm") {
        func.emitOpError() << "is already a 'grad_norm' entry; "
                              "tessel-split-update-norm runs once";
        return signalPassFailure();
      }
      if (entry && entry.getValue() == "update")
        update = func;
    }
    if (!update)
      return; // Evaluation only.
    SmallVector<nn::ClipScaleOp> clips(update.getOps<nn::ClipScaleOp>());
    if (clips.empty())
      return; // No clipping.
    if (clips.size() > 1) {
      clips[1].emitOpError()
          << "is a second clip scale of the stage's update; a pipeline "
             "stage clips by one norm (first at "
          << clips[0].getLoc() << ")";
      return signalPassFailure();
    }
    if (failed(splitNorm(module, update, clips[0])))
      return signalPassFailure();
  }
};

} // namespace
