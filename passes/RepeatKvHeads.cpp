//===- RepeatKvHeads.cpp - tessel-repeat-kv-heads -------------------------===//
//
// Grouped-query attention split over more ranks than it has key/value
// heads (Qwen2-7B's 4 kv heads on tp=8, the example llama's 2 on tp=4):
// each rank's block of query heads reads a fraction of one kv head, which
// no even split of the kv heads gives it. The partitioner then gathered
// q, k and v whole on every rank and ran the whole attention there, tp
// times over. Megatron replicates each kv head on the ranks that share it;
// here each kv head is repeated, as Hugging Face's repeat_kv does, until
// there is one per rank (n = Hkv · R), so that the heads split evenly:
//
// - where the key (or value) is a projection `reshape(matmul(x, W))`,
//   W of [E, Hkv·D] (plus a bias of Hkv·D, Qwen2's), through ops that
//   treat every head alike (nn.rope, a per-head nn.rms_norm or
//   nn.layer_norm), the projection's columns (and bias) are repeated: W becomes
//   reshape(broadcast(reshape(W) : [E, Hkv, D]) : [E, Hkv, R, D]) : [E, n·D],
//   and the chain runs on n heads. Each rank then needs only its head's columns
//   of W, a weight-sized gather;
// - otherwise the key itself: reshape(broadcast(k) : [B, T, Hkv, R, D]) :
//   [B, T, n, D], which each rank slices after gathering k.
//
// Query head h still reads its own kv head (h / (H / n) repeats
// h / (H / Hkv)), so the model computes the same; autodiff sums the
// repeats' gradients back. Runs before autodiff, only where the rules
// split `heads` over n > Hkv ranks with H and n multiples of Hkv and of n.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "passes/Sharding.h"

#include "dialect/NN/NNOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

#include <algorithm>

namespace tessel {
#define GEN_PASS_DEF_REPEATKVHEADSPASS
#include "passes/Passes.h.inc"
} // namespace tessel

using namespace mlir;
using namespace tessel;

