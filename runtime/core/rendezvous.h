//===- rendezvous.h - TCP rendezvous of the ranks of one world --*- C++ -*-===//
//
// How ranks that are separate processes (tessel-run under torchrun, or any
// launcher that only hands out RANK / WORLD_SIZE / MASTER_ADDR /
// MASTER_PORT) find each other without MPI. Rank 0 listens on host:port;
// every other rank connects (retrying until the deadline: rank 0 may start
// last), presents the world's key, its rank and world size, the port of its
// own listening socket and a small blob. Rank 0 rejects strangers (a wrong
// key, a rank out of range or taken, another world size) with the reason
// and keeps waiting; once every rank has joined it sends everyone the table
// of addresses and blobs (an all-gather: the NCCL unique id travels this
// way). The ranks then connect a full mesh of sockets, rank i to every
// j < i (the connection to rank 0 is the rendezvous one), each link
// checked by key and rank again.
//
// The key keeps out strangers and the processes of another launch on the
// same port; it travels in clear, so it is no secret against someone who
// can read the network. A connection that says nothing is dropped after
// 10 s (rank 0 serves joins one at a time).
//
// Every connect, accept, read and write is bounded by the deadline, so a
// rank that never comes or dies midway fails the others with a message
// instead of hanging them. Plain POSIX sockets, no MLIR or LLVM.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_RUNTIME_CORE_RENDEZVOUS_H
#define TESSEL_RUNTIME_CORE_RENDEZVOUS_H

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace tessel {

struct RendezvousOptions {
  std::string host = "127.0.0.1"; /// rank 0's address (name or IPv4)
  int32_t port = 0;               /// rank 0's port, in [1, 65535]
  std::string key;                /// shared by the world; strangers differ
  int32_t rank = 0;
  int32_t worldSize = 1;
  double timeoutSeconds = 600; /// the whole rendezvous
};

/// What a rendezvous gives each rank: one connected, non-blocking,
/// TCP_NODELAY socket per other rank (sockets[rank] == -1) and every rank's
/// blob in rank order.
struct RendezvousResult {
  std::vector<int> sockets;
  std::vector<std::string> blobs;
};

/// Largest blob a rank may publish, and largest key.
constexpr uint32_t kMaxRendezvousBlob = 1u << 20;
constexpr uint32_t kMaxRendezvousKey = 4096;

/// Joins the world; false with the reason in `error` (every socket closed).
bool rendezvous(const RendezvousOptions &options, const std::string &blob,
                RendezvousResult &result, std::string &error);

/// Closes every socket of `sockets` that is open.
void closeSockets(std::vector<int> &sockets);

/// Reads / writes exactly `n` bytes of a non-blocking socket before the
/// deadline; false with the reason ("timed out", "connection closed by
/// the peer", or the system's error) in `error`.
using RendezvousClock = std::chrono::steady_clock;
bool readFully(int fd, void *buf, size_t n, RendezvousClock::time_point until,
               std::string &error);
bool writeFully(int fd, const void *buf, size_t n,
                RendezvousClock::time_point until, std::string &error);

} // namespace tessel

#endif // TESSEL_RUNTIME_CORE_RENDEZVOUS_H
