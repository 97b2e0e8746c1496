//===- LowerToRuntime.cpp - tessel-lower-to-runtime: nn ops to C ABI calls ===//
//
// Each nn function becomes an llvm.func over pointers; each nn op one call of
// the runtime kernel that implements it (runtime/include/tessel/runtime.h).
// The model function also gets the ABI of docs/model-abi.md.
//
//===----------------------------------------------------------------------===//

#include "passes/Communication.h"
#include "passes/MemoryPlan.h"
#include "passes/Passes.h"
#include "passes/RuntimeTypes.h"

#include "dialect/NN/NNOps.h"
#include "runtime/include/tessel/runtime.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/JSON.h"

#include <cmath>

namespace tessel {
#define GEN_PASS_DEF_LOWERTORUNTIMEPASS
#include "passes/Passes.h.inc"
} // namespace tessel

using namespace mlir;
using namespace tessel;
using memory_plan::alignUp;

namespace {

constexpr llvm::StringLiteral kFunctionPrefix = "tessel_fn_";

StringRef dtypeName(Type type) {
  if (type.isF32())
    return "f32";
  if (type.isF16())
    return "f16";
  if (type.isBF16())
    return "bf16";
  if (type.isF64())
    return "f64";
  if (type.isSignlessInteger(32))
    return "i32";
  return "i64";
}

RankedTensorType tensorType(Value value) {
  return cast<RankedTensorType>(value.getType());
}

int64_t bytesOf(Value value) { return nn::detail::tensorBytes(value.getType()); }

/// Row-major strides (in elements) of `shape`.
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

/// Builds the LLVM-dialect pieces of runtime calls: constants, pointer
/// arithmetic, constant arrays and the declarations of the runtime's C
/// functions (created on first use).
class RuntimeEmitter {
public:
  RuntimeEmitter(ModuleOp module)
      : module(module), ctx(module.getContext()),
        ptrType(LLVM::LLVMPointerType::get(ctx)) {}

  Type ptr() const { return ptrType; }

  Value i64(OpBuilder &b, Location loc, int64_t value) {
    return LLVM::ConstantOp::create(b, loc, b.getI64Type(),
                                    b.getI64IntegerAttr(value));
  }
  Value i32(OpBuilder &b, Location loc, int32_t value) {
    return LLVM::ConstantOp::create(b, loc, b.getI32Type(),
                                    b.getI32IntegerAttr(value));
  }
  Value f64(OpBuilder &b, Location loc, double value) {
    return LLVM::ConstantOp::create(b, loc, b.getF64Type(),
                                    b.getF64FloatAttr(value));
  }
  Value null(OpBuilder &b, Location loc) {
    return LLVM::ZeroOp::create(b, loc, ptrType);
  }

  /// `base + bytes`.
  Value offset(OpBuilder &b, Location loc, Value base, Value bytes) {
    return LLVM::GEPOp::create(b, loc, ptrType, b.getI8Type(), base,
                               ArrayRef<LLVM::GEPArg>{bytes});
  }
  Value offset(OpBuilder &b, Location loc, Value base, int64_t bytes) {
    return bytes == 0 ? base : offset(b, loc, base, i64(b, loc, bytes));
  }

  /// Address of a constant global holding `values` (shared by equal arrays).
  Value i64Array(OpBuilder &b, Location loc, ArrayRef<int64_t> values) {
    std::string key;
    for (int64_t value : values)
      key += std::to_string(value) + ",";
    LLVM::GlobalOp &global = arrays[key];
    if (!global) {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(module.getBody());
      auto type = LLVM::LLVMArrayType::get(b.getI64Type(), values.size());
      auto data = DenseElementsAttr::get(
          RankedTensorType::get({static_cast<int64_t>(values.size())},
                                b.getI64Type()),
          values);
      global = LLVM::GlobalOp::create(
          b, loc, type, /*isConstant=*/true, LLVM::Linkage::Private,
          ("__tessel_i64s_" + Twine(arrays.size())).str(), data,
          /*alignment=*/8);
    }
    return LLVM::AddressOfOp::create(b, loc, global);
  }

  /// Address of a constant global holding `bytes`.
  Value bytesGlobal(OpBuilder &b, Location loc, StringRef bytes) {
    LLVM::GlobalOp global;
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(module.getBody());
      auto type = LLVM::LLVMArrayType::get(b.getI8Type(), bytes.size());
      global = LLVM::GlobalOp::create(
          b, loc, type, /*isConstant=*/true, LLVM::Linkage::Private,
          ("__tessel_const_" + Twine(numConstants++)).str(),
          b.getStringAttr(bytes), /*alignment=*/64);
    }
    return LLVM::AddressOfOp::create(b, loc, global);
  }

  /// Calls the runtime function `name`, declared on first use as
  /// `result(args...)` (void when `result` is null); returns its result.
  Value call(OpBuilder &b, Location loc, StringRef name, ArrayRef<Value> args,
             Type result = {}) {
    LLVM::LLVMFuncOp &decl = declarations[name];
    if (!decl) {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToEnd(module.getBody());
      SmallVector<Type> types;
      for (Value arg : args)
        types.push_back(arg.getType());
      decl = LLVM::LLVMFuncOp::create(
          b, loc, name,
          LLVM::LLVMFunctionType::get(
              result ? result : LLVM::LLVMVoidType::get(ctx), types));
    }
    auto callOp = LLVM::CallOp::create(b, loc, decl, args);
    return result ? callOp.getResult() : Value();
  }

private:
  ModuleOp module;
  MLIRContext *ctx;
  Type ptrType;
  llvm::StringMap<LLVM::LLVMFuncOp> declarations;
  llvm::StringMap<LLVM::GlobalOp> arrays;
  int64_t numConstants = 0;
};

/// Lowers the ops of one function body; `pointers` maps each tensor value to
/// the pointer that holds it.
class FunctionLowering {
public:
  FunctionLowering(RuntimeEmitter &emit, OpBuilder &b, Value ctx,
                   Value scratch, ValueRange outs = {})
      : emit(emit), b(b), ctx(ctx), scratch(scratch), outs(outs) {}

  DenseMap<Value, Value> pointers;

