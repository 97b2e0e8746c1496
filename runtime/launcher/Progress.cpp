//===- Progress.cpp - Progress, per-step metrics and the final summary ----===//

#include "runtime/launcher/Progress.h"
#include "runtime/launcher/Error.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <unistd.h>

using namespace tessel::run;

namespace {

double nowSeconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

std::string formatDuration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0)
    return "?";
  char buf[32];
  int64_t s = std::llround(seconds);
  if (s >= 3600)
    std::snprintf(buf, sizeof(buf), "%ldh%02ldm", long(s / 3600),
                  long(s / 60 % 60));
  else if (s >= 60)
    std::snprintf(buf, sizeof(buf), "%ldm%02lds", long(s / 60), long(s % 60));
  else
    std::snprintf(buf, sizeof(buf), seconds < 10 ? "%.2fs" : "%.1fs", seconds);
  return buf;
}

/// A loss as the progress lines print it (%.6g).
std::string formatLoss(double loss) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.6g", loss);
  return text;
}

std::string formatBytes(int64_t bytes) {
  char buf[32];
  if (bytes >= (1 << 20))
    std::snprintf(buf, sizeof(buf), "%.1f MiB", bytes / 1048576.0);
  else if (bytes >= (1 << 10))
    std::snprintf(buf, sizeof(buf), "%.1f KiB", bytes / 1024.0);
  else
    std::snprintf(buf, sizeof(buf), "%ld B", long(bytes));
  return buf;
}

} // namespace

MetricsWriter::MetricsWriter(const std::string &path) : path(path) {
  file = std::fopen(path.c_str(), "w");
  if (!file)
    throw RunError("cannot write metrics file '" + path +
                   "': " + std::strerror(errno));
}

MetricsWriter::~MetricsWriter() {
  if (file)
    std::fclose(file);
}

void MetricsWriter::write(const StepResult &r) {
  nlohmann::ordered_json line = {{"step", r.step}, {"loss", r.loss}};
  if (r.lr)
    line["lr"] = *r.lr;
  line["microbatches"] = r.microbatches;
  line["tokens_per_s"] = r.tokensPerSecond;
  line["step_ms"] = r.seconds * 1e3;
  line["allocated_bytes"] = r.allocatedBytes;
  if (r.evalLoss)
    line["eval_loss"] = *r.evalLoss;
  if (r.comm) {
    nlohmann::ordered_json comm = nlohmann::ordered_json::object();
    for (const CommCount &c : *r.comm) {
      comm[commKey(c)] = {{"calls", c.calls}, {"bytes", c.bytes}};
      if (c.asyncBytes)
        comm[commKey(c)]["async_bytes"] = c.asyncBytes;
    }
    line["comm"] = comm;
  }
  std::string text = line.dump() + "\n";
  if (std::fputs(text.c_str(), file) < 0 || std::fflush(file) != 0)
    throw RunError("cannot write metrics file '" + path +
                   "': " + std::strerror(errno));
}

ProgressReporter::ProgressReporter(int64_t firstStep, int64_t lastStep,
                                   int64_t logEvery, bool quiet)
    : firstStep(firstStep), totalSteps(lastStep), logEvery(logEvery),
      quiet(quiet), terminal(::isatty(STDERR_FILENO)) {}

void ProgressReporter::onStep(const StepResult &r) {
  if (steps == 0)
    firstLoss = r.loss;
  lastLoss = r.loss;
  ++steps;
  stepSeconds += r.seconds;
  tokens += r.tokens;
  if (r.evalLoss)
    lastEvalLoss = r.evalLoss;
  if (quiet)
    return;
  double eta = stepSeconds / steps * (totalSteps - r.step);
  if (terminal)
    drawBar(r, eta);
  else if (r.step % logEvery == 0 || r.step == totalSteps)
    logLine(r, eta);
  // A held-out loss is rare and worth a line of its own, under the bar.
  if (r.evalLoss) {
    if (barDrawn)
      std::fputc('\n', stderr);
    barDrawn = false;
    std::fprintf(stderr, "step %ld/%ld eval loss %.6g\n", long(r.step),
                 long(totalSteps), *r.evalLoss);
  }
}

void ProgressReporter::drawBar(const StepResult &r, double eta) {
  // Redrawing faster than the eye can follow only costs time.
  double now = nowSeconds();
  if (r.step != totalSteps && now - lastDraw < 0.05)
    return;
  lastDraw = now;
  constexpr int width = 30;
  int filled = int(width * (r.step - firstStep) /
                   std::max<int64_t>(1, totalSteps - firstStep));
  std::string bar(filled, '#');
  bar.append(width - filled, '.');
  std::fprintf(stderr, "\r[%s] %ld/%ld loss %.6g %.0f tok/s ETA %s\033[K",
               bar.c_str(), long(r.step), long(totalSteps), r.loss,
               r.tokensPerSecond, formatDuration(eta).c_str());
  std::fflush(stderr);
  barDrawn = true;
}

void ProgressReporter::logLine(const StepResult &r, double eta) {
  std::fprintf(stderr, "step %ld/%ld loss %.6g tokens/s %.0f ETA %s\n",
               long(r.step), long(totalSteps), r.loss, r.tokensPerSecond,
               formatDuration(eta).c_str());
}

void ProgressReporter::finish(double totalSeconds, int64_t peakBytes,
                              int64_t arenaBytes, const std::string &what,
                              const std::string &comm, bool perRank,
                              HeldMicrobatches held) {
  if (quiet)
    return;
  if (barDrawn)
    std::fputc('\n', stderr);
  double meanTokens = stepSeconds > 0 ? tokens / stepSeconds : 0;
  std::string heldText = held.bytes < 0
                             ? ""
                             : ", plus up to " + std::to_string(held.bytes) +
                                   " bytes of microbatches held between the "
                                   "schedule's actions (rank " +
                                   std::to_string(held.rank) + ")";
  std::string evalText =
      lastEvalLoss ? ", eval loss " + formatLoss(*lastEvalLoss) : "";
  std::fprintf(stderr,
               "done: %ld steps (%s), loss %.6g -> %.6g%s, %.0f tokens/s mean, "
               "%s total, peak %s (arena %s%s)%s\n",
               long(steps), what.c_str(), firstLoss, lastLoss, evalText.c_str(),
               meanTokens, formatDuration(totalSeconds).c_str(),
               formatBytes(peakBytes).c_str(), formatBytes(arenaBytes).c_str(),
               heldText.c_str(), perRank ? " per rank" : "");
  if (!comm.empty())
    std::fprintf(stderr, "communication per step: %s\n", comm.c_str());
}
