// A communicator's asynchronous calls, run one at a time in issue order: by its worker thread,
// or by a thread that waits for one of them. A waiter whose call is queued behind nothing that
// runs takes the calls in front of it, and then its own, off the queue and runs them itself
// instead of sleeping until the worker has: a call issued and waited for at once (torch's
// synchronous collectives) then costs no hand-over to the worker and back, which is two
// wake-ups (10-50 us each on a loaded host) around a call that may take well under a
// microsecond. The worker still runs what nobody waits for.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace gyre {

class CallQueue {
 public:
  using Clock = std::chrono::steady_clock;
  // `withWorker` false: no worker thread; calls run only on threads that wait or drain (tests).
  explicit CallQueue(bool withWorker = true) : withWorker_(withWorker) {}
  // The queue must have been stopped.
  ~CallQueue();
  CallQueue(const CallQueue&) = delete;
  CallQueue& operator=(const CallQueue&) = delete;

  // Queues `call`. `helpable`: a waiting thread may run it (calls that wait on a CUDA stream
  // stay on the worker, which has none of the caller's thread state to disturb).
  void push(std::function<void()> call, bool helpable);
  // Until `done()` or `deadline`: runs the front call whenever nothing runs and it may, else
  // sleeps until a call ends. A call it runs may end after the deadline (each call ends by the
  // communicator's timeout). Returns done().
  bool help(const std::function<bool()>& done, Clock::time_point deadline);
  // Until every queued call ended, helping as above; at once on a thread running one of them.
  void drain();
  bool idle() const { return unfinished_.load(std::memory_order_acquire) == 0; }
  // Lets the worker finish what is queued, joins it, and waits for waiters still inside help().
  void stop();

 private:
  struct Call {
    std::function<void()> run;
    bool helpable;
  };
  bool frontRunnable(bool byHelper) const;
  // Runs the front call with the lock released; back under the lock after.
  void runFront(std::unique_lock<std::mutex>& lock);
  void workerLoop();

  const bool withWorker_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;     // a call ended or a waiter left: for waiters, stop()
  std::condition_variable workerWake_;  // a call queued, or stop(): for the worker
  std::deque<Call> calls_;
  std::atomic<size_t> unfinished_{0};  // queued or running; changed under mutex_
  bool running_ = false;               // a call runs, on the worker or a helper
  int helpers_ = 0;                    // threads inside help() or drain()
  bool stopping_ = false;
  std::thread worker_;
};

}  // namespace gyre
