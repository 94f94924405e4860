#include "transport/rdma/rdma_transport.h"

#include <asio/read.hpp>
#include <asio/write.hpp>
#include <cstring>

#include <unistd.h>

#include "base/device_memory.h"
#include "base/log.h"
#include "transport/rdma/rdma_connection.h"
#include "transport/tcp/handshake.h"
#include "transport/tcp/tcp_transport.h"

namespace gyre {

namespace {

// The setup messages (docs/protocol.md); they follow the tcp handshake on its socket.
struct Offer {
  char magic[4];
  uint32_t status;  // 0: `address` is a queue pair ready for us; 1: none, stay on tcp
  RdmaAddress address;
};
struct Confirm {
  char magic[4];
  uint32_t status;  // 0: the dialler connected its queue pair; 1: it could not, stay on tcp
};
static_assert(sizeof(Offer) == 64 && sizeof(Confirm) == 8, "wire formats");
constexpr char kOfferMagic[4] = {'G', 'R', 'D', 'O'};
constexpr char kReplyMagic[4] = {'G', 'R', 'D', 'R'};
constexpr char kConfirmMagic[4] = {'G', 'R', 'D', 'C'};

}  // namespace

RdmaTransport::RdmaTransport(TcpTransport& tcp, LinkConfig config, std::string hca, int gidIndex,
                             bool required)
    : tcp_(tcp),
      config_(std::move(config)),
      hca_(std::move(hca)),
      gidIndex_(gidIndex),
      required_(required) {
  tcp_.setAcceptHook(wire::kFlagRdmaOffer, [this](asio::ip::tcp::socket& socket, int peer,
                                                  int channel, std::function<void()> ready) {
    answerOfferOnLoop(socket, peer, channel, std::move(ready));
  });
}

RdmaTransport::~RdmaTransport() = default;

void RdmaTransport::publish(PeerInfo& self) {
  std::string whyNot;
  device_ = openRdmaDevice(hca_, gidIndex_, whyNot);
  const std::string who = "rank " + std::to_string(config_.rank) + ": rdma";
  if (device_) {
    unusableReason_.clear();
    GYRE_LOG(info, who + " on " + device_->describe());
  } else {
    unusableReason_ = whyNot;
    GYRE_LOG(info, who + " unusable (" + whyNot + "); peers on other hosts use tcp");
  }
  if (device_) self.parts[name()] = "1";
}

std::string RdmaTransport::unreachable(const PeerInfo& self, const PeerInfo& peer) const {
  if (!device_) return "this rank: " + unusableReason_;
  if (!peer.part(name())) return "it has no usable rdma device (see its log)";
  if (!required_ && peer.hostId == self.hostId) return "it runs on this host";
  return {};
}

std::unique_ptr<RdmaEndpoint> RdmaTransport::makeEndpoint(std::string& error) {
  try {
    return std::make_unique<RdmaEndpoint>(device_, config_.nSlots, config_.slotBytes);
  } catch (const Failure& f) {
    error = f.what();
    return nullptr;
  }
}

std::string RdmaTransport::checkPeer(const RdmaAddress& a) const {
  if (a.nSlots != config_.nSlots || a.slotBytes != config_.slotBytes ||
      a.stride != RdmaEndpoint::kDataOffset + (config_.slotBytes + 63) / 64 * 64) {
    return "its slot geometry differs from ours";
  }
  if (bool(a.ethernet) != device_->ethernet) return "one side is RoCE, the other InfiniBand";
  if (a.mtu < IBV_MTU_256 || a.mtu > IBV_MTU_4096) return "a bad MTU";
  return {};
}

std::shared_ptr<Connection> RdmaTransport::fallBack(asio::ip::tcp::socket socket, int peer,
                                                    int channel, const std::string& who,
                                                    const std::string& error) {
  if (required_) fail(Code::system_error, who + ": " + error + " (GYRE_TRANSPORT=rdma)");
  GYRE_LOG(warn, who + ": " + error + "; this connection uses tcp");
  return tcp_.wrap(std::move(socket), peer, channel);
}

std::shared_ptr<Connection> RdmaTransport::connect(const PeerInfo& peer, int channel,
                                                   Clock::time_point deadline,
                                                   const Interrupt& interrupted) {
  return config_.rank < peer.rank ? offer(peer, channel, deadline, interrupted)
                                  : collect(peer, channel, deadline, interrupted);
}

// The lower rank: offers its queue pair, connects to the one it gets back, confirms.
std::shared_ptr<Connection> RdmaTransport::offer(const PeerInfo& peer, int channel,
                                                 Clock::time_point deadline,
                                                 const Interrupt& interrupted) {
  const std::string who = "rank " + std::to_string(config_.rank) + ": setting up rdma with rank " +
                          std::to_string(peer.rank) + " (channel " + std::to_string(channel) + ")";
  auto socket = tcp_.connectSocket(peer, channel, deadline, interrupted, wire::kFlagRdmaOffer);
  const int fd = socket.native_handle();
  std::string error;
  auto endpoint = makeEndpoint(error);
  Offer offer{};
  std::memcpy(offer.magic, kOfferMagic, 4);
  offer.status = endpoint ? 0 : 1;
  if (endpoint) offer.address = endpoint->address();
  transferExactly(fd, &offer, sizeof offer, true, deadline, interrupted, who, peer.rank);
  Offer reply{};
  transferExactly(fd, &reply, sizeof reply, false, deadline, interrupted, who, peer.rank);
  if (std::memcmp(reply.magic, kReplyMagic, 4) != 0) fail(Code::remote_error, who + ": bad reply");
  if (error.empty() && reply.status != 0) {
    error = "rank " + std::to_string(peer.rank) + " could not set up its side (see its log)";
  }
  if (error.empty()) error = checkPeer(reply.address);
  if (error.empty()) {
    try {
      endpoint->connect(reply.address);
    } catch (const Failure& f) {
      error = f.what();
    }
  }
  Confirm confirm{};
  std::memcpy(confirm.magic, kConfirmMagic, 4);
  confirm.status = error.empty() ? 0 : 1;
  transferExactly(fd, &confirm, sizeof confirm, true, deadline, interrupted, who, peer.rank);
  if (!error.empty()) return fallBack(std::move(socket), peer.rank, channel, who, error);
  return std::make_shared<RdmaConnection>(std::move(endpoint), reply.address, socket.release(),
                                          config_.rank, peer.rank, channel, config_);
}

// The higher rank's loop: builds and connects its queue pair to the offered one, answers;
// collect() picks the endpoint up once the dialler confirms.
void RdmaTransport::answerOfferOnLoop(asio::ip::tcp::socket& socket, int peer, int channel,
                                      std::function<void()> ready) {
  struct Exchange {
    Offer offer{};
    Offer reply{};
  };
  auto x = std::make_shared<Exchange>();
  asio::async_read(socket, asio::buffer(&x->offer, sizeof x->offer),
                   [this, &socket, peer, channel, ready, x](const asio::error_code& ec, size_t) {
                     if (ec) return ready();  // collect() finds nothing prepared and says so
                     Prepared prepared;
                     const Offer& o = x->offer;
                     if (std::memcmp(o.magic, kOfferMagic, 4) != 0) {
                       prepared.error = "a malformed offer";
                     } else if (o.status != 0) {
                       prepared.error = "rank " + std::to_string(peer) +
                                        " could not set up its side (see its log)";
                     } else if (!device_) {
                       prepared.error = "no usable device here: " + unusableReason_;
                     } else {
                       prepared.error = checkPeer(o.address);
                     }
                     if (prepared.error.empty()) prepared.endpoint = makeEndpoint(prepared.error);
                     if (prepared.endpoint) {
                       try {
                         prepared.endpoint->connect(o.address);
                         prepared.peerAddress = o.address;
                         x->reply.address = prepared.endpoint->address();
                       } catch (const Failure& f) {
                         prepared.error = f.what();
                         prepared.endpoint.reset();
                       }
                     }
                     std::memcpy(x->reply.magic, kReplyMagic, 4);
                     x->reply.status = prepared.error.empty() ? 0 : 1;
                     prepared_.put(peer, channel, std::move(prepared));
                     asio::async_write(socket, asio::buffer(&x->reply, sizeof x->reply),
                                       [ready, x](const asio::error_code&, size_t) { ready(); });
                   });
}

std::shared_ptr<Connection> RdmaTransport::collect(const PeerInfo& peer, int channel,
                                                   Clock::time_point deadline,
                                                   const Interrupt& interrupted) {
  auto socket = tcp_.connectSocket(peer, channel, deadline, interrupted);
  const std::string who = "rank " + std::to_string(config_.rank) + ": setting up rdma with rank " +
                          std::to_string(peer.rank) + " (channel " + std::to_string(channel) + ")";
  std::optional<Prepared> taken = prepared_.take(peer.rank, channel);
  if (!taken) {
    throw Failure(Status{Code::remote_error,
                         who + ": the peer went away before it offered a queue pair", peer.rank});
  }
  Prepared prepared = std::move(*taken);
  // Our queue pair is ready to receive; the dialler's may not be until it confirms.
  Confirm confirm{};
  transferExactly(socket.native_handle(), &confirm, sizeof confirm, false, deadline, interrupted,
                  who, peer.rank);
  if (std::memcmp(confirm.magic, kConfirmMagic, 4) != 0) {
    fail(Code::remote_error, who + ": bad confirmation");
  }
  if (prepared.error.empty() && confirm.status != 0) {
    prepared.error = "rank " + std::to_string(peer.rank) + " could not connect (see its log)";
  }
  if (!prepared.error.empty()) {
    return fallBack(std::move(socket), peer.rank, channel, who, prepared.error);
  }
  return std::make_shared<RdmaConnection>(std::move(prepared.endpoint), prepared.peerAddress,
                                          socket.release(), config_.rank, peer.rank, channel,
                                          config_);
}

}  // namespace gyre

