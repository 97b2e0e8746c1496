//===- NNAttrs.h - attributes of the nn dialect ------------------*- C++ -*-===//

#ifndef TESSEL_DIALECT_NN_NNATTRS_H
#define TESSEL_DIALECT_NN_NNATTRS_H

#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectImplementation.h"

#include "dialect/NN/NNEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "dialect/NN/NNAttrs.h.inc"

#endif // TESSEL_DIALECT_NN_NNATTRS_H
