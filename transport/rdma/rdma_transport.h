// Rdma transport (libibverbs, RC queue pairs) for peers on other hosts when both ranks have
// an active device; GYRE_TRANSPORT=rdma uses it for every peer, on one host too.
//
// A connection starts as an authenticated tcp connection (the tcp transport's handshake,
// with the rdma flag). Over it the lower rank sends its queue pair's address (QPN, PSN, GID,
// LID, MTU, the key and addresses of its receive ring); the higher rank's event loop builds
// its own queue pair, connects it, and answers with its address; the lower rank connects and
// confirms. Where either side cannot, both keep the socket as a plain tcp connection (or
// fail, when rdma was required), exactly as shared memory falls back.
#pragma once

#include <asio/ip/tcp.hpp>
#include <map>
#include <memory>
#include <mutex>

#include "transport/prepared.h"
#include "transport/rdma/verbs.h"
#include "transport/transport.h"

namespace gyre {

class TcpTransport;
class RdmaEndpoint;

class RdmaTransport : public Transport {
 public:
  // `hca`, `gidIndex`: GYRE_IB_HCA and GYRE_IB_GID_INDEX (see openRdmaDevice). `required`: a
  // peer that cannot be reached over rdma is an error. Installs its accept hook on `tcp`:
  // construct before tcp.publish().
  RdmaTransport(TcpTransport& tcp, LinkConfig config, std::string hca, int gidIndex, bool required);
  ~RdmaTransport() override;

  const char* name() const override { return "rdma"; }
  // Peers on other hosts; every peer when required.
  std::string unreachable(const PeerInfo& self, const PeerInfo& peer) const override;
  // Opens the device; when there is none, says why (INFO) and publishes no part.
  void publish(PeerInfo& self) override;
  std::shared_ptr<Connection> connect(const PeerInfo& peer, int channel, Clock::time_point deadline,
                                      const Interrupt& interrupted) override;
  // GPUDirect RDMA for device memory (a dma-buf where the GPU driver exports one, else peer
  // memory), ibv_reg_mr for host memory; 0 without a device or when neither works.
  uint64_t registerMemory(const void* p, size_t bytes, const std::string& who) override;
  void deregisterMemory(uint64_t handle) override;
  // Whether one registered region covers [p, p + bytes), so sends from it need no copy.
  bool sendsUnstaged(const void* p, size_t bytes) const override {
    uint32_t lkey = 0;
    return device_ && device_->userKey(p, bytes, lkey);
  }

 private:
  struct Prepared {
    std::unique_ptr<RdmaEndpoint> endpoint;
    RdmaAddress peerAddress;
    std::string error;  // why not; empty when `endpoint` is connected
  };
  void answerOfferOnLoop(asio::ip::tcp::socket& socket, int peer, int channel,
                         std::function<void()> ready);
  std::shared_ptr<Connection> offer(const PeerInfo& peer, int channel, Clock::time_point deadline,
                                    const Interrupt& interrupted);
  std::shared_ptr<Connection> collect(const PeerInfo& peer, int channel, Clock::time_point deadline,
                                      const Interrupt& interrupted);
  // A connected endpoint, or null with `error` set.
  std::unique_ptr<RdmaEndpoint> makeEndpoint(std::string& error);
  std::string checkPeer(const RdmaAddress& a) const;
  std::shared_ptr<Connection> fallBack(asio::ip::tcp::socket socket, int peer, int channel,
                                       const std::string& who, const std::string& error);

  TcpTransport& tcp_;
  const LinkConfig config_;
  const std::string hca_;
  const int gidIndex_;
  const bool required_;
  std::shared_ptr<RdmaDevice> device_;
  std::string unusableReason_ = "not published yet";
  PreparedByPeer<Prepared> prepared_;
};

}  // namespace gyre
