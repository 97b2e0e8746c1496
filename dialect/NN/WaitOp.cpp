//===- WaitOp.cpp - nn.wait: where an asynchronous collective completes ---===//

#include "dialect/NN/NNOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"

using namespace mlir;
using namespace tessel;
using namespace tessel::nn;

int64_t WaitOp::getFlops() { return 0; }

int64_t WaitOp::getBytesAccessed() { return 0; }

/// A function argument that arrives in flight: a layer function's that its
/// repeat's prefetch starts, or any of a finish function's.
static bool isInFlightArgument(Value value) {
  auto arg = dyn_cast<BlockArgument>(value);
  if (!arg)
    return false;
  auto func = dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp());
  return func &&
         (func.getArgAttr(arg.getArgNumber(), NNDialect::kPrefetchedAttrName) ||
          func->hasAttr(NNDialect::kFinishAttrName));
}

LogicalResult WaitOp::verify() {
  if (isInFlightArgument(getInput()))
    return success();
  Operation *collective = getInput().getDefiningOp();
  if (!collective || !collective->hasAttr(NNDialect::kAsyncAttrName))
    return emitOpError() << "waits on a value that no asynchronous collective "
                            "(a shard collective marked '"
                         << NNDialect::kAsyncAttrName
                         << "'), prefetch (an argument marked '"
                         << NNDialect::kPrefetchedAttrName
                         << "') or layer (an argument of a function marked '"
                         << NNDialect::kFinishAttrName << "') produces";
  if (collective->getBlock() != (*this)->getBlock() ||
      !collective->isBeforeInBlock(*this))
    return emitOpError() << "must follow its collective in the same block";
  return success();
}
