// A tcp connection to one peer: both link rings live in this process; the proxy on the event
// loop writes filled send slots to the socket and reads frames (SlotMeta + payload) into
// free recv slots. The user thread and the loop meet only at the ring counters and two flags.
#pragma once

#include <asio/ip/tcp.hpp>
#include <array>
#include <atomic>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <vector>

#include "transport/event_loop.h"
#include "transport/link.h"
#include "transport/transport.h"

namespace gyre {

class TcpConnection : public Connection, public std::enable_shared_from_this<TcpConnection> {
 public:
  TcpConnection(EventLoop& loop, asio::ip::tcp::socket socket, int selfRank, int peer,
                int channel, const LinkConfig& config);
  ~TcpConnection() override;

  void start();  // begins moving bytes; call once, from any thread
  void sendPublished() override;
  void recvReleased() override;
  Status failure() const override;
  Status flush(Clock::time_point deadline) override;
  const char* transportName() const override { return "tcp"; }
  void close() override;  // from any thread

 private:
  struct FreeDeleter {
    void operator()(std::byte* p) const { std::free(p); }
  };
  struct Ring {
    LinkCounters counters;
    std::vector<SlotMeta> metas;
    std::unique_ptr<std::byte, FreeDeleter> data;  // 64-byte aligned slots
  };

  void pumpSendOnLoop();
  void pumpRecvOnLoop();
  void readPayloadOnLoop(uint32_t index);
  void failOnLoop(const std::string& what, const asio::error_code& ec);
  void failOnLoop(Status status);
  static void initRing(Ring& ring, Link& link, const LinkConfig& config);

  EventLoop& loop_;
  asio::ip::tcp::socket socket_;
  const int selfRank_;
  Ring sendRing_;
  Ring recvRing_;

  static constexpr uint32_t kMaxSlotsPerWrite = 8;

  // Loop-thread state.
  std::array<asio::const_buffer, 2 * kMaxSlotsPerWrite> writeBuffers_;
  uint32_t sent_ = 0;      // send slots written to the socket
  uint32_t received_ = 0;  // recv slots filled from the socket
  bool writing_ = false;
  bool reading_ = false;
  bool closed_ = false;

  // Hand-off flags between the user thread and the loop.
  std::atomic<bool> sendIdle_{true};
  std::atomic<bool> recvStalled_{false};

  mutable std::mutex failureMutex_;
  Status failure_;
  std::atomic<bool> failed_{false};
};

}  // namespace gyre