namespace gyre {

uint64_t RdmaTransport::registerMemory(const void* p, size_t bytes, const std::string& who) {
  if (!device_) return 0;
  if (!isCudaDeviceMemory(p)) return device_->registerUser(p, bytes);
  // GPUDirect RDMA: through a dma-buf where the GPU driver exports one, else ibv_reg_mr on the
  // device address (a peer-memory module, nvidia-peermem, makes that work). 0 when neither
  // does: calls from the buffer then stage through host memory.
  std::string viaDmabuf, viaPeerMemory;
  uint64_t offset = 0;
  if (const int fd = cudaDmabufOf(p, bytes, offset, viaDmabuf); fd >= 0) {
    const DmabufRange range{fd, offset};
    try {
      const uint64_t id = device_->registerUser(p, bytes, &range);
      close(fd);  // the region holds its own reference
      GYRE_LOG(info, who + ": gyreCommRegister: device buffer at " + pointerText(p) +
                         " registered for GPUDirect RDMA through a dma-buf");
      return id;
    } catch (const Failure& f) {
      viaDmabuf = f.status().message;
    }
    close(fd);
  }
  try {
    const uint64_t id = device_->registerUser(p, bytes);
    GYRE_LOG(info, who + ": gyreCommRegister: device buffer at " + pointerText(p) +
                       " registered for GPUDirect RDMA through peer memory");
    return id;
  } catch (const Failure& f) {
    viaPeerMemory = f.status().message;
  }
  GYRE_LOG(info, who + ": gyreCommRegister: no GPUDirect RDMA for the device buffer at " +
                     pointerText(p) + " (dma-buf: " + viaDmabuf + "; peer memory: " +
                     viaPeerMemory + "): calls from it stage through host memory");
  return 0;
}

void RdmaTransport::deregisterMemory(uint64_t handle) {
  if (device_ && handle) device_->deregisterUser(handle);
}

}  // namespace gyre