  LogicalResult lower(Operation *op) {
    Location loc = op->getLoc();
    // Results live at their planned offsets (a reshape is a view).
    if (auto offsets =
            op->getAttrOfType<DenseI64ArrayAttr>(memory_plan::kOffsetsAttr)) {
      for (auto [result, offset] : llvm::zip(op->getResults(), offsets.asArrayRef())) {
        if (offset >= 0)
          pointers[result] = emit.offset(b, loc, scratch, offset);
        else if (offset < memory_plan::kArgumentView)
          pointers[result] = outs[memory_plan::resultIndexOf(offset)];
      }
    } else if (op->getNumResults() > 0) {
      return op->emitOpError() << "has no memory plan; run -tessel-plan-memory "
                                  "first";
    }
    return llvm::TypeSwitch<Operation *, LogicalResult>(op)
        .Case([&](nn::ConstantOp c) { return lowerConstant(c); })
        .Case([&](nn::CastOp c) { return lowerCast(c); })
        .Case<nn::AddOp, nn::SubOp, nn::MulOp, nn::DivOp>(
            [&](Operation *o) { return lowerBinary(o); })
        .Case<nn::NegOp, nn::ExpOp, nn::LogOp, nn::SqrtOp, nn::RsqrtOp,
              nn::TanhOp, nn::SigmoidOp, nn::ReluOp, nn::GeluOp, nn::SiluOp>(
            [&](Operation *o) { return lowerUnary(o); })
        .Case([&](nn::DropoutOp d) { return lowerDropout(d); })
        .Case([&](nn::BroadcastOp c) { return lowerBroadcast(c); })
        .Case([&](nn::TransposeOp c) { return lowerTranspose(c); })
        .Case([&](nn::SliceOp c) { return lowerSlice(c); })
        .Case([&](nn::ConcatOp c) { return lowerConcat(c); })
        .Case([&](nn::ReshapeOp r) {
          pointers[r.getResult()] = pointers.lookup(r.getInput());
          return success();
        })
        .Case<nn::ReduceSumOp, nn::ReduceMeanOp, nn::ReduceMaxOp>(
            [&](Operation *o) { return lowerReduce(o); })
        .Case([&](nn::MatmulOp c) { return lowerMatmul(c); })
        .Case([&](nn::EmbeddingOp c) { return lowerEmbedding(c); })
        .Case([&](nn::AttentionOp c) { return lowerAttention(c); })
        .Case([&](nn::SoftmaxOp c) { return lowerSoftmax(c); })
        .Case([&](nn::LayerNormOp c) {
          return lowerNorm(c, c.getInput(), c.getGamma(), c.getBeta(),
                           c.getEpsilon().convertToDouble(), /*rms=*/false);
        })
        .Case([&](nn::RmsNormOp c) {
          return lowerNorm(c, c.getInput(), c.getGamma(), Value(),
                           c.getEpsilon().convertToDouble(), /*rms=*/true);
        })
        .Case([&](nn::BatchNormOp c) { return lowerBatchNorm(c); })
        .Case([&](nn::CrossEntropyOp c) { return lowerCrossEntropy(c); })
        .Case([&](nn::LabelLogitOp c) { return lowerLabelLogit(c); })
        .Case([&](nn::SubLabelOp c) { return lowerSubLabel(c); })
        .Case<nn::GeluGradOp, nn::SiluGradOp, nn::ReluGradOp>(
            [&](Operation *o) { return lowerActivationGrad(o); })
        .Case([&](nn::EqualOp c) { return lowerBinary(c); })
        .Case([&](nn::SoftmaxGradOp c) { return lowerSoftmaxGrad(c); })
        .Case([&](nn::LayerNormGradOp c) {
          return lowerNormGrad(c, c.getInput(), c.getGamma(), c.getDy(),
                               c.getDx(), c.getDgamma(), c.getDbeta(),
                               c.getEpsilon().convertToDouble(), /*rms=*/false);
        })
        .Case([&](nn::RmsNormGradOp c) {
          return lowerNormGrad(c, c.getInput(), c.getGamma(), c.getDy(),
                               c.getDx(), c.getDgamma(), Value(),
                               c.getEpsilon().convertToDouble(), /*rms=*/true);
        })
        .Case([&](nn::BatchNormGradOp c) { return lowerBatchNormGrad(c); })
        .Case(
            [&](nn::CrossEntropyGradOp c) { return lowerCrossEntropyGrad(c); })
        .Case([&](nn::EmbeddingGradOp c) { return lowerEmbeddingGrad(c); })
        .Case([&](nn::AttentionGradOp c) { return lowerAttentionGrad(c); })
        .Case([&](nn::SliceGradOp c) { return lowerSliceGrad(c); })
        .Case([&](nn::SumSquaresOp c) { return lowerSumSquares(c); })
        .Case([&](nn::ClipScaleOp c) { return lowerClipScale(c); })
        .Case([&](nn::OptimizerStepOp c) { return lowerOptimizerStep(c); })
        .Case([&](nn::AccumulateOp c) { return lowerAccumulate(c); })
        .Case([&](nn::RepeatOp c) { return lowerRepeat(c); })
        .Case<shard::AllReduceOp, shard::AllGatherOp, shard::ReduceScatterOp,
              shard::AllToAllOp, shard::AllSliceOp>(
            [&](Operation *o) { return lowerCollective(o); })
        .Default([&](Operation *o) {
          return o->emitOpError() << "has no runtime lowering";
        });
  }

private:
  Value ptr(Value tensor) { return pointers.lookup(tensor); }
  Value i64(int64_t v) { return emit.i64(b, loc, v); }
  Value i32(int32_t v) { return emit.i32(b, loc, v); }
  Value f64(double v) { return emit.f64(b, loc, v); }
  Value dtype(Value tensor) {
    // nn tensors hold only element types the runtime stores (ODS checks).
    return i32(*runtimeDtype(tensorType(tensor).getElementType()));
  }
  Value count(Value tensor) { return i64(tensorType(tensor).getNumElements()); }
  void call(StringRef name, ArrayRef<Value> args) {
    SmallVector<Value> all{ctx};
    all.append(args.begin(), args.end());
    emit.call(b, loc, name, all);
  }

  /// One tessel_strided_copy of `shape` elements.
  void stridedCopy(Value tensor, Value in, Value out, ArrayRef<int64_t> shape,
                   ArrayRef<int64_t> inStrides, ArrayRef<int64_t> outStrides) {
    call("tessel_strided_copy",
         {dtype(tensor), in, out, i32(static_cast<int32_t>(shape.size())),
          emit.i64Array(b, loc, shape), emit.i64Array(b, loc, inStrides),
          emit.i64Array(b, loc, outStrides)});
  }

  LogicalResult lowerConstant(nn::ConstantOp op) {
    loc = op.getLoc();
    auto dense = dyn_cast<DenseElementsAttr>(op.getValue());
    if (!dense)
      return op.emitOpError() << "only dense constants lower to the runtime";
    ArrayRef<char> raw = dense.getRawData();
    RankedTensorType type = op.getType();
    if (dense.isSplat()) {
      // One element in the .so, broadcast on the device (stride 0): a splat
      // of any size costs a few bytes of data.
      int64_t elementBytes = nn::detail::elementBytes(type.getElementType());
      if (static_cast<int64_t>(raw.size()) != elementBytes)
        return op.emitOpError()
               << "has a constant layout the runtime cannot copy";
      ArrayRef<int64_t> shape = type.getShape();
      stridedCopy(op.getResult(),
                  emit.bytesGlobal(b, loc, StringRef(raw.data(), raw.size())),
                  ptr(op.getResult()), shape,
                  SmallVector<int64_t>(shape.size(), 0),
                  contiguousStrides(shape));
      return success();
    }
    int64_t total = bytesOf(op.getResult());
    if (static_cast<int64_t>(raw.size()) != total)
      return op.emitOpError() << "has a constant layout the runtime cannot copy";
    call("tessel_copy_to_device",
         {ptr(op.getResult()), emit.bytesGlobal(b, loc, StringRef(raw.data(), raw.size())),
          i64(total)});
    return success();
  }

  LogicalResult lowerCast(nn::CastOp op) {
    loc = op.getLoc();
    call("tessel_cast", {dtype(op.getInput()), dtype(op.getResult()),
                         ptr(op.getInput()), ptr(op.getResult()),
                         count(op.getResult())});
    return success();
  }

  LogicalResult lowerBinary(Operation *op) {
    loc = op->getLoc();
    int32_t kind = llvm::TypeSwitch<Operation *, int32_t>(op)
                       .Case([](nn::AddOp) { return TESSEL_ADD; })
                       .Case([](nn::SubOp) { return TESSEL_SUB; })
                       .Case([](nn::MulOp) { return TESSEL_MUL; })
                       .Case([](nn::EqualOp) { return TESSEL_EQUAL; })
                       .Default([](Operation *) { return TESSEL_DIV; });
    Value result = op->getResult(0);
    call("tessel_binary", {i32(kind), dtype(result), ptr(op->getOperand(0)),
                           ptr(op->getOperand(1)), ptr(result), count(result)});
    return success();
  }

  LogicalResult lowerUnary(Operation *op) {
    loc = op->getLoc();
    int32_t kind =
        llvm::TypeSwitch<Operation *, int32_t>(op)
            .Case([](nn::NegOp) { return TESSEL_NEG; })
            .Case([](nn::ExpOp) { return TESSEL_EXP; })
            .Case([](nn::LogOp) { return TESSEL_LOG; })
            .Case([](nn::SqrtOp) { return TESSEL_SQRT; })
            .Case([](nn::RsqrtOp) { return TESSEL_RSQRT; })
            .Case([](nn::TanhOp) { return TESSEL_TANH; })
            .Case([](nn::SigmoidOp) { return TESSEL_SIGMOID; })
            .Case([](nn::ReluOp) { return TESSEL_RELU; })
            .Case([](nn::GeluOp g) {
              return g.getApproximate() ? TESSEL_GELU_TANH : TESSEL_GELU;
            })
            .Default([](Operation *) { return TESSEL_SILU; });
    Value result = op->getResult(0);
    call("tessel_unary", {i32(kind), dtype(result), ptr(op->getOperand(0)),
                          ptr(result), count(result)});
    return success();
  }

  LogicalResult lowerDropout(nn::DropoutOp op) {
    loc = op.getLoc();
    Value step =
        emit.call(b, loc, "tessel_get_step", {ctx}, b.getI64Type());
    // Microbatch m draws the mask of elements m·n .. m·n + n − 1.
    Value microbatch =
        emit.call(b, loc, "tessel_get_microbatch", {ctx}, b.getI64Type());
    if (op.getGlobalShape())
      return lowerDropoutBlock(op, step, microbatch);
    Value first = LLVM::MulOp::create(b, loc, microbatch, count(op.getResult()));
    call("tessel_dropout",
         {dtype(op.getResult()), ptr(op.getInput()), ptr(op.getResult()),
          count(op.getResult()), f64(op.getRate().convertToDouble()),
          i64(static_cast<int64_t>(op.getSeed())), step, first});
    return success();
  }

  /// The runtime's bit mask of grid `axes` (an op's `kind` axes: its
  /// split or block axes), or an error on an axis the runtime lacks.
  static FailureOr<uint32_t> gridAxesMask(Operation *op,
                                          ArrayRef<int16_t> axes,
                                          StringRef kind) {
    uint32_t mask = 0;
    for (int16_t axis : axes) {
      if (axis < 0 || axis >= TESSEL_MAX_MESH_AXES)
        return op->emitOpError() << "has " << kind << " axis " << axis
                                 << " outside the runtime's "
                                 << TESSEL_MAX_MESH_AXES << " mesh axes";
      mask |= 1u << axis;
    }
    return mask;
  }

