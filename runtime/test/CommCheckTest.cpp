//===- CommCheckTest.cpp - Matching per-rank communication programs -------===//

#include "runtime/config/CommCheck.h"
#include "runtime/config/PipelineSchedule.h"

#include <gtest/gtest.h>

#include <chrono>

using namespace tessel::commcheck;
using tessel::pipeline::Action;
using tessel::pipeline::ActionKind;
using tessel::pipeline::Schedule;
using tessel::pipeline::ScheduleKind;
using Kind = Event::Kind;
using Programs = std::vector<std::vector<Event>>;

namespace {

Event send(int peer, int64_t tag, std::string where, int64_t bytes = 4096,
           std::string dtype = "f32") {
  Event event{Kind::Send};
  event.peer = peer;
  event.tag = tag;
  event.op = "send";
  event.bytes = bytes;
  event.dtype = std::move(dtype);
  event.where = std::move(where);
  return event;
}

Event recv(int peer, int64_t tag, std::string where, int64_t bytes = 4096,
           std::string dtype = "f32") {
  Event event = send(peer, tag, std::move(where), bytes, std::move(dtype));
  event.kind = Kind::Recv;
  event.op = "recv";
  return event;
}

Event collective(std::string op, std::vector<int> group, std::string axes,
                 std::string where, int64_t bytes = 4096) {
  Event event{Kind::Collective};
  event.op = std::move(op);
  event.group = std::move(group);
  event.axes = std::move(axes);
  event.bytes = bytes;
  event.dtype = "f32";
  event.where = std::move(where);
  return event;
}

/// A pipeline schedule's sends and receives as events: the tag names the
/// message (producing stage, microbatch, direction), every tensor 4096
/// bytes of f32, labelled with the action.
Programs pipelineEvents(const Schedule &schedule) {
  const int M = schedule.shape.microbatches;
  Programs programs(schedule.ranks.size());
  for (size_t rank = 0; rank < schedule.ranks.size(); ++rank)
    for (const Action &a : schedule.ranks[rank]) {
      if (a.kind != ActionKind::Send && a.kind != ActionKind::Recv)
        continue;
      int producer = a.kind == ActionKind::Send ? a.stage
                     : a.gradient               ? a.stage + 1
                                                : a.stage - 1;
      int64_t tag = (int64_t(producer) * M + a.microbatch) * 2 + a.gradient;
      std::string where = tessel::pipeline::formatAction(a);
      programs[rank].push_back(a.kind == ActionKind::Send
                                   ? send(a.peer, tag, where)
                                   : recv(a.peer, tag, where));
    }
  return programs;
}

// Tests that the sends and receives of every pipeline schedule match.
TEST(CommCheckTest, PipelineSchedulesMatch) {
  for (auto [kind, P, M, V] :
       std::vector<std::tuple<ScheduleKind, int, int, int>>{
           {ScheduleKind::OneFOneB, 4, 8, 1},
           {ScheduleKind::GPipe, 4, 8, 1},
           {ScheduleKind::Interleaved, 4, 8, 2},
           {ScheduleKind::ZeroBubbleH1, 4, 8, 1}}) {
    SCOPED_TRACE(tessel::pipeline::scheduleName(kind));
    Programs programs =
        pipelineEvents(tessel::pipeline::buildSchedule(kind, {P, M, V}));
    size_t events = 0;
    for (auto &program : programs)
      events += program.size();
    EXPECT_EQ(events, size_t(2 * 2 * (P * V - 1) * M));
    std::optional<Finding> finding = check(programs);
    EXPECT_FALSE(finding) << finding->message;
  }
}

// Tests that a receive before the send it must unblock is a cycle of
// waits naming both ranks, tags and places.
TEST(CommCheckTest, SwappedOrderIsACycle) {
  Programs programs = {{recv(1, 3, "a.mlir:1"), send(1, 4, "a.mlir:2")},
                       {recv(0, 4, "a.mlir:7"), send(0, 3, "a.mlir:8")}};
  std::optional<Finding> finding = check(programs);
  ASSERT_TRUE(finding);
  EXPECT_EQ(finding->message,
            "rank 0 waits in recv from rank 1 (tag 3, 4096 bytes f32, at "
            "a.mlir:1) while rank 1 waits in recv from rank 0 (tag 4, 4096 "
            "bytes f32, at a.mlir:7): a cycle of waits");
  EXPECT_EQ(finding->rankA, 0);
  EXPECT_EQ(finding->eventA, 0);
  EXPECT_EQ(finding->rankB, 1);
  EXPECT_EQ(finding->eventB, 0);

  // The same order with the sends first runs.
  Programs fixed = {{send(1, 4, "a.mlir:2"), recv(1, 3, "a.mlir:1")},
                    {send(0, 3, "a.mlir:8"), recv(0, 4, "a.mlir:7")}};
  EXPECT_FALSE(check(fixed));
}

// Tests that a matched pair of different sizes or types names both ends.
TEST(CommCheckTest, SizeOrTypeMismatch) {
  Programs programs = {{send(1, 0, "x:1", 4096)}, {recv(0, 0, "x:9", 2048)}};
  std::optional<Finding> finding = check(programs);
  ASSERT_TRUE(finding);
  EXPECT_EQ(finding->message,
            "rank 0's send to rank 1 (tag 0, 4096 bytes f32, at x:1) meets "
            "rank 1's recv from rank 0 (tag 0, 2048 bytes f32, at x:9): the "
            "sizes differ");
  EXPECT_EQ(std::make_tuple(finding->rankA, finding->eventA, finding->rankB,
                            finding->eventB),
            std::make_tuple(0, 0, 1, 0));

  programs = {{send(1, 0, "x:1", 4096, "bf16")},
              {recv(0, 0, "x:9", 2048, "f32")}};
  finding = check(programs);
  ASSERT_TRUE(finding);
  EXPECT_NE(finding->message.find("the sizes and types differ"),
            std::string::npos)
      << finding->message;
}

// Tests that FIFO matching per tag pairs the n-th send with the n-th
// receive, whatever the other tags do in between.
TEST(CommCheckTest, MatchesPerTagInOrder) {
  Programs programs = {
      {send(1, 1, "a", 10), send(1, 2, "b", 20), send(1, 1, "c", 30)},
      {recv(0, 2, "d", 20), recv(0, 1, "e", 10), recv(0, 1, "f", 30)}};
  EXPECT_FALSE(check(programs));
  std::swap(programs[1][1], programs[1][2]);
  std::optional<Finding> finding = check(programs);
  ASSERT_TRUE(finding);
  EXPECT_EQ(finding->eventA, 0);
  EXPECT_EQ(finding->eventB, 1);
}

// Tests that a send nobody receives is named with its sender.
TEST(CommCheckTest, MissingRecv) {
  Programs programs = {{send(1, 5, "p:1"), send(1, 5, "p:2")},
                       {recv(0, 5, "p:3")}};
  std::optional<Finding> finding = check(programs);
  ASSERT_TRUE(finding);
  EXPECT_EQ(finding->message,
            "rank 0's send to rank 1 (tag 5, 4096 bytes f32, at p:2) is "
            "never received: rank 1 finishes without a matching recv");
  EXPECT_EQ(finding->rankA, 0);
  EXPECT_EQ(finding->eventA, 1);
}

// Tests that a receive nobody sends is a deadlock on a finished rank.
TEST(CommCheckTest, MissingSend) {
  Programs programs = {{send(1, 1, "p:1")},
                       {recv(0, 1, "p:2"), recv(0, 2, "p:3")}};
  std::optional<Finding> finding = check(programs);
  ASSERT_TRUE(finding);
  EXPECT_EQ(finding->message,
            "rank 1 waits in recv from rank 0 (tag 2, 4096 bytes f32, at "
            "p:3), but rank 0 has finished its program: a missing send");
  EXPECT_EQ(std::make_tuple(finding->rankA, finding->eventA, finding->rankB,
                            finding->eventB),
            std::make_tuple(1, 1, 0, -1));
}

// Tests that ranks meeting in collectives over different groups that
// never line up are a cycle naming both axes, while the same collectives
// reached in a compatible order run.
TEST(CommCheckTest, CollectivesOverDifferentGroups) {
  // dp=2,tp=2: dp groups {0,2} {1,3}, tp groups {0,1} {2,3}. Every rank
  // reducing over tp then dp runs, though rank 0 may reach its dp reduce
  // while rank 2 still stands in its tp reduce.
  auto tp = [](int rank) {
    return collective("all_reduce", {rank & ~1, rank | 1}, "tp",
                      "m:" + std::to_string(rank) + ":tp");
  };
  auto dp = [](int rank) {
    return collective("all_reduce", {rank & 1, (rank & 1) + 2}, "dp",
                      "m:" + std::to_string(rank) + ":dp");
  };
  Programs ordered;
  for (int rank = 0; rank < 4; ++rank)
    ordered.push_back({tp(rank), dp(rank)});
  EXPECT_FALSE(check(ordered));

  // Ranks 0 and 3 go tp first, ranks 1 and 2 dp first: 0 waits for 1 in
  // tp, 1 for 3 in dp, 3 for 2 in tp, 2 for 0 in dp.
  Programs crossed = {
      {tp(0), dp(0)}, {dp(1), tp(1)}, {dp(2), tp(2)}, {tp(3), dp(3)}};
  std::optional<Finding> finding = check(crossed);
  ASSERT_TRUE(finding);
  EXPECT_EQ(finding->message,
            "rank 0 waits in all_reduce over tp (4096 bytes f32, at m:0:tp) "
            "for rank 1 while rank 1 waits in all_reduce over dp (4096 bytes "
            "f32, at m:1:dp) for rank 3 while rank 3 waits in all_reduce "
            "over tp (4096 bytes f32, at m:3:tp) for rank 2 while rank 2 "
            "waits in all_reduce over dp (4096 bytes f32, at m:2:dp) for "
            "rank 0: a cycle of waits");
  EXPECT_EQ(std::make_tuple(finding->rankA, finding->eventA, finding->rankB,
                            finding->eventB),
            std::make_tuple(0, 0, 1, 0));

  // A member that never comes.
  Programs absent = {{collective("all_reduce", {0, 1}, "dp", "q:1")}, {}};
  finding = check(absent);
  ASSERT_TRUE(finding);
  EXPECT_EQ(finding->message,
            "rank 0 waits in all_reduce over dp (4096 bytes f32, at q:1) for "
            "rank 1, but rank 1 has finished its program: a missing "
            "collective");
}

// Tests that collectives over one group reached in a different order (or
// with different sizes) name the two ranks and events.
TEST(CommCheckTest, CollectivesInDifferentOrder) {
  Programs programs = {{collective("all_reduce", {0, 1}, "dp", "g:1"),
                        collective("all_gather", {0, 1}, "dp", "g:2")},
                       {collective("all_gather", {0, 1}, "dp", "g:5"),
                        collective("all_reduce", {0, 1}, "dp", "g:6")}};
  std::optional<Finding> finding = check(programs);
  ASSERT_TRUE(finding);
  EXPECT_EQ(finding->message,
            "rank 0's all_reduce over dp (4096 bytes f32, at g:1) meets rank "
            "1's all_gather over dp (4096 bytes f32, at g:5): the kinds "
            "differ");
  EXPECT_EQ(std::make_tuple(finding->rankA, finding->eventA, finding->rankB,
                            finding->eventB),
            std::make_tuple(0, 0, 1, 0));

  programs = {{collective("all_reduce", {0, 1}, "dp", "g:1", 4096)},
              {collective("all_reduce", {0, 1}, "dp", "g:5", 8192)}};
  finding = check(programs);
  ASSERT_TRUE(finding);
  EXPECT_NE(finding->message.find("the sizes differ"), std::string::npos);
}

// Tests that events naming ranks outside the world or malformed groups are
// refused with their place.
TEST(CommCheckTest, MalformedEvents) {
  Programs programs = {{send(3, 0, "z:1")}, {}};
  std::optional<Finding> finding = check(programs);
  ASSERT_TRUE(finding);
  EXPECT_EQ(finding->message, "rank 0's send to rank 3 (tag 0, 4096 bytes "
                              "f32, at z:1) names rank 3, outside the world "
                              "of 2 ranks");
  programs = {{collective("all_reduce", {1}, "dp", "z:2")}, {}};
  finding = check(programs);
  ASSERT_TRUE(finding);
  EXPECT_NE(finding->message.find("without rank 0 itself"), std::string::npos);
  programs = {{collective("all_reduce", {1, 0}, "dp", "z:3")}, {}};
  finding = check(programs);
  ASSERT_TRUE(finding);
  EXPECT_NE(finding->message.find("not sorted"), std::string::npos);
}

// Tests that a long chain of waits is summarised, not spelled out.
TEST(CommCheckTest, LongCycleIsSummarised) {
  const int ranks = 100;
  Programs programs(ranks);
  for (int rank = 0; rank < ranks; ++rank)
    programs[rank] = {recv((rank + 1) % ranks, 0, "ring"),
                      send((rank + ranks - 1) % ranks, 0, "ring")};
  std::optional<Finding> finding = check(programs);
  ASSERT_TRUE(finding);
  EXPECT_NE(finding->message.find("(and so on, 100 ranks): a cycle of waits"),
            std::string::npos)
      << finding->message;
  EXPECT_LT(finding->message.size(), 1500u);
}

// Tests that thousands of events per rank match in well under a second:
// a ring exchange with a world all-reduce every 50 steps, and a deep queue
// of sends that the receiver drains only at the end.
TEST(CommCheckTest, ThousandsOfEventsRunFast) {
  const int ranks = 32, steps = 3000;
  std::vector<int> world(ranks);
  for (int rank = 0; rank < ranks; ++rank)
    world[rank] = rank;
  Programs programs(ranks);
  for (int rank = 0; rank < ranks; ++rank)
    for (int step = 0; step < steps; ++step) {
      programs[rank].push_back(send((rank + 1) % ranks, step % 7, "s"));
      programs[rank].push_back(recv((rank + ranks - 1) % ranks, step % 7, "r"));
      if (step % 50 == 49)
        programs[rank].push_back(collective("all_reduce", world, "dp", "c"));
    }
  Programs deep(2);
  for (int i = 0; i < 50000; ++i) {
    deep[0].push_back(send(1, i % 3, "s", i));
    deep[1].push_back(recv(0, i % 3, "r", i));
  }
  auto start = std::chrono::steady_clock::now();
  std::optional<Finding> finding = check(programs);
  std::optional<Finding> deepFinding = check(deep);
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  EXPECT_FALSE(finding) << finding->message;
  EXPECT_FALSE(deepFinding) << deepFinding->message;
  EXPECT_LT(seconds, 1.0);
}

} // namespace
