//===- ContractionOps.cpp - matmul, embedding, attention ------------------===//

#include "dialect/NN/NNOps.h"
#include "dialect/NN/NNOpsUtils.h"

#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace tessel::nn;
using namespace tessel;

//===----------------------------------------------------------------------===//
// MatmulOp
//===----------------------------------------------------------------------===//

namespace {
/// The problem sizes of a matmul: batch dimensions, M, N, K.
struct MatmulDims {
  SmallVector<int64_t> batch;
  int64_t m, n, k;
  bool sharedRhs; // rhs is one [K, N] matrix for every batch
};
} // namespace

static FailureOr<MatmulDims> getMatmulDims(std::optional<Location> loc,
                                           RankedTensorType lhs,
                                           RankedTensorType rhs,
                                           bool transposeLhs, bool transposeRhs,
                                           bool sumBatch = false) {
  if (lhs.getRank() < 2 || rhs.getRank() < 2)
    return nn::detail::inferError(loc, "operands must have rank >= 2, got ", lhs,
                              " and ", rhs);
  if (lhs.getElementType() != rhs.getElementType())
    return nn::detail::inferError(loc, "operand element types differ: ",
                              lhs.getElementType(), " and ",
                              rhs.getElementType());
  MatmulDims dims;
  ArrayRef<int64_t> l = lhs.getShape(), r = rhs.getShape();
  dims.batch.assign(l.begin(), l.end() - 2);
  dims.m = transposeLhs ? l.back() : l[l.size() - 2];
  int64_t lhsK = transposeLhs ? l[l.size() - 2] : l.back();
  dims.sharedRhs = rhs.getRank() == 2 && lhs.getRank() > 2;
  if (!dims.sharedRhs) {
    if (rhs.getRank() != lhs.getRank())
      return nn::detail::inferError(
          loc, "rhs must be a matrix or have the rank of lhs (", lhs.getRank(),
          "), got ", rhs);
    if (!llvm::equal(r.drop_back(2), dims.batch))
      return nn::detail::inferError(loc, "batch dimensions differ: lhs ", lhs,
                                " and rhs ", rhs);
  }
  int64_t rhsK = transposeRhs ? r.back() : r[r.size() - 2];
  dims.n = transposeRhs ? r[r.size() - 2] : r.back();
  if (lhsK != rhsK)
    return nn::detail::inferError(loc, "contracting dimensions differ: lhs has K = ",
                              lhsK, ", rhs has K = ", rhsK);
  dims.k = lhsK;
  if (sumBatch &&
      (!transposeLhs || transposeRhs || dims.batch.empty() || dims.sharedRhs))
    return nn::detail::inferError(
        loc,
        "sum_batch needs the rows form: transpose_lhs, no transpose_rhs and "
        "both operands batched alike, got ",
        lhs, " and ", rhs);
  return dims;
}

LogicalResult MatmulOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &results) {
  auto lhs = cast<RankedTensorType>(adaptor.getLhs().getType());
  auto rhs = cast<RankedTensorType>(adaptor.getRhs().getType());
  FailureOr<MatmulDims> dims =
      getMatmulDims(loc, lhs, rhs, adaptor.getTransposeLhs(),
                    adaptor.getTransposeRhs(), adaptor.getSumBatch());
  if (failed(dims))
    return failure();
  SmallVector<int64_t> shape;
  if (!adaptor.getSumBatch())
    shape = dims->batch;
  shape.append({dims->m, dims->n});
  results.push_back(RankedTensorType::get(shape, lhs.getElementType()));
  return success();
}

// A product is linear in either factor, not in both; and only while the
// other factor is the same on every rank of the partial group, which the
// partitioner checks on the split (a factor split over a partial axis).
bool MatmulOp::passesPartialSums(ArrayRef<bool> partialOperands) {
  return llvm::count(partialOperands, true) == 1;
}

int64_t MatmulOp::getFlops() {
  MatmulDims dims = *getMatmulDims(std::nullopt, getLhs().getType(),
                                   getRhs().getType(), getTransposeLhs(),
                                   getTransposeRhs());
  int64_t batch = 1;
  for (int64_t size : dims.batch)
    batch = nn::detail::satMul(batch, size);
  return nn::detail::satMul(2, batch, dims.m, dims.n, dims.k);
}

