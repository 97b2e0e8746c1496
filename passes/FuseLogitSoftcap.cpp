//===- FuseLogitSoftcap.cpp - tessel-fuse-logit-softcap -------------------===//
//
// Folds soft-capped logits into the cross-entropy that reads them (Gemma
// 2's final_logit_softcapping, written as the model writes it):
//
//   %q = nn.div %z, %c          // %c: a splat c > 0, broadcast
//   %t = nn.tanh %q
//   %y = nn.mul %t, %c
//   %l = nn.cross_entropy %y, %labels
//   // becomes
//   %l = nn.cross_entropy %z, %labels {logit_softcap = c}
//
// where %q, %t and %y have no other reader. The loss and (after autodiff)
// its gradient then cap each logit inside their kernels (runtime ABI 27):
// neither the capped logits nor their tanh is stored, where the ops keep
// two logits-sized buffers (the tanh for its gradient, and the capped
// logits). Runs before autodiff, after tessel-mask-ignored-labels (whose
// loss of each position keeps the cap and a label smoothing). The rewrite is
// nn.cross_entropy's canonicalization (FoldLogitSoftcap, LossOps.cpp),
// applied here alone.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "dialect/NN/NNOps.h"

#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace tessel {
#define GEN_PASS_DEF_FUSELOGITSOFTCAPPASS
#include "passes/Passes.h.inc"
} // namespace tessel

using namespace mlir;
using namespace tessel;

namespace {

class FuseLogitSoftcapPass
    : public tessel::impl::FuseLogitSoftcapPassBase<FuseLogitSoftcapPass> {
public:
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    nn::CrossEntropyOp::getCanonicalizationPatterns(patterns, &getContext());
    // Only the fold: no constant folding or region simplification of the
    // model before autodiff (the dead chain it leaves is erased).
    GreedyRewriteConfig config;
    config.enableFolding(false);
    config.setRegionSimplificationLevel(GreedySimplifyRegionLevel::Disabled);
    if (failed(
            applyPatternsGreedily(getOperation(), std::move(patterns), config)))
      return signalPassFailure();
  }
};

} // namespace
