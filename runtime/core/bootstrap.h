// Collective helpers over the store, used while connections do not exist yet.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "runtime/store/store.h"

namespace gyre {

class Bootstrap {
 public:
  Bootstrap(std::shared_ptr<Store> store, int rank, int nranks, std::chrono::milliseconds timeout)
      : store_(std::move(store)), rank_(rank), nranks_(nranks), timeout_(timeout) {}

  // Every rank's value, indexed by rank.
  std::vector<std::string> allGather(const std::string& mine);
  void barrier();
  Store& store() { return *store_; }
  const std::shared_ptr<Store>& sharedStore() const { return store_; }

 private:
  std::shared_ptr<Store> store_;
  int rank_;
  int nranks_;
  std::chrono::milliseconds timeout_;
  int generation_ = 0;
};

}  // namespace gyre