// Loops: batch..., m, n, k (k a sum reduction; the batch loops too with
// sum_batch).
SmallVector<utils::IteratorType> MatmulOp::getLoopIteratorTypes() {
  int64_t numBatch = getLhs().getType().getRank() - 2;
  SmallVector<int64_t> sums;
  if (getSumBatch())
    sums = llvm::to_vector(llvm::seq<int64_t>(0, numBatch));
  sums.push_back(numBatch + 2);
  return nn::detail::loopsWithReductions(numBatch + 3, sums);
}

SmallVector<AffineMap> MatmulOp::getIndexingMaps() {
  MLIRContext *ctx = getContext();
  int64_t numBatch = getLhs().getType().getRank() - 2;
  int64_t numLoops = numBatch + 3;
  int64_t m = numBatch, n = numBatch + 1, k = numBatch + 2;
  SmallVector<int64_t> batch = llvm::to_vector(llvm::seq<int64_t>(0, numBatch));
  auto withBatch = [&](bool includeBatch, int64_t a, int64_t b) {
    SmallVector<int64_t> loops = includeBatch ? batch : SmallVector<int64_t>();
    loops.append({a, b});
    return nn::detail::projection(numLoops, loops, ctx);
  };
  bool sharedRhs = getRhs().getType().getRank() == 2 && numBatch > 0;
  return {getTransposeLhs() ? withBatch(true, k, m) : withBatch(true, m, k),
          getTransposeRhs() ? withBatch(!sharedRhs, n, k)
                            : withBatch(!sharedRhs, k, n),
          withBatch(!getSumBatch(), m, n)};
}

SmallVector<ReductionKind> MatmulOp::getReductionLoopIteratorKinds() {
  int64_t sums = getSumBatch() ? getLhs().getType().getRank() - 1 : 1;
  return SmallVector<ReductionKind>(sums, ReductionKind::Sum);
}

//===----------------------------------------------------------------------===//
// MatmulAccumulateOp, MatmulF32Op, MatmulBiasOp, MatmulBiasGeluOp,
// MatmulGeluGradOp, MatmulBiasGradOp
//===----------------------------------------------------------------------===//

/// The product's type of a fused matmul (as MatmulOp infers it).
static FailureOr<RankedTensorType> getProductType(std::optional<Location> loc,
                                                  Value lhs, Value rhs,
                                                  bool transposeLhs,
                                                  bool transposeRhs) {
  auto lhsType = cast<RankedTensorType>(lhs.getType());
  FailureOr<MatmulDims> dims =
      getMatmulDims(loc, lhsType, cast<RankedTensorType>(rhs.getType()),
                    transposeLhs, transposeRhs);
  if (failed(dims))
    return failure();
  SmallVector<int64_t> shape = dims->batch;
  shape.append({dims->m, dims->n});
  return RankedTensorType::get(shape, lhsType.getElementType());
}

/// The product's type of a fused matmul's adaptor.
template <class Adaptor>
static FailureOr<RankedTensorType> getProductType(std::optional<Location> loc,
                                                  Adaptor adaptor) {
  return getProductType(loc, adaptor.getLhs(), adaptor.getRhs(),
                        adaptor.getTransposeLhs(), adaptor.getTransposeRhs());
}

/// The matmul's flops plus `perElement` per element of the product (the
/// epilogue's).
static int64_t fusedMatmulFlops(Value lhs, Value rhs, bool transposeLhs,
                                bool transposeRhs, int64_t perElement = 1) {
  MatmulDims dims = *getMatmulDims(
      std::nullopt, cast<RankedTensorType>(lhs.getType()),
      cast<RankedTensorType>(rhs.getType()), transposeLhs, transposeRhs);
  int64_t batch = 1;
  for (int64_t size : dims.batch)
    batch = nn::detail::satMul(batch, size);
  int64_t elements = nn::detail::satMul(batch, dims.m, dims.n);
  return nn::detail::satAdd(
      nn::detail::satMul(2, batch, dims.m, dims.n, dims.k),
      nn::detail::satMul(perElement, elements));
}

LogicalResult MatmulAccumulateOp::verify() {
  FailureOr<RankedTensorType> product = getProductType(
      getLoc(), getLhs(), getRhs(), getTransposeLhs(), getTransposeRhs());
  if (failed(product))
    return failure();
  if (!nn::detail::isInferredOrF32(*product, getAcc().getType()))
    return emitOpError() << "accumulator " << getAcc().getType()
                         << " must have the product's type " << *product
                         << " (or its shape in f32 for 16-bit operands)";
  if (getResult().getType() != getAcc().getType())
    return emitOpError() << "result " << getResult().getType()
                         << " must have the accumulator's type "
                         << getAcc().getType();
  return success();
}

