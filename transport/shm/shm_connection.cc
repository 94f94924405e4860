#include "transport/shm/shm_connection.h"

#include <sys/socket.h>
#include <unistd.h>

#include <new>

namespace gyre {

namespace {
constexpr size_t align64(size_t n) {
  return (n + 63) / 64 * 64;
}
// How long a waiter may be stuck before it looks at the socket again.
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
              peer, [this] { wakeSleepers(); }) {
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
    return link;
  };
  const int out = selfRank < peer ? 0 : 1;
  send_ = linkAt(out);
  recv_ = linkAt(1 - out);
}

ShmConnection::~ShmConnection() = default;

void ShmConnection::awaitRecv(Clock::time_point until) {
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

}  // namespace gyre
