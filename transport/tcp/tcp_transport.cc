#include "transport/tcp/tcp_transport.h"

#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <asio/connect.hpp>
#include <asio/read.hpp>
#include <asio/steady_timer.hpp>
#include <asio/write.hpp>
#include <fstream>
#include <future>

#include "base/auth.h"
#include "base/fd.h"
#include "base/log.h"
#include "transport/tcp/handshake.h"
#include "transport/tcp/tcp_connection.h"

namespace gyre {

using asio::ip::tcp;

struct TcpTransport::Pending {
  explicit Pending(asio::io_context& io) : socket(io), timer(io) {}
  tcp::socket socket;
  asio::steady_timer timer;
  wire::Hello hello{};
  wire::Challenge challenge{};
  wire::Proof proof{};
  wire::Ack ack{};
  std::string remote;
  bool settled = false;  // handed over or refused: no longer counts as handshaking
};

namespace {
constexpr size_t kMaxHandshaking = 64;
}  // namespace

TcpTransport::TcpTransport(EventLoop& loop, LinkConfig config, std::string listenHost)
    : loop_(loop),
      config_(std::move(config)),
      listenHost_(std::move(listenHost)),
      acceptor_(loop.context()),
      acceptRetry_(loop.context()) {}

TcpTransport::~TcpTransport() = default;

void TcpTransport::publish(PeerInfo& self) {
  asio::error_code ec;
  const auto address = asio::ip::make_address(listenHost_, ec);
  if (ec) fail(Code::invalid_argument, "bad listen address '" + listenHost_ + "': " + ec.message());
  const tcp::endpoint endpoint(address, 0);
  acceptor_.open(endpoint.protocol(), ec);
  if (!ec) setCloseOnExec(acceptor_.native_handle());
  if (!ec) acceptor_.bind(endpoint, ec);
  if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    fail(Code::system_error, "rank " + std::to_string(config_.rank) + ": cannot listen on " +
                                 listenHost_ + ": " + ec.message());
  }
  selfHostId_ = self.hostId;
  self.parts[name()] = listenHost_ + " " + std::to_string(acceptor_.local_endpoint().port());
  loop_.post([this] { acceptOnLoop(); });
}

bool TcpTransport::addressOf(const PeerInfo& peer, std::string& host, uint16_t& port) {
  const std::string* part = peer.part("tcp");
  if (!part) return false;
  const auto space = part->rfind(' ');
  if (space == std::string::npos) return false;
  try {
    const int value = std::stoi(part->substr(space + 1));
    if (value <= 0 || value > 65535) return false;
    port = uint16_t(value);
  } catch (const std::exception&) {
    return false;
  }
  host = part->substr(0, space);
  return true;
}

std::string TcpTransport::address(const PeerInfo& peer) const {
  std::string host;
  uint16_t port = 0;
  if (!addressOf(peer, host, port)) return {};
  return host.find(':') != std::string::npos ? "[" + host + "]:" + std::to_string(port)
                                             : host + ":" + std::to_string(port);
}

std::string TcpTransport::unreachable(const PeerInfo&, const PeerInfo& peer) const {
  std::string host;
  uint16_t port = 0;
  return addressOf(peer, host, port) ? std::string() : "it published no tcp address";
}

void TcpTransport::shutdown() {
  std::promise<void> done;
  loop_.post([this, &done] {
    asio::error_code ignored;
    acceptor_.close(ignored);
    acceptRetry_.cancel();
    done.set_value();
  });
  done.get_future().wait_for(std::chrono::seconds(5));
}

