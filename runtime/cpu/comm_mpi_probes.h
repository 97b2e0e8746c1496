//===- comm_mpi_probes.h - What MPI ranks are waiting in -------*- C++ -*-===//
//
// Private to runtime/cpu/comm_mpi.cpp. While a rank waits (in a collective
// or a receive) it answers probes from its peers, on a communicator of
// their own, with what it is waiting in; a rank whose wait times out probes
// the members that did not come and words, in its error, what each is
// doing (or that it does not respond).
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_RUNTIME_CPU_COMM_MPI_PROBES_H
#define TESSEL_RUNTIME_CPU_COMM_MPI_PROBES_H

#include "cpu/comm.h"

// The C API only (see comm_mpi.cpp).
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#ifndef MPICH_SKIP_MPICXX
#define MPICH_SKIP_MPICXX 1
#endif
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <list>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace tessel {
namespace cpu {

using Clock = std::chrono::steady_clock;


/// What a rank is waiting in, as it answers a probe.
struct Activity {
  enum Kind : int32_t { None, Collective, Recv };
  int32_t kind = None;
  uint32_t mask = 0;  /// Collective: its axes mask.
  int32_t peer = -1;  /// Recv: the sender.
  uint64_t seq = 0;   /// Collective: its number on its mask, from 1.
  int64_t tag = 0;    /// Recv: the full tag.
  char name[32] = {}; /// Collective: the entry point.
};

/// A probe: which probe it is and the axes mask the prober waits on.
struct ProbeRequest {
  uint64_t id = 0;
  uint32_t mask = 0;
};

/// The reply: the probe's id, what the rank is in, and how many collectives
/// it has entered on the probe's mask.
struct ProbeReply {
  uint64_t id = 0;
  uint64_t entered = 0;
  Activity activity;
};

/// The tags of the probe communicator.
constexpr int kProbeTag = 1, kReplyTag = 2;

/// A probe or reply whose MPI_Isend may still read it.
struct ProbeSend {
  ProbeRequest request;
  ProbeReply reply;
  MPI_Request mpi = MPI_REQUEST_NULL;
};

/// One context's answers to, and questions about, what its ranks are in.
class StatusProbes {
public:
  /// MPI_COMM_WORLD's duplicate for probes and replies only.
  MPI_Comm comm = MPI_COMM_NULL;
  /// What this rank waits in; kind None outside a poll.
  Activity current;

  /// Counts a collective on `mask` entered; its number, from 1.
  uint64_t enterCollective(const char *name, uint32_t mask) {
    const uint64_t seq = ++entered[mask];
    current = Activity();
    current.kind = Activity::Collective;
    current.mask = mask;
    current.seq = seq;
    std::snprintf(current.name, sizeof(current.name), "%s", name);
    return seq;
  }
  void enterRecv(int32_t peer, int64_t tag) {
    current = Activity();
    current.kind = Activity::Recv;
    current.peer = peer;
    current.tag = tag;
  }
  void leave() { current = Activity(); }

  /// Answers the probes that arrived (a poll calls this every turn).
  void serve();
  /// Probes `ranks`, waits up to the grace period for their replies and
  /// words what each is in; `mask` is the group this rank waits on (its
  /// counts are compared), or ~0u for a receive.
  std::string survey(const tessel_ctx *ctx, const std::vector<int32_t> &ranks,
                     uint32_t mask);
  /// Drains the probes and replies still queued and settles the sends:
  /// nothing is left pending on `comm` when it is freed.
  void shutdown();

private:
  /// Frees the sends that completed.
  void reapSends();
  void post(int32_t peer, int tag, const void *buf, int bytes,
            MPI_Request &mpi);

  std::unordered_map<uint32_t, uint64_t> entered;
  std::list<std::unique_ptr<ProbeSend>> sends;
  uint64_t lastProbeId = 0;
};

} // namespace cpu
} // namespace tessel

#endif // TESSEL_RUNTIME_CPU_COMM_MPI_PROBES_H
