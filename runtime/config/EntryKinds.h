//===- EntryKinds.h - The entries a compiled model exports ------*- C++ -*-===//
//
// A compiled model exports `void tessel_<kind>(ctx, arena)` per entry
// (docs/model-abi.md): the forward, and the training entries the passes
// derive from it (`nn.entry = "<kind>"`). The dialect's verifier, the
// pipeline's stage linker and the launcher's description reader take the
// kinds from this one list.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_CONFIG_ENTRYKINDS_H
#define TESSEL_CONFIG_ENTRYKINDS_H

#include <algorithm>
#include <iterator>
#include <string>
#include <string_view>

namespace tessel::entries {

/// The kinds of `nn.entry`, in the order messages list them.
inline constexpr std::string_view kTrainingKinds[] = {"backward",
                                                      "update",
                                                      "backward_input",
                                                      "backward_weight",
                                                      "grad_norm",
                                                      "backward_no_sync",
                                                      "backward_weight_no_sync",
                                                      "reduce_grads",
                                                      "forward_keep"};

inline bool isTrainingKind(std::string_view kind) {
  return std::find(std::begin(kTrainingKinds), std::end(kTrainingKinds),
                   kind) != std::end(kTrainingKinds);
}

/// A kind a model exports an entry of: the forward or a training entry.
inline bool isEntryKind(std::string_view kind) {
  return kind == "forward" || isTrainingKind(kind);
}

/// `"a", "b" or "c"`: the training kinds (after "forward" when
/// `withForward`), each between `quote`s.
inline std::string kindList(bool withForward, std::string_view quote) {
  std::string text;
  std::size_t count = std::size(kTrainingKinds) + (withForward ? 1 : 0);
  std::size_t i = 0;
  auto add = [&](std::string_view kind) {
    if (i > 0)
      text += i + 1 == count ? " or " : ", ";
    text.append(quote).append(kind).append(quote);
    ++i;
  };
  if (withForward)
    add("forward");
  for (std::string_view kind : kTrainingKinds)
    add(kind);
  return text;
}

} // namespace tessel::entries

#endif // TESSEL_CONFIG_ENTRYKINDS_H