void TcpTransport::acceptOnLoop() {
  auto pending = std::make_shared<Pending>(loop_.context());
  acceptor_.async_accept(pending->socket, [this, pending](const asio::error_code& ec) {
    if (ec == asio::error::operation_aborted || !acceptor_.is_open()) return;
    if (!ec) {
      if (acceptFailing_) {
        acceptFailing_ = false;
        GYRE_LOG(warn, "rank " + std::to_string(config_.rank) + ": accepting connections again");
      }
      setCloseOnExec(pending->socket.native_handle());
      asio::error_code ignored;
      auto remote = pending->socket.remote_endpoint(ignored);
      pending->remote = remote.address().to_string() + ":" + std::to_string(remote.port());
      limitHandshakes();
      handshaking_.push_back(pending);
      readHelloOnLoop(pending);
    } else {
      // Out of descriptors (or another failure that would repeat at once): the connection
      // stays queued in the kernel, so retrying at once would only spin; back off instead,
      // and say so once per streak.
      if (!acceptFailing_) {
        acceptFailing_ = true;
        GYRE_LOG(warn, "rank " + std::to_string(config_.rank) + ": accept failed: " + ec.message() +
                           "; retrying every 100 ms until it works");
      }
      acceptRetry_.expires_after(std::chrono::milliseconds(100));
      acceptRetry_.async_wait([this](const asio::error_code& tec) {
        if (!tec && acceptor_.is_open()) acceptOnLoop();
      });
      return;
    }
    acceptOnLoop();
  });
}

void TcpTransport::limitHandshakes() {
  while (!handshaking_.empty()) {
    auto front = handshaking_.front().lock();
    if (front && !front->settled) break;
    handshaking_.pop_front();
  }
  if (handshaking_.size() < kMaxHandshaking) return;
  // Count the live ones (settled ones may sit behind the front), then drop the oldest.
  size_t live = 0;
  std::shared_ptr<Pending> oldest;
  for (const auto& weak : handshaking_) {
    auto p = weak.lock();
    if (!p || p->settled) continue;
    if (!oldest) oldest = p;
    ++live;
  }
  if (live < kMaxHandshaking || !oldest) return;
  if (!warnedHandshakesFull_) {
    warnedHandshakesFull_ = true;  // once: a flood must not flood the log too
    GYRE_LOG(warn, "rank " + std::to_string(config_.rank) + ": " + std::to_string(kMaxHandshaking) +
                       " connections on the data port have not finished their handshake; "
                       "dropping the oldest as new ones come (strangers on the port?)");
  }
  oldest->settled = true;
  asio::error_code ignored;
  oldest->socket.close(ignored);
}

// A peer that stops talking during the handshake is dropped after the handshake timeout.
void TcpTransport::armHandshakeTimer(const std::shared_ptr<Pending>& pending) {
  pending->timer.expires_after(config_.handshakeTimeout);
  pending->timer.async_wait([pending](const asio::error_code& ec) {
    if (!ec) {
      asio::error_code ignored;
      pending->socket.close(ignored);
    }
  });
}

void TcpTransport::readHelloOnLoop(std::shared_ptr<Pending> pending) {
  armHandshakeTimer(pending);
  asio::async_read(pending->socket, asio::buffer(&pending->hello, sizeof(wire::Hello)),
                   [this, pending](const asio::error_code& ec, size_t) {
                     pending->timer.cancel();
                     const std::string who = "rank " + std::to_string(config_.rank) +
                                             ": refused a data connection from " + pending->remote +
                                             ": ";
                     if (ec) {
                       GYRE_LOG(warn, who + "no complete handshake (" + ec.message() + ")");
                       return;
                     }
                     const std::string why = wire::checkHello(
                         pending->hello, config_.jobId, config_.rank, config_.nranks,
                         config_.nSlots, uint32_t(config_.slotBytes));
                     if (!why.empty()) {
                       GYRE_LOG(warn, who + why);
                       asio::error_code ignored;
                       pending->socket.close(ignored);
                       return;
                     }
                     sendChallengeOnLoop(pending);
                   });
}

