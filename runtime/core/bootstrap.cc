#include "runtime/core/bootstrap.h"

#include <algorithm>

namespace gyre {

namespace {
constexpr auto kSlice = std::chrono::milliseconds(200);
const char* const kAbortKey = "bootstrap/abort";
}  // namespace

Status Bootstrap::abortedElsewhere() {
  try {
    return {Code::invalid_usage, store_->get(kAbortKey, std::chrono::milliseconds(0))};
  } catch (const Failure&) {
    // No abort recorded (or the store is gone: the deadline still holds).
  }
  return interrupted_ ? interrupted_() : Status{};
}

void Bootstrap::abort(const std::string& why) {
  try {
    store_->compareSet(kAbortKey, "", why);
  } catch (const Failure&) {
    // The others still learn it from their own checks or their deadline.
  }
  fail(Code::invalid_usage, why);
}

void Bootstrap::waitFor(const std::vector<std::string>& keys, const std::string& what) {
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    try {
      store_->wait(keys, std::clamp(left, std::chrono::milliseconds(0), kSlice));
      return;
    } catch (const Failure& f) {
      if (f.status().code != Code::timeout) {
        fail(f.status().code, "rank " + std::to_string(rank_) + ": " + what + ": " + f.what());
      }
      if (Status s = abortedElsewhere(); !s.ok()) {
        fail(s.code, "rank " + std::to_string(rank_) + ": " + what + " stopped: " + s.message);
      }
      if (left <= kSlice) {
        fail(Code::timeout, "the keys of " + what + " did not all appear within " +
                                std::to_string(timeout_.count()) + " ms");
      }
    }
  }
}

std::vector<std::string> Bootstrap::allGather(const std::string& mine) {
  const std::string prefix = "allgather/" + std::to_string(generation_++) + "/";
  store_->set(prefix + std::to_string(rank_), mine);
  std::vector<std::string> keys;
  for (int r = 0; r < nranks_; ++r) keys.push_back(prefix + std::to_string(r));
  try {
    waitFor(keys, "bootstrap");
  } catch (const Failure& f) {
    if (f.status().code != Code::timeout) throw;
    // Name the ranks that never arrived.
    std::string missing;
    for (int r = 0; r < nranks_; ++r) {
      try {
        store_->get(keys[r], std::chrono::milliseconds(0));
      } catch (const Failure&) {
        missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      }
    }
    fail(f.status().code, "rank " + std::to_string(rank_) + ": bootstrap: ranks [" + missing +
                              "] did not join within " + std::to_string(timeout_.count()) +
                              " ms (" + f.status().message + ")");
  }
  std::vector<std::string> all(nranks_);
  for (int r = 0; r < nranks_; ++r) all[r] = store_->get(keys[r], timeout_);
  return all;
}

void Bootstrap::barrier() {
  const std::string key = "barrier/" + std::to_string(generation_++);
  if (store_->add(key, 1) == nranks_) store_->set(key + "/done", "1");
  try {
    waitFor({key + "/done"}, "bootstrap barrier");
  } catch (const Failure& f) {
    if (f.status().code != Code::timeout) throw;
    fail(f.status().code,
         "rank " + std::to_string(rank_) + ": bootstrap barrier: " + f.status().message);
  }
}

}  // namespace gyre
