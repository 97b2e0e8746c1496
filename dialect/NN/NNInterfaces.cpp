//===- NNInterfaces.cpp - cost, sharding constraints and VJP interfaces ---===//

#include "dialect/NN/NNInterfaces.h"

#include "mlir/IR/Block.h"
#include "mlir/IR/Operation.h"

using namespace mlir;

#include "dialect/NN/NNInterfaces.cpp.inc"

namespace tessel::nn::detail {

int64_t elementBytes(Type type) {
  if (type.isIntOrFloat())
    return static_cast<int64_t>((type.getIntOrFloatBitWidth() + 7) / 8);
  return 0;
}

int64_t numElements(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  return tensor && tensor.hasStaticShape() ? tensor.getNumElements() : 0;
}

int64_t tensorBytes(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  return tensor ? numElements(tensor) * elementBytes(tensor.getElementType())
                : 0;
}

int64_t operandAndResultBytes(Operation *op) {
  int64_t bytes = 0;
  for (Type type : op->getOperandTypes())
    bytes += tensorBytes(type);
  for (Type type : op->getResultTypes())
    bytes += tensorBytes(type);
  return bytes;
}

} // namespace tessel::nn::detail

llvm::SmallVector<int16_t>
tessel::nn::LocalSplit::axesOf(llvm::ArrayRef<int64_t> loops) const {
  llvm::SmallVector<int16_t> axes;
  for (int64_t loop : loops)
    if (loop >= 0 && loop < static_cast<int64_t>(loopAxes.size()))
      for (int16_t axis : loopAxes[loop])
        if (!llvm::is_contained(axes, axis))
          axes.push_back(axis);
  llvm::sort(axes);
  return axes;
}

tessel::nn::CostSummary tessel::nn::sumCost(Block &block) {
  CostSummary summary;
  for (Operation &op : block)
    if (auto cost = dyn_cast<CostOpInterface>(op)) {
      summary.flops += cost.getFlops();
      summary.bytes += cost.getBytesAccessed();
      ++summary.numOps;
    }
  return summary;
}
