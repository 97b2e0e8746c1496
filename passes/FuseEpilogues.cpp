//===- FuseEpilogues.cpp - tessel-fuse-epilogues: adds into the GEMM ------===//
//
// A GEMM library adds to its product for free: cuBLASLt's beta = 1 sums the
// product into the output, its bias epilogue adds a vector to every row,
// its GELU epilogues apply a tanh GELU (keeping its input) or the GELU's
// derivative. The compiler sees these patterns in a partitioned step: a
// weight gradient's matmul followed by the accumulate into its gradient
// buffer, a linear layer's matmul followed by the add of its broadcast
// bias and then a tanh GELU, and in the backward the matmul computing the
// GELU's output gradient followed by the GELU's gradient, and a weight
// gradient's matmul beside the sum of the same output gradient's rows (the
// bias gradient). Folding them saves a kernel and a pass over the product
// (or the output gradient) each and, for the accumulate, the product's
// buffer.
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

/// Whether `value` is available at `op`: defined in another block (an
/// enclosing one: `op` uses it in the same region), or before `op`.
bool availableAt(Value value, Operation *op) {
  Operation *def = value.getDefiningOp();
  return !def || def->getBlock() != op->getBlock() || def->isBeforeInBlock(op);
}

/// acc + matmul → matmul_accumulate.
void fuseAccumulate(nn::AccumulateOp accumulate) {
  nn::MatmulOp matmul = soleMatmul(accumulate.getValue());
  if (!matmul || matmul->getBlock() != accumulate->getBlock())
    return;
  Value acc = accumulate.getAcc();
  // At the matmul when the accumulator exists there and nothing reads it
  // before the accumulate would have: the operands' lifetimes stay.
  bool atMatmul =
      availableAt(acc, matmul) && !usedBetween(acc, matmul, accumulate);
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

/// matmul_bias + gelu approximate → matmul_bias_gelu, where the
/// matmul_bias stood: the GELU's output is the fused op's result and every
/// other reader of the biased product (the GELU's gradient) reads its pre.
void fuseGelu(nn::GeluOp gelu) {
  auto biased = gelu.getInput().getDefiningOp<nn::MatmulBiasOp>();
  if (!gelu.getApproximate() || !biased ||
      biased->getBlock() != gelu->getBlock())
    return;
  OpBuilder b(biased);
  auto fused = nn::MatmulBiasGeluOp::create(
      b, b.getFusedLoc({biased.getLoc(), gelu.getLoc()}), biased.getLhs(),
      biased.getRhs(), biased.getBias(), biased.getTransposeLhs(),
      biased.getTransposeRhs());
  gelu.getResult().replaceAllUsesWith(fused.getResult());
  gelu.erase();
  biased.getResult().replaceAllUsesWith(fused.getPre());
  biased.erase();
}

/// matmul + gelu_grad approximate of the product → matmul_gelu_grad, where
/// the matmul stood when the GELU's input exists there (the GEMM's operands
/// then live no longer than before: a ZeRO-3 gathered weight is freed as
/// early), else where the gradient stood.
void fuseGeluGrad(nn::GeluGradOp grad) {
  nn::MatmulOp matmul = soleMatmul(grad.getDy());
  if (!grad.getApproximate() || !matmul ||
      matmul->getBlock() != grad->getBlock())
    return;
  OpBuilder b(availableAt(grad.getX(), matmul) ? matmul.getOperation()
                                               : grad.getOperation());
  auto fused = nn::MatmulGeluGradOp::create(
      b, b.getFusedLoc({matmul.getLoc(), grad.getLoc()}), matmul.getLhs(),
      matmul.getRhs(), grad.getX(), matmul.getTransposeLhs(),
      matmul.getTransposeRhs());
  grad.getResult().replaceAllUsesWith(fused.getResult());
  grad.erase();
  matmul.erase();
}

/// Whether every user of `value` is after `op` in its block (or in another
/// block).
bool onlyUsedAfter(Value value, Operation *op) {
  return llvm::all_of(value.getUsers(), [&](Operation *user) {
    Operation *inBlock = op->getBlock()->findAncestorOpInBlock(*user);
    return !inBlock || op->isBeforeInBlock(inBlock);
  });
}

/// The matmul whose untransposed 2-D rhs is `rows` itself or `rows`
/// reshaped to [∏ leading dimensions, N]: the weight gradient beside the
/// bias gradient that sums `rows` over its leading dimensions. (Not rows
/// that reach the sum and the matmul through different reshapes of one
/// tensor, as attention's per-head gradients do: fusing those emptied
/// ZeRO-3's overlap windows of the q/k/v gradients, 262,144 bytes of gpt's
/// overlapped communication, for four kernels per layer.)
nn::MatmulOp weightGradientOf(Value rows, Block *block) {
  auto type = cast<RankedTensorType>(rows.getType());
  int64_t leading = 1;
  for (int64_t size : type.getShape().drop_back())
    leading *= size;
  auto flat = RankedTensorType::get({leading, type.getShape().back()},
                                    type.getElementType());
  SmallVector<Value> candidates = {rows};
  for (Operation *user : rows.getUsers())
    if (auto reshape = dyn_cast<nn::ReshapeOp>(user))
      if (reshape.getType() == flat)
        candidates.push_back(reshape.getResult());
  for (Value candidate : candidates) {
    if (candidate.getType() != flat)
      continue;
    for (OpOperand &use : candidate.getUses()) {
      auto matmul = dyn_cast<nn::MatmulOp>(use.getOwner());
      if (matmul && matmul->getBlock() == block &&
          use.getOperandNumber() == 1 && !matmul.getTransposeRhs() &&
          matmul.getLhs().getType().getRank() == 2)
        return matmul;
    }
  }
  return nn::MatmulOp();
}

/// The reshape defining `value` that would make it available at `op` if
/// moved there (a view: it computes nothing).
nn::ReshapeOp hoistableView(Value value, Operation *op) {
  auto reshape = value.getDefiningOp<nn::ReshapeOp>();
  return reshape && availableAt(reshape.getInput(), op) ? reshape
                                                        : nn::ReshapeOp();
}

/// Whether the matmul's operands exist at `op` or can by moving the
/// reshapes that define them there; moves them only when both can.
bool operandsMovableTo(nn::MatmulOp matmul, Operation *op) {
  SmallVector<Value, 2> operands = {matmul.getLhs(), matmul.getRhs()};
  for (Value v : operands)
    if (!availableAt(v, op) && !hoistableView(v, op))
      return false;
  for (Value v : operands)
    if (!availableAt(v, op))
      hoistableView(v, op)->moveBefore(op);
  return true;
}

/// reduce_sum over every leading dimension + the weight gradient's matmul
/// of the same rows → matmul_bias_grad, where the earlier of the two stood
/// when the other's operands exist there, else where the later stood when
/// nothing reads the earlier's result before it. Early, the GEMM is work
/// that the collectives started before it (a ZeRO-3 layer's prefetched
/// gathers) overlap, as the sum was.
void fuseBiasGrad(nn::ReduceSumOp sum) {
  Value rows = sum.getInput();
  auto type = cast<RankedTensorType>(rows.getType());
  if (type.getRank() < 2 || sum.getKeepDims() ||
      sum.getDims() != ArrayRef(llvm::to_vector(
                           llvm::seq<int64_t>(0, type.getRank() - 1))))
    return;
  nn::MatmulOp matmul = weightGradientOf(rows, sum->getBlock());
  if (!matmul)
    return;
  Operation *at = nullptr;
  if (matmul->isBeforeInBlock(sum))
    at = matmul; // the rows exist there: the matmul reads them
  else if (operandsMovableTo(matmul, sum))
    at = sum;
  else if (onlyUsedAfter(sum.getResult(), matmul))
    at = matmul;
  else
    return;
  OpBuilder b(at);
  auto fused = nn::MatmulBiasGradOp::create(
      b, b.getFusedLoc({matmul.getLoc(), sum.getLoc()}), matmul.getLhs(),
      matmul.getRhs(), matmul.getTransposeLhs(), /*transpose_rhs=*/false);
  matmul.getResult().replaceAllUsesWith(fused.getResult());
  sum.getResult().replaceAllUsesWith(fused.getBiasGrad());
  matmul.erase();
  sum.erase();
}

struct FuseEpiloguesPass
    : tessel::impl::FuseEpiloguesPassBase<FuseEpiloguesPass> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<nn::AccumulateOp> accumulates;
    SmallVector<nn::AddOp> adds;
    SmallVector<nn::GeluOp> gelus;
    SmallVector<nn::GeluGradOp> geluGrads;
    SmallVector<nn::ReduceSumOp> sums;
    getOperation().walk([&](Operation *op) {
      if (auto accumulate = dyn_cast<nn::AccumulateOp>(op))
        accumulates.push_back(accumulate);
      else if (auto add = dyn_cast<nn::AddOp>(op))
        adds.push_back(add);
      else if (auto gelu = dyn_cast<nn::GeluOp>(op))
        gelus.push_back(gelu);
      else if (auto grad = dyn_cast<nn::GeluGradOp>(op))
        geluGrads.push_back(grad);
      else if (auto sum = dyn_cast<nn::ReduceSumOp>(op))
        sums.push_back(sum);
    });
    // The GELU's gradient before the accumulates: its matmul is not a
    // weight gradient's, and the GELU after the bias adds it fuses with.
    for (nn::GeluGradOp grad : geluGrads)
      fuseGeluGrad(grad);
    for (nn::AccumulateOp accumulate : accumulates)
      fuseAccumulate(accumulate);
    for (nn::AddOp add : adds)
      fuseBias(add);
    for (nn::GeluOp gelu : gelus)
      fuseGelu(gelu);
    // After the accumulates, which take the weight gradients outside a
    // repeated layer (a GEMM with beta 1); inside one they stay matmuls.
    if (biasGrads)
      for (nn::ReduceSumOp sum : sums)
        fuseBiasGrad(sum);
  }
};

} // namespace
