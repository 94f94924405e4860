// The C API's work handles: what gyreGroupEndAsync returns, one part per communicator.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>

#include "runtime/api/api_internal.h"

using namespace gyre::api;

namespace {
gyreResult_t waitForWork(gyreWork_t work, int timeoutMs, bool mayRun) {
  return guarded([&] {
    if (!work) gyre::fail(gyre::Code::invalid_argument, "work is null");
    if (timeoutMs < 0) gyre::fail(gyre::Code::invalid_argument, "timeoutMs is negative");
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeoutMs);
    for (auto& part : work->parts) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      const gyre::Status s = part->wait(std::max(left, std::chrono::milliseconds(0)), mayRun);
      if (!s.ok()) throw gyre::Failure(s);
    }
  });
}
}  // namespace

extern "C" {

gyreResult_t gyreWorkWait(gyreWork_t work, int timeoutMs) {
  return waitForWork(work, timeoutMs, true);
}

gyreResult_t gyreWorkWaitPassive(gyreWork_t work, int timeoutMs) {
  return waitForWork(work, timeoutMs, false);
}

gyreResult_t gyreWorkTest(gyreWork_t work, int* done) {
  return guarded([&] {
    if (!work || !done) gyre::fail(gyre::Code::invalid_argument, "work or done is null");
    *done = 1;
    for (auto& part : work->parts)
      if (!part->test()) *done = 0;
  });
}

gyreResult_t gyreWorkFree(gyreWork_t work) {
  return guarded([&] {
    if (!work) return;
    for (auto& part : work->parts) part->wait(std::chrono::hours(24 * 365));
    delete work;
  });
}

gyreResult_t gyreWorkOnEnd(gyreWork_t work, gyreWorkCallback_t fn, void* arg) {
  return guarded([&] {
    if (!work || !fn) gyre::fail(gyre::Code::invalid_argument, "work or fn is null");
    if (work->onEndSet) gyre::fail(gyre::Code::invalid_usage, "a work takes one end callback");
    work->onEndSet = true;
    if (work->parts.empty()) return fn(arg);
    // The part that ends last calls fn.
    auto left = std::make_shared<std::atomic<size_t>>(work->parts.size());
    for (auto& part : work->parts) {
      part->onEnd([left, fn, arg] {
        if (left->fetch_sub(1, std::memory_order_acq_rel) == 1) fn(arg);
      });
    }
  });
}

}  // extern "C"
