// A shared-memory connection: both link rings live in one segment that both ranks map;
// the producer writes a slot and bumps tail, the consumer reads it in place and bumps head,
// and either sleeps on the other's counter (a shared futex) when it must wait. No thread
// moves bytes for it.
//
// The authenticated tcp socket the segment was offered over stays open and idle: it is how
// a peer's death shows (the kernel closes it), and how closing our side tells the peer at
// once. Waiters look at it when they have been stuck for a while, never on the fast path.
//
// Single copy: a slot whose payload lies in the sender's memory that nothing writes until the
// call returns (the input of a collective that does not reduce), and whose receiver takes part
// in the same call, may carry only where it lies; the receiver reads it straight into its own
// buffer through the kernel (process_vm_readv, "CMA") and the sender's call waits until it has.
// Each side finds out at set-up whether the kernel lets it read its peer (same user, ptrace
// allowed); where not, slots are copied as usual.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>

#include "link/link.h"
#include "transport/setup_socket.h"
#include "transport/shm/segment.h"
#include "transport/transport.h"

namespace gyre {

// Where the two directions of a connection sit in its segment; direction 0 carries data
// from the lower rank to the higher.
struct ShmLayout {
  static constexpr size_t kHeaderBytes = 64;  // a ShmSide per rank
  size_t counters[2] = {}, metas[2] = {}, data[2] = {}, remote[2] = {};
  size_t total = 0;
  static ShmLayout of(uint32_t nSlots, size_t slotBytes);
};

// What each rank says of itself in the segment's header (index 0: the lower rank).
struct ShmSide {
  std::atomic<int32_t> pid;         // published last: the rest is valid once it is non-zero
  std::atomic<uint32_t> readsPeer;  // 0: not tried, 1: it can read the other side's memory, 2: not
  uint64_t nonceAddress;            // where this side keeps `nonce`, for the other side to read
  uint64_t nonce;
};
// A send slot whose payload stayed in the sender's memory; one per slot of each direction.
struct RemotePayload {
  uint64_t address;
  uint32_t bytes;
  uint32_t index;  // the slot's position in the stream (the tail it was published at)
  // none -> live (the sender, before publishing the slot) -> none (the receiver, once it has
  // read it, before releasing the slot); live -> withdrawn (the sender, when its call failed).
  std::atomic<uint32_t> state;
  uint32_t reserved[3];
};

class ShmConnection : public Connection {
 public:
  // `fd`: the connected socket, owned from now on.
  ShmConnection(ShmSegment segment, int fd, int selfRank, int peer, int channel,
                const LinkConfig& config);
  ~ShmConnection() override;

  void sendPublished() override {}  // the producer's tail store is the whole publication
  void awaitRecv(Clock::time_point until) override;
  Status failure() const override;
  // Published slots already sit in memory the peer maps: nothing to wait for, even when the
  // peer has gone (it then has no use for them).
  Status flush(Clock::time_point) override { return {}; }
  void close() override;
  void closeWithCause(const Status& cause) override;
  const char* transportName() const override { return "shm"; }

  Taken offerSource(const SendSource& source) override;
  void noteFill(uint32_t bytes, Clock::duration took) override;
  Status releaseSources(Clock::time_point deadline, BusyPhase busy = {}) override;
  void abandonSources(Clock::time_point deadline) override;
  void offerTarget(const RecvTarget& target) override;
  const std::byte* recvPayload(uint32_t index, std::byte* target) override;
  DirectCounts directCounts() const override {
    return {0, sentFromUser_.load(std::memory_order_relaxed)};
  }

 private:
  void wakeSleepers() const;
  // Whether the kernel lets this process read the peer's memory; tried once the peer has
  // published itself.
  bool readsPeer();
  // Empty, or why reading `bytes` at the peer's `address` into `into` failed.
  std::string readFromPeer(std::byte* into, uint64_t address, uint32_t bytes) const;

  ShmSegment segment_;
  const int selfRank_;
  SetupSocket socket_;
  const size_t singleCopyBytes_;  // 0: never
  ShmSide* self_ = nullptr;
  ShmSide* other_ = nullptr;
  RemotePayload* sentRemote_ = nullptr;  // per send slot
  RemotePayload* recvRemote_ = nullptr;  // per recv slot
  uint64_t nonce_ = 0;
  int32_t peerPid_ = 0;
  bool sourcesOut_ = false;        // slots taken untilReleased may still be read
  uint32_t releasedAt_ = 0;        // ... until the peer's head reaches this
  uint32_t singleCopyOffers_ = 0;  // idle senders' offers taken before filling is tried again
  int slowFills_ = 0;              // slow fills in a row (noteFill)
  std::atomic<uint64_t> sentFromUser_{0};
};

}  // namespace gyre
