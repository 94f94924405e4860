// The asynchronous calls' queue (runtime/core/call_queue.h): calls run once each, one at a
// time, in issue order, on the worker or on a thread that waits for one of them; a waiter never
// takes a call that must stay on the worker, nor one queued behind a call that runs.
#include <doctest/doctest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "runtime/core/call_queue.h"

namespace {

using gyre::CallQueue;
using namespace std::chrono_literals;

CallQueue::Clock::time_point in(std::chrono::milliseconds d) {
  return CallQueue::Clock::now() + d;
}

// Holds a call until released.
struct Gate {
  std::mutex mutex;
  std::condition_variable changed;
  bool entered = false, open = false;
  void pass() {
    std::unique_lock lock(mutex);
    entered = true;
    changed.notify_all();
    changed.wait(lock, [&] { return open; });
  }
  bool waitEntered() {
    std::unique_lock lock(mutex);
    return changed.wait_for(lock, 10s, [&] { return entered; });
  }
  void release() {
    std::lock_guard lock(mutex);
    open = true;
    changed.notify_all();
  }
};

}  // namespace

TEST_CASE("call queue: a waiter runs the calls in front of its own, then its own, in order") {
  CallQueue queue(false);  // no worker: only waiters run calls
  std::vector<int> ran;    // touched by one running call at a time
  std::vector<std::thread::id> where;
  std::array<std::atomic<bool>, 3> done{};
  for (int k = 0; k < 3; ++k) {
    queue.push(
        [&, k] {
          ran.push_back(k);
          where.push_back(std::this_thread::get_id());
          done[size_t(k)] = true;
        },
        true);
  }
  CHECK_FALSE(queue.idle());
  CHECK(queue.help([&] { return done[1].load(); }, in(10s)));
  CHECK(ran == std::vector<int>{0, 1});  // the third waits for a waiter of its own
  for (auto id : where) CHECK(id == std::this_thread::get_id());
  queue.drain();
  CHECK(ran == std::vector<int>{0, 1, 2});
  CHECK(queue.idle());
  queue.stop();
}

TEST_CASE("call queue: behind a running call a waiter sleeps, and gives up at its deadline") {
  CallQueue queue;
  Gate gate;
  std::vector<int> ran;
  std::atomic<bool> secondDone{false};
  queue.push([&] { gate.pass(), ran.push_back(0); }, true);
  REQUIRE(gate.waitEntered());  // the worker runs the first call
  queue.push([&] { ran.push_back(1), secondDone = true; }, true);
  const auto start = CallQueue::Clock::now();
  CHECK_FALSE(queue.help([&] { return secondDone.load(); }, in(50ms)));
  CHECK(CallQueue::Clock::now() - start >= 50ms);
  gate.release();
  CHECK(queue.help([&] { return secondDone.load(); }, in(10s)));
  CHECK(ran == std::vector<int>{0, 1});
  queue.stop();
}

TEST_CASE("call queue: a call that must stay on the worker is never run by a waiter") {
  CallQueue queue;
  std::thread::id where;
  std::atomic<bool> done{false};
  queue.push([&] { where = std::this_thread::get_id(), done = true; }, false);
  CHECK(queue.help([&] { return done.load(); }, in(10s)));
  CHECK(where != std::this_thread::get_id());
  queue.stop();
}

TEST_CASE("call queue: a call that drains its own queue does not wait for itself") {
  CallQueue queue;
  std::atomic<bool> done{false};
  queue.push([&] { queue.drain(), done = true; }, true);
  CHECK(queue.help([&] { return done.load(); }, in(10s)));
  queue.stop();
}

TEST_CASE("call queue: with the worker and three waiters, every call runs once, in issue order") {
  constexpr int kCalls = 3000, kWaiters = 3;
  CallQueue queue;
  int next = 0, outOfOrder = 0;  // touched only by the running call
  std::vector<std::atomic<bool>> done(kCalls);
  std::atomic<int> issued{0};
  std::vector<std::thread> waiters;
  for (int w = 0; w < kWaiters; ++w) {
    waiters.emplace_back([&, w] {
      // Each waits for every kWaiters-th call once it has been issued.
      for (int k = w; k < kCalls; k += kWaiters) {
        while (issued.load() <= k) std::this_thread::yield();
        CHECK(queue.help([&] { return done[size_t(k)].load(); }, in(30s)));
      }
    });
  }
  for (int k = 0; k < kCalls; ++k) {
    queue.push(
        [&, k] {
          if (next++ != k) ++outOfOrder;
          done[size_t(k)] = true;
        },
        true);
    issued = k + 1;
  }
  for (auto& t : waiters) t.join();
  queue.drain();
  CHECK(next == kCalls);
  CHECK(outOfOrder == 0);
  queue.stop();
}

TEST_CASE("call queue: stop runs what is left") {
  CallQueue queue(false);
  int ran = 0;
  queue.push([&] { ++ran; }, true);
  queue.push([&] { ++ran; }, false);
  queue.stop();
  CHECK(ran == 2);
  CHECK(queue.idle());
}
