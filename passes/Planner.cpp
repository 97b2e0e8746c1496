//===- Planner.cpp - Rank the ways to split a model over N devices --------===//

#include "passes/Planner.h"
#include "passes/CompileReport.h"
#include "passes/Passes.h"
#include "passes/Pipelines.h"
#include "passes/Sharding.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/Parser/Parser.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/Threading.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <map>
#include <thread>

using namespace mlir;
using namespace tessel;
using namespace tessel::planner;

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

int64_t integer(const llvm::json::Object &o, StringRef key) {
  return o.getInteger(key).value_or(0);
}

/// The entry kinds one training step runs per microbatch and once, as the
/// launcher runs them (runtime/launcher/Training.cpp, PipelineStep.cpp).
struct StepKinds {
  llvm::StringSet<> perMicrobatch, once;
};

/// The function of entry `kind` of model function `function`:
/// `<function>_<kind>`, the forward `<function>` itself.
std::string entryName(StringRef function, StringRef kind) {
  return kind == "forward" ? function.str() : (function + "_" + kind).str();
}

/// `flops` names the functions the compile made (entryName): M > 1 microbatches
/// with a reduce_grads entry run the backward without its reductions, then
/// reduce once; a zero-bubble stage runs its two parts; a pipeline's Forward is
/// forward_keep (or, with
/// --stage-recompute, the forward), while one device's backward computes
/// its forward itself.
StepKinds stepKinds(const llvm::json::Object &flops, StringRef function,
                    int64_t microbatches, bool pipelined) {
  auto has = [&](StringRef kind) {
    return flops.get(entryName(function, kind)) != nullptr;
  };
  bool deferred = microbatches > 1 && has("reduce_grads");
  StepKinds kinds;
  if (has("forward_keep"))
    kinds.perMicrobatch.insert("forward_keep");
  else if (pipelined)
    kinds.perMicrobatch.insert("forward");
  if (has("backward_input")) {
    kinds.perMicrobatch.insert("backward_input");
    kinds.perMicrobatch.insert(deferred ? "backward_weight_no_sync"
                                        : "backward_weight");
  } else {
    kinds.perMicrobatch.insert(deferred ? "backward_no_sync" : "backward");
  }
  kinds.once.insert("update");
  kinds.once.insert("grad_norm");
  if (deferred)
    kinds.once.insert("reduce_grads");
  return kinds;
}

/// The links a group of mesh axes sends over: the node's when every axis
/// stays in a node, else the network between nodes (a ring is as fast as
/// its slowest link). Ranks are numbered row-major over pp, dp, cp, tp (tp
/// fastest), `devices / nodes` consecutive ranks to a node, as Megatron
/// places them: tp in a node first, then cp, then dp, then pp.
class Links {
public:
  Links(const Settings &settings, const Candidate &c)
      : settings(settings), c(c) {}

  /// Whether the ranks of `axis`'s groups are on more than one node.
  bool crossesNodes(StringRef axis) const {
    int64_t perNode = settings.devices / std::max<int64_t>(settings.nodes, 1);
    int64_t span = axis == "tp"   ? c.tp
                   : axis == "cp" ? c.tp * c.cp
                   : axis == "dp" ? c.tp * c.cp * c.dp
                   : axis == "pp" ? c.tp * c.cp * c.dp * c.pp
                                  : settings.devices;
    return span > perNode || perNode % span != 0;
  }
  /// Seconds per byte over the links of `axis`.
  double secondsPerByte(StringRef axis) const {
    return perByte(crossesNodes(axis));
  }
  /// Seconds per byte over `axes` (names): the network's when one crosses.
  double secondsPerByte(const llvm::json::Array *axes) const {
    bool network = false;
    if (axes)
      for (const llvm::json::Value &axis : *axes)
        network |= crossesNodes(axis.getAsString().value_or(""));
    return perByte(network);
  }

private:
  double perByte(bool network) const {
    return 1.0 / (network ? settings.device.networkBytesPerSec
                          : settings.device.linkBytesPerSec);
  }

  const Settings &settings;
  const Candidate &c;
};

