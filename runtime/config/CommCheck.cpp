//===- CommCheck.cpp - Matching per-rank communication programs -----------===//

#include "runtime/config/CommCheck.h"

#include <deque>
#include <map>
#include <tuple>

using namespace tessel::commcheck;

namespace {

using Programs = std::vector<std::vector<Event>>;

/// The most ranks a stall's message names before it only counts them.
constexpr int kMaxNamedWaits = 8;

/// Sends from `source` to `destination` with one tag: the ones made and not
/// yet received (their indices on the source), and the rank waiting in a
/// receive for the next one.
struct Channel {
  std::deque<int> posted;
  int waiting = -1;
};

/// The collective a group's ranks are gathering at: how many stand there
/// and the first of them, whom every later one must agree with.
struct Gathering {
  size_t arrived = 0;
  int firstRank = -1, firstEvent = -1;
};

std::string sizeAndType(const Event &event) {
  return std::to_string(event.bytes) + " bytes" +
         (event.dtype.empty() ? "" : " " + event.dtype);
}

std::string groupText(const Event &event) {
  if (!event.axes.empty())
    return event.axes;
  std::string text = "ranks ";
  for (size_t i = 0; i < event.group.size(); ++i)
    text += (i ? "," : "") + std::to_string(event.group[i]);
  return text;
}

/// "recv from rank 1 (tag 3, 4096 bytes f32, at X)".
std::string phrase(const Event &event) {
  std::string at = event.where.empty() ? "" : ", at " + event.where;
  switch (event.kind) {
  case Event::Kind::Send:
    return (event.op.empty() ? "send" : event.op) + " to rank " +
           std::to_string(event.peer) + " (tag " + std::to_string(event.tag) +
           ", " + sizeAndType(event) + at + ")";
  case Event::Kind::Recv:
    return (event.op.empty() ? "recv" : event.op) + " from rank " +
           std::to_string(event.peer) + " (tag " + std::to_string(event.tag) +
           ", " + sizeAndType(event) + at + ")";
  case Event::Kind::Collective:
    return (event.op.empty() ? "collective" : event.op) + " over " +
           groupText(event) + " (" + sizeAndType(event) + at + ")";
  }
  return "?";
}

Finding finding(int rankA, int eventA, int rankB, int eventB,
                std::string message) {
  return Finding{rankA, eventA, rankB, eventB, std::move(message)};
}

/// What differs between two events that must agree: "" when nothing.
std::string difference(const Event &a, const Event &b, bool compareOps) {
  std::vector<std::string> parts;
  if (compareOps && a.op != b.op)
    parts.push_back("kinds");
  if (a.bytes != b.bytes)
    parts.push_back("sizes");
  if (a.dtype != b.dtype)
    parts.push_back("types");
  if (parts.empty())
    return "";
  std::string text = "the ";
  for (size_t i = 0; i < parts.size(); ++i)
    text += (i == 0 ? "" : i + 1 == parts.size() ? " and " : ", ") + parts[i];
  return text + " differ";
}

class Matcher {
public:
  explicit Matcher(const Programs &programs)
      : programs(programs), worldSize(int(programs.size())),
        cursor(programs.size(), 0), gatheringOf(programs.size(), nullptr) {}

  std::optional<Finding> run() {
    for (int rank = worldSize - 1; rank >= 0; --rank)
      ready.push_back(rank);
    while (!ready.empty()) {
      int rank = ready.back();
      ready.pop_back();
      if (std::optional<Finding> problem = advance(rank))
        return problem;
    }
    // A rank waiting on one that has finished is where a stall starts (a
    // missing send or collective); else every stuck rank is on a cycle, or
    // waits on one, and the lowest names it.
    for (int rank = 0; rank < worldSize; ++rank)
      if (!finished(rank) && waitsOn(rank) >= 0 && finished(waitsOn(rank)))
        return describeStall(rank);
    for (int rank = 0; rank < worldSize; ++rank)
      if (!finished(rank))
        return describeStall(rank);
    for (const auto &[key, channel] : channels)
      if (!channel.posted.empty()) {
        auto [source, destination, tag] = key;
        int index = channel.posted.front();
        return finding(source, index, destination, -1,
                       describeEvent(programs, source, index) +
                           " is never received: rank " +
                           std::to_string(destination) +
                           " finishes without a matching recv");
      }
    return std::nullopt;
  }

private:
  bool finished(int rank) const {
    return cursor[rank] == programs[rank].size();
  }

  std::optional<Finding> invalid(int rank, std::string why) {
    int index = int(cursor[rank]);
    return finding(rank, index, -1, -1,
                   describeEvent(programs, rank, index) + " " + why);
  }