void TcpTransport::sendChallengeOnLoop(std::shared_ptr<Pending> pending) {
  const auto nonce = auth::randomNonce();
  const auto helloBytes = wire::bytesOf(&pending->hello, sizeof(wire::Hello));
  std::memcpy(pending->challenge.magic, wire::kChallengeMagic, 4);
  std::memcpy(pending->challenge.nonce, nonce.data(), nonce.size());
  const auto proof = auth::mac(config_.secret, "gyre-accept", helloBytes, auth::view(nonce));
  std::memcpy(pending->challenge.mac, proof.data(), proof.size());
  armHandshakeTimer(pending);
  asio::async_write(
      pending->socket, asio::buffer(&pending->challenge, sizeof(wire::Challenge)),
      [this, pending](const asio::error_code& ec, size_t) {
        if (ec) return;
        asio::async_read(
            pending->socket, asio::buffer(&pending->proof, sizeof(wire::Proof)),
            [this, pending](const asio::error_code& rec, size_t) {
              pending->timer.cancel();
              const std::string who = "rank " + std::to_string(config_.rank) +
                                      ": refused a data connection from " + pending->remote +
                                      " claiming to be rank " +
                                      std::to_string(pending->hello.fromRank) + ": ";
              if (rec) {
                GYRE_LOG(warn, who + "no proof of the job secret (" + rec.message() + ")");
                return;
              }
              auth::Mac given;
              std::memcpy(given.data(), pending->proof.mac, given.size());
              const auto expected = auth::mac(config_.secret, "gyre-connect",
                                              wire::bytesOf(&pending->hello, sizeof(wire::Hello)),
                                              wire::bytesOf(pending->challenge.nonce, 16));
              if (std::memcmp(pending->proof.magic, wire::kProofMagic, 4) != 0 ||
                  !auth::equal(given, expected)) {
                GYRE_LOG(warn, who + "authentication failed (a different GYRE_SECRET?)");
                asio::error_code ignored;
                pending->socket.close(ignored);
                return;
              }
              std::memcpy(pending->ack.magic, wire::kAckMagic, 4);
              pending->ack.status = 0;
              asio::async_write(pending->socket, asio::buffer(&pending->ack, sizeof(wire::Ack)),
                                [this, pending](const asio::error_code& wec, size_t) {
                                  if (!wec) handOverOnLoop(pending);
                                });
            });
      });
}

void TcpTransport::handOverOnLoop(std::shared_ptr<Pending> pending) {
  auto ready = [this, pending] {
    pending->settled = true;
    pending->timer.cancel();
    std::lock_guard lock(mutex_);
    const auto key = std::make_pair(int(pending->hello.fromRank), int(pending->hello.channel));
    accepted_.insert_or_assign(key, std::move(pending->socket));
    accepted_cv_.notify_all();
  };
  if (pending->hello.flags == 0) return ready();
  const auto hook = acceptHooks_.find(pending->hello.flags);
  if (hook == acceptHooks_.end()) {
    GYRE_LOG(warn, "rank " + std::to_string(config_.rank) +
                       ": refused a data connection from rank " +
                       std::to_string(pending->hello.fromRank) + ": it asked for " +
                       (pending->hello.flags == wire::kFlagShmOffer ? "shared memory" : "rdma") +
                       ", which this rank does not use");
    asio::error_code ignored;
    pending->socket.close(ignored);
    return;
  }
  armHandshakeTimer(pending);
  hook->second(pending->socket, pending->hello.fromRank, pending->hello.channel, ready);
}

std::shared_ptr<Connection> TcpTransport::connect(const PeerInfo& peer, int channel,
                                                  Clock::time_point deadline,
                                                  const Interrupt& interrupted) {
  auto socket = connectSocket(peer, channel, deadline, interrupted);
  setCongestionControl(socket.native_handle(), peer);
  if (logEnabled(LogLevel::trace)) {
    char name[16] = {};
    socklen_t length = sizeof name - 1;
    getsockopt(socket.native_handle(), IPPROTO_TCP, TCP_CONGESTION, name, &length);
    unsigned long maxPacing = ~0UL;
    length = sizeof maxPacing;
    getsockopt(socket.native_handle(), SOL_SOCKET, SO_MAX_PACING_RATE, &maxPacing, &length);
    GYRE_LOG(trace, "rank " + std::to_string(config_.rank) + ": tcp to rank " +
                        std::to_string(peer.rank) + " channel " + std::to_string(channel) +
                        " uses congestion control " + name + (maxPacing == 0 ? ", unpaced" : ""));
  }
  return wrap(std::move(socket), peer.rank, channel);
}

