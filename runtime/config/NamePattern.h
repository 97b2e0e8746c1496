//===- NamePattern.h - Glob patterns over parameter names -------*- C++ -*-===//
//
// The patterns that pick parameters by name (`--no-decay '*.bias,*ln*'`):
// '*' matches any run of characters, '.' included, '?' exactly one, every
// other character itself. A list is the patterns separated by commas. Shared
// by tessel-autodiff (which parameters decay), the model description (the
// group each parameter is in) and tessel-run.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_CONFIG_NAMEPATTERN_H
#define TESSEL_CONFIG_NAMEPATTERN_H

#include <optional>
#include <string>
#include <vector>

namespace tessel {

/// The patterns of a comma-separated list ("" holds none).
std::vector<std::string> splitNamePatterns(const std::string &list);

/// Why `list` is not a list of patterns (an empty pattern, a space or a
/// control character), or nullopt.
std::optional<std::string> checkNamePatterns(const std::string &list);

/// Whether `pattern` matches the whole of `name`.
bool matchesNamePattern(const std::string &pattern, const std::string &name);

/// Whether any pattern of the comma-separated `list` matches `name`.
bool matchesAny(const std::string &list, const std::string &name);

} // namespace tessel

#endif // TESSEL_CONFIG_NAMEPATTERN_H
