//===- TrainConfig.h - The settings a training step is compiled with ------===//
//
// One owner for the optimizer and schedule settings, shared by the compiler
// (tessel-autodiff, tessel-compile) and the launcher (tessel-run, the model
// description): the fields, their defaults, how a value is parsed and
// checked, and how it is written back. The list itself is
// TrainSettings.def. No LLVM, no JSON: each tool frames the problems in its
// own words (a diagnostic, a usage error).
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_CONFIG_TRAINCONFIG_H
#define TESSEL_CONFIG_TRAINCONFIG_H

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace tessel {

/// How a setting's value is written and checked.
enum class TrainSettingKind {
  Choice,      // one of the setting's choices
  NonNegative, // a finite number >= 0
  Positive,    // a finite number > 0
  Fraction,    // a finite number in [0, 1)
  Count,       // an integer >= 0
  Switch,      // true or false (a flag without a value)
  Patterns,    // comma-separated parameter name patterns (NamePattern.h);
               // "" holds none
};

/// One line of TrainSettings.def.
struct TrainSetting {
  const char *key;  // "weight_decay": nn.train and the description
  const char *flag; // "weight-decay": command lines and pass options
  TrainSettingKind kind;
  std::vector<std::string> choices; // Choice: stored spellings
  const char *noun;                 // what an error calls it
  const char *help;

  /// "sgd, adam or adamw" (choices as written on a command line), or what a
  /// number must be ("a number >= 0").
  std::string expected() const;
  /// Whether the value is a string (a Choice or Patterns): nn.train and the
  /// description write it as one.
  bool isText() const {
    return kind == TrainSettingKind::Choice ||
           kind == TrainSettingKind::Patterns;
  }
};

/// Every setting, in TrainSettings.def's order.
const std::vector<TrainSetting> &trainSettings();
/// The setting named `name` (its key or its flag, without dashes), or null.
const TrainSetting *findTrainSetting(const std::string &name);

/// Why a value was refused: `unknownChoice` for a name not among the
/// choices, otherwise a value that is not what `expected` says.
struct TrainSettingProblem {
  const TrainSetting *setting;
  std::string value;
  bool unknownChoice = false;
  std::string expected;
};

/// The weight decay a config has when none was given: the optimizer's.
inline constexpr double kOptimizerDefault =
    std::numeric_limits<double>::quiet_NaN();

struct TrainConfig {
#define TESSEL_TRAIN_SETTING(Field, Type, Key, Flag, Kind, Default, Choices,   \
                             Noun, Help)                                       \
  Type Field = Default;
#include "runtime/config/TrainSettings.def"

  /// Sets `setting` from its text ("3e-4", "warmup-cosine", "true"; a
  /// Switch also takes "" for true). Nothing changes on a problem.
  std::optional<TrainSettingProblem> set(const TrainSetting &setting,
                                         const std::string &text);
  /// The value as a command line writes it ("3e-4" with all the digits a
  /// double needs, "warmup-cosine", "true").
  std::string text(const TrainSetting &setting) const;
  /// A number's or count's value (1/0 for a switch); 0 for a text.
  double number(const TrainSetting &setting) const;
  /// A text setting's stored value (a choice's spelling "warmup_cosine",
  /// patterns as given); "" for the others.
  const std::string &name(const TrainSetting &setting) const;

  /// The weight decay in effect: the one given, or the optimizer's default
  /// (AdamW 0.01, as PyTorch; 0 otherwise).
  double effectiveWeightDecay() const;
  /// The weight decay of parameter `param`: 0 when a no_decay pattern
  /// matches its name, else the effective weight decay.
  double weightDecayOf(const std::string &param) const;
  /// Replaces the optimizer's default weight decay by its value.
  void resolveDefaults() { weightDecay = effectiveWeightDecay(); }
  /// What no single value says: nesterov needs sgd with momentum, the
  /// warmup-cosine schedule needs total_steps > warmup. An error message, or
  /// nullopt.
  std::optional<std::string> checkCombination() const;

  /// The state tensors one parameter needs, by suffix of its name
  /// ("<param>.m"): m and v for Adam, momentum for SGD with momentum.
  std::vector<std::string> stateNames() const;
  /// "adamw lr 0.001 (warmup_cosine, warmup 10, total 100), clip 1".
  std::string describe() const;
};

/// The shortest text that reads back as exactly `value`.
std::string formatNumber(double value);

} // namespace tessel

#endif // TESSEL_CONFIG_TRAINCONFIG_H
