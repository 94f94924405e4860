// The primitives of algorithms/prims.h over links in GPU memory (transport/cuda_ipc), run by
// one group of cooperating threads per channel: inside a CUDA kernel, one thread block
// (DevicePrims, algorithms/device_prims.cuh); in the tests, one host thread. What differs
// between the two is the `Env`: how the group synchronises, how counters are loaded and
// stored, the clock, and the element kernels. The protocol is NCCL's "simple" one:
//
//   receive: the leader waits for tail > head and checks the slot's header; barrier; all
//            threads read the slot; barrier; the leader raises head.
//   send:    the leader waits for tail - head < nSlots; barrier; all threads write the slot,
//            fence; barrier; the leader writes the header and raises tail.
//
// A wait that passes the deadline, an abort raised by the host, or a header for another
// collective records the first failure (Env::fail) and turns every later primitive of this
// group into a no-op, so the kernel ends instead of spinning. C++17 and nvcc-clean.
//
// Env provides (GYRE_HD):
//   bool leader(); bool syncAny(bool); void sync();
//   uint64_t load(const uint64_t*);  void store(uint64_t*, uint64_t);   acquire / release
//   void fence();  (every thread, after writing slot data, before the barrier)
//   uint64_t nowNs(); bool abortRaised(); void pause();
//   size_t elemSize();
//   void reduce(void* dst, void* dst2, const void* a, const void* b, size_t n, int divisor);
//   void copy(void* dst, void* dst2, const void* src, size_t bytes);
//   void fail(const DeviceFailure&);
#pragma once

#include "algorithms/common.h"
#include "gyre/types.h"
#include "link/device_link.h"

namespace gyre::algo {

template <class Env>
class SlotPrims {
 public:
  static constexpr int kMaxPeers = kMaxTreeChildren;

  // `expected` carries the call's descriptor (bytes is set per slot).
  GYRE_HD SlotPrims(Env& env, const DeviceLinkTable& links, int channel, int rank, int nranks,
                    const SlotMeta& expected, const void* input, void* output, uint64_t timeoutNs)
      : env_(env),
        links_(links),
        channel_(channel),
        rank_(rank),
        nranks_(nranks),
        expected_(expected),
        input_(static_cast<const unsigned char*>(input)),
        output_(static_cast<unsigned char*>(output)),
        elemSize_(env.elemSize()),
        deadline_(env.nowNs() + timeoutNs) {}

  GYRE_HD bool failed() const { return failed_; }

  GYRE_HD GYRE_OUTLINE void setPeers(const int* recvPeers, int nRecv, const int* sendPeers,
                                     int nSend) {
    if (failed_) return;
    env_.sync();  // the leader's last counter stores are seen by every thread
    bool bad = nRecv < 0 || nRecv > kMaxPeers || nSend < 0 || nSend > kMaxPeers;
    uint32_t slotBytes = 0xffffffffu;
    nRecv_ = bad ? 0 : nRecv;
    nSend_ = bad ? 0 : nSend;
    for (int i = 0; i < nRecv_ && !bad; ++i) {
      recv_[i] = linkOf(links_.recv, recvPeers[i]);
      recvPeer_[i] = recvPeers[i];
      bad = recv_[i].counters == nullptr;
      if (!bad) {
        recvPos_[i] = env_.load(&recv_[i].counters->head);
        slotBytes = recv_[i].slotBytes < slotBytes ? recv_[i].slotBytes : slotBytes;
      }
    }
    for (int i = 0; i < nSend_ && !bad; ++i) {
      send_[i] = linkOf(links_.send, sendPeers[i]);
      sendPeer_[i] = sendPeers[i];
      bad = send_[i].counters == nullptr;
      if (!bad) {
        sendPos_[i] = env_.load(&send_[i].counters->tail);
        slotBytes = send_[i].slotBytes < slotBytes ? send_[i].slotBytes : slotBytes;
      }
    }
    if (bad) {
      if (env_.leader()) {
        DeviceFailure f = failure(DeviceFailureCode::no_link, -1);
        env_.fail(f);
      }
      failed_ = true;
      return;
    }
    const size_t perSlot = slotBytes == 0xffffffffu ? 0 : slotBytes / elemSize_;
    sliceElems_ = perSlot ? perSlot : 1;
  }
  GYRE_HD void useOutputAsInput() { input_ = output_; }

