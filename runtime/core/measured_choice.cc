#include "runtime/core/measured_choice.h"

#include <algorithm>

#include "base/status.h"

namespace gyre {

bool MeasuredChoice::measures(Collective coll, size_t bytes) {
  if (bytes < kFromBytes || bytes >= kBelowBytes) return false;
  switch (coll) {
    case Collective::all_reduce:
    case Collective::all_gather:
    case Collective::broadcast:
    case Collective::reduce:
    case Collective::reduce_scatter:
    case Collective::gather:
    case Collective::scatter:
    case Collective::all_to_all:
      return true;
    default:
      return false;
  }
}

int MeasuredChoice::key(Collective coll, size_t bytes) {
  int sizeClass = 0;
  while (sizeClass < 63 && (size_t(1) << (sizeClass + 1)) <= bytes) ++sizeClass;
  return (int(coll) << 8) | sizeClass;
}

const MeasuredChoice::Class* MeasuredChoice::find(Collective coll, size_t bytes) const {
  const auto it = classes_.find(key(coll, bytes));
  return it == classes_.end() ? nullptr : &it->second;
}

MeasuredChoice::Class& MeasuredChoice::at(Collective coll, size_t bytes) {
  const auto it = classes_.find(key(coll, bytes));
  if (it == classes_.end()) fail(Code::internal, "measured choice: a class that never started");
  return it->second;
}

const Algorithm* MeasuredChoice::settled(Collective coll, size_t bytes) const {
  const Class* c = find(coll, bytes);
  return c && c->settled ? &c->choice : nullptr;
}

void MeasuredChoice::start(Collective coll, size_t bytes,
                           const std::vector<Algorithm>& algorithms) {
  if (find(coll, bytes)) return;
  if (algorithms.empty()) fail(Code::internal, "measured choice: a class with no algorithm");
  Class c;
  c.algorithms.assign(
      algorithms.begin(),
      algorithms.begin() + std::min<ptrdiff_t>(kMostAlgorithms, ptrdiff_t(algorithms.size())));
  c.choice = c.algorithms.front();
  c.settled = c.algorithms.size() == 1;
  classes_.emplace(key(coll, bytes), std::move(c));
}

bool MeasuredChoice::settling(Collective coll, size_t bytes) {
  Class& c = at(coll, bytes);
  if (c.calls >= kSettlingCalls) return false;
  ++c.calls;
  return true;
}

bool MeasuredChoice::inTrials(Collective coll, size_t bytes) const {
  const Class* c = find(coll, bytes);
  return c && !c->settled && c->calls >= kSettlingCalls && !trialsDone(coll, bytes);
}

uint64_t MeasuredChoice::awaitingDecision() const {
  uint64_t awaiting = 0;
  for (const auto& entry : classes_) {
    const Class& c = entry.second;
    if (!c.settled && c.allBegun()) ++awaiting;
  }
  return awaiting;
}

bool MeasuredChoice::trialsDone(Collective coll, size_t bytes) const {
  const Class* c = find(coll, bytes);
  return c && c->allBegun() && !(pending_ && pendingKey_ == key(coll, bytes));
}

Algorithm MeasuredChoice::nextTrial(Collective coll, size_t bytes) const {
  const Class* c = find(coll, bytes);
  if (!c) fail(Code::internal, "measured choice: a class that never started");
  return c->algorithms[c->times.size() / 2 / kTrialsEach % c->algorithms.size()];
}

void MeasuredChoice::begin(Collective coll, size_t bytes, uint64_t startNs) {
  Class& c = at(coll, bytes);
  c.times.push_back(startNs);
  c.times.push_back(startNs);
  pending_ = true;
  pendingKey_ = key(coll, bytes);
  ++trialCalls_;
}

void MeasuredChoice::end(uint64_t endNs) {
  if (!pending_) return;
  pending_ = false;
  const auto it = classes_.find(pendingKey_);
  if (it != classes_.end()) it->second.times.back() = std::max(endNs, it->second.times.back());
}

const std::vector<uint64_t>& MeasuredChoice::times(Collective coll, size_t bytes) const {
  const Class* c = find(coll, bytes);
  if (!c) fail(Code::internal, "measured choice: a class that never started");
  return c->times;
}

Algorithm MeasuredChoice::decide(Collective coll, size_t bytes,
                                 const std::vector<uint64_t>& everyRank, int nranks) {
  Class& c = at(coll, bytes);
  const size_t per = c.times.size(), algorithms = c.algorithms.size();
  if (nranks < 1 || everyRank.size() != per * size_t(nranks)) {
    fail(Code::internal, "measured choice: " + std::to_string(everyRank.size()) +
                             " trial times for " + std::to_string(nranks) + " ranks of " +
                             std::to_string(per));
  }
  // Each algorithm's trials, each from the last start to the last end over the ranks.
  std::vector<std::vector<uint64_t>> lasted(algorithms);
  for (size_t t = 0; t < per / 2; ++t) {
    uint64_t lastStart = 0, lastEnd = 0;
    for (int r = 0; r < nranks; ++r) {
      lastStart = std::max(lastStart, everyRank[size_t(r) * per + 2 * t]);
      lastEnd = std::max(lastEnd, everyRank[size_t(r) * per + 2 * t + 1]);
    }
    if (t % kTrialsEach < kWarmingTrials) continue;  // its first calls after another's
    lasted[t / kTrialsEach].push_back(lastEnd - std::min(lastStart, lastEnd));
  }
  // Each algorithm's median trial (the mean of the middle two): calls that run ahead (a window
  // broadcast's root) make some trials short and the next long, which the middle two weigh
  // alike, and a trial that carries something else (a rank that lost its core, the start of
  // the next algorithm's first call) moves it little.
  std::vector<uint64_t> median(algorithms);
  for (size_t a = 0; a < algorithms; ++a) {
    std::vector<uint64_t>& v = lasted[a];
    std::sort(v.begin(), v.end());
    const size_t k = v.size();
    median[a] = k % 2 ? v[k / 2] : (v[k / 2 - 1] + v[k / 2]) / 2;
  }
  size_t best = 0;
  for (size_t a = 1; a < algorithms; ++a) {
    if (median[a] < median[best]) best = a;
  }
  if (best != 0 && double(median[best]) >= (1 - kMargin) * double(median[0])) best = 0;
  c.choice = c.algorithms[best];
  c.medians = std::move(median);
  c.settled = true;
  ++decisions_;
  if (best != 0) ++changes_;
  return c.choice;
}

std::vector<std::pair<Algorithm, uint64_t>> MeasuredChoice::medians(Collective coll,
                                                                    size_t bytes) const {
  std::vector<std::pair<Algorithm, uint64_t>> m;
  const Class* c = find(coll, bytes);
  if (!c) return m;
  for (size_t a = 0; a < c->medians.size(); ++a) m.emplace_back(c->algorithms[a], c->medians[a]);
  return m;
}

}  // namespace gyre
