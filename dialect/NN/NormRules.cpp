//===- NormRules.cpp - What a normalisation and its gradient share --------===//

#include "dialect/NN/NormRules.h"
#include "dialect/NN/NNOpsUtils.h"

#include "mlir/IR/BuiltinTypes.h"

using namespace mlir;
using namespace tessel;

LogicalResult nn::detail::verifyNormParam(std::optional<Location> loc,
                                          StringRef name, Type paramType,
                                          int64_t size, Type elementType,
                                          StringRef dimName) {
  auto param = cast<RankedTensorType>(paramType);
  if (param.getRank() != 1 || param.getDimSize(0) != size ||
      param.getElementType() != elementType)
    return inferError(loc, name, " must be ",
                      RankedTensorType::get({size}, elementType),
                      " (the size of the ", dimName, " dimension), got ",
                      param);
  return success();
}

LogicalResult nn::detail::verifyNormEpsilon(Operation *op,
                                            const APFloat &epsilon) {
  if (!(epsilon.convertToDouble() > 0.0))
    return op->emitOpError()
           << "epsilon must be positive, got " << epsilon.convertToDouble();
  return success();
}

SmallVector<utils::IteratorType>
nn::detail::NormShardingRule::forwardLoops() const {
  return parallelLoops(rank);
}

SmallVector<AffineMap> nn::detail::NormShardingRule::forwardMaps() const {
  AffineMap identity = AffineMap::getMultiDimIdentityMap(rank, ctx);
  SmallVector<AffineMap> maps{identity};
  maps.append(numParams, projection(rank, {paramLoop}, ctx));
  maps.push_back(identity);
  return maps;
}

SmallVector<utils::IteratorType>
nn::detail::NormShardingRule::gradLoops() const {
  SmallVector<int64_t> statistics;
  for (int64_t loop = 0; loop < rank; ++loop)
    if (loop != paramLoop)
      statistics.push_back(loop);
  return loopsWithReductions(rank, statistics);
}

SmallVector<AffineMap> nn::detail::NormShardingRule::gradMaps() const {
  AffineMap identity = AffineMap::getMultiDimIdentityMap(rank, ctx);
  AffineMap param = projection(rank, {paramLoop}, ctx);
  SmallVector<AffineMap> maps{identity, param, identity, identity};
  maps.append(numParams, param);
  return maps;
}

SmallVector<shard::ReductionKind>
nn::detail::NormShardingRule::gradReductionKinds() const {
  return SmallVector<shard::ReductionKind>(rank - 1, shard::ReductionKind::Sum);
}
