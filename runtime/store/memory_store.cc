#include <condition_variable>
#include <map>
#include <mutex>

#include "base/status.h"
#include "runtime/store/store.h"

namespace gyre {

namespace {

class MemoryStore : public Store {
 public:
  void set(const std::string& key, const std::string& value) override {
    std::lock_guard lock(mutex_);
    data_[key] = value;
    changed_.notify_all();
  }
  std::string get(const std::string& key, Duration timeout) override {
    wait({key}, timeout);
    std::lock_guard lock(mutex_);
    return data_.at(key);
  }
  int64_t add(const std::string& key, int64_t delta) override {
    std::lock_guard lock(mutex_);
    auto it = data_.find(key);
    int64_t value = 0;
    if (it != data_.end()) {
      try {
        value = std::stoll(it->second);
      } catch (const std::exception&) {
        fail(Code::invalid_usage, "store key '" + key + "' does not hold an integer");
      }
    }
    value = int64_t(uint64_t(value) + uint64_t(delta));
    data_[key] = std::to_string(value);
    changed_.notify_all();
    return value;
  }
  void wait(const std::vector<std::string>& keys, Duration timeout) override {
    std::unique_lock lock(mutex_);
    auto present = [&] {
      for (const auto& k : keys)
        if (!data_.count(k)) return false;
      return true;
    };
    if (!changed_.wait_for(lock, timeout, present)) {
      fail(Code::timeout, "store wait timed out after " + std::to_string(timeout.count()) +
                              " ms for key '" + keys.front() + "'" +
                              (keys.size() > 1 ? " and others" : ""));
    }
  }
  std::string compareSet(const std::string& key, const std::string& expected,
                         const std::string& desired) override {
    std::lock_guard lock(mutex_);
    auto it = data_.find(key);
    const std::string current = it == data_.end() ? std::string() : it->second;
    if (current != expected) return current;
    data_[key] = desired;
    changed_.notify_all();
    return desired;
  }
  bool remove(const std::string& key) override {
    std::lock_guard lock(mutex_);
    return data_.erase(key) != 0;
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, std::string> data_;
};

class PrefixStore : public Store {
 public:
  PrefixStore(std::string prefix, std::shared_ptr<Store> inner)
      : prefix_(std::move(prefix) + "/"), inner_(std::move(inner)) {}
  void set(const std::string& key, const std::string& value) override {
    inner_->set(prefix_ + key, value);
  }
  std::string get(const std::string& key, Duration timeout) override {
    return inner_->get(prefix_ + key, timeout);
  }
  int64_t add(const std::string& key, int64_t delta) override {
    return inner_->add(prefix_ + key, delta);
  }
  void wait(const std::vector<std::string>& keys, Duration timeout) override {
    std::vector<std::string> full;
    full.reserve(keys.size());
    for (const auto& k : keys) full.push_back(prefix_ + k);
    inner_->wait(full, timeout);
  }
  std::string compareSet(const std::string& key, const std::string& expected,
                         const std::string& desired) override {
    return inner_->compareSet(prefix_ + key, expected, desired);
  }
  bool remove(const std::string& key) override { return inner_->remove(prefix_ + key); }

 private:
  std::string prefix_;
  std::shared_ptr<Store> inner_;
};

}  // namespace

std::shared_ptr<Store> makeMemoryStore() {
  return std::make_shared<MemoryStore>();
}

std::shared_ptr<Store> makePrefixStore(std::string prefix, std::shared_ptr<Store> inner) {
  return std::make_shared<PrefixStore>(std::move(prefix), std::move(inner));
}

}  // namespace gyre
