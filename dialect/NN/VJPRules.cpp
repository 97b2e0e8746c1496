//===- VJPRules.cpp - reverse-mode derivative of every differentiable nn op ===//
//
// Each rule builds the cotangents of an op's operands from the cotangents of
// its results with nn ops, so the backward pass lowers, plans and shards like
// the forward. Work that deserves a kernel (norms, softmax, cross-entropy,
// attention, embedding's scatter-add, gelu/silu/relu) has a backward op of
// its own; everything else is written with forward ops.
//
//===----------------------------------------------------------------------===//

#include "dialect/NN/NNOps.h"
#include "dialect/NN/NNOpsUtils.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace tessel;
using namespace tessel::nn;

namespace {

using Cotangents = FailureOr<SmallVector<Value>>;

RankedTensorType typeOf(Value value) {
  return cast<RankedTensorType>(value.getType());
}

bool isFloatTensor(Value value) {
  return isa<FloatType>(typeOf(value).getElementType());
}

/// A tensor of `type` filled with `value`.
Value splat(OpBuilder &b, Location loc, RankedTensorType type, double value) {
  auto element = cast<FloatType>(type.getElementType());
  return ConstantOp::create(
      b, loc, DenseElementsAttr::get(type, b.getFloatAttr(element, value)));
}

Value mul(OpBuilder &b, Location loc, Value lhs, Value rhs) {
  return MulOp::create(b, loc, lhs, rhs);
}

/// `value` times `factor`, a scalar broadcast: the memory plan reads it
/// where it lies, not as a filled buffer of `value`'s size (a mean over
/// the classes scales a logits-sized cotangent).
Value scaleBy(OpBuilder &b, Location loc, Value value, double factor) {
  return mul(b, loc, value,
             nn::detail::broadcastScalar(b, loc, typeOf(value), factor));
}

/// `value` summed down to `type`, undoing an nn.broadcast with `dims`:
/// result dimensions that the input does not have, and input dimensions of
/// size 1 that were repeated, are summed.
Value sumToBroadcastInput(OpBuilder &b, Location loc, Value value,
                          RankedTensorType type, ArrayRef<int64_t> dims) {
  RankedTensorType from = typeOf(value);
  SmallVector<int64_t> summed;
  for (int64_t d = 0; d < from.getRank(); ++d) {
    const int64_t *it = llvm::find(dims, d);
    if (it == dims.end() ||
        (type.getDimSize(it - dims.begin()) == 1 && from.getDimSize(d) != 1))
      summed.push_back(d);
  }
  if (!summed.empty())
    value = ReduceSumOp::create(b, loc, value, summed, /*keep_dims=*/false);
  if (typeOf(value) != type)
    value = ReshapeOp::create(b, loc, type, value);
  return value;
}

/// `value` (the shape of a reduction's result over `dims` of `type`, kept
/// or dropped) broadcast back to `type`.
Value broadcastReduced(OpBuilder &b, Location loc, Value value,
                       RankedTensorType type, ArrayRef<int64_t> dims,
                       bool keepDims) {
  RankedTensorType from = typeOf(value);
  SmallVector<int64_t> resultDims;
  for (int64_t d = 0; d < type.getRank(); ++d)
    if (keepDims || !llvm::is_contained(dims, d))
      resultDims.push_back(d);
  auto target = RankedTensorType::get(type.getShape(), from.getElementType());
  return BroadcastOp::create(b, loc, target, value, resultDims);
}

/// Swaps the last two dimensions.
Value transposeLastTwo(OpBuilder &b, Location loc, Value value) {
  int64_t rank = typeOf(value).getRank();
  SmallVector<int64_t> perm = llvm::to_vector(llvm::seq<int64_t>(0, rank));
  std::swap(perm[rank - 1], perm[rank - 2]);
  return TransposeOp::create(b, loc, value, perm);
}

/// Builds an op from its operands and named attributes, with explicit
/// result types.
template <typename OpTy>
Operation *buildWith(OpBuilder &b, Location loc, TypeRange results,
                     ValueRange operands, ArrayRef<NamedAttribute> attrs = {}) {
  return OpTy::create(b, loc, results, operands, attrs).getOperation();
}

/// The cotangents of an elementwise op whose operands all have the result's
/// type, computed one operand at a time.
template <typename Fn>
Cotangents perOperand(ArrayRef<bool> needed, Fn &&cotangentOf) {
  SmallVector<Value> grads(needed.size());
  for (auto [i, want] : llvm::enumerate(needed))
    if (want)
      grads[i] = cotangentOf(i);
  return grads;
}

/// Only float tensors carry gradients.
Cotangents floatOnly(Operation *op, ArrayRef<bool> needed,
                     function_ref<Value(unsigned)> cotangentOf) {
  SmallVector<Value> grads(needed.size());
  for (auto [i, want] : llvm::enumerate(needed))
    if (want && isFloatTensor(op->getOperand(i)))
      grads[i] = cotangentOf(i);
  return grads;
}

} // namespace

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

