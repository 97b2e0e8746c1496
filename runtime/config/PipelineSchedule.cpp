//===- PipelineSchedule.cpp - Pipeline schedules, their timeline, holdings -===//

#include "runtime/config/PipelineSchedule.h"

#include <algorithm>
#include <deque>
#include <limits>
#include <map>
#include <tuple>

using namespace tessel::pipeline;

namespace {

/// The most compute actions a schedule may hold: keeps every count in int
/// and a schedule's text printable.
constexpr long long kMaxComputeActions = 1 << 24;

/// Appends one rank's actions, with the sends and receives each compute
/// action implies (to the rank itself between two of its stages).
class RankProgram {
public:
  RankProgram(ScheduleKind kind, ScheduleShape shape, int rank,
              std::vector<Action> &actions)
      : ranks(shape.ranks), stages(shape.ranks * shape.virtualStages),
        rank(rank), placement(placementOf(kind)), actions(actions) {}

  /// Skips the actions of microbatches from `limit` on: a schedule built
  /// for more microbatches than the step has keeps its order for the rest.
  void keepMicrobatchesBelow(int limit) { microbatchLimit = limit; }

  void forward(int stage, int microbatch) {
    if (microbatch >= microbatchLimit)
      return;
    if (stage > 0)
      transfer(ActionKind::Recv, stage, microbatch, false, stage - 1);
    actions.push_back({ActionKind::Forward, stage, microbatch});
    if (stage < stages - 1)
      transfer(ActionKind::Send, stage, microbatch, false, stage + 1);
  }

  /// A full Backward, or the input part of a split one (`split`).
  void backward(int stage, int microbatch, bool split = false) {
    if (microbatch >= microbatchLimit)
      return;
    if (stage < stages - 1)
      transfer(ActionKind::Recv, stage, microbatch, true, stage + 1);
    actions.push_back({split ? ActionKind::BackwardInput : ActionKind::Backward,
                       stage, microbatch});
    if (stage > 0)
      transfer(ActionKind::Send, stage, microbatch, true, stage - 1);
  }

  void weight(int stage, int microbatch) {
    if (microbatch >= microbatchLimit)
      return;
    actions.push_back({ActionKind::BackwardWeight, stage, microbatch});
  }

private:
  void transfer(ActionKind kind, int stage, int microbatch, bool gradient,
                int otherStage) {
    actions.push_back({kind, stage, microbatch, gradient,
                       rankOfStage(otherStage, ranks, placement)});
  }