  /// A rank's block of a split dropout: its first element in the whole
  /// tensor is microbatch · N plus, for each split dimension, the rank's
  /// group index over its axes times the block size times the whole
  /// tensor's stride.
  LogicalResult lowerDropoutBlock(nn::DropoutOp op, Value step,
                                  Value microbatch) {
    ArrayRef<int64_t> whole = *op.getGlobalShape();
    ArrayRef<int64_t> local = op.getType().getShape();
    SmallVector<int64_t> strides = contiguousStrides(whole);
    Value first = LLVM::MulOp::create(b, loc, microbatch, i64(product(whole)));
    for (auto [dim, axesAttr] : llvm::enumerate(*op.getSplitAxes())) {
      FailureOr<uint32_t> mask = gridAxesMask(
          op, cast<DenseI16ArrayAttr>(axesAttr).asArrayRef(), "split");
      if (failed(mask))
        return failure();
      if (!*mask)
        continue;
      Value index = emit.call(b, loc, "tessel_group_index",
                              {ctx, i32(static_cast<int32_t>(*mask))},
                              b.getI64Type());
      Value offset = LLVM::MulOp::create(b, loc, index,
                                         i64(local[dim] * strides[dim]));
      first = LLVM::AddOp::create(b, loc, first, offset);
    }
    call("tessel_dropout_block",
         {dtype(op.getResult()), ptr(op.getInput()), ptr(op.getResult()),
          i32(static_cast<int32_t>(local.size())),
          emit.i64Array(b, loc, local), emit.i64Array(b, loc, strides),
          f64(op.getRate().convertToDouble()),
          i64(static_cast<int64_t>(op.getSeed())), step, first});
    return success();
  }

  LogicalResult lowerBroadcast(nn::BroadcastOp op) {
    loc = op.getLoc();
    ArrayRef<int64_t> outShape = op.getType().getShape();
    ArrayRef<int64_t> inShape = op.getInput().getType().getShape();
    SmallVector<int64_t> inContiguous = contiguousStrides(inShape);
    SmallVector<int64_t> inStrides(outShape.size(), 0);
    for (auto [i, dim] : llvm::enumerate(op.getDims()))
      if (inShape[i] == outShape[dim])
        inStrides[dim] = inContiguous[i];
    stridedCopy(op.getResult(), ptr(op.getInput()), ptr(op.getResult()),
                outShape, inStrides, contiguousStrides(outShape));
    return success();
  }

  LogicalResult lowerTranspose(nn::TransposeOp op) {
    loc = op.getLoc();
    SmallVector<int64_t> inContiguous =
        contiguousStrides(op.getInput().getType().getShape());
    SmallVector<int64_t> inStrides;
    for (int64_t dim : op.getPerm())
      inStrides.push_back(inContiguous[dim]);
    ArrayRef<int64_t> outShape = op.getType().getShape();
    stridedCopy(op.getResult(), ptr(op.getInput()), ptr(op.getResult()),
                outShape, inStrides, contiguousStrides(outShape));
    return success();
  }

  LogicalResult lowerSlice(nn::SliceOp op) {
    loc = op.getLoc();
    SmallVector<int64_t> inContiguous =
        contiguousStrides(op.getInput().getType().getShape());
    SmallVector<int64_t> steps = op.getStridesOrOnes();
    SmallVector<int64_t> inStrides;
    int64_t first = 0;
    for (auto [dim, stride] : llvm::enumerate(inContiguous)) {
      inStrides.push_back(stride * steps[dim]);
      first += op.getStart()[dim] * stride;
    }
    int64_t elementBytes =
        nn::detail::elementBytes(op.getType().getElementType());
    ArrayRef<int64_t> outShape = op.getType().getShape();
    stridedCopy(op.getResult(),
                emit.offset(b, loc, ptr(op.getInput()), first * elementBytes),
                ptr(op.getResult()), outShape, inStrides,
                contiguousStrides(outShape));
    return success();
  }

  LogicalResult lowerConcat(nn::ConcatOp op) {
    loc = op.getLoc();
    ArrayRef<int64_t> outShape = op.getType().getShape();
    SmallVector<int64_t> outStrides = contiguousStrides(outShape);
    int64_t dim = op.getDim(), position = 0;
    int64_t elementBytes =
        nn::detail::elementBytes(op.getType().getElementType());
    for (Value input : op.getInputs()) {
      ArrayRef<int64_t> shape = tensorType(input).getShape();
      stridedCopy(op.getResult(), ptr(input),
                  emit.offset(b, loc, ptr(op.getResult()),
                              position * outStrides[dim] * elementBytes),
                  shape, contiguousStrides(shape), outStrides);
      position += shape[dim];
    }
    return success();
  }

  LogicalResult lowerReduce(Operation *op) {
    loc = op->getLoc();
    int32_t kind = isa<nn::ReduceSumOp>(op)    ? TESSEL_REDUCE_SUM
                   : isa<nn::ReduceMeanOp>(op) ? TESSEL_REDUCE_MEAN
                                               : TESSEL_REDUCE_MAX;
    auto dims = op->getAttrOfType<DenseI64ArrayAttr>("dims").asArrayRef();
    uint64_t mask = 0;
    for (int64_t dim : dims)
      mask |= uint64_t(1) << dim;
    Value input = op->getOperand(0);
    ArrayRef<int64_t> shape = tensorType(input).getShape();
    if (shape.size() > 64)
      return op->emitOpError() << "reduces a tensor of rank > 64";
    call("tessel_reduce",
         {i32(kind), dtype(input), ptr(input), ptr(op->getResult(0)),
          i32(static_cast<int32_t>(shape.size())),
          emit.i64Array(b, loc, shape), i64(static_cast<int64_t>(mask))});
    return success();
  }

  LogicalResult lowerMatmul(nn::MatmulOp op) {
    loc = op.getLoc();
    ArrayRef<int64_t> lhs = op.getLhs().getType().getShape();
    ArrayRef<int64_t> rhs = op.getRhs().getType().getShape();
    int64_t batch = product(lhs.drop_back(2));
    int64_t m = op.getTransposeLhs() ? lhs.back() : lhs[lhs.size() - 2];
    int64_t k = op.getTransposeLhs() ? lhs[lhs.size() - 2] : lhs.back();
    int64_t n = op.getTransposeRhs() ? rhs[rhs.size() - 2] : rhs.back();
    bool shared = rhs.size() == 2;
    call("tessel_matmul",
         {dtype(op.getResult()), ptr(op.getLhs()), ptr(op.getRhs()),
          ptr(op.getResult()), i64(batch), i64(m), i64(n), i64(k),
          i32(op.getTransposeLhs()), i32(op.getTransposeRhs()), i32(shared)});
    return success();
  }

  /// Where a rank's block of `size` rows or classes starts and how many the
  /// whole dimension has: with `block_axes` (a vocabulary-parallel split)
  /// the rank's group index and group size over those grid axes, asked of
  /// the runtime; without, the whole dimension.
  FailureOr<std::pair<Value, Value>> blockOf(Operation *op, int64_t size) {
    auto axes = op->getAttrOfType<DenseI16ArrayAttr>("block_axes");
    if (!axes)
      return std::make_pair(i64(0), i64(size));
    FailureOr<uint32_t> mask = gridAxesMask(op, axes.asArrayRef(), "block");
    if (failed(mask))
      return failure();
    Type i64Type = b.getI64Type();
    Value maskValue = i32(static_cast<int32_t>(*mask));
    Value index =
        emit.call(b, loc, "tessel_group_index", {ctx, maskValue}, i64Type);
    Value groupSize =
        emit.call(b, loc, "tessel_group_size", {ctx, maskValue}, i64Type);
    Value first = LLVM::MulOp::create(b, loc, index, i64(size));
    Value whole = LLVM::MulOp::create(b, loc, groupSize, i64(size));
    return std::make_pair(first, whole);
  }

  LogicalResult lowerEmbedding(nn::EmbeddingOp op) {
    loc = op.getLoc();
    ArrayRef<int64_t> table = op.getTable().getType().getShape();
    auto block = blockOf(op, table[0]);
    if (failed(block))
      return failure();
    call("tessel_embedding",
         {dtype(op.getResult()), dtype(op.getIds()), ptr(op.getTable()),
          ptr(op.getIds()), ptr(op.getResult()), count(op.getIds()),
          i64(table[0]), i64(table[1]), block->first, block->second});
    return success();
  }

  LogicalResult lowerLabelLogit(nn::LabelLogitOp op) {
    loc = op.getLoc();
    int64_t classes = op.getLogits().getType().getShape().back();
    auto block = blockOf(op, classes);
    if (failed(block))
      return failure();
    call("tessel_label_logit",
         {dtype(op.getLogits()), dtype(op.getLabels()), ptr(op.getLogits()),
          ptr(op.getLabels()), ptr(op.getResult()), count(op.getLabels()),
          i64(classes), block->first, block->second});
    return success();
  }

