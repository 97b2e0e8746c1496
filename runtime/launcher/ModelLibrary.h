//===- ModelLibrary.h - Opening a model .so and its entry points ----------===//

#ifndef TESSEL_LAUNCHER_MODELLIBRARY_H
#define TESSEL_LAUNCHER_MODELLIBRARY_H

#include "runtime/launcher/ModelDescription.h"

#include <string>
#include <vector>

namespace tessel::run {

using EntryFn = void (*)(tessel_ctx *, void *);
using ForwardFn = EntryFn;

/// A dlopen'ed model .so.
struct LoadedModel {
  void *handle = nullptr;
  EntryFn forward = nullptr;
  EntryFn backward = nullptr; // null unless desc.trains()
  EntryFn update = nullptr;
  // The backward without its gradient reductions, and those reductions of
  // the accumulated gradients: M > 1 microbatches reduce once (else null).
  EntryFn backwardNoSync = nullptr, reduceGrads = nullptr;
  ModelDesc desc;
  /// A pipeline: every stage's entries (tessel_s<s>_forward, ...), in
  /// stage order; the entries above are then null.
  struct StageEntries {
    EntryFn forward = nullptr, backward = nullptr, update = nullptr;
    // A zero-bubble stage's backward in two parts (else null).
    EntryFn backwardInput = nullptr, backwardWeight = nullptr;
    // A clipping stage's part of the gradient norm (else null).
    EntryFn gradNorm = nullptr;
    // One gradient reduction per step, as the model's own (else null).
    EntryFn backwardNoSync = nullptr, reduceGrads = nullptr;
    EntryFn backwardWeightNoSync = nullptr;
    // A stage that keeps its forward's activations: the training forward
    // (else null; the backward then recomputes the forward).
    EntryFn forwardKeep = nullptr;
  };
  std::vector<StageEntries> stages;
};

/// dlopens `path` (a .so) with `dlopenFlags` (default RTLD_NOW |
/// RTLD_LOCAL), reads its description and resolves its entry.
LoadedModel loadModel(const std::string &path, int dlopenFlags = 0);

} // namespace tessel::run

#endif // TESSEL_LAUNCHER_MODELLIBRARY_H