Cotangents CastOp::buildVJP(OpBuilder &b, ValueRange cotangents,
                            ArrayRef<bool> needed) {
  // A cast to or from an integer type has no derivative.
  if (!isFloatTensor(getInput()) || !isFloatTensor(getResult()))
    return SmallVector<Value>(1);
  return perOperand(needed, [&](unsigned) -> Value {
    return CastOp::create(b, getLoc(), getInput().getType(), cotangents[0]);
  });
}

Cotangents AddOp::buildVJP(OpBuilder &, ValueRange cotangents,
                           ArrayRef<bool> needed) {
  return floatOnly(*this, needed, [&](unsigned) { return cotangents[0]; });
}

Cotangents SubOp::buildVJP(OpBuilder &b, ValueRange cotangents,
                           ArrayRef<bool> needed) {
  return floatOnly(*this, needed, [&](unsigned i) -> Value {
    if (i == 0)
      return cotangents[0];
    return NegOp::create(b, getLoc(), cotangents[0]);
  });
}

Cotangents MulOp::buildVJP(OpBuilder &b, ValueRange cotangents,
                           ArrayRef<bool> needed) {
  return floatOnly(*this, needed, [&](unsigned i) {
    return mul(b, getLoc(), cotangents[0], getOperand(1 - i));
  });
}

Cotangents DivOp::buildVJP(OpBuilder &b, ValueRange cotangents,
                           ArrayRef<bool> needed) {
  Location loc = getLoc();
  Value overRhs;
  auto dyOverRhs = [&] {
    if (!overRhs)
      overRhs = DivOp::create(b, loc, cotangents[0], getRhs());
    return overRhs;
  };
  // d(a/b) = da / b − (a/b) · db / b.
  return floatOnly(*this, needed, [&](unsigned i) -> Value {
    if (i == 0)
      return dyOverRhs();
    return NegOp::create(b, loc, mul(b, loc, dyOverRhs(), getResult()));
  });
}

Cotangents NegOp::buildVJP(OpBuilder &b, ValueRange cotangents,
                           ArrayRef<bool> needed) {
  return perOperand(needed, [&](unsigned) -> Value {
    return NegOp::create(b, getLoc(), cotangents[0]);
  });
}

Cotangents ExpOp::buildVJP(OpBuilder &b, ValueRange cotangents,
                           ArrayRef<bool> needed) {
  return perOperand(needed, [&](unsigned) {
    return mul(b, getLoc(), cotangents[0], getResult());
  });
}

Cotangents LogOp::buildVJP(OpBuilder &b, ValueRange cotangents,
                           ArrayRef<bool> needed) {
  return perOperand(needed, [&](unsigned) -> Value {
    return DivOp::create(b, getLoc(), cotangents[0], getInput());
  });
}

Cotangents SqrtOp::buildVJP(OpBuilder &b, ValueRange cotangents,
                            ArrayRef<bool> needed) {
  // d sqrt(x) = dx / (2 sqrt(x)).
  return perOperand(needed, [&](unsigned) -> Value {
    Value half = scaleBy(b, getLoc(), cotangents[0], 0.5);
    return DivOp::create(b, getLoc(), half, getResult());
  });
}

Cotangents RsqrtOp::buildVJP(OpBuilder &b, ValueRange cotangents,
                             ArrayRef<bool> needed) {
  // d x^(-1/2) = −x^(-3/2) / 2 · dx = −y³ / 2 · dx.
  return perOperand(needed, [&](unsigned) {
    Location loc = getLoc();
    Value y = getResult();
    Value cube = mul(b, loc, mul(b, loc, y, y), y);
    return scaleBy(b, loc, mul(b, loc, cotangents[0], cube), -0.5);
  });
}