// Between ranks of one host "auto" takes BBR with its pacing turned off. Paced, BBR sends at
// the bandwidth it last measured, and a collective's bursts with pauses between leave that
// estimate low: over loopback half the connections ran at 32-40 % of the unpaced speed
// (docs/perf/earlier_comparisons.md). Its window, counted in segments and sized to the
// measured delay, is what small frames need where ranks share cores: a window-based algorithm
// (cubic) grows to thousands of segments, so every small send leaves as a segment of its own
// and costs the kernel a delivery; BBR's few segments in flight make later sends join the
// queued one (docs/perf/tcp_congestion.md). A maximum pacing rate of 0 turns pacing off (the
// kernel paces only at a rate above zero). Where BBR is refused, cubic, else reno. Connections
// to other hosts keep the system's choice, pacing included: a real network needs it.
void TcpTransport::setCongestionControl(int fd, const PeerInfo& peer) {
  const std::string& wanted = config_.tcpCongestion;
  if (wanted == "system") return;
  const auto set = [fd](const std::string& name) {
    return ::setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name.data(), socklen_t(name.size())) == 0;
  };
  if (wanted == "auto") {
    if (peer.hostId != selfHostId_ || setUnpacedBbr(fd) || set("cubic") || set("reno")) return;
    GYRE_LOG(info, "rank " + std::to_string(config_.rank) + ": the connection to rank " +
                       std::to_string(peer.rank) + " keeps the system's tcp congestion control (" +
                       errnoText(errno) + ")");
    return;
  }
  if (set(wanted)) return;
  const int err = errno;
  std::ifstream allowedFile("/proc/sys/net/ipv4/tcp_allowed_congestion_control");
  std::string allowed;
  std::getline(allowedFile, allowed);
  fail(Code::invalid_argument,
       "rank " + std::to_string(config_.rank) + ": cannot use tcp congestion control '" + wanted +
           "' (GYRE_TCP_CONGESTION) for the connection to rank " + std::to_string(peer.rank) +
           ": " + (err == ENOENT ? "this kernel has none of that name" : errnoText(err)) +
           (allowed.empty() ? "" : " (this host allows: " + allowed + ")"));
}

bool TcpTransport::setUnpacedBbr(int fd) {
  static constexpr char kBbr[] = "bbr";
  if (::setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, kBbr, sizeof kBbr - 1) != 0) return false;
  const unsigned long unpaced = 0;
  return ::setsockopt(fd, SOL_SOCKET, SO_MAX_PACING_RATE, &unpaced, sizeof unpaced) == 0;
}

tcp::socket TcpTransport::connectSocket(const PeerInfo& peer, int channel,
                                        Clock::time_point deadline, const Interrupt& interrupted,
                                        uint16_t flags) {
  if (peer.rank == config_.rank) fail(Code::internal, "tcp connect to self");
  return config_.rank < peer.rank ? dial(peer, channel, deadline, interrupted, flags)
                                  : awaitAccepted(peer, channel, deadline, interrupted);
}

std::shared_ptr<Connection> TcpTransport::wrap(tcp::socket socket, int peer, int channel) {
  return std::make_shared<TcpConnection>(loop_, std::move(socket), config_.rank, peer, channel,
                                         config_);
}

namespace {

constexpr auto kRefusedGivesUpAfter = std::chrono::seconds(1);

// State of one outgoing handshake, shared between the user thread and the loop.
struct Dial {
  Dial(asio::io_context& io) : socket(io), timer(io) {}
  tcp::socket socket;
  asio::steady_timer timer;
  tcp::endpoint endpoint;
  wire::Hello hello{};
  wire::Challenge challenge{};
  wire::Proof proof{};
  wire::Ack ack{};
  std::string secret;
  bool acceptorProved = true;
  Clock::time_point deadline;
  Clock::time_point firstRefused{};  // when the peer first refused, while it keeps refusing
  std::promise<asio::error_code> result;
  bool done = false;

