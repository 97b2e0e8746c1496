//===- TrainConfig.cpp - Parsing, checking and writing training settings --===//

#include "runtime/config/TrainConfig.h"
#include "runtime/config/NamePattern.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <type_traits>

using namespace tessel;

namespace {

std::vector<std::string> splitChoices(const char *text) {
  std::vector<std::string> choices;
  std::string all = text;
  for (size_t begin = 0; !all.empty() && begin <= all.size();) {
    size_t end = std::min(all.find('|', begin), all.size());
    choices.push_back(all.substr(begin, end - begin));
    begin = end + 1;
  }
  return choices;
}

/// A choice as a command line writes it: '_' becomes '-'.
std::string commandLineSpelling(std::string name) {
  std::replace(name.begin(), name.end(), '_', '-');
  return name;
}

std::optional<double> parseNumber(const std::string &text) {
  errno = 0;
  char *end = nullptr;
  double value = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(value))
    return std::nullopt;
  return value;
}

std::optional<int64_t> parseInteger(const std::string &text) {
  errno = 0;
  char *end = nullptr;
  long long value = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno == ERANGE)
    return std::nullopt;
  return value;
}

bool inRange(TrainSettingKind kind, double value) {
  switch (kind) {
  case TrainSettingKind::NonNegative:
    return value >= 0;
  case TrainSettingKind::Positive:
    return value > 0;
  case TrainSettingKind::Fraction:
    return value >= 0 && value < 1;
  default:
    return true;
  }
}

} // namespace

// The field of `setting`, as a pointer to its type (null when the type
// differs).
template <typename T>
static T *field(TrainConfig &config, const TrainSetting &setting) {
  std::string key = setting.key;
#define TESSEL_TRAIN_SETTING(Field, Type, Key, Flag, Kind, Default, Choices,   \
                             Noun, Help)                                       \
  if constexpr (std::is_same_v<T, Type>)                                       \
    if (key == Key)                                                            \
      return &config.Field;
#include "runtime/config/TrainSettings.def"
  return nullptr;
}

template <typename T>
static const T *field(const TrainConfig &config, const TrainSetting &setting) {
  return field<T>(const_cast<TrainConfig &>(config), setting);
}

const std::vector<TrainSetting> &tessel::trainSettings() {
  static const std::vector<TrainSetting> settings = {
#define TESSEL_TRAIN_SETTING(Field, Type, Key, Flag, Kind, Default, Choices,   \
                             Noun, Help)                                       \
  {Key, Flag, TrainSettingKind::Kind, splitChoices(Choices), Noun, Help},
#include "runtime/config/TrainSettings.def"
  };
  return settings;
}

const TrainSetting *tessel::findTrainSetting(const std::string &name) {
  for (const TrainSetting &setting : trainSettings())
    if (name == setting.key || name == setting.flag)
      return &setting;
  return nullptr;
}

std::string TrainSetting::expected() const {
  switch (kind) {
  case TrainSettingKind::Choice: {
    std::string list;
    for (size_t i = 0; i < choices.size(); ++i)
      list += (i ? (i + 1 == choices.size() ? " or " : ", ") : "") +
              commandLineSpelling(choices[i]);
    return list;
  }
  case TrainSettingKind::NonNegative:
    return "a number >= 0";
  case TrainSettingKind::Positive:
    return "a number > 0";
  case TrainSettingKind::Fraction:
    return "a number in [0, 1)";
  case TrainSettingKind::Count:
    return "an integer >= 0";
  case TrainSettingKind::Switch:
    return "true or false";
  case TrainSettingKind::Patterns:
    return "comma-separated name patterns, none empty, without spaces";
  }
  return "";
}