  int ranks, stages, rank;
  Placement placement;
  std::vector<Action> &actions;
  int microbatchLimit = std::numeric_limits<int>::max();
};

void buildGPipe(ScheduleShape shape, int rank, std::vector<Action> &actions) {
  RankProgram program(ScheduleKind::GPipe, shape, rank, actions);
  for (int m = 0; m < shape.microbatches; ++m)
    program.forward(rank, m);
  for (int m = 0; m < shape.microbatches; ++m)
    program.backward(rank, m);
}

/// 1F1B (PipeDream-flush), and ZB-H1 when `zeroBubble`: rank r runs
/// P - r - 1 warm-up forwards, then pairs of one forward and one backward,
/// then the remaining backwards. ZB-H1 splits each backward into I and W and
/// holds rank r's W's r backwards behind its I's: the first W's wait until
/// the cool-down, where they fill the time a rank would otherwise spend
/// waiting for gradients, while the forwards (and so the activations held)
/// stay where 1F1B has them.
void buildOneFOneB(ScheduleShape shape, int rank, bool zeroBubble,
                   std::vector<Action> &actions) {
  RankProgram program(zeroBubble ? ScheduleKind::ZeroBubbleH1
                                 : ScheduleKind::OneFOneB,
                      shape, rank, actions);
  const int microbatches = shape.microbatches;
  const int warmup = std::min(shape.ranks - rank - 1, microbatches);
  const int weightLag = zeroBubble ? std::min(rank, microbatches) : 0;
  int forwards = 0, backwards = 0, weights = 0;
  auto backwardAndWeight = [&] {
    program.backward(rank, backwards++, zeroBubble);
    if (zeroBubble && backwards - weights > weightLag)
      program.weight(rank, weights++);
  };
  while (forwards < warmup)
    program.forward(rank, forwards++);
  while (forwards < microbatches) {
    program.forward(rank, forwards++);
    backwardAndWeight();
  }
  while (backwards < microbatches)
    backwardAndWeight();
  while (zeroBubble && weights < microbatches)
    program.weight(rank, weights++);
}

/// Megatron's interleaved 1F1B (forward_backward_pipelining_with_interleaving):
/// the M * V (chunk, microbatch) forwards go in groups of P microbatches per
/// chunk, chunk 0 first; backwards likewise with the chunks reversed. Rank r
/// warms up with (P - r - 1) * 2 + (V - 1) * P forwards, then alternates one
/// forward and one backward, then runs the remaining backwards.
void buildInterleaved(ScheduleShape shape, int rank,
                      std::vector<Action> &actions) {
  RankProgram program(ScheduleKind::Interleaved, shape, rank, actions);
  const int P = shape.ranks, V = shape.virtualStages;
  const int total = shape.microbatches * V;
  const int warmup = std::min((P - rank - 1) * 2 + (V - 1) * P, total);
  auto stageOf = [&](int k, bool forward) {
    int chunk = (k % (P * V)) / P;
    return (forward ? chunk : V - 1 - chunk) * P + rank;
  };
  auto microbatchOf = [&](int k) { return (k / (P * V)) * P + k % P; };
  for (int k = 0; k < warmup; ++k)
    program.forward(stageOf(k, true), microbatchOf(k));
  for (int k = 0; k < total - warmup; ++k) {
    program.forward(stageOf(k + warmup, true), microbatchOf(k + warmup));
    program.backward(stageOf(k, false), microbatchOf(k));
  }
  for (int k = total - warmup; k < total; ++k)
    program.backward(stageOf(k, false), microbatchOf(k));
}

/// ZB-V (Qi et al., section 6): rank r holds stage `down` = r on the way
/// down and `up` = 2P - 1 - r on the way back. With F = I = W it has no
/// bubble once the pipe is full, and holds at most 2P chunk activations
/// (P of a 1F1B stage's). Rank r warms up with 2(P - r) - 1 forwards of
/// `down`, then r pairs (F up, F down), then P - r triples (F, I, W) of
/// `up`, the first turning at the bottom rank; the steady phase runs
/// F I W of `down` then of `up`; the cool-down drains the input parts,
/// then the weight parts. The pattern is laid out for at least 2P - 1
/// microbatches (as the warm-up needs) and keeps only the step's: every
/// wait of a kept action is on one of the same microbatch, so dropping
/// whole microbatches cannot make a rank wait forever.
void buildZeroBubbleV(ScheduleShape shape, int rank,
                      std::vector<Action> &actions) {
  RankProgram program(ScheduleKind::ZeroBubbleV, shape, rank, actions);
  const int P = shape.ranks;
  const int n = std::max(shape.microbatches, 2 * P - 1);
  program.keepMicrobatchesBelow(shape.microbatches);
  const int stage[2] = {rank, 2 * P - 1 - rank};
  int forwards[2] = {0, 0}, inputs[2] = {0, 0}, weights[2] = {0, 0};
  auto F = [&](int c) { program.forward(stage[c], forwards[c]++); };
  auto I = [&](int c) { program.backward(stage[c], inputs[c]++, true); };
  auto W = [&](int c) { program.weight(stage[c], weights[c]++); };
  const int down = 0, up = 1;
  for (int k = 0; k < 2 * (P - rank) - 1; ++k)
    F(down);
  for (int k = 0; k < rank; ++k) {
    F(up);
    F(down);
  }
  for (int k = 0; k < P - rank; ++k) {
    F(up);
    I(up);
    W(up);
  }
  while (forwards[up] < forwards[down] || forwards[down] < n) {
    if (forwards[down] < n)
      F(down);
    I(down);
    W(down);
    F(up);
    I(up);
    W(up);
  }
  for (int k = 0; k < rank; ++k) {
    I(down);
    I(up);
  }
  for (int k = 0; k < P - rank; ++k) {
    I(down);
    W(down);
  }
  while (weights[up] < inputs[up])
    W(up);
  while (weights[down] < inputs[down])
    W(down);
}

/// DualPipeV (DeepSeek-V3's DualPipe cut in half: deepseek-ai/DualPipe's
/// dualpipev.py): ZB-V's V, rank r holding `down` = r and `up` =
/// 2P - 1 - r, with DualPipe's order. Rank r warms up with 2(P - r - 1)
/// forwards of `down`, then r + 1 pairs (F down, F up), then P - r - 1
/// triples (I up, W, F up); the steady phase runs pairs of a forward of
/// one chunk and a backward of the other (F down + B up, F up + B down:
/// what DualPipe overlaps, so that one's communication hides behind the
/// other's compute; they run one after the other here); the cool-down
/// runs the rest of the backwards, the later half split (I now, W
/// later), and the queued weight parts fill the last slots, oldest first.
/// A backward that is not split runs as its I and its W at once. The
/// pattern is laid out for at least 2P microbatches (as DualPipe needs)
/// and keeps only the step's, as ZB-V does: every wait of a kept action
/// is on one of the same microbatch.
void buildDualPipeV(ScheduleShape shape, int rank,
                    std::vector<Action> &actions) {
  RankProgram program(ScheduleKind::DualPipeV, shape, rank, actions);
  const int P = shape.ranks;
  const int n = std::max(shape.microbatches, 2 * P);
  program.keepMicrobatchesBelow(shape.microbatches);
  const int stage[2] = {rank, 2 * P - 1 - rank};
  const int down = 0, up = 1;
  int forwards[2] = {0, 0}, backwards[2] = {0, 0};
  // The weight parts split off and not yet run, oldest first: (chunk,
  // microbatch).
  std::deque<std::pair<int, int>> pendingWeights;
  auto F = [&](int c) { program.forward(stage[c], forwards[c]++); };
  auto B = [&](int c, bool split) {
    int m = backwards[c]++;
    program.backward(stage[c], m, /*split=*/true);
    if (split)
      pendingWeights.push_back({c, m});
    else
      program.weight(stage[c], m);
  };
  auto W = [&] {
    auto [c, m] = pendingWeights.front();
    pendingWeights.pop_front();
    program.weight(stage[c], m);
  };
  for (int k = 0; k < 2 * (P - rank - 1); ++k)
    F(down);
  for (int k = 0; k < rank + 1; ++k) {
    F(down);
    F(up);
  }
  for (int k = 0; k < P - rank - 1; ++k) {
    B(up, /*split=*/true);
    W();
    F(up);
  }
  for (int k = 0; k < n - 2 * P + rank + 1; ++k) {
    F(down);
    B(up, /*split=*/false);
    F(up);
    B(down, /*split=*/false);
  }
  for (int k = 0; k < P - rank - 1; ++k) {
    B(up, /*split=*/false);
    F(up);
    B(down, /*split=*/false);
  }
  // Half of these split, from the middle on (an odd rank's from its up
  // backward, an even rank's from its down one).
  bool split = false;
  for (int k = 0; k < rank + 1; ++k) {
    if (k == (rank + 1) / 2 && rank % 2 == 1)
      split = true;
    B(up, split);
    if (k == (rank + 1) / 2 && rank % 2 == 0)
      split = true;
    B(down, split);
  }
  for (int k = 0; k < P - rank - 1; ++k) {
    W();
    B(down, /*split=*/true);
  }
  while (!pendingWeights.empty())
    W();
}

} // namespace

