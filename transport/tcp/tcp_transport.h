// Tcp transport: one listener per rank on the address that reaches the rendezvous; the lower
// rank of a pair dials. Before any data flows both sides check the handshake (magic,
// version, job id, ranks, channel, slot geometry) and prove they know the job's secret with
// an HMAC challenge-response (docs/protocol.md). Anything else on the port is logged and
// closed and never reaches a link.
#pragma once

#include <asio/ip/tcp.hpp>
#include <asio/steady_timer.hpp>
#include <condition_variable>
#include <deque>
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
  std::string unreachable(const PeerInfo& self, const PeerInfo& peer) const override;
  void publish(PeerInfo& self) override;
  std::string address(const PeerInfo& peer) const override;
  std::shared_ptr<Connection> connect(const PeerInfo& peer, int channel, Clock::time_point deadline,
                                      const Interrupt& interrupted) override;
  // The authenticated socket connect() would build on, for transports that set up over tcp
  // (shared memory keeps it to notice a peer that dies); wrap() makes it a tcp connection.
  // `flags` (wire::kFlag...) travel in the dialler's Hello.
  asio::ip::tcp::socket connectSocket(const PeerInfo& peer, int channel, Clock::time_point deadline,
                                      const Interrupt& interrupted, uint16_t flags = 0);
  std::shared_ptr<Connection> wrap(asio::ip::tcp::socket socket, int peer, int channel);
  // Runs on the loop when an accepted connection's Hello carried `flag`, after the handshake;
  // the socket reaches connect() once the hook calls `ready` (the handshake timeout still
  // applies until then). Set before publish(); a flag without a hook is refused.
  using AcceptHook = std::function<void(asio::ip::tcp::socket& socket, int peer, int channel,
                                        std::function<void()> ready)>;
  void setAcceptHook(uint16_t flag, AcceptHook hook) { acceptHooks_[flag] = std::move(hook); }
  void shutdown() override;
  // The address `peer` published ("host port"); false when it published none.
  static bool addressOf(const PeerInfo& peer, std::string& host, uint16_t& port);

 private:
  struct Pending;
  void acceptOnLoop();
  void armHandshakeTimer(const std::shared_ptr<Pending>& pending);
  void limitHandshakes();  // before a new handshake: drops the oldest past the limit
  void readHelloOnLoop(std::shared_ptr<Pending> pending);
  void sendChallengeOnLoop(std::shared_ptr<Pending> pending);
  void handOverOnLoop(std::shared_ptr<Pending> pending);
  asio::ip::tcp::socket dial(const PeerInfo& peer, int channel, Clock::time_point deadline,
                             const Interrupt& interrupted, uint16_t flags);
  void setCongestionControl(int fd, const PeerInfo& peer);
  static bool setUnpacedBbr(int fd);  // BBR's window without its pacing; false where refused
  asio::ip::tcp::socket awaitAccepted(const PeerInfo& peer, int channel, Clock::time_point deadline,
                                      const Interrupt& interrupted);

  EventLoop& loop_;
  const LinkConfig config_;
  const std::string listenHost_;
  std::string selfHostId_;
  asio::ip::tcp::acceptor acceptor_;
  asio::steady_timer acceptRetry_;  // after a failed accept (out of descriptors)
  bool acceptFailing_ = false;
  std::map<uint16_t, AcceptHook> acceptHooks_;
  // Accepted connections still in their handshake, oldest first (loop thread only). A
  // handshake may take as long as the job's timeout (a peer can be stalled), so strangers
  // are bounded by number instead: past the limit a new connection drops the oldest.
  std::deque<std::weak_ptr<Pending>> handshaking_;
  bool warnedHandshakesFull_ = false;

  std::mutex mutex_;
  std::condition_variable accepted_cv_;
  std::map<std::pair<int, int>, asio::ip::tcp::socket> accepted_;  // (peer, channel)
};

// Blocking transfer of exactly `bytes` on a non-blocking socket, bounded by `deadline`; for
// the setup messages that follow the handshake with rank `peer`. Throws Failure prefixed with
// `who`; where the peer closed or reset the connection, naming `peer` as the rank lost.
void transferExactly(int fd, void* buffer, size_t bytes, bool sending, Clock::time_point deadline,
                     const Transport::Interrupt& interrupted, const std::string& who, int peer);

}  // namespace gyre