std::optional<TrainSettingProblem>
TrainConfig::set(const TrainSetting &setting, const std::string &text) {
  // `expected`: what the value should have been; a value that does not even
  // parse is told the kind ("a number"), one out of range the range.
  auto problem = [&](std::string expected, bool unknownChoice = false) {
    return TrainSettingProblem{&setting, text, unknownChoice,
                               std::move(expected)};
  };
  switch (setting.kind) {
  case TrainSettingKind::Choice: {
    std::string stored = text;
    std::replace(stored.begin(), stored.end(), '-', '_');
    if (std::find(setting.choices.begin(), setting.choices.end(), stored) ==
        setting.choices.end())
      return problem(setting.expected(), /*unknownChoice=*/true);
    *field<std::string>(*this, setting) = stored;
    return std::nullopt;
  }
  case TrainSettingKind::Switch:
    if (text != "" && text != "true" && text != "false")
      return problem(setting.expected());
    *field<bool>(*this, setting) = text != "false";
    return std::nullopt;
  case TrainSettingKind::Patterns:
    if (checkNamePatterns(text))
      return problem(setting.expected());
    *field<std::string>(*this, setting) = text;
    return std::nullopt;
  case TrainSettingKind::Count: {
    std::optional<int64_t> value = parseInteger(text);
    if (!value)
      return problem("an integer");
    if (*value < 0)
      return problem(setting.expected());
    *field<int64_t>(*this, setting) = *value;
    return std::nullopt;
  }
  default: {
    std::optional<double> value = parseNumber(text);
    if (!value)
      return problem("a number");
    if (!inRange(setting.kind, *value))
      return problem(setting.expected());
    *field<double>(*this, setting) = *value;
    return std::nullopt;
  }
  }
}

const std::string &TrainConfig::name(const TrainSetting &setting) const {
  static const std::string none;
  const std::string *value = field<std::string>(*this, setting);
  return value ? *value : none;
}

double TrainConfig::number(const TrainSetting &setting) const {
  if (const double *value = field<double>(*this, setting))
    return setting.key == std::string("weight_decay") ? effectiveWeightDecay()
                                                       : *value;
  if (const int64_t *value = field<int64_t>(*this, setting))
    return double(*value);
  if (const bool *value = field<bool>(*this, setting))
    return *value ? 1 : 0;
  return 0;
}

std::string TrainConfig::text(const TrainSetting &setting) const {
  switch (setting.kind) {
  case TrainSettingKind::Choice:
    return commandLineSpelling(name(setting));
  case TrainSettingKind::Patterns:
    return name(setting);
  case TrainSettingKind::Switch:
    return number(setting) != 0 ? "true" : "false";
  case TrainSettingKind::Count:
    return std::to_string(*field<int64_t>(*this, setting));
  default:
    return formatNumber(number(setting));
  }
}

double TrainConfig::effectiveWeightDecay() const {
  if (!std::isnan(weightDecay))
    return weightDecay;
  return optimizer == "adamw" ? 0.01 : 0.0;
}

double TrainConfig::weightDecayOf(const std::string &param) const {
  return matchesAny(noDecay, param) ? 0.0 : effectiveWeightDecay();
}

std::optional<std::string> TrainConfig::checkCombination() const {
  if (nesterov && (optimizer != "sgd" || momentum <= 0))
    return std::string("nesterov needs sgd with momentum > 0");
  if (schedule == "warmup_cosine" && totalSteps <= warmup)
    return "the warmup-cosine schedule needs total_steps (" +
           std::to_string(totalSteps) + ") > warmup (" +
           std::to_string(warmup) + ")";
  return std::nullopt;
}

std::vector<std::string> TrainConfig::stateNames() const {
  if (optimizer == "sgd")
    return momentum != 0.0 ? std::vector<std::string>{"momentum"}
                           : std::vector<std::string>{};
  return {"m", "v"};
}

std::string TrainConfig::describe() const {
  std::string text = optimizer + " lr " + formatNumber(lr);
  if (schedule != "constant")
    text += " (" + schedule + ", warmup " + std::to_string(warmup) +
            ", total " + std::to_string(totalSteps) + ")";
  if (clip > 0)
    text += ", clip " + formatNumber(clip);
  if (recompute != "none")
    text += ", recompute " + recompute;
  if (!noDecay.empty())
    text += ", no decay on " + noDecay;
  if (!freeze.empty())
    text += ", frozen " + freeze;
  return text;
}

std::string tessel::formatNumber(double value) {
  char buf[32];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof(buf), "%.*g", precision, value);
    if (std::strtod(buf, nullptr) == value)
      break;
  }
  return buf;
}
