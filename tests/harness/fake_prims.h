// A fake Prims that runs an algorithm for n simulated ranks (one thread each) over bounded
// in-memory links with the same slicing as HostPrims. It records what each rank sent and
// detects deadlock exactly: when every unfinished rank is blocked, all of them fail.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "gyre/types.h"
#include "tests/harness/ref_op.h"

namespace gyre::test {

struct Deadlock : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class FakeNetwork {
 public:
  FakeNetwork(int n, size_t slotElems, size_t nSlots)
      : n_(n),
        slotElems_(slotElems),
        nSlots_(nSlots),
        queues_(size_t(n) * n),
        waiters_(n),
        alive_(n) {}

  size_t slotElems() const { return slotElems_; }
  // The chunk an algorithm may use per step: half a link, as the communicator does.
  size_t chunkElems() const { return std::max<size_t>(1, nSlots_ / 2 * slotElems_); }

  // One bounded queue per ordered pair of ranks, like a link.
  void push(int from, int to, std::vector<double> slice) {
    std::unique_lock lock(mutex_);
    const size_t q = queue(from, to);
    waitFor(lock, from, q, /*forSpace=*/true, [&] { return queues_[q].size() < nSlots_; });
    queues_[q].push_back(std::move(slice));
    wake(to, q, /*forSpace=*/false);
  }
  std::vector<double> pop(int from, int self) {
    std::unique_lock lock(mutex_);
    const size_t q = queue(from, self);
    waitFor(lock, self, q, /*forSpace=*/false, [&] { return !queues_[q].empty(); });
    auto slice = std::move(queues_[q].front());
    queues_[q].pop_front();
    wake(from, q, /*forSpace=*/true);
    return slice;
  }
  void finished() {
    std::lock_guard lock(mutex_);
    --alive_;
    if (alive_ > 0 && blocked_ == alive_) declareDeadlock();
  }
  bool drained() const {
    for (auto& q : queues_)
      if (!q.empty()) return false;
    return true;
  }
  int n() const { return n_; }

 private:
  // A rank blocked on one queue: only the rank at that queue's other end can unblock it.
  struct Waiter {
    std::condition_variable cv;
    size_t queue = 0;
    bool forSpace = false;
    bool blocked = false;
  };

  size_t queue(int from, int to) const {
    if (from < 0 || from >= n_ || to < 0 || to >= n_ || from == to) {
      throw std::logic_error("an algorithm named a bad peer");
    }
    return size_t(from) * n_ + to;
  }
  // Wakes `rank` alone, and only when it waits for what just changed: a waiter per rank
  // instead of one broadcast keeps the threads from waking each other for nothing.
  void wake(int rank, size_t q, bool forSpace) {
    Waiter& w = waiters_[rank];
    if (w.blocked && w.queue == q && w.forSpace == forSpace) {
      w.blocked = false;
      --blocked_;
      w.cv.notify_one();
    }
  }
  void declareDeadlock() {
    deadlocked_ = true;
    for (Waiter& w : waiters_) w.cv.notify_one();
  }

  // blocked_ counts ranks waiting for a change that no one has made yet; when every live
  // rank is among them, none of them can ever move again.
  template <class Ready>
  void waitFor(std::unique_lock<std::mutex>& lock, int self, size_t q, bool forSpace, Ready ready) {
    Waiter& w = waiters_[self];
    while (!ready()) {
      if (deadlocked_) throw Deadlock("another rank deadlocked");
      if (blocked_ + 1 == alive_) {
        declareDeadlock();
        throw Deadlock("deadlock: every unfinished rank is blocked");
      }
      w.queue = q;
      w.forSpace = forSpace;
      w.blocked = true;
      ++blocked_;
      w.cv.wait(lock, [&] { return !w.blocked || deadlocked_; });
      if (w.blocked) {
        w.blocked = false;
        --blocked_;
      }
    }
  }

  int n_;
  size_t slotElems_;
  size_t nSlots_;
  std::mutex mutex_;
  std::vector<std::deque<std::vector<double>>> queues_;
  std::vector<Waiter> waiters_;
  int alive_;
  int blocked_ = 0;
  bool deadlocked_ = false;
};

// Element values are doubles; reductions are exact for the small integers the tests use.
class FakePrims {
 public:
  FakePrims(FakeNetwork& net, int rank, RedOp op, const std::vector<double>& in,
            std::vector<double>& out)
      : net_(net), rank_(rank), op_(op), in_(&in), out_(out) {}

