//===- RuntimeAbiTest.cpp - lowered calls follow runtime.h ----------------===//
//
// The guarantees of passes/lowering/RuntimeAbi.h: a runtime call takes
// exactly its prototype's arguments, each a handle of its C type's kind
// (checked at compile time, so a regression stops this file's build), and
// its LLVM declaration is the prototype's.
//
//===----------------------------------------------------------------------===//

#include "passes/lowering/RuntimeAbi.h"

#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

#include <string>
#include <type_traits>

using namespace tessel::lowering;

namespace {

// tessel_matmul's arguments after the context, as runtime.h declares them.
using MatmulArgs =
    AbiArgs<int32_t, const void *, const void *, void *, int64_t, int64_t,
            int64_t, int64_t, int32_t, int32_t, int32_t>;
static_assert(std::is_constructible_v<MatmulArgs, I32Value, PtrValue, PtrValue,
                                      PtrValue, I64Value, I64Value, I64Value,
                                      I64Value, I32Value, I32Value, I32Value>,
              "the prototype's arguments make a call");
static_assert(!std::is_constructible_v<MatmulArgs, I32Value, PtrValue, PtrValue,
                                       PtrValue, I64Value, I64Value, I64Value,
                                       I64Value, I32Value, I32Value>,
              "one argument short is no call");
static_assert(!std::is_constructible_v<MatmulArgs, I32Value, PtrValue, PtrValue,
                                       PtrValue, I64Value, I32Value, I64Value,
                                       I64Value, I32Value, I32Value, I32Value>,
              "an i32 for an int64_t is no call");
static_assert(!std::is_convertible_v<mlir::Value, I64Value>,
              "a raw Value is no argument");
static_assert(!std::is_convertible_v<PtrValue, CtxValue>,
              "a pointer is no context");
// The handles are runtime.h's declarations, not a copy of them.
static_assert(std::is_same_v<decltype(rt::tessel_matmul),
                             const RuntimeFunction<decltype(::tessel_matmul)>>);

std::string typeOf(mlir::Type type) {
  std::string text;
  llvm::raw_string_ostream(text) << type;
  return text;
}

TEST(RuntimeAbi, DeclarationsArePrototypes) {
  mlir::MLIRContext context;
  context.loadDialect<mlir::LLVM::LLVMDialect>();
  EXPECT_EQ(typeOf(rt::tessel_matmul.type(&context)),
            "!llvm.func<void (ptr, i32, ptr, ptr, ptr, i64, i64, i64, i64, "
            "i32, i32, i32)>");
  EXPECT_EQ(typeOf(rt::tessel_group_index.type(&context)),
            "!llvm.func<i64 (ptr, i32)>");
  EXPECT_EQ(typeOf(rt::tessel_lr_at.type(&context)),
            "!llvm.func<f64 (i32, f64, f64, i64, i64, i64)>");
  EXPECT_EQ(rt::tessel_matmul.name, "tessel_matmul");
}

} // namespace
