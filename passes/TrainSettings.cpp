//===- TrainSettings.cpp - Training settings as module attributes ---------===//

#include "passes/TrainSettings.h"
#include "runtime/config/NamePattern.h"

#include "dialect/NN/NNDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"

using namespace mlir;
using namespace tessel;

namespace {

/// "training settings: unknown optimizer 'lamb'; expected sgd, adam or
/// adamw" / "...: lr must be a number >= 0, got -1".
LogicalResult diagnose(ModuleOp module, const TrainSettingProblem &problem) {
  InFlightDiagnostic error = module.emitError() << "training settings: ";
  if (problem.unknownChoice)
    return error << "unknown " << problem.setting->noun << " '"
                 << problem.value << "'; expected " << problem.expected;
  return error << problem.setting->key << " must be " << problem.expected
               << ", got '" << problem.value << "'";
}

/// The text of an nn.train value, when its attribute kind fits the setting.
std::optional<std::string> attrText(const TrainSetting &setting,
                                    Attribute value) {
  switch (setting.kind) {
  case TrainSettingKind::Choice:
  case TrainSettingKind::Patterns:
    if (auto text = dyn_cast<StringAttr>(value))
      return text.str();
    return std::nullopt;
  case TrainSettingKind::Switch:
    if (auto flag = dyn_cast<BoolAttr>(value))
      return std::string(flag.getValue() ? "true" : "false");
    return std::nullopt;
  case TrainSettingKind::Count:
    if (auto integer = dyn_cast<IntegerAttr>(value))
      return std::to_string(integer.getInt());
    return std::nullopt;
  default:
    if (auto real = dyn_cast<FloatAttr>(value))
      return formatNumber(real.getValueAsDouble());
    if (auto integer = dyn_cast<IntegerAttr>(value))
      return std::to_string(integer.getInt());
    return std::nullopt;
  }
}

const char *attrKindName(TrainSettingKind kind) {
  switch (kind) {
  case TrainSettingKind::Choice:
  case TrainSettingKind::Patterns:
    return "a string";
  case TrainSettingKind::Switch:
    return "true or false";
  case TrainSettingKind::Count:
    return "an integer";
  default:
    return "a number";
  }
}

std::string knownKeys() {
  std::string keys;
  for (const TrainSetting &setting : trainSettings())
    keys += (keys.empty() ? "" : ", ") + std::string(setting.key);
  return keys;
}

} // namespace

LogicalResult tessel::readTrainAttr(ModuleOp module, DictionaryAttr dict,
                                    TrainConfig &config) {
  for (NamedAttribute entry : dict) {
    std::string key = entry.getName().str();
    const TrainSetting *setting = findTrainSetting(key);
    if (!setting || key != setting->key)
      return module.emitError() << "nn.train: unknown setting '" << key
                                << "' (known: " << knownKeys() << ")";
    std::optional<std::string> text = attrText(*setting, entry.getValue());
    if (!text)
      return module.emitError()
             << "nn.train: '" << key << "' must be "
             << attrKindName(setting->kind) << ", got " << entry.getValue();
    if (std::optional<TrainSettingProblem> problem =
            config.set(*setting, *text))
      return diagnose(module, *problem);
  }
  return success();
}

LogicalResult tessel::applyTrainSettings(ModuleOp module,
                                         const TrainSettingTexts &settings,
                                         TrainConfig &config) {
  for (const auto &[name, text] : settings) {
    const TrainSetting *setting = findTrainSetting(name);
    if (!setting)
      return module.emitError() << "training settings: unknown setting '"
                                << name << "' (known: " << knownKeys() << ")";
    if (std::optional<TrainSettingProblem> problem =
            config.set(*setting, text))
      return diagnose(module, *problem);
  }
  return success();
}

LogicalResult tessel::checkTrainConfig(ModuleOp module,
                                       const TrainConfig &config) {
  if (std::optional<std::string> problem = config.checkCombination())
    return module.emitError() << "training settings: " << *problem;
  return success();
}

DictionaryAttr tessel::trainConfigToAttr(MLIRContext *ctx,
                                         const TrainConfig &config) {
  Builder b(ctx);
  SmallVector<NamedAttribute> entries;
  for (const TrainSetting &setting : trainSettings()) {
    Attribute value;
    switch (setting.kind) {
    case TrainSettingKind::Choice:
    case TrainSettingKind::Patterns:
      value = b.getStringAttr(config.name(setting));
      break;
    case TrainSettingKind::Switch:
      value = b.getBoolAttr(config.number(setting) != 0);
      break;
    case TrainSettingKind::Count:
      value = b.getI64IntegerAttr(int64_t(config.number(setting)));
      break;
    default:
      value = b.getF64FloatAttr(config.number(setting));
    }
    entries.push_back(b.getNamedAttr(setting.key, value));
  }
  return b.getDictionaryAttr(entries);
}

LogicalResult tessel::resolveTrainConfig(ModuleOp module,
                                         const TrainSettingTexts &given,
                                         TrainConfig &config) {
  if (auto dict =
          module->getAttrOfType<DictionaryAttr>(nn::NNDialect::kTrainAttrName))
    if (failed(readTrainAttr(module, dict, config)))
      return failure();
  if (failed(applyTrainSettings(module, given, config)))
    return failure();
  config.resolveDefaults();
  return checkTrainConfig(module, config);
}

void tessel::warnUnmatchedPatterns(Operation *at,
                                   ArrayRef<std::string> paramNames,
                                   StringRef noDecay, StringRef freeze) {
  for (auto [key, patterns] :
       {std::pair{"no_decay", noDecay}, std::pair{"freeze", freeze}})
    for (const std::string &pattern : splitNamePatterns(patterns.str()))
      if (llvm::none_of(paramNames, [&](const std::string &name) {
            return matchesNamePattern(pattern, name);
          }))
        at->emitWarning() << key << " pattern '" << pattern
                          << "' matches no parameter of the model";
}
