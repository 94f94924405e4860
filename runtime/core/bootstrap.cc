#include "runtime/core/bootstrap.h"

#include "base/status.h"

namespace gyre {

std::vector<std::string> Bootstrap::allGather(const std::string& mine) {
  const std::string prefix = "allgather/" + std::to_string(generation_++) + "/";
  store_->set(prefix + std::to_string(rank_), mine);
  std::vector<std::string> keys;
  for (int r = 0; r < nranks_; ++r) keys.push_back(prefix + std::to_string(r));
  try {
    store_->wait(keys, timeout_);
  } catch (const Failure& f) {
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
    store_->wait({key + "/done"}, timeout_);
  } catch (const Failure& f) {
    fail(f.status().code,
         "rank " + std::to_string(rank_) + ": bootstrap barrier: " + f.status().message);
  }
}

}  // namespace gyre
