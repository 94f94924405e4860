// The measured choice's exchange of trial times (OneShot::shareTrials, algorithms/oneshot.h):
// each rank writes its times into its own MailTrials (link/mailbox.h) and reads every other's.
#include <algorithm>

#include "algorithms/oneshot.h"

namespace gyre {

std::vector<uint64_t> OneShot::shareTrials(const OpContext& ctx,
                                           const std::vector<uint64_t>& mine) {
  const int n = window_.nranks();
  if (mine.size() > MailTrials::kTimes) {
    fail(Code::internal, who(ctx) + ": " + std::to_string(mine.size()) + " trial times");
  }
  const uint32_t round = ++trialRound_;
  // The times of the round before must have reached every rank before they are overwritten.
  for (int r = 0; r < n; ++r) {
    if (r == rank_) continue;
    MailTrials& theirs = *boxes_[size_t(r)].trials;
    waitUntil(
        ctx, r, "the measured choice's last trial times read by",
        [&] { return theirs.seen.load(std::memory_order_acquire) >= round - 1; }, theirs.seen);
  }
  MailTrials& own = *self_.trials;
  own.count = uint32_t(mine.size());
  std::copy(mine.begin(), mine.end(), own.ns);
  own.round.store(round, std::memory_order_release);
  notifyAll(own.round, self_.state->sleepers, wakeOrder_);
  std::vector<uint64_t> all(size_t(n) * mine.size());
  for (int r = 0; r < n; ++r) {
    uint64_t* into = all.data() + size_t(r) * mine.size();
    if (r == rank_) {
      std::copy(mine.begin(), mine.end(), into);
      continue;
    }
    MailTrials& theirs = *boxes_[size_t(r)].trials;
    waitUntil(
        ctx, r, "the measured choice's trial times from",
        [&] { return theirs.round.load(std::memory_order_acquire) >= round; }, theirs.round);
    // Every rank times the same calls: a count that differs is a rank that ran other calls.
    if (theirs.count != mine.size()) {
      throw Failure(Status{Code::invalid_usage,
                           who(ctx) + ": ranks disagree: rank " + std::to_string(r) + " timed " +
                               std::to_string(theirs.count / 2) +
                               " trial calls of this collective and size, this rank " +
                               std::to_string(mine.size() / 2),
                           r});
    }
    std::copy(theirs.ns, theirs.ns + mine.size(), into);
  }
  own.seen.store(round, std::memory_order_release);
  notifyAll(own.seen, self_.state->sleepers, wakeOrder_);
  return all;
}

}  // namespace gyre
