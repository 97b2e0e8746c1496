//===- ContractionLowering.cpp - matmul, attention, rope, embedding -------===//

#include "passes/lowering/FunctionLowering.h"

using namespace mlir;

namespace tessel::lowering {
namespace {

/// tessel_matmul's sizes and flags of a product of lhs and rhs.
struct GemmOperands {
  int64_t batch, m, n, k;
  bool shared;
};

GemmOperands gemmOperands(Value lhs, Value rhs, bool transposeLhs,
                          bool transposeRhs) {
  ArrayRef<int64_t> l = cast<RankedTensorType>(lhs.getType()).getShape();
  ArrayRef<int64_t> r = cast<RankedTensorType>(rhs.getType()).getShape();
  GemmOperands g;
  g.batch = product(l.drop_back(2));
  g.m = transposeLhs ? l.back() : l[l.size() - 2];
  g.k = transposeLhs ? l[l.size() - 2] : l.back();
  g.n = transposeRhs ? r[r.size() - 2] : r.back();
  g.shared = r.size() == 2;
  return g;
}

LogicalResult lowerMatmul(nn::MatmulOp op, FunctionLowering &fl) {
  GemmOperands g = gemmOperands(op.getLhs(), op.getRhs(), op.getTransposeLhs(),
                                op.getTransposeRhs());
  if (op.getSumBatch()) {
    // The rows form: [..., K, M]ᵀ · [..., K, N] summed over the batch is
    // one GEMM of the flattened rows, [B·K, M]ᵀ · [B·K, N].
    g.k *= g.batch;
    g.batch = 1;
    g.shared = true;
  }
  fl.call(rt::tessel_matmul,
          {fl.dtype(op.getResult()), fl.ptr(op.getLhs()), fl.ptr(op.getRhs()),
           fl.ptr(op.getResult()), fl.i64(g.batch), fl.i64(g.m), fl.i64(g.n),
           fl.i64(g.k), fl.i32(op.getTransposeLhs()),
           fl.i32(op.getTransposeRhs()), fl.i32(g.shared)});
  return success();
}

/// tessel_matmul_epilogue writing `out`: beta 1 accumulates into it, a
/// non-null bias adds it to every row.
void emitMatmulEpilogue(FunctionLowering &fl, Value lhs, Value rhs,
                        bool transposeLhs, bool transposeRhs, Value out,
                        double beta, Value bias) {
  GemmOperands g = gemmOperands(lhs, rhs, transposeLhs, transposeRhs);
  fl.call(rt::tessel_matmul_epilogue,
          {fl.dtype(out), fl.ptr(lhs), fl.ptr(rhs), fl.ptr(out),
           fl.i64(g.batch), fl.i64(g.m), fl.i64(g.n), fl.i64(g.k),
           fl.i32(transposeLhs), fl.i32(transposeRhs), fl.i32(g.shared),
           fl.f64(beta),
           fl.i32(bias ? TESSEL_EPILOGUE_BIAS : TESSEL_EPILOGUE_NONE),
           bias ? fl.ptr(bias) : fl.null()});
}

/// tessel_matmul_epilogue_aux writing `out`: an epilogue with its aux
/// tensor (written by GELU_BIAS, null when nothing reads it; read by DGELU;
/// the bias gradient BGRADB writes).
void emitMatmulAux(FunctionLowering &fl, Value lhs, Value rhs,
                    bool transposeLhs, bool transposeRhs, Value out,
                    int32_t epilogue, Value bias, Value aux,
                    double beta = 0.0) {
  GemmOperands g = gemmOperands(lhs, rhs, transposeLhs, transposeRhs);
  fl.call(rt::tessel_matmul_epilogue_aux,
          {fl.dtype(out), fl.ptr(lhs), fl.ptr(rhs), fl.ptr(out),
           fl.i64(g.batch), fl.i64(g.m), fl.i64(g.n), fl.i64(g.k),
           fl.i32(transposeLhs), fl.i32(transposeRhs), fl.i32(g.shared),
           fl.f64(beta), fl.i32(epilogue), fl.ptrOrNull(bias),
           fl.ptrOrNull(aux)});
}

/// tessel_matmul_accumulate_f32 (accumulate: out (f32) += lhs · rhs) or
/// tessel_matmul_f32 (out = lhs · rhs), in f32; the bias gradient (f32)
/// written when not null.
void emitMatmulF32(FunctionLowering &fl, Value lhs, Value rhs,
                   bool transposeLhs, bool transposeRhs, Value out,
                   Value biasGrad, bool accumulate) {
  GemmOperands g = gemmOperands(lhs, rhs, transposeLhs, transposeRhs);
  fl.call(accumulate ? rt::tessel_matmul_accumulate_f32 : rt::tessel_matmul_f32,
          {fl.dtype(lhs), fl.ptr(lhs), fl.ptr(rhs), fl.ptr(out),
           fl.i64(g.batch), fl.i64(g.m), fl.i64(g.n), fl.i64(g.k),
           fl.i32(transposeLhs), fl.i32(transposeRhs), fl.i32(g.shared),
           fl.i32(biasGrad ? TESSEL_EPILOGUE_BGRADB : TESSEL_EPILOGUE_NONE),
           fl.ptrOrNull(biasGrad)});
}

/// In place: acc += lhs · rhs.
LogicalResult lowerMatmulAccumulate(nn::MatmulAccumulateOp op,
                                    FunctionLowering &fl) {
  fl.pointers[op.getResult()] = fl.ptr(op.getAcc());
  if (isWidened(op.getLhs(), op.getAcc()))
    emitMatmulF32(fl, op.getLhs(), op.getRhs(), op.getTransposeLhs(),
                  op.getTransposeRhs(), op.getResult(), Value(),
                  /*accumulate=*/true);
  else
    emitMatmulEpilogue(fl, op.getLhs(), op.getRhs(), op.getTransposeLhs(),
                       op.getTransposeRhs(), op.getResult(), 1.0, Value());
  return success();
}

LogicalResult lowerMatmulF32(nn::MatmulF32Op op, FunctionLowering &fl) {
  emitMatmulF32(fl, op.getLhs(), op.getRhs(), op.getTransposeLhs(),
                op.getTransposeRhs(), op.getResult(), Value(),
                /*accumulate=*/false);
  return success();
}

LogicalResult lowerMatmulBias(nn::MatmulBiasOp op, FunctionLowering &fl) {
  emitMatmulEpilogue(fl, op.getLhs(), op.getRhs(), op.getTransposeLhs(),
                     op.getTransposeRhs(), op.getResult(), 0.0, op.getBias());
  return success();
}

LogicalResult lowerMatmulBiasGelu(nn::MatmulBiasGeluOp op,
                                  FunctionLowering &fl) {
  Value pre = op.getPre().use_empty() ? Value() : op.getPre();
  emitMatmulAux(fl, op.getLhs(), op.getRhs(), op.getTransposeLhs(),
                 op.getTransposeRhs(), op.getResult(),
                 TESSEL_EPILOGUE_GELU_BIAS, op.getBias(), pre);
  return success();
}

LogicalResult lowerMatmulGeluGrad(nn::MatmulGeluGradOp op,
                                  FunctionLowering &fl) {
  emitMatmulAux(fl, op.getLhs(), op.getRhs(), op.getTransposeLhs(),
                 op.getTransposeRhs(), op.getResult(), TESSEL_EPILOGUE_DGELU,
                 Value(), op.getPre());
  return success();
}

/// With an accumulator, in place: acc += lhs · rhs (beta 1), the bias
/// gradient written. f32 results of 16-bit operands: in f32.
LogicalResult lowerMatmulBiasGrad(nn::MatmulBiasGradOp op,
                                  FunctionLowering &fl) {
  if (op.getAcc())
    fl.pointers[op.getResult()] = fl.ptr(op.getAcc());
  if (isWidened(op.getLhs(), op.getResult())) {
    emitMatmulF32(fl, op.getLhs(), op.getRhs(), op.getTransposeLhs(),
                  op.getTransposeRhs(), op.getResult(), op.getBiasGrad(),
                  /*accumulate=*/bool(op.getAcc()));
    return success();
  }
  emitMatmulAux(fl, op.getLhs(), op.getRhs(), op.getTransposeLhs(),
                 op.getTransposeRhs(), op.getResult(), TESSEL_EPILOGUE_BGRADB,
                 Value(), op.getBiasGrad(), op.getAcc() ? 1.0 : 0.0);
  return success();
}

/// A lookup of the rank's block of the table's rows (all of them unless
/// vocabulary-parallel).
LogicalResult lowerEmbedding(nn::EmbeddingOp op, FunctionLowering &fl) {
  ArrayRef<int64_t> table = op.getTable().getType().getShape();
  FailureOr<RankBlock> block = fl.blockOf(op, table[0]);
  if (failed(block))
    return failure();
  fl.call(rt::tessel_embedding,
          {fl.dtype(op.getResult()), fl.dtype(op.getIds()),
           fl.ptr(op.getTable()), fl.ptr(op.getIds()), fl.ptr(op.getResult()),
           fl.count(op.getIds()), fl.i64(table[0]), fl.i64(table[1]),
           block->first, block->whole});
  return success();
}

/// A soft cap goes to tessel_attention_softcap (ABI 24) with the window
/// (0: none); otherwise a sliding window, or the layer's of per-layer
/// windows (0: none), goes to tessel_attention_window (ABI 20); a block of
/// the queries (context parallelism) to tessel_attention_block (ABI 31),
/// its query offset after the window and the cap; without any, the entries
/// older runtimes have.
LogicalResult lowerAttention(nn::AttentionOp op, FunctionLowering &fl) {
  I32Value dtype = fl.dtype(op.getResult());
  AttentionShape shape = fl.attentionShape(
      op.getQuery(), op.getKey(), op.getValue(), op.getScale(), op.getCausal());
  std::optional<I64Value> layerWindow;
  if (std::optional<ArrayRef<int64_t>> table = op.getLayerWindows()) {
    FailureOr<I64Value> entry = fl.layerEntry(op, *table);
    if (failed(entry))
      return failure();
    layerWindow = *entry;
  }
  std::optional<APFloat> softcap = op.getSoftcap();
  bool queryBlock = bool(op.getBlockAxesAttr());
  if (softcap || layerWindow || op.getWindow() || queryBlock) {
    // tessel_attention_window's arguments, then the cap's for
    // tessel_attention_softcap, then a block's query offset for
    // tessel_attention_block.
    auto call = [&](const auto &fn, auto... windowAndCap) {
      fl.call(fn, {dtype, fl.ptr(op.getQuery()), fl.ptr(op.getKey()),
                   fl.ptr(op.getValue()), fl.ptr(op.getResult()),
                   fl.ptrOrNull(op.getLse()), shape.batch, shape.seq,
                   shape.kvSeq, shape.heads, shape.kvHeads, shape.headDim,
                   shape.valueDim, shape.scale, shape.causal,
                   windowAndCap...});
    };
    I64Value window =
        layerWindow ? *layerWindow : fl.i64(op.getWindow().value_or(0));
    if (queryBlock) {
      F64Value cap = fl.f64(softcap ? softcap->convertToDouble() : 0.0);
      FailureOr<I64Value> first =
          fl.blockStart(op, op.getQuery().getType().getDimSize(1));
      if (failed(first))
        return failure();
      call(rt::tessel_attention_block, window, cap, *first);
    } else if (softcap) {
      call(rt::tessel_attention_softcap, window,
           fl.f64(softcap->convertToDouble()));
    } else {
      call(rt::tessel_attention_window, window);
    }
    return success();
  }
  if (op.getLse()) {
    fl.call(rt::tessel_attention_lse,
            {dtype, fl.ptr(op.getQuery()), fl.ptr(op.getKey()),
             fl.ptr(op.getValue()), fl.ptr(op.getResult()), fl.ptr(op.getLse()),
             shape.batch, shape.seq, shape.kvSeq, shape.heads, shape.kvHeads,
             shape.headDim, shape.valueDim, shape.scale, shape.causal});
    return success();
  }
  fl.call(rt::tessel_attention,
          {dtype, fl.ptr(op.getQuery()), fl.ptr(op.getKey()),
           fl.ptr(op.getValue()), fl.ptr(op.getResult()), shape.batch,
           shape.seq, shape.kvSeq, shape.heads, shape.kvHeads, shape.headDim,
           shape.valueDim, shape.scale, shape.causal});
  return success();
}

/// [..., S, H, D] as tessel_rope's [outer, positions, heads, head_dim].
LogicalResult lowerRope(nn::RopeOp op, FunctionLowering &fl) {
  ArrayRef<int64_t> shape = op.getType().getShape();
  int64_t outer = 1;
  for (int64_t size : shape.drop_back(3))
    outer *= size; // the verified type's element count fits int64
  size_t rank = shape.size();
  // Llama 3.1's scaling, or factor 0: none.
  SmallVector<double, 4> scaling(4, 0.0);
  if (std::optional<ArrayRef<double>> given = op.getScaling())
    scaling.assign(given->begin(), given->end());
  // The layer's theta and scaling, from per-layer tables.
  F64Value theta = fl.f64(op.getTheta().convertToDouble());
  if (std::optional<ArrayRef<double>> table = op.getLayerThetas()) {
    FailureOr<F64Value> entry = fl.layerEntry(op, *table);
    if (failed(entry))
      return failure();
    theta = *entry;
  }
  std::optional<SmallVector<F64Value>> layerScaling;
  if (std::optional<ArrayRef<double>> table = op.getLayerScalings()) {
    FailureOr<SmallVector<F64Value>> entries = fl.layerEntries(op, *table, 4);
    if (failed(entries))
      return failure();
    layerScaling = *entries;
  }
  // A rank's block of the positions (context parallelism) turns them from
  // its first (the _block entries, ABI 31).
  std::optional<I64Value> first;
  if (op.getBlockAxesAttr()) {
    FailureOr<I64Value> start = fl.blockStart(op, shape[rank - 3]);
    if (failed(start))
      return failure();
    first = *start;
  }
  // (Every argument is built before the call, in order: a call's
  // arguments are evaluated in any order.)
  auto call = [&](const auto &plain, const auto &fromFirst, auto... args) {
    if (first)
      fl.call(fromFirst, {args..., *first});
    else
      fl.call(plain, {args...});
  };
  I32Value dtype = fl.dtype(op.getResult());
  PtrValue x = fl.ptr(op.getInput()), y = fl.ptr(op.getResult());
  I64Value outerSize = fl.i64(outer), positions = fl.i64(shape[rank - 3]),
           heads = fl.i64(shape[rank - 2]), dim = fl.i64(shape[rank - 1]);
  I32Value interleaved = fl.i32(op.getInterleaved()),
           inverse = fl.i32(op.getInverse());
  if (std::optional<ArrayRef<double>> yarn = op.getYarn()) {
    // YaRN's (ABI 25): the runtime computes the ramp from theta.
    F64Value factor = fl.f64((*yarn)[0]), betaFast = fl.f64((*yarn)[1]),
             betaSlow = fl.f64((*yarn)[2]), original = fl.f64((*yarn)[3]);
    I32Value truncate = fl.i32((*yarn)[4] != 0.0);
    call(rt::tessel_rope_yarn, rt::tessel_rope_yarn_block, dtype, x, y,
         outerSize, positions, heads, dim, theta, interleaved, inverse, factor,
         betaFast, betaSlow, original, truncate);
    return success();
  }
  std::optional<ArrayRef<double>> longrope = op.getLongrope();
  std::optional<APFloat> attention = op.getAttentionFactor();
  if (longrope || op.getRotaryDim() || attention) {
    // A partial rope, LongRoPE's per-pair factors, an attention factor
    // (ABI 26): the factors a constant table the runtime reads once a call.
    I64Value rotated = fl.i64(op.getRotatedWidth());
    PtrValue factors = longrope ? fl.f64Array(*longrope) : fl.null();
    F64Value scale = fl.f64(attention ? attention->convertToDouble() : 1.0);
    call(rt::tessel_rope_factors, rt::tessel_rope_factors_block, dtype, x, y,
         outerSize, positions, heads, dim, rotated, theta, interleaved, inverse,
         factors, scale);
    return success();
  }
  auto scale = [&](int k) {
    return layerScaling ? (*layerScaling)[k] : fl.f64(scaling[k]);
  };
  F64Value factor = scale(0), low = scale(1), high = scale(2),
           original = scale(3);
  call(rt::tessel_rope, rt::tessel_rope_block, dtype, x, y, outerSize,
       positions, heads, dim, theta, interleaved, inverse, factor, low, high,
       original);
  return success();
}

} // namespace

void addContractionLowerings(LoweringRegistry &registry) {
  registry.add<nn::MatmulOp>(lowerMatmul);
  registry.add<nn::MatmulAccumulateOp>(lowerMatmulAccumulate);
  registry.add<nn::MatmulF32Op>(lowerMatmulF32);
  registry.add<nn::MatmulBiasOp>(lowerMatmulBias);
  registry.add<nn::MatmulBiasGeluOp>(lowerMatmulBiasGelu);
  registry.add<nn::MatmulGeluGradOp>(lowerMatmulGeluGrad);
  registry.add<nn::MatmulBiasGradOp>(lowerMatmulBiasGrad);
  registry.add<nn::EmbeddingOp>(lowerEmbedding);
  registry.add<nn::AttentionOp>(lowerAttention);
  registry.add<nn::RopeOp>(lowerRope);
}

} // namespace tessel::lowering
