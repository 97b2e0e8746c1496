//===- OptimizerOps.cpp - the update step: norms, clipping, optimizers ----===//
//
// The ops of the update step. optimizer_step and accumulate are destination
// style: their results are their inits updated in place.
//
//===----------------------------------------------------------------------===//

#include "dialect/NN/NNOps.h"
#include "dialect/NN/NNOpsUtils.h"

#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>

using namespace mlir;
using namespace tessel;
using namespace tessel::nn;

/// `value` as a diagnostic shows it: -0.1, 1e-08, inf.
static std::string number(double value) {
  return llvm::formatv("{0}", llvm::format("%g", value)).str();
}

//===----------------------------------------------------------------------===//
// custom<OptimizerKind>
//===----------------------------------------------------------------------===//

ParseResult nn::parseOptimizerKind(OpAsmParser &parser,
                                   OptimizerKindAttr &optimizer) {
  SMLoc loc = parser.getCurrentLocation();
  StringRef keyword;
  if (parser.parseKeyword(&keyword))
    return failure();
  std::optional<OptimizerKind> kind = symbolizeOptimizerKind(keyword);
  if (!kind)
    return parser.emitError(loc) << "unknown optimizer '" << keyword
                                 << "' (expected sgd, adam or adamw)";
  optimizer = OptimizerKindAttr::get(parser.getContext(), *kind);
  return success();
}

void nn::printOptimizerKind(OpAsmPrinter &printer, Operation *,
                            OptimizerKindAttr optimizer) {
  printer << stringifyOptimizerKind(optimizer ? optimizer.getValue()
                                              : OptimizerKind::adamw);
}

Type nn::updateScalarType(Type gradType) {
  Type element = cast<ShapedType>(gradType).getElementType();
  Builder b(gradType.getContext());
  return RankedTensorType::get({}, element.isF64() ? Type(b.getF64Type())
                                                   : Type(b.getF32Type()));
}

//===----------------------------------------------------------------------===//
// SumSquaresOp
//===----------------------------------------------------------------------===//

LogicalResult SumSquaresOp::verify() {
  if (getInputs().empty())
    return emitOpError() << "needs at least one input";
  return success();
}

// A square and an add per element.
int64_t SumSquaresOp::getFlops() {
  int64_t elements = 0;
  for (Value input : getInputs())
    elements =
        nn::detail::satAdd(elements, nn::detail::numElements(input.getType()));
  return nn::detail::satMul(2, elements);
}

static int64_t totalRank(ValueRange values) {
  int64_t rank = 0;
  for (Value value : values)
    rank += cast<RankedTensorType>(value.getType()).getRank();
  return rank;
}

// Loops: the dimensions of every input, one input after the other; all sum
// reductions (a split leaves a partial sum of squares).
SmallVector<utils::IteratorType> SumSquaresOp::getLoopIteratorTypes() {
  int64_t numLoops = totalRank(getInputs());
  return nn::detail::loopsWithReductions(
      numLoops, llvm::to_vector(llvm::seq<int64_t>(0, numLoops)));
}

SmallVector<AffineMap> SumSquaresOp::getIndexingMaps() {
  MLIRContext *ctx = getContext();
  int64_t numLoops = totalRank(getInputs()), first = 0;
  SmallVector<AffineMap> maps;
  for (Value input : getInputs()) {
    int64_t rank = cast<RankedTensorType>(input.getType()).getRank();
    maps.push_back(nn::detail::projection(
        numLoops, llvm::to_vector(llvm::seq<int64_t>(first, first + rank)),
        ctx));
    first += rank;
  }
  maps.push_back(AffineMap::get(numLoops, 0, {}, ctx));
  return maps;
}

SmallVector<ReductionKind> SumSquaresOp::getReductionLoopIteratorKinds() {
  return SmallVector<ReductionKind>(totalRank(getInputs()), ReductionKind::Sum);
}

//===----------------------------------------------------------------------===//
// ClipScaleOp
//===----------------------------------------------------------------------===//

