#include "transport/shm/shm_transport.h"

#include <asio/read.hpp>
#include <asio/write.hpp>
#include <cstdlib>
#include <cstring>

#include "base/log.h"
#include "transport/shm/shm_connection.h"
#include "transport/tcp/handshake.h"
#include "transport/tcp/tcp_transport.h"

namespace gyre {

namespace {

// The offer and its reply (docs/protocol.md); they follow the tcp handshake on its socket.
struct Offer {
  char magic[4];
  uint32_t status;  // 0: the segment below is offered; 1: none, stay on tcp
  int32_t pid;      // the creator's; the peer opens /proc/<pid>/fd/<fd>
  int32_t fd;
  uint64_t inode;  // what the peer must find there
  uint64_t device;
  uint64_t bytes;
  char reserved[24];
};
struct Reply {
  char magic[4];
  uint32_t status;  // 0: mapped; 1: could not, stay on tcp
};
static_assert(sizeof(Offer) == 64 && sizeof(Reply) == 8, "wire formats");
constexpr char kOfferMagic[4] = {'G', 'S', 'H', 'O'};
constexpr char kReplyMagic[4] = {'G', 'S', 'H', 'R'};

}  // namespace

ShmTransport::ShmTransport(TcpTransport& tcp, LinkConfig config, std::string dir, bool required)
    : tcp_(tcp),
      config_(std::move(config)),
      singleCopyBytes_(config_.singleCopyBytes),
      dir_(std::move(dir)),
      required_(required) {
  tcp_.setAcceptHook(wire::kFlagShmOffer, [this](asio::ip::tcp::socket& socket, int peer,
                                                 int channel, std::function<void()> ready) {
    answerOfferOnLoop(socket, peer, channel, std::move(ready));
  });
}

size_t ShmTransport::segmentBytes() const {
  return ShmLayout::of(config_.nSlots, config_.slotBytes).total;
}

void ShmTransport::publish(PeerInfo& self) {
  const char* sweep = std::getenv("GYRE_SHM_SWEEP");
  if (!(sweep && std::string(sweep) == "0")) {
    if (const int removed = sweepStaleSegments(dir_); removed > 0) {
      GYRE_LOG(warn, "rank " + std::to_string(config_.rank) + ": removed " +
                         std::to_string(removed) + " segments of exited processes from " + dir_);
    }
  }
  // Room for the two ring neighbours' connections; later ones fall back one by one.
  unusableReason_ = shmUnusableReason(dir_, 2 * segmentBytes());
  usable_ = unusableReason_.empty();
  if (!usable_ && config_.nranks > 1) {
    GYRE_LOG(warn, "rank " + std::to_string(config_.rank) + ": shared memory unusable (" +
                       unusableReason_ + "); peers on this host use tcp");
  }
  if (usable_) self.parts[name()] = "1";
}

std::string ShmTransport::unreachable(const PeerInfo& self, const PeerInfo& peer) const {
  if (!usable_) return "this rank: " + unusableReason_;
  if (peer.hostId != self.hostId) return "it runs on another host (" + peer.hostId + ")";
  if (!peer.part(name())) return "its shared memory is unusable (see its log)";
  return {};
}

std::shared_ptr<Connection> ShmTransport::connect(const PeerInfo& peer, int channel,
                                                  Clock::time_point deadline,
                                                  const Interrupt& interrupted) {
  return config_.rank < peer.rank ? offer(peer, channel, deadline, interrupted)
                                  : collect(peer, channel, deadline, interrupted);
}

// The lower rank: creates the segment, offers it, and learns whether the peer mapped it.
std::shared_ptr<Connection> ShmTransport::offer(const PeerInfo& peer, int channel,
                                                Clock::time_point deadline,
                                                const Interrupt& interrupted) {
  const std::string who = "rank " + std::to_string(config_.rank) +
                          ": setting up shared memory with rank " + std::to_string(peer.rank) +
                          " (channel " + std::to_string(channel) + ")";
  ShmSegment segment;
  Offer offer{};
  std::memcpy(offer.magic, kOfferMagic, 4);
  std::string error;
  auto socket = tcp_.connectSocket(peer, channel, deadline, interrupted, wire::kFlagShmOffer);
  try {
    segment = ShmSegment::create(dir_, segmentBytes());
    const ShmHandle& h = segment.handle();
    offer.pid = h.pid;
    offer.fd = h.fd;
    offer.inode = h.inode;
    offer.device = h.device;
    offer.bytes = h.bytes;
  } catch (const Failure& f) {
    error = f.what();
    offer.status = 1;
  }
  const int fd = socket.native_handle();
  transferExactly(fd, &offer, sizeof offer, true, deadline, interrupted, who, peer.rank);
  Reply reply{};
  transferExactly(fd, &reply, sizeof reply, false, deadline, interrupted, who, peer.rank);
  segment.closeHandle();  // mapped on both sides, or never will be
  if (std::memcmp(reply.magic, kReplyMagic, 4) != 0) fail(Code::remote_error, who + ": bad reply");
  if (offer.status == 0 && reply.status != 0) {
    error = "rank " + std::to_string(peer.rank) + " could not map the segment (see its log)";
  }
  if (!error.empty()) {
    if (required_) fail(Code::system_error, who + ": " + error + " (GYRE_TRANSPORT=shm)");
    GYRE_LOG(warn, who + ": " + error + "; this connection uses tcp");
    return tcp_.wrap(std::move(socket), peer.rank, channel);
  }
  return std::make_shared<ShmConnection>(std::move(segment), socket.release(), config_.rank,
                                         peer.rank, channel, connectionConfig());
}

// The higher rank's loop: maps the offered segment and replies; collect() picks it up.
void ShmTransport::answerOfferOnLoop(asio::ip::tcp::socket& socket, int peer, int channel,
                                     std::function<void()> ready) {
  struct Exchange {
    Offer offer{};
    Reply reply{};
  };
  auto x = std::make_shared<Exchange>();
  asio::async_read(
      socket, asio::buffer(&x->offer, sizeof x->offer),
      [this, &socket, peer, channel, ready, x](const asio::error_code& ec, size_t) {
        if (ec) return ready();  // collect() finds nothing prepared and says so
        Prepared prepared;
        const Offer& o = x->offer;
        if (std::memcmp(o.magic, kOfferMagic, 4) != 0) {
          prepared.error = "a malformed offer";
        } else if (o.status != 0) {
          prepared.error =
              "rank " + std::to_string(peer) + " could not create a segment (see its log)";
        } else if (o.bytes != segmentBytes()) {
          prepared.error = "an offer of " + std::to_string(o.bytes) + " bytes, not " +
                           std::to_string(segmentBytes());
        } else {
          try {
            prepared.segment = ShmSegment::open({o.pid, o.fd, o.inode, o.device, o.bytes});
          } catch (const Failure& f) {
            prepared.error = f.what();
          }
        }
        std::memcpy(x->reply.magic, kReplyMagic, 4);
        x->reply.status = prepared.error.empty() ? 0 : 1;
        prepared_.put(peer, channel, std::move(prepared));
        asio::async_write(socket, asio::buffer(&x->reply, sizeof x->reply),
                          [ready, x](const asio::error_code&, size_t) { ready(); });
      });
}

LinkConfig ShmTransport::connectionConfig() const {
  LinkConfig config = config_;
  config.singleCopyBytes = singleCopyBytes_.load(std::memory_order_relaxed);
  return config;
}

std::shared_ptr<Connection> ShmTransport::collect(const PeerInfo& peer, int channel,
                                                  Clock::time_point deadline,
                                                  const Interrupt& interrupted) {
  auto socket = tcp_.connectSocket(peer, channel, deadline, interrupted);
  const std::string who = "rank " + std::to_string(config_.rank) +
                          ": setting up shared memory with rank " + std::to_string(peer.rank) +
                          " (channel " + std::to_string(channel) + ")";
  std::optional<Prepared> taken = prepared_.take(peer.rank, channel);
  if (!taken) {
    throw Failure(Status{Code::remote_error,
                         who + ": the peer went away before it offered a segment", peer.rank});
  }
  Prepared prepared = std::move(*taken);
  if (!prepared.error.empty()) {
    if (required_) fail(Code::system_error, who + ": " + prepared.error + " (GYRE_TRANSPORT=shm)");
    GYRE_LOG(warn, who + ": " + prepared.error + "; this connection uses tcp");
    return tcp_.wrap(std::move(socket), peer.rank, channel);
  }
  return std::make_shared<ShmConnection>(std::move(prepared.segment), socket.release(),
                                         config_.rank, peer.rank, channel, connectionConfig());
}

}  // namespace gyre
