//===- Units.h - Byte sizes and numbers as the benchmarks read and print --===//

#ifndef TESSEL_BENCH_UNITS_H
#define TESSEL_BENCH_UNITS_H

#include "bench/BenchSupport.h"

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace tessel::bench {

/// 65536 -> "64 KiB", 1628182 -> "1.55 MiB" (three significant digits).
inline std::string sizeText(double bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB"};
  int u = 0;
  while (bytes >= 1024 && u < 3) {
    bytes /= 1024;
    ++u;
  }
  char text[32];
  std::snprintf(text, sizeof(text), "%.3g %s", bytes, units[u]);
  return text;
}

/// 1234567 -> "1 234 567" (thin grouping keeps wide numbers readable).
inline std::string groupDigits(int64_t value) {
  std::string digits = std::to_string(value < 0 ? -value : value), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0)
      out += ' ';
    out += digits[i];
  }
  return (value < 0 ? "-" : "") + out;
}

/// "a,b,c" -> {"a", "b", "c"} (empty items kept).
inline std::vector<std::string> splitList(const std::string &text) {
  std::vector<std::string> items;
  size_t begin = 0;
  while (begin <= text.size()) {
    size_t end = text.find(',', begin);
    if (end == std::string::npos)
      end = text.size();
    items.push_back(text.substr(begin, end - begin));
    begin = end + 1;
  }
  return items;
}

/// "64K" -> 65536; a multiple of 4 bytes (f32 elements).
inline int64_t parseSize(const std::string &text) {
  char *end = nullptr;
  errno = 0;
  long long value = std::strtoll(text.c_str(), &end, 10);
  int64_t scale = 1;
  std::string suffix = end ? end : "";
  if (suffix == "K" || suffix == "KiB")
    scale = int64_t(1) << 10;
  else if (suffix == "M" || suffix == "MiB")
    scale = int64_t(1) << 20;
  else if (suffix == "G" || suffix == "GiB")
    scale = int64_t(1) << 30;
  else if (!suffix.empty() && suffix != "B")
    throw BenchError("bad size '" + text + "' (e.g. 4096, 64K, 16M)");
  if (text.empty() || end == text.c_str() || errno == ERANGE || value < 1 ||
      value > (int64_t(1) << 40) / scale)
    throw BenchError("bad size '" + text + "' (e.g. 4096, 64K, 16M)");
  int64_t bytes = value * scale;
  if (bytes % 4)
    throw BenchError("size '" + text + "' is not a whole number of f32");
  return bytes;
}

} // namespace tessel::bench

#endif // TESSEL_BENCH_UNITS_H