  GYRE_HD void send(size_t inOff, size_t n) { run(kInput | kSend, inOff, 0, n, false); }
  GYRE_HD void recv(size_t outOff, size_t n) { run(kRecv | kOutput, 0, outOff, n, false); }
  GYRE_HD void recvSend(size_t n) { run(kRecv | kSend, 0, 0, n, false); }
  GYRE_HD void copySend(size_t inOff, size_t outOff, size_t n) {
    run(kInput | kOutput | kSend, inOff, outOff, n, false);
  }
  GYRE_HD void recvCopySend(size_t outOff, size_t n) {
    run(kRecv | kOutput | kSend, 0, outOff, n, false);
  }
  GYRE_HD void recvReduceSend(size_t inOff, size_t n) {
    run(kRecv | kInput | kSend, inOff, 0, n, false);
  }
  GYRE_HD void recvReduceCopy(size_t inOff, size_t outOff, size_t n, bool final) {
    run(kRecv | kInput | kOutput, inOff, outOff, n, final);
  }
  GYRE_HD void recvReduceCopySend(size_t inOff, size_t outOff, size_t n, bool final) {
    run(kRecv | kInput | kOutput | kSend, inOff, outOff, n, final);
  }
  GYRE_HD void localCopy(size_t inOff, size_t outOff, size_t n) {
    run(kInput | kOutput, inOff, outOff, n, false);
  }
  GYRE_HD void sendMarker() { step(kSend, 0, 0, 0, false); }
  GYRE_HD void recvMarker() { step(kRecv, 0, 0, 0, false); }
  GYRE_HD void holdSends(bool) {}  // device links batch nothing

 private:
  enum : unsigned { kRecv = 1, kInput = 2, kOutput = 4, kSend = 8 };

  GYRE_HD DeviceLink linkOf(const DeviceLink* table, int peer) const {
    if (peer < 0 || peer >= nranks_ || peer == rank_) {
      DeviceLink none{};
      return none;
    }
    return table[size_t(channel_) * size_t(nranks_) + size_t(peer)];
  }

  GYRE_HD DeviceFailure failure(DeviceFailureCode code, int peer) const {
    DeviceFailure f{};
    f.code = uint32_t(code);
    f.peer = peer;
    f.channel = channel_;
    f.call = expected_;
    return f;
  }

  GYRE_HD GYRE_OUTLINE void run(unsigned what, size_t inOff, size_t outOff, size_t n, bool final) {
    const bool linked = (what & (kRecv | kSend)) != 0;
    if (!linked) return step(what, inOff, outOff, n, final);
    for (size_t done = 0; done < n && !failed_; done += sliceElems_) {
      const size_t k = min_(sliceElems_, n - done);
      step(what, inOff + done, outOff + done, k, final);
    }
  }

  // One slot's worth: `k` elements (0 for a marker).
  GYRE_HD GYRE_OUTLINE void step(unsigned what, size_t inOff, size_t outOff, size_t k, bool final) {
    if (failed_) return;
    const int nRecv = (what & kRecv) ? nRecv_ : 0;
    const int nSend = (what & kSend) ? nSend_ : 0;
    const uint32_t bytes = uint32_t(k * elemSize_);
    // Markers go to and come from every peer set, possibly none; data needs its peers.
    bool ok = k == 0 || (((what & kRecv) == 0 || nRecv > 0) && ((what & kSend) == 0 || nSend > 0) &&
                         (nRecv <= 1 || (what & kInput)));
    if (env_.leader()) {
      if (!ok) env_.fail(failure(DeviceFailureCode::bad_peers, -1));
      for (int i = 0; i < nRecv && ok; ++i) ok = waitRecv(i, bytes);
      for (int i = 0; i < nSend && ok; ++i) ok = waitSend(i);
    }
    if (env_.syncAny(!ok)) {
      failed_ = true;
      return;
    }
    if (k > 0) compute(what, nRecv, nSend, inOff, outOff, k, final);
    env_.fence();
    env_.sync();
    if (env_.leader()) {
      for (int i = 0; i < nSend; ++i) {
        SlotMeta& meta = send_[i].metas[sendPos_[i] % send_[i].nSlots];
        meta = expected_;
        meta.bytes = bytes;
        env_.store(&send_[i].counters->tail, sendPos_[i] + 1);
      }
      for (int i = 0; i < nRecv; ++i) env_.store(&recv_[i].counters->head, recvPos_[i] + 1);
    }
    for (int i = 0; i < nSend; ++i) ++sendPos_[i];
    for (int i = 0; i < nRecv; ++i) ++recvPos_[i];
  }

