//===- FunctionLowering.h - an nn function body to calls --------*- C++ -*-===//
//
// FunctionLowering holds what the lowering of one function body shares (the
// builder, the ctx and scratch pointers, the pointer of every tensor) and
// the argument builders the op lowerings have in common. The op lowerings
// themselves are small functions, one file per op family, each registered
// in a LoweringRegistry by the op it lowers.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_PASSES_LOWERING_FUNCTIONLOWERING_H
#define TESSEL_PASSES_LOWERING_FUNCTIONLOWERING_H

#include "passes/lowering/RuntimeEmitter.h"

#include "dialect/NN/NNOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/Support/TypeID.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

#include <functional>
#include <optional>
#include <utility>

namespace tessel::lowering {

class FunctionLowering;

/// The lowering of each op the runtime implements, by the op's TypeID.
class LoweringRegistry {
public:
  using Lowering =
      std::function<mlir::LogicalResult(mlir::Operation *, FunctionLowering &)>;

  /// Registers `lower` for each of OpTys; it takes the op as an OpTy (or as
  /// an Operation *) and the function's lowering.
  template <typename... OpTys, typename Fn> void add(Fn lower) {
    (addOne(mlir::TypeID::get<OpTys>(),
            [lower](mlir::Operation *op, FunctionLowering &fl) {
              return lower(mlir::cast<OpTys>(op), fl);
            }),
     ...);
  }

  /// The lowering of `op`, or null when the runtime has none.
  const Lowering *lookup(mlir::Operation *op) const;

private:
  /// Fails loudly on an op registered twice (one lowering would be lost).
  void addOne(mlir::TypeID op, Lowering lowering);

  llvm::DenseMap<mlir::TypeID, Lowering> table;
};

/// The op families; each registers its lowerings.
void addElementwiseLowerings(LoweringRegistry &registry);
void addShapeLowerings(LoweringRegistry &registry);
void addContractionLowerings(LoweringRegistry &registry);
void addNormAndLossLowerings(LoweringRegistry &registry);
void addGradientLowerings(LoweringRegistry &registry);
void addTrainingLowerings(LoweringRegistry &registry);
void addCollectiveLowerings(LoweringRegistry &registry);
void addRepeatLowering(LoweringRegistry &registry);

/// Every lowering of the runtime.
LoweringRegistry buildLoweringRegistry();

/// Row-major strides (in elements) of `shape`.
llvm::SmallVector<int64_t> contiguousStrides(llvm::ArrayRef<int64_t> shape);
int64_t product(llvm::ArrayRef<int64_t> sizes);
mlir::RankedTensorType tensorType(mlir::Value value);
int64_t bytesOf(mlir::Value value);

/// Whether `result` is stored wider than the 16-bit `operand` it is
/// computed from: an f32 result, for the runtime's _f32 entries.
bool isWidened(mlir::Value operand, mlir::Value result);

/// A strided window of a row-major tensor (nn.slice's and its gradient's):
/// the element strides that step through it and its first element.
struct StridedWindow {
  llvm::SmallVector<int64_t> strides;
  int64_t first = 0;
};
StridedWindow stridedWindow(llvm::ArrayRef<int64_t> shape,
                            llvm::ArrayRef<int64_t> start,
                            llvm::ArrayRef<int64_t> steps);

/// The runtime's code of a loss reduction.
int32_t lossReduction(nn::LossReduction reduction);

/// The value of a loss's optional attribute (a label smoothing, a logit
/// soft cap), or 0: none, as the runtime's loss entries take it.
double optionOrZero(std::optional<llvm::APFloat> option);

/// Whether a cross-entropy op (the loss, its gradient or both) has a label
/// smoothing or a logit soft cap: the runtime's _smoothed entries.
template <class LossOp> bool hasLossOptions(LossOp op) {
  return op.getLabelSmoothing() || op.getLogitSoftcap();
}

/// The [outer, dim, inner] view of a tensor around dimension `dim` (softmax,
/// batch norm and their gradients).
struct ViewAround {
  I64Value outer, dim, inner;
};

/// Rows of the last dimension (the norms): rows and cols.
struct RowsAndCols {
  I64Value rows, cols;
};

/// The shape arguments of tessel_attention and tessel_attention_grad.
struct AttentionShape {
  I64Value batch, seq, kvSeq, heads, kvHeads, headDim, valueDim;
  F64Value scale;
  I32Value causal;
};

/// A rank's block of a dimension: its first index and the whole size.
struct RankBlock {
  I64Value first, whole;
};

class FunctionLowering {
public:
  FunctionLowering(RuntimeEmitter &emit, mlir::OpBuilder &b, mlir::Value ctx,
                   mlir::Value scratch, mlir::ValueRange outs = {})
      : emit(emit), b(b), ctx(ctx), scratch(scratch), outs(outs) {}

  /// Places the results of `op` (at their planned offsets) and lowers it.
  mlir::LogicalResult lower(mlir::Operation *op,
                            const LoweringRegistry &registry);