Placement tessel::pipeline::placementOf(ScheduleKind kind) {
  return kind == ScheduleKind::ZeroBubbleV || kind == ScheduleKind::DualPipeV
             ? Placement::VShape
             : Placement::Looped;
}

std::vector<int> tessel::pipeline::stagesOfRank(int rank, ScheduleShape shape,
                                                Placement placement) {
  std::vector<int> stages;
  for (int s = 0; s < shape.ranks * shape.virtualStages; ++s)
    if (rankOfStage(s, shape.ranks, placement) == rank)
      stages.push_back(s);
  return stages;
}

std::optional<ScheduleKind>
tessel::pipeline::parseScheduleKind(std::string_view text) {
  for (ScheduleKind kind :
       {ScheduleKind::GPipe, ScheduleKind::OneFOneB, ScheduleKind::Interleaved,
        ScheduleKind::ZeroBubbleH1, ScheduleKind::ZeroBubbleV,
        ScheduleKind::DualPipeV})
    if (text == scheduleName(kind))
      return kind;
  return std::nullopt;
}

const char *tessel::pipeline::scheduleName(ScheduleKind kind) {
  switch (kind) {
  case ScheduleKind::GPipe:
    return "gpipe";
  case ScheduleKind::OneFOneB:
    return "1f1b";
  case ScheduleKind::Interleaved:
    return "interleaved";
  case ScheduleKind::ZeroBubbleH1:
    return "zb-h1";
  case ScheduleKind::ZeroBubbleV:
    return "zb-v";
  case ScheduleKind::DualPipeV:
    return "dualpipev";
  }
  return "?";
}

