// Tcp transport: one listener per rank on the address that reaches the rendezvous; the lower
// rank of a pair dials. Before any data flows both sides check the handshake (magic,
// version, job id, ranks, channel, slot geometry) and prove they know the job's secret with
// an HMAC challenge-response (docs/protocol.md). Anything else on the port is logged and
// closed and never reaches a link.
#pragma once

#include <asio/ip/tcp.hpp>
#include <condition_variable>
#include <map>
#include <mutex>

#include "transport/event_loop.h"
#include "transport/transport.h"

namespace gyre {

class TcpTransport : public Transport {
 public:
  TcpTransport(EventLoop& loop, LinkConfig config, std::string listenHost);
  ~TcpTransport() override;

  const char* name() const override { return "tcp"; }
  bool canConnect(const PeerInfo&, const PeerInfo& peer) const override {
    return peer.tcpPort != 0;
  }
  void publish(PeerInfo& self) override;
  std::shared_ptr<Connection> connect(const PeerInfo& peer, int channel, Clock::time_point deadline,
                                      const Interrupt& interrupted) override;
  // Stops accepting; from the user thread before the loop stops.
  void shutdown();

 private:
  struct Pending;
  void acceptOnLoop();
  void armHandshakeTimer(const std::shared_ptr<Pending>& pending);
  void readHelloOnLoop(std::shared_ptr<Pending> pending);
  void sendChallengeOnLoop(std::shared_ptr<Pending> pending);
  std::shared_ptr<Connection> dial(const PeerInfo& peer, int channel, Clock::time_point deadline);
  std::shared_ptr<Connection> awaitAccepted(const PeerInfo& peer, int channel,
                                            Clock::time_point deadline,
                                            const Interrupt& interrupted);

  EventLoop& loop_;
  const LinkConfig config_;
  const std::string listenHost_;
  asio::ip::tcp::acceptor acceptor_;

  std::mutex mutex_;
  std::condition_variable accepted_cv_;
  std::map<std::pair<int, int>, asio::ip::tcp::socket> accepted_;  // (peer, channel)
};

}  // namespace gyre