  LogicalResult lowerSubLabel(nn::SubLabelOp op) {
    loc = op.getLoc();
    int64_t classes = op.getType().getShape().back();
    auto block = blockOf(op, classes);
    if (failed(block))
      return failure();
    call("tessel_sub_label",
         {dtype(op.getInput()), dtype(op.getLabels()), ptr(op.getInput()),
          ptr(op.getLabels()), ptr(op.getValues()), ptr(op.getResult()),
          count(op.getLabels()), i64(classes), block->first, block->second});
    return success();
  }

  /// The shape arguments of tessel_attention and tessel_attention_grad:
  /// batch, seq, kv_seq, heads, kv_heads, head_dim, value_dim, scale and
  /// causal.
  SmallVector<Value> attentionShape(Value query, Value key, Value value,
                                    std::optional<APFloat> scaleAttr,
                                    bool causal) {
    ArrayRef<int64_t> q = tensorType(query).getShape();
    ArrayRef<int64_t> k = tensorType(key).getShape();
    ArrayRef<int64_t> v = tensorType(value).getShape();
    double scale = scaleAttr ? scaleAttr->convertToDouble()
                             : 1.0 / std::sqrt(static_cast<double>(q[3]));
    return {i64(q[0]), i64(q[1]), i64(k[1]), i64(q[2]),  i64(k[2]),
            i64(q[3]), i64(v[3]), f64(scale), i32(causal)};
  }

  LogicalResult lowerAttention(nn::AttentionOp op) {
    loc = op.getLoc();
    SmallVector<Value> args{dtype(op.getResult()), ptr(op.getQuery()),
                            ptr(op.getKey()), ptr(op.getValue()),
                            ptr(op.getResult())};
    args.append(attentionShape(op.getQuery(), op.getKey(), op.getValue(),
                               op.getScale(), op.getCausal()));
    call("tessel_attention", args);
    return success();
  }

  LogicalResult lowerSoftmax(nn::SoftmaxOp op) {
    loc = op.getLoc();
    ArrayRef<int64_t> shape = op.getType().getShape();
    int64_t dim = op.getNormalizedDim();
    call("tessel_softmax",
         {dtype(op.getResult()), ptr(op.getInput()), ptr(op.getResult()),
          i64(product(shape.take_front(dim))), i64(shape[dim]),
          i64(product(shape.drop_front(dim + 1)))});
    return success();
  }

  LogicalResult lowerNorm(Operation *op, Value input, Value gamma, Value beta,
                          double epsilon, bool rms) {
    loc = op->getLoc();
    ArrayRef<int64_t> shape = tensorType(input).getShape();
    call("tessel_layer_norm",
         {dtype(input), ptr(input), ptr(gamma),
          beta ? ptr(beta) : emit.null(b, loc), ptr(op->getResult(0)),
          i64(product(shape.drop_back())), i64(shape.back()), f64(epsilon),
          i32(rms)});
    return success();
  }

  LogicalResult lowerBatchNorm(nn::BatchNormOp op) {
    loc = op.getLoc();
    ArrayRef<int64_t> shape = op.getType().getShape();
    int64_t dim = op.getFeatureDim();
    call("tessel_batch_norm",
         {dtype(op.getResult()), ptr(op.getInput()), ptr(op.getGamma()),
          ptr(op.getBeta()), ptr(op.getResult()),
          i64(product(shape.take_front(dim))), i64(shape[dim]),
          i64(product(shape.drop_front(dim + 1))),
          f64(op.getEpsilon().convertToDouble())});
    return success();
  }

  LogicalResult lowerCrossEntropy(nn::CrossEntropyOp op) {
    loc = op.getLoc();
    call("tessel_cross_entropy",
         {dtype(op.getLogits()), dtype(op.getLabels()), ptr(op.getLogits()),
          ptr(op.getLabels()), ptr(op.getResult()), count(op.getLabels()),
          i64(op.getLogits().getType().getShape().back()),
          i32(lossReduction(op.getReduction()))});
    return success();
  }

  /// The runtime's code of a loss reduction.
  static int32_t lossReduction(nn::LossReduction reduction) {
    return reduction == nn::LossReduction::mean  ? TESSEL_LOSS_MEAN
           : reduction == nn::LossReduction::sum ? TESSEL_LOSS_SUM
                                                 : TESSEL_LOSS_NONE;
  }

  /// The pointer of `tensor`, or null for an absent optional one.
  Value ptrOrNull(Value tensor) {
    return tensor ? ptr(tensor) : emit.null(b, loc);
  }

  LogicalResult lowerActivationGrad(Operation *op) {
    loc = op->getLoc();
    int32_t kind =
        llvm::TypeSwitch<Operation *, int32_t>(op)
            .Case([](nn::GeluGradOp g) {
              return g.getApproximate() ? TESSEL_GELU_TANH : TESSEL_GELU;
            })
            .Case([](nn::SiluGradOp) { return TESSEL_SILU; })
            .Default([](Operation *) { return TESSEL_RELU; });
    Value x = op->getOperand(0), dy = op->getOperand(1), dx = op->getResult(0);
    call("tessel_unary_grad",
         {i32(kind), dtype(dx), ptr(x), ptr(dy), ptr(dx), count(dx)});
    return success();
  }

  LogicalResult lowerSoftmaxGrad(nn::SoftmaxGradOp op) {
    loc = op.getLoc();
    ArrayRef<int64_t> shape = op.getType().getShape();
    int64_t dim = op.getNormalizedDim();
    call("tessel_softmax_grad",
         {dtype(op.getDx()), ptr(op.getY()), ptr(op.getDy()), ptr(op.getDx()),
          i64(product(shape.take_front(dim))), i64(shape[dim]),
          i64(product(shape.drop_front(dim + 1)))});
    return success();
  }

  LogicalResult lowerNormGrad(Operation *op, Value input, Value gamma, Value dy,
                              Value dx, Value dgamma, Value dbeta,
                              double epsilon, bool rms) {
    loc = op->getLoc();
    ArrayRef<int64_t> shape = tensorType(input).getShape();
    call("tessel_layer_norm_grad",
         {dtype(input), ptr(input), ptr(gamma), ptr(dy), ptr(dx), ptr(dgamma),
          ptrOrNull(dbeta), i64(product(shape.drop_back())), i64(shape.back()),
          f64(epsilon), i32(rms)});
    return success();
  }

  LogicalResult lowerBatchNormGrad(nn::BatchNormGradOp op) {
    loc = op.getLoc();
    ArrayRef<int64_t> shape = op.getInput().getType().getShape();
    int64_t dim = op.getFeatureDim();
    call("tessel_batch_norm_grad",
         {dtype(op.getInput()), ptr(op.getInput()), ptr(op.getGamma()),
          ptr(op.getDy()), ptr(op.getDx()), ptr(op.getDgamma()),
          ptr(op.getDbeta()), i64(product(shape.take_front(dim))),
          i64(shape[dim]), i64(product(shape.drop_front(dim + 1))),
          f64(op.getEpsilon().convertToDouble())});
    return success();
  }

  LogicalResult lowerCrossEntropyGrad(nn::CrossEntropyGradOp op) {
    loc = op.getLoc();
    call("tessel_cross_entropy_grad",
         {dtype(op.getLogits()), dtype(op.getLabels()), ptr(op.getLogits()),
          ptr(op.getLabels()), ptr(op.getDloss()), ptr(op.getDlogits()),
          count(op.getLabels()),
          i64(op.getLogits().getType().getShape().back()),
          i32(lossReduction(op.getReduction()))});
    return success();
  }

  LogicalResult lowerEmbeddingGrad(nn::EmbeddingGradOp op) {
    loc = op.getLoc();
    ArrayRef<int64_t> table = op.getType().getShape();
    auto block = blockOf(op, table[0]);
    if (failed(block))
      return failure();
    call("tessel_embedding_grad",
         {dtype(op.getDtable()), dtype(op.getIds()), ptr(op.getIds()),
          ptr(op.getDout()), ptr(op.getDtable()), count(op.getIds()),
          i64(table[0]), i64(table[1]), block->first, block->second});
    return success();
  }

  LogicalResult lowerAttentionGrad(nn::AttentionGradOp op) {
    loc = op.getLoc();
    SmallVector<Value> args{dtype(op.getQuery()), ptr(op.getQuery()),
                            ptr(op.getKey()),     ptr(op.getValue()),
                            ptr(op.getDout()),    ptr(op.getDquery()),
                            ptr(op.getDkey()),    ptr(op.getDvalue())};
    args.append(attentionShape(op.getQuery(), op.getKey(), op.getValue(),
                               op.getScale(), op.getCausal()));
    call("tessel_attention_grad", args);
    return success();
  }