/// One step's collectives (a "collectives" array of a communication
/// report, rows tagged by entry kind and axes): ring bytes, the share that
/// overlaps compute, and the seconds of each on their links.
struct StepComm {
  int64_t ringBytes = 0, overlappedBytes = 0;
  double exposedSeconds = 0, overlappedSeconds = 0;
};

StepComm stepComm(const llvm::json::Object *communication,
                  const StepKinds &kinds, int64_t microbatches,
                  const Links &links) {
  StepComm step;
  const llvm::json::Array *rows =
      communication ? communication->getArray("collectives") : nullptr;
  if (!rows)
    return step;
  for (const llvm::json::Value &value : *rows) {
    const llvm::json::Object *row = value.getAsObject();
    if (!row)
      continue;
    StringRef entry = row->getString("entry").value_or("");
    int64_t times = kinds.perMicrobatch.contains(entry) ? microbatches
                    : kinds.once.contains(entry)        ? 1
                                                        : 0;
    // Overlapped bytes are counted as payload; the ring sends the same
    // share of its bytes behind compute.
    int64_t ring = integer(*row, "ring_bytes");
    int64_t payload = integer(*row, "bytes");
    int64_t overlapped =
        payload > 0
            ? std::min(ring, int64_t(double(ring) *
                                     double(integer(*row, "overlapped_bytes")) /
                                     double(payload)))
            : 0;
    double perByte = links.secondsPerByte(row->getArray("axes"));
    step.ringBytes += times * ring;
    step.overlappedBytes += times * overlapped;
    step.exposedSeconds += double(times * (ring - overlapped)) * perByte;
    step.overlappedSeconds += double(times * overlapped) * perByte;
  }
  return step;
}

/// What one rank does in a step, as the candidate's figures count it.
struct RankLoad {
  int64_t flops = 0, ringBytes = 0, exposedBytes = 0, p2pBytes = 0,
          memoryBytes = 0;
  double exposedSeconds = 0, overlappedSeconds = 0;

  /// Adds a model's (or a stage's) entries of one step: their collectives,
  /// the flops of those run once, and, unless a pipeline's makespan counts
  /// them, the flops of those run per microbatch; and its arena.
  void addModel(const llvm::json::Object &model, StringRef function,
                int64_t microbatches, bool pipelined, const Links &links) {
    const llvm::json::Object *entryFlops = model.getObject("flops");
    if (!entryFlops)
      return;
    StepKinds kinds = stepKinds(*entryFlops, function, microbatches, pipelined);
    auto flopsOf = [&](StringRef kind) {
      return integer(*entryFlops, entryName(function, kind));
    };
    if (!pipelined)
      for (const auto &kind : kinds.perMicrobatch)
        flops += microbatches * flopsOf(kind.getKey());
    for (const auto &kind : kinds.once)
      flops += flopsOf(kind.getKey());
    StepComm step =
        stepComm(model.getObject("communication"), kinds, microbatches, links);
    ringBytes += step.ringBytes;
    exposedBytes += step.ringBytes - step.overlappedBytes;
    exposedSeconds += step.exposedSeconds;
    overlappedSeconds += step.overlappedSeconds;
    memoryBytes += integer(model, "arena_bytes");
  }

  /// The candidate's figures: the busiest rank's, each on its own.
  void maxInto(Candidate &c) const {
    c.flops = std::max(c.flops, flops);
    c.ringBytes = std::max(c.ringBytes, ringBytes);
    c.exposedBytes = std::max(c.exposedBytes, exposedBytes);
    c.exposedSeconds = std::max(c.exposedSeconds, exposedSeconds);
    c.overlappedSeconds = std::max(c.overlappedSeconds, overlappedSeconds);
    c.p2pBytes = std::max(c.p2pBytes, p2pBytes);
    c.memoryBytes = std::max(c.memoryBytes, memoryBytes);
  }
};

