//===- RuntimeAbi.h - typed calls of runtime functions ----------*- C++ -*-===//
//
// Every runtime function generated code calls is listed in
// runtime/include/tessel/runtime_abi.def; its prototype is runtime.h's. For
// each, this header makes `rt::<name>`, a RuntimeFunction whose signature is
// decltype(::<name>), so the LLVM declaration the lowering emits is derived
// from the C prototype, never from the arguments of a call site, and
// RuntimeEmitter::call takes exactly the prototype's arguments, each a
// handle of the kind its C type needs (AbiValue). A prototype change in
// runtime.h that the call sites do not follow stops the build.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_PASSES_LOWERING_RUNTIMEABI_H
#define TESSEL_PASSES_LOWERING_RUNTIMEABI_H

#include "runtime/include/tessel/runtime.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <type_traits>

namespace tessel::lowering {

/// How a C parameter or result of the runtime travels in LLVM: the context,
/// any other pointer, or a 32-bit, 64-bit or f64 scalar (signedness is the
/// callee's business; LLVM integers have none).
enum class AbiKind { Ctx, Ptr, I32, I64, F64 };

/// The LLVM type of a kind.
mlir::Type abiType(AbiKind kind, mlir::MLIRContext *context);

/// Fails loudly when `value` is not of `kind`: a Value enters a typed handle
/// only through this check.
void checkAbiValue(mlir::Value value, AbiKind kind);

/// A Value the lowering passes to the runtime as a C value of kind K.
/// Explicit from a Value (checked), so a raw Value, or a handle of another
/// kind, passed for a parameter does not compile.
template <AbiKind K> class AbiValue {
public:
  explicit AbiValue(mlir::Value value) : value(value) {
    checkAbiValue(value, K);
  }
  operator mlir::Value() const { return value; }

private:
  mlir::Value value;
};
using CtxValue = AbiValue<AbiKind::Ctx>;
using PtrValue = AbiValue<AbiKind::Ptr>;
using I32Value = AbiValue<AbiKind::I32>;
using I64Value = AbiValue<AbiKind::I64>;
using F64Value = AbiValue<AbiKind::F64>;

/// The kind of a C type of runtime.h. A type outside this vocabulary (a
/// struct by value, float, a 16-bit integer) stops the build.
template <typename CType> struct AbiKindOf {
  static_assert(sizeof(CType) == 0,
                "a runtime_abi.def function has a C type the lowering cannot "
                "pass; extend AbiKindOf and abiType");
};
template <typename T> struct AbiKindOf<T *> {
  static constexpr AbiKind kind = AbiKind::Ptr;
};
template <> struct AbiKindOf<tessel_ctx *> {
  static constexpr AbiKind kind = AbiKind::Ctx;
};
template <> struct AbiKindOf<const tessel_ctx *> {
  static constexpr AbiKind kind = AbiKind::Ctx;
};
template <> struct AbiKindOf<int32_t> {
  static constexpr AbiKind kind = AbiKind::I32;
};
template <> struct AbiKindOf<uint32_t> {
  static constexpr AbiKind kind = AbiKind::I32;
};
template <> struct AbiKindOf<int64_t> {
  static constexpr AbiKind kind = AbiKind::I64;
};
template <> struct AbiKindOf<uint64_t> {
  static constexpr AbiKind kind = AbiKind::I64;
};
template <> struct AbiKindOf<double> {
  static constexpr AbiKind kind = AbiKind::F64;
};

/// The handle a C parameter of type CType takes.
template <typename CType> using AbiArg = AbiValue<AbiKindOf<CType>::kind>;

/// What a call of a function returning CType gives: a handle, or nothing.
template <typename CType> struct AbiResultOf { using type = AbiArg<CType>; };
template <> struct AbiResultOf<void> { using type = void; };
template <typename CType> using AbiResult = typename AbiResultOf<CType>::type;

/// The arguments of one call, in the prototype's order and number. Built
/// from a braced list, whose elements C++ evaluates left to right, so the
/// constants of a call are emitted in the order they are written.
template <typename... CTypes> struct AbiArgs {
  AbiArgs(AbiArg<CTypes>... args) : values{mlir::Value(args)...} {}
  mlir::Value values[sizeof...(CTypes) + 1]; // + 1: no zero-length array
};

/// A runtime function generated code calls: its C name; the signature is
/// its prototype in runtime.h.
template <typename Signature> struct RuntimeFunction;
template <typename Result, typename... Params>
struct RuntimeFunction<Result(Params...)> {
  llvm::StringLiteral name;

  /// The LLVM type of the C prototype.
  static mlir::LLVM::LLVMFunctionType type(mlir::MLIRContext *context) {
    mlir::Type result;
    if constexpr (std::is_void_v<Result>)
      result = mlir::LLVM::LLVMVoidType::get(context);
    else
      result = abiType(AbiKindOf<Result>::kind, context);
    return mlir::LLVM::LLVMFunctionType::get(
        result, {abiType(AbiKindOf<Params>::kind, context)...});
  }
};

/// rt::tessel_matmul and the like: one per entry of runtime_abi.def, typed
/// by runtime.h's declaration of the same name.
namespace rt {
#define TESSEL_ABI_FN(fn)                                                      \
  inline constexpr RuntimeFunction<decltype(::fn)> fn{#fn};
#include "runtime/include/tessel/runtime_abi.def"
} // namespace rt

} // namespace tessel::lowering

#endif // TESSEL_PASSES_LOWERING_RUNTIMEABI_H
