#include "runtime/store/server.h"

#include <asio/ip/tcp.hpp>
#include <asio/post.hpp>
#include <asio/read.hpp>
#include <asio/steady_timer.hpp>
#include <asio/write.hpp>
#include <atomic>
#include <cstring>
#include <deque>
#include <list>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "base/auth.h"
#include "base/fd.h"
#include "base/log.h"
#include "base/status.h"
#include "runtime/store/protocol.h"

namespace gyre {

using asio::ip::tcp;
using store::Op;
using store::ProtocolError;
using store::Reader;
using store::Reply;
using store::Writer;

namespace {

constexpr std::chrono::seconds kClientDeadAfter{30};

struct Session;

// A GET or WAIT that blocks until its keys exist or its timer fires.
struct Waiter {
  std::weak_ptr<Session> session;
  std::vector<std::string> keys;
  bool isGet = false;
  std::unique_ptr<asio::steady_timer> timer;
};

struct Job {
  std::unordered_map<std::string, std::string> data;
  std::list<std::shared_ptr<Waiter>> waiters;
  size_t sessions = 0;
};

}  // namespace

struct StoreServer::Impl {
  StoreServerOptions options;
  asio::io_context io;
  tcp::acceptor acceptor{io};
  std::string host;
  uint16_t port = 0;
  std::thread thread;
  std::unordered_map<std::string, Job> jobs;
  std::unordered_set<std::shared_ptr<Session>> sessions;
  std::atomic<size_t> clientCount{0};
  std::atomic<size_t> jobCount{0};
  size_t jobClients = 0;  // sessions that proved the secret and are still connected
  uint64_t arrivals = 0;
  bool warnedPendingFull = false;
  asio::steady_timer acceptRetry{io};  // after a failed accept (out of descriptors)
  bool acceptFailing = false;
  asio::steady_timer idleTimer{io};
  std::atomic<bool> stopped{false};

  void accept();
  // A session that had proved the secret ended: with none left, maybe stop (options).
  void jobClientLeft();
  // Closes the connection that has waited longest without proving the secret.
  void dropOldestPending();
  void wake(Job& job);
  void forgetIfIdle(const std::string& name);
};

namespace {

struct Session : std::enable_shared_from_this<Session> {
  Session(StoreServer::Impl& server, tcp::socket socket)
      : server(server), socket(std::move(socket)), frameTimer(server.io) {
    asio::error_code ec;
    auto ep = this->socket.remote_endpoint(ec);
    peer = ec ? "?" : ep.address().to_string() + ":" + std::to_string(ep.port());
  }

  StoreServer::Impl& server;
  tcp::socket socket;
  asio::steady_timer frameTimer;
  std::string peer;
  std::string jobName;
  Job* job = nullptr;      // set once the client proved the secret
  uint64_t arrival = 0;    // order of connection, for dropping the oldest pending one
  std::string pendingJob;  // between hello and auth
  std::string clientNonce, serverNonce;
  uint32_t frameLength = 0;
  std::string body;
  std::deque<std::string> outbox;
  size_t queuedBytes = 0;
  bool writing = false;
  bool closed = false;
  std::shared_ptr<Waiter> parked;

  // A client must say hello and prove the secret within the frame timeout; afterwards it
  // may stay idle as long as its job runs.
  void start() {
    frameTimer.expires_after(server.options.frameTimeout);
    frameTimer.async_wait([self = shared_from_this()](const asio::error_code& ec) {
      if (!ec && !self->job) self->close("did not authenticate within the frame timeout");
    });
    readHeader();
  }

  void readHeader() {
    asio::async_read(
        socket, asio::buffer(&frameLength, 4),
        [self = shared_from_this()](const asio::error_code& ec, size_t) { self->onHeader(ec); });
  }

