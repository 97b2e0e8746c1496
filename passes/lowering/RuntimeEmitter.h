//===- RuntimeEmitter.h - LLVM-dialect pieces of runtime calls --*- C++ -*-===//
//
// Constants, pointer arithmetic, constant globals and the calls of the
// runtime's C functions (declared on first use from their runtime.h
// prototype, see RuntimeAbi.h), shared by the op lowerings and the model
// description.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_PASSES_LOWERING_RUNTIMEEMITTER_H
#define TESSEL_PASSES_LOWERING_RUNTIMEEMITTER_H

#include "passes/lowering/RuntimeAbi.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringMap.h"

namespace tessel::lowering {

/// The prefix of the llvm.func an nn function lowers to.
inline constexpr llvm::StringLiteral kFunctionPrefix = "tessel_fn_";

class RuntimeEmitter {
public:
  explicit RuntimeEmitter(mlir::ModuleOp module);

  mlir::Type ptr() const { return ptrType; }

  I64Value i64(mlir::OpBuilder &b, mlir::Location loc, int64_t value);
  I32Value i32(mlir::OpBuilder &b, mlir::Location loc, int32_t value);
  F64Value f64(mlir::OpBuilder &b, mlir::Location loc, double value);
  PtrValue null(mlir::OpBuilder &b, mlir::Location loc);

  /// `base + bytes`.
  PtrValue offset(mlir::OpBuilder &b, mlir::Location loc, mlir::Value base,
                  mlir::Value bytes);
  PtrValue offset(mlir::OpBuilder &b, mlir::Location loc, mlir::Value base,
                  int64_t bytes);

  /// `lhs * rhs` and `lhs + rhs` on i64.
  I64Value mul(mlir::OpBuilder &b, mlir::Location loc, I64Value lhs,
               I64Value rhs);
  I64Value add(mlir::OpBuilder &b, mlir::Location loc, I64Value lhs,
               I64Value rhs);

  /// Address of a constant global holding `values` (shared by equal arrays).
  PtrValue i64Array(mlir::OpBuilder &b, mlir::Location loc,
                    llvm::ArrayRef<int64_t> values);

  PtrValue f64Array(mlir::OpBuilder &b, mlir::Location loc,
                    llvm::ArrayRef<double> values);

  /// Element `index` (a run-time value in range) of a constant table
  /// holding `values`: a layer's entry of a per-layer attribute.
  I64Value i64At(mlir::OpBuilder &b, mlir::Location loc,
                 llvm::ArrayRef<int64_t> values, I64Value index);
  F64Value f64At(mlir::OpBuilder &b, mlir::Location loc,
                 llvm::ArrayRef<double> values, I64Value index);

  /// Address of a stack array holding `values` (pointers computed at run
  /// time), written where the builder stands.
  PtrValue ptrArray(mlir::OpBuilder &b, mlir::Location loc,
                    llvm::ArrayRef<PtrValue> values);

  /// Address of a constant global holding `bytes`.
  PtrValue bytesGlobal(mlir::OpBuilder &b, mlir::Location loc,
                       llvm::StringRef bytes);

  /// Calls runtime function `fn` with exactly its prototype's arguments.
  template <typename Result, typename... Params>
  AbiResult<Result> call(const RuntimeFunction<Result(Params...)> &fn,
                         mlir::OpBuilder &b, mlir::Location loc,
                         AbiArgs<Params...> args) {
    mlir::LLVM::CallOp callOp = emitCall(
        b, loc, fn.name, RuntimeFunction<Result(Params...)>::type(context),
        llvm::ArrayRef(args.values, sizeof...(Params)));
    if constexpr (!std::is_void_v<Result>)
      return AbiResult<Result>(callOp.getResult());
  }

private:
  /// The call, after declaring `name` as `type` on first use.
  mlir::LLVM::CallOp emitCall(mlir::OpBuilder &b, mlir::Location loc,
                              llvm::StringRef name,
                              mlir::LLVM::LLVMFunctionType type,
                              llvm::ArrayRef<mlir::Value> args);

  mlir::ModuleOp module;
  mlir::MLIRContext *context;
  mlir::Type ptrType;
  llvm::StringMap<mlir::LLVM::LLVMFuncOp> declarations;
  llvm::StringMap<mlir::LLVM::GlobalOp> arrays;
  int64_t numConstants = 0;
};

} // namespace tessel::lowering

#endif // TESSEL_PASSES_LOWERING_RUNTIMEEMITTER_H
