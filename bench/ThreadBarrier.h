//===- ThreadBarrier.h - A breakable barrier of a benchmark's threads ----===//

#ifndef TESSEL_BENCH_THREADBARRIER_H
#define TESSEL_BENCH_THREADBARRIER_H

#include "bench/BenchSupport.h"

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>

namespace tessel::bench {

/// A reusable barrier of the benchmark's threads (C++17 has no
/// std::barrier). The last thread to arrive runs `onLast` before it releases
/// the others, so a decision every rank must share (how many steps a run
/// takes, when it started) is made once. A failing thread breaks it, and
/// every waiter throws instead of waiting for a peer that is gone.
class ThreadBarrier {
public:
  explicit ThreadBarrier(int threads) : threads(threads) {}

  void arriveAndWait(const std::function<void()> &onLast = {}) {
    std::unique_lock<std::mutex> lock(mutex);
    if (!broken.empty())
      throw BenchError(broken);
    if (++arrived == threads) {
      if (onLast) {
        try {
          onLast();
        } catch (const std::exception &e) {
          breakLocked(e.what());
          throw;
        }
      }
      arrived = 0;
      ++generation;
      cv.notify_all();
      return;
    }
    uint64_t mine = generation;
    cv.wait(lock, [&] { return generation != mine || !broken.empty(); });
    if (generation == mine)
      throw BenchError(broken);
  }

  void breakAll(const std::string &why) {
    std::lock_guard<std::mutex> lock(mutex);
    breakLocked(why);
  }

private:
  void breakLocked(const std::string &why) {
    if (broken.empty())
      broken = "a peer thread failed (" + why + ")";
    cv.notify_all();
  }

  const int threads;
  std::mutex mutex;
  std::condition_variable cv;
  int arrived = 0;
  uint64_t generation = 0;
  std::string broken;
};

} // namespace tessel::bench

#endif // TESSEL_BENCH_THREADBARRIER_H
