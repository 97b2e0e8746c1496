//===- RuntimeEmitter.cpp - LLVM-dialect pieces of runtime calls ----------===//

#include "passes/lowering/RuntimeEmitter.h"

#include "llvm/Support/ErrorHandling.h"

#include <string>

using namespace mlir;

namespace tessel::lowering {

Type abiType(AbiKind kind, MLIRContext *context) {
  switch (kind) {
  case AbiKind::Ctx:
  case AbiKind::Ptr:
    return LLVM::LLVMPointerType::get(context);
  case AbiKind::I32:
    return IntegerType::get(context, 32);
  case AbiKind::I64:
    return IntegerType::get(context, 64);
  case AbiKind::F64:
    return Float64Type::get(context);
  }
  llvm_unreachable("unknown AbiKind");
}

void checkAbiValue(Value value, AbiKind kind) {
  // A lowering bug, not bad input: the IR it would build calls the runtime
  // with an argument of the wrong C type.
  if (!value || value.getType() != abiType(kind, value.getContext()))
    llvm::report_fatal_error("tessel-lower-to-runtime: a runtime call "
                             "argument does not have its prototype's type");
}

RuntimeEmitter::RuntimeEmitter(ModuleOp module)
    : module(module), context(module.getContext()),
      ptrType(LLVM::LLVMPointerType::get(context)) {}

I64Value RuntimeEmitter::i64(OpBuilder &b, Location loc, int64_t value) {
  return I64Value(LLVM::ConstantOp::create(b, loc, b.getI64Type(),
                                           b.getI64IntegerAttr(value)));
}

I32Value RuntimeEmitter::i32(OpBuilder &b, Location loc, int32_t value) {
  return I32Value(LLVM::ConstantOp::create(b, loc, b.getI32Type(),
                                           b.getI32IntegerAttr(value)));
}

F64Value RuntimeEmitter::f64(OpBuilder &b, Location loc, double value) {
  return F64Value(LLVM::ConstantOp::create(b, loc, b.getF64Type(),
                                           b.getF64FloatAttr(value)));
}

PtrValue RuntimeEmitter::null(OpBuilder &b, Location loc) {
  return PtrValue(LLVM::ZeroOp::create(b, loc, ptrType));
}

PtrValue RuntimeEmitter::offset(OpBuilder &b, Location loc, Value base,
                                Value bytes) {
  return PtrValue(LLVM::GEPOp::create(b, loc, ptrType, b.getI8Type(), base,
                                      ArrayRef<LLVM::GEPArg>{bytes}));
}

PtrValue RuntimeEmitter::offset(OpBuilder &b, Location loc, Value base,
                                int64_t bytes) {
  return bytes == 0 ? PtrValue(base) : offset(b, loc, base, i64(b, loc, bytes));
}

I64Value RuntimeEmitter::mul(OpBuilder &b, Location loc, I64Value lhs,
                             I64Value rhs) {
  return I64Value(LLVM::MulOp::create(b, loc, lhs, rhs));
}

I64Value RuntimeEmitter::add(OpBuilder &b, Location loc, I64Value lhs,
                             I64Value rhs) {
  return I64Value(LLVM::AddOp::create(b, loc, lhs, rhs));
}

PtrValue RuntimeEmitter::i64Array(OpBuilder &b, Location loc,
                                  ArrayRef<int64_t> values) {
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
  return PtrValue(LLVM::AddressOfOp::create(b, loc, global));
}

I64Value RuntimeEmitter::i64At(OpBuilder &b, Location loc,
                               ArrayRef<int64_t> values, I64Value index) {
  auto slot = LLVM::GEPOp::create(b, loc, ptrType, b.getI64Type(),
                                  i64Array(b, loc, values),
                                  ArrayRef<LLVM::GEPArg>{Value(index)});
  return I64Value(LLVM::LoadOp::create(b, loc, b.getI64Type(), slot));
}

PtrValue RuntimeEmitter::f64Array(OpBuilder &b, Location loc,
                                  ArrayRef<double> values) {
  // The doubles' bits in an i64 table, read as f64.
  SmallVector<int64_t> bits;
  for (double value : values)
    bits.push_back(llvm::bit_cast<int64_t>(value));
  return i64Array(b, loc, bits);
}

F64Value RuntimeEmitter::f64At(OpBuilder &b, Location loc,
                               ArrayRef<double> values, I64Value index) {
  auto slot = LLVM::GEPOp::create(b, loc, ptrType, b.getF64Type(),
                                  f64Array(b, loc, values),
                                  ArrayRef<LLVM::GEPArg>{Value(index)});
  return F64Value(LLVM::LoadOp::create(b, loc, b.getF64Type(), slot));
}

PtrValue RuntimeEmitter::ptrArray(OpBuilder &b, Location loc,
                                  ArrayRef<PtrValue> values) {
  auto size = LLVM::ConstantOp::create(
      b, loc, b.getI64Type(),
      b.getI64IntegerAttr(static_cast<int64_t>(values.size())));
  auto array = LLVM::AllocaOp::create(b, loc, ptrType, ptrType, size,
                                      /*alignment=*/8);
  for (auto [i, value] : llvm::enumerate(values)) {
    auto slot = LLVM::GEPOp::create(
        b, loc, ptrType, ptrType, array,
        ArrayRef<LLVM::GEPArg>{static_cast<int32_t>(i)});
    LLVM::StoreOp::create(b, loc, value, slot);
  }
  return PtrValue(array);
}

PtrValue RuntimeEmitter::bytesGlobal(OpBuilder &b, Location loc,
                                     StringRef bytes) {
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
  return PtrValue(LLVM::AddressOfOp::create(b, loc, global));
}

LLVM::CallOp RuntimeEmitter::emitCall(OpBuilder &b, Location loc,
                                      StringRef name,
                                      LLVM::LLVMFunctionType type,
                                      ArrayRef<Value> args) {
  LLVM::LLVMFuncOp &decl = declarations[name];
  if (!decl) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToEnd(module.getBody());
    decl = LLVM::LLVMFuncOp::create(b, loc, name, type);
  }
  return LLVM::CallOp::create(b, loc, decl, args);
}

} // namespace tessel::lowering
