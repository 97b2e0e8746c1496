//===- AccumulateInLayers.cpp - tessel-accumulate-in-layers ---------------===//
//
// A repeat's derivative returns each layer's parameter gradients stacked,
// [L, ...] per parameter, and the step adds each stack into the gradient
// accumulator afterwards: as much memory again as the layers' weights,
// and a pass over it. Moving the accumulate of a weight gradient into the
// layer (the repeat's `outs`) sums each layer's gradient into its slice of
// the accumulator where the layer computes it, and tessel-fuse-epilogues
// folds that add into the GEMM (beta = 1): no stack, no add. So does a
// gradient the layer unpacks from a collective (a slice of its DDP
// bucket's all-reduce): the add into its slice of the accumulator reads
// it where the bucket holds it, in place of the copy into the stack. A
// gradient the layer computes otherwise (a bias's or a norm's, vectors)
// stays stacked: in the layer its add would be a kernel per layer instead
// of one for all of them, to save a few bytes.
//
//===----------------------------------------------------------------------===//

#include "passes/Communication.h"
#include "passes/FusionPlacement.h"
#include "passes/Passes.h"
#include "passes/Views.h"

#include "dialect/NN/NNOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/BitVector.h"

namespace tessel {
#define GEN_PASS_DEF_ACCUMULATEINLAYERSPASS
#include "passes/Passes.h.inc"
} // namespace tessel

using namespace mlir;
using namespace tessel;
using namespace tessel::fusion;

