//===- NormRules.h - What a normalisation and its gradient share -*- C++ -*-===//
//
// layer_norm, rms_norm and batch_norm and their gradients check their
// parameters and epsilon the same way and split by one sharding rule, read
// from the loop their vector parameters are indexed by and how many there
// are. NormOps.cpp (the forwards) and GradOps.cpp (the gradients) both ask
// it, so a norm's rule is written once.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_DIALECT_NN_NORMRULES_H
#define TESSEL_DIALECT_NN_NORMRULES_H

#include "mlir/Dialect/Shard/Interfaces/ShardingInterface.h"
#include "mlir/Dialect/Utils/StructuredOpsUtils.h"
#include "mlir/IR/AffineMap.h"
#include "mlir/IR/Operation.h"
#include "llvm/ADT/APFloat.h"

#include <optional>

namespace tessel::nn::detail {

/// Checks that a vector parameter (`gamma`, `beta`) has `size` elements of
/// `elementType`, the size of the input's `dimName` dimension.
mlir::LogicalResult verifyNormParam(std::optional<mlir::Location> loc,
                                    llvm::StringRef name, mlir::Type paramType,
                                    int64_t size, mlir::Type elementType,
                                    llvm::StringRef dimName);

/// Checks that a norm's epsilon is positive.
mlir::LogicalResult verifyNormEpsilon(mlir::Operation *op,
                                      const llvm::APFloat &epsilon);

/// The sharding rule of a norm over a rank-`rank` input whose `numParams`
/// vector parameters are indexed by loop `paramLoop` (the last dimension
/// for layer and RMS norm, the feature dimension for batch norm).
struct NormShardingRule {
  mlir::MLIRContext *ctx;
  int64_t rank;
  int64_t paramLoop;
  int64_t numParams;

  /// Forward: every loop parallel; maps x, each parameter, y.
  llvm::SmallVector<mlir::utils::IteratorType> forwardLoops() const;
  llvm::SmallVector<mlir::AffineMap> forwardMaps() const;
  /// Gradient: the statistics loops (all but `paramLoop`) are sum
  /// reductions for the parameter gradients; maps x, gamma, dy, then dx and
  /// one per parameter gradient.
  llvm::SmallVector<mlir::utils::IteratorType> gradLoops() const;
  llvm::SmallVector<mlir::AffineMap> gradMaps() const;
  llvm::SmallVector<mlir::shard::ReductionKind> gradReductionKinds() const;
};

} // namespace tessel::nn::detail

#endif // TESSEL_DIALECT_NN_NORMRULES_H
