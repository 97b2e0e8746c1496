//===- FuseEpilogues.cpp - tessel-fuse-epilogues: adds into their kernels -===//
//
// A GEMM library adds to its product for free: cuBLASLt's beta = 1 sums the
// product into the output, its bias epilogue adds a vector to every row,
// its GELU epilogues apply a tanh GELU (keeping its input) or the GELU's
// derivative. The compiler sees these patterns in a partitioned step: a
// weight gradient's matmul followed by the accumulate into its gradient
// buffer, a linear layer's matmul followed by the add of its broadcast
// bias and then a tanh GELU, and in the backward the matmul computing the
// GELU's output gradient followed by the GELU's gradient (the bias
// gradient's sum beside its weight gradient's GEMM is
// tessel-fuse-bias-grads', after the overlap of communication), and a sum
// of products into a temporary (a layer's input gradient through its q, k
// and v projections). Folding them saves a kernel and a pass over the
// product (or the output gradient) each and, for the accumulate, the
// product's buffer. Beside the GEMMs,
// the same holds for a transformer's residual stream: its add and the norm
// of the sum are one pass over the rows, and so are a norm's input
// gradient and its add into the stream's gradient. And under bf16 mixed
// precision for the loss: the cross-entropy reads the 16-bit logits
// itself and its gradient writes them rounded, so neither the logits'
// widening to f32 nor the f32 gradient's rounding is a kernel and a
// buffer of [positions, vocabulary] floats (nor, on a vocabulary split,
// of the block's: its statistics and gradient read the 16-bit block,
// ABI 30); and a step's loss and its
// gradient are one pass over the logits, the gradient written over them
// where nothing else reads them (llm.c's fused classifier; ABI 13); a
// norm's gradient and an embedding's write the f32 gradients of their
// 16-bit parameters themselves, summed wide and rounded once (ABI 14), and
// so does a weight gradient's GEMM when its product is only widened (on
// its way to a data-parallel bucket: ABI 15).
//
//===----------------------------------------------------------------------===//

#include "passes/Communication.h"
#include "passes/FusionPlacement.h"
#include "passes/Passes.h"

#include "dialect/NN/NNOps.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/DestinationStyleOpInterface.h"

namespace tessel {
#define GEN_PASS_DEF_FUSEEPILOGUESPASS
#include "passes/Passes.h.inc"
} // namespace tessel

using namespace mlir;
using namespace tessel;
using namespace tessel::fusion;

