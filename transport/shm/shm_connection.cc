#include "transport/shm/shm_connection.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <new>
#include <random>

#include "base/log.h"
#include "link/mailbox.h"

namespace gyre {

namespace {
constexpr size_t align64(size_t n) {
  return (n + 63) / 64 * 64;
}
enum : uint32_t { kUntried = 0, kReads = 1, kCannotRead = 2 };
enum : uint32_t { kNone = 0, kLive = 1, kWithdrawn = 2 };
static_assert(2 * sizeof(ShmSide) <= ShmLayout::kHeaderBytes, "header");
static_assert(sizeof(RemotePayload) == 32, "one per slot");
// A sender waiting for its peer to finish reading polls at least this long before it sleeps
// (or as long as the communicator's spin budget has learned).
constexpr auto kMinReleasePoll = std::chrono::microseconds(100);
}  // namespace

ShmLayout ShmLayout::of(uint32_t nSlots, size_t slotBytes) {
  ShmLayout l;
  size_t at = kHeaderBytes;
  for (int d = 0; d < 2; ++d) {
    l.counters[d] = at;
    at += align64(sizeof(LinkCounters));
    l.metas[d] = at;
    at += align64(nSlots * sizeof(SlotMeta));
    l.data[d] = at;
    at += align64(nSlots * slotBytes);
    l.remote[d] = at;
    at += align64(nSlots * sizeof(RemotePayload));
  }
  l.total = at;
  return l;
}

ShmConnection::ShmConnection(ShmSegment segment, int fd, int selfRank, int peer, int channel,
                             const LinkConfig& config)
    : Connection(peer, channel),
      segment_(std::move(segment)),
      selfRank_(selfRank),
      socket_(fd,
              "rank " + std::to_string(selfRank) + ": rank " + std::to_string(peer) +
                  " failed over shm: ",
              peer, [this] { wakeSleepers(); }),
      singleCopyBytes_(config.singleCopyBytes) {
  const ShmLayout layout = ShmLayout::of(config.nSlots, config.slotBytes);
  auto* base = static_cast<std::byte*>(segment_.data());
  auto linkAt = [&](int d) {
    Link link;
    // The file starts zeroed: zero counters are the ring's start on both sides, so whichever
    // side maps first, neither constructs over the other's writes.
    link.counters = std::launder(reinterpret_cast<LinkCounters*>(base + layout.counters[d]));
    link.metas = std::launder(reinterpret_cast<SlotMeta*>(base + layout.metas[d]));
    link.data = base + layout.data[d];
    link.nSlots = config.nSlots;
    link.slotBytes = config.slotBytes;
    link.peerReadsInPlace = true;
    return link;
  };
  const int out = selfRank < peer ? 0 : 1;
  send_ = linkAt(out);
  recv_ = linkAt(1 - out);
  sentRemote_ = std::launder(reinterpret_cast<RemotePayload*>(base + layout.remote[out]));
  recvRemote_ = std::launder(reinterpret_cast<RemotePayload*>(base + layout.remote[1 - out]));
  auto* sides = std::launder(reinterpret_cast<ShmSide*>(base));
  self_ = &sides[out];
  other_ = &sides[1 - out];
  if (singleCopyBytes_ == 0) return;  // the peer never finds this side published
  nonce_ = (uint64_t(std::random_device{}()) << 32) | std::random_device{}();
  self_->nonceAddress = reinterpret_cast<uintptr_t>(&nonce_);
  self_->nonce = nonce_;
  self_->pid.store(int32_t(getpid()), std::memory_order_release);
  readsPeer();
}

ShmConnection::~ShmConnection() = default;

void ShmConnection::awaitRecv(Clock::time_point until) {
  if (singleCopyBytes_ && self_->readsPeer.load(std::memory_order_relaxed) == kUntried) readsPeer();
  WaitWord& tail = recv_.counters->tail;
  const uint32_t head = recv_.counters->head.value.load(std::memory_order_relaxed);
  if (tail.value.load(std::memory_order_acquire) == head) sleepWhileEqual(tail, head, until);
}

// Checked only by waiters that are stuck, at most every few milliseconds: one recv() peek.
Status ShmConnection::failure() const {
  return socket_.failure();
}

// After a failure: sleepers on our side wake now rather than at their next time slice.
void ShmConnection::wakeSleepers() const {
  for (Link* link : {const_cast<Link*>(&send_), const_cast<Link*>(&recv_)}) {
    notifyAll(link->counters->head);
    notifyAll(link->counters->tail);
  }
}

// The peer sees the socket close at its next liveness check and fails over to the cause the
// failure board recorded.
void ShmConnection::close() {
  closeWithCause({});
}

void ShmConnection::closeWithCause(const Status& cause) {
  if (!socket_.shutdown(&cause)) return;
  socket_.fail({Code::aborted, "rank " + std::to_string(selfRank_) +
                                   ": the shared-memory connection to " + "rank " +
                                   std::to_string(peer()) + " was closed"});
}

// Single copy (see the header).

bool ShmConnection::readsPeer() {
  const uint32_t known = self_->readsPeer.load(std::memory_order_relaxed);
  if (known != kUntried) return known == kReads;
  const int32_t pid = other_->pid.load(std::memory_order_acquire);
  if (pid == 0) return false;  // not published (yet, or single copy is off there)
  peerPid_ = pid;
  uint64_t value = 0;
  const std::string error =
      readFromPeer(reinterpret_cast<std::byte*>(&value), other_->nonceAddress, sizeof value);
  const bool reads = error.empty() && value == other_->nonce;
  if (!reads) {
    GYRE_LOG(info, "rank " + std::to_string(selfRank_) + ": cannot read the memory of rank " +
                       std::to_string(peer()) + " (" + (error.empty() ? "wrong value" : error) +
                       "); its shm slots are copied twice");
  }
  self_->readsPeer.store(reads ? kReads : kCannotRead, std::memory_order_release);
  return reads;
}

std::string ShmConnection::readFromPeer(std::byte* into, uint64_t address, uint32_t bytes) const {
  return readPeerMemory(peerPid_, into, address, bytes);
}

namespace {
// An idle sender's copy in runs beside the receiver's copy out, two memcpy in parallel: the
// fastest way where the two CPUs are close (a cache line there and back in about 70 ns). Where
// a virtual machine's CPUs sit far apart (about 360 ns), the copy through the slots, whose
// lines go back and forth every call, slows down several times while the receiver's single
// copy from the source holds its pace (n = 2, 1 MiB gather: 31 against 78 µs close, 240 against
// 78 far). kSlowFills fills in a row slower than this send the next kRetryFillAfter offers by
// single copy; a lone slow fill (an interrupt, a page fault) changes nothing.
constexpr double kSlowFillBytesPerUs = 8000;
constexpr int kSlowFills = 4;
constexpr uint32_t kRetryFillAfter = 256;
}  // namespace

void ShmConnection::noteFill(uint32_t bytes, Clock::duration took) {
  if (singleCopyBytes_ == 0 || bytes < singleCopyBytes_) return;
  const double us = std::chrono::duration<double, std::micro>(took).count();
  if (double(bytes) >= kSlowFillBytesPerUs * us) {
    slowFills_ = 0;
  } else if (++slowFills_ >= kSlowFills) {
    slowFills_ = 0;
    singleCopyOffers_ = kRetryFillAfter;
  }
}

Taken ShmConnection::offerSource(const SendSource& source) {
  if (!source.receiverCopies) return Taken::no;
  if (source.senderIdle) {
    if (singleCopyOffers_ == 0) return Taken::no;  // filled (and timed) by the sender
    --singleCopyOffers_;
  }
  if (!source.stable || !source.cpuReadable || !source.receiverInCall || singleCopyBytes_ == 0 ||
      source.bytes < singleCopyBytes_ ||
      other_->readsPeer.load(std::memory_order_acquire) != kReads) {
    return Taken::no;
  }
  // The slot the producer publishes next; waitSend() found it free, so the receiver cleared
  // its descriptor before it released it.
  const uint32_t tail = send_.counters->tail.value.load(std::memory_order_relaxed);
  RemotePayload& remote = sentRemote_[tail % send_.nSlots];
  remote.address = reinterpret_cast<uintptr_t>(source.data);
  remote.bytes = source.bytes;
  remote.index = tail;
  remote.state.store(kLive, std::memory_order_relaxed);  // published with the tail
  sourcesOut_ = true;
  releasedAt_ = tail + 1;
  sentFromUser_.fetch_add(1, std::memory_order_relaxed);
  return Taken::untilReleased;
}

Status ShmConnection::releaseSources(Clock::time_point deadline, BusyPhase busy) {
  if (!sourcesOut_) return {};
  WaitWord& head = send_.counters->head;
  const auto released = [&] {
    return int32_t(head.value.load(std::memory_order_acquire) - releasedAt_) >= 0;
  };
  if (!busy.budget) busy.spin = std::max<Clock::duration>(busy.spin, kMinReleasePoll);
  if (pollFor(busy, released)) {
    sourcesOut_ = false;
    return {};
  }
  while (true) {
    const uint32_t observed = head.value.load(std::memory_order_acquire);
    if (int32_t(observed - releasedAt_) >= 0) {
      sourcesOut_ = false;
      return {};
    }
    const auto now = Clock::now();
    Status broken = failure();
    if (broken.ok() && now >= deadline) {
      broken = {Code::timeout, "rank " + std::to_string(peer()) +
                                   " did not read the data sent to it over shm in time"};
    }
    if (!broken.ok()) {
      abandonSources(deadline);
      return broken;
    }
    sleepWhileEqual(head, observed, std::min(deadline, now + std::chrono::milliseconds(20)));
  }
}

// Withdraws every payload the peer has not read: it then fails instead of reading memory the
// caller may already be writing again. A read in flight is checked when it ends (recvPayload).
void ShmConnection::abandonSources(Clock::time_point) {
  if (!sourcesOut_) return;
  for (uint32_t i = 0; i < send_.nSlots; ++i) {
    uint32_t live = kLive;
    sentRemote_[i].state.compare_exchange_strong(live, kWithdrawn);
  }
  sourcesOut_ = false;
}

void ShmConnection::offerTarget(const RecvTarget&) {
  if (singleCopyBytes_ && self_->readsPeer.load(std::memory_order_relaxed) == kUntried) readsPeer();
}

const std::byte* ShmConnection::recvPayload(uint32_t index, std::byte* target) {
  RemotePayload& remote = recvRemote_[index % recv_.nSlots];
  uint32_t state = remote.state.load(std::memory_order_acquire);
  const SlotMeta& meta = recv_.meta(index);
  if (state == kNone) {
    if (uint64_t(meta.offset) + meta.bytes <= recv_.slotBytes)
      return recv_.slot(index) + meta.offset;
    socket_.fail({Code::remote_error,
                  "rank " + std::to_string(selfRank_) + ": rank " + std::to_string(peer()) +
                      " sent a payload of " + std::to_string(meta.bytes) + " bytes at " +
                      std::to_string(meta.offset) + " in a slot of " +
                      std::to_string(recv_.slotBytes) + " over shm",
                  peer()});
    return nullptr;
  }
  const uint32_t bytes = meta.bytes;
  std::byte* into = target ? target : recv_.slot(index);
  std::string error;
  if (state != kLive) {
    error = "it withdrew its data (its call failed)";
  } else if (remote.index != index || remote.bytes != bytes ||
             (!target && bytes > recv_.slotBytes)) {
    error = "a malformed descriptor of its data";
  } else {
    error = readFromPeer(into, remote.address, bytes);
    // Still live after the read: the sender's call had not given its buffer back while it ran.
    if (error.empty() && !remote.state.compare_exchange_strong(state, kNone)) {
      error = "it withdrew its data while it was read (its call failed)";
    }
  }
  if (error.empty()) return into;
  socket_.fail({Code::remote_error,
                "rank " + std::to_string(selfRank_) + ": reading the data of rank " +
                    std::to_string(peer()) + " over shm failed: " + error,
                peer()});
  return nullptr;
}

}  // namespace gyre