  /// Zeros, then dy copied into the strided window (nn.slice's placement).
  LogicalResult lowerSliceGrad(nn::SliceGradOp op) {
    loc = op.getLoc();
    call("tessel_zero", {ptr(op.getDx()), i64(bytesOf(op.getDx()))});
    SmallVector<int64_t> outContiguous =
        contiguousStrides(op.getType().getShape());
    SmallVector<int64_t> steps = op.getStridesOrOnes();
    SmallVector<int64_t> outStrides;
    int64_t first = 0;
    for (auto [dim, stride] : llvm::enumerate(outContiguous)) {
      outStrides.push_back(stride * steps[dim]);
      first += op.getStart()[dim] * stride;
    }
    int64_t elementBytes =
        nn::detail::elementBytes(op.getType().getElementType());
    ArrayRef<int64_t> shape = op.getDy().getType().getShape();
    if (product(shape) == 0)
      return success();
    stridedCopy(op.getDx(), ptr(op.getDy()),
                emit.offset(b, loc, ptr(op.getDx()), first * elementBytes),
                shape, contiguousStrides(shape), outStrides);
    return success();
  }

  /// tessel_sum_squares accumulates: zero the f32 result, then one call per
  /// operand.
  LogicalResult lowerSumSquares(nn::SumSquaresOp op) {
    loc = op.getLoc();
    call("tessel_zero", {ptr(op.getResult()), i64(bytesOf(op.getResult()))});
    for (Value input : op.getInputs())
      call("tessel_sum_squares",
           {dtype(input), ptr(input), count(input), ptr(op.getResult())});
    return success();
  }

  LogicalResult lowerClipScale(nn::ClipScaleOp op) {
    loc = op.getLoc();
    call("tessel_clip_scale",
         {ptr(op.getSumSquares()), f64(op.getMaxNorm().convertToDouble()),
          ptr(op.getGradScale()), ptr(op.getResult())});
    return success();
  }

  /// In place: result i is init i's memory. The 1-based update count is the
  /// runtime's step + 1; the learning rate of that step comes from
  /// tessel_lr_at; the optimizer's constants are one constant
  /// tessel_optimizer struct in the .so.
  LogicalResult lowerOptimizerStep(nn::OptimizerStepOp op) {
    loc = op.getLoc();
    for (auto [result, init] : llvm::zip(op.getResults(), op.getOuts()))
      pointers[result] = ptr(init);
    tessel_optimizer opt{};
    opt.kind = static_cast<int32_t>(op.getOptimizer());
    opt.nesterov = op.getNesterov() ? 1 : 0;
    opt.momentum = op.getMomentum().convertToDouble();
    opt.beta1 = op.getBeta1().convertToDouble();
    opt.beta2 = op.getBeta2().convertToDouble();
    opt.eps = op.getEps().convertToDouble();
    opt.weight_decay = op.getWeightDecay().convertToDouble();
    Value optPtr = emit.bytesGlobal(
        b, loc, StringRef(reinterpret_cast<const char *>(&opt), sizeof(opt)));
    Value runtimeStep =
        emit.call(b, loc, "tessel_get_step", {ctx}, b.getI64Type());
    Value step = LLVM::AddOp::create(b, loc, runtimeStep, i64(1));
    Value lr = emit.call(b, loc, "tessel_lr_at",
                         {i32(static_cast<int32_t>(op.getSchedule())),
                          f64(op.getLr().convertToDouble()),
                          f64(op.getMinLr().convertToDouble()),
                          i64(static_cast<int64_t>(op.getWarmup())),
                          i64(static_cast<int64_t>(op.getTotalSteps())), step},
                         b.getF64Type());
    OperandRange states = op.getStates();
    Value param = op.getParam();
    call("tessel_optimizer_update",
         {optPtr, dtype(param), ptr(param), ptr(op.getGrad()),
          ptr(op.getScale()),
          states.size() > 0 ? ptr(states[0]) : emit.null(b, loc),
          states.size() > 1 ? ptr(states[1]) : emit.null(b, loc), count(param),
          step, lr});
    return success();
  }

  /// In place: acc += value.
  LogicalResult lowerAccumulate(nn::AccumulateOp op) {
    loc = op.getLoc();
    pointers[op.getResult()] = ptr(op.getAcc());
    call("tessel_binary",
         {i32(TESSEL_ADD), dtype(op.getAcc()), ptr(op.getAcc()),
          ptr(op.getValue()), ptr(op.getAcc()), count(op.getAcc())});
    return success();
  }

  /// Whether `layer`, or a layer it repeats, draws random bits (dropout).
  static bool drawsRandomBits(func::FuncOp layer) {
    return layer
        .walk([](Operation *op) {
          if (isa<nn::DropoutOp>(op))
            return WalkResult::interrupt();
          if (auto repeat = dyn_cast<nn::RepeatOp>(op))
            if (func::FuncOp inner = repeat.getLayerFunction();
                inner && drawsRandomBits(inner))
              return WalkResult::interrupt();
          return WalkResult::advance();
        })
        .wasInterrupted();
  }

  /// for l in [0, L) (or down from L − 1 with `reverse`): layer(carried,
  /// params[l]) -> next carried, stacked[l]. The carried outputs alternate
  /// between the op's result buffers and a workspace copy so that the last
  /// iteration writes the results; stacked outputs go to slice l. A layer
  /// that draws random bits runs layer l on the random stream folded from
  /// its caller's and l (tessel_fold_in), so layers draw distinct dropout
  /// masks and the backward's layer l draws its forward's.
  LogicalResult lowerRepeat(nn::RepeatOp op) {
    loc = op.getLoc();
    auto workspace =
        op->getAttrOfType<IntegerAttr>(memory_plan::kWorkspaceAttr);
    if (!workspace)
      return op.emitOpError() << "has no workspace; run -tessel-plan-memory";
    int64_t numLayers = op.getNumLayers();
    int64_t position = workspace.getInt();
    SmallVector<Value> spare;
    for (Value carried : op.getCarried()) {
      spare.push_back(emit.offset(b, loc, scratch, position));
      position += alignUp(bytesOf(carried));
    }
    Value layerScratch = emit.offset(b, loc, scratch, position);
    SmallVector<Value> initial, results, params;
    for (Value carried : op.getCarried())
      initial.push_back(ptr(carried));
    for (Value result : op.getCarriedResults())
      results.push_back(ptr(result));
    for (Value param : op.getParams())
      params.push_back(ptr(param));
    StringAttr layerName =
        b.getStringAttr(kFunctionPrefix + op.getLayer().str());
    bool reverse = op.getReverse();
    func::FuncOp layerFunction = op.getLayerFunction();
    Value callerStream;
    if (layerFunction && drawsRandomBits(layerFunction))
      callerStream = emit.call(b, loc, "tessel_get_rng_stream", {ctx},
                               b.getI64Type());
    Value lower = i64(0), upper = i64(numLayers), one = i64(1);
    scf::ForOp::create(
        b, loc, lower, upper, one, initial,
        [&](OpBuilder &body, Location bodyLoc, Value iteration, ValueRange in) {
          auto constant = [&](int64_t value) -> Value {
            return arith::ConstantIntOp::create(body, bodyLoc, value, 64);
          };
          // Iteration i writes the results when L - 1 - i is even; a
          // reversed repeat runs layer L - 1 - i.
          Value remaining = arith::SubIOp::create(
              body, bodyLoc, constant(numLayers - 1), iteration);
          Value layer = reverse ? remaining : iteration;
          if (callerStream) {
            Value stream =
                emit.call(body, bodyLoc, "tessel_fold_in",
                          {callerStream, layer}, body.getI64Type());
            emit.call(body, bodyLoc, "tessel_set_rng_stream", {ctx, stream});
          }
          Value parity = arith::RemSIOp::create(body, bodyLoc, remaining,
                                                constant(2));
          Value toResults = arith::CmpIOp::create(
              body, bodyLoc, arith::CmpIPredicate::eq, parity, constant(0));
          auto sliceOf = [&](Value base, Value stacked) {
            Value bytes = arith::MulIOp::create(
                body, bodyLoc, layer, constant(bytesOf(stacked) / numLayers));
            return emit.offset(body, bodyLoc, base, bytes);
          };
          SmallVector<Value> args{ctx, layerScratch};
          args.append(in.begin(), in.end());
          for (auto [param, value] : llvm::zip(params, op.getParams()))
            args.push_back(sliceOf(param, value));
          SmallVector<Value> out;
          for (auto [result, copy] : llvm::zip(results, spare))
            out.push_back(LLVM::SelectOp::create(body, bodyLoc, toResults,
                                                 result, copy));
          args.append(out.begin(), out.end());
          for (Value stacked : op.getStackedResults())
            args.push_back(sliceOf(ptr(stacked), stacked));
          LLVM::CallOp::create(body, bodyLoc, TypeRange{},
                               FlatSymbolRefAttr::get(layerName), args);
          scf::YieldOp::create(body, bodyLoc, out);
        });
    if (callerStream)
      call("tessel_set_rng_stream", {callerStream});
    return success();
  }

  /// The runtime's code of a shard reduction (verified to be one it has).
  static int32_t reduceKind(shard::ReductionKind kind) {
    return kind == shard::ReductionKind::Average ? TESSEL_REDUCE_MEAN
           : kind == shard::ReductionKind::Max   ? TESSEL_REDUCE_MAX
                                                 : TESSEL_REDUCE_SUM;
  }

