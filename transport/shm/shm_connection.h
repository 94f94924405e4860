// A shared-memory connection: both link rings live in one segment that both ranks map;
// the producer writes a slot and bumps tail, the consumer reads it in place and bumps head,
// and either sleeps on the other's counter (a shared futex) when it must wait. No thread
// moves bytes for it.
//
// The authenticated tcp socket the segment was offered over stays open and idle: it is how
// a peer's death shows (the kernel closes it), and how closing our side tells the peer at
// once. Waiters look at it when they have been stuck for a while, never on the fast path.
#pragma once

#include <atomic>
#include <mutex>

#include "link/link.h"
#include "transport/setup_socket.h"
#include "transport/shm/segment.h"
#include "transport/transport.h"

namespace gyre {

// Where the two directions of a connection sit in its segment; direction 0 carries data
// from the lower rank to the higher.
struct ShmLayout {
  static constexpr size_t kHeaderBytes = 64;
  size_t counters[2] = {}, metas[2] = {}, data[2] = {};
  size_t total = 0;
  static ShmLayout of(uint32_t nSlots, size_t slotBytes);
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

 private:
  void wakeSleepers() const;

  ShmSegment segment_;
  const int selfRank_;
  SetupSocket socket_;
};

}  // namespace gyre