LogicalResult ClipScaleOp::verify() {
  double maxNorm = getMaxNorm().convertToDouble();
  if (!std::isfinite(maxNorm))
    return emitOpError() << "max_norm must be finite (<= 0: no clipping), got "
                         << number(maxNorm);
  return success();
}

// sqrt, ·g, + 1e-6, divide, min, ·g.
int64_t ClipScaleOp::getFlops() { return 6; }

SmallVector<utils::IteratorType> ClipScaleOp::getLoopIteratorTypes() {
  return {};
}

SmallVector<AffineMap> ClipScaleOp::getIndexingMaps() {
  AffineMap scalar = AffineMap::get(0, 0, {}, getContext());
  return {scalar, scalar, scalar};
}

SmallVector<ReductionKind> ClipScaleOp::getReductionLoopIteratorKinds() {
  return {};
}

//===----------------------------------------------------------------------===//
// OptimizerStepOp
//===----------------------------------------------------------------------===//

int64_t OptimizerStepOp::getNumStates(OptimizerKind optimizer,
                                      double momentum) {
  if (optimizer != OptimizerKind::sgd)
    return 2;
  return momentum != 0.0 ? 1 : 0;
}

LogicalResult
OptimizerStepOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                  Adaptor adaptor,
                                  SmallVectorImpl<Type> &results) {
  if (adaptor.getOuts().empty())
    return nn::detail::inferError(
        loc, "needs the parameter (and its states) in outs");
  llvm::append_range(results, adaptor.getOuts().getTypes());
  return success();
}

LogicalResult OptimizerStepOp::verify() {
  // Runs before the result type inference is checked.
  if (getOuts().empty())
    return emitOpError() << "needs the parameter (and its states) in outs";
  auto param = cast<RankedTensorType>(getParam().getType());
  auto f32Type =
      RankedTensorType::get(param.getShape(), Float32Type::get(getContext()));
  Type elementType = param.getElementType();
  if (getMaster()) {
    if (!elementType.isBF16() && !elementType.isF16())
      return emitOpError() << "with master weights updates a bf16 or f16 "
                              "parameter, got "
                           << param;
    if (getGrad().getType() != param && getGrad().getType() != f32Type)
      return emitOpError() << "grad must be " << param << " or " << f32Type
                           << ", got " << getGrad().getType();
  } else if (getGrad().getType() != param) {
    return emitOpError() << "grad must have the parameter's type " << param
                         << ", got " << getGrad().getType();
  }
  OptimizerKind optimizer = getOptimizer();
  StringRef name = stringifyOptimizerKind(optimizer);
  double momentum = getMomentum().convertToDouble();
  int64_t expected = getNumStates(optimizer, momentum);
  int64_t numStates = static_cast<int64_t>(getOptimizerStates().size());
  if (getMaster() && getStates().empty())
    return emitOpError() << "with master weights needs them as the first "
                            "state";
  if (numStates != expected) {
    InFlightDiagnostic diag = emitOpError();
    if (optimizer != OptimizerKind::sgd)
      diag << name << " keeps 2 states (m and v)";
    else if (expected == 1)
      diag << "sgd with momentum keeps 1 state (the momentum buffer)";
    else
      diag << "sgd without momentum keeps no state";
    return diag << " after the parameter" << (getMaster() ? " and its master" : "")
                << " in outs, got " << numStates;
  }
  // An f64 parameter's states and scale are f64: its update is not
  // rounded to f32. Master weights and their states are f32.
  Type stateElement = !getMaster() && elementType.isF64()
                          ? Type(Float64Type::get(getContext()))
                          : Type(Float32Type::get(getContext()));
  auto stateType = RankedTensorType::get(param.getShape(), stateElement);
  for (auto [index, state] : llvm::enumerate(getStates()))
    if (state.getType() != stateType)
      return emitOpError() << "state #" << index << " must be " << stateType
                           << " (" << (stateElement.isF64() ? "f64" : "f32")
                           << " in the parameter's shape), got "
                           << state.getType();
  auto check = [&](bool ok, StringRef what, double value) -> LogicalResult {
    if (ok)
      return success();
    return emitOpError() << what << ", got " << number(value);
  };
  double lr = getLr().convertToDouble();
  double beta1 = getBeta1().convertToDouble();
  double beta2 = getBeta2().convertToDouble();
  double eps = getEps().convertToDouble();
  double weightDecay = getWeightDecay().convertToDouble();
  double minLr = getMinLr().convertToDouble();
  if (failed(check(lr >= 0.0 && std::isfinite(lr), "lr must be >= 0", lr)) ||
      failed(check(beta1 >= 0.0 && beta1 < 1.0, "beta1 must be in [0, 1)",
                   beta1)) ||
      failed(check(beta2 >= 0.0 && beta2 < 1.0, "beta2 must be in [0, 1)",
                   beta2)) ||
      failed(check(eps > 0.0 && std::isfinite(eps), "eps must be positive",
                   eps)) ||
      failed(check(weightDecay >= 0.0 && std::isfinite(weightDecay),
                   "weight_decay must be >= 0", weightDecay)) ||
      failed(check(momentum >= 0.0 && std::isfinite(momentum),
                   "momentum must be >= 0", momentum)) ||
      failed(check(std::isfinite(minLr), "min_lr must be finite", minLr)))
    return failure();
  if (getNesterov() && (optimizer != OptimizerKind::sgd || momentum <= 0.0))
    return emitOpError() << "nesterov needs sgd with momentum > 0, got " << name
                         << " with momentum " << number(momentum);
  int64_t warmup = getWarmup(), totalSteps = getTotalSteps();
  if (warmup < 0)
    return emitOpError() << "warmup must be >= 0, got " << warmup;
  if (getSchedule() == LrSchedule::warmup_cosine && totalSteps <= warmup)
    return emitOpError() << "warmup_cosine needs total_steps (" << totalSteps
                         << ") > warmup (" << warmup << ")";
  return success();
}