  /// One blocking runtime collective over the group of the op's grid axes
  /// (a bit mask); the shape passed is the local input's.
  LogicalResult lowerCollective(Operation *op) {
    loc = op->getLoc();
    if (failed(communication::verifyLowerableCollective(op)))
      return failure();
    Value input = op->getOperand(0), result = op->getResult(0);
    ArrayRef<int64_t> shape = tensorType(input).getShape();
    SmallVector<Value> args{
        i32(static_cast<int32_t>(communication::axesMask(op))), dtype(input),
        ptr(input), ptr(result)};
    auto withShape = [&](std::initializer_list<Value> rest) {
      SmallVector<Value> all(args);
      all.append({i32(static_cast<int32_t>(shape.size())),
                  emit.i64Array(b, loc, shape)});
      all.append(rest.begin(), rest.end());
      return all;
    };
    auto index = [&](const APInt &value) {
      return i32(static_cast<int32_t>(value.getZExtValue()));
    };
    llvm::TypeSwitch<Operation *>(op)
        .Case([&](shard::AllReduceOp c) {
          args.append({count(input), i32(reduceKind(c.getReduction()))});
          call("tessel_all_reduce", args);
        })
        .Case([&](shard::AllGatherOp c) {
          call("tessel_all_gather", withShape({index(c.getGatherAxis())}));
        })
        .Case([&](shard::ReduceScatterOp c) {
          call("tessel_reduce_scatter",
               withShape({index(c.getScatterAxis()),
                          i32(reduceKind(c.getReduction()))}));
        })
        .Case([&](shard::AllToAllOp c) {
          call("tessel_all_to_all",
               withShape({index(c.getSplitAxis()), index(c.getConcatAxis())}));
        })
        .Case([&](shard::AllSliceOp c) {
          call("tessel_all_slice", withShape({index(c.getSliceAxis())}));
        });
    return success();
  }

  RuntimeEmitter &emit;
  OpBuilder &b;
  Value ctx, scratch;
  ValueRange outs; // the function's result pointers
  Location loc = b.getUnknownLoc();
};

/// The global size of dimension `dim` of `value`: its local size times the
/// mesh axes that split it, when it is a function argument whose
/// nn.sharding says so (a vocabulary-parallel embedding's table).
int64_t globalDimSize(Value value, unsigned dim,
                      const std::optional<tessel::Mesh> &mesh) {
  int64_t size = tensorType(value).getDimSize(dim);
  auto arg = dyn_cast<BlockArgument>(value);
  auto func =
      arg ? dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp()) : nullptr;
  if (!mesh || !func)
    return size;
  auto sharding = func.getArgAttrOfType<ArrayAttr>(
      arg.getArgNumber(), nn::NNDialect::kShardingAttrName);
  if (!sharding || dim >= sharding.size())
    return size;
  if (auto axes = dyn_cast<ArrayAttr>(sharding[dim]))
    for (auto name : axes.getAsValueRange<StringAttr>())
      if (std::optional<int16_t> axis = mesh->axisIndex(name))
        size *= mesh->shape[*axis];
  return size;
}

/// The exclusive upper bound of an integer input: the (global) vocabulary
/// of the embedding or the classes of the cross-entropy that reads it (a
/// vocabulary-parallel one: its block times the group of its block axes).
std::optional<int64_t> valueLimit(Value arg,
                                  const std::optional<tessel::Mesh> &mesh) {
  for (OpOperand &use : arg.getUses()) {
    Operation *user = use.getOwner();
    if (auto embedding = dyn_cast<nn::EmbeddingOp>(user))
      if (use.get() == embedding.getIds())
        return globalDimSize(embedding.getTable(), 0, mesh);
    if (auto loss = dyn_cast<nn::CrossEntropyOp>(user))
      if (use.get() == loss.getLabels())
        return loss.getLogits().getType().getShape().back();
    // A vocabulary-parallel cross-entropy's pieces: their class blocks.
    if (isa<nn::LabelLogitOp, nn::SubLabelOp>(user) && use.getOperandNumber() == 1) {
      int64_t classes =
          cast<RankedTensorType>(user->getOperand(0).getType()).getShape().back();
      if (auto axes = user->getAttrOfType<DenseI16ArrayAttr>("block_axes"))
        for (int16_t axis : axes.asArrayRef())
          if (mesh && axis >= 0 && axis < static_cast<int16_t>(mesh->shape.size()))
            classes *= mesh->shape[axis];
      return classes;
    }
    // Views and data movement keep the values (ids gathered along the
    // sequence under sequence parallelism).
    if (isa<nn::ReshapeOp, shard::AllGatherOp, shard::AllSliceOp,
            shard::AllToAllOp>(user))
      if (std::optional<int64_t> limit = valueLimit(user->getResult(0), mesh))
        return limit;
  }
  return std::nullopt;
}

/// The functions tessel-autodiff derived from the model (both null for a
/// model that is only evaluated).
struct TrainingEntries {
  func::FuncOp backward, update;
};

