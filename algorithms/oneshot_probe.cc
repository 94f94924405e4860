// The placement probe during calls (OneShot::remeasurePlacement, algorithms/oneshot.h): rank 0
// and a partner bounce a ball through their probe words, as the set-up probe does.
#include <algorithm>
#include <cmath>

#include "algorithms/oneshot.h"

namespace gyre {

namespace {
// remeasurePlacement: balls of round r carry r in bits 11-30 and the trip in bits 0-10, with
// bit 31 set, so they never equal the set-up probe's (1-2000, or all ones once done) or another
// round's; the last trip number says the round is over.
constexpr int kPlacementBatches = 4;
constexpr uint32_t kPlacementTrips = 8;
constexpr uint32_t kPlacementDoneTrip = 0x7ff;
constexpr Clock::duration kPlacementTripLimit = std::chrono::microseconds(200);
// Both sides poll without a pause between looks, as the set-up probe does (link/mailbox.cc):
// with one, far apart, this probe read 333-459 ns where the set-up's read 451-497 on the same
// CPUs, and the tuner, whose bound was fitted to the set-up's figures, took them for close
// (close by, both read 92-119; docs/perf/placement.md, "The probe during calls far apart").
constexpr uint32_t kSpinsPerClockLook = 1024;
uint32_t placementBall(uint32_t round, uint32_t trip) {
  return 0x80000000u | ((round & 0xfffffu) << 11) | trip;
}
// Spins until `arrived()`, or until `limit` has passed since its first look at the clock, which
// it takes only after kSpinsPerClockLook spins: whether it arrived.
template <class Arrived>
bool spinFor(Arrived arrived, Clock::duration limit) {
  Clock::time_point end{};
  for (uint32_t spins = 1;; ++spins) {
    if (arrived()) return true;
    if (spins % kSpinsPerClockLook != 0) continue;
    const auto now = Clock::now();
    if (end == Clock::time_point{}) {
      end = now + limit;
    } else if (now >= end) {
      return false;
    }
  }
}
}  // namespace

uint32_t OneShot::remeasurePlacement(const OpContext& ctx, int partner) {
  if (window_.nranks() < 2 || partner <= 0 || partner >= window_.nranks()) return 0;
  const uint32_t round = ++probeRound_;
  const uint32_t done = placementBall(round, kPlacementDoneTrip);
  MailState& zero = *boxes_[0].state;
  if (rank_ == 0) {
    // The figure of the round before must have reached every rank before it is overwritten.
    for (int r = 1; r < window_.nranks(); ++r) {
      MailState& state = *boxes_[size_t(r)].state;
      waitUntil(
          ctx, r, "the last placement probe's end at",
          [&] { return state.probeSeen.load(std::memory_order_acquire) == round - 1; },
          state.probeSeen);
    }
    MailState& one = *boxes_[size_t(partner)].state;
    // The first trip waits for the partner to come, as any wait of a call; the others are timed.
    uint32_t ball = placementBall(round, 1);
    zero.probe.store(ball, std::memory_order_release);
    notifyAll(zero.probe, zero.sleepers, wakeOrder_);
    waitUntil(
        ctx, partner, "the placement probe's answer from",
        [&] { return one.probe.load(std::memory_order_acquire) == ball; }, one.probe);
    double fastest = 0;
    for (int b = 0; b < kPlacementBatches && ball != 0; ++b) {
      const auto start = Clock::now();
      for (uint32_t i = 0; i < kPlacementTrips && ball != 0; ++i) {
        zero.probe.store(++ball, std::memory_order_release);
        // The partner answers at once unless it lost its CPU: then nothing is measured this
        // round.
        const uint32_t sent = ball;
        if (!spinFor([&] { return one.probe.load(std::memory_order_acquire) == sent; },
                     kPlacementTripLimit)) {
          ball = 0;
        }
      }
      const double ns =
          std::chrono::duration<double, std::nano>(Clock::now() - start).count() / kPlacementTrips;
      if (ball != 0 && (b == 0 || ns < fastest)) fastest = ns;
    }
    const uint32_t figure = ball == 0 ? 0 : uint32_t(std::lround(std::max(fastest, 1.0)));
    zero.probeNs.store(figure, std::memory_order_relaxed);
    zero.probe.store(done, std::memory_order_release);
    notifyAll(zero.probe, zero.sleepers, wakeOrder_);
    return figure;
  }
  if (rank_ == partner) {
    // Echoes each ball until the round is over; rank 0 spins on the echoes, so only the first,
    // which it may be asleep for, needs a wake. After the first it polls without yielding its
    // core, even where ranks share cores: a yield would time the scheduler, not the CPUs.
    OpContext timed = ctx;
    timed.busy.yield = false;
    timed.busy.budget = nullptr;
    // After the first, a ball later than a trip's limit waits as any wait of a call does, to
    // the call's deadline.
    for (uint32_t trip = 1;; ++trip) {
      uint32_t seen = 0;
      auto arrived = [&] {
        seen = zero.probe.load(std::memory_order_acquire);
        return seen == placementBall(round, trip) || seen == done;
      };
      if (trip == 1 || !spinFor(arrived, kPlacementTripLimit)) {
        waitUntil(trip == 1 ? ctx : timed, 0, "the placement probe's ball from", arrived,
                  zero.probe);
      }
      if (seen == done) break;
      self_.state->probe.store(seen, std::memory_order_release);
      if (trip == 1) notifyAll(self_.state->probe, self_.state->sleepers, wakeOrder_);
    }
  } else {
    waitUntil(
        ctx, 0, "the placement probe's figure from",
        [&] { return zero.probe.load(std::memory_order_acquire) == done; }, zero.probe);
  }
  const uint32_t figure = zero.probeNs.load(std::memory_order_relaxed);
  self_.state->probeSeen.store(round, std::memory_order_release);
  notifyAll(self_.state->probeSeen, self_.state->sleepers, wakeOrder_);
  return figure;
}

}  // namespace gyre
