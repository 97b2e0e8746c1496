//===- NNInterfaces.cpp - cost, sharding constraints and VJP interfaces ---===//

#include "dialect/NN/NNInterfaces.h"

#include "mlir/IR/Block.h"
#include "mlir/IR/Operation.h"
#include "mlir/IR/SymbolTable.h"

using namespace mlir;

#include "dialect/NN/NNInterfaces.cpp.inc"

namespace tessel::nn::detail {

int64_t elementBytes(Type type) {
  if (type.isIntOrFloat())
    return static_cast<int64_t>((type.getIntOrFloatBitWidth() + 7) / 8);
  return 0;
}

// Not ShapedType::getNumElements: it wraps past int64 (an assert only in
// debug builds of MLIR).
int64_t numElements(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor || !tensor.hasStaticShape())
    return 0;
  int64_t elements = 1;
  for (int64_t size : tensor.getShape())
    elements = satMul(elements, size);
  return elements;
}

int64_t tensorBytes(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  return tensor ? satMul(numElements(tensor),
                         elementBytes(tensor.getElementType()))
                : 0;
}

int64_t operandAndResultBytes(Operation *op) {
  int64_t bytes = 0;
  for (Type type : op->getOperandTypes())
    bytes = satAdd(bytes, tensorBytes(type));
  for (Type type : op->getResultTypes())
    bytes = satAdd(bytes, tensorBytes(type));
  return bytes;
}

LogicalResult verifyCountsFit(Operation *op) {
  auto tooBig = [&](const char *what, unsigned index, Type type) {
    return op->emitOpError() << what << " #" << index << " of type " << type
                             << " has a byte size that does not fit in int64";
  };
  for (auto [index, type] : llvm::enumerate(op->getOperandTypes()))
    if (tensorBytes(type) == kCountOverflow)
      return tooBig("operand", index, type);
  for (auto [index, type] : llvm::enumerate(op->getResultTypes()))
    if (tensorBytes(type) == kCountOverflow)
      return tooBig("result", index, type);
  // An op whose cost is another function's (nn.repeat) is costed only
  // after its symbol uses verify (a recursive layer would recurse here);
  // its saturated product is refused where costs are summed.
  if (isa<SymbolUserOpInterface>(op))
    return success();
  auto cost = cast<tessel::nn::CostOpInterface>(op);
  if (cost.getFlops() == kCountOverflow)
    return op->emitOpError() << "flop count does not fit in int64";
  if (cost.getBytesAccessed() == kCountOverflow)
    return op->emitOpError()
           << "bytes accessed (operands plus results) do not fit in int64";
  return success();
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
      summary.flops = detail::satAdd(summary.flops, cost.getFlops());
      summary.bytes = detail::satAdd(summary.bytes, cost.getBytesAccessed());
      ++summary.numOps;
    }
  return summary;
}