struct LowerToRuntimePass
    : public tessel::impl::LowerToRuntimePassBase<LowerToRuntimePass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    RuntimeEmitter emit(module);
    OpBuilder b(module.getContext());
    SmallVector<func::FuncOp> functions;
    func::FuncOp model;
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      functions.push_back(func);
      if (nn::NNDialect::isModelFunction(func)) {
        if (model) {
          func.emitOpError() << "is a second model function; a module "
                                "compiles one model (the first is @"
                             << model.getSymName() << ")";
          return signalPassFailure();
        }
        model = func;
      }
    }
    // The training entries tessel-autodiff derived from the model.
    TrainingEntries entries;
    for (func::FuncOp func : functions) {
      auto role = func->getAttrOfType<StringAttr>(nn::NNDialect::kEntryAttrName);
      if (!role)
        continue;
      func::FuncOp &slot =
          role.getValue() == "backward" ? entries.backward : entries.update;
      if (slot || !model) {
        func.emitOpError() << (model ? "is a second '" : "is a '")
                           << role.getValue()
                           << (model ? "' entry" : "' entry without a model");
        return signalPassFailure();
      }
      slot = func;
    }
    if (static_cast<bool>(entries.backward) != static_cast<bool>(entries.update)) {
      (entries.backward ? entries.backward : entries.update).emitOpError()
          << "is a training entry without its partner (a trained model has "
             "both a backward and an update entry)";
      return signalPassFailure();
    }
    for (func::FuncOp func : functions)
      if (failed(lowerFunction(func, emit, b)))
        return signalPassFailure();
    if (model && failed(emitModelAbi(model, entries, emit, b)))
      return signalPassFailure();
    for (func::FuncOp func : functions)
      func.erase();
    // The mesh lives on in the description and the collectives' masks; the
    // LLVM module has no use for the grid symbols.
    for (auto grid : llvm::make_early_inc_range(module.getOps<shard::GridOp>()))
      grid.erase();
  }

  LogicalResult lowerFunction(func::FuncOp func, RuntimeEmitter &emit,
                              OpBuilder &b) {
    if (!func->hasAttr(memory_plan::kScratchBytesAttr))
      return func.emitOpError() << "has no memory plan; run "
                                   "-tessel-plan-memory first";
    SmallVector<Type> types(2 + func.getNumArguments() + func.getNumResults(),
                            emit.ptr());
    b.setInsertionPointToEnd(getOperation().getBody());
    auto lowered = LLVM::LLVMFuncOp::create(
        b, func.getLoc(), (kFunctionPrefix + func.getSymName()).str(),
        LLVM::LLVMFunctionType::get(LLVM::LLVMVoidType::get(&getContext()),
                                    types));
    Block *entry = lowered.addEntryBlock(b);
    b.setInsertionPointToStart(entry);
    ValueRange outs =
        entry->getArguments().drop_front(2 + func.getNumArguments());
    FunctionLowering lowering(emit, b, entry->getArgument(0),
                              entry->getArgument(1), outs);
    for (auto [arg, pointer] :
         llvm::zip(func.getArguments(), entry->getArguments().drop_front(2)))
      lowering.pointers[arg] = pointer;
    for (Operation &op : func.getBody().front()) {
      if (auto ret = dyn_cast<func::ReturnOp>(op)) {
        for (auto [value, out] : llvm::zip(ret.getOperands(), outs))
          if (lowering.pointers.lookup(value) != out) // not computed in place
            emit.call(b, ret.getLoc(), "tessel_copy",
                    {entry->getArgument(0), out, lowering.pointers.lookup(value),
                     emit.i64(b, ret.getLoc(), bytesOf(value))});
        LLVM::ReturnOp::create(b, ret.getLoc(), ValueRange{});
        continue;
      }
      if (failed(lowering.lower(&op)))
        return failure();
    }
    return success();
  }

  /// The entry points of the compiled model (docs/model-abi.md) and
  /// tessel_model_json(): the arena is [params | grads | states | inputs
  /// and labels | control | outputs | scratch], every entry a
  /// `void (ctx, arena)` that passes its function pointers into it.
  LogicalResult emitModelAbi(func::FuncOp model, TrainingEntries entries,
                             RuntimeEmitter &emit, OpBuilder &b) {
    Location loc = model.getLoc();
    bool trained = static_cast<bool>(entries.backward);
    SmallVector<func::FuncOp> entryFunctions{model};
    if (trained)
      entryFunctions.append({entries.backward, entries.update});
    int64_t scratchBytes = 0;
    for (func::FuncOp func : entryFunctions)
      scratchBytes = std::max(
          scratchBytes,
          func->getAttrOfType<IntegerAttr>(memory_plan::kScratchBytesAttr)
              .getInt());

    // A partitioned model: its mesh, and per tensor the global shape and
    // the axes that split it (the arena holds the local shard).
    FailureOr<std::optional<Mesh>> meshOrFailure =
        meshFromModule(getOperation());
    if (failed(meshOrFailure))
      return failure();
    const std::optional<Mesh> &mesh = *meshOrFailure;
    bool badSharding = false;
    auto addSharding = [&](llvm::json::Object &tensor, func::FuncOp func,
                           ArrayAttr sharding, Type type, const Twine &what) {
      auto shaped = cast<RankedTensorType>(type);
      if (!mesh) {
        if (sharding) {
          func.emitOpError()
              << what << " has '" << nn::NNDialect::kShardingAttrName
              << "', but the module has no shard.grid @" << kMeshName;
          badSharding = true;
        }
        return;
      }
      SmallVector<int64_t> global(shaped.getShape());
      llvm::json::Array dims;
      bool split = false;
      if (sharding && sharding.size() != global.size()) {
        func.emitOpError() << what << ": '" << nn::NNDialect::kShardingAttrName
                           << "' has " << sharding.size()
                           << " entries for a tensor of rank " << global.size();
        badSharding = true;
        return;
      }
      llvm::StringSet<> used;
      for (auto [dim, entry] : llvm::enumerate(
               sharding ? sharding.getValue() : ArrayRef<Attribute>())) {
        auto axes = dyn_cast<ArrayAttr>(entry);
        if (!axes) {
          func.emitOpError()
              << what << ": '" << nn::NNDialect::kShardingAttrName << "' "
              << sharding << " must hold one array of axis names per dimension";
          badSharding = true;
          return;
        }
        llvm::json::Array names;
        for (Attribute axis : axes) {
          auto name = dyn_cast<StringAttr>(axis);
          std::optional<int16_t> index =
              name ? mesh->axisIndex(name.getValue()) : std::nullopt;
          if (!index || !used.insert(name.getValue()).second) {
            func.emitOpError()
                << what << ": '" << nn::NNDialect::kShardingAttrName << "' "
                << sharding << " must name, per dimension, distinct axes of "
                << "the mesh (" << llvm::join(mesh->axes, ", ") << ")";
            badSharding = true;
            return;
          }
          global[dim] *= mesh->shape[*index];
          names.push_back(name.getValue().str());
          split = true;
        }
        dims.push_back(std::move(names));
      }
      tensor["global_shape"] = llvm::json::Array(global);
      if (split)
        tensor["sharding"] = std::move(dims);
    };
    auto argSharding = [](func::FuncOp func, unsigned i) {
      return func.getArgAttrOfType<ArrayAttr>(i,
                                              nn::NNDialect::kShardingAttrName);
    };

    llvm::json::Array tensors;
    int64_t cursor = 0;
    auto region = [&](int64_t begin) {
      return llvm::json::Object{{"offset", begin}, {"bytes", cursor - begin}};
    };
    auto describe = [&](StringRef name, StringRef role, Type type,
                        int64_t offset) {
      auto tensor = cast<RankedTensorType>(type);
      return llvm::json::Object{
          // json::Value borrows a StringRef: copy the strings.
          {"name", name.str()},
          {"role", role.str()},
          {"dtype", dtypeName(tensor.getElementType()).str()},
          {"shape", llvm::json::Array(tensor.getShape())},
          {"offset", offset},
          {"bytes", nn::detail::tensorBytes(tensor)}};
    };
    auto axesOf = [&](func::FuncOp func, unsigned i) {
      llvm::json::Array axes;
      if (auto attr = func.getArgAttrOfType<ArrayAttr>(
              i, nn::NNDialect::kAxesAttrName))
        for (StringRef axis : attr.getAsValueRange<StringAttr>())
          axes.push_back(axis.str());
      return axes;
    };
    auto nameOf = [](func::FuncOp func, unsigned i, StringRef attrName) {
      auto name = func.getArgAttrOfType<StringAttr>(i, attrName);
      return name ? name.getValue() : StringRef();
    };

    // Parameters, then (trained) one gradient per trained parameter and the
    // optimizer's state, each by name.
    llvm::StringMap<int64_t> paramAt, gradAt, stateAt;
    llvm::StringSet<> trainedNames; // parameters with a gradient
    if (trained)
      for (unsigned i = 0, e = entries.backward.getNumArguments(); i < e; ++i)
        if (StringRef name =
                nameOf(entries.backward, i, nn::NNDialect::kGradAttrName);
            !name.empty())
          trainedNames.insert(name);
    int64_t paramsBegin = cursor;
    for (unsigned i = 0, e = model.getNumArguments(); i < e; ++i) {
      StringRef name = nameOf(model, i, nn::NNDialect::kParamAttrName);
      if (name.empty())
        continue;
      auto init = model.getArgAttrOfType<nn::InitAttr>(
          i, nn::NNDialect::kInitAttrName);
      llvm::json::Object tensor =
          describe(name, "param", model.getArgumentTypes()[i], cursor);
      ArrayRef<double> args = init.getArgs().asArrayRef();
      // tessel_init_param takes two numbers; normal's mean defaults to 0.
      llvm::json::Array initArgs{args.size() > 0 ? args[0] : 0.0,
                                 args.size() > 1 ? args[1] : 0.0};
      tensor["init"] = llvm::json::Object{
          {"kind", nn::stringifyInitKind(init.getKind()).str()},
          {"args", std::move(initArgs)}};
      tensor["axes"] = axesOf(model, i);
      if (trained)
        tensor["trainable"] = trainedNames.contains(name);
      addSharding(tensor, model, argSharding(model, i),
                  model.getArgumentTypes()[i], "argument #" + Twine(i));
      tensors.push_back(std::move(tensor));
      paramAt[name] = cursor;
      cursor += alignUp(bytesOf(model.getArgument(i)));
    }
    llvm::json::Object params = region(paramsBegin);
    auto placeNamed = [&](func::FuncOp func, StringRef attrName,
                          StringRef role, llvm::StringMap<int64_t> &at) {
      int64_t begin = cursor;
      if (func)
        for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i) {
          StringRef name = nameOf(func, i, attrName);
          if (name.empty())
            continue;
          llvm::json::Object tensor =
              describe(name, role, func.getArgumentTypes()[i], cursor);
          tensor["axes"] = axesOf(func, i);
          addSharding(tensor, func, argSharding(func, i),
                      func.getArgumentTypes()[i], "argument #" + Twine(i));
          tensors.push_back(std::move(tensor));
          at[name] = cursor;
          cursor += alignUp(bytesOf(func.getArgument(i)));
        }
      return region(begin);
    };
    llvm::json::Object grads = placeNamed(
        entries.backward, nn::NNDialect::kGradAttrName, "grad", gradAt);
    llvm::json::Object states = placeNamed(
        entries.update, nn::NNDialect::kStateAttrName, "state", stateAt);

    // Inputs and labels, in the model's order (every entry that reads them
    // lists them in that order).
    SmallVector<int64_t> feedAt;
    int64_t inputsBegin = cursor, numInputs = 0, numLabels = 0;
    for (unsigned i = 0, e = model.getNumArguments(); i < e; ++i) {
      if (model.getArgAttr(i, nn::NNDialect::kParamAttrName))
        continue;
      bool isLabel = model.getArgAttr(i, nn::NNDialect::kLabelAttrName) != nullptr;
      std::string name = isLabel ? "label" + std::to_string(numLabels++)
                                 : "input" + std::to_string(numInputs++);
      llvm::json::Object tensor = describe(
          name, isLabel ? "label" : "input", model.getArgumentTypes()[i], cursor);
      tensor["axes"] = axesOf(model, i);
      if (std::optional<int64_t> limit = valueLimit(model.getArgument(i), mesh))
        tensor["limit"] = *limit;
      addSharding(tensor, model, argSharding(model, i),
                  model.getArgumentTypes()[i], "argument #" + Twine(i));
      tensors.push_back(std::move(tensor));
      feedAt.push_back(cursor);
      cursor += alignUp(bytesOf(model.getArgument(i)));
    }
    llvm::json::Object inputs = region(inputsBegin);

    // Control scalars the launcher writes: the gradient scale.
    int64_t controlBegin = cursor, gradScaleAt = -1;
    if (trained) {
      auto scalar = RankedTensorType::get({}, b.getF32Type());
      llvm::json::Object tensor =
          describe("grad_scale", "grad_scale", scalar, cursor);
      addSharding(tensor, model, ArrayAttr(), scalar, "the gradient scale");
      tensors.push_back(std::move(tensor));
      gradScaleAt = cursor;
      cursor += alignUp(nn::detail::tensorBytes(scalar));
    }
    llvm::json::Object control = region(controlBegin);

    int64_t outputsBegin = cursor;
    SmallVector<int64_t> resultAt;
    for (auto [i, type] : llvm::enumerate(model.getResultTypes())) {
      llvm::json::Object tensor =
          describe(i == 0 ? "loss" : "output" + std::to_string(i),
                   i == 0 ? "loss" : "output", type, cursor);
      addSharding(tensor, model,
                  model.getResultAttrOfType<ArrayAttr>(
                      i, nn::NNDialect::kShardingAttrName),
                  type, "result #" + Twine(i));
      tensors.push_back(std::move(tensor));
      resultAt.push_back(cursor);
      cursor += alignUp(nn::detail::tensorBytes(type));
    }
    llvm::json::Object outputs = region(outputsBegin);
    if (badSharding)
      return failure();
    int64_t scratchBegin = cursor;
    cursor += scratchBytes;
    llvm::json::Object scratch = region(scratchBegin);

    // Where each argument and result of an entry lives in the arena.
    auto lookup = [&](func::FuncOp func, const llvm::StringMap<int64_t> &at,
                      StringRef name, StringRef what) -> FailureOr<int64_t> {
      auto it = at.find(name);
      if (it == at.end())
        return func.emitOpError()
               << "names " << what << " '" << name
               << "', which the model does not have";
      return it->second;
    };
    auto argumentAt = [&](func::FuncOp func, unsigned i,
                          unsigned &feed) -> FailureOr<int64_t> {
      if (StringRef name = nameOf(func, i, nn::NNDialect::kParamAttrName);
          !name.empty())
        return lookup(func, paramAt, name, "parameter");
      if (StringRef name = nameOf(func, i, nn::NNDialect::kGradAttrName);
          !name.empty())
        return lookup(func, gradAt, name, "gradient");
      if (StringRef name = nameOf(func, i, nn::NNDialect::kStateAttrName);
          !name.empty())
        return lookup(func, stateAt, name, "optimizer state");
      if (func.getArgAttr(i, nn::NNDialect::kGradScaleAttrName))
        return gradScaleAt;
      if ((func.getArgAttr(i, nn::NNDialect::kInputAttrName) ||
           func.getArgAttr(i, nn::NNDialect::kLabelAttrName)) &&
          feed < feedAt.size())
        return feedAt[feed++];
      return func.emitOpError() << "argument #" << i
                                << " has no place in the model's arena";
    };
    auto resultAtOf = [&](func::FuncOp func, unsigned i) -> FailureOr<int64_t> {
      auto named = [&](StringRef attrName) {
        auto name = func.getResultAttrOfType<StringAttr>(i, attrName);
        return name ? name.getValue() : StringRef();
      };
      if (StringRef name = named(nn::NNDialect::kParamAttrName); !name.empty())
        return lookup(func, paramAt, name, "parameter");
      if (StringRef name = named(nn::NNDialect::kGradAttrName); !name.empty())
        return lookup(func, gradAt, name, "gradient");
      if (StringRef name = named(nn::NNDialect::kStateAttrName); !name.empty())
        return lookup(func, stateAt, name, "optimizer state");
      if (i < resultAt.size())
        return resultAt[i];
      return func.emitOpError() << "result #" << i
                                << " has no place in the model's arena";
    };

    // One `void entry(ctx, arena)` per function.
    Type ptr = emit.ptr();
    llvm::json::Object entryNames;
    auto emitEntry = [&](func::FuncOp func, StringRef symbol,
                         StringRef role) -> LogicalResult {
      b.setInsertionPointToEnd(getOperation().getBody());
      auto wrapper = LLVM::LLVMFuncOp::create(
          b, loc, symbol,
          LLVM::LLVMFunctionType::get(LLVM::LLVMVoidType::get(&getContext()),
                                      {ptr, ptr}));
      Block *entry = wrapper.addEntryBlock(b);
      b.setInsertionPointToStart(entry);
      Value arena = entry->getArgument(1);
      SmallVector<Value> args{entry->getArgument(0),
                              emit.offset(b, loc, arena, scratchBegin)};
      unsigned feed = 0;
      for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i) {
        FailureOr<int64_t> offset = argumentAt(func, i, feed);
        if (failed(offset))
          return failure();
        args.push_back(emit.offset(b, loc, arena, *offset));
      }
      for (unsigned i = 0, e = func.getNumResults(); i < e; ++i) {
        FailureOr<int64_t> offset = resultAtOf(func, i);
        if (failed(offset))
          return failure();
        args.push_back(emit.offset(b, loc, arena, *offset));
      }
      LLVM::CallOp::create(
          b, loc, TypeRange{},
          FlatSymbolRefAttr::get(b.getStringAttr(
              (kFunctionPrefix + func.getSymName()).str())),
          args);
      LLVM::ReturnOp::create(b, loc, ValueRange{});
      entryNames[role.str()] = symbol.str();
      return success();
    };
    if (failed(emitEntry(model, "tessel_forward", "forward")))
      return failure();
    if (trained && (failed(emitEntry(entries.backward, "tessel_backward",
                                     "backward")) ||
                    failed(emitEntry(entries.update, "tessel_update",
                                     "update"))))
      return failure();

    llvm::json::Object regions{{"params", std::move(params)},
                               {"grads", std::move(grads)},
                               {"states", std::move(states)},
                               {"inputs", std::move(inputs)},
                               {"control", std::move(control)},
                               {"outputs", std::move(outputs)},
                               {"scratch", std::move(scratch)}};
    llvm::json::Object description{
        {"abi_version", TESSEL_ABI_VERSION},
        {"source", sourceName},
        {"function", model.getSymName().str()},
        {"entry", "tessel_forward"},
        {"entries", std::move(entryNames)},
        {"arena_bytes", cursor},
        {"peak_bytes", scratchBytes},
        {"regions", std::move(regions)},
        {"tensors", std::move(tensors)}};
    if (mesh) {
      description["mesh"] =
          llvm::json::Object{{"axes", llvm::json::Array(mesh->axes)},
                             {"shape", llvm::json::Array(mesh->shape)}};
      // What one call of each entry communicates: the launcher's counters
      // after a step equal backward × microbatches + update.
      llvm::json::Object collectives;
      auto count = [&](StringRef role, func::FuncOp func) {
        llvm::json::Array list;
        for (const communication::Traffic &traffic :
             communication::countCollectives(func, *mesh)) {
          llvm::json::Array axes;
          for (int16_t axis : communication::axesOfMask(traffic.axes))
            axes.push_back(mesh->axes[axis]);
          list.push_back(llvm::json::Object{
              {"kind", communication::collectiveName(traffic.kind).str()},
              {"axes", std::move(axes)},
              {"calls", traffic.calls},
              {"bytes", traffic.bytes}});
        }
        collectives[role.str()] = std::move(list);
      };
      count("forward", model);
      if (trained) {
        count("backward", entries.backward);
        count("update", entries.update);
      }
      description["collectives"] = std::move(collectives);
    }
    if (auto train = getOperation()->getAttrOfType<DictionaryAttr>(
            nn::NNDialect::kTrainAttrName);
        train && trained) {
      llvm::json::Object config;
      for (NamedAttribute setting : train) {
        std::string key = setting.getName().getValue().str();
        Attribute value = setting.getValue();
        if (auto f = dyn_cast<FloatAttr>(value))
          config[key] = f.getValueAsDouble();
        else if (auto flag = dyn_cast<BoolAttr>(value))
          config[key] = flag.getValue();
        else if (auto i = dyn_cast<IntegerAttr>(value))
          config[key] = i.getInt();
        else if (auto str = dyn_cast<StringAttr>(value))
          config[key] = str.getValue().str();
      }
      description["train"] = std::move(config);
    }
    std::string json;
    llvm::raw_string_ostream(json) << llvm::json::Value(std::move(description));

    // tessel_model_json(): the description, NUL-terminated.
    b.setInsertionPointToEnd(getOperation().getBody());
    auto describeFn = LLVM::LLVMFuncOp::create(
        b, loc, "tessel_model_json", LLVM::LLVMFunctionType::get(ptr, {}));
    Block *describeEntry = describeFn.addEntryBlock(b);
    b.setInsertionPointToStart(describeEntry);
    json.push_back('\0');
    Value text = LLVM::createGlobalString(loc, b, "__tessel_model_json", json,
                                          LLVM::Linkage::Private);
    LLVM::ReturnOp::create(b, loc, text);
    return success();
  }
};

} // namespace
