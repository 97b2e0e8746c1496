//===- WaitOp.cpp - nn.wait: where an asynchronous collective completes ---===//

#include "dialect/NN/NNOps.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"

using namespace mlir;
using namespace tessel;
using namespace tessel::nn;

int64_t WaitOp::getFlops() { return 0; }

int64_t WaitOp::getBytesAccessed() { return 0; }

LogicalResult WaitOp::verify() {
  Operation *collective = getInput().getDefiningOp();
  if (!collective || !collective->hasAttr(NNDialect::kAsyncAttrName))
    return emitOpError() << "waits on a value that no asynchronous collective "
                            "(a shard collective marked '"
                         << NNDialect::kAsyncAttrName << "') produces";
  if (collective->getBlock() != (*this)->getBlock() ||
      !collective->isBeforeInBlock(*this))
    return emitOpError() << "must follow its collective in the same block";
  return success();
}
