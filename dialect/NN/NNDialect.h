//===- NNDialect.h - the nn model dialect ------------------------*- C++ -*-===//

#ifndef TESSEL_DIALECT_NN_NNDIALECT_H
#define TESSEL_DIALECT_NN_NNDIALECT_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

#include "dialect/NN/NNDialect.h.inc"

#endif // TESSEL_DIALECT_NN_NNDIALECT_H
