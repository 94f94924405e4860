// An rdma connection: one RC queue pair to the peer. Both link rings live in registered
// memory of this process; the peer's receive ring is the target of our writes.
//
// Sending slot i: one RDMA WRITE WITH IMMEDIATE of its 32-byte header and payload (they sit
// side by side in both rings) into the peer's slot i; the peer's receive completion for it
// means the whole slot is in place. The immediate carries the credits for the peer's slots
// we freed since our last send; once half the ring is owed to the peer, a SEND WITH
// IMMEDIATE carries them alone. A slot we sent may be refilled once its credit came back
// (the peer has read it, so our adapter is done reading it too).
//
// Completions are polled by the thread waiting in a collective, exactly like the tcp
// transport reads its socket: first without blocking, then asleep in poll() on the
// completion channel's descriptor and the setup socket together. No thread polls when
// nobody waits: an RC queue pair needs no CPU to deliver.
//
// The authenticated tcp socket the connection was set up over stays open and idle, as for
// shared memory: a peer that dies closes it, which we see well before the adapter's
// retries run out.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "link/link.h"
#include "transport/rdma/verbs.h"
#include "transport/setup_socket.h"
#include "transport/transport.h"

namespace gyre {

class RdmaConnection : public Connection {
 public:
  // `endpoint` is connected (RTS); `fd` the setup socket,
  // owned from now on.
  RdmaConnection(std::unique_ptr<RdmaEndpoint> endpoint, const RdmaAddress& peerAddress, int fd,
                 int selfRank, int peer, int channel, const LinkConfig& config);
  ~RdmaConnection() override;

  void sendPublished() override;
  void recvReleased() override;
  void awaitSend(Clock::time_point until) override;
  void awaitRecv(Clock::time_point until) override;
  Status failure() const override;
  Status flush(Clock::time_point deadline) override;
  void close() override;
  void closeWithCause(const Status& cause) override;
  const char* transportName() const override { return "rdma"; }
  // A stable source inside a registered region is read by the adapter where it lies.
  Taken offerSource(const SendSource& source) override {
    return source.stable && sendFrom(source.data, source.bytes) ? Taken::untilReleased : Taken::no;
  }
  Status releaseSources(Clock::time_point deadline, BusyPhase busy = {}) override;
  DirectCounts directCounts() const override { return {0, directSends_}; }

 private:
  // False: no registration covers it.
  bool sendFrom(const std::byte* src, uint32_t bytes);
  // Handles what the completion queue holds; returns how many completions it saw.
  int poll();
  // Waits for a completion (or the setup socket to speak) until `until`.
  void block(Clock::time_point until);
  Status completeUntil(const std::function<bool()>& done, Clock::time_point deadline,
                       const char* what);
  void postSlot(uint32_t index);
  void post(ibv_send_wr& first, uint32_t wrs);
  void ensureSendRoom(uint32_t wrs);
  void repostReceive();
  void retire(uint32_t wrs);  // send requests completed (successfully or not)
  uint32_t takeCredits();     // slots of the peer's freed since the last credit sent
  std::string who() const;
  void failLocal(const std::string& what);

  std::unique_ptr<RdmaEndpoint> endpoint_;
  const RdmaAddress peerAddress_;
  const int selfRank_;
  LinkCounters sendCounters_;
  LinkCounters recvCounters_;
  uint32_t posted_ = 0;       // send slots handed to the adapter
  uint32_t credited_ = 0;     // recv head the peer was last told of
  uint32_t outstanding_ = 0;  // send work requests not yet completed
  uint64_t postedWrs_ = 0, completedWrs_ = 0;
  uint64_t lastUserWr_ = 0;  // postedWrs_ after the last write that reads user memory
  uint64_t directSends_ = 0;
  struct DirectSource {
    const std::byte* src = nullptr;
    uint32_t lkey = 0;
    bool pending = false;
  };
  std::vector<DirectSource> direct_;  // per send slot: its payload's user memory, if any
  uint32_t unackedEvents_ = 0;

  SetupSocket socket_;
};

}  // namespace gyre
