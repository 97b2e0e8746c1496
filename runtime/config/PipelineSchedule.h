//===- PipelineSchedule.h - Pipeline schedules as data, and their timeline ===//
//
// A pipeline schedule is, per pp rank, the list of what that rank does in
// order: the forwards and backwards of (virtual stage, microbatch) pairs and
// the sends and receives between them. GPipe, 1F1B (PipeDream-flush),
// Megatron's interleaved 1F1B, ZB-H1 and ZB-V (Qi et al., "Zero Bubble
// Pipeline Parallelism") and DualPipeV (DeepSeek-V3's DualPipe on a V) are
// built here once, for the compiler (which lowers a list to code) and the
// launcher (which prints and checks it); `simulate` runs the lists against
// per-stage times to give the makespan, the bubble and the activations
// held. No LLVM.
//
// There are P * V virtual stages. Most schedules place stage v on rank
// v % P (Megatron's interleaving: rank r holds the chunks r, r + P, ...);
// ZB-V (the same paper, section 6) and DualPipeV place them in a V: rank r
// holds r and 2P - 1 - r, so the model runs down the ranks and back up,
// the first and last stage share rank 0 and the two middle ones rank P - 1.
//
// formatSchedule's notation, one line per rank ("rank 0: F0.0 s>1:F0.0 ..."):
//   F<s>.<m>   forward of stage s, microbatch m
//   B<s>.<m>   full backward (input and weight gradients together)
//   I<s>.<m>   backward, input-gradient part (ZB)
//   W<s>.<m>   backward, weight-gradient part (ZB)
//   s>p:F<s>.<m>  send to rank p the activation that F<s>.<m> produced
//   s>p:B<s>.<m>  send to rank p the input gradient that B/I<s>.<m> produced
//   r<p:F<s>.<m>  receive from rank p the activation that F<s>.<m> needs
//   r<p:B<s>.<m>  receive from rank p the gradient that B/I<s>.<m> needs
// (the stage is always the Action's: producer for a send, consumer for a
// receive). Two consecutive stages on one rank hand their tensors over in
// memory, written as a send and a receive with the rank itself as peer.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_CONFIG_PIPELINESCHEDULE_H
#define TESSEL_CONFIG_PIPELINESCHEDULE_H

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tessel::pipeline {

enum class ScheduleKind {
  GPipe,
  OneFOneB,
  Interleaved,
  ZeroBubbleH1,
  ZeroBubbleV,
  DualPipeV
};

/// "gpipe", "1f1b", "interleaved", "zb-h1", "zb-v", "dualpipev"; nullopt
/// for anything else.
std::optional<ScheduleKind> parseScheduleKind(std::string_view text);
/// The spelling parseScheduleKind takes.
const char *scheduleName(ScheduleKind kind);

enum class ActionKind {
  Forward,
  Backward, // input and weight gradients together
  BackwardInput,
  BackwardWeight,
  Send,
  Recv,
};

struct Action {
  ActionKind kind;
  /// The virtual stage (0 .. P*V-1) computing, or whose output (Send) or
  /// input (Recv) this is.
  int stage;
  int microbatch;
  /// Send/Recv: false = an activation going forward (stage -> stage + 1),
  /// true = an input gradient going backward (stage -> stage - 1).
  bool gradient = false;
  /// Send/Recv: the pp rank on the other side.
  int peer = -1;

  bool operator==(const Action &other) const {
    return kind == other.kind && stage == other.stage &&
           microbatch == other.microbatch && gradient == other.gradient &&
           peer == other.peer;
  }
  bool operator!=(const Action &other) const { return !(*this == other); }
};

struct ScheduleShape {
  int ranks;             // P
  int microbatches;      // M
  int virtualStages = 1; // V: stages per rank
};

struct Schedule {
  ScheduleKind kind;
  ScheduleShape shape;
  /// Per rank, its actions in execution order.
  std::vector<std::vector<Action>> ranks;
};

/// The stage on the other side of a Send's or Recv's boundary: an
/// activation goes from stage s to s + 1, a gradient from s to s - 1 (may
/// be outside the pipeline for a malformed action).
inline int otherStage(const Action &a) {
  bool isSend = a.kind == ActionKind::Send;
  return a.gradient == isSend ? a.stage - 1 : a.stage + 1;
}

/// How a schedule's virtual stages sit on its ranks.
enum class Placement {
  Looped, // stage v on rank v % P
  VShape, // chunk c runs down the ranks when c is even, back up when odd
};
Placement placementOf(ScheduleKind kind);

/// The rank that holds virtual stage `stage` of a pipeline over `ranks`.
inline int rankOfStage(int stage, int ranks, Placement placement) {
  int chunk = stage / ranks, position = stage % ranks;
  return placement == Placement::VShape && chunk % 2 == 1 ? ranks - 1 - position
                                                          : position;
}

/// The virtual stages rank `rank` holds, ascending.
std::vector<int> stagesOfRank(int rank, ScheduleShape shape,
                              Placement placement);

/// Whether `kind` splits each backward into its input part (I) and its
/// weight part (W): the zero-bubble schedules.
inline bool splitsBackward(ScheduleKind kind) {
  return kind == ScheduleKind::ZeroBubbleH1 ||
         kind == ScheduleKind::ZeroBubbleV || kind == ScheduleKind::DualPipeV;
}

/// The tag of the message carrying microbatch `microbatch`'s activation
/// (`gradient` false) or input gradient (true) that stage `producerStage`
/// produced, in a pipeline of `stages` virtual stages. The sender and the
/// receiver compute it alike: a Send of stage s produces from s; a Recv of
/// an activation comes from s - 1, of a gradient from s + 1. Non-negative;
/// the compiler's communication check and the launcher use this one
/// formula (negative tags are the tied parameters' gradient exchange).
/// Stage `stage`'s name in a pipeline's shared object for its entry
/// `symbol` ("tessel_forward" -> "tessel_s1_forward"): tessel-link-stages
/// renames, tessel-run resolves.
inline std::string stageEntrySymbol(int64_t stage, std::string_view symbol) {
  constexpr std::string_view prefix = "tessel_";
  if (symbol.substr(0, prefix.size()) == prefix)
    symbol.remove_prefix(prefix.size());
  return "tessel_s" + std::to_string(stage) + "_" + std::string(symbol);
}

inline int64_t messageTag(int stages, int producerStage, int microbatch,
                          bool gradient) {
  return (int64_t(microbatch) * stages + producerStage) * 2 +
         (gradient ? 1 : 0);
}

/// "" when `kind` can be built for `shape`, else one sentence saying why
/// not (1F1B and ZB-H1 need M >= P; interleaved needs V >= 2 and M a
/// multiple of P, as Megatron does; ZB-V and DualPipeV need V = 2; the
/// others V = 1).
std::string checkShape(ScheduleKind kind, ScheduleShape shape);

/// The schedule's per-rank lists. Precondition: checkShape(kind, shape) is
/// "". Sends are buffered, receives block; a receive sits right before the
/// action that needs it, a send right after the action that produced it.
Schedule buildSchedule(ScheduleKind kind, ScheduleShape shape);

/// The time of each part of one virtual stage; a full Backward takes
/// backwardInput + backwardWeight.
struct StageTimes {
  double forward = 1, backwardInput = 1, backwardWeight = 1;
};

struct Timeline {
  double makespan = 0;       // time at which the last action ends
  std::vector<double> busy;  // per rank: the sum of its compute time
  double bubbleFraction = 0; // 1 - sum(busy) / (P * makespan)
  /// Per rank: the most (stage, microbatch) pairs whose Forward has run
  /// and whose Backward or BackwardInput has not yet.
  std::vector<int> peakActivations;
  /// Per rank: the most pairs whose BackwardInput has run and whose
  /// BackwardWeight has not yet (0 without split backwards).
  std::vector<int> peakWeightPending;
  /// Per rank, per action: start and end. Sends and receives are
  /// zero-length, at the time they complete (a receive: when both the rank
  /// reached it and the message arrived).
  std::vector<std::vector<std::pair<double, double>>> spans;
};

/// Runs every rank's list in order: a compute action starts when the
/// rank's previous action ended; a Recv completes when the matching Send
/// (same message: sender, receiver, direction, producing stage,
/// microbatch) has happened plus `sendTime` (nothing for a hand-over on
/// one rank); Sends never wait.
/// `perVirtualStage` holds P*V entries, or none for unit times. When the
/// lists cannot run to their end (a Recv nobody sends, a cycle of waits, a
/// Send nobody receives) returns an empty Timeline and sets `*error` (if
/// given) to a sentence naming the ranks and action indices; else clears
/// it.
Timeline simulate(const Schedule &schedule,
                  const std::vector<StageTimes> &perVirtualStage,
                  double sendTime, std::string *error);

/// One action in formatSchedule's notation ("F3.1", "s>1:F3.1").
std::string formatAction(const Action &action);
/// The action `text` writes in formatAction's notation (what a model's own
/// schedule, nn.pipeline's `actions`, is written in): parseAction(
/// formatAction(a)) == a. Stages, microbatches and peers are decimal
/// numbers below 2^31 with no sign; nothing may surround the action. On
/// failure returns nullopt and sets `error` to a sentence naming the text.
std::optional<Action> parseAction(std::string_view text, std::string &error);
/// One line per rank: "rank 0: F0.0 s>1:F0.0 F0.1 ...\n".
std::string formatSchedule(const Schedule &schedule);
/// {"schedule":"1f1b","ranks":P,"microbatches":M,"virtual_stages":V,
///  "actions":[[{"kind":"forward","stage":0,"microbatch":0},
///  {"kind":"send","stage":0,"microbatch":0,"gradient":false,"peer":1},...],
///  ...]} with kinds forward, backward, backward_input, backward_weight,
/// send, recv.
std::string scheduleJson(const Schedule &schedule);

/// What a virtual stage keeps between its actions, at most, running
/// `schedule` as the launcher does: a microbatch's input activations from
/// their Recv (handed over on one rank: from the previous stage's Send)
/// until its Backward (or, split, its BackwardWeight), the weight part's
/// stash from BackwardInput until BackwardWeight, the forward's kept
/// activations (a stage with a forward_keep entry) from its Forward until
/// its Backward or BackwardWeight: one microbatch's in the stage's arena,
/// where forward_keep wrote them or a backward part reads them, the
/// others' in slots (`kept` counts the slots); and the output gradients
/// the next stage on the same rank handed over, from its Send to this
/// stage's Recv.
struct StageHolding {
  int inputs = 0;
  int weightStash = 0;
  int kept = 0;
  int gradients = 0;
};
/// Per stage, the most of each it holds at once.
std::vector<StageHolding> peakHolding(const Schedule &schedule);
/// The most of each that `stages`, all on one rank, hold at once together:
/// the slots of one pool they share (the launcher pools the slots of a
/// rank's stages whose slots are equal in size). For one stage, its
/// peakHolding.
StageHolding peakHoldingTogether(const Schedule &schedule,
                                 const std::vector<int> &stages);

} // namespace tessel::pipeline

#endif // TESSEL_CONFIG_PIPELINESCHEDULE_H
