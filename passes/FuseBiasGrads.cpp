//===- FuseBiasGrads.cpp - tessel-fuse-bias-grads: Σ dY in the dW GEMM ----===//
//
// A linear layer's backward sums its output gradient's rows (the bias
// gradient) and multiplies the same rows into its weight gradient; a GEMM
// library's bias-gradient epilogue (cuBLASLt's BGRADB) does both in one
// call, a kernel and a pass over dY fewer. The fused GEMM stands where one
// of the two stood, so the other's kernel is gone from its place. This
// runs after tessel-overlap-communication so that it can see what that
// costs: a started collective overlaps the kernels between its start and
// its wait, and a place is taken only if every such window keeps one (a
// ZeRO-3 layer's prefetched gathers, whose only cover may be the sum; a
// tensor-parallel all-reduce of the input gradient, which Megatron hides
// behind the weight gradient's GEMM). Where neither place keeps them all,
// the two stay apart.
//
//===----------------------------------------------------------------------===//

#include "passes/Communication.h"
#include "passes/FusionPlacement.h"
#include "passes/Passes.h"
#include "passes/Views.h"

#include "dialect/NN/NNOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/TypeUtilities.h"

namespace tessel {
#define GEN_PASS_DEF_FUSEBIASGRADSPASS
#include "passes/Passes.h.inc"
} // namespace tessel

using namespace mlir;
using namespace tessel;
using namespace tessel::fusion;