  void onHeader(const asio::error_code& ec) {
    if (closed) return;
    if (ec) return close(ec == asio::error::eof ? "" : "read failed: " + ec.message());
    if (parked) return close("sent a request while its previous one was still waiting");
    const size_t limit = job ? store::kMaxFrameBytes : store::kMaxPreAuthFrameBytes;
    if (frameLength > limit) {
      return close("frame of " + std::to_string(frameLength) + " bytes exceeds the " +
                   std::to_string(limit) + "-byte limit" + (job ? "" : " before authentication"));
    }
    body.resize(frameLength);
    if (job) {  // before authentication the hello timer is running already
      frameTimer.expires_after(server.options.frameTimeout);
      frameTimer.async_wait([self = shared_from_this()](const asio::error_code& tec) {
        if (!tec) self->close("frame not completed within the frame timeout");
      });
    }
    asio::async_read(socket, asio::buffer(body),
                     [self = shared_from_this()](const asio::error_code& rec, size_t) {
                       if (self->job) self->frameTimer.cancel();
                       if (self->closed) return;
                       if (rec) {
                         return self->close(rec == asio::error::eof
                                                ? "truncated frame (connection closed)"
                                                : "read failed: " + rec.message());
                       }
                       try {
                         self->handle();
                       } catch (const ProtocolError& e) {
                         return self->close(std::string("malformed frame: ") + e.what());
                       }
                       if (!self->closed) self->readHeader();
                     });
  }

  void handle() {
    store::Request req = store::parseRequest(body);
    if (!job && req.op != Op::hello && req.op != Op::auth) {
      throw ProtocolError("first request must be hello");
    }
    switch (req.op) {
      case Op::hello: {
        if (job || !serverNonce.empty()) throw ProtocolError("second hello");
        if (req.version != store::kVersion) {
          replyError("protocol version " + std::to_string(req.version) + " not supported");
          return close("protocol version " + std::to_string(req.version));
        }
        if (req.nonce.size() != sizeof(auth::Nonce)) throw ProtocolError("bad nonce size");
        clientNonce = std::move(req.nonce);
        const auto nonce = auth::randomNonce();
        serverNonce.assign(auth::view(nonce));
        pendingJob = std::move(req.job);
        const auto proof = auth::mac(auth::jobKey(server.options.secret, pendingJob),
                                     "gyre-store-server", pendingJob, clientNonce, serverNonce);
        Writer w;
        w.u8(uint8_t(Reply::ok))
            .str(serverNonce)
            .str({reinterpret_cast<const char*>(proof.data()), proof.size()});
        return send(w.frame());
      }
      case Op::auth: {
        if (job || serverNonce.empty()) throw ProtocolError("auth out of order");
        auth::Mac theirs{};
        if (req.mac.size() != theirs.size()) throw ProtocolError("bad mac size");
        std::memcpy(theirs.data(), req.mac.data(), theirs.size());
        const auto expected = auth::mac(auth::jobKey(server.options.secret, pendingJob),
                                        "gyre-store-client", pendingJob, serverNonce, clientNonce);
        if (!auth::equal(theirs, expected)) {
          return close("authentication failed for job '" + pendingJob +
                       "' (the client's secret differs from the server's)");
        }
        if (server.jobClients >= server.options.maxClients) {
          replyError("the rendezvous serves " + std::to_string(server.options.maxClients) +
                     " clients already, its limit (gyre-rendezvous --max-clients)");
          return close("refused: " + std::to_string(server.options.maxClients) +
                       " clients already (--max-clients)");
        }
        jobName = std::move(pendingJob);
        job = &server.jobs[jobName];
        server.jobCount = server.jobs.size();
        ++job->sessions;
        ++server.jobClients;
        frameTimer.cancel();  // the hello timer
        return replyOk();
      }
      case Op::set: {
        if (!roomFor(req.key)) return;
        job->data[std::move(req.key)] = std::move(req.value);
        replyOk();
        return server.wake(*job);
      }
      case Op::get:
        return park({std::move(req.key)}, true, req.timeoutMs);
      case Op::add: {
        if (!roomFor(req.key)) return;
        std::string& slot = job->data[req.key];
        int64_t value = 0;
        if (!slot.empty()) {
          char* end = nullptr;
          value = std::strtoll(slot.c_str(), &end, 10);
          if (*end != '\0') return replyError("key '" + req.key + "' does not hold an integer");
        }
        value = int64_t(uint64_t(value) + uint64_t(req.delta));
        slot = std::to_string(value);
        Writer w;
        w.u8(uint8_t(Reply::ok)).i64(value);
        send(w.frame());
        return server.wake(*job);
      }
      case Op::wait:
        return park(std::move(req.keys), false, req.timeoutMs);
      case Op::compare_set: {
        auto it = job->data.find(req.key);
        const std::string current = it == job->data.end() ? std::string() : it->second;
        Writer w;
        w.u8(uint8_t(Reply::ok));
        if (current != req.value) {
          w.str(current);
          return send(w.frame());
        }
        if (!roomFor(req.key)) return;
        job->data[req.key] = req.desired;
        w.str(req.desired);
        send(w.frame());
        return server.wake(*job);
      }
      case Op::remove: {
        Writer w;
        w.u8(uint8_t(Reply::ok)).u8(job->data.erase(req.key) ? 1 : 0);
        return send(w.frame());
      }
    }
  }

