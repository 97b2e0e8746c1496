//===- TensorDescription.h - a tensor of the description --------*- C++ -*-===//
//
// The JSON pieces docs/model-abi.md gives each tensor of the compiled model
// (its name, role, dtype, shape and place; its initialiser, axes, value
// limit and, on a mesh, its global shape and sharding) and the training
// settings; ModelAbi.cpp assembles them.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_PASSES_LOWERING_TENSORDESCRIPTION_H
#define TESSEL_PASSES_LOWERING_TENSORDESCRIPTION_H

#include "passes/Sharding.h"

#include "dialect/NN/NNAttrs.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/JSON.h"

#include <optional>

namespace tessel::lowering {

/// {name, role, dtype, shape, offset, bytes} of a tensor of `type` at
/// `offset` in the arena.
llvm::json::Object describeTensor(llvm::StringRef name, llvm::StringRef role,
                                  mlir::Type type, int64_t offset);

/// A parameter's initialiser: {kind, args}.
llvm::json::Object describeInit(nn::InitAttr init);

/// The logical axis names of a function's argument `i` (nn.axes).
llvm::json::Array describeAxes(mlir::func::FuncOp func, unsigned i);

/// The module's training settings, as the description's "train".
llvm::json::Object describeTrain(mlir::DictionaryAttr train);

/// The exclusive upper bound of an integer input: the (global) vocabulary
/// of the embedding or the classes of the cross-entropy that reads it (a
/// vocabulary-parallel one: its block times the group of its block axes).
std::optional<int64_t> valueLimit(mlir::Value arg,
                                  const std::optional<Mesh> &mesh);

/// The label value a loss reading `arg` ignores (its nn.mask_labels'
/// ignore_index), if any: a label may be it as well as a class.
std::optional<int64_t> valueIgnoreIndex(mlir::Value arg);

/// On a mesh, adds the tensor's global shape and (when split) the mesh axes
/// that split each dimension (the arena holds the local shard). Fails with
/// a diagnostic on `func` for a sharding that does not fit the mesh, or
/// any sharding without a mesh; `what` names the tensor there.
mlir::LogicalResult describeSharding(llvm::json::Object &tensor,
                                     mlir::func::FuncOp func,
                                     mlir::ArrayAttr sharding, mlir::Type type,
                                     const llvm::Twine &what,
                                     const std::optional<Mesh> &mesh);

} // namespace tessel::lowering

#endif // TESSEL_PASSES_LOWERING_TENSORDESCRIPTION_H
