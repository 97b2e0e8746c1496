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

/// The first inner row dimension (index >= 1 of the row dimensions) an
/// operand splits, where the other splits it alike or not at all (a
/// partial sum there is reduce-scattered into the blocks), every row
/// dimension before it splits alike in both and every one after it is
/// whole in both; its axes, and the dimension (-1 if none).
std::pair<int64_t, MeshAxes>
splitInnerRow(const DimSharding &a, const DimSharding &c, int64_t rowDims) {
  if (a[0] != c[0])
    return {-1, {}};
  for (int64_t dim = 1; dim < rowDims; ++dim) {
    if (a[dim].empty() && c[dim].empty())
      continue;
    if (!a[dim].empty() && !c[dim].empty() && a[dim] != c[dim])
      return {-1, {}};
    for (int64_t after = dim + 1; after < rowDims; ++after)
      if (!a[after].empty() || !c[after].empty())
        return {-1, {}};
    return {dim, a[dim].empty() ? c[dim] : a[dim]};
  }
  return {-1, {}};
}

/// [d0 .. d(j-1), n, rest, cols]: row dimension j cut into its n blocks,
/// the rows after the block's start merged (two reshapes: each a plain
/// split or merge, whose leading loop carries the split).
Value blockRows(OpBuilder &b, Location loc, Value source, int64_t dim,
                int64_t blocks) {
  auto type = cast<RankedTensorType>(source.getType());
  ArrayRef<int64_t> shape = type.getShape();
  int64_t rowDims = type.getRank() - 1;
  SmallVector<int64_t> split(shape.take_front(dim));
  split.append({blocks, shape[dim] / blocks});
  split.append(shape.begin() + dim + 1, shape.end());
  Value value = nn::ReshapeOp::create(
      b, loc, RankedTensorType::get(split, type.getElementType()), source);
  if (dim + 1 == rowDims)
    return value;
  int64_t rest = shape[dim] / blocks;
  for (int64_t after = dim + 1; after < rowDims; ++after)
    rest *= shape[after];
  SmallVector<int64_t> merged(shape.take_front(dim));
  merged.append({blocks, rest, shape.back()});
  return nn::ReshapeOp::create(
      b, loc, RankedTensorType::get(merged, type.getElementType()), value);
}

/// Rewrites one contraction if both operands split an inner row
/// dimension; true if it did.
bool rewrite(nn::MatmulOp matmul, const Mesh &mesh,
             llvm::function_ref<DimSharding(Value)> shardingOf) {
  if (!matmul.getTransposeLhs() || matmul.getTransposeRhs() ||
      matmul.getType().getRank() != 2)
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
      int64_t(rhsSharding.size()) != rhsType.getRank())
    return false;
  auto [dim, axes] = splitInnerRow(lhsSharding, rhsSharding, rowDims);
  if (dim < 0)
    return false;
  int64_t blocks = mesh.groupSize(axes);
  if (blocks <= 1 || lhsType.getDimSize(dim) % blocks != 0)
    return false;
  OpBuilder b(matmul);
  Location loc = matmul.getLoc();
  Value a = blockRows(b, loc, lhs, dim, blocks);
  Value c = blockRows(b, loc, rhs, dim, blocks);
  Value products = nn::MatmulOp::create(b, loc, a, c, b.getUnitAttr(),
                                        /*transpose_rhs=*/nullptr);
  SmallVector<int64_t> batch = llvm::to_vector(llvm::seq<int64_t>(0, dim + 1));
  Value sum =
      nn::ReduceSumOp::create(b, loc, products, b.getDenseI64ArrayAttr(batch));
  matmul.getResult().replaceAllUsesWith(sum);
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
    ModuleOp module, const Mesh &mesh,
    llvm::function_ref<DimSharding(Value)> shardingOf) {
  SmallVector<nn::MatmulOp> matmuls;
  module.walk([&](nn::MatmulOp op) { matmuls.push_back(op); });
  bool changed = false;
  for (nn::MatmulOp matmul : matmuls)
    changed |= rewrite(matmul, mesh, shardingOf);
  return changed;
}
