//===- Launch.cpp - One rank's run, and every rank of a mesh as threads ---===//

#include "runtime/launcher/Launch.h"
#include "runtime/launcher/Prefetch.h"
#include "runtime/launcher/Arena.h"
#include "runtime/launcher/Distributed.h"
#include "runtime/launcher/Error.h"
#include "runtime/launcher/GradCheck.h"
#include "runtime/launcher/PipelineStep.h"
#include "runtime/launcher/Ranks.h"
#include "runtime/launcher/ShardedCheckpoint.h"
#include "runtime/launcher/StopSignal.h"
#include "runtime/launcher/Training.h"

#include <chrono>
#include <climits>
#include <cstdio>

using namespace tessel::run;

namespace {

/// The most bytes a rank of the mesh keeps between its pipeline schedule's
/// actions, and the first rank keeping that many (every rank calls it).
HeldMicrobatches busiestHolding(tessel_ctx *ctx, uint32_t axes, int64_t mine,
                                int32_t rank) {
  auto maxOverRanks = [&](int64_t value) {
    std::vector<int64_t> max = {value};
    allReduceOnHost(ctx, axes, max, TESSEL_REDUCE_MAX,
                    "comparing the ranks' held bytes");
    return max[0];
  };
  HeldMicrobatches held;
  held.bytes = maxOverRanks(mine);
  held.rank = -maxOverRanks(mine == held.bytes ? -int64_t(rank) : INT64_MIN);
  return held;
}

double nowSeconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

/// "train adamw lr 0.001, global batch 32 = 1 x 32[, mesh dp=2,tp=2 (4
/// ranks, threads)]".
std::string describeRun(const RunPlan &plan, int64_t globalBatch) {
  const Options &options = *plan.options;
  const ModelDesc &desc = plan.model->desc;
  std::string what =
      (plan.mode == Mode::Train
           ? "train " + desc.train->describe()
           : std::string(desc.trains() ? "eval"
                                       : "eval: compiled without "
                                         "training")) +
      ", global batch " + std::to_string(options.microbatches * globalBatch) +
      " = " + std::to_string(options.microbatches) + " x " +
      std::to_string(globalBatch);
  if (desc.mesh)
    what += ", mesh " + desc.mesh->toString() + " (" +
            std::to_string(desc.worldSize()) + " ranks, " +
            (options.comm == CommBackend::Mpi   ? "MPI"
             : options.comm == CommBackend::Tcp ? "TCP"
                                                : "threads") +
            ")";
  return what;
}

/// Rank 0 after the first step: the collectives it ran against the
/// compiled report. A difference is a warning, not an error: the numbers
/// of the run are still right, the report (or the runtime's counting) is
/// not.
void checkCommunication(const ModelDesc &desc,
                        const std::vector<CommCount> &measured, bool training,
                        int64_t microbatches) {
  if (desc.collectives.empty())
    return;
  std::string difference = commDifference(
      expectedCommPerStep(desc, training, microbatches), measured);
  if (!difference.empty())
    std::fprintf(stderr,
                 "tessel-run: warning: runtime counters differ from the "
                 "compiled report: %s\n",
                 difference.c_str());
}

/// Events a traced step keeps at most (about 64 bytes each).
constexpr int64_t kMaxTraceEvents = int64_t(1) << 20;

/// Rank 0's account of its traced step, and the check of the report's
/// overlapped bytes against it: every byte the compiler started early must
/// have had a kernel issued before its wait.
void reportTrace(const ModelDesc &desc, const TraceSummary &summary,
                 int64_t step, bool check, int64_t microbatches) {
  std::fprintf(stderr, "tessel-run: trace of step %lld (rank 0): %s\n",
               (long long)step, describeTrace(summary).c_str());
  if (!check || !desc.mesh)
    return;
  int64_t compiled = 0;
  for (const CommCount &c :
       expectedCommPerStep(desc, /*training=*/true, microbatches))
    compiled += c.overlappedBytes;
  if (summary.overlappedBytes != compiled)
    std::fprintf(stderr,
                 "tessel-run: warning: %lld bytes overlapped kernels in the "
                 "trace, but the compiled report has %lld overlapped\n",
                 (long long)summary.overlappedBytes, (long long)compiled);
}

/// Saves the checkpoint of `stepsDone` steps to --save (on a mesh every rank
/// takes part in the gathers and rank 0 writes the file) and to
/// --save-sharded (every rank writes its own file).
void saveCheckpoint(const RunPlan &plan, RankRuntime &rt,
                    PipelineRank *pipelined, int64_t stepsDone, int32_t rank) {
  const Options &options = *plan.options;
  const ModelDesc &desc = plan.model->desc;
  bool reporter = rank == 0;
  std::map<std::string, std::string> metadata = {
      {"seed", std::to_string(options.seed)}};
  // Only a training run has a step count to resume from.
  bool training = plan.mode == Mode::Train;
  if (training)
    metadata["tessel.step"] = std::to_string(stepsDone);
  if (!options.save.empty()) {
    if (desc.mesh) {
      std::map<std::string, std::vector<char>> tensors =
          pipelined ? pipelined->gatherCheckpoint(training, reporter)
                    : gatherCheckpoint(desc, rt.ctx, rt.arena, training,
                                       reporter);
      if (reporter)
        writeSafetensorsAtomically(options.save, desc, tensors, metadata,
                                   training);
    } else {
      writeSafetensorsAtomically(options.save, desc, rt.ctx, rt.arena,
                                 metadata, training);
    }
  }
  if (!options.saveSharded.empty())
    saveShardedCheckpoint(
        options.saveSharded, desc, rank, rt.ctx,
        [&](int stage) -> const void * {
          return stage < 0 ? rt.arena : pipelined->stageArena(stage);
        },
        metadata, training);
}

} // namespace

