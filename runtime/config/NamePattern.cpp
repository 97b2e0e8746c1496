//===- NamePattern.cpp - Glob patterns over parameter names ---------------===//

#include "runtime/config/NamePattern.h"

using namespace tessel;

std::vector<std::string> tessel::splitNamePatterns(const std::string &list) {
  std::vector<std::string> patterns;
  if (list.empty())
    return patterns;
  for (size_t begin = 0;;) {
    size_t end = list.find(',', begin);
    patterns.push_back(list.substr(begin, end - begin));
    if (end == std::string::npos)
      return patterns;
    begin = end + 1;
  }
}

std::optional<std::string> tessel::checkNamePatterns(const std::string &list) {
  for (const std::string &pattern : splitNamePatterns(list)) {
    if (pattern.empty())
      return std::string("an empty pattern");
    for (char c : pattern)
      // Parameter names are printable and have no spaces: a space is a typo
      // that would silently match nothing.
      if (static_cast<unsigned char>(c) <= ' ' || c == '\x7f')
        return "a space or control character in pattern '" + pattern + "'";
  }
  return std::nullopt;
}

bool tessel::matchesNamePattern(const std::string &pattern,
                                const std::string &name) {
  // Greedy matching that backtracks only to the last '*': linear in
  // practice, O(|pattern| * |name|) at worst.
  size_t p = 0, n = 0;
  size_t starAt = std::string::npos, resumeAt = 0;
  while (n < name.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == name[n])) {
      ++p;
      ++n;
    } else if (p < pattern.size() && pattern[p] == '*') {
      starAt = p++;
      resumeAt = n;
    } else if (starAt != std::string::npos) {
      p = starAt + 1;
      n = ++resumeAt;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*')
    ++p;
  return p == pattern.size();
}

bool tessel::matchesAny(const std::string &list, const std::string &name) {
  for (const std::string &pattern : splitNamePatterns(list))
    if (matchesNamePattern(pattern, name))
      return true;
  return false;
}
