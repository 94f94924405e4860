// Collective helpers over the store, used while connections do not exist yet.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "runtime/store/store.h"

namespace gyre {

class Bootstrap {
 public:
  // Asked between slices of a wait: a non-ok status stops the wait with that status (the
  // job was found broken elsewhere, e.g. a rank claimed twice).
  using Interrupt = std::function<Status()>;

  Bootstrap(std::shared_ptr<Store> store, int rank, int nranks, std::chrono::milliseconds timeout,
            Interrupt interrupted = {})
      : store_(std::move(store)),
        rank_(rank),
        nranks_(nranks),
        timeout_(timeout),
        interrupted_(std::move(interrupted)) {}

  // Every rank's value, indexed by rank.
  std::vector<std::string> allGather(const std::string& mine);
  void barrier();
  // Stops every rank waiting in this bootstrap (now or later) with `why`, which names what
  // this rank found wrong; then throws it as invalid_usage.
  [[noreturn]] void abort(const std::string& why);
  Store& store() { return *store_; }
  const std::shared_ptr<Store>& sharedStore() const { return store_; }

 private:
  // Waits for `keys` until the deadline, in slices that look for an abort in between.
  void waitFor(const std::vector<std::string>& keys, const std::string& what);
  Status abortedElsewhere();

  std::shared_ptr<Store> store_;
  int rank_;
  int nranks_;
  std::chrono::milliseconds timeout_;
  Interrupt interrupted_;
  int generation_ = 0;
};

}  // namespace gyre