std::string tessel::pipeline::checkShape(ScheduleKind kind,
                                         ScheduleShape shape) {
  const std::string name = scheduleName(kind);
  const int P = shape.ranks, M = shape.microbatches, V = shape.virtualStages;
  if (P < 1)
    return "a pipeline needs at least one rank (P = " + std::to_string(P) + ")";
  if (M < 1)
    return "a pipeline needs at least one microbatch (M = " +
           std::to_string(M) + ")";
  if (kind == ScheduleKind::Interleaved && V < 2)
    return "interleaved needs at least two virtual stages per rank (V = " +
           std::to_string(V) + ")";
  if (placementOf(kind) == Placement::VShape && V != 2)
    return name + " runs two stages per rank, down the ranks and back (V = " +
           std::to_string(V) + ")";
  if (kind != ScheduleKind::Interleaved &&
      placementOf(kind) != Placement::VShape && V != 1)
    return name + " runs one stage per rank (V = " + std::to_string(V) +
           "); only interleaved, zb-v and dualpipev run more";
  if (1LL * P * V * M > kMaxComputeActions)
    return "the pipeline is too large: P * V * M = " +
           std::to_string(1LL * P * V * M) + " forwards, more than 2^24";
  if ((kind == ScheduleKind::OneFOneB || kind == ScheduleKind::ZeroBubbleH1) &&
      M < P)
    return name + " needs at least as many microbatches as stages (M = " +
           std::to_string(M) + " < P = " + std::to_string(P) + ")";
  if (kind == ScheduleKind::Interleaved && M % P != 0)
    return "interleaved needs the microbatches to be a multiple of the "
           "ranks, as Megatron does (M = " +
           std::to_string(M) + ", P = " + std::to_string(P) + ")";
  return "";
}

Schedule tessel::pipeline::buildSchedule(ScheduleKind kind,
                                         ScheduleShape shape) {
  Schedule schedule{kind, shape, {}};
  schedule.ranks.resize(shape.ranks);
  for (int rank = 0; rank < shape.ranks; ++rank) {
    std::vector<Action> &actions = schedule.ranks[rank];
    switch (kind) {
    case ScheduleKind::GPipe:
      buildGPipe(shape, rank, actions);
      break;
    case ScheduleKind::OneFOneB:
      buildOneFOneB(shape, rank, /*zeroBubble=*/false, actions);
      break;
    case ScheduleKind::ZeroBubbleH1:
      buildOneFOneB(shape, rank, /*zeroBubble=*/true, actions);
      break;
    case ScheduleKind::Interleaved:
      buildInterleaved(shape, rank, actions);
      break;
    case ScheduleKind::ZeroBubbleV:
      buildZeroBubbleV(shape, rank, actions);
      break;
    case ScheduleKind::DualPipeV:
      buildDualPipeV(shape, rank, actions);
      break;
    }
  }
  return schedule;
}

//===----------------------------------------------------------------------===//
// The timeline
//===----------------------------------------------------------------------===//