  size_t sentElems = 0;
  std::map<int, size_t> sentTo;  // elements sent to each peer
  size_t calls = 0;
  std::vector<int> peersUsed;  // every rank named in setPeers

  void setPeers(const int* recv, int nRecv, const int* send, int nSend) {
    recv_.assign(recv, recv + nRecv);
    send_.assign(send, send + nSend);
    peersUsed.insert(peersUsed.end(), recv_.begin(), recv_.end());
    peersUsed.insert(peersUsed.end(), send_.begin(), send_.end());
  }
  void useOutputAsInput() { in_ = &out_; }

  void send(size_t i, size_t n) { run(kIn | kSend, i, 0, n, false); }
  void recv(size_t o, size_t n) { run(kRecv | kOut, 0, o, n, false); }
  void recvSend(size_t n) { run(kRecv | kSend, 0, 0, n, false); }
  void copySend(size_t i, size_t o, size_t n) { run(kIn | kOut | kSend, i, o, n, false); }
  void recvCopySend(size_t o, size_t n) { run(kRecv | kOut | kSend, 0, o, n, false); }
  void recvReduceSend(size_t i, size_t n) { run(kRecv | kIn | kSend, i, 0, n, false); }
  void recvReduceCopy(size_t i, size_t o, size_t n, bool fin) {
    run(kRecv | kIn | kOut, i, o, n, fin);
  }
  void recvReduceCopySend(size_t i, size_t o, size_t n, bool fin) {
    run(kRecv | kIn | kOut | kSend, i, o, n, fin);
  }
  void localCopy(size_t i, size_t o, size_t n) { run(kIn | kOut, i, o, n, false); }
  void sendMarker() {
    ++calls;
    for (int to : send_) net_.push(rank_, to, {});
  }
  void recvMarker() {
    ++calls;
    for (int from : recv_)
      if (!net_.pop(from, rank_).empty()) throw std::logic_error("a marker carried data");
  }
  void holdSends(bool) {}  // every push lands at once

 private:
  enum : unsigned { kRecv = 1, kIn = 2, kOut = 4, kSend = 8 };

  void run(unsigned what, size_t inOff, size_t outOff, size_t n, bool fin) {
    ++calls;
    if (((what & kRecv) && recv_.empty()) || ((what & kSend) && send_.empty()) ||
        ((what & kRecv) && !(what & kIn) && recv_.size() != 1)) {
      throw std::logic_error("a primitive does not fit the peers set");
    }
    for (size_t done = 0; done < n; done += net_.slotElems()) {
      const size_t k = std::min(net_.slotElems(), n - done);
      std::vector<std::vector<double>> got;
      for (int from : (what & kRecv) ? recv_ : std::vector<int>{}) {
        got.push_back(net_.pop(from, rank_));
        if (got.back().size() != k) throw std::logic_error("slice size differs between ranks");
      }
      std::vector<double> slice(k);
      for (size_t e = 0; e < k; ++e) {
        double v = (what & kIn) ? in_->at(inOff + done + e) : got.at(0)[e];
        if (what & kIn)
          for (auto& g : got) v = refOp(op_, v, g[e]);
        if ((what & kIn) && !got.empty() && fin && op_ == RedOp::avg) v /= net_.n();
        if (what & kOut) out_.at(outOff + done + e) = v;
        slice[e] = v;
      }
      if (what & kSend) {
        for (int to : send_) {
          sentElems += k;
          sentTo[to] += k;
          net_.push(rank_, to, slice);
        }
      }
    }
  }

  FakeNetwork& net_;
  int rank_;
  RedOp op_;
  const std::vector<double>* in_;
  std::vector<double>& out_;
  std::vector<int> recv_, send_;
};

// Runs body(prims, rank) on n threads; returns each rank's elements sent; rethrows the
// first failure.
inline std::vector<size_t> runFake(FakeNetwork& net, RedOp op,
                                   const std::vector<std::vector<double>>& in,
                                   std::vector<std::vector<double>>& out,
                                   const std::function<void(FakePrims&, int)>& body) {
  const int n = net.n();
  std::vector<size_t> sent(n);
  std::vector<std::exception_ptr> errors(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        FakePrims p(net, r, op, in[r], out[r]);
        body(p, r);
        sent[r] = p.sentElems;
      } catch (...) {
        errors[r] = std::current_exception();
      }
      net.finished();
    });
  }
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
  if (!net.drained()) throw std::logic_error("slices left unconsumed in a link");
  return sent;
}

}  // namespace gyre::test
