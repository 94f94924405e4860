// The host window's round-trip probe: two threads bounce it as two ranks' CPUs would, and a
// partner that never answers costs the wait, not a hang.
#include <doctest/doctest.h>

#include <thread>

#include "link/mailbox.h"

namespace gyre {
namespace {

TEST_CASE("the round-trip probe measures a partner that answers") {
  MailState measuring, answering;
  std::thread partner([&] { answerRoundTrips(answering, measuring, std::chrono::seconds(10)); });
  const double ns = measureRoundTrip(measuring, answering, std::chrono::seconds(10));
  partner.join();  // returns once the measuring side says it is done
  // One trip is two cache-line transfers; on a shared core, a time slice at most.
  CHECK(ns > 0);
  CHECK(ns < 50e6);
  // Both words end where the probe left them, the measuring side's marked done.
  CHECK(measuring.probe.load() != answering.probe.load());
}

TEST_CASE("the round-trip probe gives up on a partner that never answers") {
  MailState measuring, silent;
  const auto start = Clock::now();
  CHECK(measureRoundTrip(measuring, silent, std::chrono::milliseconds(50)) == 0);
  CHECK(Clock::now() - start < std::chrono::seconds(5));
  // The answering side gives up on a partner that never starts, too.
  MailState answering, absent;
  answerRoundTrips(answering, absent, std::chrono::milliseconds(50));
  CHECK(answering.probe.load() == 0);
}

}  // namespace
}  // namespace gyre

// The set-up's measure of the kernel's copy against a memcpy: a process may always read its own
// memory, so there is a figure, and a copy through a system call is never faster than a
// memcpy of cached bytes by much (nor slower by more than the slowest machine seen, 100 times).
TEST_CASE("the kernel's copy against a memcpy: a ratio, measured") {
  const gyre::KernelCopy copy = gyre::measureKernelCopy();
  MESSAGE("a kernel copy of 1 MiB takes " << copy.microseconds << " us, " << copy.ratio
                                          << " times a memcpy's time here");
  CHECK(copy.ratio > 0.5);
  CHECK(copy.ratio < 100);
  // At least a copy at 1 TB/s, at most one at 100 MB/s.
  CHECK(copy.microseconds > 1);
  CHECK(copy.microseconds < 10000);
}