namespace {

/// `matmul`'s product summed into `acc` by the GEMM (beta = 1), built at
/// b's insertion point; `fusedFrom` is the op the sum replaces.
Value accumulateProduct(OpBuilder &b, Operation *fusedFrom, nn::MatmulOp matmul,
                        Value acc) {
  return nn::MatmulAccumulateOp::create(
      b, b.getFusedLoc({fusedFrom->getLoc(), matmul.getLoc()}), acc.getType(),
      matmul.getLhs(), matmul.getRhs(), acc, matmul.getTransposeLhs(),
      matmul.getTransposeRhs());
}

/// acc + matmul → matmul_accumulate; an f32 acc + the cast of a 16-bit
/// matmul → matmul_accumulate into the f32 acc (the product summed in f32,
/// never rounded to 16 bits).
void fuseAccumulate(nn::AccumulateOp accumulate) {
  nn::CastOp widening = soleWidening(accumulate.getValue());
  nn::MatmulOp matmul = soleMatmul(
      widening ? widening.getInput() : accumulate.getValue());
  if (!matmul || matmul->getBlock() != accumulate->getBlock() ||
      (widening && widening->getBlock() != accumulate->getBlock()))
    return;
  Value acc = accumulate.getAcc();
  // At the matmul when the accumulator exists there and nothing reads it
  // before the accumulate would have: the operands' lifetimes stay.
  bool atMatmul =
      availableAt(acc, matmul) && !usedBetween(acc, matmul, accumulate);
  OpBuilder b(atMatmul ? matmul.getOperation() : accumulate.getOperation());
  // (Diagnostics of the in-place update point at the accumulate first.)
  accumulate.getResult().replaceAllUsesWith(
      accumulateProduct(b, accumulate, matmul, acc));
  accumulate.erase();
  if (widening)
    widening.erase();
  matmul.erase();
}

/// acc + (matmul + y), or acc + widen(matmul + y), the sum (and its
/// widening) read only there → acc + the product, summed by the GEMM where
/// it stood (a matmul_accumulate; in f32 for a widened sum, ABI 12), then
/// + y (+ widen(y)) where the sum was accumulated. A tied parameter's
/// gradient: the LM head's GEMM and the embedding's scatter-add were
/// summed and then accumulated into the gradient buffer; now they go into
/// it one by one, and the head's [V, C] product is not kept (nor its
/// operands) until the embedding's exists. In a bf16 step the sum was in
/// bf16 and widened: the product is then neither rounded nor cast, and
/// fuseParamGradWidening folds the embedding's widening. The buffer must
/// exist at the GEMM with nothing reading it in between; the sums are
/// reassociated, (acc + m) + y for acc + (m + y): the same values when acc
/// is zero (a step's first microbatch), within a rounding otherwise.
void fuseAccumulatedSum(nn::AccumulateOp accumulate) {
  nn::CastOp widenedSum = soleWidening(accumulate.getValue());
  Value sum = widenedSum ? widenedSum.getInput() : accumulate.getValue();
  auto add = sum.getDefiningOp<nn::AddOp>();
  if (!add || !add->hasOneUse() || add->getBlock() != accumulate->getBlock())
    return;
  Value acc = accumulate.getAcc();
  for (unsigned i = 0; i < 2; ++i) {
    nn::MatmulOp matmul = soleMatmul(add->getOperand(i));
    if (!matmul || matmul->getBlock() != accumulate->getBlock() ||
        !availableAt(acc, matmul) || usedBetween(acc, matmul, accumulate))
      continue;
    OpBuilder b(matmul);
    Value fused = accumulateProduct(b, accumulate, matmul, acc);
    Value other = add->getOperand(1 - i);
    if (widenedSum) {
      b.setInsertionPoint(accumulate);
      other = nn::CastOp::create(b, widenedSum.getLoc(), acc.getType(), other);
    }
    accumulate.getAccMutable().assign(fused);
    accumulate.getValueMutable().assign(other);
    if (widenedSum)
      widenedSum.erase();
    add.erase();
    matmul.erase();
    return;
  }
}

/// Whether `value` is a temporary of `block` that only its one reader
/// reads: made by a computing op of the block (not an argument, a view, a
/// wait, a repeat's or a concat's result, whose bytes are another value's),
/// or updated in place (destination style) from such a temporary read only
/// there.
bool soleTemporary(Value value, Block *block) {
  while (value.hasOneUse()) {
    auto result = dyn_cast<OpResult>(value);
    if (!result || result.getOwner()->getBlock() != block)
      return false;
    Operation *def = result.getOwner();
    if (auto dps = dyn_cast<DestinationStyleOpInterface>(def)) {
      OpOperand *init = dps.getTiedOpOperand(result);
      if (!init)
        return false;
      value = init->get();
      continue;
    }
    return isa<nn::NNDialect>(def->getDialect()) &&
           !isa<nn::ReshapeOp, nn::SliceOp, nn::BroadcastOp, nn::WaitOp,
                nn::RepeatOp, nn::ConcatOp, nn::CrossEntropyWithGradOp>(def);
  }
  return false;
}

/// x + matmul, x a temporary nothing else reads → the GEMM summing its
/// product into x in place (a matmul_accumulate, beta = 1) where the matmul
/// stood: no product buffer and no add. A layer's input gradient through
/// its q, k and v projections, dQ·Wqᵀ + dK·Wkᵀ + dV·Wvᵀ, is then three
/// GEMMs into one buffer (autograd's sum of an input's gradients, as the
/// weight gradients' accumulation already is). The same values: the
/// product rounded once, then added (tessel_matmul_epilogue's β = 1).
void fuseSumOfProducts(nn::AddOp add) {
  for (unsigned i = 0; i < 2; ++i) {
    nn::MatmulOp matmul = soleMatmul(add->getOperand(i));
    Value acc = add->getOperand(1 - i);
    if (!matmul || matmul->getBlock() != add->getBlock() ||
        acc.getType() != matmul.getType() || !availableAt(acc, matmul) ||
        !soleTemporary(acc, add->getBlock()))
      continue;
    OpBuilder b(matmul);
    add.getResult().replaceAllUsesWith(accumulateProduct(b, add, matmul, acc));
    add.erase();
    matmul.erase();
    return;
  }
}

/// Replaces `widened`, the widening cast of `producer`'s only result, by
/// the op `build(b, loc)` makes where the producer stood (writing the
/// result in f32), and erases both.
template <class Build>
void foldWidening(nn::CastOp widened, Operation *producer, Build build) {
  OpBuilder b(producer);
  Value fused = build(b, b.getFusedLoc({producer->getLoc(), widened.getLoc()}));
  widened.getResult().replaceAllUsesWith(fused);
  widened.erase();
  producer->erase();
}

/// widen(matmul) of 16-bit operands, the widening the product's only use
/// → matmul_f32 where the matmul stood: the GEMM writes the product in f32
/// (ABI 15), never rounded to 16 bits, and no cast kernel reads it again.
/// Under data parallelism a bf16 step's f32 weight gradient on its way to
/// its bucket (a GEMM accumulating into its buffer is fuseAccumulate's;
/// the logits' widening for the loss, fuseLossWidening's, runs first).
void fuseMatmulWidening(nn::CastOp widened) {
  nn::MatmulOp matmul = soleMatmul(widened.getInput());
  if (!widening(widened.getResult()) || !matmul ||
      matmul->getBlock() != widened->getBlock())
    return;
  foldWidening(widened, matmul, [&](OpBuilder &b, Location loc) {
    return nn::MatmulF32Op::create(b, loc, matmul.getLhs(), matmul.getRhs(),
                                   matmul.getTransposeLhs(),
                                   matmul.getTransposeRhs())
        .getResult();
  });
}

/// widen(reduce_sum) of a 16-bit tensor, the widening the sum's only use →
/// the sum written in f32 where it stood (tessel_reduce_f32, ABI 16): one
/// kernel instead of two, and on a GPU the sum never rounded to 16 bits. A
/// bf16 step's bias or position-embedding gradient on its way to its f32
/// bucket or buffer (tessel-fuse-bias-grads may then fold it into its
/// weight gradient's GEMM).
void fuseReduceWidening(nn::CastOp widened) {
  auto sum = widened.getInput().getDefiningOp<nn::ReduceSumOp>();
  if (!widening(widened.getResult()) || !sum || !sum->hasOneUse() ||
      sum->getBlock() != widened->getBlock())
    return;
  foldWidening(widened, sum, [&](OpBuilder &b, Location loc) {
    return nn::ReduceSumOp::create(b, loc, widened.getType(), sum.getInput(),
                                   sum.getDimsAttr(), sum.getKeepDimsAttr())
        .getResult();
  });
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

/// A layer or RMS norm's operands: beta null for RMS norm.
struct NormOperands {
  Value input, gamma, beta;
  FloatAttr epsilon;
};

/// Those of an nn.layer_norm or nn.rms_norm.
NormOperands normOperands(Operation *op) {
  if (auto norm = dyn_cast<nn::LayerNormOp>(op))
    return {norm.getInput(), norm.getGamma(), norm.getBeta(),
            norm.getEpsilonAttr()};
  auto norm = cast<nn::RmsNormOp>(op);
  return {norm.getInput(), norm.getGamma(), Value(), norm.getEpsilonAttr()};
}

/// add + layer_norm (or rms_norm) of its sum → add_norm, whose first
/// result replaces the add's (the residual stream goes on with it). Where
/// the add stood when the norm's parameters exist there (a ZeRO-3 gamma is
/// gathered late), else where the norm stood when nothing reads the sum
/// before it.
void fuseAddNorm(Operation *norm) {
  NormOperands operands = normOperands(norm);
  auto add = operands.input.getDefiningOp<nn::AddOp>();
  if (!add || add->getBlock() != norm->getBlock() ||
      add.getLhs().getType() != add.getType() ||
      add.getRhs().getType() != add.getType())
    return;
  Operation *at = nullptr;
  if (availableAt(operands.gamma, add) &&
      (!operands.beta || availableAt(operands.beta, add)))
    at = add;
  else if (!usedBetween(add.getResult(), add, norm))
    at = norm;
  else
    return;
  OpBuilder b(at);
  auto fused = nn::AddNormOp::create(
      b, b.getFusedLoc({add.getLoc(), norm->getLoc()}), add.getLhs(),
      add.getRhs(), operands.gamma, operands.beta, operands.epsilon);
  norm->getResult(0).replaceAllUsesWith(fused.getResult());
  norm->erase();
  add.getResult().replaceAllUsesWith(fused.getSum());
  add.erase();
}

/// Whether `add` is the last work of its block and a collective reduces
/// one of `grad`'s parameter gradients: tessel-overlap-communication then
/// starts that collective before the add, which it overlaps (a layer's
/// first norm, the end of its backward under ZeRO or DDP); merged into the
/// gradient, the collective would block.
bool coversParamCollective(Operation *grad, nn::AddOp add) {
  for (Operation *op = add->getNextNode(); op; op = op->getNextNode())
    if (communication::isOverlapCover(*op))
      return false;
  for (Value param : grad->getResults().drop_front())
    for (Operation *user : param.getUsers())
      if (isa<shard::ShardDialect>(user->getDialect()))
        return true;
  return false;
}

/// The widening cast to f32 that is `value`'s only user, or null.
nn::CastOp widenedOnlyBy(Value value) {
  if (!value.hasOneUse())
    return nn::CastOp();
  auto cast = dyn_cast<nn::CastOp>(*value.getUsers().begin());
  return cast && widening(cast.getResult()) ? cast : nn::CastOp();
}

/// Parameter gradients of one 16-bit kernel (a norm gradient's dγ and dβ,
/// an embedding's table gradient), each only widened to f32 (a bf16
/// step's f32 gradients) → the kernel writes them in f32 (ABI 14): its
/// sums rounded once, not to 16 bits and widened, and no cast kernel each.
/// All or none: one kernel writes its parameter gradients in one type.
void fuseParamGradWidening(ResultRange grads) {
  SmallVector<nn::CastOp> casts;
  for (Value param : grads) {
    nn::CastOp cast = widenedOnlyBy(param);
    if (!cast)
      return;
    casts.push_back(cast);
  }
  for (auto [param, cast] : llvm::zip(grads, casts)) {
    param.setType(cast.getType());
    cast.getResult().replaceAllUsesWith(param);
    cast.erase();
  }
}

/// layer_norm_grad (or rms_norm_grad) + the add of its dx, used only
/// there, to another gradient → norm_grad_add, unless the add is what a
/// parameter gradient's collective overlaps. Where the gradient stood when
/// the other addend exists there, else where the add stood when nothing
/// reads the parameter gradients before it.
void fuseNormGradAdd(Operation *grad) {
  Value dx = grad->getResult(0);
  if (!dx.hasOneUse())
    return;
  auto add = dyn_cast<nn::AddOp>(*dx.getUsers().begin());
  if (!add || add->getBlock() != grad->getBlock() ||
      add.getLhs() == add.getRhs())
    return;
  Value residual = add.getLhs() == dx ? add.getRhs() : add.getLhs();
  if (residual.getType() != dx.getType() || add.getType() != dx.getType() ||
      coversParamCollective(grad, add))
    return;
  Operation *at = nullptr;
  if (availableAt(residual, grad))
    at = grad;
  else if (llvm::all_of(grad->getResults().drop_front(), [&](Value param) {
             return onlyUsedAfter(param, add);
           }))
    at = add;
  else
    return;
  bool rms = isa<nn::RmsNormGradOp>(grad);
  FloatAttr epsilon = rms ? cast<nn::RmsNormGradOp>(grad).getEpsilonAttr()
                          : cast<nn::LayerNormGradOp>(grad).getEpsilonAttr();
  OpBuilder b(at);
  // The parameter gradients' types as the gradient's (f32 when widened).
  auto fused = nn::NormGradAddOp::create(
      b, b.getFusedLoc({grad->getLoc(), add.getLoc()}), grad->getResultTypes(),
      grad->getOperand(0), grad->getOperand(1), grad->getOperand(2), residual,
      epsilon, rms ? b.getUnitAttr() : UnitAttr());
  add.getResult().replaceAllUsesWith(fused.getDx());
  add.erase();
  for (auto [from, to] : llvm::zip(grad->getResults().drop_front(),
                                   fused->getResults().drop_front()))
    from.replaceAllUsesWith(to);
  grad->erase();
}

/// loss(widen(x)) → loss(x), its loss still f32 (the kernel widens each
/// logit, as the cast did): nn.cross_entropy, or a vocabulary-parallel
/// block's nn.vocab_loss_stats, its statistics still f32 (ABI 30). The
/// logits are operand 0; the widening goes when nothing else reads it.
void fuseLossWidening(Operation *loss) {
  nn::CastOp widened = widening(loss->getOperand(0));
  if (!widened)
    return;
  loss->setOperand(0, widened.getInput());
  if (widened->use_empty())
    widened->erase();
}

/// round(grad(widen(x), ...)) back to x's type, the gradient's only use →
/// grad(x, ...) writing x's type, its dloss (or statistics) still f32: the
/// kernel rounds each gradient as the cast did. `grad` is an
/// nn.cross_entropy_grad or a block's nn.vocab_loss_grad (ABI 30), the
/// logits operand 0 and the gradient its one result.
void fuseLossGradRounding(Operation *grad) {
  nn::CastOp widened = widening(grad->getOperand(0));
  if (!widened || !grad->hasOneUse())
    return;
  auto rounding = dyn_cast<nn::CastOp>(*grad->getUsers().begin());
  if (!rounding || rounding.getType() != widened.getInput().getType())
    return;
  grad->setOperand(0, widened.getInput());
  grad->getResult(0).setType(rounding.getType());
  grad->setLoc(
      FusedLoc::get(grad->getContext(), {grad->getLoc(), rounding.getLoc()}));
  rounding.getResult().replaceAllUsesWith(grad->getResult(0));
  rounding->erase();
  if (widened->use_empty())
    widened->erase();
}

/// cross_entropy(z, y) and cross_entropy_grad(z, y, dloss) of the same
/// reduction and options, the loss first → cross_entropy_with_grad: each row's
/// statistics read once. Where the loss stood when dloss exists there (a
/// training step's seed, a constant), else where the gradient stood when
/// nothing reads the loss before it. In place (the gradient written over
/// the logits) when the two are the only readers of logits a kernel of
/// this block made: not an argument (the caller's memory) nor a view
/// (another value's bytes).
void fuseLossWithGrad(nn::CrossEntropyGradOp grad) {
  Value logits = grad.getLogits();
  nn::CrossEntropyOp loss;
  for (Operation *user : logits.getUsers())
    if (auto candidate = dyn_cast<nn::CrossEntropyOp>(user))
      if (candidate->getBlock() == grad->getBlock() &&
          candidate->isBeforeInBlock(grad) &&
          candidate.getLabels() == grad.getLabels() &&
          candidate.getReduction() == grad.getReduction() &&
          candidate.getLabelSmoothingAttr() == grad.getLabelSmoothingAttr() &&
          candidate.getLogitSoftcapAttr() == grad.getLogitSoftcapAttr() &&
          candidate.getType() == grad.getDloss().getType())
        loss = candidate;
  if (!loss)
    return;
  // The fused op stands at the loss, where the seed must exist (a seed
  // computed after the loss from values before it moves up: a masked
  // loss's weights over its count), or at the gradient, when nothing
  // between reads the loss.
  Operation *at = nullptr;
  if (onlyUsedAfter(loss.getResult(), grad))
    at = availableAt(grad.getDloss(), loss) ? loss.getOperation()
                                            : grad.getOperation();
  else if (hoistAbove(grad.getDloss(), loss))
    at = loss;
  else
    return;
  Operation *producer = logits.getDefiningOp();
  bool inPlace = producer && !isa<nn::ReshapeOp>(producer) &&
                 producer->getBlock() == grad->getBlock() &&
                 llvm::all_of(logits.getUsers(), [&](Operation *user) {
                   return user == loss || user == grad;
                 });
  OpBuilder b(at);
  auto fused = nn::CrossEntropyWithGradOp::create(
      b, b.getFusedLoc({loss.getLoc(), grad.getLoc()}),
      TypeRange{loss.getType(), grad.getType()}, logits, grad.getLabels(),
      grad.getDloss(), grad.getReductionAttr(),
      inPlace ? b.getUnitAttr() : UnitAttr(), grad.getLabelSmoothingAttr(),
      grad.getLogitSoftcapAttr());
  loss.getResult().replaceAllUsesWith(fused.getLoss());
  grad.getResult().replaceAllUsesWith(fused.getDlogits());
  loss->erase();
  grad->erase();
}

/// A vocabulary-parallel block's gradient written over the block's logits
/// (as the fused loss's is) when the block's statistics before it and the
/// gradient are their only readers, and a kernel of this block made them:
/// every statistic is read before the gradient overwrites the logits.
void markVocabGradInPlace(nn::VocabLossGradOp grad) {
  Value logits = grad.getLogits();
  Operation *producer = logits.getDefiningOp();
  if (!producer || isa<nn::ReshapeOp>(producer) ||
      producer->getBlock() != grad->getBlock())
    return;
  for (Operation *user : logits.getUsers())
    if (user != grad &&
        !(isa<nn::VocabLossStatsOp>(user) &&
          user->getBlock() == grad->getBlock() && user->isBeforeInBlock(grad)))
      return;
  grad.setInPlace(true);
}

struct FuseEpiloguesPass
    : tessel::impl::FuseEpiloguesPassBase<FuseEpiloguesPass> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<nn::AccumulateOp> accumulates;
    SmallVector<nn::AddOp> adds;
    SmallVector<nn::GeluOp> gelus;
    SmallVector<nn::GeluGradOp> geluGrads;
    SmallVector<Operation *> norms, normGrads;
    // The losses and their gradients: whole rows' and vocabulary blocks'.
    SmallVector<Operation *> losses, lossGrads;
    SmallVector<nn::EmbeddingGradOp> embeddingGrads;
    getOperation().walk([&](Operation *op) {
      if (isa<nn::CrossEntropyOp, nn::VocabLossStatsOp>(op))
        losses.push_back(op);
      else if (isa<nn::CrossEntropyGradOp, nn::VocabLossGradOp>(op))
        lossGrads.push_back(op);
      else if (isa<nn::LayerNormOp, nn::RmsNormOp>(op))
        norms.push_back(op);
      else if (isa<nn::LayerNormGradOp, nn::RmsNormGradOp>(op))
        normGrads.push_back(op);
      else if (auto accumulate = dyn_cast<nn::AccumulateOp>(op))
        accumulates.push_back(accumulate);
      else if (auto add = dyn_cast<nn::AddOp>(op))
        adds.push_back(add);
      else if (auto gelu = dyn_cast<nn::GeluOp>(op))
        gelus.push_back(gelu);
      else if (auto grad = dyn_cast<nn::GeluGradOp>(op))
        geluGrads.push_back(grad);
      else if (auto grad = dyn_cast<nn::EmbeddingGradOp>(op))
        embeddingGrads.push_back(grad);
    });
    // The GELU's gradient before the accumulates: its matmul is not a
    // weight gradient's, and the GELU after the bias adds it fuses with.
    for (nn::GeluGradOp grad : geluGrads)
      fuseGeluGrad(grad);
    // The bias adds before the accumulates: fuseAccumulatedSum erases the
    // adds it folds (a widened sum's, never a bias's), which `adds` holds.
    for (nn::AddOp add : adds)
      fuseBias(add);
    for (nn::AccumulateOp accumulate : accumulates) {
      fuseAccumulatedSum(accumulate); // keeps the accumulate, of y
      fuseAccumulate(accumulate);
    }
    for (nn::GeluOp gelu : gelus)
      fuseGelu(gelu);
    // The adds left (the bias adds and accumulated sums erased theirs).
    SmallVector<nn::AddOp> sums;
    getOperation().walk([&](nn::AddOp add) { sums.push_back(add); });
    for (nn::AddOp add : sums)
      fuseSumOfProducts(add);
    // The gradients first: they read the widening the loss may then erase.
    for (Operation *grad : lossGrads)
      fuseLossGradRounding(grad);
    for (Operation *loss : losses)
      fuseLossWidening(loss);
    // One loop: fuseLossWithGrad erases the gradient it folds.
    for (Operation *grad : lossGrads) {
      if (auto block = dyn_cast<nn::VocabLossGradOp>(grad))
        markVocabGradInPlace(block);
      else
        fuseLossWithGrad(cast<nn::CrossEntropyGradOp>(grad));
    }
    for (Operation *grad : normGrads)
      fuseParamGradWidening(grad->getResults().drop_front());
    for (nn::EmbeddingGradOp grad : embeddingGrads)
      fuseParamGradWidening(grad->getResults());
    // The widenings the fusions above left (they erase the ones they fold).
    SmallVector<nn::CastOp> casts;
    getOperation().walk([&](nn::CastOp cast) { casts.push_back(cast); });
    for (nn::CastOp cast : casts) {
      if (cast.getInput().getDefiningOp<nn::ReduceSumOp>())
        fuseReduceWidening(cast);
      else
        fuseMatmulWidening(cast);
    }
    // After the bias adds: a norm of a linear layer's output keeps the
    // bias in the GEMM.
    if (residualNorms) {
      for (Operation *norm : norms)
        fuseAddNorm(norm);
      for (Operation *grad : normGrads)
        fuseNormGradAdd(grad);
    }
  }
};

} // namespace
