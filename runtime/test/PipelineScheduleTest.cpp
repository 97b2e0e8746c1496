//===- PipelineScheduleTest.cpp - Pipeline schedules and their timeline ---===//

#include "runtime/config/PipelineSchedule.h"

#include <gtest/gtest.h>

#include <map>
#include <tuple>

using namespace tessel::pipeline;

namespace {

struct Case {
  ScheduleKind kind;
  int P, M, V;
};

Schedule build(ScheduleKind kind, int P, int M, int V = 1) {
  EXPECT_EQ(checkShape(kind, {P, M, V}), "")
      << scheduleName(kind) << " P=" << P << " M=" << M << " V=" << V;
  return buildSchedule(kind, {P, M, V});
}

/// The timeline with F = B = W = 1 on every stage and free sends.
Timeline unitTimeline(const Schedule &schedule) {
  std::string error = "unset";
  Timeline timeline = simulate(schedule, {}, 0, &error);
  EXPECT_EQ(error, "") << formatSchedule(schedule);
  return timeline;
}

/// A spread of valid shapes for every kind.
std::vector<Case> allCases() {
  std::vector<Case> cases;
  for (int P : {1, 2, 3, 4, 8})
    for (int M : {1, 2, 3, 4, 5, 8, 12, 16}) {
      cases.push_back({ScheduleKind::GPipe, P, M, 1});
      if (M >= P) {
        cases.push_back({ScheduleKind::OneFOneB, P, M, 1});
        cases.push_back({ScheduleKind::ZeroBubbleH1, P, M, 1});
      }
      if (M % P == 0)
        for (int V : {2, 3, 4})
          cases.push_back({ScheduleKind::Interleaved, P, M, V});
      cases.push_back({ScheduleKind::ZeroBubbleV, P, M, 2});
      cases.push_back({ScheduleKind::DualPipeV, P, M, 2});
    }
  return cases;
}

std::string caseName(const Case &c) {
  return std::string(scheduleName(c.kind)) + " P=" + std::to_string(c.P) +
         " M=" + std::to_string(c.M) + " V=" + std::to_string(c.V);
}

// Tests that the spellings round-trip and nothing else parses.
TEST(PipelineScheduleTest, ParsesAndNamesKinds) {
  for (ScheduleKind kind :
       {ScheduleKind::GPipe, ScheduleKind::OneFOneB, ScheduleKind::Interleaved,
        ScheduleKind::ZeroBubbleH1, ScheduleKind::ZeroBubbleV,
        ScheduleKind::DualPipeV})
    EXPECT_EQ(parseScheduleKind(scheduleName(kind)), kind);
  EXPECT_EQ(parseScheduleKind("dualpipev"), ScheduleKind::DualPipeV);
  EXPECT_EQ(parseScheduleKind("zb-h1"), ScheduleKind::ZeroBubbleH1);
  EXPECT_EQ(parseScheduleKind("zb-v"), ScheduleKind::ZeroBubbleV);
  EXPECT_FALSE(parseScheduleKind("1F1B"));
  EXPECT_FALSE(parseScheduleKind("zb"));
  EXPECT_FALSE(parseScheduleKind(""));
}

// Tests that checkShape refuses what a schedule cannot run, in one sentence.
TEST(PipelineScheduleTest, CheckShapeRefusals) {
  EXPECT_EQ(checkShape(ScheduleKind::OneFOneB, {4, 2}),
            "1f1b needs at least as many microbatches as stages (M = 2 < "
            "P = 4)");
  EXPECT_EQ(checkShape(ScheduleKind::ZeroBubbleH1, {4, 3}),
            "zb-h1 needs at least as many microbatches as stages (M = 3 < "
            "P = 4)");
  EXPECT_EQ(checkShape(ScheduleKind::Interleaved, {4, 8, 1}),
            "interleaved needs at least two virtual stages per rank (V = 1)");
  EXPECT_EQ(checkShape(ScheduleKind::Interleaved, {4, 6, 2}),
            "interleaved needs the microbatches to be a multiple of the "
            "ranks, as Megatron does (M = 6, P = 4)");
  EXPECT_EQ(checkShape(ScheduleKind::GPipe, {4, 8, 2}),
            "gpipe runs one stage per rank (V = 2); only interleaved, zb-v and "
            "dualpipev run more");
  EXPECT_EQ(checkShape(ScheduleKind::ZeroBubbleV, {4, 8, 1}),
            "zb-v runs two stages per rank, down the ranks and back (V = 1)");
  EXPECT_EQ(checkShape(ScheduleKind::ZeroBubbleV, {4, 8, 3}),
            "zb-v runs two stages per rank, down the ranks and back (V = 3)");
  EXPECT_EQ(checkShape(ScheduleKind::DualPipeV, {4, 8, 1}),
            "dualpipev runs two stages per rank, down the ranks and back (V = "
            "1)");
  // ZB-V runs any number of microbatches (its pattern, laid out for
  // 2P - 1, keeps the step's).
  EXPECT_EQ(checkShape(ScheduleKind::ZeroBubbleV, {4, 1, 2}), "");
  EXPECT_EQ(checkShape(ScheduleKind::DualPipeV, {4, 1, 2}), "");
  EXPECT_EQ(checkShape(ScheduleKind::GPipe, {0, 8}),
            "a pipeline needs at least one rank (P = 0)");
  EXPECT_EQ(checkShape(ScheduleKind::OneFOneB, {2, 0}),
            "a pipeline needs at least one microbatch (M = 0)");
  EXPECT_NE(checkShape(ScheduleKind::GPipe, {1 << 12, 1 << 13}), "");
  EXPECT_EQ(checkShape(ScheduleKind::GPipe, {4, 2}), "");
  EXPECT_EQ(checkShape(ScheduleKind::OneFOneB, {4, 4}), "");
  EXPECT_EQ(checkShape(ScheduleKind::Interleaved, {4, 8, 2}), "");
  EXPECT_EQ(checkShape(ScheduleKind::Interleaved, {1, 3, 2}), "");
}

// Tests that every (stage, microbatch) has one forward and one backward (or
// one I and one W, in that order) on the rank that holds the stage, with
// the forward first.
TEST(PipelineScheduleTest, EveryPairComputedOnceOnItsRank) {
  for (const Case &c : allCases()) {
    SCOPED_TRACE(caseName(c));
    Schedule schedule = build(c.kind, c.P, c.M, c.V);
    ASSERT_EQ(int(schedule.ranks.size()), c.P);
    const bool split = splitsBackward(c.kind);
    const Placement placement = placementOf(c.kind);
    // Per pair: the position (rank, index) of each compute kind.
    std::map<std::pair<int, int>, std::map<ActionKind, std::vector<int>>> seen;
    for (int rank = 0; rank < c.P; ++rank)
      for (size_t i = 0; i < schedule.ranks[rank].size(); ++i) {
        const Action &a = schedule.ranks[rank][i];
        if (a.kind == ActionKind::Send || a.kind == ActionKind::Recv)
          continue;
        EXPECT_EQ(rankOfStage(a.stage, c.P, placement), rank)
            << formatAction(a);
        seen[{a.stage, a.microbatch}][a.kind].push_back(int(i));
      }
    ASSERT_EQ(int(seen.size()), c.P * c.V * c.M);
    for (auto &[pair, kinds] : seen) {
      SCOPED_TRACE("stage " + std::to_string(pair.first) + " microbatch " +
                   std::to_string(pair.second));
      ASSERT_EQ(kinds[ActionKind::Forward].size(), 1u);
      if (split) {
        ASSERT_EQ(kinds[ActionKind::BackwardInput].size(), 1u);
        ASSERT_EQ(kinds[ActionKind::BackwardWeight].size(), 1u);
        EXPECT_EQ(kinds.count(ActionKind::Backward), 0u);
        EXPECT_LT(kinds[ActionKind::Forward][0],
                  kinds[ActionKind::BackwardInput][0]);
        EXPECT_LT(kinds[ActionKind::BackwardInput][0],
                  kinds[ActionKind::BackwardWeight][0]);
      } else {
        ASSERT_EQ(kinds[ActionKind::Backward].size(), 1u);
        EXPECT_EQ(kinds.count(ActionKind::BackwardInput), 0u);
        EXPECT_EQ(kinds.count(ActionKind::BackwardWeight), 0u);
        EXPECT_LT(kinds[ActionKind::Forward][0],
                  kinds[ActionKind::Backward][0]);
      }
    }
  }
}

// Tests that sends and receives pair one to one, each receive right before
// the compute action that needs it and each send right after the one that
// produced it; two stages on one rank hand over to the rank itself.
TEST(PipelineScheduleTest, SendsAndRecvsMatchOneToOne) {
  for (const Case &c : allCases()) {
    SCOPED_TRACE(caseName(c));
    Schedule schedule = build(c.kind, c.P, c.M, c.V);
    const int stages = c.P * c.V;
    const Placement placement = placementOf(c.kind);
    // (sender, receiver, gradient, producing stage, microbatch) -> count.
    using Message = std::tuple<int, int, bool, int, int>;
    std::map<Message, int> sent, received;
    for (int rank = 0; rank < c.P; ++rank) {
      const std::vector<Action> &actions = schedule.ranks[rank];
      for (size_t i = 0; i < actions.size(); ++i) {
        const Action &a = actions[i];
        if (a.kind == ActionKind::Send) {
          ASSERT_GT(i, 0u);
          const Action &producer = actions[i - 1];
          EXPECT_EQ(producer.stage, a.stage);
          EXPECT_EQ(producer.microbatch, a.microbatch);
          EXPECT_EQ(producer.kind, a.gradient ? (splitsBackward(c.kind)
                                                     ? ActionKind::BackwardInput
                                                     : ActionKind::Backward)
                                              : ActionKind::Forward);
          int to = a.gradient ? a.stage - 1 : a.stage + 1;
          ASSERT_TRUE(to >= 0 && to < stages) << formatAction(a);
          EXPECT_EQ(a.peer, rankOfStage(to, c.P, placement));
          ++sent[{rank, a.peer, a.gradient, a.stage, a.microbatch}];
        } else if (a.kind == ActionKind::Recv) {
          ASSERT_LT(i + 1, actions.size());
          const Action &consumer = actions[i + 1];
          EXPECT_EQ(consumer.stage, a.stage);
          EXPECT_EQ(consumer.microbatch, a.microbatch);
          EXPECT_NE(consumer.kind, ActionKind::Send);
          EXPECT_NE(consumer.kind, ActionKind::Recv);
          EXPECT_EQ(consumer.kind == ActionKind::Forward, !a.gradient);
          int from = a.gradient ? a.stage + 1 : a.stage - 1;
          EXPECT_EQ(a.peer, rankOfStage(from, c.P, placement));
          ++received[{a.peer, rank, a.gradient, from, a.microbatch}];
        }
      }
    }
    EXPECT_EQ(sent, received);
    for (auto &[message, count] : sent)
      EXPECT_EQ(count, 1);
    // Every stage boundary crossed both ways by every microbatch.
    EXPECT_EQ(sent.size(), size_t(stages - 1) * c.M * 2);
  }
}

// Tests that GPipe and 1F1B leave the bubble (P-1)/(M+P-1) with F = 1 and a
// full backward of 2, and take 3 (M + P - 1) units.
TEST(PipelineScheduleTest, GPipeAndOneFOneBBubble) {
  for (ScheduleKind kind : {ScheduleKind::GPipe, ScheduleKind::OneFOneB})
    for (auto [P, M] : std::vector<std::pair<int, int>>{
             {2, 4}, {4, 8}, {4, 4}, {3, 7}, {8, 16}, {1, 4}}) {
      SCOPED_TRACE(std::string(scheduleName(kind)) + " P=" + std::to_string(P) +
                   " M=" + std::to_string(M));
      Timeline timeline = unitTimeline(build(kind, P, M));
      EXPECT_EQ(timeline.makespan, 3.0 * (M + P - 1));
      EXPECT_EQ(timeline.bubbleFraction, double(P - 1) / (M + P - 1));
      for (double busy : timeline.busy)
        EXPECT_EQ(busy, 3.0 * M);
    }
  // GPipe also runs with fewer microbatches than stages.
  EXPECT_EQ(unitTimeline(build(ScheduleKind::GPipe, 4, 2)).bubbleFraction,
            3.0 / 5);
}

// Tests that interleaving V chunks divides 1F1B's bubble time by V:
// (P-1)/(V M + P-1).
TEST(PipelineScheduleTest, InterleavedBubble) {
  for (auto [P, M, V] : std::vector<std::tuple<int, int, int>>{{2, 4, 2},
                                                               {4, 8, 2},
                                                               {4, 4, 2},
                                                               {4, 8, 4},
                                                               {2, 2, 3},
                                                               {8, 16, 2},
                                                               {1, 3, 2}}) {
    SCOPED_TRACE("P=" + std::to_string(P) + " M=" + std::to_string(M) +
                 " V=" + std::to_string(V));
    Timeline timeline = unitTimeline(build(ScheduleKind::Interleaved, P, M, V));
    EXPECT_EQ(timeline.makespan, 3.0 * (V * M + P - 1));
    EXPECT_EQ(timeline.bubbleFraction, double(P - 1) / (V * M + P - 1));
  }
}

// Tests that ZB-H1 with F = B = W leaves a bubble of (P-1) F, a third of
// 1F1B's: (P-1)/(3M+P-1).
TEST(PipelineScheduleTest, ZeroBubbleH1Bubble) {
  for (auto [P, M] : std::vector<std::pair<int, int>>{
           {2, 4}, {4, 8}, {4, 4}, {4, 5}, {3, 7}, {8, 8}, {8, 24}, {1, 3}}) {
    SCOPED_TRACE("P=" + std::to_string(P) + " M=" + std::to_string(M));
    Timeline timeline = unitTimeline(build(ScheduleKind::ZeroBubbleH1, P, M));
    EXPECT_EQ(timeline.makespan, 3.0 * M + P - 1);
    EXPECT_EQ(timeline.bubbleFraction, double(P - 1) / (3 * M + P - 1));
  }
}

/// The unit timeline of a V schedule (ZB-V, DualPipeV) over its pipe's
/// 2P stages, checked for what both give once the pipe is full: makespan
/// 6M + P - 1 (only the last rank's staggered start) and only the turn's
/// stage (P - 1) waiting for a gradient handed over on its own rank.
Timeline vTimeline(const Schedule &schedule) {
  const int P = schedule.shape.ranks, M = schedule.shape.microbatches;
  Timeline timeline = unitTimeline(schedule);
  EXPECT_EQ(timeline.makespan, 6.0 * M + P - 1);
  EXPECT_EQ(timeline.bubbleFraction, double(P - 1) / (6 * M + P - 1));
  std::vector<StageHolding> holding = peakHolding(schedule);
  for (int r = 0; r < P; ++r) {
    EXPECT_EQ(holding[r].gradients, r == P - 1 ? 1 : 0);
    EXPECT_EQ(holding[2 * P - 1 - r].gradients, 0);
  }
  return timeline;
}

// Tests ZB-V with F = I = W = 1 a chunk (half a 1F1B stage): once the
// pipe fills (M >= 2P - 1) only the last rank's staggered start is left,
// makespan 6M + P - 1, half of ZB-H1's bubble on the same stages (whose
// F = I = W = 2); every rank holds at most 2P chunks' activations, what
// 1F1B's first rank holds of whole stages, and only the turn's stage
// (P - 1) waits for a gradient handed over on its own rank.
TEST(PipelineScheduleTest, ZeroBubbleVBubbleAndMemory) {
  for (auto [P, M] : std::vector<std::pair<int, int>>{
           {2, 3}, {2, 8}, {3, 5}, {4, 7}, {4, 8}, {4, 24}, {8, 15}, {8, 32}}) {
    SCOPED_TRACE("P=" + std::to_string(P) + " M=" + std::to_string(M));
    Schedule schedule = build(ScheduleKind::ZeroBubbleV, P, M, 2);
    Timeline timeline = vTimeline(schedule);
    std::string error;
    Timeline zbH1 = simulate(build(ScheduleKind::ZeroBubbleH1, P, M),
                             std::vector<StageTimes>(P, {2, 2, 2}), 0, &error);
    ASSERT_EQ(error, "");
    EXPECT_EQ(zbH1.makespan - 6.0 * M, 2 * (timeline.makespan - 6.0 * M));
    for (int r = 0; r < P; ++r)
      EXPECT_EQ(timeline.peakActivations[r], 2 * P);
  }
  // Fewer microbatches than the pattern's 2P - 1 still run, each one
  // through all 2P stages.
  for (int M : {1, 2, 5})
    EXPECT_GT(unitTimeline(build(ScheduleKind::ZeroBubbleV, 4, M, 2)).makespan,
              6.0 * M);
}

// Tests DualPipeV with F = I = W = 1: from 2P microbatches on, ZB-V's
// makespan 6M + P - 1 (DualPipe's overlap of a forward with another
// microbatch's backward hides communication, which is free here); one more
// chunk activation a rank (2P + 1), but rank r's weight parts wait at most
// r + 1 deep against ZB-V's 2r + 1, so the zero-bubble stash is bounded by
// P, not 2P - 1. Only the turn (rank P - 1) hands a gradient over on its
// own rank.
TEST(PipelineScheduleTest, DualPipeVBubbleAndMemory) {
  for (auto [P, M] : std::vector<std::pair<int, int>>{
           {2, 4}, {2, 9}, {3, 6}, {4, 8}, {4, 9}, {4, 24}, {8, 16}, {8, 32}}) {
    SCOPED_TRACE("P=" + std::to_string(P) + " M=" + std::to_string(M));
    Timeline timeline = vTimeline(build(ScheduleKind::DualPipeV, P, M, 2));
    Timeline zbV = unitTimeline(build(ScheduleKind::ZeroBubbleV, P, M, 2));
    for (int r = 0; r < P; ++r) {
      EXPECT_EQ(timeline.peakActivations[r], 2 * P + 1);
      EXPECT_EQ(timeline.peakWeightPending[r], r + 1);
      EXPECT_EQ(zbV.peakWeightPending[r], 2 * r + 1);
    }
  }
  // Fewer microbatches than the pattern's 2P still run, each one through
  // all 2P stages.
  for (int M : {1, 3, 7})
    EXPECT_GT(unitTimeline(build(ScheduleKind::DualPipeV, 4, M, 2)).makespan,
              6.0 * M);
}

// Tests the activations each rank holds at most: M for GPipe, P - r for
// 1F1B and ZB-H1 (whose W's wait at most r + 1 deep), and Megatron's
// warm-up plus one for interleaved.
TEST(PipelineScheduleTest, PeakActivations) {
  for (auto [P, M] : std::vector<std::pair<int, int>>{{2, 4}, {4, 8}, {4, 4}}) {
    SCOPED_TRACE("P=" + std::to_string(P) + " M=" + std::to_string(M));
    Timeline gpipe = unitTimeline(build(ScheduleKind::GPipe, P, M));
    Timeline oneF = unitTimeline(build(ScheduleKind::OneFOneB, P, M));
    Timeline zb = unitTimeline(build(ScheduleKind::ZeroBubbleH1, P, M));
    Timeline inter = unitTimeline(build(ScheduleKind::Interleaved, P, M, 2));
    for (int r = 0; r < P; ++r) {
      EXPECT_EQ(gpipe.peakActivations[r], M);
      EXPECT_EQ(oneF.peakActivations[r], P - r);
      EXPECT_EQ(zb.peakActivations[r], P - r);
      EXPECT_EQ(gpipe.peakWeightPending[r], 0);
      EXPECT_EQ(oneF.peakWeightPending[r], 0);
      EXPECT_EQ(zb.peakWeightPending[r], r + 1);
      EXPECT_EQ(inter.peakActivations[r],
                std::min((P - r - 1) * 2 + P + 1, 2 * M));
    }
  }
}

// Tests the slots the launcher keeps per stage, which the report counts:
// a microbatch's kept activations stay in the arena from its Forward until
// another microbatch needs the place, then wait in a slot until the last
// part of its backward. GPipe's first Backward needs the first
// microbatch's while the last one's are in the arena: M slots. 1F1B's
// stage s holds P - s, but the last stage runs each Backward right after
// its Forward: no slot. Inputs wait from their Recv to the last part of
// the backward, on every stage but the first; the zero-bubble stash from I
// to W, s + 1 deep on stage s.
TEST(PipelineScheduleTest, PeakHolding) {
  for (auto [P, M] : std::vector<std::pair<int, int>>{{2, 4}, {4, 8}, {4, 4}}) {
    SCOPED_TRACE("P=" + std::to_string(P) + " M=" + std::to_string(M));
    std::vector<StageHolding> gpipe =
        peakHolding(build(ScheduleKind::GPipe, P, M));
    std::vector<StageHolding> oneF =
        peakHolding(build(ScheduleKind::OneFOneB, P, M));
    std::vector<StageHolding> zb =
        peakHolding(build(ScheduleKind::ZeroBubbleH1, P, M));
    ASSERT_EQ(int(gpipe.size()), P);
    for (int s = 0; s < P; ++s) {
      EXPECT_EQ(gpipe[s].kept, M);
      EXPECT_EQ(gpipe[s].inputs, s > 0 ? M : 0);
      EXPECT_EQ(oneF[s].kept, s + 1 < P ? P - s : 0);
      EXPECT_EQ(oneF[s].inputs, s > 0 ? P - s : 0);
      EXPECT_EQ(oneF[s].weightStash, 0);
      EXPECT_EQ(zb[s].weightStash, s + 1);
      // W keeps both a microbatch's input and what its forward kept.
      EXPECT_EQ(zb[s].inputs, s > 0 ? zb[s].kept : 0);
      EXPECT_GE(zb[s].kept, std::max(P - s, zb[s].weightStash));
    }
  }
}

// Tests the holding of stages that share a pool: one stage alone holds
// its peakHolding; a rank's stages together at least the most any of them
// holds and at most their sum, strictly less where their peaks fall at
// different times (interleaved's and ZB-V's kept activations).
TEST(PipelineScheduleTest, PeakHoldingTogether) {
  using Kind = int StageHolding::*;
  const Kind kinds[] = {&StageHolding::inputs, &StageHolding::kept,
                        &StageHolding::weightStash, &StageHolding::gradients};
  for (const Case &c : allCases()) {
    SCOPED_TRACE(caseName(c));
    Schedule schedule = build(c.kind, c.P, c.M, c.V);
    std::vector<StageHolding> apart = peakHolding(schedule);
    for (int s = 0; s < c.P * c.V; ++s)
      for (Kind kind : kinds)
        EXPECT_EQ(peakHoldingTogether(schedule, {s}).*kind, apart[s].*kind);
    for (int r = 0; r < c.P; ++r) {
      std::vector<int> own =
          stagesOfRank(r, {c.P, c.M, c.V}, placementOf(c.kind));
      StageHolding together = peakHoldingTogether(schedule, own);
      for (Kind kind : kinds) {
        int most = 0, sum = 0;
        for (int s : own) {
          most = std::max(most, apart[s].*kind);
          sum += apart[s].*kind;
        }
        EXPECT_GE(together.*kind, most);
        EXPECT_LE(together.*kind, sum);
      }
    }
  }
  Schedule interleaved = build(ScheduleKind::Interleaved, 4, 8, 2);
  std::vector<StageHolding> apart = peakHolding(interleaved);
  EXPECT_LT(peakHoldingTogether(interleaved, {0, 4}).kept,
            apart[0].kept + apart[4].kept);
  EXPECT_EQ(peakHoldingTogether(interleaved, {}).kept, 0);
}

// Tests the text and the JSON of small schedules, character for character.
TEST(PipelineScheduleTest, FormatsTextAndJson) {
  EXPECT_EQ(formatSchedule(build(ScheduleKind::OneFOneB, 2, 2)),
            "rank 0: F0.0 s>1:F0.0 F0.1 s>1:F0.1 r<1:B0.0 B0.0 r<1:B0.1 "
            "B0.1\n"
            "rank 1: r<0:F1.0 F1.0 B1.0 s>0:B1.0 r<0:F1.1 F1.1 B1.1 "
            "s>0:B1.1\n");
  EXPECT_EQ(formatSchedule(build(ScheduleKind::ZeroBubbleH1, 2, 2)),
            "rank 0: F0.0 s>1:F0.0 F0.1 s>1:F0.1 r<1:B0.0 I0.0 W0.0 r<1:B0.1 "
            "I0.1 W0.1\n"
            "rank 1: r<0:F1.0 F1.0 I1.0 s>0:B1.0 r<0:F1.1 F1.1 I1.1 "
            "s>0:B1.1 W1.0 W1.1\n");
  EXPECT_EQ(formatSchedule(build(ScheduleKind::Interleaved, 1, 1, 2)),
            "rank 0: F0.0 s>0:F0.0 r<0:F1.0 F1.0 B1.0 s>0:B1.0 r<0:B0.0 "
            "B0.0\n");
  // ZB-V's V: stage 0 and 3 on rank 0, 1 and 2 on rank 1, which hands
  // over to itself at the turn.
  EXPECT_EQ(formatSchedule(build(ScheduleKind::ZeroBubbleV, 2, 1, 2)),
            "rank 0: F0.0 s>1:F0.0 r<1:F3.0 F3.0 I3.0 s>1:B3.0 W3.0 r<1:B0.0 "
            "I0.0 W0.0\n"
            "rank 1: r<0:F1.0 F1.0 s>1:F1.0 r<1:F2.0 F2.0 s>0:F2.0 r<0:B2.0 "
            "I2.0 s>1:B2.0 W2.0 r<1:B1.0 I1.0 s>0:B1.0 W1.0\n");
  EXPECT_EQ(
      scheduleJson(build(ScheduleKind::GPipe, 2, 1)),
      "{\"schedule\":\"gpipe\",\"ranks\":2,\"microbatches\":1,"
      "\"virtual_stages\":1,\"actions\":["
      "[{\"kind\":\"forward\",\"stage\":0,\"microbatch\":0},"
      "{\"kind\":\"send\",\"stage\":0,\"microbatch\":0,\"gradient\":false,"
      "\"peer\":1},"
      "{\"kind\":\"recv\",\"stage\":0,\"microbatch\":0,\"gradient\":true,"
      "\"peer\":1},"
      "{\"kind\":\"backward\",\"stage\":0,\"microbatch\":0}],"
      "[{\"kind\":\"recv\",\"stage\":1,\"microbatch\":0,\"gradient\":false,"
      "\"peer\":0},"
      "{\"kind\":\"forward\",\"stage\":1,\"microbatch\":0},"
      "{\"kind\":\"backward\",\"stage\":1,\"microbatch\":0},"
      "{\"kind\":\"send\",\"stage\":1,\"microbatch\":0,\"gradient\":true,"
      "\"peer\":0}]]}");
  std::string zbJson = scheduleJson(build(ScheduleKind::ZeroBubbleH1, 2, 2));
  EXPECT_NE(zbJson.find("\"schedule\":\"zb-h1\""), std::string::npos);
  EXPECT_NE(zbJson.find("\"kind\":\"backward_input\""), std::string::npos);
  EXPECT_NE(zbJson.find("\"kind\":\"backward_weight\""), std::string::npos);
}

// Tests per-stage times, the send time and the spans: GPipe P=2 M=1 with a
// slow second stage.
TEST(PipelineScheduleTest, StageTimesAndSendTime) {
  Schedule schedule = build(ScheduleKind::GPipe, 2, 1);
  std::vector<StageTimes> times = {{1, 1, 1}, {2, 3, 1}};
  std::string error;
  Timeline t = simulate(schedule, times, 0.5, &error);
  ASSERT_EQ(error, "");
  // Rank 0: F 0-1, send at 1; rank 1: recv at 1.5, F 1.5-3.5, B 3.5-7.5,
  // send at 7.5; rank 0: recv at 8, B 8-10.
  EXPECT_EQ(t.makespan, 10);
  EXPECT_EQ(t.busy, (std::vector<double>{3, 6}));
  using Spans = std::vector<std::pair<double, double>>;
  EXPECT_EQ(t.spans[0], (Spans{{0, 1}, {1, 1}, {8, 8}, {8, 10}}));
  EXPECT_EQ(t.spans[1],
            (Spans{{1.5, 1.5}, {1.5, 3.5}, {3.5, 7.5}, {7.5, 7.5}}));
  EXPECT_EQ(t.bubbleFraction, (20.0 - 9) / 20);
  simulate(schedule, {{1, 1, 1}}, 0, &error);
  EXPECT_EQ(error, "1 stage times for 2 virtual stages");
}

// Tests that simulate names the ranks and actions of a cycle of waits made
// by swapping two receives on one rank.
TEST(PipelineScheduleTest, SimulateReportsCycleOfWaits) {
  Schedule schedule = build(ScheduleKind::OneFOneB, 2, 4);
  // Rank 1 asks for microbatch 2's activation first, which rank 0 sends
  // only after microbatch 0's gradient, which rank 1 sends after its first
  // receive.
  std::vector<Action> &rank1 = schedule.ranks[1];
  std::vector<size_t> recvs;
  for (size_t i = 0; i < rank1.size(); ++i)
    if (rank1[i].kind == ActionKind::Recv)
      recvs.push_back(i);
  ASSERT_GE(recvs.size(), 3u);
  ASSERT_EQ(formatAction(rank1[recvs[2]]), "r<0:F1.2");
  std::swap(rank1[recvs[0]], rank1[recvs[2]]);
  std::string error;
  Timeline timeline = simulate(schedule, {}, 0, &error);
  EXPECT_EQ(error,
            "rank 0's action 4 (r<1:B0.0) waits for rank 1's action 3 "
            "(s>0:B1.0), while rank 1's action 0 (r<0:F1.2) waits for rank "
            "0's action 7 (s>1:F0.2): a cycle of waits");
  EXPECT_EQ(timeline.makespan, 0);
  EXPECT_TRUE(timeline.spans.empty());
}

// Tests that simulate names a receive whose send was deleted, and a send
// whose receive was deleted.
TEST(PipelineScheduleTest, SimulateReportsMissingSendAndRecv) {
  Schedule noSend = build(ScheduleKind::OneFOneB, 4, 8);
  ASSERT_EQ(formatAction(noSend.ranks[1][2]), "s>2:F1.0");
  noSend.ranks[1].erase(noSend.ranks[1].begin() + 2);
  std::string error;
  simulate(noSend, {}, 0, &error);
  EXPECT_EQ(error, "rank 2's action 0 (r<1:F2.0) waits for a message that "
                   "rank 1 never sends");

  Schedule noRecv = build(ScheduleKind::ZeroBubbleH1, 4, 8);
  ASSERT_EQ(formatAction(noRecv.ranks[3][0]), "r<2:F3.0");
  noRecv.ranks[3].erase(noRecv.ranks[3].begin());
  simulate(noRecv, {}, 0, &error);
  EXPECT_EQ(error, "rank 2's action 2 (s>3:F2.0) is never received by rank 3");

  Schedule badPeer = build(ScheduleKind::GPipe, 2, 1);
  badPeer.ranks[0][1].peer = 5;
  simulate(badPeer, {}, 0, &error);
  EXPECT_EQ(error, "rank 0's action 1 (s>5:F0.0) names a stage or a rank "
                   "outside the pipeline");
}

// Tests that parseAction reads back every action formatAction writes, for
// every kind of schedule.
TEST(PipelineScheduleTest, ParseActionRoundTrips) {
  for (const Case &c : allCases()) {
    Schedule schedule = build(c.kind, c.P, c.M, c.V);
    for (const std::vector<Action> &actions : schedule.ranks)
      for (const Action &action : actions) {
        std::string error = "unset";
        std::optional<Action> parsed = parseAction(formatAction(action), error);
        ASSERT_TRUE(parsed) << formatAction(action) << ": " << error;
        EXPECT_EQ(*parsed, action) << formatAction(action);
        EXPECT_EQ(error, "");
      }
  }
  std::string error;
  std::optional<Action> recv = parseAction("r<12:B3.45", error);
  ASSERT_TRUE(recv);
  EXPECT_EQ(*recv, (Action{ActionKind::Recv, 3, 45, true, 12}));
  std::optional<Action> weight = parseAction("W2147483647.0", error);
  ASSERT_TRUE(weight);
  EXPECT_EQ(*weight, (Action{ActionKind::BackwardWeight, 2147483647, 0}));
}

// Tests that parseAction names the text and what it expected.
TEST(PipelineScheduleTest, ParseActionRefusals) {
  auto refusal = [](std::string_view text) {
    std::string error;
    EXPECT_FALSE(parseAction(text, error)) << text;
    return error;
  };
  EXPECT_EQ(refusal(""),
            "'': expected F, B, I or W<stage>.<microbatch>, e.g. F0.1");
  EXPECT_EQ(refusal("X0.0"),
            "'X0.0': expected F, B, I or W<stage>.<microbatch>, e.g. F0.1");
  EXPECT_EQ(refusal("F0"),
            "'F0': expected <stage>.<microbatch> after 'F', e.g. F0.1");
  EXPECT_EQ(refusal("F0."), "'F0.': expected the microbatch after 'F0.'");
  EXPECT_EQ(refusal("F-1.0"),
            "'F-1.0': expected <stage>.<microbatch> after 'F', e.g. F0.1");
  EXPECT_EQ(refusal("B1.0 "), "'B1.0 ': unexpected ' ' after the action");
  EXPECT_EQ(refusal("F2147483648.0"),
            "'F2147483648.0': expected <stage>.<microbatch> after 'F', e.g. "
            "F0.1");
  EXPECT_EQ(refusal("s>:F0.0"),
            "'s>:F0.0': expected the peer rank and ':' after 's>', e.g. "
            "s>1:F0.0");
  EXPECT_EQ(refusal("r<1F0.0"),
            "'r<1F0.0': expected the peer rank and ':' after 'r<', e.g. "
            "s>1:F0.0");
  EXPECT_EQ(refusal("s>1:I0.0"),
            "'s>1:I0.0': a send or receive names F (an activation) or B (a "
            "gradient), e.g. r<1:B0.0");
  EXPECT_EQ(refusal("s>1:"),
            "'s>1:': expected F, B, I or W<stage>.<microbatch>, e.g. F0.1");
}

// Tests the message tag: distinct for every (producer, microbatch,
// direction) of a pipeline, and the sender's equal to the receiver's.
TEST(PipelineScheduleTest, MessageTagsMatchAndDiffer) {
  EXPECT_EQ(messageTag(4, 2, 3, true), (3 * 4 + 2) * 2 + 1);
  EXPECT_EQ(messageTag(4, 0, 0, false), 0);
  std::map<int64_t, std::tuple<int, int, bool>> seen;
  for (int m = 0; m < 5; ++m)
    for (int s = 0; s < 4; ++s)
      for (bool g : {false, true}) {
        int64_t tag = messageTag(4, s, m, g);
        EXPECT_GE(tag, 0);
        EXPECT_TRUE(seen.emplace(tag, std::make_tuple(s, m, g)).second);
      }
  EXPECT_EQ(messageTag(1 << 20, (1 << 20) - 1, (1 << 20), true),
            ((int64_t(1) << 40) + (1 << 20) - 1) * 2 + 1);
}

} // namespace
