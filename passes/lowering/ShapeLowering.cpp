//===- ShapeLowering.cpp - views and data movement ------------------------===//
//
// A reshape is a view (no call), and so is a slice or a broadcast the
// memory plan made one (tessel.view); the others are tessel_strided_copy with
// the strides that read (or write) the right elements (none for a concat's
// input the memory plan computed in place).
//
//===----------------------------------------------------------------------===//

#include "passes/lowering/FunctionLowering.h"

#include "passes/MemoryPlan.h"
#include "passes/Views.h"

using namespace mlir;

namespace tessel::lowering {
namespace {

LogicalResult lowerReshape(nn::ReshapeOp op, FunctionLowering &fl) {
  fl.pointers[op.getResult()] = fl.pointers.lookup(op.getInput());
  return success();
}

LogicalResult lowerBroadcast(nn::BroadcastOp op, FunctionLowering &fl) {
  if (op->hasAttr(memory_plan::kViewAttr)) {
    // The memory plan made it a view: its readers, binary ops, read the
    // input where it lies (tessel_binary_broadcast).
    if (!views::broadcastPairing(op))
      return op.emitOpError()
             << "is planned as a view ('" << memory_plan::kViewAttr
             << "') but does not broadcast along rows or columns";
    if (!views::readOnlyByBinaryOps(op))
      return op.emitOpError()
             << "is planned as a view ('" << memory_plan::kViewAttr
             << "') but is read by an op other than a binary op";
    fl.pointers[op.getResult()] = fl.ptr(op.getInput());
    return success();
  }
  ArrayRef<int64_t> outShape = op.getType().getShape();
  ArrayRef<int64_t> inShape = op.getInput().getType().getShape();
  SmallVector<int64_t> inContiguous = contiguousStrides(inShape);
  SmallVector<int64_t> inStrides(outShape.size(), 0);
  for (auto [i, dim] : llvm::enumerate(op.getDims()))
    if (inShape[i] == outShape[dim])
      inStrides[dim] = inContiguous[i];
  fl.stridedCopy(op.getResult(), fl.ptr(op.getInput()), fl.ptr(op.getResult()),
                 outShape, inStrides, contiguousStrides(outShape));
  return success();
}

LogicalResult lowerTranspose(nn::TransposeOp op, FunctionLowering &fl) {
  SmallVector<int64_t> inContiguous =
      contiguousStrides(op.getInput().getType().getShape());
  SmallVector<int64_t> inStrides;
  for (int64_t dim : op.getPerm())
    inStrides.push_back(inContiguous[dim]);
  ArrayRef<int64_t> outShape = op.getType().getShape();
  fl.stridedCopy(op.getResult(), fl.ptr(op.getInput()), fl.ptr(op.getResult()),
                 outShape, inStrides, contiguousStrides(outShape));
  return success();
}

LogicalResult lowerSlice(nn::SliceOp op, FunctionLowering &fl) {
  int64_t elementBytes =
      nn::detail::elementBytes(op.getType().getElementType());
  if (op->hasAttr(memory_plan::kViewAttr)) {
    // The memory plan made it a view: its window's bytes of the input.
    std::optional<int64_t> start = views::contiguousSliceStart(op);
    if (!start)
      return op.emitOpError()
             << "is planned as a view ('" << memory_plan::kViewAttr
             << "') but its window is not contiguous";
    fl.pointers[op.getResult()] =
        fl.offset(fl.ptr(op.getInput()), *start * elementBytes);
    return success();
  }
  StridedWindow window = stridedWindow(op.getInput().getType().getShape(),
                                       op.getStart(), op.getStridesOrOnes());
  ArrayRef<int64_t> outShape = op.getType().getShape();
  fl.stridedCopy(op.getResult(),
                 fl.offset(fl.ptr(op.getInput()), window.first * elementBytes),
                 fl.ptr(op.getResult()), outShape, window.strides,
                 contiguousStrides(outShape));
  return success();
}

/// A copy per input, but of none the memory plan computed in place (its
/// producer wrote it where the concat puts it).
LogicalResult lowerConcat(nn::ConcatOp op, FunctionLowering &fl) {
  ArrayRef<int64_t> outShape = op.getType().getShape();
  SmallVector<int64_t> outStrides = contiguousStrides(outShape);
  int64_t dim = op.getDim(), position = 0;
  int64_t elementBytes =
      nn::detail::elementBytes(op.getType().getElementType());
  auto inPlace =
      op->getAttrOfType<DenseBoolArrayAttr>(memory_plan::kInPlaceInputsAttr);
  if (inPlace && inPlace.size() != static_cast<int64_t>(op.getNumOperands()))
    return op.emitOpError()
           << "has " << inPlace.size() << " in-place flags for "
           << op.getNumOperands() << " inputs";
  for (auto [i, input] : llvm::enumerate(op.getInputs())) {
    ArrayRef<int64_t> shape = tensorType(input).getShape();
    if (!inPlace || !inPlace[i])
      fl.stridedCopy(op.getResult(), fl.ptr(input),
                     fl.offset(fl.ptr(op.getResult()),
                               position * outStrides[dim] * elementBytes),
                     shape, contiguousStrides(shape), outStrides);
    position += shape[dim];
  }
  return success();
}

} // namespace

void addShapeLowerings(LoweringRegistry &registry) {
  registry.add<nn::ReshapeOp>(lowerReshape);
  registry.add<nn::BroadcastOp>(lowerBroadcast);
  registry.add<nn::TransposeOp>(lowerTranspose);
  registry.add<nn::SliceOp>(lowerSlice);
  registry.add<nn::ConcatOp>(lowerConcat);
}

} // namespace tessel::lowering