  bool roomFor(const std::string& key) {
    if (job->data.size() < server.options.maxKeysPerJob || job->data.count(key)) return true;
    replyError("job '" + jobName + "' reached its limit of " +
               std::to_string(server.options.maxKeysPerJob) + " keys");
    return false;
  }

  void park(std::vector<std::string> keys, bool isGet, uint32_t timeoutMs) {
    auto waiter = std::make_shared<Waiter>();
    waiter->session = weak_from_this();
    waiter->keys = std::move(keys);
    waiter->isGet = isGet;
    if (tryAnswer(*waiter)) return;
    waiter->timer = std::make_unique<asio::steady_timer>(server.io);
    waiter->timer->expires_after(std::chrono::milliseconds(timeoutMs));
    std::weak_ptr<Waiter> weak = waiter;
    waiter->timer->async_wait([self = shared_from_this(), weak](const asio::error_code& ec) {
      auto w = weak.lock();
      if (ec || !w || self->parked != w) return;
      self->unpark();
      Writer out;
      out.u8(uint8_t(Reply::timeout));
      self->send(out.frame());
    });
    parked = waiter;
    job->waiters.push_back(waiter);
  }

  // Replies and returns true when every key of the waiter exists.
  bool tryAnswer(const Waiter& w) {
    for (const auto& k : w.keys)
      if (!job->data.count(k)) return false;
    Writer out;
    out.u8(uint8_t(Reply::ok));
    if (w.isGet) out.str(job->data.at(w.keys.front()));
    send(out.frame());
    return true;
  }

  void unpark() {
    if (!parked) return;
    if (parked->timer) parked->timer->cancel();
    job->waiters.remove(parked);
    parked.reset();
  }

  void replyOk() {
    Writer w;
    w.u8(uint8_t(Reply::ok));
    send(w.frame());
  }

  void replyError(const std::string& message) {
    Writer w;
    w.u8(uint8_t(Reply::error)).str(message);
    send(w.frame());
  }

  void send(std::string frame) {
    if (closed) return;
    queuedBytes += frame.size();
    if (queuedBytes > server.options.maxQueuedReplyBytes) {
      return close("does not read its replies (over " +
                   std::to_string(server.options.maxQueuedReplyBytes) + " bytes queued)");
    }
    outbox.push_back(std::move(frame));
    if (!writing) writeNext();
  }