// Per element: scale the gradient (1), weight decay (2, when nonzero), then
// SGD: momentum (2), Nesterov (2), update (2); Adam(W): m (3), v (4), the
// bias-corrected update (7).
int64_t OptimizerStepOp::getFlops() {
  int64_t perElement = 1;
  if (!getWeightDecay().isZero())
    perElement += 2;
  if (getOptimizer() == OptimizerKind::sgd) {
    perElement += 2;
    if (!getMomentum().isZero())
      perElement += 2;
    if (getNesterov())
      perElement += 2;
  } else {
    perElement += 3 + 4 + 7;
  }
  return nn::detail::satMul(perElement,
                            nn::detail::numElements(getParam().getType()));
}

SmallVector<utils::IteratorType> OptimizerStepOp::getLoopIteratorTypes() {
  return nn::detail::parallelLoops(
      cast<RankedTensorType>(getParam().getType()).getRank());
}

// grad, every init and every result: identity; scale: the scalar.
SmallVector<AffineMap> OptimizerStepOp::getIndexingMaps() {
  MLIRContext *ctx = getContext();
  int64_t rank = cast<RankedTensorType>(getParam().getType()).getRank();
  AffineMap identity = AffineMap::getMultiDimIdentityMap(rank, ctx);
  SmallVector<AffineMap> maps{identity, AffineMap::get(rank, 0, {}, ctx)};
  maps.append(getOuts().size() + getNumResults(), identity);
  return maps;
}

SmallVector<ReductionKind> OptimizerStepOp::getReductionLoopIteratorKinds() {
  return {};
}

//===----------------------------------------------------------------------===//
// AccumulateOp
//===----------------------------------------------------------------------===//

int64_t AccumulateOp::getFlops() { return nn::detail::numElements(getType()); }

SmallVector<utils::IteratorType> AccumulateOp::getLoopIteratorTypes() {
  return nn::detail::parallelLoops(getType().getRank());
}

SmallVector<AffineMap> AccumulateOp::getIndexingMaps() {
  return nn::detail::identityMaps(*this);
}

SmallVector<ReductionKind> AccumulateOp::getReductionLoopIteratorKinds() {
  return {};
}
