// Shared-memory transport for ranks on one host (equal host ids: hostname + boot id).
//
// A connection starts as an authenticated tcp connection (the tcp transport's handshake).
// Over it the lower rank offers a fresh segment holding both link rings; the higher rank's
// event loop maps it and says so (no user thread of the higher rank takes part, so a rank
// can set up a connection while its peer is busy elsewhere, as with tcp), and the lower rank
// unlinks the name at once. Whenever either side cannot (no space, no permission, another
// mount namespace), both keep the socket as a plain tcp connection and the reason is logged
// as a warning: the choice is per connection and both sides always agree.
#pragma once

#include <atomic>

#include <asio/ip/tcp.hpp>
#include <map>
#include <mutex>
#include <string>

#include "transport/prepared.h"
#include "transport/shm/segment.h"

#include "transport/transport.h"

namespace gyre {

class TcpTransport;

class ShmTransport : public Transport {
 public:
  // `required`: a connection that cannot use shared memory is an error, not a tcp fallback.
  // Installs its accept hook on `tcp`: construct before tcp.publish().
  ShmTransport(TcpTransport& tcp, LinkConfig config, std::string dir, bool required);

  const char* name() const override { return "shm"; }
  Medium medium() const override { return Medium::memory; }
  std::string unreachable(const PeerInfo& self, const PeerInfo& peer) const override;
  // Sweeps segments of dead processes and checks that the directory can hold segments; if it
  // cannot, warns once and publishes no part so that every peer uses tcp with us.
  void publish(PeerInfo& self) override;
  std::shared_ptr<Connection> connect(const PeerInfo& peer, int channel, Clock::time_point deadline,
                                      const Interrupt& interrupted) override;
  // Bytes of one connection's segment.
  size_t segmentBytes() const;
  void setSingleCopyBytes(size_t bytes) override {
    singleCopyBytes_.store(bytes, std::memory_order_relaxed);
  }

 private:
  // What the loop made of a peer's offer, until connect() collects it.
  struct Prepared {
    ShmSegment segment;
    std::string error;  // why not; empty when `segment` is mapped
  };
  void answerOfferOnLoop(asio::ip::tcp::socket& socket, int peer, int channel,
                         std::function<void()> ready);
  LinkConfig connectionConfig() const;  // config_ with the single copy as set now
  std::shared_ptr<Connection> offer(const PeerInfo& peer, int channel, Clock::time_point deadline,
                                    const Interrupt& interrupted);
  std::shared_ptr<Connection> collect(const PeerInfo& peer, int channel, Clock::time_point deadline,
                                      const Interrupt& interrupted);

  TcpTransport& tcp_;
  const LinkConfig config_;
  // config_.singleCopyBytes until set otherwise; each connection takes the value it finds.
  std::atomic<size_t> singleCopyBytes_;
  const std::string dir_;
  const bool required_;
  bool usable_ = false;
  std::string unusableReason_ = "not published yet";
  PreparedByPeer<Prepared> prepared_;
};

}  // namespace gyre