  void finish(const asio::error_code& ec) {
    if (done) return;
    done = true;
    result.set_value(ec);
  }
};

// The acceptor proves the secret first; only then do we prove it in turn.
void answerChallengeOnLoop(std::shared_ptr<Dial> d) {
  const auto helloBytes = wire::bytesOf(&d->hello, sizeof d->hello);
  const auto nonce = wire::bytesOf(d->challenge.nonce, 16);
  auth::Mac given;
  std::memcpy(given.data(), d->challenge.mac, given.size());
  if (std::memcmp(d->challenge.magic, wire::kChallengeMagic, 4) != 0 ||
      !auth::equal(given, auth::mac(d->secret, "gyre-accept", helloBytes, nonce))) {
    d->acceptorProved = false;
    return d->finish(asio::error::access_denied);
  }
  std::memcpy(d->proof.magic, wire::kProofMagic, 4);
  const auto proof = auth::mac(d->secret, "gyre-connect", helloBytes, nonce);
  std::memcpy(d->proof.mac, proof.data(), proof.size());
  asio::async_write(d->socket, asio::buffer(&d->proof, sizeof d->proof),
                    [d](const asio::error_code& wec, size_t) {
                      if (wec) return d->finish(wec);
                      asio::async_read(
                          d->socket, asio::buffer(&d->ack, sizeof d->ack),
                          [d](const asio::error_code& rec, size_t) { d->finish(rec); });
                    });
}

void dialOnLoop(std::shared_ptr<Dial> d) {
  d->socket.async_connect(d->endpoint, [d](const asio::error_code& ec) {
    if (d->done) return;
    if (d->socket.is_open()) setCloseOnExec(d->socket.native_handle());
    const auto now = Clock::now();
    if (ec == asio::error::connection_refused && d->firstRefused == Clock::time_point{}) {
      d->firstRefused = now;
    }
    // A peer listens before it publishes its address, so a refusal means its listener is
    // closed: it exited or is going. Retried a while (a refusal from a port being reused, a
    // filter), then it ends the dial, naming the peer, instead of holding it to the deadline.
    if (ec == asio::error::connection_refused && now < d->deadline &&
        now - d->firstRefused < kRefusedGivesUpAfter) {
      asio::error_code ignored;
      d->socket.close(ignored);
      d->timer.expires_after(std::chrono::milliseconds(20));
      d->timer.async_wait([d](const asio::error_code& tec) {
        if (!tec) dialOnLoop(d);
      });
      return;
    }
    if (ec) return d->finish(ec);
    asio::async_write(d->socket, asio::buffer(&d->hello, sizeof d->hello),
                      [d](const asio::error_code& wec, size_t) {
                        if (wec) return d->finish(wec);
                        asio::async_read(d->socket,
                                         asio::buffer(&d->challenge, sizeof d->challenge),
                                         [d](const asio::error_code& rec, size_t) {
                                           if (rec) return d->finish(rec);
                                           answerChallengeOnLoop(d);
                                         });
                      });
  });
}

}  // namespace

tcp::socket TcpTransport::dial(const PeerInfo& peer, int channel, Clock::time_point deadline,
                               const Interrupt& interrupted, uint16_t flags) {
  std::string host;
  uint16_t port = 0;
  const bool published = addressOf(peer, host, port);
  const std::string who = "rank " + std::to_string(config_.rank) + ": connecting to rank " +
                          std::to_string(peer.rank) + " at " + host + ":" + std::to_string(port) +
                          " (channel " + std::to_string(channel) + ")";
  if (!published) fail(Code::internal, who + ": it published no tcp address");
  asio::error_code ec;
  const auto address = asio::ip::make_address(host, ec);
  if (ec) fail(Code::internal, who + ": bad address published: " + ec.message());

  auto d = std::make_shared<Dial>(loop_.context());
  d->endpoint = tcp::endpoint(address, port);
  d->deadline = deadline;
  std::memcpy(d->hello.magic, wire::kHelloMagic, 4);
  d->hello.version = wire::kProtocolVersion;
  d->hello.flags = flags;
  wire::copyJobId(d->hello.jobId, config_.jobId);
  d->hello.fromRank = config_.rank;
  d->hello.toRank = peer.rank;
  d->hello.channel = channel;
  d->hello.nranks = config_.nranks;
  d->hello.nSlots = config_.nSlots;
  d->hello.slotBytes = uint32_t(config_.slotBytes);
  const auto nonce = auth::randomNonce();
  std::memcpy(d->hello.nonce, nonce.data(), nonce.size());
  d->secret = config_.secret;
  auto result = d->result.get_future();
  loop_.post([d] { dialOnLoop(d); });

  const auto giveUp = [&] {
    loop_.post([d] {
      asio::error_code ignored;
      d->timer.cancel();
      d->socket.close(ignored);
      d->finish(asio::error::timed_out);
    });
  };
  // A peer that is gone refuses every retry until the deadline: look at why now and then.
  while (result.wait_until(std::min(deadline, Clock::now() + std::chrono::milliseconds(100))) !=
         std::future_status::ready) {
    if (Clock::now() >= deadline) {
      giveUp();
      fail(Code::timeout, who + ": timed out");
    }
    if (!interrupted) continue;
    if (const Status s = interrupted(); !s.ok()) {
      giveUp();
      throw Failure(Status{s.code, who + ": " + s.message, s.lostRank});
    }
  }
  ec = result.get();
  if (!d->acceptorProved) {
    fail(Code::invalid_usage, who +
                                  ": the peer could not prove the job secret (is GYRE_SECRET "
                                  "the same on every rank?)");
  }
  if (ec == asio::error::eof) {
    fail(Code::remote_error, who + ": the peer refused the handshake (see its log)");
  }
  if (ec == asio::error::connection_refused) {
    throw Failure(Status{Code::remote_error,
                         who + ": refused for " + std::to_string(kRefusedGivesUpAfter.count()) +
                             " s: nothing listens there any more (the rank exited?)",
                         peer.rank});
  }
  if (ec) fail(Code::remote_error, who + ": " + ec.message());
  if (std::memcmp(d->ack.magic, wire::kAckMagic, 4) != 0 || d->ack.status != 0) {
    fail(Code::remote_error, who + ": bad handshake reply");
  }
  return std::move(d->socket);
}