Mode tessel::run::modeOf(const Options &options, const ModelDesc &model) {
  return options.checkGrads                ? Mode::CheckGrads
         : options.eval || !model.trains() ? Mode::Eval
                                           : Mode::Train;
}

std::unique_ptr<BatchSource>
tessel::run::makeBatchSource(const Options &options, const ModelDesc &view,
                             bool heldOut) {
  const std::string &data = heldOut ? options.evalData : options.data;
  return data.empty()
             ? makeSyntheticData(view, options.seed, heldOut)
             : makeTokenFileData(view, data,
                                 heldOut ? options.evalLabels : options.labels,
                                 options.dataDtype);
}

RunEnd tessel::run::runRank(const RunPlan &plan, int32_t rank, int32_t comm,
                            tessel_local_world *world) {
  const Options &options = *plan.options;
  const LoadedModel &model = *plan.model;
  const ModelDesc &desc = model.desc;
  bool reporter = rank == 0;
  std::vector<int64_t> coords =
      desc.mesh ? desc.mesh->coordinates(rank) : std::vector<int64_t>{};

  checkStepRange(plan.firstStep, options.steps, options.microbatches,
                 globalFeedView(desc).batchSize(),
                 plan.checkpoint ? "checkpoint '" + options.load + "'" : "");
  tessel_ctx_options ctxOptions = rankOptions(desc, rank, comm, world);
  ctxOptions.backend_name = options.backend.c_str();
  ctxOptions.comm_timeout_seconds = options.commTimeoutSeconds;
  if (plan.tcp) {
    ctxOptions.rendezvous_host = plan.tcp->masterAddr.c_str();
    ctxOptions.rendezvous_port = plan.tcp->rendezvousPort;
    ctxOptions.rendezvous_key = plan.tcp->key.c_str();
  }
  // A pipeline's stages allocate their own arenas.
  RankRuntime rt(desc.pipeline ? 64 : desc.arenaBytes, ctxOptions,
                 describeArena(desc));
  std::unique_ptr<PipelineRank> pipelined;
  if (desc.pipeline) {
    pipelined = std::make_unique<PipelineRank>(
        model, rt.ctx, rank, coords,
        [&](const ModelDesc &view) { return makeBatchSource(options, view); });
    if (plan.checkpoint)
      pipelined->load(*plan.checkpoint, plan.mode == Mode::Train);
    else
      pipelined->initialise(options.seed);
  } else if (plan.checkpoint) {
    plan.checkpoint->load(rt.ctx, rt.arena, coords);
    if (plan.mode == Mode::Train && plan.checkpoint->info().paramsOnly)
      zeroStates(desc, rt.ctx, rt.arena);
  } else {
    initParams(desc, rt.ctx, rt.arena, options.seed, coords);
    zeroStates(desc, rt.ctx, rt.arena);
  }
  checkKernelError(rt.ctx, "initialising parameters");
  std::unique_ptr<BatchSource> batches, heldOut;
  if (!pipelined)
    batches = makeRankFeeds(
      desc,
      [&](const ModelDesc &view) { return makeBatchSource(options, view); },
      coords, rt.ctx);
  // --eval-every's held-out batches, each rank its block of them.
  bool evaluates = options.evalEvery && plan.mode == Mode::Train;
  BatchSourceFactory makeHeldOut = [&](const ModelDesc &view) {
    return makeBatchSource(options, view, /*heldOut=*/true);
  };
  if (evaluates && pipelined)
    pipelined->holdOut(makeHeldOut);
  else if (evaluates)
    heldOut = makeRankFeeds(desc, makeHeldOut, coords, rt.ctx);
  // Evaluation is PyTorch's model.eval(): no dropout.
  if (plan.mode == Mode::Eval)
    tessel_set_dropout(rt.ctx, 0);

  if (options.graph && pipelined)
    throw UsageError(kGraphPipelineRefusal);
  if (plan.mode != Mode::CheckGrads && !pipelined)
    batches = std::make_unique<PrefetchingBatchSource>(
        std::move(batches), desc, options.backend.c_str());
  if (plan.mode == Mode::CheckGrads) {
    GradCheckSettings settings{options.seed, options.gradTol,
                               options.gradParams};
    if (pipelined)
      checkPipelineGradients(model, rt.ctx, *pipelined, plan.firstStep,
                             settings, reporter ? stdout : nullptr, coords);
    else
      checkGradients(model, rt.ctx, rt.arena, *batches, plan.firstStep,
                     plan.firstStep * options.microbatches, settings,
                     reporter ? stdout : nullptr, coords);
    return {0, plan.firstStep};
  }

  // --graph: the first step runs call by call (it warms up what a capture
  // cannot: communicators, GEMM plans), the next is captured, and every
  // later one is a launch.
  std::unique_ptr<CapturedStep> captured, capturedHeldOut;
  if (options.graph)
    captured = std::make_unique<CapturedStep>(model, rt, options.microbatches,
                                              plan.mode == Mode::Train);
  // --eval-every's forward, captured at its first evaluation (after the
  // first step has warmed up what a capture cannot).
  if (options.graph && evaluates)
    capturedHeldOut = std::make_unique<CapturedStep>(
        model, rt, options.microbatches, /*training=*/false);
  // Sizes of one device's run: the global microbatch.
  ModelDesc globalFeeds = globalFeedView(desc);
  int64_t tokens = tokensPerStep(globalFeeds) * options.microbatches;
  int64_t lastStep = plan.firstStep + options.steps;
  ProgressReporter progress(plan.firstStep, lastStep, options.logEvery,
                            options.quiet || !reporter);
  std::string commLine;
  // Every rank leaves the loop after the same step: the stop decision is
  // agreed through a collective (stopAfterThisStep), and the periodic saves
  // fall on the same step counts.
  uint32_t allAxes = desc.mesh ? (1u << desc.mesh->axes.size()) - 1 : 0;
  RunEnd end{0, lastStep};
  // --trace: the second step (the first warms caches and threads up), or
  // the only one.
  int64_t tracedStep = options.steps >= 2 ? plan.firstStep + 1 : plan.firstStep;
  for (int64_t step = plan.firstStep; step < lastStep; ++step) {
    bool first = step == plan.firstStep;
    // Nothing before the first step communicates; its counters are the
    // step's alone.
    if (first && desc.mesh)
      tessel_reset_counters(rt.ctx);
    bool traced = plan.trace && step == tracedStep;
    if (traced && tessel_trace_begin(rt.ctx, kMaxTraceEvents) != 0)
      checkKernelError(rt.ctx, "starting the trace");
    double stepStart = nowSeconds();
    double loss =
        pipelined ? (plan.mode == Mode::Train ? pipelined->trainStep(step)
                                              : pipelined->evalStep(step))
        : captured && !first ? captured->run(*batches, step)
        : plan.mode == Mode::Train
            ? trainStep(model, rt, *batches, step, options.microbatches)
            : evalStep(model, rt, *batches, step, options.microbatches);
    double seconds = nowSeconds() - stepStart;
    // The first step's communication and stash, read before a held-out
    // loss adds its own forwards'.
    std::optional<std::vector<CommCount>> firstComm;
    if (reporter && first && desc.mesh) {
      firstComm = readCommCounters(rt.ctx, *desc.mesh);
      commLine = describeComm(*firstComm);
      if (pipelined) {
        // The stages' sends and receives (this rank's), besides the
        // collectives.
        int64_t sent = 0, received = 0, calls = 0;
        for (int32_t peer = 0; peer < int32_t(desc.worldSize()); ++peer) {
          sent += tessel_p2p_bytes(rt.ctx, peer, TESSEL_P2P_SENT);
          received += tessel_p2p_bytes(rt.ctx, peer, TESSEL_P2P_RECEIVED);
          calls += tessel_p2p_calls(rt.ctx, peer, TESSEL_P2P_SENT);
        }
        commLine += "; send/recv (rank 0): " + std::to_string(calls) +
                    " sends, " + std::to_string(sent) + " bytes sent, " +
                    std::to_string(received) + " received";
      }
    }
    // Every rank: what it kept between the schedule's actions is what the
    // compiler's report counted.
    if (first && pipelined && plan.mode == Mode::Train)
      if (std::string difference = pipelined->stashDifference();
          !difference.empty())
        std::fprintf(stderr,
                     "tessel-run: warning: rank %d's pipeline stash differs "
                     "from the compiled schedule's: %s\n",
                     int(rank), difference.c_str());
    if (traced) {
      tessel_trace_end(rt.ctx);
      std::vector<tessel_trace_event> events = readTrace(rt.ctx);
      if (reporter)
        reportTrace(desc, summarizeTrace(events, tessel_trace_dropped(rt.ctx)),
                    step + 1, plan.mode == Mode::Train && !pipelined,
                    options.microbatches);
      plan.trace->add(rank, step + 1, std::move(events));
    }
    // --eval-every: every rank, after every N-th step and the last
    // (after the traced step's trace ends).
    std::optional<double> evalLoss;
    if (evaluates &&
        ((step + 1) % options.evalEvery == 0 || step + 1 == lastStep))
      evalLoss =
          pipelined ? pipelined->heldOutLoss(options.evalSteps)
          : capturedHeldOut
              ? heldOutLoss(*capturedHeldOut, rt, *heldOut, options.evalSteps)
              : heldOutLoss(model, rt, *heldOut, options.evalSteps,
                            options.microbatches);
    if (reporter) {
      tessel_counters counters;
      tessel_get_counters(rt.ctx, &counters);
      StepResult result = {step + 1,
                           loss,
                           tokens,
                           seconds,
                           seconds > 0 ? tokens / seconds : 0.0,
                           counters.bytes_allocated,
                           std::nullopt,
                           1,
                           std::nullopt};
      if (plan.mode == Mode::Train)
        result.lr = lrAt(*desc.train, step);
      result.microbatches = options.microbatches;
      result.evalLoss = evalLoss;
      if (firstComm) {
        if (!pipelined)
          checkCommunication(desc, *firstComm, plan.mode == Mode::Train,
                             options.microbatches);
        result.comm = std::move(firstComm);
      }
      if (plan.metrics)
        plan.metrics->write(result);
      progress.onStep(result);
    }
    // After the first step's counters are read: the agreement is a
    // collective of its own, not the model's.
    if (int signal = stopAfterThisStep(rt.ctx, allAxes)) {
      end = {signal, step + 1};
      break;
    }
    // The last step's checkpoint is the final save below.
    if (options.saveEvery && (step + 1) % options.saveEvery == 0 &&
        step + 1 < lastStep)
      saveCheckpoint(plan, rt, pipelined.get(), step + 1, rank);
  }

  if (!options.save.empty() || !options.saveSharded.empty())
    saveCheckpoint(plan, rt, pipelined.get(), end.step, rank);
  if (end.signal)
    waitForEveryRank(rt.ctx, allAxes);
  // A stopped run ends with tessel-run's message instead of the summary.
  if (end.signal)
    return end;
  HeldMicrobatches held;
  if (pipelined)
    held = busiestHolding(rt.ctx, allAxes, pipelined->heldBytes(), rank);
  if (reporter)
    progress.finish(nowSeconds() - plan.startSeconds, desc.peakBytes,
                    desc.arenaBytes, describeRun(plan, globalFeeds.batchSize()),
                    commLine, /*perRank=*/desc.mesh.has_value(), held);
  return end;
}

RunEnd tessel::run::runLocalRanks(const RunPlan &plan) {
  int64_t worldSize = plan.model->desc.worldSize();
  checkRanksFitInMemory(worldSize, plan.model->desc.arenaBytes,
                        describeArena(plan.model->desc));
  if (worldSize == 1)
    return runRank(plan, 0, TESSEL_COMM_NONE, nullptr);
  LocalRanks ranks{int32_t(worldSize)}; // A mesh has < 2^31 ranks.
  RunEnd end;
  ranks.start([&](int32_t rank) {
    RunEnd mine = runRank(plan, rank, TESSEL_COMM_LOCAL, ranks.world());
    if (rank == 0)
      end = mine; // Every rank ends alike (the stop is agreed).
  });
  ranks.join();
  return end;
}
