// The host executor of the primitives: runs on the calling thread, reduces with the CPU
// kernels, and waits on link counters with the operation's deadline. One HostPrims serves
// one operation on one channel; setPeers() names the ranks the next calls receive from and
// send to, and `connectionTo` turns a rank into this channel's connection.
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>

#include "base/function_ref.h"
#include "kernels/cpu/reduce.h"
#include "link/link.h"

namespace gyre {

struct OpContext {
  OpDesc desc;
  int rank = 0;
  int nranks = 1;
  Clock::time_point deadline = Clock::time_point::max();
  Clock::duration timeout = std::chrono::seconds(0);  // for messages
  const std::atomic<bool>* abort = nullptr;           // set by another thread to stop waits
  const std::atomic<bool>* channelFailed = nullptr;   // set when another channel failed
  BusyPhase busy;  // how every wait polls before it sleeps (none by default)
  // Nothing writes the input buffer until the operation returns: sends may read it in place.
  bool inputReadOnly = false;
  // Every rank this operation sends to takes part in it (a collective, not a send).
  bool receiversInCall = false;
  // This rank only sends in the operation and has a core of its own (SendSource::senderIdle).
  bool senderIdle = false;
  // The CPU must not read the input (device memory): every send of it leaves straight from it
  // (a transport takes it Taken::untilReleased), or the operation fails.
  bool inputUnreadable = false;
  // The ranks' CPUs sit far apart (the placement probe): slots a peer reads in place are filled
  // with streaming stores, which it then reads from memory rather than from this CPU's cache.
  bool streamSlots = false;
  // Payloads in slots a peer reads in place move from place to place within their slot, one
  // round of the link to the next (spreadOffset; Tuner::spreadsSlots).
  bool spreadSlots = false;
  // Payloads may stay in the sender's memory for the receiver to copy (shm's single copy):
  // false where ranks share cores and the call gathers or scatters a large buffer
  // (Tuner::slotWrites).
  bool singleCopy = true;
  // Asked when a wait stalls (after 1 s, then at doubling intervals up to 16 s): a failure it
  // returns (ranks that disagree on the call) ends the wait. Null: never asked. It refers to
  // a callable of the caller that started the operation, which outlives every wait of it.
  FunctionRef<Status()> checkPeers;
};

class HostPrims {
 public:
  static constexpr int kMaxPeers = 16;  // per direction: a binomial tree of 65536 ranks
  using ConnectionTo = std::function<Connection&(int peer)>;

  HostPrims(const OpContext& ctx, ConnectionTo connectionTo, const void* input, void* output);
  // Waits (bounded by the deadline) for transfers that still read the input.
  ~HostPrims();
  HostPrims(const HostPrims&) = delete;
  HostPrims& operator=(const HostPrims&) = delete;
  // After the algorithm: returns once no transfer reads the caller's memory; throws if one
  // failed.
  void finish();

  void setPeers(const int* recvPeers, int nRecv, const int* sendPeers, int nSend);
  // From now on input offsets address the output buffer (algorithms that accumulate there).
  void useOutputAsInput() {
    input_ = output_;
    inputReadOnly_ = false;
  }

  void send(size_t inOff, size_t n) { run(kInput | kSend, inOff, 0, n, false); }
  void recv(size_t outOff, size_t n) { run(kRecv | kOutput, 0, outOff, n, false); }
  void recvSend(size_t n) { run(kRecv | kSend, 0, 0, n, false); }
  void copySend(size_t inOff, size_t outOff, size_t n) {
    run(kInput | kOutput | kSend, inOff, outOff, n, false);
  }
  void recvCopySend(size_t outOff, size_t n) { run(kRecv | kOutput | kSend, 0, outOff, n, false); }
  void recvReduceSend(size_t inOff, size_t n) { run(kRecv | kInput | kSend, inOff, 0, n, false); }
  void recvReduceCopy(size_t inOff, size_t outOff, size_t n, bool final) {
    run(kRecv | kInput | kOutput, inOff, outOff, n, final);
  }
  void recvReduceCopySend(size_t inOff, size_t outOff, size_t n, bool final) {
    run(kRecv | kInput | kOutput | kSend, inOff, outOff, n, final);
  }
  void localCopy(size_t inOff, size_t outOff, size_t n) {
    run(kInput | kOutput, inOff, outOff, n, false);
  }
  void sendMarker();
  void recvMarker();
  // While held, a primitive leaves its sends to batching transports (tcp) unflushed, so the
  // next ones to the same peer leave in the same write; any wait flushes them first, and so
  // does releasing the hold.
  void holdSends(bool hold) {
    holding_ = hold;
    if (!hold) flushSends();
  }

 private:
  enum : unsigned { kRecv = 1, kInput = 2, kOutput = 4, kSend = 8 };
  void run(unsigned what, size_t inOff, size_t outOff, size_t n, bool final);
  const std::byte* waitRecv(Connection& from, uint32_t bytes, std::byte* direct = nullptr);
  // Where the next send slot's payload of `bytes` goes (its slot, spread where the call says).
  std::byte* waitSend(Connection& to, uint32_t bytes);
  // Where in send slot `index` of `link` a payload of `bytes` starts (OpContext::spreadSlots).
  uint32_t payloadOffset(const Link& link, uint32_t index, uint32_t bytes) const;
  void releaseRecv(Connection& from);
  void noteReadingInput(Connection& conn);
  void publishSend(Connection& to, uint32_t bytes);
  // Hands the slots published to batching connections to them; before any wait.
  void flushSends();
  // Waits until ready(), calling await(until) to move bytes or sleep; throws on failure,
  // abort or the deadline.
  template <class Ready, class Await>
  void waitUntil(Ready ready, Await await, Connection& conn, const char* direction);
  // Whether this rank's slots toward `to` get streaming stores (OpContext::streamSlots).
  bool streams(Connection& to) const;
  // The stores of run()'s two kernel destinations.
  cpu::Stores slotStores(bool toOutput, int nSend) const;
  [[noreturn]] void mismatch(const Connection& from, const SlotMeta& meta, uint32_t expectedBytes);

  const OpContext& ctx_;
  ConnectionTo connectionTo_;
  const std::byte* input_;
  std::byte* output_;
  size_t elemSize_;
  size_t sliceElems_ = 1;
  // The lists below hold their first n entries only and are left unset past them: zeroing
  // all four took a quarter of a one-rank call's time (a `rep stos` each, every call).
  int nRecv_ = 0;
  int nSend_ = 0;
  Connection* recvFrom_[kMaxPeers];
  Connection* sendTo_[kMaxPeers];
  bool inputReadOnly_;
  Connection* readingInput_[kMaxPeers];  // connections that sent straight from the input
  int nReadingInput_ = 0;
  Connection* unflushed_[kMaxPeers];  // batching connections with slots not handed over
  int nUnflushed_ = 0;
  bool holding_ = false;  // holdSends
};

}  // namespace gyre
