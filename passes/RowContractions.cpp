//===- RowContractions.cpp - Weight gradients over split sequences -------===//
//
// See RowContractions.h. The rewrite runs between two propagations: the
// first says which dimension each operand splits, the second splits the
// rewritten contraction (tessel-propagate-sharding).
//
//===----------------------------------------------------------------------===//

#include "passes/RowContractions.h"

#include "dialect/NN/NNOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace tessel;

namespace {

/// `value` as the flattened rows of its reshape's input: [d..., K] →
/// [prod(d), K] with at least two row dimensions; the input, else null.
Value rowsSource(Value value) {
  auto reshape = value.getDefiningOp<nn::ReshapeOp>();
  if (!reshape)
    return {};
  auto in = cast<RankedTensorType>(reshape.getInput().getType());
  auto out = cast<RankedTensorType>(reshape.getType());
  if (in.getRank() < 3 || out.getRank() != 2 ||
      in.getShape().back() != out.getShape().back())
    return {};
  return reshape.getInput();
}

/// Whether `sharding` splits a row dimension after the first (of
/// `rowDims`): one that a split of the flattened rows cannot carry.
bool splitsInnerRow(const DimSharding &sharding, int64_t rowDims) {
  for (int64_t dim = 1; dim < rowDims; ++dim)
    if (!sharding[dim].empty())
      return true;
  return false;
}

/// Rewrites one contraction if an operand splits an inner row dimension;
/// true if it did.
bool rewrite(nn::MatmulOp matmul,
             llvm::function_ref<DimSharding(Value)> shardingOf) {
  if (!matmul.getTransposeLhs() || matmul.getTransposeRhs() ||
      matmul.getSumBatch() || matmul.getType().getRank() != 2)
    return false;
  Value lhs = rowsSource(matmul.getLhs()), rhs = rowsSource(matmul.getRhs());
  if (!lhs || !rhs)
    return false;
  auto lhsType = cast<RankedTensorType>(lhs.getType());
  auto rhsType = cast<RankedTensorType>(rhs.getType());
  int64_t rowDims = lhsType.getRank() - 1;
  if (rhsType.getRank() != lhsType.getRank() ||
      lhsType.getShape().drop_back() != rhsType.getShape().drop_back())
    return false;
  DimSharding lhsSharding = shardingOf(lhs), rhsSharding = shardingOf(rhs);
  if (int64_t(lhsSharding.size()) != lhsType.getRank() ||
      int64_t(rhsSharding.size()) != rhsType.getRank() ||
      !(splitsInnerRow(lhsSharding, rowDims) ||
        splitsInnerRow(rhsSharding, rowDims)))
    return false;
  OpBuilder b(matmul);
  Value summed = nn::MatmulOp::create(b, matmul.getLoc(), lhs, rhs,
                                      /*transpose_lhs=*/true,
                                      /*transpose_rhs=*/false,
                                      /*sum_batch=*/true);
  matmul.getResult().replaceAllUsesWith(summed);
  Operation *lhsRows = matmul.getLhs().getDefiningOp();
  Operation *rhsRows = matmul.getRhs().getDefiningOp();
  matmul.erase();
  if (rhsRows == lhsRows)
    rhsRows = nullptr;
  for (Operation *rows : {lhsRows, rhsRows})
    if (rows && rows->use_empty())
      rows->erase();
  return true;
}

} // namespace

bool tessel::splitRowContractions(
    ModuleOp module, llvm::function_ref<DimSharding(Value)> shardingOf) {
  SmallVector<nn::MatmulOp> matmuls;
  module.walk([&](nn::MatmulOp op) { matmuls.push_back(op); });
  bool changed = false;
  for (nn::MatmulOp matmul : matmuls)
    changed |= rewrite(matmul, shardingOf);
  return changed;
}

void tessel::flattenSummedBatches(Operation *root) {
  SmallVector<nn::MatmulOp> matmuls;
  root->walk([&](nn::MatmulOp op) {
    if (op.getSumBatch())
      matmuls.push_back(op);
  });
  for (nn::MatmulOp matmul : matmuls) {
    OpBuilder b(matmul);
    Location loc = matmul.getLoc();
    Value product = nn::MatmulOp::create(
        b, loc, nn::flattenRows(b, loc, matmul.getLhs()),
        nn::flattenRows(b, loc, matmul.getRhs()), /*transpose_lhs=*/true,
        /*transpose_rhs=*/false);
    matmul.getResult().replaceAllUsesWith(product);
    matmul.erase();
  }
}