Cotangents TanhOp::buildVJP(OpBuilder &b, ValueRange cotangents,
                            ArrayRef<bool> needed) {
  // d tanh = (1 − y²) dx.
  return perOperand(needed, [&](unsigned) -> Value {
    Location loc = getLoc();
    Value dy = cotangents[0], y = getResult();
    return SubOp::create(b, loc, dy, mul(b, loc, dy, mul(b, loc, y, y)));
  });
}

Cotangents SigmoidOp::buildVJP(OpBuilder &b, ValueRange cotangents,
                               ArrayRef<bool> needed) {
  // d σ = σ (1 − σ) dx.
  return perOperand(needed, [&](unsigned) {
    Location loc = getLoc();
    Value y = getResult();
    Value slope = SubOp::create(b, loc, y, mul(b, loc, y, y));
    return mul(b, loc, cotangents[0], slope);
  });
}

Cotangents ReluOp::buildVJP(OpBuilder &b, ValueRange cotangents,
                            ArrayRef<bool> needed) {
  return perOperand(needed, [&](unsigned) -> Value {
    return buildWith<ReluGradOp>(b, getLoc(), getType(),
                                 {getInput(), cotangents[0]})
        ->getResult(0);
  });
}

Cotangents GeluOp::buildVJP(OpBuilder &b, ValueRange cotangents,
                            ArrayRef<bool> needed) {
  return perOperand(needed, [&](unsigned) -> Value {
    SmallVector<NamedAttribute> attrs;
    if (getApproximate())
      attrs.push_back(b.getNamedAttr("approximate", b.getUnitAttr()));
    return buildWith<GeluGradOp>(b, getLoc(), getType(),
                                 {getInput(), cotangents[0]}, attrs)
        ->getResult(0);
  });
}

Cotangents SiluOp::buildVJP(OpBuilder &b, ValueRange cotangents,
                            ArrayRef<bool> needed) {
  return perOperand(needed, [&](unsigned) -> Value {
    return buildWith<SiluGradOp>(b, getLoc(), getType(),
                                 {getInput(), cotangents[0]})
        ->getResult(0);
  });
}

