// Ranks as threads: n communicators in one process over real loopback tcp, through a real
// rendezvous server. The first failure of any rank is rethrown on the test's thread.
#pragma once

#include <exception>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "runtime/core/communicator.h"
#include "runtime/store/server.h"

namespace gyre::test {

inline void onThreads(int n, const std::function<void(int)>& body) {
  std::vector<std::exception_ptr> errors(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        body(r);
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

class ThreadJob {
 public:
  // `base` supplies timeouts and slot geometry; rank, size and rendezvous are filled in.
  ThreadJob(int n, CommConfig base, const std::string& jobId)
      : server_(serverOptions(base)), comms_(n) {
    server_.start();
    onThreads(n, [&](int r) {
      CommConfig c = base;
      c.rank = r;
      c.nranks = n;
      c.rendezvous = server_.address();
      c.jobId = jobId;
      comms_[r] = Communicator::create(c);
    });
  }
  int size() const { return int(comms_.size()); }
  Communicator& comm(int r) { return *comms_[r]; }
  void run(const std::function<void(Communicator&, int)>& body) {
    onThreads(size(), [&](int r) { body(*comms_[r], r); });
  }
  // Destroys one rank's communicator (a peer leaving).
  void destroy(int r) { comms_[r].reset(); }
  StoreServer& server() { return server_; }

 private:
  static StoreServerOptions serverOptions(const CommConfig& base) {
    StoreServerOptions o;
    o.secret = base.secret;
    return o;
  }
  StoreServer server_;
  std::vector<std::unique_ptr<Communicator>> comms_;
};

inline CommConfig tinySlots(std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
  CommConfig c;
  c.timeout = timeout;
  c.slotBytes = 256;  // forces many slices per step
  c.nSlots = 4;
  return c;
}

}  // namespace gyre::test
