//===- RepeatKvHeads.cpp - tessel-repeat-kv-heads -------------------------===//
//
// Grouped-query attention split over more ranks than it has key/value
// heads (Qwen2-7B's 4 kv heads on tp=8, the example llama's 2 on tp=4):
// each rank's block of query heads reads a fraction of one kv head, which
// no even split of the kv heads gives it. The partitioner then gathered
// q, k and v whole on every rank and ran the whole attention there, tp
// times over. Megatron replicates each kv head on the ranks that share it;
// here each kv head is repeated before the attention, as Hugging Face's
// repeat_kv does, until there is one per rank:
//
//   %k: [B, T, Hkv, D], n ranks over the heads, n = Hkv · R
//   %kb = nn.broadcast %k dims = [0, 1, 2, 4] : ... -> [B, T, Hkv, R, D]
//   %kn = nn.reshape %kb : ... -> [B, T, n, D]
//   nn.attention %q, %kn, %vn   // query head h reads kv head h / (H / n)
//
// Query head h still reads its own kv head (h / (H / n) repeats
// h / (H / Hkv)), so the model computes the same; the kv heads now split
// evenly with the query heads, each rank slicing its repeat locally, and
// autodiff sums the repeats' gradients back. Runs before autodiff, only
// where the rules split `heads` over n > Hkv ranks with H and n multiples
// of Hkv and of n.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "dialect/NN/NNOps.h"
#include "runtime/config/Mesh.h"

#include "mlir/IR/Builders.h"

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
  std::optional<std::vector<std::pair<std::string, std::string>>> rules =
      parseRules(rulesText.str(), error);
  if (!rules)
    return failure();
  int64_t ranks = 1;
  std::vector<std::string> used;
  for (auto &[logical, axis] : *rules) {
    std::optional<int16_t> index = mesh->axisIndex(axis);
    if (logical != "heads" || !index || llvm::is_contained(used, axis))
      continue;
    used.push_back(axis);
    ranks *= mesh->shape[*index];
  }
  return ranks;
}

/// `kv` ([B, T, Hkv, D]) with each head repeated `repeats` times in a row:
/// [B, T, Hkv · repeats, D].
Value repeatHeads(OpBuilder &b, Location loc, Value kv, int64_t repeats) {
  auto type = cast<RankedTensorType>(kv.getType());
  ArrayRef<int64_t> shape = type.getShape();
  auto wide = RankedTensorType::get(
      {shape[0], shape[1], shape[2], repeats, shape[3]}, type.getElementType());
  Value broadcast = nn::BroadcastOp::create(
      b, loc, wide, kv, b.getDenseI64ArrayAttr({0, 1, 2, 4}));
  auto merged =
      RankedTensorType::get({shape[0], shape[1], shape[2] * repeats, shape[3]},
                            type.getElementType());
  return nn::ReshapeOp::create(b, loc, merged, broadcast);
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
      OpBuilder b(attention);
      Location loc = attention.getLoc();
      attention.getKeyMutable().assign(
          repeatHeads(b, loc, attention.getKey(), repeats));
      attention.getValueMutable().assign(
          repeatHeads(b, loc, attention.getValue(), repeats));
    });
  }
};

} // namespace