  /// Runs `rank` until it ends or waits; a finding when two events meet
  /// that do not match.
  std::optional<Finding> advance(int rank) {
    const std::vector<Event> &events = programs[rank];
    while (cursor[rank] < events.size()) {
      const int index = int(cursor[rank]);
      const Event &event = events[index];
      if (event.kind != Event::Kind::Collective &&
          (event.peer < 0 || event.peer >= worldSize))
        return invalid(rank, "names rank " + std::to_string(event.peer) +
                                 ", outside the world of " +
                                 std::to_string(worldSize) + " ranks");
      switch (event.kind) {
      case Event::Kind::Send: {
        Channel &channel = channels[{rank, event.peer, event.tag}];
        channel.posted.push_back(index);
        if (channel.waiting >= 0) {
          ready.push_back(channel.waiting);
          channel.waiting = -1;
        }
        ++cursor[rank];
        break;
      }
      case Event::Kind::Recv: {
        Channel &channel = channels[{event.peer, rank, event.tag}];
        if (channel.posted.empty()) {
          channel.waiting = rank;
          return std::nullopt;
        }
        int sendIndex = channel.posted.front();
        channel.posted.pop_front();
        const Event &send = programs[event.peer][sendIndex];
        std::string differ = difference(send, event, /*compareOps=*/false);
        if (!differ.empty())
          return finding(event.peer, sendIndex, rank, index,
                         describeEvent(programs, event.peer, sendIndex) +
                             " meets " + describeEvent(programs, rank, index) +
                             ": " + differ);
        ++cursor[rank];
        break;
      }
      case Event::Kind::Collective:
        if (std::optional<Finding> problem = arrive(rank))
          return problem;
        if (gatheringOf[rank])
          return std::nullopt; // waits for the rest of its group
        break;
      }
    }
    return std::nullopt;
  }

  /// `rank` reaches the collective at its cursor; when it is the last of
  /// its group, all of them move past it.
  std::optional<Finding> arrive(int rank) {
    const int index = int(cursor[rank]);
    const Event &event = programs[rank][index];
    const std::vector<int> &group = event.group;
    bool self = false;
    for (size_t i = 0; i < group.size(); ++i) {
      if (group[i] < 0 || group[i] >= worldSize ||
          (i > 0 && group[i] <= group[i - 1]))
        return invalid(rank, "has a group that is not sorted ranks of the "
                             "world of " +
                                 std::to_string(worldSize));
      self |= group[i] == rank;
    }
    if (!self)
      return invalid(rank, "has a group without rank " + std::to_string(rank) +
                               " itself");
    Gathering &gathering = gatherings[group];
    if (gathering.arrived == 0) {
      gathering.firstRank = rank;
      gathering.firstEvent = index;
    } else {
      const Event &first = programs[gathering.firstRank][gathering.firstEvent];
      std::string differ = difference(first, event, /*compareOps=*/true);
      if (!differ.empty())
        return finding(
            gathering.firstRank, gathering.firstEvent, rank, index,
            describeEvent(programs, gathering.firstRank, gathering.firstEvent) +
                " meets " + describeEvent(programs, rank, index) + ": " +
                differ);
    }
    gatheringOf[rank] = &gathering;
    if (++gathering.arrived < group.size())
      return std::nullopt;
    gathering.arrived = 0;
    for (int member : group) {
      ++cursor[member];
      gatheringOf[member] = nullptr;
      if (member != rank)
        ready.push_back(member);
    }
    return std::nullopt;
  }

  /// The rank `rank` waits on: the sender of its receive, or the first
  /// member of its collective's group not standing at it.
  int waitsOn(int rank) const {
    const Event &event = programs[rank][cursor[rank]];
    if (event.kind == Event::Kind::Recv)
      return event.peer;
    for (int member : event.group)
      if (gatheringOf[member] != gatheringOf[rank])
        return member;
    return -1; // not reached: a full group has moved on
  }

  /// From `first`, the chain of waits to a rank that has finished or back
  /// to a rank already on it.
  Finding describeStall(int first) {
    std::vector<bool> named(worldSize, false);
    std::string text;
    int rank = first, steps = 0;
    Finding result{first, int(cursor[first]), -1, -1, ""};
    for (;;) {
      named[rank] = true;
      const Event &event = programs[rank][cursor[rank]];
      const int other = waitsOn(rank);
      if (steps == 0) {
        result.rankB = other;
        result.eventB =
            other >= 0 && !finished(other) ? int(cursor[other]) : -1;
      }
      if (steps < kMaxNamedWaits) {
        text += (steps ? " while rank " : "rank ") + std::to_string(rank) +
                " waits in " + phrase(event);
        if (event.kind == Event::Kind::Collective)
          text += " for rank " + std::to_string(other);
      }
      ++steps;
      if (other < 0 || finished(other)) {
        result.message =
            text + (steps > kMaxNamedWaits ? " (and so on)" : "") +
            ", but rank " + std::to_string(other) +
            " has finished its program" +
            (event.kind == Event::Kind::Recv ? ": a missing send"
                                             : ": a missing collective");
        return result;
      }
      if (named[other]) {
        result.message =
            text +
            (steps > kMaxNamedWaits
                 ? " (and so on, " + std::to_string(steps) + " ranks)"
                 : "") +
            ": a cycle of waits";
        return result;
      }
      rank = other;
    }
  }

  const Programs &programs;
  const int worldSize;
  std::vector<size_t> cursor;
  std::vector<Gathering *> gatheringOf; // the collective a rank stands at
  std::map<std::tuple<int, int, int64_t>, Channel> channels;
  std::map<std::vector<int>, Gathering> gatherings;
  std::vector<int> ready;
};

} // namespace

std::string tessel::commcheck::describeEvent(const Programs &programs, int rank,
                                             int index) {
  return "rank " + std::to_string(rank) + "'s " + phrase(programs[rank][index]);
}

std::optional<Finding>
tessel::commcheck::check(const std::vector<std::vector<Event>> &programs) {
  return Matcher(programs).run();
}