namespace {

/// A weight gradient's GEMM: an nn.matmul, an nn.matmul_f32 (a 16-bit
/// gradient written in f32), or an nn.matmul_accumulate that adds it into
/// its accumulator (a repeated layer's gradient summed in its slice,
/// tessel-accumulate-in-layers).
struct WeightGradient {
  Operation *op = nullptr;
  Value lhs, rhs, acc;
  bool transposeLhs = false;
  explicit operator bool() const { return op; }
};

/// The weight gradient whose untransposed 2-D rhs is `rows` reshaped to
/// [∏ leading dimensions, N] (or `rows` itself): the weight gradient beside
/// the bias gradient that sums `rows` over its leading dimensions. A
/// reshape keeps the row-major order, so every view of the tensor `rows`
/// views (attention's per-head gradient, [B, S, H, D], summed as
/// [B, S, H·D] and multiplied as [B·S, H·D]) is the same rows.
WeightGradient weightGradientOf(Value rows, Block *block) {
  auto type = cast<RankedTensorType>(rows.getType());
  int64_t leading = 1;
  for (int64_t size : type.getShape().drop_back())
    leading *= size;
  auto flat = RankedTensorType::get({leading, type.getShape().back()},
                                    type.getElementType());
  for (Value candidate : views::aliasesOf(rows)) {
    if (candidate.getType() != flat)
      continue;
    for (OpOperand &use : candidate.getUses()) {
      Operation *user = use.getOwner();
      if (user->getBlock() != block || use.getOperandNumber() != 1)
        continue;
      WeightGradient found;
      if (auto matmul = dyn_cast<nn::MatmulOp>(user);
          matmul && !matmul.getTransposeRhs())
        found = {matmul, matmul.getLhs(), matmul.getRhs(), Value(),
                 matmul.getTransposeLhs()};
      else if (auto wide = dyn_cast<nn::MatmulF32Op>(user);
               wide && !wide.getTransposeRhs())
        found = {wide, wide.getLhs(), wide.getRhs(), Value(),
                 wide.getTransposeLhs()};
      else if (auto accumulate = dyn_cast<nn::MatmulAccumulateOp>(user);
               accumulate && !accumulate.getTransposeRhs())
        found = {accumulate, accumulate.getLhs(), accumulate.getRhs(),
                 accumulate.getAcc(), accumulate.getTransposeLhs()};
      if (found && cast<RankedTensorType>(found.lhs.getType()).getRank() == 2)
        return found;
    }
  }
  return WeightGradient();
}

/// The reshape defining `value` that would make it available at `op` if
/// moved there (a view: it computes nothing).
nn::ReshapeOp hoistableView(Value value, Operation *op) {
  auto reshape = value.getDefiningOp<nn::ReshapeOp>();
  return reshape && availableAt(reshape.getInput(), op) ? reshape
                                                        : nn::ReshapeOp();
}

/// Whether the matmul's operands exist at `op`, or would by moving the
/// reshapes that define them there.
bool operandsMovableTo(Operation *matmul, Operation *op) {
  return llvm::all_of(matmul->getOperands(), [&](Value v) {
    return availableAt(v, op) || hoistableView(v, op);
  });
}

/// A started collective's window in `block`: the ops between its start
/// and its wait, from the block's start when it was started before the
/// block (a prefetch), to its end when it is waited for after it.
struct Window {
  Operation *after = nullptr; // null: from the block's first op
  Operation *before = nullptr; // null: to the block's terminator
};

SmallVector<Window> windowsOf(Block &block) {
  SmallVector<Window> windows;
  for (Operation &op : block) {
    if (op.hasAttr(nn::NNDialect::kAsyncAttrName)) {
      Window window{&op, nullptr};
      for (Operation *user : op.getResult(0).getUsers())
        if (isa<nn::WaitOp>(user) && user->getBlock() == &block)
          window.before = user;
      windows.push_back(window);
    } else if (auto wait = dyn_cast<nn::WaitOp>(op)) {
      Operation *start = wait.getOperand().getDefiningOp();
      if (!start || start->getBlock() != &block)
        windows.push_back({nullptr, &op});
    }
  }
  return windows;
}

/// Whether every window keeps a kernel once `removed` is gone and the
/// fused op stands at `kept`.
bool keepsEveryCover(ArrayRef<Window> windows, Operation *removed,
                     Operation *kept) {
  Block *block = removed->getBlock();
  for (const Window &window : windows) {
    Operation *first =
        window.after ? window.after->getNextNode() : &block->front();
    Operation *last = window.before ? window.before : block->getTerminator();
    bool holdsRemoved = false, keepsOne = false;
    for (Operation *op = first; op && op != last; op = op->getNextNode()) {
      if (op == removed)
        holdsRemoved = true;
      else if (op == kept || communication::isOverlapCover(*op))
        keepsOne = true;
    }
    if (holdsRemoved && !keepsOne)
      return false;
  }
  return true;
}

/// reduce_sum over every leading dimension + the weight gradient's matmul
/// of the same rows → matmul_bias_grad, at the first of these places that
/// is legal and keeps every overlap window covered: where the matmul stood
/// (the GEMM's operands and product live as before; only the bias
/// gradient, a vector, moves), else where the sum stood (moving the views
/// that define the GEMM's operands there when it is the earlier). A GEMM
/// that accumulates stays where it is: its update in place is ordered
/// with its accumulator's other readers.
void fuseBiasGrad(nn::ReduceSumOp sum, ArrayRef<Window> windows) {
  Value rows = sum.getInput();
  auto type = cast<RankedTensorType>(rows.getType());
  if (type.getRank() < 2 || sum.getKeepDims() ||
      sum.getDims() != ArrayRef(llvm::to_vector(
                           llvm::seq<int64_t>(0, type.getRank() - 1))))
    return;
  WeightGradient gradient = weightGradientOf(rows, sum->getBlock());
  if (!gradient)
    return;
  Operation *matmul = gradient.op;
  // A 16-bit GEMM writing or accumulating into f32 writes its bias gradient
  // in f32: the sum's, written in f32 (tessel-fuse-epilogues), or the
  // sum's widening cast, the sum's only use, which it replaces.
  Type product = matmul->getResult(0).getType();
  nn::CastOp widening;
  if (getElementTypeOrSelf(product) != getElementTypeOrSelf(sum.getType())) {
    widening = sum->hasOneUse() && getElementTypeOrSelf(sum.getType()) ==
                                       getElementTypeOrSelf(gradient.rhs)
                   ? dyn_cast<nn::CastOp>(*sum->getUsers().begin())
                   : nn::CastOp();
    if (!widening || widening->getBlock() != sum->getBlock() ||
        getElementTypeOrSelf(widening.getResult()) !=
            getElementTypeOrSelf(product) ||
        !keepsEveryCover(windows, widening, matmul))
      return;
  }
  Value biasGrad = widening ? widening.getResult() : sum.getResult();
  // The sum's rows exist wherever the matmul reads them.
  bool sumFirst = sum->isBeforeInBlock(matmul);
  bool atMatmul = !sumFirst || onlyUsedAfter(biasGrad, matmul);
  bool atSum = !gradient.acc &&
               (sumFirst ? operandsMovableTo(matmul, sum)
                         : onlyUsedAfter(matmul->getResult(0), sum));
  Operation *at = nullptr;
  if (atMatmul && keepsEveryCover(windows, sum, matmul))
    at = matmul;
  else if (atSum && keepsEveryCover(windows, matmul, sum))
    at = sum;
  else
    return;
  if (at == sum)
    for (Value v : matmul->getOperands())
      if (!availableAt(v, sum))
        hoistableView(v, sum)->moveBefore(sum);
  OpBuilder b(at);
  // The results' types as the GEMM's (f32 for matmul_f32's, whose widened
  // bias gradient the types alone tell from the 16-bit one).
  auto fused = nn::MatmulBiasGradOp::create(
      b, b.getFusedLoc({matmul->getLoc(), sum.getLoc()}),
      TypeRange{product, biasGrad.getType()}, gradient.lhs, gradient.rhs,
      gradient.acc, gradient.transposeLhs, /*transpose_rhs=*/false);
  matmul->getResult(0).replaceAllUsesWith(fused.getResult());
  biasGrad.replaceAllUsesWith(fused.getBiasGrad());
  matmul->erase();
  if (widening)
    widening.erase();
  sum.erase();
  // The view only the sum read (a per-head gradient's [B, S, H·D]).
  while (auto view = rows.getDefiningOp<nn::ReshapeOp>()) {
    if (!view->use_empty())
      break;
    rows = view.getInput();
    view.erase();
  }
}

struct FuseBiasGradsPass
    : tessel::impl::FuseBiasGradsPassBase<FuseBiasGradsPass> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<Block *> blocks;
    getOperation().walk([&](Block *block) { blocks.push_back(block); });
    for (Block *block : blocks) {
      // A fusion erases a matmul and a sum, never a start or a wait: the
      // windows stay those of the block as it came.
      SmallVector<Window> windows = windowsOf(*block);
      SmallVector<nn::ReduceSumOp> sums(block->getOps<nn::ReduceSumOp>());
      for (nn::ReduceSumOp sum : sums)
        fuseBiasGrad(sum, windows);
    }
  }
};

} // namespace
