// Key-value store the ranks meet through. Every blocking call has a timeout.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace gyre {

class Store {
 public:
  using Duration = std::chrono::milliseconds;
  virtual ~Store() = default;

  virtual void set(const std::string& key, const std::string& value) = 0;
  // Waits until the key exists; throws Failure(timeout) after `timeout`.
  virtual std::string get(const std::string& key, Duration timeout) = 0;
  // Adds delta to the integer stored at key (0 when absent); returns the new value.
  virtual int64_t add(const std::string& key, int64_t delta) = 0;
  // Waits until every key exists.
  virtual void wait(const std::vector<std::string>& keys, Duration timeout) = 0;
  // Sets key to desired if its value is `expected` (absent counts as ""); returns the value
  // stored afterwards.
  virtual std::string compareSet(const std::string& key, const std::string& expected,
                                 const std::string& desired) = 0;
  // Removes key; returns whether it existed.
  virtual bool remove(const std::string& key) = 0;
};

// Process-local store for tests and single-process use.
std::shared_ptr<Store> makeMemoryStore();

// Every key goes under `prefix + "/"` of the inner store.
std::shared_ptr<Store> makePrefixStore(std::string prefix, std::shared_ptr<Store> inner);

}  // namespace gyre