/// Reads a compile's report into `c`. A pipeline: the simulated makespan
/// (every rank's time, bubble included) plus each rank's update, per rank
/// the collectives and sends of its stages and its arenas with the
/// activations the schedule holds.
void readReport(const llvm::json::Object &report, int64_t microbatches,
                const Links &links, Candidate &c) {
  StringRef function = report.getString("function").value_or("");
  const llvm::json::Object *pipeline = report.getObject("pipeline");
  if (!pipeline) {
    RankLoad rank;
    rank.addModel(report, function, microbatches, false, links);
    rank.maxInto(c);
    return;
  }
  c.bubble = pipeline->getNumber("bubble_fraction").value_or(0);
  const llvm::json::Array *stages = pipeline->getArray("stages");
  const llvm::json::Array *timeline = pipeline->getArray("timeline");
  if (!stages || !timeline)
    return;
  std::map<int64_t, RankLoad> ranks;
  for (const llvm::json::Value &value : *stages) {
    const llvm::json::Object *stage = value.getAsObject();
    if (!stage)
      continue;
    RankLoad &rank = ranks[integer(*stage, "rank")];
    rank.addModel(*stage, function, microbatches, true, links);
    rank.p2pBytes += integer(*stage, "p2p_bytes");
  }
  int64_t makespan = integer(*pipeline, "makespan_flops");
  for (auto &[r, rank] : ranks) {
    if (r < int64_t(timeline->size()))
      if (const llvm::json::Object *held = (*timeline)[r].getAsObject())
        rank.memoryBytes += integer(*held, "activation_bytes");
    rank.flops += makespan;
    rank.maxInto(c);
  }
}

/// Compiles `c` from a clone of `model` and reads its report; a refusal
/// keeps the compiler's first error.
void evaluate(ModuleOp model, const Settings &settings, Candidate &c) {
  CompilePipelineOptions options;
  if (settings.configure)
    settings.configure(options);
  options.precision = settings.precision;
  options.source = settings.source;
  std::string mesh = c.mesh();
  if (settings.devices > 1)
    options.mesh = mesh;
  options.zero = c.zero;
  if (c.sequenceParallel)
    options.sequenceParallel = true;
  if (!c.recompute.empty())
    options.setTrainSetting("recompute", c.recompute);
  if (c.stageRecompute)
    options.stageRecompute = true;
  if (c.pp > 1) {
    options.microbatches = settings.microbatches;
    options.pipelineSchedule = c.schedule;
    if (c.schedule == "interleaved")
      options.virtualStages = 2;
  }
  OwningOpRef<ModuleOp> clone = model.clone();
  std::string firstError;
  llvm::json::Object report;
  {
    ScopedDiagnosticHandler handler(model.getContext(), [&](Diagnostic &d) {
      if (d.getSeverity() == DiagnosticSeverity::Error && firstError.empty())
        firstError = d.str();
      return success();
    });
    if (failed(compileWithReport(*clone, options, report))) {
      c.refused = firstError.empty() ? "the compile failed" : firstError;
      return;
    }
  }
  Links links(settings, c);
  readReport(report, settings.microbatches, links, c);
  // Overlapped collectives hide behind compute, and no more than it lasts;
  // a stage's sends cross the pp axis's links.
  double rate =
      settings.device.peakFlops(settings.precision) * settings.efficiency;
  c.computeSeconds = double(c.flops) / rate;
  c.commSeconds = c.exposedSeconds +
                  std::max(0.0, c.overlappedSeconds - c.computeSeconds) +
                  double(c.p2pBytes) * links.secondsPerByte("pp");
  c.stepSeconds = c.computeSeconds + c.commSeconds;
  c.fits = double(c.memoryBytes) <= settings.device.memoryBytes;
}

/// What the search may turn on for a candidate over memory: what the
/// command line leaves unset.
struct FitSearch {
  bool recompute = true;      // a recompute policy
  bool stageRecompute = true; // a pipeline's --stage-recompute
};

