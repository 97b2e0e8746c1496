//===- NNOpsUtils.h - helpers shared by the nn op implementations -*- C++ -*-===//

#ifndef TESSEL_DIALECT_NN_NNOPSUTILS_H
#define TESSEL_DIALECT_NN_NNOPSUTILS_H

#include "dialect/NN/NNOps.h"

#include "mlir/IR/AffineMap.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/ArrayRef.h"

namespace tessel::nn::detail {

/// Reports `message` at `loc` when there is one (type inference may run
/// without a location) and fails.
template <typename... Args>
llvm::LogicalResult inferError(std::optional<mlir::Location> loc,
                               Args &&...args) {
  return mlir::emitOptionalError(loc, std::forward<Args>(args)...);
}

/// `shape` printed as 2x3x4 (or "scalar").
std::string shapeString(llvm::ArrayRef<int64_t> shape);

/// Checks that `dims` are unique and in [0, rank); `what` names the
/// attribute in the message.
llvm::LogicalResult verifyDimList(std::optional<mlir::Location> loc,
                                  llvm::ArrayRef<int64_t> dims, int64_t rank,
                                  llvm::StringRef what);

/// Fails with an error on `op` unless a loss's label_smoothing is absent
/// or in [0, 1] and its logit_softcap absent or finite and positive.
mlir::LogicalResult verifyLossOptions(mlir::Operation *op,
                                      std::optional<llvm::APFloat> smoothing,
                                      std::optional<llvm::APFloat> cap);

/// Flops a loss's options add per logit, each way: a soft cap 3 (a
/// division, a tanh, a product; the gradient's slope), label smoothing 1
/// (the forward's sum, the gradient's ε/V).
int64_t lossOptionFlops(bool smoothing, bool cap);

/// The splat constant `value` is, through broadcasts, or null.
mlir::DenseElementsAttr splatConstantOf(mlir::Value value);

/// A splat `value` of the float tensor `type`: a scalar constant broadcast,
/// which the memory plan reads where it lies instead of filling a buffer.
mlir::Value broadcastScalar(mlir::OpBuilder &b, mlir::Location loc,
                            mlir::RankedTensorType type, double value);

/// `x` soft-capped as ops (where no kernel caps it): t = tanh(x / c) and
/// the capped c · t, c a broadcast scalar.
struct Softcapped {
  mlir::Value tanh, capped;
};
Softcapped softcapOps(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x,
                      double cap);

/// True when `value` is a constant whose every element equals `splat`, or
/// a broadcast of one.
bool isSplatConstant(mlir::Value value, double splat);

/// Iterator types: `rank` loops, those in `reductions` are reductions.
llvm::SmallVector<mlir::utils::IteratorType>
loopsWithReductions(int64_t rank, llvm::ArrayRef<int64_t> reductions);

/// The affine map from `numLoops` loops to the given loop indices.
mlir::AffineMap projection(int64_t numLoops, llvm::ArrayRef<int64_t> loops,
                           mlir::MLIRContext *ctx);

/// Marks `local` as the rank's block of loop `loop` (its `block_axes`)
/// when the split puts that loop over grid axes; `what` names the loop in
/// the errors ("vocabulary", "query sequence"). The block index is the
/// group index of the axes in order, which must be ascending (row-major,
/// as the runtime numbers a group); a block is not split again.
mlir::LogicalResult markRankBlock(mlir::Operation *global,
                                  mlir::Operation *local,
                                  const LocalSplit &split, int64_t loop,
                                  llvm::StringRef what);

/// The result type of nn.slice of `input` with these attributes (`strides`
/// absent: all ones), or a located error; `sliced` names `input` in it.
mlir::FailureOr<mlir::RankedTensorType>
inferSliceType(std::optional<mlir::Location> loc, mlir::RankedTensorType input,
               llvm::ArrayRef<int64_t> start, llvm::ArrayRef<int64_t> limit,
               std::optional<llvm::ArrayRef<int64_t>> strides,
               llvm::StringRef sliced = "the operand");

/// The result type of nn.attention of q, k, v (shapes, heads, causal
/// lengths checked), or a located error.
/// With `queryBlock` the queries may be a block of the keys' sequence (a
/// causal mask then needs S to divide T, not S == T).
mlir::FailureOr<mlir::RankedTensorType>
inferAttentionType(std::optional<mlir::Location> loc, mlir::RankedTensorType q,
                   mlir::RankedTensorType k, mlir::RankedTensorType v,
                   bool causal, bool queryBlock = false);

/// The attributes nn.attention and nn.attention_grad share: a positive
/// scale, a positive window on a causal mask only, or per-layer windows
/// (each >= 0, 0 none; one > 0 on a causal mask only) instead of it, and a
/// finite positive soft cap; `block_axes` (queryBlock) on a causal mask
/// only.
mlir::LogicalResult
verifyAttentionAttrs(mlir::Operation *op, std::optional<llvm::APFloat> scale,
                     bool causal, std::optional<int64_t> window,
                     std::optional<llvm::ArrayRef<int64_t>> layerWindows,
                     std::optional<llvm::APFloat> softcap, bool queryBlock);

/// The scores an attention of query [B, S, H, D] over kvSeq keys computes,
/// B·H·S·min(kvSeq, window) (a window bounds the keys each row reads; with
/// per-layer windows the layers' mean), saturated.
int64_t attentionScores(llvm::ArrayRef<int64_t> query, int64_t kvSeq,
                        std::optional<int64_t> window,
                        std::optional<llvm::ArrayRef<int64_t>> layerWindows);

/// The type of nn.attention's log-sum-exp result for query q [B, S, H, D]:
/// [B, H, S], f64 for f64 queries and f32 for every other float type (the
/// kernels' arithmetic type).
mlir::RankedTensorType attentionLseType(mlir::RankedTensorType q);

/// The loss type of nn.cross_entropy of `logits` against `labels` with
/// `reduction` (a scalar, or the labels' shape for `none`), or a located
/// error when the shapes disagree.
mlir::FailureOr<mlir::RankedTensorType>
inferCrossEntropyType(std::optional<mlir::Location> loc,
                      mlir::RankedTensorType logits,
                      mlir::RankedTensorType labels, bool keepPositions);

/// Whether `type` is an f16 or bf16 tensor.
bool isHalfFloatTensor(mlir::Type type);

/// Whether `actual` is `inferred`, or its f32 version where `inferred` is
/// an f16 or bf16 tensor: a result a kernel may write in f32 from 16-bit
/// operands (the cross-entropy of 16-bit logits, ABI 13; a norm's
/// parameter gradients, ABI 14; a GEMM's product, ABI 12 and 15).
bool isInferredOrF32(mlir::Type inferred, mlir::Type actual);

/// Result types against the inferred ones: the first `kept` as inferred,
/// the others all as inferred or all in f32 (isInferredOrF32), since one
/// kernel writes them in one type (a norm gradient's dγ and dβ after dx; a
/// weight and bias gradient's GEMM).
bool areInferredOrAllF32(mlir::TypeRange inferred, mlir::TypeRange actual,
                         unsigned kept);

/// " (or f32)" where isInferredOrF32 also takes the f32 version of
/// `inferred` (an f16/bf16 type), else "": for the messages that name it.
llvm::StringRef orF32Note(mlir::RankedTensorType inferred);

} // namespace tessel::nn::detail

#endif // TESSEL_DIALECT_NN_NNOPSUTILS_H
