// Sleeping and waking (base/wait.h): every notify reaches a sleeper, whichever side orders
// it (the notifier's fence, or the sleeper's membarrier). Two threads hand a turn back and
// forth through two words, each asleep at once (no busy phase), so every hand-over meets the
// other side on its way into the futex or asleep in it. A lost wake-up shows as a sleep that
// lasts to its far deadline: each must end long before it. (The store-load race the order
// closes is too narrow to hit at will: a build without the fence passed here too.)
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "base/wait.h"

using namespace std::chrono_literals;
using gyre::Clock;

namespace {

struct alignas(64) Word {
  std::atomic<uint32_t> value{0};
};
struct alignas(64) Count {
  std::atomic<uint32_t> sleepers{0};
};

void handOver(gyre::WakeOrder order) {
  constexpr uint32_t kTurns = 20000;
  constexpr auto kDeadline = 10s;  // a lost wake-up sleeps to here
  constexpr auto kLongestFair = 2s;
  Word ping, pong;
  Count pingSleepers, pongSleepers;
  std::atomic<double> longestSeconds{0};
  // Waits until `word` moves past `observed`, asleep; false where one sleep lasted kLongestFair
  // or more: no notify woke it.
  auto await = [&](Word& word, Count& count, uint32_t observed) {
    while (word.value.load(std::memory_order_acquire) == observed) {
      const auto start = Clock::now();
      gyre::sleepWhileEqual(word.value, count.sleepers, observed, start + kDeadline, order);
      const double s = std::chrono::duration<double>(Clock::now() - start).count();
      if (s > longestSeconds.load()) longestSeconds.store(s);
      if (Clock::now() - start >= kLongestFair) return false;
    }
    return true;
  };
  std::string lost, lostByOther;
  std::thread other([&] {
    for (uint32_t turn = 0; turn < kTurns; ++turn) {
      if (!await(ping, pingSleepers, turn)) {
        lostByOther = "the answering thread slept through turn " + std::to_string(turn);
        return;
      }
      pong.value.store(turn + 1, std::memory_order_release);
      gyre::notifyAll(pong.value, pongSleepers.sleepers);
    }
  });
  bool ok = true;
  for (uint32_t turn = 0; turn < kTurns && ok; ++turn) {
    ping.value.store(turn + 1, std::memory_order_release);
    gyre::notifyAll(ping.value, pingSleepers.sleepers);
    ok = await(pong, pongSleepers, turn);
    if (!ok) lost = "the asking thread slept through turn " + std::to_string(turn);
  }
  if (!ok) {
    // Let the other thread out of its wait.
    ping.value.store(kTurns + 1, std::memory_order_release);
    gyre::notifyAll(ping.value, pingSleepers.sleepers);
  }
  other.join();
  MESSAGE("the longest sleep: " << longestSeconds.load() * 1e3 << " ms");
  CHECK_MESSAGE(lost.empty(), lost);
  CHECK_MESSAGE(lostByOther.empty(), lostByOther);
}

}  // namespace

TEST_CASE("wake-ups: every hand-over between two sleeping threads wakes the sleeper") {
  SUBCASE("the notifier fences") {
    handOver(gyre::WakeOrder::notifierFence);
  }
  SUBCASE("the sleeper makes every CPU pass a barrier") {
    if (!gyre::registerSleeperBarriers()) {
      MESSAGE("skipped: the kernel refuses membarrier's global expedited barriers");
      return;
    }
    handOver(gyre::WakeOrder::sleeperBarrier);
  }
}