Cotangents DropoutOp::buildVJP(OpBuilder &b, ValueRange cotangents,
                               ArrayRef<bool> needed) {
  // The mask is a pure function of (seed, step, element): dropping the
  // cotangent with the same seed in the same step applies the same mask and
  // the same 1 / (1 − rate) scale.
  return perOperand(needed, [&](unsigned) -> Value {
    return DropoutOp::create(b, getLoc(), cotangents[0], getRateAttr(),
                             getSeedAttr(), nullptr, nullptr);
  });
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

Cotangents BroadcastOp::buildVJP(OpBuilder &b, ValueRange cotangents,
                                 ArrayRef<bool> needed) {
  if (!isFloatTensor(getInput()))
    return SmallVector<Value>(1);
  return perOperand(needed, [&](unsigned) {
    return sumToBroadcastInput(b, getLoc(), cotangents[0],
                               typeOf(getInput()), getDims());
  });
}

Cotangents ReshapeOp::buildVJP(OpBuilder &b, ValueRange cotangents,
                               ArrayRef<bool> needed) {
  if (!isFloatTensor(getInput()))
    return SmallVector<Value>(1);
  return perOperand(needed, [&](unsigned) -> Value {
    return ReshapeOp::create(b, getLoc(), getInput().getType(), cotangents[0]);
  });
}

Cotangents TransposeOp::buildVJP(OpBuilder &b, ValueRange cotangents,
                                 ArrayRef<bool> needed) {
  if (!isFloatTensor(getInput()))
    return SmallVector<Value>(1);
  return perOperand(needed, [&](unsigned) -> Value {
    ArrayRef<int64_t> perm = getPerm();
    SmallVector<int64_t> inverse(perm.size());
    for (auto [i, p] : llvm::enumerate(perm))
      inverse[p] = static_cast<int64_t>(i);
    return TransposeOp::create(b, getLoc(), cotangents[0], inverse);
  });
}

Cotangents SliceOp::buildVJP(OpBuilder &b, ValueRange cotangents,
                             ArrayRef<bool> needed) {
  if (!isFloatTensor(getInput()))
    return SmallVector<Value>(1);
  return perOperand(needed, [&](unsigned) -> Value {
    SmallVector<NamedAttribute> attrs{
        b.getNamedAttr("start", getStartAttr()),
        b.getNamedAttr("limit", getLimitAttr())};
    if (getStridesAttr())
      attrs.push_back(b.getNamedAttr("strides", getStridesAttr()));
    return buildWith<SliceGradOp>(b, getLoc(), getInput().getType(),
                                  {cotangents[0]}, attrs)
        ->getResult(0);
  });
}

Cotangents ConcatOp::buildVJP(OpBuilder &b, ValueRange cotangents,
                              ArrayRef<bool> needed) {
  int64_t dim = static_cast<int64_t>(getDim());
  RankedTensorType resultType = getType();
  SmallVector<Value> grads(needed.size());
  int64_t offset = 0;
  for (auto [i, input] : llvm::enumerate(getInputs())) {
    RankedTensorType type = typeOf(input);
    if (needed[i] && isFloatTensor(input)) {
      SmallVector<int64_t> start(type.getRank(), 0);
      SmallVector<int64_t> limit = llvm::to_vector(resultType.getShape());
      start[dim] = offset;
      limit[dim] = offset + type.getDimSize(dim);
      grads[i] = SliceOp::create(b, getLoc(), cotangents[0], start, limit,
                                 /*strides=*/nullptr);
    }
    offset += type.getDimSize(dim);
  }
  return grads;
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

Cotangents ReduceSumOp::buildVJP(OpBuilder &b, ValueRange cotangents,
                                 ArrayRef<bool> needed) {
  if (!isFloatTensor(getInput()))
    return SmallVector<Value>(1);
  return perOperand(needed, [&](unsigned) {
    // A sum written in f32: its cotangent rounded to the input's type.
    RankedTensorType input = typeOf(getInput());
    Value cotangent = cotangents[0];
    if (getType().getElementType() != input.getElementType())
      cotangent = CastOp::create(
          b, getLoc(), getType().clone(input.getElementType()), cotangent);
    return broadcastReduced(b, getLoc(), cotangent, input, getDims(),
                            getKeepDims());
  });
}

Cotangents ReduceMeanOp::buildVJP(OpBuilder &b, ValueRange cotangents,
                                  ArrayRef<bool> needed) {
  return perOperand(needed, [&](unsigned) {
    RankedTensorType input = typeOf(getInput());
    int64_t count = input.getNumElements() / getType().getNumElements();
    Value spread = broadcastReduced(b, getLoc(), cotangents[0], input,
                                    getDims(), getKeepDims());
    return scaleBy(b, getLoc(), spread, 1.0 / static_cast<double>(count));
  });
}

Cotangents ReduceMaxOp::buildVJP(OpBuilder &b, ValueRange cotangents,
                                 ArrayRef<bool> needed) {
  if (!isFloatTensor(getInput()))
    return SmallVector<Value>(1);
  // As jnp.max: the cotangent is shared evenly by the elements that tie
  // for the maximum.
  return perOperand(needed, [&](unsigned) {
    Location loc = getLoc();
    RankedTensorType input = typeOf(getInput());
    Value max = broadcastReduced(b, loc, getResult(), input, getDims(),
                                 getKeepDims());
    Value mask = buildWith<EqualOp>(b, loc, input, {getInput(), max})
                     ->getResult(0);
    Value ties = ReduceSumOp::create(b, loc, mask, getDims(), getKeepDims());
    Value share = DivOp::create(b, loc, cotangents[0], ties);
    return mul(b, loc, mask,
               broadcastReduced(b, loc, share, input, getDims(),
                                getKeepDims()));
  });
}

//===----------------------------------------------------------------------===//
// Contractions
//===----------------------------------------------------------------------===//

Cotangents MatmulOp::buildVJP(OpBuilder &b, ValueRange cotangents,
                              ArrayRef<bool> needed) {
  Location loc = getLoc();
  Value dc = cotangents[0], lhs = getLhs(), rhs = getRhs();
  bool transLhs = getTransposeLhs(), transRhs = getTransposeRhs();
  bool sharedRhs = typeOf(rhs).getRank() == 2 && typeOf(lhs).getRank() > 2;
  SmallVector<Value> grads(2);
  if (getSumBatch()) {
    // C = Σ_b A[b]ᵀ · B[b], A [..., K, M] and B [..., K, N]: every batch's
    // dA[b] = B[b] · dCᵀ and dB[b] = A[b] · dC, dC shared by the batches.
    if (needed[0])
      grads[0] = MatmulOp::create(b, loc, rhs, dc, /*transpose_lhs=*/false,
                                  /*transpose_rhs=*/true);
    if (needed[1])
      grads[1] = MatmulOp::create(b, loc, lhs, dc, /*transpose_lhs=*/false,
                                  /*transpose_rhs=*/false);
    return grads;
  }
  if (needed[0]) {
    // d op(A) = dC · op(B)ᵀ, [..., M, K]; transposed back when A is stored
    // as [..., K, M].
    Value da = MatmulOp::create(b, loc, dc, rhs, /*transpose_lhs=*/false,
                                /*transpose_rhs=*/!transRhs);
    grads[0] = transLhs ? transposeLastTwo(b, loc, da) : da;
  }
  if (needed[1]) {
    if (sharedRhs) {
      // One B for every batch: op(A)ᵀ · dC summed over the batch is one
      // matmul of the flattened rows.
      Value rows = flattenRows(b, loc, transLhs ? transposeLastTwo(b, loc, lhs)
                                                : lhs);
      Value dcRows = flattenRows(b, loc, dc);
      grads[1] = transRhs
                     ? MatmulOp::create(b, loc, dcRows, rows, true, false)
                     : MatmulOp::create(b, loc, rows, dcRows, true, false);
    } else if (transRhs) {
      // B is [..., N, K]: dB = dCᵀ · op(A).
      grads[1] = MatmulOp::create(b, loc, dc, lhs, true, transLhs);
    } else {
      // dB = op(A)ᵀ · dC.
      grads[1] = MatmulOp::create(b, loc, lhs, dc, !transLhs, false);
    }
  }
  return grads;
}

Cotangents EmbeddingOp::buildVJP(OpBuilder &b, ValueRange cotangents,
                                 ArrayRef<bool> needed) {
  SmallVector<Value> grads(2); // ids have no derivative
  if (needed[0])
    grads[0] = buildWith<EmbeddingGradOp>(b, getLoc(), getTable().getType(),
                                          {getIds(), cotangents[0]})
                   ->getResult(0);
  return grads;
}

Cotangents AttentionOp::buildVJP(OpBuilder &b, ValueRange cotangents,
                                 ArrayRef<bool> needed) {
  // The log-sum-exp is the gradient's saved statistic, not a model output.
  if (cotangents.size() > 1 && cotangents[1])
    return emitOpError() << "reaches the loss through its log-sum-exp result, "
                            "which has no gradient; differentiate through "
                            "the attention output only";
  SmallVector<NamedAttribute> attrs;
  if (getCausal())
    attrs.push_back(b.getNamedAttr("causal", b.getUnitAttr()));
  if (getScaleAttr())
    attrs.push_back(b.getNamedAttr("scale", getScaleAttr()));
  if (getWindowAttr())
    attrs.push_back(b.getNamedAttr("window", getWindowAttr()));
  if (getLayerWindowsAttr())
    attrs.push_back(b.getNamedAttr("layer_windows", getLayerWindowsAttr()));
  if (getSoftcapAttr())
    attrs.push_back(b.getNamedAttr("softcap", getSoftcapAttr()));
  if (getBlockAxesAttr())
    attrs.push_back(b.getNamedAttr("block_axes", getBlockAxesAttr()));
  // The gradient reads the forward's output and log-sum-exp; a forward
  // built without the latter (tessel-autodiff asks every attention for it)
  // runs again here for both.
  Value out = getResult(), lse = getLse();
  if (!lse) {
    AttentionOp forward = buildAgain(b, true);
    out = forward.getResult();
    lse = forward.getLse();
  }
  Operation *grad = buildWith<AttentionGradOp>(
      b, getLoc(),
      {getQuery().getType(), getKey().getType(), getValue().getType()},
      {getQuery(), getKey(), getValue(), out, lse, cotangents[0]}, attrs);
  SmallVector<Value> grads(3);
  for (unsigned i = 0; i < 3; ++i)
    if (needed[i])
      grads[i] = grad->getResult(i);
  return grads;
}

/// A rotation's transpose is the rotation by the negative angle.
Cotangents RopeOp::buildVJP(OpBuilder &b, ValueRange cotangents,
                            ArrayRef<bool> needed) {
  return perOperand(needed, [&](unsigned) -> Value {
    // Every attribute carried (theta, scalings, the rotated width), the
    // direction flipped.
    auto back = RopeOp::create(b, getLoc(), TypeRange{cotangents[0].getType()},
                               ValueRange{cotangents[0]}, (*this)->getAttrs());
    back.setInverse(!getInverse());
    return back.getResult();
  });
}

//===----------------------------------------------------------------------===//
// Normalisations and losses
//===----------------------------------------------------------------------===//

Cotangents SoftmaxOp::buildVJP(OpBuilder &b, ValueRange cotangents,
                               ArrayRef<bool> needed) {
  return perOperand(needed, [&](unsigned) -> Value {
    return buildWith<SoftmaxGradOp>(b, getLoc(), getType(),
                                    {getResult(), cotangents[0]},
                                    {b.getNamedAttr("dim", getDimAttr())})
        ->getResult(0);
  });
}

/// The results of a norm's backward op that are wanted.
static SmallVector<Value> pick(Operation *grad, ArrayRef<bool> needed) {
  SmallVector<Value> grads(needed.size());
  for (auto [i, want] : llvm::enumerate(needed))
    if (want)
      grads[i] = grad->getResult(i);
  return grads;
}

Cotangents LayerNormOp::buildVJP(OpBuilder &b, ValueRange cotangents,
                                 ArrayRef<bool> needed) {
  Type gamma = getGamma().getType();
  return pick(buildWith<LayerNormGradOp>(
                  b, getLoc(), {getType(), gamma, getBeta().getType()},
                  {getInput(), getGamma(), cotangents[0]},
                  {b.getNamedAttr("epsilon", getEpsilonAttr())}),
              needed);
}

Cotangents RmsNormOp::buildVJP(OpBuilder &b, ValueRange cotangents,
                               ArrayRef<bool> needed) {
  return pick(buildWith<RmsNormGradOp>(
                  b, getLoc(), {getType(), getGamma().getType()},
                  {getInput(), getGamma(), cotangents[0]},
                  {b.getNamedAttr("epsilon", getEpsilonAttr())}),
              needed);
}

Cotangents BatchNormOp::buildVJP(OpBuilder &b, ValueRange cotangents,
                                 ArrayRef<bool> needed) {
  return pick(buildWith<BatchNormGradOp>(
                  b, getLoc(),
                  {getType(), getGamma().getType(), getBeta().getType()},
                  {getInput(), getGamma(), cotangents[0]},
                  {b.getNamedAttr("feature_dim", getFeatureDimAttr()),
                   b.getNamedAttr("epsilon", getEpsilonAttr())}),
              needed);
}

/// onehot(labels) · dy: the cotangent placed at each position's label of
/// zeros (nn.sub_label subtracts its negation).
Cotangents LabelLogitOp::buildVJP(OpBuilder &b, ValueRange cotangents,
                                  ArrayRef<bool> needed) {
  SmallVector<Value> grads(2); // labels have no derivative
  if (needed[0]) {
    RankedTensorType logits = typeOf(getLogits());
    grads[0] = SubLabelOp::create(b, getLoc(), logits,
                                  splat(b, getLoc(), logits, 0.0), getLabels(),
                                  NegOp::create(b, getLoc(), cotangents[0]),
                                  /*block_axes=*/nullptr);
  }
  return grads;
}

Cotangents CrossEntropyOp::buildVJP(OpBuilder &b, ValueRange cotangents,
                                    ArrayRef<bool> needed) {
  if (failed(refuseIgnoreIndex("tessel-autodiff")))
    return failure();
  SmallVector<Value> grads(2); // labels have no derivative
  if (needed[0]) {
    // The options inside the gradient's kernel, as in the loss's.
    SmallVector<NamedAttribute> attrs = {
        b.getNamedAttr("reduction", getReductionAttr())};
    if (FloatAttr smoothing = getLabelSmoothingAttr())
      attrs.push_back(b.getNamedAttr("label_smoothing", smoothing));
    if (FloatAttr cap = getLogitSoftcapAttr())
      attrs.push_back(b.getNamedAttr("logit_softcap", cap));
    grads[0] = buildWith<CrossEntropyGradOp>(
                   b, getLoc(), getLogits().getType(),
                   {getLogits(), getLabels(), cotangents[0]}, attrs)
                   ->getResult(0);
  }
  return grads;
}
