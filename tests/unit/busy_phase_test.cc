// The busy phase of waits (base/wait.h): pollFor's outcome, and how SpinBudget learns from it.
#include <doctest/doctest.h>

#include <chrono>

#include "base/wait.h"

using namespace std::chrono_literals;
using gyre::BusyPhase;
using gyre::Clock;
using gyre::pollFor;
using gyre::SpinBudget;

TEST_CASE("pollFor: true once ready holds, false after the phase, nothing without one") {
  int looks = 0;
  CHECK(pollFor(BusyPhase{1ms}, [&] { return ++looks == 500; }));
  CHECK(looks == 500);
  const auto start = Clock::now();
  CHECK_FALSE(pollFor(BusyPhase{2ms}, [] { return false; }));
  CHECK(Clock::now() - start >= 2ms);
  looks = 0;
  CHECK_FALSE(pollFor(BusyPhase{0ms}, [&] { return ++looks > 0; }));
  CHECK(looks == 0);
  CHECK(pollFor(BusyPhase{1ms, true}, [&] { return ++looks == 100; }));  // yielding
}

TEST_CASE("SpinBudget: halves on every poll that ran out, doubles after a run of met ones") {
  SpinBudget budget(50us, 2000us);
  CHECK(budget.current() == 2000us);
  budget.update(false);
  CHECK(budget.current() == 1000us);
  for (int i = 0; i < 10; ++i) budget.update(false);
  CHECK(budget.current() == 50us);  // not below the shortest
  for (uint32_t i = 0; i + 1 < SpinBudget::kMetToGrow; ++i) budget.update(true);
  CHECK(budget.current() == 50us);
  budget.update(false);  // a poll that ran out starts the count again
  for (uint32_t i = 0; i + 1 < SpinBudget::kMetToGrow; ++i) budget.update(true);
  CHECK(budget.current() == 50us);
  budget.update(true);
  CHECK(budget.current() == 100us);
  for (int round = 0; round < 10; ++round)
    for (uint32_t i = 0; i < SpinBudget::kMetToGrow; ++i) budget.update(true);
  CHECK(budget.current() == 2000us);  // not above the longest
}

TEST_CASE("pollFor with a budget: polls as long as it says and teaches it") {
  SpinBudget budget(50us, 1600us);
  // Ready at once: the first looks meet it, which says nothing about long polls.
  CHECK(pollFor(BusyPhase{0ms, false, &budget}, [] { return true; }));
  CHECK(budget.current() == 1600us);
  const auto start = Clock::now();
  CHECK_FALSE(pollFor(BusyPhase{0ms, false, &budget}, [] { return false; }));
  CHECK(Clock::now() - start >= 1600us);
  CHECK(budget.current() == 800us);
  // Yielding waits (ranks outnumber cores) keep their fixed phase and leave it alone.
  CHECK_FALSE(pollFor(BusyPhase{100us, true, &budget}, [] { return false; }));
  CHECK(budget.current() == 800us);
}

// A poll met after its first looks counts towards growing. The phase is long enough here that
// losing the CPU in the middle of one (a loaded machine) cannot make it run out.
TEST_CASE("pollFor with a budget: polls met after their first looks grow it") {
  SpinBudget budget(1ms, 400ms);
  budget.update(false);
  REQUIRE(budget.current() == 200ms);
  for (uint32_t i = 0; i < SpinBudget::kMetToGrow; ++i) {
    int looks = 0;
    CHECK(pollFor(BusyPhase{0ms, false, &budget}, [&] { return ++looks == 200; }));
  }
  CHECK(budget.current() == 400ms);
}