int64_t MatmulAccumulateOp::getFlops() {
  return fusedMatmulFlops(getLhs(), getRhs(), getTransposeLhs(),
                          getTransposeRhs());
}

LogicalResult MatmulF32Op::inferReturnTypes(MLIRContext *context,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &results) {
  FailureOr<RankedTensorType> product = getProductType(loc, adaptor);
  if (failed(product))
    return failure();
  if (!nn::detail::isHalfFloatTensor(*product))
    return nn::detail::inferError(loc,
                                  "operands must be f16 or bf16 (the "
                                  "product is widened to f32), got ",
                                  adaptor.getLhs().getType());
  results.push_back(product->clone(Float32Type::get(context)));
  return success();
}

int64_t MatmulF32Op::getFlops() {
  return fusedMatmulFlops(getLhs(), getRhs(), getTransposeLhs(),
                          getTransposeRhs(), /*perElement=*/0);
}

/// A biased product's results: `copies` of the product's type, its bias a
/// vector of the product's last dimension.
template <class Adaptor>
static LogicalResult inferBiasedProduct(std::optional<Location> loc,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &results,
                                        unsigned copies) {
  FailureOr<RankedTensorType> product = getProductType(loc, adaptor);
  if (failed(product))
    return failure();
  auto bias = cast<RankedTensorType>(adaptor.getBias().getType());
  auto expected = RankedTensorType::get({product->getShape().back()},
                                        product->getElementType());
  if (bias != expected)
    return nn::detail::inferError(loc, "bias must be ", expected,
                                  " (the product's last dimension), got ",
                                  bias);
  results.append(copies, *product);
  return success();
}

LogicalResult MatmulBiasOp::inferReturnTypes(MLIRContext *,
                                             std::optional<Location> loc,
                                             Adaptor adaptor,
                                             SmallVectorImpl<Type> &results) {
  return inferBiasedProduct(loc, adaptor, results, /*copies=*/1);
}

int64_t MatmulBiasOp::getFlops() {
  return fusedMatmulFlops(getLhs(), getRhs(), getTransposeLhs(),
                          getTransposeRhs());
}

// The GELU's output and its input.
LogicalResult MatmulBiasGeluOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &results) {
  return inferBiasedProduct(loc, adaptor, results, /*copies=*/2);
}

// The bias add (1) and nn.gelu's eight per element.
int64_t MatmulBiasGeluOp::getFlops() {
  return fusedMatmulFlops(getLhs(), getRhs(), getTransposeLhs(),
                          getTransposeRhs(), /*perElement=*/1 + 8);
}

LogicalResult MatmulGeluGradOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &results) {
  FailureOr<RankedTensorType> product = getProductType(loc, adaptor);
  if (failed(product))
    return failure();
  if (adaptor.getPre().getType() != *product)
    return nn::detail::inferError(loc, "pre must have the product's type ",
                                  *product, ", got ",
                                  adaptor.getPre().getType());
  results.push_back(*product);
  return success();
}

// nn.gelu_grad's twelve per element.
int64_t MatmulGeluGradOp::getFlops() {
  return fusedMatmulFlops(getLhs(), getRhs(), getTransposeLhs(),
                          getTransposeRhs(), /*perElement=*/12);
}

LogicalResult MatmulBiasGradOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &results) {
  auto lhs = cast<RankedTensorType>(adaptor.getLhs().getType());
  auto rhs = cast<RankedTensorType>(adaptor.getRhs().getType());
  if (lhs.getRank() != 2 || rhs.getRank() != 2)
    return nn::detail::inferError(loc, "operands must be matrices (one GEMM), "
                                       "got ",
                                  lhs, " and ", rhs);
  FailureOr<RankedTensorType> product = getProductType(loc, adaptor);
  if (failed(product))
    return failure();
  // An f32 accumulator of a 16-bit product: both results in f32.
  RankedTensorType result = *product;
  if (Value acc = adaptor.getAcc();
      acc && nn::detail::isInferredOrF32(*product, acc.getType()))
    result = cast<RankedTensorType>(acc.getType());
  results.push_back(result);
  results.push_back(RankedTensorType::get({result.getDimSize(1)},
                                          result.getElementType()));
  return success();
}

