//===- ContractionLowering.cpp - matmul, attention, embedding -------------===//

#include "passes/lowering/FunctionLowering.h"

using namespace mlir;

namespace tessel::lowering {
namespace {

LogicalResult lowerMatmul(nn::MatmulOp op, FunctionLowering &fl) {
  ArrayRef<int64_t> lhs = op.getLhs().getType().getShape();
  ArrayRef<int64_t> rhs = op.getRhs().getType().getShape();
  int64_t batch = product(lhs.drop_back(2));
  int64_t m = op.getTransposeLhs() ? lhs.back() : lhs[lhs.size() - 2];
  int64_t k = op.getTransposeLhs() ? lhs[lhs.size() - 2] : lhs.back();
  int64_t n = op.getTransposeRhs() ? rhs[rhs.size() - 2] : rhs.back();
  bool shared = rhs.size() == 2;
  fl.call(rt::tessel_matmul,
          {fl.dtype(op.getResult()), fl.ptr(op.getLhs()), fl.ptr(op.getRhs()),
           fl.ptr(op.getResult()), fl.i64(batch), fl.i64(m), fl.i64(n),
           fl.i64(k), fl.i32(op.getTransposeLhs()),
           fl.i32(op.getTransposeRhs()), fl.i32(shared)});
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

LogicalResult lowerAttention(nn::AttentionOp op, FunctionLowering &fl) {
  I32Value dtype = fl.dtype(op.getResult());
  AttentionShape shape = fl.attentionShape(
      op.getQuery(), op.getKey(), op.getValue(), op.getScale(), op.getCausal());
  fl.call(rt::tessel_attention,
          {dtype, fl.ptr(op.getQuery()), fl.ptr(op.getKey()),
           fl.ptr(op.getValue()), fl.ptr(op.getResult()), shape.batch,
           shape.seq, shape.kvSeq, shape.heads, shape.kvHeads, shape.headDim,
           shape.valueDim, shape.scale, shape.causal});
  return success();
}

} // namespace

void addContractionLowerings(LoweringRegistry &registry) {
  registry.add<nn::MatmulOp>(lowerMatmul);
  registry.add<nn::EmbeddingOp>(lowerEmbedding);
  registry.add<nn::AttentionOp>(lowerAttention);
}

} // namespace tessel::lowering