namespace {

/// A message: sender, receiver, direction, producing stage, microbatch.
using MessageKey = std::tuple<int, int, bool, int, int>;

MessageKey sendKey(const Action &send, int rank) {
  return {rank, send.peer, send.gradient, send.stage, send.microbatch};
}

MessageKey recvKey(const Action &recv, int rank) {
  return {recv.peer, rank, recv.gradient,
          recv.gradient ? recv.stage + 1 : recv.stage - 1, recv.microbatch};
}

struct Posted {
  double time;
  int rank, index;
};

/// What one message key has seen: the sends made and not yet received, how
/// many were received, and every send of the lists in program order.
struct Channel {
  std::deque<Posted> posted;
  size_t received = 0;
  std::vector<int> sendIndices; // on the sender, in program order
  int waitingRank = -1;
};

std::string where(const Schedule &schedule, int rank, int index) {
  return "rank " + std::to_string(rank) + "'s action " + std::to_string(index) +
         " (" + formatAction(schedule.ranks[rank][index]) + ")";
}

/// Why the ranks that did not finish are stuck: a receive whose send no
/// list makes if there is one (the cause; the other waits follow from it),
/// else, from the lowest stuck rank, the chain of receives each waits in
/// and the send it waits for, back to a rank already named.
std::string describeStall(const Schedule &schedule,
                          const std::vector<size_t> &cursor,
                          std::map<MessageKey, Channel> &channels) {
  const int P = int(schedule.ranks.size());
  int rank = -1;
  for (int r = 0; r < P && rank < 0; ++r)
    if (cursor[r] < schedule.ranks[r].size()) {
      const Channel &channel =
          channels[recvKey(schedule.ranks[r][cursor[r]], r)];
      if (channel.received >= channel.sendIndices.size())
        rank = r;
    }
  for (int r = 0; r < P && rank < 0; ++r)
    if (cursor[r] < schedule.ranks[r].size())
      rank = r;
  std::vector<bool> named(schedule.ranks.size(), false);
  std::string text;
  for (;;) {
    named[rank] = true;
    const int index = int(cursor[rank]);
    Channel &channel = channels[recvKey(schedule.ranks[rank][index], rank)];
    text += (text.empty() ? "" : ", while ") + where(schedule, rank, index);
    if (channel.received >= channel.sendIndices.size())
      return text + " waits for a message that rank " +
             std::to_string(schedule.ranks[rank][index].peer) + " never sends";
    const int sender = schedule.ranks[rank][index].peer;
    const int sendIndex = channel.sendIndices[channel.received];
    text += " waits for " + where(schedule, sender, sendIndex);
    if (named[sender])
      return text + ": a cycle of waits";
    rank = sender;
  }
}

} // namespace