// Without an accumulator, both results as inferred or both in f32 for
// 16-bit operands (one GEMM writes one type).
bool MatmulBiasGradOp::isCompatibleReturnTypes(TypeRange inferred,
                                               TypeRange actual) {
  return nn::detail::areInferredOrAllF32(inferred, actual, /*kept=*/0);
}

LogicalResult MatmulBiasGradOp::verify() {
  if (getAcc() && getAcc().getType() != getResult().getType())
    return emitOpError() << "accumulator " << getAcc().getType()
                         << " must have the product's type "
                         << getResult().getType()
                         << " (or its shape in f32 for 16-bit operands)";
  return success();
}

// The column sums of op(rhs), [K, N] to [N]: nn.reduce_sum's N_in - N_out;
// with an accumulator, its add.
int64_t MatmulBiasGradOp::getFlops() {
  ArrayRef<int64_t> rhs = getRhs().getType().getShape();
  int64_t elements = nn::detail::satMul(rhs[0], rhs[1]);
  int64_t n = getTransposeRhs() ? rhs[0] : rhs[1];
  return nn::detail::satAdd(
      fusedMatmulFlops(getLhs(), getRhs(), getTransposeLhs(), getTransposeRhs(),
                       /*perElement=*/getAcc() ? 1 : 0),
      elements - n);
}

//===----------------------------------------------------------------------===//
// EmbeddingOp
//===----------------------------------------------------------------------===//

LogicalResult EmbeddingOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &results) {
  auto table = cast<RankedTensorType>(adaptor.getTable().getType());
  auto ids = cast<RankedTensorType>(adaptor.getIds().getType());
  if (table.getRank() != 2)
    return nn::detail::inferError(loc, "table must be [vocab, hidden], got ",
                              table);
  SmallVector<int64_t> shape = llvm::to_vector(ids.getShape());
  shape.push_back(table.getDimSize(1));
  results.push_back(RankedTensorType::get(shape, table.getElementType()));
  return success();
}

int64_t EmbeddingOp::getFlops() { return 0; }

// Loops: ids dimensions..., h, v (v the one-hot sum reduction).
SmallVector<utils::IteratorType> EmbeddingOp::getLoopIteratorTypes() {
  int64_t numIds = getIds().getType().getRank();
  return nn::detail::loopsWithReductions(numIds + 2, {numIds + 1});
}

SmallVector<AffineMap> EmbeddingOp::getIndexingMaps() {
  MLIRContext *ctx = getContext();
  int64_t numIds = getIds().getType().getRank();
  int64_t numLoops = numIds + 2, h = numIds, v = numIds + 1;
  SmallVector<int64_t> idLoops = llvm::to_vector(llvm::seq<int64_t>(0, numIds));
  SmallVector<int64_t> resultLoops = idLoops;
  resultLoops.push_back(h);
  return {nn::detail::projection(numLoops, {v, h}, ctx),
          nn::detail::projection(numLoops, idLoops, ctx),
          nn::detail::projection(numLoops, resultLoops, ctx)};
}

SmallVector<ReductionKind> EmbeddingOp::getReductionLoopIteratorKinds() {
  return {ReductionKind::Sum};
}


//===----------------------------------------------------------------------===//
// AttentionOp
//===----------------------------------------------------------------------===//

