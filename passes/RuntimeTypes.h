//===- RuntimeTypes.h - MLIR element types as runtime dtype codes -*- C++ -*-===//

#ifndef TESSEL_PASSES_RUNTIMETYPES_H
#define TESSEL_PASSES_RUNTIMETYPES_H

#include "runtime/include/tessel/runtime.h"

#include "mlir/IR/Types.h"

#include <optional>

namespace tessel {

/// The tessel_dtype code of an element type the runtime stores, if any.
inline std::optional<int32_t> runtimeDtype(mlir::Type type) {
  if (type.isF32())
    return TESSEL_F32;
  if (type.isF16())
    return TESSEL_F16;
  if (type.isBF16())
    return TESSEL_BF16;
  if (type.isF64())
    return TESSEL_F64;
  if (type.isSignlessInteger(32))
    return TESSEL_I32;
  if (type.isSignlessInteger(64))
    return TESSEL_I64;
  return std::nullopt;
}

} // namespace tessel

#endif // TESSEL_PASSES_RUNTIMETYPES_H
