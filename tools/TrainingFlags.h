//===- TrainingFlags.h - One command-line flag per training setting ------===//
//
// tessel-compile and tessel-plan take the training settings
// (runtime/config/TrainSettings.def: --optimizer, --lr, ..., --no-decay,
// --freeze) as flags of the same names, each a string the compile pipeline
// checks (tessel-autodiff) where it applies them.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_TOOLS_TRAININGFLAGS_H
#define TESSEL_TOOLS_TRAININGFLAGS_H

#include "passes/Pipelines.h"
#include "runtime/config/TrainConfig.h"

#include "llvm/Support/CommandLine.h"

#include <algorithm>
#include <deque>
#include <memory>
#include <string>
#include <vector>

namespace tessel::tools {

/// The flags, in trainSettings() order.
class TrainingFlags {
public:
  /// Registers one flag per training setting in `category` (before the
  /// command line is parsed).
  explicit TrainingFlags(llvm::cl::OptionCategory &category) {
    for (const TrainSetting &setting : trainSettings()) {
      bool isSwitch = setting.kind == TrainSettingKind::Switch;
      auto flag = std::make_unique<llvm::cl::opt<std::string>>(
          llvm::StringRef(setting.flag), llvm::cl::desc(setting.help),
          llvm::cl::cat(category),
          isSwitch ? llvm::cl::ValueOptional : llvm::cl::ValueRequired);
      flag->setValueStr(valueNames.emplace_back(valueName(setting)));
      flags.push_back(std::move(flag));
    }
  }

  /// The flag of setting `key` ("recompute").
  llvm::cl::opt<std::string> &operator[](llvm::StringRef key) {
    for (auto [setting, flag] : llvm::zip(trainSettings(), flags))
      if (key == setting.key)
        return *flag;
    llvm::report_fatal_error("no training setting named " + key);
  }

  /// The settings given on the command line, by key, into `options`.
  void apply(CompilePipelineOptions &options) const {
    for (auto [setting, flag] : llvm::zip(trainSettings(), flags))
      if (flag->getNumOccurrences() > 0)
        options.setTrainSetting(setting.key, flag->getValue());
  }

private:
  /// How --help writes a setting's value ("sgd|adam|adamw", "n", "x").
  static std::string valueName(const TrainSetting &setting) {
    switch (setting.kind) {
    case TrainSettingKind::Switch:
      return "true|false";
    case TrainSettingKind::Choice: {
      std::string name;
      for (const std::string &choice : setting.choices)
        name += (name.empty() ? "" : "|") + choice;
      std::replace(name.begin(), name.end(), '_', '-');
      return name;
    }
    case TrainSettingKind::Count:
      return "n";
    case TrainSettingKind::Patterns:
      return "patterns";
    default:
      return "x";
    }
  }

  std::vector<std::unique_ptr<llvm::cl::opt<std::string>>> flags;
  // cl::opt keeps a StringRef to its value name.
  std::deque<std::string> valueNames;
};

} // namespace tessel::tools

#endif // TESSEL_TOOLS_TRAININGFLAGS_H