FailureOr<RankedTensorType>
nn::detail::inferAttentionType(std::optional<Location> loc, RankedTensorType q,
                               RankedTensorType k, RankedTensorType v,
                               bool causal, bool queryBlock) {
  for (auto [name, type] : {std::pair<StringRef, RankedTensorType>{"query", q},
                            {"key", k},
                            {"value", v}}) {
    if (type.getRank() != 4)
      return nn::detail::inferError(loc, name,
                                " must be [batch, seq, heads, head_dim], got ",
                                type);
    if (type.getElementType() != q.getElementType())
      return nn::detail::inferError(loc, "query, key and value element types "
                                     "differ");
  }
  int64_t batch = q.getDimSize(0), seq = q.getDimSize(1);
  int64_t heads = q.getDimSize(2), headDim = q.getDimSize(3);
  int64_t kvSeq = k.getDimSize(1), kvHeads = k.getDimSize(2);
  if (k.getDimSize(0) != batch || v.getDimSize(0) != batch)
    return nn::detail::inferError(loc, "batch sizes differ: query ", batch,
                              ", key ", k.getDimSize(0), ", value ",
                              v.getDimSize(0));
  if (v.getDimSize(1) != kvSeq || v.getDimSize(2) != kvHeads)
    return nn::detail::inferError(loc, "key ", k, " and value ", v,
                              " differ in sequence length or head count");
  if (k.getDimSize(3) != headDim)
    return nn::detail::inferError(loc, "query head_dim ", headDim,
                              " differs from key head_dim ", k.getDimSize(3));
  if (kvHeads == 0 || heads % kvHeads != 0)
    return nn::detail::inferError(loc, "key/value heads (", kvHeads,
                              ") must divide query heads (", heads, ")");
  if (causal && queryBlock && (seq == 0 || kvSeq % seq != 0))
    return nn::detail::inferError(loc, "a block of ", seq,
                                  " queries does not divide the ", kvSeq,
                                  " keys' sequence");
  if (causal && !queryBlock && seq != kvSeq)
    return nn::detail::inferError(loc, "causal attention needs equal query and "
                                   "key lengths, got ",
                              seq, " and ", kvSeq);
  return RankedTensorType::get({batch, seq, heads, v.getDimSize(3)},
                               q.getElementType());
}

RankedTensorType nn::detail::attentionLseType(RankedTensorType q) {
  Type element = q.getElementType().isF64()
                     ? Type(Float64Type::get(q.getContext()))
                     : Type(Float32Type::get(q.getContext()));
  return RankedTensorType::get(
      {q.getDimSize(0), q.getDimSize(2), q.getDimSize(1)}, element);
}

LogicalResult AttentionOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &results) {
  FailureOr<RankedTensorType> type = nn::detail::inferAttentionType(
      loc, cast<RankedTensorType>(adaptor.getQuery().getType()),
      cast<RankedTensorType>(adaptor.getKey().getType()),
      cast<RankedTensorType>(adaptor.getValue().getType()), adaptor.getCausal(),
      bool(adaptor.getBlockAxesAttr()));
  if (failed(type))
    return failure();
  results.push_back(*type);
  if (adaptor.getWithLse())
    results.push_back(nn::detail::attentionLseType(
        cast<RankedTensorType>(adaptor.getQuery().getType())));
  return success();
}

AttentionOp AttentionOp::buildAgain(OpBuilder &b, bool withLse) {
  auto again = AttentionOp::create(
      b, getLoc(), getQuery(), getKey(), getValue(), getCausalAttr(),
      withLse ? b.getUnitAttr() : UnitAttr(), getScaleAttr(), getWindowAttr(),
      getLayerWindowsAttr(), getSoftcapAttr(), getBlockAxesAttr());
  again->setDiscardableAttrs(getOperation()->getDiscardableAttrDictionary());
  return again;
}

// An lse nothing reads (an evaluation, or a forward whose gradient is not
// needed) is not computed.
LogicalResult AttentionOp::canonicalize(AttentionOp op,
                                        PatternRewriter &rewriter) {
  if (!op.getLse() || !op.getLse().use_empty())
    return failure();
  rewriter.replaceOp(op, {op.buildAgain(rewriter, false).getResult(), Value()});
  return success();
}

LogicalResult
nn::detail::verifyAttentionAttrs(Operation *op, std::optional<APFloat> scale,
                                 bool causal, std::optional<int64_t> window,
                                 std::optional<ArrayRef<int64_t>> layerWindows,
                                 std::optional<APFloat> softcap,
                                 bool queryBlock) {
  if (queryBlock && !causal)
    return op->emitOpError()
           << "has block_axes without the causal mask: only a causal mask "
              "tells a block of the queries from the whole sequence's";
  if (scale && !(scale->convertToDouble() > 0.0))
    return op->emitOpError()
           << "scale must be positive, got " << scale->convertToDouble();
  if (softcap && (!(softcap->convertToDouble() > 0.0) || softcap->isInfinity()))
    return op->emitOpError() << "softcap must be finite and positive, got "
                             << softcap->convertToDouble();
  if (layerWindows) {
    if (window)
      return op->emitOpError() << "has a window and layer_windows: give one";
    if (layerWindows->empty())
      return op->emitOpError() << "layer_windows holds no layer";
    for (auto [layer, w] : llvm::enumerate(*layerWindows)) {
      if (w < 0)
        return op->emitOpError() << "layer_windows[" << layer << "] is " << w
                                 << "; a window is >= 0 (0: none)";
      if (w > 0 && !causal)
        return op->emitOpError()
               << "layer_windows[" << layer << "] = " << w
               << " needs the causal mask (a sliding window of past keys)";
    }
  }
  if (window && *window <= 0)
    return op->emitOpError() << "window must be positive, got " << *window;
  if (window && !causal)
    return op->emitOpError()
           << "window " << *window
           << " needs the causal mask (a sliding window of past keys)";
  return success();
}