  void writeNext() {
    if (outbox.empty() || closed) {
      writing = false;
      return;
    }
    writing = true;
    asio::async_write(socket, asio::buffer(outbox.front()),
                      [self = shared_from_this()](const asio::error_code& ec, size_t n) {
                        if (self->closed) return;
                        if (ec) return self->close("write failed: " + ec.message());
                        self->queuedBytes -= n;
                        self->outbox.pop_front();
                        self->writeNext();
                      });
  }

  void close(const std::string& why) {
    if (closed) return;
    closed = true;
    if (!why.empty()) {
      GYRE_LOG(warn, "rendezvous: closed client " + peer +
                         (jobName.empty() ? "" : " (job '" + jobName + "')") + ": " + why);
    }
    if (job) {
      unpark();
      // The job's keys live as long as one of its clients: a finished job frees its memory,
      // and a failed launch leaves no counters behind to misalign the next run of its id.
      // Later, not here: the caller may still be iterating the job's waiters.
      if (--job->sessions == 0) {
        asio::post(server.io, [&srv = server, name = jobName] { srv.forgetIfIdle(name); });
      }
      server.jobClientLeft();
    }
    frameTimer.cancel();
    asio::error_code ignored;
    socket.close(ignored);
    server.sessions.erase(shared_from_this());
    server.clientCount = server.sessions.size();
  }
};

}  // namespace

void StoreServer::Impl::jobClientLeft() {
  if (--jobClients > 0 || options.stopWhenIdleFor.count() <= 0) return;
  idleTimer.expires_after(options.stopWhenIdleFor);
  idleTimer.async_wait([this](const asio::error_code& ec) {
    if (ec || jobClients > 0) return;  // cancelled, or the job came back
    GYRE_LOG(info, "rendezvous at " + joinHostPort(host, port) + ": every client left; stopping");
    stopped = true;
    asio::error_code ignored;
    acceptor.close(ignored);
    for (const auto& s : sessions) s->socket.close(ignored);  // strangers still waiting
    io.stop();
  });
}

void StoreServer::Impl::forgetIfIdle(const std::string& name) {
  auto it = jobs.find(name);
  if (it == jobs.end() || it->second.sessions > 0) return;  // a client of it came back
  jobs.erase(it);
  jobCount = jobs.size();
  GYRE_LOG(trace, "rendezvous: job '" + name + "' ended (its last client left)");
}

void StoreServer::Impl::dropOldestPending() {
  std::shared_ptr<Session> oldest;
  for (const auto& s : sessions)
    if (!s->job && !s->closed && (!oldest || s->arrival < oldest->arrival)) oldest = s;
  if (!oldest) return;
  if (!warnedPendingFull) {
    warnedPendingFull = true;  // once: a flood must not flood the log too
    GYRE_LOG(warn, "rendezvous: " + std::to_string(options.maxPendingClients) +
                       " connections have not authenticated; dropping the oldest as new ones "
                       "come (strangers on the port?)");
  }
  oldest->close("");
}

void StoreServer::Impl::accept() {
  acceptor.async_accept([this](const asio::error_code& ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted || !acceptor.is_open()) return;
    if (!ec) {
      setCloseOnExec(socket.native_handle());
      if (sessions.size() - jobClients >= options.maxPendingClients) dropOldestPending();
      if (sessions.size() >= options.maxClients + options.maxPendingClients) {
        GYRE_LOG(warn, "rendezvous: refused a connection: " + std::to_string(sessions.size()) +
                           " connected already");
        asio::error_code ignored;
        socket.close(ignored);
      } else {
        asio::error_code ignored;
        socket.set_option(tcp::no_delay(true), ignored);
        // A client whose host vanished leaves, so its job can be forgotten.
        setTcpLiveness(socket.native_handle(), kClientDeadAfter);
        auto session = std::make_shared<Session>(*this, std::move(socket));
        session->arrival = ++arrivals;
        sessions.insert(session);
        clientCount = sessions.size();
        session->start();
      }
    } else {
      // Out of descriptors (or another failure that would repeat at once): the connection
      // stays queued in the kernel, so retrying at once would only spin; back off instead,
      // and say so once per streak.
      if (!acceptFailing) {
        acceptFailing = true;
        GYRE_LOG(warn, "rendezvous: accept failed: " + ec.message() +
                           "; retrying every 100 ms until it works");
      }
      acceptRetry.expires_after(std::chrono::milliseconds(100));
      acceptRetry.async_wait([this](const asio::error_code& tec) {
        if (!tec && acceptor.is_open()) accept();
      });
      return;
    }
    if (acceptFailing) {
      acceptFailing = false;
      GYRE_LOG(warn, "rendezvous: accepting connections again");
    }
    accept();
  });
}