/// Compiles `c`; when it is over memory, again with selective, then full
/// recomputation, then (a pipeline) its stages recomputing their whole
/// forward from their inputs, the cheaper first, as far as `search` allows:
/// the first that fits, else the one that holds the least.
void evaluateFitting(ModuleOp model, const Settings &settings, Candidate &c,
                     FitSearch search) {
  evaluate(model, settings, c);
  if (!c.refused.empty() || c.fits)
    return;
  std::vector<Candidate> retries;
  if (search.recompute)
    for (const char *policy : {"selective", "full"}) {
      retries.push_back(c.sameSplit());
      retries.back().recompute = policy;
    }
  if (search.stageRecompute && c.pp > 1) {
    retries.push_back(c.sameSplit());
    retries.back().stageRecompute = true;
  }
  for (Candidate &retry : retries) {
    evaluate(model, settings, retry);
    if (retry.refused.empty() &&
        (retry.fits || retry.memoryBytes < c.memoryBytes))
      c = std::move(retry);
    if (c.fits)
      return;
  }
}

/// Compiles every candidate of `all` (evaluateFitting), `settings.jobs` at a
/// time. One job compiles in `model`'s context; several each parse the
/// model's text into a context of their own (threading off: the workers
/// are the parallelism) and take the next candidate until none is left, so
/// no IR, diagnostic handler or uniquer is shared between compiles.
void evaluateAll(ModuleOp model, const Settings &settings,
                 std::vector<Candidate> &all, FitSearch search) {
  unsigned jobs = settings.jobs
                      ? settings.jobs
                      : llvm::hardware_concurrency().compute_thread_count();
  jobs = std::max(1u, std::min<unsigned>(jobs, unsigned(all.size())));
  if (jobs == 1) {
    for (Candidate &c : all)
      evaluateFitting(model, settings, c, search);
    return;
  }
  std::string text;
  {
    llvm::raw_string_ostream os(text);
    model->print(os, OpPrintingFlags().enableDebugInfo());
  }
  const DialectRegistry &registry = model.getContext()->getDialectRegistry();
  std::atomic<size_t> next{0};
  auto work = [&] {
    MLIRContext context(registry, MLIRContext::Threading::DISABLED);
    context.printOpOnDiagnostic(false);
    context.loadAllAvailableDialects();
    std::string parseError;
    ScopedDiagnosticHandler handler(&context, [&](Diagnostic &d) {
      if (parseError.empty())
        parseError = d.str();
      return success();
    });
    OwningOpRef<ModuleOp> copy = parseSourceString<ModuleOp>(text, &context);
    for (size_t i = next++; i < all.size(); i = next++) {
      if (!copy)
        all[i].refused =
            "the planner could not read the model back: " + parseError;
      else
        evaluateFitting(*copy, settings, all[i], search);
    }
  };
  std::vector<std::thread> workers;
  for (unsigned k = 0; k < jobs; ++k)
    workers.emplace_back(work);
  for (std::thread &worker : workers)
    worker.join();
}

/// Whether the candidates' rules (the command line's, else the defaults)
/// map a logical axis that some function argument has (`nn.axes`) to cp.
bool splitsOverContext(ModuleOp model, const CompilePipelineOptions &given) {
  std::string error;
  std::string text = given.rules.hasValue() ? std::string(given.rules)
                                            : kDefaultShardingRules.str();
  auto rules = parseRules(text, error);
  if (!rules)
    return false; // each candidate's compile says why
  llvm::StringSet<> overContext;
  for (const auto &[logical, meshAxis] : *rules)
    if (meshAxis == kContextAxisName)
      overContext.insert(logical);
  bool found = false;
  model.walk([&](func::FuncOp func) {
    for (unsigned i = 0, e = func.getNumArguments(); i < e && !found; ++i)
      if (auto axes =
              func.getArgAttrOfType<ArrayAttr>(i, nn::NNDialect::kAxesAttrName))
        for (Attribute axis : axes)
          if (auto name = dyn_cast<StringAttr>(axis))
            found |= overContext.contains(name.getValue());
  });
  return found;
}

/// The same program's figures: sequence parallelism that changed nothing
/// (a model without a sequence dimension).
bool sameFigures(const Candidate &a, const Candidate &b) {
  return a.refused == b.refused && a.flops == b.flops &&
         a.ringBytes == b.ringBytes && a.exposedBytes == b.exposedBytes &&
         a.p2pBytes == b.p2pBytes && a.memoryBytes == b.memoryBytes;
}