Timeline tessel::pipeline::simulate(const Schedule &schedule,
                                    const std::vector<StageTimes> &perStage,
                                    double sendTime, std::string *error) {
  auto fail = [&](std::string message) {
    if (error)
      *error = std::move(message);
    return Timeline{};
  };
  const int P = int(schedule.ranks.size());
  const int stages = schedule.shape.ranks * schedule.shape.virtualStages;
  if (P != schedule.shape.ranks)
    return fail("the schedule has " + std::to_string(P) + " rank lists for " +
                std::to_string(schedule.shape.ranks) + " ranks");
  if (!perStage.empty() && int(perStage.size()) != stages)
    return fail(std::to_string(perStage.size()) + " stage times for " +
                std::to_string(stages) + " virtual stages");

  // Every send of the lists, per message, in program order; and the
  // actions that name a stage or a rank that does not exist.
  std::map<MessageKey, Channel> channels;
  for (int rank = 0; rank < P; ++rank)
    for (size_t i = 0; i < schedule.ranks[rank].size(); ++i) {
      const Action &action = schedule.ranks[rank][i];
      bool comm =
          action.kind == ActionKind::Send || action.kind == ActionKind::Recv;
      if (action.stage < 0 || action.stage >= stages ||
          (comm && (action.peer < 0 || action.peer >= P)))
        return fail(where(schedule, rank, int(i)) +
                    " names a stage or a rank outside the pipeline");
      if (action.kind == ActionKind::Send)
        channels[sendKey(action, rank)].sendIndices.push_back(int(i));
    }

  Timeline timeline;
  timeline.busy.assign(P, 0);
  timeline.peakActivations.assign(P, 0);
  timeline.peakWeightPending.assign(P, 0);
  timeline.spans.resize(P);
  std::vector<size_t> cursor(P, 0);
  std::vector<double> clock(P, 0);
  std::vector<int> activations(P, 0), weightPending(P, 0);
  std::vector<int> ready;
  for (int rank = P - 1; rank >= 0; --rank)
    ready.push_back(rank);

  // Runs `rank` until it ends or waits in a receive.
  auto advance = [&](int rank) {
    const std::vector<Action> &actions = schedule.ranks[rank];
    for (; cursor[rank] < actions.size(); ++cursor[rank]) {
      const Action &action = actions[cursor[rank]];
      StageTimes times =
          perStage.empty() ? StageTimes{} : perStage[action.stage];
      double start = clock[rank], duration = 0;
      switch (action.kind) {
      case ActionKind::Forward:
        duration = times.forward;
        timeline.peakActivations[rank] =
            std::max(timeline.peakActivations[rank], ++activations[rank]);
        break;
      case ActionKind::Backward:
        duration = times.backwardInput + times.backwardWeight;
        --activations[rank];
        break;
      case ActionKind::BackwardInput:
        duration = times.backwardInput;
        --activations[rank];
        timeline.peakWeightPending[rank] =
            std::max(timeline.peakWeightPending[rank], ++weightPending[rank]);
        break;
      case ActionKind::BackwardWeight:
        duration = times.backwardWeight;
        --weightPending[rank];
        break;
      case ActionKind::Send: {
        Channel &channel = channels[sendKey(action, rank)];
        channel.posted.push_back({start, rank, int(cursor[rank])});
        if (channel.waitingRank >= 0) {
          ready.push_back(channel.waitingRank);
          channel.waitingRank = -1;
        }
        break;
      }
      case ActionKind::Recv: {
        Channel &channel = channels[recvKey(action, rank)];
        if (channel.posted.empty()) {
          channel.waitingRank = rank;
          return;
        }
        start = std::max(start, channel.posted.front().time +
                                    (action.peer == rank ? 0 : sendTime));
        channel.posted.pop_front();
        ++channel.received;
        break;
      }
      }
      clock[rank] = start + duration;
      timeline.busy[rank] += duration;
      timeline.spans[rank].emplace_back(start, clock[rank]);
    }
  };
  while (!ready.empty()) {
    int rank = ready.back();
    ready.pop_back();
    advance(rank);
  }

  for (int rank = 0; rank < P; ++rank)
    if (cursor[rank] < schedule.ranks[rank].size())
      return fail(describeStall(schedule, cursor, channels));
  for (auto &[key, channel] : channels)
    if (!channel.posted.empty()) {
      const Posted &send = channel.posted.front();
      return fail(where(schedule, send.rank, send.index) +
                  " is never received by rank " +
                  std::to_string(std::get<1>(key)));
    }

  double busyTotal = 0;
  for (int rank = 0; rank < P; ++rank) {
    timeline.makespan = std::max(timeline.makespan, clock[rank]);
    busyTotal += timeline.busy[rank];
  }
  // (P * T - busy) / (P * T) rather than 1 - busy / (P * T): with whole
  // times both terms are exact, so the fraction is the correctly rounded
  // rational, equal to the closed forms the tests compare it with.
  double capacity = P * timeline.makespan;
  timeline.bubbleFraction =
      capacity > 0 ? (capacity - busyTotal) / capacity : 0;
  if (error)
    error->clear();
  return timeline;
}

namespace {

/// Slots held while a rank runs its list as the launcher does, per stage
/// and summed over a group of its stages (sharing a pool), with the peaks
/// of both.
class HoldingTracker {
public:
  explicit HoldingTracker(int stages, std::vector<bool> inGroup = {})
      : held(stages), stagePeak(stages), inGroup(std::move(inGroup)) {}

  void add(int stage, int StageHolding::*kind, int delta) {
    held[stage].*kind += delta;
    stagePeak[stage].*kind =
        std::max(stagePeak[stage].*kind, held[stage].*kind);
    if (stage < int(inGroup.size()) && inGroup[stage]) {
      total.*kind += delta;
      groupPeak.*kind = std::max(groupPeak.*kind, total.*kind);
    }
  }

