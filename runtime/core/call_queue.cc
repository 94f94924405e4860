#include "runtime/core/call_queue.h"

#include <cassert>

namespace gyre {

namespace {
// The queue whose call this thread runs: that call's own blocking collectives must not drain
// the queue it is part of.
thread_local const CallQueue* runningHere = nullptr;
}  // namespace

CallQueue::~CallQueue() {
  assert(!worker_.joinable() && helpers_ == 0);
}

void CallQueue::push(std::function<void()> call, bool helpable) {
  std::lock_guard lock(mutex_);
  if (withWorker_ && !worker_.joinable()) worker_ = std::thread([this] { workerLoop(); });
  ++unfinished_;
  calls_.push_back({std::move(call), helpable});
  workerWake_.notify_one();
}

bool CallQueue::frontRunnable(bool byHelper) const {
  return !running_ && !calls_.empty() && (!byHelper || !withWorker_ || calls_.front().helpable);
}

void CallQueue::runFront(std::unique_lock<std::mutex>& lock) {
  auto call = std::move(calls_.front().run);
  calls_.pop_front();
  running_ = true;
  lock.unlock();
  const CallQueue* outer = runningHere;
  runningHere = this;
  call();  // the calls catch their own failures (Communicator::async)
  runningHere = outer;
  lock.lock();
  running_ = false;
  --unfinished_;
  changed_.notify_all();
  if (!calls_.empty()) workerWake_.notify_one();  // a waiter that ran this may not run the next
}

void CallQueue::workerLoop() {
  std::unique_lock lock(mutex_);
  while (true) {
    workerWake_.wait(lock, [&] { return frontRunnable(false) || (stopping_ && calls_.empty()); });
    if (!frontRunnable(false)) return;  // stopping, nothing left
    runFront(lock);
  }
}

bool CallQueue::help(const std::function<bool()>& done, Clock::time_point deadline) {
  std::unique_lock lock(mutex_);
  ++helpers_;
  while (!done()) {
    if (frontRunnable(true)) {
      runFront(lock);
    } else if (deadline == Clock::time_point::max()) {
      changed_.wait(lock);
    } else if (changed_.wait_until(lock, deadline) == std::cv_status::timeout) {
      break;
    }
  }
  const bool finished = done();
  --helpers_;
  changed_.notify_all();  // stop() waits for the helpers to leave
  return finished;
}

void CallQueue::drain() {
  if (idle() || runningHere == this) return;
  help([this] { return unfinished_.load(std::memory_order_relaxed) == 0; },
       Clock::time_point::max());
}

void CallQueue::stop() {
  std::unique_lock lock(mutex_);
  stopping_ = true;
  workerWake_.notify_all();
  if (worker_.joinable()) {
    lock.unlock();
    worker_.join();
    lock.lock();
  }
  // Without a worker (or once it has left), what is left runs here.
  while (frontRunnable(false)) runFront(lock);
  changed_.wait(lock, [&] { return helpers_ == 0 && unfinished_ == 0; });
}

}  // namespace gyre