/// Equal but for the rounding of sums taken in another order.
bool nearlyEqual(double a, double b) {
  return std::fabs(a - b) <= 1e-9 * std::max(std::fabs(a), std::fabs(b));
}

/// The table's recompute column: the policy, "stage" for a pipeline's
/// stages recomputing their forward, "-" for neither.
std::string recomputeText(const Candidate &c) {
  if (c.stageRecompute)
    return c.recompute.empty() ? "stage" : c.recompute + "+stage";
  return c.recompute.empty() ? "-" : c.recompute;
}

std::string format(const char *fmt, double value) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), fmt, value);
  return buf;
}

} // namespace

std::optional<DeviceModel> planner::deviceModel(StringRef name) {
  if (name == "h100")
    return DeviceModel{"h100", 80 * kGiB, 989e12, 67e12, 67e12, 450e9, 50e9};
  if (name == "h200")
    return DeviceModel{"h200", 141e9, 989e12, 67e12, 67e12, 450e9, 50e9};
  return std::nullopt;
}

std::string planner::refuseDevices(int64_t devices, int64_t nodes,
                                   StringRef device) {
  if (devices < 1 || devices > 4096)
    return "--devices " + std::to_string(devices) + ": expected 1 to 4096";
  if (nodes < 1 || devices % nodes != 0)
    return "--nodes " + std::to_string(nodes) +
           ": expected a divisor of --devices " + std::to_string(devices);
  if (!deviceModel(device))
    return "--device " + device.str() + ": expected one of h100, h200";
  return "";
}

std::string Candidate::mesh() const {
  std::string text;
  auto axis = [&](const char *name, int64_t size) {
    if (size > 1)
      text += (text.empty() ? "" : ",") + std::string(name) + "=" +
              std::to_string(size);
  };
  axis("pp", pp);
  axis("dp", dp);
  axis("cp", cp);
  axis("tp", tp);
  return text.empty() ? "one device" : text;
}

/// A candidate of this split, not yet compiled.
static Candidate split(int64_t dp, int64_t cp, int64_t tp, int64_t pp,
                       int64_t zero, const std::string &schedule,
                       bool sequenceParallel, const std::string &recompute,
                       bool stageRecompute = false) {
  Candidate c;
  c.dp = dp;
  c.cp = cp;
  c.tp = tp;
  c.pp = pp;
  c.zero = zero;
  c.schedule = schedule;
  c.sequenceParallel = sequenceParallel;
  c.recompute = recompute;
  c.stageRecompute = stageRecompute;
  return c;
}

Candidate Candidate::sameSplit() const {
  return split(dp, cp, tp, pp, zero, schedule, sequenceParallel, recompute,
               stageRecompute);
}