namespace {

/// A stacked result of a repeat and the accumulate that sums it into an
/// accumulator.
struct Move {
  unsigned stacked; // index in the repeat's stacked results
  nn::AccumulateOp accumulate;
};

/// Whether the layer returns `value` straight from a GEMM that nothing
/// else reads: the add into its accumulator then folds into the GEMM. Or
/// from the cast of such a GEMM's 16-bit product to its f32 accumulator's
/// type (tessel-mixed-precision's gradients): the cast and the add then
/// run per layer, without the f32 stack of every layer's gradient.
bool fromSoleGemm(Value value) {
  nn::CastOp widening = soleWidening(value);
  return static_cast<bool>(
      soleMatmul(widening ? widening.getInput() : value));
}

/// Whether the layer returns `value` sliced, through views, from a
/// collective's result (a gradient of its bucket): returned into the
/// stack it would be a copy, which the add into its accumulator replaces.
bool unpacksCollective(Value value) {
  auto slice = views::viewedBase(value).getDefiningOp<nn::SliceOp>();
  if (!slice)
    return false;
  Value input = views::viewedBase(slice.getInput());
  while (auto wait = input.getDefiningOp<nn::WaitOp>())
    input = views::viewedBase(wait.getInput());
  Operation *def = input.getDefiningOp();
  return def && communication::isLowerableCollective(def);
}

/// The accumulate that may move into the layer with stacked result
/// `stacked`: its only use, into an accumulator that exists at the repeat
/// and that nothing reads between the two.
nn::AccumulateOp movableAccumulate(nn::RepeatOp repeat, Value stacked,
                                   Value returned) {
  if (!stacked.hasOneUse() ||
      (!fromSoleGemm(returned) && !unpacksCollective(returned)))
    return nn::AccumulateOp();
  auto accumulate = dyn_cast<nn::AccumulateOp>(*stacked.getUsers().begin());
  if (!accumulate || accumulate.getValue() != stacked ||
      accumulate->getBlock() != repeat->getBlock())
    return nn::AccumulateOp();
  Value acc = accumulate.getAcc();
  if (!availableAt(acc, repeat) ||
      llvm::is_contained(repeat->getOperands(), acc) ||
      usedBetween(acc, repeat, accumulate))
    return nn::AccumulateOp();
  return accumulate;
}

/// The layer function of `repeat` when that repeat is its only user.
func::FuncOp soleLayer(nn::RepeatOp repeat) {
  func::FuncOp layer = repeat.getLayerFunction();
  if (!layer || layer.isExternal())
    return func::FuncOp();
  std::optional<SymbolTable::UseRange> uses =
      SymbolTable::getSymbolUses(layer, layer->getParentOp());
  if (!uses || !llvm::hasSingleElement(*uses))
    return func::FuncOp();
  return layer;
}

RankedTensorType sliceType(Value stacked) {
  auto type = cast<RankedTensorType>(stacked.getType());
  return RankedTensorType::get(type.getShape().drop_front(),
                               type.getElementType());
}

/// The layer takes a slice of each moved accumulator after the existing
/// outs slices, accumulates its gradient into it and returns it after the
/// existing outs results; the repeat is rebuilt with the accumulators as
/// outs, its updated accumulators replacing the accumulates' results. The
/// adds go before the layer's return in the order the layer makes their
/// gradients (a bucket's in the order of the all-reduces: the completion
/// of each, which tessel-overlap-communication places before its adds,
/// then comes as late as the one before allows).
void moveIntoLayer(nn::RepeatOp repeat, func::FuncOp layer,
                   MutableArrayRef<Move> moves) {
  unsigned numCarried = repeat.getCarried().size();
  unsigned numOuts = repeat.getOuts().size();
  unsigned firstArg = numCarried + repeat.getParams().size() + numOuts;
  unsigned firstResult = numCarried + numOuts;
  Block &body = layer.getBody().front();
  Operation *terminator = body.getTerminator();

  SmallVector<Value> updated;
  llvm::BitVector moved(layer.getNumResults());
  for (auto [j, move] : llvm::enumerate(moves)) {
    Location loc = move.accumulate.getLoc();
    RankedTensorType slice = sliceType(move.accumulate.getAcc());
    (void)layer.insertArgument(firstArg + j, slice, DictionaryAttr(), loc);
    OpBuilder b(terminator);
    unsigned position = firstResult + move.stacked;
    moved.set(position);
    updated.push_back(nn::AccumulateOp::create(
        b, loc, terminator->getOperand(position),
        body.getArgument(firstArg + j)));
  }
  // In the order the layer makes their gradients (arguments first): where
  // the GEMM or the collective they are views of stands.
  auto madeAt = [&](Value value) -> Operation * {
    Operation *def =
        value.getDefiningOp<nn::AccumulateOp>().getValue().getDefiningOp();
    while (def && isa<nn::ReshapeOp, nn::SliceOp, nn::WaitOp>(def))
      def = def->getOperand(0).getDefiningOp();
    return def && def->getBlock() == &body ? def : nullptr;
  };
  SmallVector<Value> inOrder(updated);
  llvm::stable_sort(inOrder, [&](Value a, Value b) {
    Operation *x = madeAt(a), *y = madeAt(b);
    return y && x != y && (!x || x->isBeforeInBlock(y));
  });
  for (Value value : inOrder)
    value.getDefiningOp()->moveBefore(terminator);
  SmallVector<Value> returned;
  for (OpOperand &operand : terminator->getOpOperands()) {
    if (operand.getOperandNumber() == firstResult)
      returned.append(updated);
    if (!moved.test(operand.getOperandNumber()))
      returned.push_back(operand.get());
  }
  terminator->setOperands(returned);
  (void)layer.eraseResults(moved);
  for (auto [j, value] : llvm::enumerate(updated))
    (void)layer.insertResult(firstResult + j, value.getType(),
                             DictionaryAttr());

  // The rebuilt repeat's results: the carried values and the outs it had,
  // the moved accumulators, then the stacked results that stay.
  ValueRange kept = repeat.getResults().take_front(firstResult);
  SmallVector<Value> stayed;
  for (auto [k, stacked] : llvm::enumerate(repeat.getStackedResults()))
    if (!moved.test(firstResult + k))
      stayed.push_back(stacked);
  SmallVector<Value> outs(repeat.getOuts());
  SmallVector<Type> types(kept.getTypes());
  for (Move &move : moves) {
    outs.push_back(move.accumulate.getAcc());
    types.push_back(move.accumulate.getType());
  }
  llvm::append_range(types, ValueRange(stayed).getTypes());
  OpBuilder b(repeat);
  auto rebuilt = nn::RepeatOp::create(
      b, repeat.getLoc(), types, repeat.getLayerAttr(), repeat.getCarried(),
      repeat.getParams(), outs, repeat.getReverseAttr(),
      repeat.getPrefetchAttr(), repeat.getFinishAttr());
  rebuilt->setDiscardableAttrs(repeat->getDiscardableAttrDictionary());
  ResultRange results = rebuilt.getResults();
  for (auto [old, now] : llvm::zip(kept, results))
    old.replaceAllUsesWith(now);
  for (auto [move, now] : llvm::zip(moves, results.drop_front(firstResult))) {
    move.accumulate.getResult().replaceAllUsesWith(now);
    move.accumulate.erase();
  }
  for (auto [old, now] :
       llvm::zip(stayed, results.drop_front(firstResult + moves.size())))
    old.replaceAllUsesWith(now);
  repeat.erase();
}

struct AccumulateInLayersPass
    : tessel::impl::AccumulateInLayersPassBase<AccumulateInLayersPass> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<nn::RepeatOp> repeats;
    getOperation().walk([&](nn::RepeatOp repeat) {
      if (!repeat.getPrefetchAttr() && !repeat.getFinishAttr())
        repeats.push_back(repeat);
    });
    for (nn::RepeatOp repeat : repeats) {
      func::FuncOp layer = soleLayer(repeat);
      if (!layer)
        continue;
      Operation *terminator = layer.getBody().front().getTerminator();
      unsigned firstResult =
          repeat.getCarried().size() + repeat.getOuts().size();
      SmallVector<Move> moves;
      for (auto [k, stacked] : llvm::enumerate(repeat.getStackedResults()))
        if (nn::AccumulateOp accumulate = movableAccumulate(
                repeat, stacked, terminator->getOperand(firstResult + k)))
          moves.push_back({static_cast<unsigned>(k), accumulate});
      if (!moves.empty())
        moveIntoLayer(repeat, layer, moves);
    }
  }
};

} // namespace
