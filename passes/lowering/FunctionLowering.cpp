//===- FunctionLowering.cpp - results' places, shared call arguments ------===//

#include "passes/lowering/FunctionLowering.h"

#include "passes/MemoryPlan.h"
#include "passes/RuntimeTypes.h"

#include "mlir/IR/TypeUtilities.h"
#include "llvm/Support/ErrorHandling.h"

#include <cmath>

using namespace mlir;

namespace tessel::lowering {

void LoweringRegistry::addOne(TypeID op, Lowering lowering) {
  if (!table.try_emplace(op, std::move(lowering)).second)
    llvm::report_fatal_error(
        "tessel-lower-to-runtime: an op has two lowerings");
}

const LoweringRegistry::Lowering *
LoweringRegistry::lookup(Operation *op) const {
  auto it = table.find(op->getName().getTypeID());
  return it == table.end() ? nullptr : &it->second;
}

LoweringRegistry buildLoweringRegistry() {
  LoweringRegistry registry;
  addElementwiseLowerings(registry);
  addShapeLowerings(registry);
  addContractionLowerings(registry);
  addNormAndLossLowerings(registry);
  addGradientLowerings(registry);
  addTrainingLowerings(registry);
  addCollectiveLowerings(registry);
  addRepeatLowering(registry);
  return registry;
}

SmallVector<int64_t> contiguousStrides(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> strides(shape.size(), 1);
  for (int64_t d = static_cast<int64_t>(shape.size()) - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * shape[d + 1];
  return strides;
}

int64_t product(ArrayRef<int64_t> sizes) {
  int64_t result = 1;
  for (int64_t size : sizes)
    result *= size;
  return result;
}

RankedTensorType tensorType(Value value) {
  return cast<RankedTensorType>(value.getType());
}

int64_t bytesOf(Value value) {
  return nn::detail::tensorBytes(value.getType());
}

bool isWidened(Value operand, Value result) {
  return getElementTypeOrSelf(result) != getElementTypeOrSelf(operand);
}

StridedWindow stridedWindow(ArrayRef<int64_t> shape, ArrayRef<int64_t> start,
                            ArrayRef<int64_t> steps) {
  StridedWindow window;
  for (auto [dim, stride] : llvm::enumerate(contiguousStrides(shape))) {
    window.strides.push_back(stride * steps[dim]);
    window.first += start[dim] * stride;
  }
  return window;
}

int32_t lossReduction(nn::LossReduction reduction) {
  return reduction == nn::LossReduction::mean  ? TESSEL_LOSS_MEAN
         : reduction == nn::LossReduction::sum ? TESSEL_LOSS_SUM
                                               : TESSEL_LOSS_NONE;
}

double optionOrZero(std::optional<APFloat> option) {
  return option ? option->convertToDouble() : 0.0;
}

LogicalResult FunctionLowering::lower(Operation *op,
                                      const LoweringRegistry &registry) {
  // Lowered with an earlier op, which placed its results too.
  if (lowered.contains(op))
    return success();
  loc = op->getLoc();
  // Results live at their planned offsets (a reshape is a view), those
  // inside a function result's memory at their sub-offsets there.
  if (auto offsets =
          op->getAttrOfType<DenseI64ArrayAttr>(memory_plan::kOffsetsAttr)) {
    auto subOffsets =
        op->getAttrOfType<DenseI64ArrayAttr>(memory_plan::kSubOffsetsAttr);
    int64_t results = op->getNumResults();
    if (offsets.size() != results ||
        (subOffsets && subOffsets.size() != results))
      return op->emitOpError()
             << "has a memory plan of " << offsets.size() << " offsets and "
             << (subOffsets ? subOffsets.size() : 0) << " sub-offsets for "
             << results << " results";
    for (auto [i, result] : llvm::enumerate(op->getResults())) {
      int64_t offset = offsets[i];
      if (offset >= 0) {
        pointers[result] = emit.offset(b, loc, scratch, offset);
      } else if (offset < memory_plan::kArgumentView) {
        Value out = outs[memory_plan::resultIndexOf(offset)];
        int64_t subOffset = subOffsets ? subOffsets[i] : 0;
        pointers[result] =
            subOffset ? emit.offset(b, loc, out, subOffset) : out;
      }
    }
  } else if (op->getNumResults() > 0) {
    return op->emitOpError() << "has no memory plan; run -tessel-plan-memory "
                                "first";
  }
  const LoweringRegistry::Lowering *lowering = registry.lookup(op);
  if (!lowering)
    return op->emitOpError() << "has no runtime lowering";
  return (*lowering)(op, *this);
}

I32Value FunctionLowering::dtype(Value tensor) {
  // nn tensors hold only element types the runtime stores (ODS checks).
  return i32(*runtimeDtype(tensorType(tensor).getElementType()));
}

I64Value FunctionLowering::count(Value tensor) {
  return i64(tensorType(tensor).getNumElements());
}

/// Whether `op` lies in a layer function (a private one: an nn.repeat's),
/// where the repeat sets the layer its per-layer tables are read by.
static LogicalResult checkInLayer(Operation *op) {
  auto func = op->getParentOfType<func::FuncOp>();
  if (func && func.isPrivate())
    return success();
  return op->emitOpError()
         << "has per-layer attributes (layer_windows, layer_thetas) outside "
            "a repeated layer: only an nn.repeat's layer function says "
            "which layer runs";
}

FailureOr<I64Value> FunctionLowering::layerEntry(Operation *op,
                                                 ArrayRef<int64_t> table) {
  if (failed(checkInLayer(op)))
    return failure();
  return emit.i64At(b, loc, table, call(rt::tessel_get_layer, {}));
}

FailureOr<F64Value> FunctionLowering::layerEntry(Operation *op,
                                                 ArrayRef<double> table) {
  if (failed(checkInLayer(op)))
    return failure();
  return emit.f64At(b, loc, table, call(rt::tessel_get_layer, {}));
}

FailureOr<SmallVector<F64Value>>
FunctionLowering::layerEntries(Operation *op, ArrayRef<double> table,
                               int64_t width) {
  if (failed(checkInLayer(op)))
    return failure();
  I64Value first = emit.mul(b, loc, call(rt::tessel_get_layer, {}), i64(width));
  SmallVector<F64Value> entries;
  for (int64_t k = 0; k < width; ++k)
    entries.push_back(
        emit.f64At(b, loc, table, emit.add(b, loc, first, i64(k))));
  return entries;
}

void FunctionLowering::stridedCopy(Value tensor, PtrValue in, PtrValue out,
                                   ArrayRef<int64_t> shape,
                                   ArrayRef<int64_t> inStrides,
                                   ArrayRef<int64_t> outStrides) {
  call(rt::tessel_strided_copy,
       {dtype(tensor), in, out, i32(static_cast<int32_t>(shape.size())),
        i64Array(shape), i64Array(inStrides), i64Array(outStrides)});
}

ViewAround FunctionLowering::viewAround(ArrayRef<int64_t> shape, int64_t dim) {
  return {i64(product(shape.take_front(dim))), i64(shape[dim]),
          i64(product(shape.drop_front(dim + 1)))};
}

RowsAndCols FunctionLowering::rowsAndCols(ArrayRef<int64_t> shape) {
  return {i64(product(shape.drop_back())), i64(shape.back())};
}

AttentionShape FunctionLowering::attentionShape(Value query, Value key,
                                                Value value,
                                                std::optional<APFloat> scale,
                                                bool causal) {
  ArrayRef<int64_t> q = tensorType(query).getShape();
  ArrayRef<int64_t> k = tensorType(key).getShape();
  ArrayRef<int64_t> v = tensorType(value).getShape();
  double scaleValue = scale ? scale->convertToDouble()
                            : 1.0 / std::sqrt(static_cast<double>(q[3]));
  return {i64(q[0]), i64(q[1]), i64(k[1]),       i64(q[2]),  i64(k[2]),
          i64(q[3]), i64(v[3]), f64(scaleValue), i32(causal)};
}

/// The runtime's mask of `op`'s block_axes; nullopt without them.
static FailureOr<std::optional<uint32_t>> blockMask(Operation *op) {
  auto axes = op->getAttrOfType<DenseI16ArrayAttr>("block_axes");
  if (!axes)
    return std::optional<uint32_t>();
  FailureOr<uint32_t> mask =
      FunctionLowering::gridAxesMask(op, axes.asArrayRef(), "block");
  if (failed(mask))
    return failure();
  return std::optional<uint32_t>(*mask);
}

FailureOr<RankBlock> FunctionLowering::blockOf(Operation *op, int64_t size) {
  FailureOr<std::optional<uint32_t>> mask = blockMask(op);
  if (failed(mask))
    return failure();
  if (!*mask) {
    // Size first: the constants' order of the lowering this one replaced.
    I64Value whole = i64(size);
    return RankBlock{i64(0), whole};
  }
  I32Value maskValue = i32(static_cast<int32_t>(**mask));
  I64Value index = call(rt::tessel_group_index, {maskValue});
  I64Value groupSize = call(rt::tessel_group_size, {maskValue});
  I64Value first = emit.mul(b, loc, index, i64(size));
  I64Value whole = emit.mul(b, loc, groupSize, i64(size));
  return RankBlock{first, whole};
}

FailureOr<I64Value> FunctionLowering::blockStart(Operation *op, int64_t size) {
  FailureOr<std::optional<uint32_t>> mask = blockMask(op);
  if (failed(mask))
    return failure();
  if (!*mask)
    return i64(0);
  I64Value index =
      call(rt::tessel_group_index, {i32(static_cast<int32_t>(**mask))});
  return emit.mul(b, loc, index, i64(size));
}

FailureOr<uint32_t> FunctionLowering::gridAxesMask(Operation *op,
                                                   ArrayRef<int16_t> axes,
                                                   StringRef kind) {
  uint32_t mask = 0;
  for (int16_t axis : axes) {
    if (axis < 0 || axis >= TESSEL_MAX_MESH_AXES)
      return op->emitOpError()
             << "has " << kind << " axis " << axis << " outside the runtime's "
             << TESSEL_MAX_MESH_AXES << " mesh axes";
    mask |= 1u << axis;
  }
  return mask;
}

} // namespace tessel::lowering
