// The communicator's call lock (base/call_lock.h): one holder at a time, however many threads
// contend, and a holder's writes seen by the next; try_lock fails while it is held.
#include <doctest/doctest.h>

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include "base/call_lock.h"

TEST_CASE("call lock: threads that contend take turns, every increment kept") {
  constexpr int kThreads = 4, kRounds = 20000;
  gyre::CallLock lock;
  long counter = 0;  // plain: only the holder touches it
  int inside = 0, overlaps = 0;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kRounds; ++i) {
        std::lock_guard hold(lock);
        if (++inside != 1) ++overlaps;
        ++counter;
        --inside;
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK(overlaps == 0);
  CHECK(counter == long(kThreads) * kRounds);
}

TEST_CASE("call lock: try_lock fails while held and succeeds once released") {
  gyre::CallLock lock;
  REQUIRE(lock.try_lock());
  bool other = true;
  std::thread([&] { other = lock.try_lock(); }).join();
  CHECK_FALSE(other);
  lock.unlock();
  std::thread([&] {
    other = lock.try_lock();
    if (other) lock.unlock();
  }).join();
  CHECK(other);
}

TEST_CASE("call lock: a thread calling in a tight loop does not keep another out") {
  constexpr long kLoopRounds = 20'000'000;
  constexpr int kTurns = 100;
  gyre::CallLock lock;
  std::atomic<bool> stop{false};
  std::atomic<long> loopRounds{0};
  std::thread looping([&] {
    long r = 0;
    for (; r < kLoopRounds && !stop.load(std::memory_order_relaxed); ++r) {
      lock.lock();
      lock.unlock();
    }
    loopRounds = r;
  });
  int turns = 0;
  for (; turns < kTurns; ++turns) {
    std::lock_guard hold(lock);
  }
  stop = true;
  looping.join();
  // The lock is free between the loop's calls, and the other thread's polls must find it so
  // long before the loop runs out of rounds.
  CHECK(turns == kTurns);
  CHECK(loopRounds.load() < kLoopRounds);
}
