//===- comm_mpi_probes.cpp - What MPI ranks are waiting in ----------------===//

#ifdef TESSEL_WITH_MPI

#include "cpu/comm_mpi_probes.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <thread>

using namespace tessel::cpu;

namespace tessel {
namespace cpu {


void StatusProbes::reapSends() {
  for (auto it = sends.begin(); it != sends.end();) {
    int done = 0;
    if (MPI_Test(&(*it)->mpi, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS)
      done = 1; // A failed send will not read its buffer again.
    it = done ? sends.erase(it) : std::next(it);
  }
}

void StatusProbes::post(int32_t peer, int tag, const void *buf, int bytes,
                        MPI_Request &mpi) {
  if (MPI_Isend(buf, bytes, MPI_BYTE, peer, tag, comm, &mpi) != MPI_SUCCESS)
    mpi = MPI_REQUEST_NULL;
}

void StatusProbes::serve() {
  if (comm == MPI_COMM_NULL)
    return;
  reapSends();
  while (true) {
    int arrived = 0;
    MPI_Status status;
    if (MPI_Iprobe(MPI_ANY_SOURCE, kProbeTag, comm, &arrived, &status) !=
            MPI_SUCCESS ||
        !arrived)
      return;
    ProbeRequest request;
    if (MPI_Recv(&request, int(sizeof(request)), MPI_BYTE, status.MPI_SOURCE,
                 kProbeTag, comm, MPI_STATUS_IGNORE) != MPI_SUCCESS)
      return;
    auto send = std::make_unique<ProbeSend>();
    send->reply.id = request.id;
    auto it = entered.find(request.mask);
    send->reply.entered = it == entered.end() ? 0 : it->second;
    send->reply.activity = current;
    post(status.MPI_SOURCE, kReplyTag, &send->reply, int(sizeof(ProbeReply)),
         send->mpi);
    sends.push_back(std::move(send));
  }
}

/// "tessel_all_gather #12", "tessel_all_reduce #3 on axes mask 0x2" (when
/// not `mask`) or "tessel_recv from rank 3 (tag 7)".
static std::string describeActivity(const Activity &a, uint32_t mask) {
  char text[128];
  if (a.kind == Activity::Collective && a.mask == mask)
    std::snprintf(text, sizeof(text), "%.31s #%llu", a.name,
                  (unsigned long long)a.seq);
  else if (a.kind == Activity::Collective)
    std::snprintf(text, sizeof(text), "%.31s #%llu on axes mask 0x%x", a.name,
                  (unsigned long long)a.seq, a.mask);
  else if (a.kind == Activity::Recv)
    std::snprintf(text, sizeof(text), "tessel_recv from rank %d (tag %lld)",
                  a.peer, (long long)a.tag);
  else
    std::snprintf(text, sizeof(text), "no tessel call");
  return text;
}

std::string StatusProbes::survey(const tessel_ctx *ctx,
                                 const std::vector<int32_t> &ranks,
                                 uint32_t mask) {
  if (comm == MPI_COMM_NULL || ranks.empty())
    return "";
  const uint64_t id = ++lastProbeId;
  for (int32_t peer : ranks) {
    auto send = std::make_unique<ProbeSend>();
    send->request.id = id;
    send->request.mask = mask;
    post(peer, kProbeTag, &send->request, int(sizeof(ProbeRequest)),
         send->mpi);
    sends.push_back(std::move(send));
  }
  // Long enough for a member in a poll to answer (it serves every turn),
  // short beside the timeout that has already passed.
  const double grace = std::min(1.0, ctx->commTimeoutSeconds / 4);
  const auto deadline = Clock::now() +
                        std::chrono::duration_cast<Clock::duration>(
                            std::chrono::duration<double>(grace));
  std::map<int32_t, ProbeReply> replies;
  while (replies.size() < ranks.size() && Clock::now() < deadline) {
    serve();
    int arrived = 0;
    MPI_Status status;
    if (MPI_Iprobe(MPI_ANY_SOURCE, kReplyTag, comm, &arrived, &status) !=
        MPI_SUCCESS)
      break;
    if (!arrived) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      continue;
    }
    ProbeReply reply;
    if (MPI_Recv(&reply, int(sizeof(reply)), MPI_BYTE, status.MPI_SOURCE,
                 kReplyTag, comm, MPI_STATUS_IGNORE) != MPI_SUCCESS)
      break;
    // A reply to an earlier survey that came after its grace is dropped.
    if (reply.id == id &&
        std::find(ranks.begin(), ranks.end(), status.MPI_SOURCE) != ranks.end())
      replies[status.MPI_SOURCE] = reply;
  }
  const bool collective = current.kind == Activity::Collective;
  std::string text;
  for (int32_t peer : ranks) {
    text += text.empty() ? "" : "; ";
    text += "rank " + std::to_string(peer);
    auto it = replies.find(peer);
    if (it == replies.end()) {
      text += " does not respond (stopped, hung or outside a tessel call)";
      continue;
    }
    const ProbeReply &reply = it->second;
    const Activity &a = reply.activity;
    if (collective && a.kind == Activity::Collective && a.mask == mask &&
        a.seq == current.seq && std::strcmp(a.name, current.name) == 0) {
      text += " is in it too";
      continue;
    }
    text += " is in " + describeActivity(a, mask);
    if (!collective || (a.kind == Activity::Collective && a.mask == mask))
      continue;
    // In a call elsewhere: where it stands on this group.
    if (reply.entered < current.seq)
      text += ", behind (at collective #" + std::to_string(reply.entered) +
              " on this group)";
    else
      text += " (at collective #" + std::to_string(reply.entered) +
              " on this group)";
  }
  if (collective)
    text += " (this rank is in " + describeActivity(current, mask) + ")";
  return text;
}

void StatusProbes::shutdown() {
  if (comm == MPI_COMM_NULL)
    return;
  // Probes and replies that nobody will read: received and dropped.
  while (true) {
    int arrived = 0;
    MPI_Status status;
    if (MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm, &arrived, &status) !=
            MPI_SUCCESS ||
        !arrived)
      break;
    ProbeReply sink;
    MPI_Recv(&sink, int(sizeof(sink)), MPI_BYTE, status.MPI_SOURCE,
             status.MPI_TAG, comm, MPI_STATUS_IGNORE);
  }
  // The sends are small (eager): they complete at once unless the peer is
  // gone, then they are released to MPI with their buffers kept.
  const auto deadline = Clock::now() + std::chrono::milliseconds(100);
  while (!sends.empty() && Clock::now() < deadline) {
    reapSends();
    if (!sends.empty())
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  for (auto &send : sends) {
    MPI_Request_free(&send->mpi);
    (void)send.release();
  }
  sends.clear();
}

} // namespace cpu
} // namespace tessel

#endif // TESSEL_WITH_MPI