namespace {

/// The number of ranks the rules split the logical axis `heads` over: the
/// product of the sizes of its mesh axes (a rule naming an axis the mesh
/// lacks splits nothing). Fails with `error` on a malformed mesh or rule.
FailureOr<int64_t> headRanks(StringRef meshText, StringRef rulesText,
                             std::string &error) {
  std::optional<Mesh> mesh = Mesh::parse(meshText.str(), error);
  if (!mesh)
    return failure();
  std::optional<std::vector<std::pair<std::string, std::string>>> named =
      parseRules(rulesText.str(), error);
  if (!named)
    return failure();
  std::optional<SmallVector<MeshRule>> rules =
      meshRules(*mesh, *named, /*dropUnknown=*/true, error);
  int64_t ranks = 1;
  SmallVector<int16_t> used;
  for (auto &[logical, axis] : *rules) {
    if (logical != "heads" || llvm::is_contained(used, axis))
      continue;
    used.push_back(axis);
    ranks *= mesh->shape[axis];
  }
  return ranks;
}

/// `value` with each index of its dimension `heads` repeated `repeats`
/// times in a row: broadcast over a new dimension after `heads`, then that
/// and the dimensions after it through `last` merged into one.
Value repeatAlong(OpBuilder &b, Location loc, Value value, int64_t heads,
                  int64_t repeats, int64_t last) {
  auto type = cast<RankedTensorType>(value.getType());
  SmallVector<int64_t> wide(type.getShape()), dims;
  wide.insert(wide.begin() + heads + 1, repeats);
  for (int64_t d = 0; d < type.getRank(); ++d)
    dims.push_back(d <= heads ? d : d + 1);
  Value broadcast = nn::BroadcastOp::create(b, loc, type.clone(wide), value,
                                            b.getDenseI64ArrayAttr(dims));
  SmallVector<int64_t> merged(wide.begin(), wide.begin() + heads);
  merged.push_back(
      llvm::product_of(ArrayRef<int64_t>(wide).slice(heads, last - heads + 2)));
  merged.append(wide.begin() + last + 2, wide.end());
  return nn::ReshapeOp::create(b, loc, type.clone(merged), broadcast);
}

/// `kv` ([B, T, Hkv, D]) with each head repeated `repeats` times in a row:
/// [B, T, Hkv · repeats, D].
Value repeatHeads(OpBuilder &b, Location loc, Value kv, int64_t repeats) {
  return repeatAlong(b, loc, kv, /*heads=*/2, repeats, /*last=*/2);
}

/// `value` ([..., Hkv·D]: a projection's weight or bias) with each head's
/// D entries of its last dimension repeated `repeats` times in a row:
/// [..., Hkv·repeats·D].
Value repeatHeadColumns(OpBuilder &b, Location loc, Value value,
                        int64_t kvHeads, int64_t repeats) {
  auto type = cast<RankedTensorType>(value.getType());
  SmallVector<int64_t> split(type.getShape());
  int64_t heads = type.getRank() - 1;
  split.back() /= kvHeads;
  split.insert(split.begin() + heads, kvHeads);
  Value byHead = nn::ReshapeOp::create(b, loc, type.clone(split), value);
  return repeatAlong(b, loc, byHead, heads, repeats, /*last=*/heads + 1);
}

/// A key or value computed as a projection: `matmul(x, W)` with W a
/// matrix [E, Hkv·D], split into heads by `split` ([..., Hkv·D] to
/// [..., Hkv, D]), then `perHead` (nearest the matmul first), each acting
/// on every head alike; every op read only by the next.
struct Projection {
  nn::MatmulOp matmul;
  /// A bias [Hkv·D] broadcast along the last dimension and added to the
  /// product (Qwen2's projections), or null.
  nn::BroadcastOp bias;
  nn::AddOp biasAdd;
  nn::ReshapeOp split;
  SmallVector<Operation *> perHead;
};

/// The bias vector broadcast along the last dimension of `value`'s type
/// by `broadcast`, or null.
Value lastDimBias(nn::BroadcastOp broadcast) {
  if (!broadcast || !broadcast->hasOneUse())
    return Value();
  auto bias = cast<RankedTensorType>(broadcast.getInput().getType());
  auto result = cast<RankedTensorType>(broadcast.getType());
  ArrayRef<int64_t> dims = broadcast.getDims();
  if (bias.getRank() != 1 || dims.size() != 1 ||
      dims[0] != result.getRank() - 1)
    return Value();
  return broadcast.getInput();
}

/// Whether `op` treats every head of its [..., heads, D] operand alike:
/// a rope, or a norm over D with a weight (and bias) of D.
bool actsPerHead(Operation *op) {
  if (isa<nn::RopeOp>(op))
    return op->getNumOperands() == 1;
  if (!isa<nn::RmsNormOp, nn::LayerNormOp>(op))
    return false;
  int64_t headDim =
      cast<RankedTensorType>(op->getOperand(0).getType()).getShape().back();
  for (Value param : op->getOperands().drop_front())
    if (cast<RankedTensorType>(param.getType()).getShape() !=
        ArrayRef<int64_t>{headDim})
      return false;
  return true;
}

/// The projection `kv` ([..., Hkv, D]) is computed by, or failure.
FailureOr<Projection> projectionOf(Value kv) {
  Projection chain;
  Value value = kv;
  while (Operation *op = value.getDefiningOp()) {
    if (!actsPerHead(op) || !value.hasOneUse())
      break;
    chain.perHead.push_back(op);
    value = op->getOperand(0);
  }
  std::reverse(chain.perHead.begin(), chain.perHead.end());
  chain.split = value.getDefiningOp<nn::ReshapeOp>();
  if (!chain.split || !value.hasOneUse())
    return failure();
  auto heads = cast<RankedTensorType>(value.getType());
  auto flat = cast<RankedTensorType>(chain.split.getInput().getType());
  int64_t rank = heads.getRank();
  if (flat.getRank() != rank - 1 ||
      flat.getShape().drop_back() != heads.getShape().drop_back(2) ||
      flat.getShape().back() !=
          heads.getDimSize(rank - 2) * heads.getDimSize(rank - 1))
    return failure();
  Value product = chain.split.getInput();
  if (auto add = product.getDefiningOp<nn::AddOp>();
      add && product.hasOneUse()) {
    for (int side : {0, 1}) {
      auto broadcast =
          add->getOperand(1 - side).getDefiningOp<nn::BroadcastOp>();
      if (add->getOperand(side).getDefiningOp<nn::MatmulOp>() &&
          lastDimBias(broadcast)) {
        chain.biasAdd = add;
        chain.bias = broadcast;
        product = add->getOperand(side);
        break;
      }
    }
    if (!chain.biasAdd)
      return failure();
  }
  chain.matmul = product.getDefiningOp<nn::MatmulOp>();
  if (!chain.matmul || !product.hasOneUse() || chain.matmul.getTransposeLhs() ||
      chain.matmul.getTransposeRhs() ||
      cast<RankedTensorType>(chain.matmul.getRhs().getType()).getRank() != 2)
    return failure();
  return chain;
}

/// The projection `chain` rebuilt on `repeats` times the heads: its weight's
/// columns repeated, the split and the per-head ops on the repeated heads.
/// Returns the new key or value; the old chain is erased.
Value repeatProjection(Projection chain, int64_t kvHeads, int64_t repeats) {
  OpBuilder b(chain.matmul);
  Location loc = chain.matmul.getLoc();
  Value weight =
      repeatHeadColumns(b, loc, chain.matmul.getRhs(), kvHeads, repeats);
  auto product = cast<RankedTensorType>(chain.matmul.getType());
  SmallVector<int64_t> shape(product.getShape());
  shape.back() *= repeats;
  Value value = nn::MatmulOp::create(
      b, loc, product.clone(shape), chain.matmul.getLhs(), weight,
      /*transpose_lhs=*/false, /*transpose_rhs=*/false);
  if (chain.biasAdd) {
    b.setInsertionPoint(chain.biasAdd);
    Location biasLoc = chain.bias.getLoc();
    Value bias =
        repeatHeadColumns(b, biasLoc, chain.bias.getInput(), kvHeads, repeats);
    Value broadcast = nn::BroadcastOp::create(
        b, biasLoc, product.clone(shape), bias,
        b.getDenseI64ArrayAttr({int64_t(shape.size()) - 1}));
    value = nn::AddOp::create(b, chain.biasAdd.getLoc(), value, broadcast);
  }
  auto heads = cast<RankedTensorType>(chain.split.getType());
  SmallVector<int64_t> headShape(heads.getShape());
  headShape[headShape.size() - 2] *= repeats;
  b.setInsertionPoint(chain.split);
  value = nn::ReshapeOp::create(b, chain.split.getLoc(), heads.clone(headShape),
                                value);
  for (Operation *op : chain.perHead) {
    b.setInsertionPoint(op);
    IRMapping mapping;
    mapping.map(op->getOperand(0), value);
    Operation *clone = b.clone(*op, mapping);
    clone->getResult(0).setType(value.getType());
    value = clone->getResult(0);
  }
  return value;
}

/// Erases `chain`'s ops once the attention no longer reads them.
void eraseProjection(Projection chain) {
  for (Operation *op : llvm::reverse(chain.perHead))
    op->erase();
  chain.split->erase();
  if (chain.biasAdd) {
    chain.biasAdd->erase();
    chain.bias->erase();
  }
  chain.matmul->erase();
}

class RepeatKvHeadsPass
    : public tessel::impl::RepeatKvHeadsPassBase<RepeatKvHeadsPass> {
public:
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (mesh.empty())
      return;
    std::string error;
    FailureOr<int64_t> ranks = headRanks(mesh, rules, error);
    if (failed(ranks)) {
      module.emitError() << "tessel-repeat-kv-heads: " << error;
      return signalPassFailure();
    }
    if (*ranks <= 1)
      return;
    module.walk([&](nn::AttentionOp attention) {
      int64_t heads = attention.getQuery().getType().getDimSize(2);
      int64_t kvHeads = attention.getKey().getType().getDimSize(2);
      if (kvHeads >= *ranks || *ranks % kvHeads != 0 || heads % *ranks != 0)
        return;
      int64_t repeats = *ranks / kvHeads;
      for (OpOperand *kv :
           {&attention.getKeyMutable(), &attention.getValueMutable()}) {
        if (FailureOr<Projection> chain = projectionOf(kv->get());
            succeeded(chain)) {
          kv->assign(repeatProjection(*chain, kvHeads, repeats));
          eraseProjection(*chain);
          continue;
        }
        OpBuilder b(attention);
        kv->assign(repeatHeads(b, attention.getLoc(), kv->get(), repeats));
      }
    });
  }
};

} // namespace