  std::vector<StageHolding> held, stagePeak;
  StageHolding total, groupPeak;

private:
  std::vector<bool> inGroup;
};

/// Runs rank `rank`'s list through `t`: a microbatch's input from its
/// Recv (a hand-over on the rank: from the previous stage's Send) to the
/// last part of its backward; the weight stash from I to W; kept values
/// from the Forward, in a slot only while another microbatch has the
/// stage's arena; a handed-over gradient from the next stage's Send to
/// this stage's Recv.
void trackHolding(const Schedule &schedule, int rank, HoldingTracker &t) {
  const int stages = int(t.held.size());
  // The microbatch whose kept activations are in the stage's arena (no
  // slot), or -1.
  std::vector<int> resident(stages, -1);
  for (const Action &a : schedule.ranks[rank]) {
    if (a.stage < 0 || a.stage >= stages)
      continue;
    int &inArena = resident[a.stage];
    const bool handOver =
        (a.kind == ActionKind::Send || a.kind == ActionKind::Recv) &&
        a.peer == rank;
    switch (a.kind) {
    case ActionKind::Send:
      if (handOver && a.gradient && a.stage > 0)
        t.add(a.stage - 1, &StageHolding::gradients, 1);
      else if (handOver && !a.gradient && a.stage + 1 < stages)
        t.add(a.stage + 1, &StageHolding::inputs, 1);
      break;
    case ActionKind::Recv:
      if (handOver && a.gradient)
        t.add(a.stage, &StageHolding::gradients, -1);
      else if (!handOver && !a.gradient)
        t.add(a.stage, &StageHolding::inputs, 1);
      break;
    case ActionKind::Forward:
      // The microbatch in the arena moves to a slot; the new one's stay.
      if (inArena >= 0)
        t.add(a.stage, &StageHolding::kept, 1);
      inArena = a.microbatch;
      break;
    case ActionKind::Backward:
    case ActionKind::BackwardInput:
    case ActionKind::BackwardWeight:
      // A part reads its microbatch's kept activations in the arena: the
      // one there moves to a slot (both slots held a moment), then this
      // one's slot empties into the arena.
      if (inArena != a.microbatch) {
        if (inArena >= 0)
          t.add(a.stage, &StageHolding::kept, 1);
        t.add(a.stage, &StageHolding::kept, -1);
        inArena = a.microbatch;
      }
      if (a.kind == ActionKind::BackwardInput) {
        t.add(a.stage, &StageHolding::weightStash, 1);
        break;
      }
      // The microbatch's last part: its input and kept values go.
      inArena = -1;
      if (a.kind == ActionKind::BackwardWeight)
        t.add(a.stage, &StageHolding::weightStash, -1);
      if (a.stage > 0)
        t.add(a.stage, &StageHolding::inputs, -1);
      break;
    }
  }
}

} // namespace

std::vector<tessel::pipeline::StageHolding>
tessel::pipeline::peakHolding(const Schedule &schedule) {
  const int stages = schedule.shape.ranks * schedule.shape.virtualStages;
  std::vector<StageHolding> peak(stages);
  for (int rank = 0; rank < int(schedule.ranks.size()); ++rank) {
    HoldingTracker t(stages);
    trackHolding(schedule, rank, t);
    for (int s = 0; s < stages; ++s)
      for (int StageHolding::*kind :
           {&StageHolding::inputs, &StageHolding::weightStash,
            &StageHolding::kept, &StageHolding::gradients})
        peak[s].*kind = std::max(peak[s].*kind, t.stagePeak[s].*kind);
  }
  return peak;
}

tessel::pipeline::StageHolding
tessel::pipeline::peakHoldingTogether(const Schedule &schedule,
                                      const std::vector<int> &group) {
  const int stages = schedule.shape.ranks * schedule.shape.virtualStages;
  std::vector<bool> inGroup(stages, false);
  for (int s : group)
    if (s >= 0 && s < stages)
      inGroup[s] = true;
  if (group.empty())
    return {};
  int rank = rankOfStage(group.front(), schedule.shape.ranks,
                         placementOf(schedule.kind));
  if (rank >= int(schedule.ranks.size()))
    return {};
  HoldingTracker t(stages, std::move(inGroup));
  trackHolding(schedule, rank, t);
  return t.groupPeak;
}
