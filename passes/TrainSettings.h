//===- TrainSettings.h - Training settings as module attributes and options ===//
//
// The compiler's side of runtime/config/TrainConfig.h: the module's nn.train
// dictionary read and written, settings given as text (pass options,
// tessel-compile's flags) applied, and every problem a located diagnostic.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_PASSES_TRAINSETTINGS_H
#define TESSEL_PASSES_TRAINSETTINGS_H

#include "runtime/config/TrainConfig.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"

#include <string>
#include <utility>
#include <vector>

namespace tessel {

/// Settings as given, by key or flag name ("lr", "weight-decay") with their
/// text ("3e-4"), in order; a later one wins.
using TrainSettingTexts = std::vector<std::pair<std::string, std::string>>;

/// Reads the module's nn.train dictionary into `config`.
mlir::LogicalResult readTrainAttr(mlir::ModuleOp module,
                                  mlir::DictionaryAttr dict,
                                  TrainConfig &config);
/// Applies settings given as text (an unknown name or a bad value is an
/// error on `module`).
mlir::LogicalResult applyTrainSettings(mlir::ModuleOp module,
                                       const TrainSettingTexts &settings,
                                       TrainConfig &config);
/// The checks no single value makes (TrainConfig::checkCombination).
mlir::LogicalResult checkTrainConfig(mlir::ModuleOp module,
                                     const TrainConfig &config);
/// `config` as a compile resolves it: the module's nn.train, then the
/// settings given, then the defaults, checked together.
mlir::LogicalResult resolveTrainConfig(mlir::ModuleOp module,
                                       const TrainSettingTexts &given,
                                       TrainConfig &config);
/// Warns at `at` about each no_decay or freeze pattern that matches none of
/// `paramNames` (a typo: the parameter it meant would silently decay or
/// train).
void warnUnmatchedPatterns(mlir::Operation *at,
                           llvm::ArrayRef<std::string> paramNames,
                           llvm::StringRef noDecay, llvm::StringRef freeze);
/// The nn.train dictionary of `config`: every setting, the weight decay
/// resolved.
mlir::DictionaryAttr trainConfigToAttr(mlir::MLIRContext *ctx,
                                       const TrainConfig &config);

} // namespace tessel

#endif // TESSEL_PASSES_TRAINSETTINGS_H
