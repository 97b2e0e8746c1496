//===- FuseEpilogues.cpp - tessel-fuse-epilogues: adds into the GEMM ------===//
//
// A GEMM library adds to its product for free: cuBLASLt's beta = 1 sums the
// product into the output, its bias epilogue adds a vector to every row.
// The compiler sees both patterns in a partitioned step: a weight
// gradient's matmul followed by the accumulate into its gradient buffer,
// and a linear layer's matmul followed by the add of its broadcast bias.
// Folding them saves a kernel, a pass over the product and, for the
// accumulate, the product's buffer.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "dialect/NN/NNOps.h"

#include "mlir/IR/Builders.h"

namespace tessel {
#define GEN_PASS_DEF_FUSEEPILOGUESPASS
#include "passes/Passes.h.inc"
} // namespace tessel

using namespace mlir;
using namespace tessel;

namespace {

/// The matmul that defines `value` when the op using it is its only user.
nn::MatmulOp soleMatmul(Value value) {
  auto matmul = value.getDefiningOp<nn::MatmulOp>();
  return matmul && matmul->hasOneUse() ? matmul : nn::MatmulOp();
}

/// Whether something between `from` and `to` (same block, `from` first)
/// uses `value`.
bool usedBetween(Value value, Operation *from, Operation *to) {
  for (Operation *user : value.getUsers()) {
    if (user == to)
      continue;
    if (user->getBlock() != from->getBlock() ||
        (from->isBeforeInBlock(user) && user->isBeforeInBlock(to)))
      return true;
  }
  return false;
}

/// acc + matmul → matmul_accumulate.
void fuseAccumulate(nn::AccumulateOp accumulate) {
  nn::MatmulOp matmul = soleMatmul(accumulate.getValue());
  if (!matmul || matmul->getBlock() != accumulate->getBlock())
    return;
  Value acc = accumulate.getAcc();
  // At the matmul when the accumulator exists there and nothing reads it
  // before the accumulate would have: the operands' lifetimes stay.
  Operation *accDef = acc.getDefiningOp();
  bool atMatmul = (!accDef || accDef->getBlock() != matmul->getBlock() ||
                   accDef->isBeforeInBlock(matmul)) &&
                  !usedBetween(acc, matmul, accumulate);
  OpBuilder b(atMatmul ? matmul.getOperation() : accumulate.getOperation());
  // Diagnostics of the in-place update point at the accumulate first.
  Location loc = b.getFusedLoc({accumulate.getLoc(), matmul.getLoc()});
  auto fused = nn::MatmulAccumulateOp::create(
      b, loc, acc.getType(), matmul.getLhs(), matmul.getRhs(), acc,
      matmul.getTransposeLhs(), matmul.getTransposeRhs());
  accumulate.getResult().replaceAllUsesWith(fused.getResult());
  accumulate.erase();
  matmul.erase();
}

/// The bias vector broadcast along the last dimension into `value`'s type.
Value broadcastBias(Value value) {
  auto broadcast = value.getDefiningOp<nn::BroadcastOp>();
  if (!broadcast)
    return Value();
  auto bias = cast<RankedTensorType>(broadcast.getInput().getType());
  auto result = cast<RankedTensorType>(broadcast.getType());
  ArrayRef<int64_t> dims = broadcast.getDims();
  if (bias.getRank() != 1 || result.getRank() < 1 || dims.size() != 1 ||
      dims[0] != result.getRank() - 1 ||
      bias.getDimSize(0) != result.getShape().back())
    return Value();
  return broadcast.getInput();
}

/// matmul + broadcast bias → matmul_bias.
void fuseBias(nn::AddOp add) {
  for (auto [product, other] : {std::pair(add.getLhs(), add.getRhs()),
                                std::pair(add.getRhs(), add.getLhs())}) {
    nn::MatmulOp matmul = soleMatmul(product);
    Value bias = broadcastBias(other);
    if (!matmul || !bias || product.getType() != add.getType())
      continue;
    Operation *broadcast = other.getDefiningOp();
    OpBuilder b(add);
    auto fused = nn::MatmulBiasOp::create(
        b, b.getFusedLoc({matmul.getLoc(), add.getLoc()}), matmul.getLhs(),
        matmul.getRhs(), bias, matmul.getTransposeLhs(),
        matmul.getTransposeRhs());
    add.getResult().replaceAllUsesWith(fused.getResult());
    add.erase();
    matmul.erase();
    if (broadcast->use_empty())
      broadcast->erase();
    return;
  }
}

struct FuseEpiloguesPass
    : tessel::impl::FuseEpiloguesPassBase<FuseEpiloguesPass> {
  void runOnOperation() override {
    SmallVector<nn::AccumulateOp> accumulates;
    SmallVector<nn::AddOp> adds;
    getOperation().walk([&](Operation *op) {
      if (auto accumulate = dyn_cast<nn::AccumulateOp>(op))
        accumulates.push_back(accumulate);
      else if (auto add = dyn_cast<nn::AddOp>(op))
        adds.push_back(add);
    });
    for (nn::AccumulateOp accumulate : accumulates)
      fuseAccumulate(accumulate);
    for (nn::AddOp add : adds)
      fuseBias(add);
  }
};

} // namespace