tcp::socket TcpTransport::awaitAccepted(const PeerInfo& peer, int channel,
                                        Clock::time_point deadline, const Interrupt& interrupted) {
  std::unique_lock lock(mutex_);
  const auto key = std::make_pair(peer.rank, channel);
  while (accepted_.count(key) == 0) {
    const auto now = Clock::now();
    if (now >= deadline) {
      fail(Code::timeout, "rank " + std::to_string(config_.rank) + ": timed out waiting for rank " +
                              std::to_string(peer.rank) + " to connect (channel " +
                              std::to_string(channel) + ")");
    }
    accepted_cv_.wait_until(lock, std::min(deadline, now + std::chrono::milliseconds(100)));
    if (accepted_.count(key) == 0 && interrupted) {
      lock.unlock();
      const Status s = interrupted();
      if (!s.ok()) {
        throw Failure(Status{s.code,
                             "rank " + std::to_string(config_.rank) + ": waiting for rank " +
                                 std::to_string(peer.rank) + " to connect: " + s.message,
                             s.lostRank});
      }
      lock.lock();
    }
  }
  auto socket = std::move(accepted_.at(key));
  accepted_.erase(key);
  return socket;
}

// Blocking transfer of exactly `bytes` on a non-blocking socket, bounded by `deadline`.
void transferExactly(int fd, void* buffer, size_t bytes, bool sending, Clock::time_point deadline,
                     const Transport::Interrupt& interrupted, const std::string& who, int peer) {
  auto* p = static_cast<char*>(buffer);
  size_t done = 0;
  while (done < bytes) {
    const ssize_t n = sending ? ::send(fd, p + done, bytes - done, MSG_DONTWAIT | MSG_NOSIGNAL)
                              : ::recv(fd, p + done, bytes - done, MSG_DONTWAIT);
    if (n > 0) {
      done += size_t(n);
      continue;
    }
    if (n == 0 || (n < 0 && (errno == ECONNRESET || errno == EPIPE))) {
      throw Failure(Status{
          Code::remote_error,
          who + ": " + (n == 0 ? "the peer closed the connection" : errnoText(errno)), peer});
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      fail(Code::remote_error, who + ": " + errnoText(errno));
    }
    const auto left = deadline - Clock::now();
    if (left <= Clock::duration::zero()) fail(Code::timeout, who + ": timed out");
    if (interrupted) {
      if (Status s = interrupted(); !s.ok()) throw Failure(s.code, who + ": " + s.message);
    }
    pollfd pfd{fd, short(sending ? POLLOUT : POLLIN), 0};
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(left).count() + 1;
    ::poll(&pfd, 1, int(std::min<int64_t>(100, ms)));
  }
}

}  // namespace gyre