  RuntimeEmitter &emit;
  mlir::OpBuilder &b;
  CtxValue ctx;
  PtrValue scratch;
  mlir::ValueRange outs; // the function's result pointers
  /// The location of the op being lowered.
  mlir::Location loc = b.getUnknownLoc();
  /// The pointer that holds each tensor.
  llvm::DenseMap<mlir::Value, mlir::Value> pointers;
  /// Ops an earlier op's lowering took care of, results included (a group
  /// of optimizer steps): lower() skips them.
  llvm::DenseSet<mlir::Operation *> lowered;

  PtrValue ptr(mlir::Value tensor) { return PtrValue(pointers.lookup(tensor)); }
  /// The pointer of `tensor`, or null for an absent optional one.
  PtrValue ptrOrNull(mlir::Value tensor) {
    return tensor ? ptr(tensor) : null();
  }
  PtrValue null() { return emit.null(b, loc); }
  I64Value i64(int64_t v) { return emit.i64(b, loc, v); }
  I32Value i32(int32_t v) { return emit.i32(b, loc, v); }
  F64Value f64(double v) { return emit.f64(b, loc, v); }
  /// The tessel_dtype code of a tensor's element type.
  I32Value dtype(mlir::Value tensor);
  /// The element count of a tensor.
  I64Value count(mlir::Value tensor);
  PtrValue i64Array(llvm::ArrayRef<int64_t> values) {
    return emit.i64Array(b, loc, values);
  }
  PtrValue f64Array(llvm::ArrayRef<double> values) {
    return emit.f64Array(b, loc, values);
  }
  /// `op`'s entry of a per-layer table for the model's layer running
  /// (tessel_get_layer, which the nn.repeat running the layer sets), or an
  /// error where no repeat runs `op`'s function.
  mlir::FailureOr<I64Value> layerEntry(mlir::Operation *op,
                                       llvm::ArrayRef<int64_t> table);
  mlir::FailureOr<F64Value> layerEntry(mlir::Operation *op,
                                       llvm::ArrayRef<double> table);
  /// The `width` entries of the layer running in a table of `width` a
  /// layer (a rope's layer_scalings: four).
  mlir::FailureOr<llvm::SmallVector<F64Value>>
  layerEntries(mlir::Operation *op, llvm::ArrayRef<double> table,
               int64_t width);
  PtrValue offset(mlir::Value base, int64_t bytes) {
    return emit.offset(b, loc, base, bytes);
  }

  /// Calls `fn`, a runtime function whose first parameter is the context,
  /// with this function's context and `args`.
  template <typename Result, typename Ctx, typename... Params>
  AbiResult<Result> call(const RuntimeFunction<Result(Ctx, Params...)> &fn,
                         AbiArgs<Params...> args) {
    static_assert(AbiKindOf<Ctx>::kind == AbiKind::Ctx,
                  "FunctionLowering::call passes the context first");
    return emitWithContext(fn, args, std::index_sequence_for<Params...>());
  }

  /// One tessel_strided_copy of `shape` elements of `tensor`'s dtype.
  void stridedCopy(mlir::Value tensor, PtrValue in, PtrValue out,
                   llvm::ArrayRef<int64_t> shape,
                   llvm::ArrayRef<int64_t> inStrides,
                   llvm::ArrayRef<int64_t> outStrides);

  ViewAround viewAround(llvm::ArrayRef<int64_t> shape, int64_t dim);
  RowsAndCols rowsAndCols(llvm::ArrayRef<int64_t> shape);
  AttentionShape attentionShape(mlir::Value query, mlir::Value key,
                                mlir::Value value,
                                std::optional<llvm::APFloat> scale,
                                bool causal);

  /// Where a rank's block of `size` rows or classes starts and how many the
  /// whole dimension has: with `block_axes` (a vocabulary-parallel split)
  /// the rank's group index and group size over those grid axes, asked of
  /// the runtime; without, the whole dimension.
  mlir::FailureOr<RankBlock> blockOf(mlir::Operation *op, int64_t size);
  /// blockOf's `first` alone (a sequence block's first position: the ops
  /// that need no whole size ask the runtime for no group size).
  mlir::FailureOr<I64Value> blockStart(mlir::Operation *op, int64_t size);

  /// The runtime's bit mask of grid `axes` (an op's `kind` axes: its split
  /// or block axes), or an error on an axis the runtime lacks.
  static mlir::FailureOr<uint32_t> gridAxesMask(mlir::Operation *op,
                                                llvm::ArrayRef<int16_t> axes,
                                                llvm::StringRef kind);

private:
  template <typename Result, typename Ctx, typename... Params, size_t... Is>
  AbiResult<Result>
  emitWithContext(const RuntimeFunction<Result(Ctx, Params...)> &fn,
                  const AbiArgs<Params...> &args, std::index_sequence<Is...>) {
    return emit.call(fn, b, loc, {ctx, AbiArg<Params>(args.values[Is])...});
  }
};

} // namespace tessel::lowering

#endif // TESSEL_PASSES_LOWERING_FUNCTIONLOWERING_H