std::vector<Candidate> planner::plan(ModuleOp model, const Settings &settings) {
  std::vector<Candidate> all;
  int64_t n = settings.devices;
  // What the command line leaves to the search: sequence parallelism under
  // tp, and a recompute policy where the memory needs one.
  CompilePipelineOptions given;
  if (settings.configure)
    settings.configure(given);
  bool searchSequenceParallel = !given.sequenceParallel;
  FitSearch search;
  search.recompute = std::string(given.recompute).empty();
  // A policy given fixes recomputation: no stage recomputation either.
  search.stageRecompute = search.recompute && !given.stageRecompute;
  // Every candidate, then every compile; a sequence-parallel candidate
  // follows its split's and is dropped where it compiled the same program.
  std::vector<bool> sequenceVariant;
  // Context parallelism only where a rule splits some argument's dimension
  // over cp: elsewhere its ranks would each run the same whole program.
  int64_t maxCp = splitsOverContext(model, given) ? n : 1;
  for (int64_t pp = 1; pp <= n; ++pp) {
    if (n % pp)
      continue;
    for (int64_t cp = 1; cp <= std::min(n / pp, maxCp); ++cp) {
      if ((n / pp) % cp)
        continue;
      for (int64_t tp = 1; tp <= n / pp / cp; ++tp) {
        if ((n / pp / cp) % tp)
          continue;
        int64_t dp = n / pp / cp / tp;
        for (int64_t zero = 0; zero <= (dp * cp > 1 ? 3 : 0); ++zero) {
          std::vector<std::string> schedules = {""};
          if (pp > 1)
            schedules = {"1f1b", "zb-h1", "interleaved", "zb-v", "dualpipev"};
          for (const std::string &schedule : schedules) {
            all.push_back(split(dp, cp, tp, pp, zero, schedule,
                                given.sequenceParallel, /*recompute=*/""));
            sequenceVariant.push_back(false);
            if (tp > 1 && searchSequenceParallel) {
              all.push_back(split(dp, cp, tp, pp, zero, schedule,
                                  /*sequenceParallel=*/true,
                                  /*recompute=*/""));
              sequenceVariant.push_back(true);
            }
          }
        }
      }
    }
  }
  evaluateAll(model, settings, all, search);
  std::vector<Candidate> kept;
  for (size_t i = 0; i < all.size(); ++i)
    if (!sequenceVariant[i] || !sameFigures(all[i], all[i - 1]))
      kept.push_back(std::move(all[i]));
  all = std::move(kept);
  auto order = [](const Candidate &c) {
    return c.refused.empty() ? (c.fits ? 0 : 1) : 2;
  };
  std::stable_sort(
      all.begin(), all.end(), [&](const Candidate &a, const Candidate &b) {
        if (order(a) != order(b))
          return order(a) < order(b);
        // Equal step times (a step all communication)
        // go to the one that computes less, then holds
        // less.
        if (order(a) == 0 && !nearlyEqual(a.stepSeconds, b.stepSeconds))
          return a.stepSeconds < b.stepSeconds;
        if (order(a) == 0 && !nearlyEqual(a.computeSeconds, b.computeSeconds))
          return a.computeSeconds < b.computeSeconds;
        if (order(a) <= 1)
          return a.memoryBytes < b.memoryBytes;
        return false;
      });
  return all;
}

const Candidate *planner::best(const std::vector<Candidate> &ranked) {
  return !ranked.empty() && ranked.front().refused.empty() &&
                 ranked.front().fits
             ? &ranked.front()
             : nullptr;
}

