//===- CommCheck.h - Matching per-rank communication programs -------------===//
//
// Given what every rank will send, receive and take part in, in program
// order, finds the first pair that does not match (sizes, types, a
// collective's kind) and the waits that never end (a receive nobody sends,
// a cycle of waits, ranks meeting in different collectives) before anything
// runs. Sends are buffered; receives match by (source, destination, tag) in
// FIFO order; a collective completes when every rank of its group stands at
// a collective over that same group. The compiler checks the programs it
// emits with it, the launcher a pipeline schedule before it starts. No LLVM.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_CONFIG_COMMCHECK_H
#define TESSEL_CONFIG_COMMCHECK_H

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tessel::commcheck {

struct Event {
  enum class Kind { Send, Recv, Collective } kind;
  int peer = -1;          // Send/Recv: world rank of the other side
  int64_t tag = 0;        // Send/Recv: must match between the pair
  std::string op;         // "send", "recv", or the collective's kind
                          // ("all_reduce", "all_gather", ...)
  std::vector<int> group; // Collective: the world ranks taking part,
                          // sorted, including the rank itself
  std::string axes;       // Collective: the mesh axes, for messages ("dp")
  int64_t bytes = 0;
  std::string dtype; // "f32", ...
  std::string where; // a label for messages: "gpt.mlir:12:3 (F1.0)"
};

struct Finding {
  int rankA = -1, eventA = -1, rankB = -1, eventB = -1;
  std::string message;
};

/// programs[r] = rank r's events in program order. Returns the first
/// problem found, or nullopt when every program runs to its end with every
/// send received:
///  - a send and the receive it matches differ in bytes or dtype;
///  - two ranks stand at collectives over the same group that differ in
///    op, bytes or dtype (a collective's group is its communicator: two
///    groups do not meet, a rank in another group's collective is only not
///    there yet);
///  - an event names a rank outside the world, or a group that is not
///    sorted or leaves out its own rank;
///  - some rank cannot finish: the message follows the chain of waits from
///    the lowest such rank (a receive, or a collective and a member not at
///    it) to a rank that has finished or to a cycle;
///  - a send nobody receives.
/// Linear in the events (plus the groups' sizes), with a cursor per rank
/// and a worklist of ranks that can move.
std::optional<Finding> check(const std::vector<std::vector<Event>> &programs);

/// "rank 2's all_reduce over dp (4096 bytes f32, at gpt.mlir:3:1)": how
/// messages name an event.
std::string describeEvent(const std::vector<std::vector<Event>> &programs,
                          int rank, int index);

} // namespace tessel::commcheck

#endif // TESSEL_CONFIG_COMMCHECK_H
