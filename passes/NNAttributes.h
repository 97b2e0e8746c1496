//===- NNAttributes.h - Carrying a function's nn.* attributes ---*- C++ -*-===//
//
// The passes that split a model or an entry into new functions (or a
// pipeline into stage modules) give each the nn.* attributes of the op it
// comes from: its stage, its training entry's settings.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_PASSES_NNATTRIBUTES_H
#define TESSEL_PASSES_NNATTRIBUTES_H

#include "mlir/IR/Operation.h"

namespace tessel {

/// Sets on `to` every attribute of `from` in the nn namespace.
inline void copyNNAttributes(mlir::Operation *from, mlir::Operation *to) {
  for (mlir::NamedAttribute attr : from->getAttrs())
    if (attr.getName().getValue().starts_with("nn."))
      to->setAttr(attr.getName(), attr.getValue());
}

} // namespace tessel

#endif // TESSEL_PASSES_NNATTRIBUTES_H