void planner::printPlan(llvm::raw_ostream &os,
                        const std::vector<Candidate> &ranked,
                        const Settings &settings, size_t top) {
  const DeviceModel &d = settings.device;
  double peak = d.peakFlops(settings.precision);
  os << "plan for " << settings.source << " on " << settings.devices << " x "
     << d.name << " (" << format("%.4g", d.memoryBytes / kGiB) << " GiB, "
     << format("%.0f", peak / 1e12) << " TFLOP/s " << settings.precision
     << " at " << format("%.0f", settings.efficiency * 100) << "%, links "
     << format("%.0f", d.linkBytesPerSec / 1e9) << " GB/s";
  if (settings.nodes > 1)
    os << " in each of " << settings.nodes << " nodes, "
       << format("%.0f", d.networkBytesPerSec / 1e9) << " GB/s between";
  os << "), " << settings.microbatches << " microbatch"
     << (settings.microbatches == 1 ? "" : "es") << " per step\n";
  os << llvm::format("  %-4s %-20s %4s %-11s %-3s %-9s %10s %10s %9s %7s "
                     "%14s %16s %14s\n",
                     "rank", "mesh", "zero", "schedule", "sp", "recompute",
                     "step ms", "compute ms", "comm ms", "bubble",
                     "memory bytes", "flops", "ring bytes");
  size_t shown = 0, fitting = 0;
  for (const Candidate &c : ranked) {
    if (!c.refused.empty() || !c.fits)
      continue;
    ++fitting;
    if (shown == top)
      continue;
    ++shown;
    os << llvm::format(
        "  %-4zu %-20s %4lld %-11s %-3s %-9s %10.4g %10.4g %9.4g %7.4f %14lld "
        "%16lld %14lld\n",
        shown, c.mesh().c_str(), (long long)c.zero,
        c.schedule.empty() ? "-" : c.schedule.c_str(),
        c.sequenceParallel ? "yes" : "-", recomputeText(c).c_str(),
        c.stepSeconds * 1e3, c.computeSeconds * 1e3, c.commSeconds * 1e3,
        c.bubble, (long long)c.memoryBytes, (long long)c.flops,
        (long long)c.ringBytes);
  }
  if (fitting > shown)
    os << "  (" << fitting - shown << " more that fit: --top)\n";
  if (fitting == 0)
    os << "  none fits in " << format("%.0f", d.memoryBytes)
       << " bytes per device\n";
  for (const Candidate &c : ranked)
    if (c.refused.empty() && !c.fits)
      os << "  over memory: " << c.mesh() << " zero " << c.zero
         << (c.schedule.empty() ? "" : " " + c.schedule)
         << (c.sequenceParallel ? " sp" : "")
         << (c.recompute.empty() ? "" : " recompute " + c.recompute)
         << (c.stageRecompute ? " stage-recompute" : "") << " needs "
         << c.memoryBytes << " bytes\n";
  // One line per refusal: the same error (a model without nn.repeat
  // under pp) refuses every ZeRO stage and schedule alike.
  std::vector<std::pair<std::string, std::vector<std::string>>> refusals;
  for (const Candidate &c : ranked) {
    if (c.refused.empty())
      continue;
    std::string message = StringRef(c.refused).split('\n').first.str();
    auto it = llvm::find_if(refusals,
                            [&](const auto &r) { return r.first == message; });
    if (it == refusals.end())
      it = refusals.insert(refusals.end(), {message, {}});
    std::string label = c.mesh() +
                        (c.schedule.empty() ? "" : " " + c.schedule) +
                        (c.sequenceParallel ? " sp" : "");
    if (!llvm::is_contained(it->second, label))
      it->second.push_back(label);
  }
  for (const auto &[message, labels] : refusals)
    os << "  refused (" << llvm::join(labels, ", ") << "): " << message << "\n";
}

llvm::json::Object planner::planJson(const std::vector<Candidate> &ranked,
                                     const Settings &settings) {
  llvm::json::Array candidates;
  for (const Candidate &c : ranked) {
    llvm::json::Object o{{"mesh", c.mesh()}, {"dp", c.dp}, {"cp", c.cp},
                         {"tp", c.tp},       {"pp", c.pp}, {"zero", c.zero}};
    if (!c.schedule.empty())
      o["schedule"] = c.schedule;
    o["sequence_parallel"] = c.sequenceParallel;
    if (!c.recompute.empty())
      o["recompute"] = c.recompute;
    if (c.stageRecompute)
      o["stage_recompute"] = true;
    if (!c.refused.empty()) {
      o["refused"] = c.refused;
    } else {
      o["fits"] = c.fits;
      o["flops"] = c.flops;
      o["ring_bytes"] = c.ringBytes;
      o["exposed_bytes"] = c.exposedBytes;
      o["p2p_bytes"] = c.p2pBytes;
      o["memory_bytes"] = c.memoryBytes;
      o["bubble_fraction"] = c.bubble;
      o["compute_seconds"] = c.computeSeconds;
      o["comm_seconds"] = c.commSeconds;
      o["step_seconds"] = c.stepSeconds;
    }
    candidates.push_back(std::move(o));
  }
  const DeviceModel &d = settings.device;
  return llvm::json::Object{
      {"source", settings.source},
      {"devices", settings.devices},
      {"device",
       llvm::json::Object{{"name", d.name},
                          {"memory_bytes", d.memoryBytes},
                          {"bf16_flops", d.bf16Flops},
                          {"f32_flops", d.f32Flops},
                          {"f64_flops", d.f64Flops},
                          {"link_bytes_per_second", d.linkBytesPerSec},
                          {"network_bytes_per_second", d.networkBytesPerSec}}},
      {"nodes", settings.nodes},
      {"efficiency", settings.efficiency},
      {"microbatches", settings.microbatches},
      {"precision", settings.precision},
      {"candidates", std::move(candidates)}};
}