  GYRE_HD GYRE_OUTLINE void compute(unsigned what, int nRecv, int nSend, size_t inOff,
                                    size_t outOff, size_t k, bool final) {
    const int divisor = (final && expected_.op == uint8_t(RedOp::avg)) ? nranks_ : 0;
    const unsigned char* in = (what & kInput) ? input_ + inOff * elemSize_ : nullptr;
    unsigned char* out = (what & kOutput) ? output_ + outOff * elemSize_ : nullptr;
    unsigned char* slots[kMaxPeers] = {};
    for (int i = 0; i < nSend; ++i) slots[i] = slotOf(send_[i], sendPos_[i]);
    unsigned char* dst = out ? out : slots[0];
    unsigned char* dst2 = out ? (nSend ? slots[0] : nullptr) : (nSend > 1 ? slots[1] : nullptr);
    if (nRecv && in) {
      const unsigned char* acc = in;
      for (int i = 0; i < nRecv; ++i) {
        const bool last = i == nRecv - 1;
        if (i > 0) env_.sync();  // the previous pass wrote `acc`
        env_.reduce(dst, last ? dst2 : nullptr, acc, slotOf(recv_[i], recvPos_[i]), k,
                    last ? divisor : 0);
        acc = dst;
      }
    } else {
      env_.copy(dst, dst2, nRecv ? slotOf(recv_[0], recvPos_[0]) : in, k * elemSize_);
    }
    if (nSend > (out ? 1 : 2)) {
      env_.sync();
      for (int i = out ? 1 : 2; i < nSend; ++i) env_.copy(slots[i], nullptr, dst, k * elemSize_);
    }
  }

  GYRE_HD static unsigned char* slotOf(const DeviceLink& link, uint64_t pos) {
    return link.data + size_t(pos % link.nSlots) * link.slotBytes;
  }

  // Leader only. False: a failure was recorded.
  GYRE_HD bool waitRecv(int i, uint32_t bytes) {
    const DeviceLink& link = recv_[i];
    if (!waitFor(&link.counters->tail, recvPos_[i] + 1, recvPeer_[i], DeviceWaitKind::data_from)) {
      return false;
    }
    const SlotMeta& meta = link.metas[recvPos_[i] % link.nSlots];
    if (meta.bytes != bytes || !meta.sameOp(expected_)) {
      DeviceFailure f = failure(DeviceFailureCode::mismatch, recvPeer_[i]);
      f.wantedBytes = bytes;
      f.seen = meta;
      env_.fail(f);
      return false;
    }
    return true;
  }
  GYRE_HD bool waitSend(int i) {
    const DeviceLink& link = send_[i];
    return waitFor(&link.counters->head, sendPos_[i] + 1 - link.nSlots, sendPeer_[i],
                   DeviceWaitKind::space_at);
  }
  // Until *word >= target (counters only grow; target may be "negative" for a fresh link).
  GYRE_HD GYRE_OUTLINE bool waitFor(const uint64_t* word, uint64_t target, int peer,
                                    DeviceWaitKind kind) {
    for (unsigned spins = 0;; ++spins) {
      if (int64_t(env_.load(word) - target) >= 0) return true;
      if ((spins & 255) == 255) {
        DeviceFailureCode code = DeviceFailureCode::none;
        if (env_.abortRaised()) {
          code = DeviceFailureCode::aborted;
        } else if (env_.nowNs() > deadline_) {
          code = DeviceFailureCode::timeout;
        }
        if (code != DeviceFailureCode::none) {
          DeviceFailure f = failure(code, peer);
          f.waitKind = uint32_t(kind);
          env_.fail(f);
          return false;
        }
      }
      env_.pause();
    }
  }

  Env& env_;
  DeviceLinkTable links_;
  int channel_;
  int rank_;
  int nranks_;
  SlotMeta expected_;
  const unsigned char* input_;
  unsigned char* output_;
  size_t elemSize_;
  uint64_t deadline_;
  size_t sliceElems_ = 1;
  bool failed_ = false;
  int nRecv_ = 0;
  int nSend_ = 0;
  DeviceLink recv_[kMaxPeers];
  DeviceLink send_[kMaxPeers];
  int recvPeer_[kMaxPeers];
  int sendPeer_[kMaxPeers];
  uint64_t recvPos_[kMaxPeers];
  uint64_t sendPos_[kMaxPeers];
};

}  // namespace gyre::algo