int64_t
nn::detail::attentionScores(ArrayRef<int64_t> query, int64_t kvSeq,
                            std::optional<int64_t> window,
                            std::optional<ArrayRef<int64_t>> layerWindows) {
  int64_t keys = window ? std::min(kvSeq, *window) : kvSeq;
  if (layerWindows && !layerWindows->empty()) {
    // The layers' mean, rounded up: the cost of one application.
    int64_t sum = 0;
    for (int64_t w : *layerWindows)
      sum = nn::detail::satAdd(sum, w > 0 ? std::min(kvSeq, w) : kvSeq);
    int64_t layers = int64_t(layerWindows->size());
    keys = sum / layers + (sum % layers != 0);
  }
  return nn::detail::satMul(query[0], query[2], query[1], keys);
}

LogicalResult AttentionOp::verify() {
  return nn::detail::verifyAttentionAttrs(
      *this, getScale(), getCausal(), getWindow(), getLayerWindows(),
      getSoftcap(), bool(getBlockAxesAttr()));
}

int64_t AttentionOp::getFlops() {
  ArrayRef<int64_t> q = getQuery().getType().getShape();
  int64_t valueDim = getValue().getType().getDimSize(3);
  using nn::detail::satAdd, nn::detail::satMul;
  int64_t scores = nn::detail::attentionScores(
      q, getKey().getType().getDimSize(1), getWindow(),
      getLayerWindows()); // B·H·S·T'
  // A soft cap divides, takes tanh and multiplies each score.
  int64_t perScore = getSoftcap() ? 8 : 5;
  return satAdd(satAdd(satMul(2, scores, q[3]), satMul(perScore, scores)),
                satMul(2, scores, valueDim));
}

// Loops: b, s, h, t, d, e.
enum AttentionLoop : int64_t { kB, kS, kH, kT, kD, kE, kNumAttentionLoops };

SmallVector<utils::IteratorType> AttentionOp::getLoopIteratorTypes() {
  return nn::detail::loopsWithReductions(kNumAttentionLoops, {kT, kD});
}

SmallVector<AffineMap> AttentionOp::getIndexingMaps() {
  MLIRContext *ctx = getContext();
  auto d = [&](int64_t loop) { return getAffineDimExpr(loop, ctx); };
  int64_t group = getQuery().getType().getDimSize(2) /
                  getKey().getType().getDimSize(2);
  AffineExpr kvHead = group == 1 ? d(kH) : d(kH).floorDiv(group);
  auto map = [&](ArrayRef<AffineExpr> exprs) {
    return AffineMap::get(kNumAttentionLoops, 0, exprs, ctx);
  };
  SmallVector<AffineMap> maps = {map({d(kB), d(kS), d(kH), d(kD)}),
                                 map({d(kB), d(kT), kvHead, d(kD)}),
                                 map({d(kB), d(kT), kvHead, d(kE)}),
                                 map({d(kB), d(kS), d(kH), d(kE)})};
  if (getLse())
    maps.push_back(map({d(kB), d(kH), d(kS)}));
  return maps;
}

// Neither the softmax over keys nor the contraction inside it is a plain
// reduction.
SmallVector<ReductionKind> AttentionOp::getReductionLoopIteratorKinds() {
  return {ReductionKind::Generic, ReductionKind::Generic};
}

SmallVector<int64_t> AttentionOp::getUnsplittableLoops() { return {kT, kD}; }

// A causal mask compares query and key positions: a rank holding a block of
// the queries (context parallelism) is told which block (`block_axes`).
LogicalResult AttentionOp::adjustLocalPartition(Operation *local,
                                                LocalSplit &split,
                                                OpBuilder &) {
  if (!getCausal())
    return success();
  return nn::detail::markRankBlock(*this, local, split, kS, "query sequence");
}