void StoreServer::Impl::wake(Job& job) {
  for (auto it = job.waiters.begin(); it != job.waiters.end();) {
    auto waiter = *it;
    auto session = waiter->session.lock();
    if (!session || session->closed) {
      it = job.waiters.erase(it);
      continue;
    }
    ++it;
    if (session->tryAnswer(*waiter)) session->unpark();
  }
}

StoreServer::StoreServer(StoreServerOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
  asio::error_code ec;
  auto address = asio::ip::make_address(impl_->options.host, ec);
  if (ec) {
    // Accept a host name, too: resolve it.
    tcp::resolver resolver(impl_->io);
    auto results = resolver.resolve(impl_->options.host, "", ec);
    if (ec || results.empty()) {
      fail(Code::invalid_argument,
           "rendezvous: cannot resolve listen host '" + impl_->options.host + "'");
    }
    address = results.begin()->endpoint().address();
  }
  tcp::endpoint endpoint(address, impl_->options.port);
  auto& acceptor = impl_->acceptor;
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) setCloseOnExec(acceptor.native_handle());
  if (!ec) acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    fail(Code::system_error, "rendezvous: cannot listen on " +
                                 joinHostPort(impl_->options.host, impl_->options.port) + ": " +
                                 ec.message());
  }
  impl_->host = address.to_string();
  impl_->port = acceptor.local_endpoint().port();
  impl_->accept();
}

StoreServer::~StoreServer() {
  stop();
}

void StoreServer::start() {
  impl_->thread = std::thread([this] {
    pthread_setname_np(pthread_self(), "gyre-rendezvous");
    impl_->io.run();
  });
}

void StoreServer::run() {
  impl_->io.run();
}

bool StoreServer::stopped() const {
  return impl_->stopped.load();
}

void StoreServer::stop() {
  impl_->stopped = true;
  impl_->io.stop();
  if (impl_->thread.joinable() && impl_->thread.get_id() != std::this_thread::get_id()) {
    impl_->thread.join();
  }
}

const std::string& StoreServer::host() const {
  return impl_->host;
}
uint16_t StoreServer::port() const {
  return impl_->port;
}
std::string StoreServer::address() const {
  return joinHostPort(impl_->host, impl_->port);
}
size_t StoreServer::clientCount() const {
  return impl_->clientCount.load();
}
size_t StoreServer::jobCount() const {
  return impl_->jobCount.load();
}

void splitHostPort(const std::string& address, std::string& host, uint16_t& port) {
  const auto colon = address.rfind(':');
  if (colon == std::string::npos || colon + 1 == address.size()) {
    fail(Code::invalid_argument, "address '" + address + "' is not host:port");
  }
  host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  const std::string portText = address.substr(colon + 1);
  char* end = nullptr;
  const long value = std::strtol(portText.c_str(), &end, 10);
  if (*end != '\0' || value < 0 || value > 65535 || host.empty()) {
    fail(Code::invalid_argument, "address '" + address + "' is not host:port");
  }
  port = uint16_t(value);
}

std::string joinHostPort(const std::string& host, uint16_t port) {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

}  // namespace gyre
