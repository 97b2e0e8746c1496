//===- TraceFile.cpp - tessel-run --trace: one step's timeline ------------===//

#include "runtime/launcher/TraceFile.h"

#include "runtime/launcher/Error.h"
#include "runtime/launcher/OutputFiles.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>

using namespace tessel::run;

std::vector<tessel_trace_event> tessel::run::readTrace(const tessel_ctx *ctx) {
  std::vector<tessel_trace_event> events;
  const int64_t count = tessel_trace_count(ctx);
  events.reserve(size_t(std::max<int64_t>(count, 0)));
  for (int64_t i = 0; i < count; ++i) {
    tessel_trace_event e;
    if (tessel_trace_get(ctx, i, &e) == 0)
      events.push_back(e);
  }
  return events;
}

TraceSummary
tessel::run::summarizeTrace(const std::vector<tessel_trace_event> &events,
                            int64_t dropped) {
  TraceSummary s;
  s.dropped = dropped;
  // The rank's kernels as intervals in time order (they come from one
  // thread, so they do not overlap each other).
  std::vector<std::pair<double, double>> kernels;
  for (const tessel_trace_event &e : events)
    if (e.kind == TESSEL_TRACE_KERNEL) {
      ++s.kernels;
      s.kernelSeconds += e.end - e.begin;
      kernels.push_back({e.begin, e.end});
    }
  std::sort(kernels.begin(), kernels.end());
  for (const tessel_trace_event &e : events) {
    if (e.kind != TESSEL_TRACE_COLLECTIVE || e.end < e.begin)
      continue;
    ++s.collectives;
    s.commSeconds += e.end - e.begin;
    auto first = std::lower_bound(
        kernels.begin(), kernels.end(), std::make_pair(e.begin, e.begin),
        [](const auto &a, const auto &b) { return a.second < b.first; });
    for (auto it = first; it != kernels.end() && it->first < e.end; ++it)
      s.hiddenSeconds += std::max(0.0, std::min(it->second, e.end) -
                                           std::max(it->first, e.begin));
    if (e.started) {
      s.startedBytes += e.bytes;
      if (e.kernels_between > 0)
        s.overlappedBytes += e.bytes;
    }
  }
  return s;
}

std::string tessel::run::describeTrace(const TraceSummary &s) {
  char text[512];
  std::snprintf(
      text, sizeof text,
      "%lld kernels (%.3g s), %lld collectives (%.3g s, %.0f%% of it while "
      "kernels ran); %lld of %lld started bytes overlapped kernels",
      (long long)s.kernels, s.kernelSeconds, (long long)s.collectives,
      s.commSeconds,
      s.commSeconds > 0 ? 100.0 * s.hiddenSeconds / s.commSeconds : 0.0,
      (long long)s.overlappedBytes, (long long)s.startedBytes);
  std::string line = text;
  if (s.dropped)
    line += " (" + std::to_string(s.dropped) + " events not kept)";
  return line;
}

void TraceWriter::add(int32_t rank, int64_t step,
                      std::vector<tessel_trace_event> events) {
  std::lock_guard<std::mutex> lock(mutex);
  ranks[rank] = {step, std::move(events)};
}

std::string TraceWriter::pathFor(const std::string &path, int32_t rank,
                                 int32_t processes) {
  if (processes <= 1 || rank == 0)
    return path;
  size_t slash = path.rfind('/');
  size_t dot = path.rfind('.');
  std::string suffix = ".rank" + std::to_string(rank);
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash))
    return path + suffix;
  return path.substr(0, dot) + suffix + path.substr(dot);
}

void TraceWriter::write() const {
  // Chrome's trace event format: complete events ("X") in microseconds.
  nlohmann::ordered_json events = nlohmann::ordered_json::array();
  std::lock_guard<std::mutex> lock(mutex);
  for (const auto &entry : ranks) {
    // Named copies: clang 14 cannot capture structured bindings.
    int rank = entry.first;
    const auto &[step, rankEvents] = entry.second;
    auto meta = [&](const char *name, int tid, const std::string &value) {
      events.push_back({{"ph", "M"},
                        {"name", name},
                        {"pid", rank},
                        {"tid", tid},
                        {"args", {{"name", value}}}});
    };
    meta("process_name", 0,
         "rank " + std::to_string(rank) + ", step " + std::to_string(step));
    meta("thread_name", 0, "kernels and waits");
    meta("thread_name", 1, "collectives");
    for (const tessel_trace_event &e : rankEvents) {
      bool collective = e.kind == TESSEL_TRACE_COLLECTIVE;
      nlohmann::ordered_json event = {
          {"ph", "X"},
          {"name", e.name ? e.name : "?"},
          {"cat", collective                    ? "collective"
                  : e.kind == TESSEL_TRACE_WAIT ? "wait"
                                                : "kernel"},
          {"pid", rank},
          {"tid", collective ? 1 : 0},
          {"ts", e.begin * 1e6},
          {"dur", std::max(0.0, e.end - e.begin) * 1e6}};
      if (collective) {
        event["args"] = {{"bytes", e.bytes},
                         {"axes_mask", e.axes},
                         {"started", e.started != 0}};
        if (e.started)
          event["args"]["kernels_before_wait"] = e.kernels_between;
      }
      events.push_back(std::move(event));
    }
  }
  nlohmann::ordered_json trace = {{"traceEvents", std::move(events)},
                                  {"displayTimeUnit", "ms"}};
  writeFileAtomically(
      path, "trace", [&](std::FILE *file, const std::string &tmp) {
        std::string text = trace.dump();
        if (std::fwrite(text.data(), 1, text.size(), file) != text.size())
          throw RunError("cannot write trace '" + tmp + "'");
      });
}
