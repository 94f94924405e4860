#include "runtime/store/tcp_store.h"

#include <asio/connect.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/read.hpp>
#include <asio/write.hpp>
#include <cstring>
#include <mutex>
#include <thread>

#include "base/auth.h"
#include "base/fd.h"
#include "base/status.h"
#include "runtime/store/protocol.h"
#include "runtime/store/server.h"

namespace gyre {

using asio::ip::tcp;
using store::Reply;

struct TcpStore::Impl {
  TcpStoreOptions options;
  asio::io_context io;
  tcp::socket socket{io};
  std::mutex mutex;
  bool broken = false;
  bool oversizedReply = false;  // the last reply declared more than the caller allowed

  std::string where() const { return "rendezvous " + joinHostPort(options.host, options.port); }

  // Runs the io_context until `done` or the deadline; on the deadline the socket is closed.
  bool runUntil(const bool& done, std::chrono::steady_clock::time_point deadline) {
    io.restart();
    while (!done) {
      if (io.run_one_until(deadline) == 0 && !done) {
        if (std::chrono::steady_clock::now() < deadline && !io.stopped()) continue;
        asio::error_code ignored;
        socket.close(ignored);
        io.restart();
        io.run();  // let the cancelled operations finish
        return false;
      }
    }
    return true;
  }

  void connect() {
    const auto deadline = std::chrono::steady_clock::now() + options.connectTimeout;
    asio::error_code ec;
    tcp::resolver resolver(io);
    auto endpoints = resolver.resolve(options.host, std::to_string(options.port), ec);
    if (ec) fail(Code::invalid_argument, "cannot resolve " + where() + ": " + ec.message());
    while (true) {
      bool done = false;
      ec = {};
      asio::async_connect(socket, endpoints, [&](const asio::error_code& e, const tcp::endpoint&) {
        ec = e;
        done = true;
        if (socket.is_open()) setCloseOnExec(socket.native_handle());
      });
      if (!runUntil(done, deadline)) {
        fail(Code::timeout, "timed out connecting to " + where());
      }
      if (!ec) break;
      if (std::chrono::steady_clock::now() >= deadline) {
        fail(Code::timeout, "cannot reach " + where() + ": " + ec.message());
      }
      // The server may not be up yet (e.g. rank 0 still starting it): retry.
      asio::error_code ignored;
      socket.close(ignored);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    socket.set_option(tcp::no_delay(true), ec);
    setTcpLiveness(socket.native_handle(), options.deadAfter);
    authenticate();
  }

  // Both sides prove they know the job's secret; see docs/protocol.md.
  void authenticate() {
    const auto clientNonce = auth::randomNonce();
    store::Writer hello;
    hello.u8(uint8_t(store::Op::hello))
        .u16(store::kVersion)
        .str(options.jobId)
        .str(auth::view(clientNonce));
    // Its reply is small: a larger one, or one that does not parse, is another protocol.
    std::string body, serverNonce, proof;
    try {
      body = roundTrip(hello.frame(), options.connectTimeout, store::kMaxPreAuthFrameBytes);
      store::Reader in(body);
      if (status(in) != Reply::ok) expectOk(body, "hello");
      serverNonce = in.str(64);
      proof = in.str(64);
      in.end();
    } catch (const store::ProtocolError& e) {
      notRendezvous(e.what());
    } catch (const Failure& f) {
      if (f.status().code == Code::remote_error && oversizedReply) notRendezvous(f.what());
      throw;
    }
    const auto expected =
        auth::mac(auth::jobKey(options.secret, options.jobId), "gyre-store-server", options.jobId,
                  auth::view(clientNonce), serverNonce);
    auth::Mac given{};
    if (proof.size() != given.size()) fail(Code::remote_error, where() + ": malformed hello reply");
    std::memcpy(given.data(), proof.data(), given.size());
    if (!auth::equal(given, expected)) {
      broken = true;
      fail(Code::invalid_usage, where() +
                                    " does not know this job's secret (GYRE_SECRET or "
                                    "--secret must be the same for the server and every rank)");
    }
    const auto answer = auth::mac(auth::jobKey(options.secret, options.jobId), "gyre-store-client",
                                  options.jobId, serverNonce, auth::view(clientNonce));
    store::Writer w;
    w.u8(uint8_t(store::Op::auth))
        .str({reinterpret_cast<const char*>(answer.data()), answer.size()});
    std::string reply;
    try {
      reply = roundTrip(w.frame(), options.connectTimeout);
    } catch (const Failure& f) {
      // A server that stalls is not one that refused: say which.
      if (f.status().code == Code::timeout) {
        fail(Code::timeout, where() + " did not answer this client's authentication within " +
                                std::to_string(options.connectTimeout.count()) +
                                " ms (stalled or overloaded)");
      }
      // The server closes a client whose proof is wrong without a word.
      fail(Code::invalid_usage, where() +
                                    " refused this client's secret (GYRE_SECRET or "
                                    "--secret must be the same for the server and every rank)");
    }
    expectOk(reply, "this client");  // e.g. the server is at its client limit
  }

  [[noreturn]] void notRendezvous(const std::string& detail) {
    broken = true;
    fail(Code::remote_error, where() +
                                 " is not a gyre rendezvous: its reply to hello is not gyre's "
                                 "protocol (" +
                                 detail + "); is another service listening on that port?");
  }

  // Sends one frame and returns the reply body. The deadline covers both directions.
  std::string roundTrip(const std::string& frame, std::chrono::milliseconds timeout,
                        size_t maxReply = store::kMaxFrameBytes) {
    if (broken) fail(Code::remote_error, "connection to " + where() + " was lost earlier");
    oversizedReply = false;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    bool done = false;
    asio::error_code ec;
    uint32_t length = 0;
    std::string body;
    asio::async_write(socket, asio::buffer(frame), [&](const asio::error_code& e, size_t) {
      if (e) {
        ec = e;
        done = true;
        return;
      }
      asio::async_read(socket, asio::buffer(&length, 4), [&](const asio::error_code& e2, size_t) {
        if (e2 || length > maxReply) {
          oversizedReply = !e2;
          ec = e2 ? e2 : asio::error::message_size;
          done = true;
          return;
        }
        body.resize(length);
        asio::async_read(socket, asio::buffer(body), [&](const asio::error_code& e3, size_t) {
          ec = e3;
          done = true;
        });
      });
    });
    if (!runUntil(done, deadline)) {
      broken = true;
      fail(Code::timeout,
           "no reply from " + where() + " within " + std::to_string(timeout.count()) + " ms");
    }
    if (ec) {
      broken = true;
      fail(Code::remote_error,
           "lost the connection to " + where() + ": " +
               (ec == asio::error::eof ? "closed by the server" : ec.message()));
    }
    return body;
  }

  // Parses the status byte; returns a reader positioned after it.
  static Reply status(store::Reader& in) { return static_cast<Reply>(in.u8()); }

  void expectOk(const std::string& body, const char* what) {
    store::Reader in(body);
    const Reply r = status(in);
    if (r == Reply::error) {
      fail(Code::invalid_usage,
           where() + " refused " + what + ": " + in.str(store::kMaxValueBytes));
    }
    if (r != Reply::ok) fail(Code::internal, where() + ": unexpected reply to " + what);
  }

  // A request whose reply can take up to `wait` (get, wait) gets that plus a margin.
  std::chrono::milliseconds replyTimeout(std::chrono::milliseconds wait = {}) const {
    return wait + options.replyTimeout;
  }
};

TcpStore::TcpStore(TcpStoreOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
  if (impl_->options.port == 0) {
    fail(Code::invalid_argument, impl_->where() +
                                     ": port 0 is not an address to connect to (a server "
                                     "started on port 0 picked a port: give that one)");
  }
  impl_->connect();
}

TcpStore::~TcpStore() = default;

void TcpStore::set(const std::string& key, const std::string& value) {
  std::lock_guard lock(impl_->mutex);
  store::Writer w;
  w.u8(uint8_t(store::Op::set)).str(key).str(value);
  impl_->expectOk(impl_->roundTrip(w.frame(), impl_->replyTimeout()), "set");
}

namespace {
uint32_t clampMs(Store::Duration d) {
  return uint32_t(std::clamp<int64_t>(d.count(), 0, int64_t(UINT32_MAX / 2)));
}
}  // namespace

std::string TcpStore::get(const std::string& key, Duration timeout) {
  std::lock_guard lock(impl_->mutex);
  store::Writer w;
  w.u8(uint8_t(store::Op::get)).str(key).u32(clampMs(timeout));
  const std::string body = impl_->roundTrip(w.frame(), impl_->replyTimeout(timeout));
  store::Reader in(body);
  const Reply r = Impl::status(in);
  if (r == Reply::timeout) {
    fail(Code::timeout, "key '" + key + "' did not appear in " + impl_->where() + " within " +
                            std::to_string(timeout.count()) + " ms");
  }
  if (r != Reply::ok) impl_->expectOk(body, "get");
  return in.str(store::kMaxValueBytes);
}

int64_t TcpStore::add(const std::string& key, int64_t delta) {
  std::lock_guard lock(impl_->mutex);
  store::Writer w;
  w.u8(uint8_t(store::Op::add)).str(key).i64(delta);
  const std::string body = impl_->roundTrip(w.frame(), impl_->replyTimeout());
  store::Reader in(body);
  if (Impl::status(in) != Reply::ok) impl_->expectOk(body, "add");
  return in.i64();
}

void TcpStore::wait(const std::vector<std::string>& keys, Duration timeout) {
  std::lock_guard lock(impl_->mutex);
  store::Writer w;
  w.u8(uint8_t(store::Op::wait)).u32(uint32_t(keys.size()));
  for (const auto& k : keys) w.str(k);
  w.u32(clampMs(timeout));
  const std::string body = impl_->roundTrip(w.frame(), impl_->replyTimeout(timeout));
  store::Reader in(body);
  const Reply r = Impl::status(in);
  if (r == Reply::timeout) {
    fail(Code::timeout, "keys did not appear in " + impl_->where() + " within " +
                            std::to_string(timeout.count()) + " ms (first: '" + keys.front() +
                            "')");
  }
  if (r != Reply::ok) impl_->expectOk(body, "wait");
}

std::string TcpStore::compareSet(const std::string& key, const std::string& expected,
                                 const std::string& desired) {
  std::lock_guard lock(impl_->mutex);
  store::Writer w;
  w.u8(uint8_t(store::Op::compare_set)).str(key).str(expected).str(desired);
  const std::string body = impl_->roundTrip(w.frame(), impl_->replyTimeout());
  store::Reader in(body);
  if (Impl::status(in) != Reply::ok) impl_->expectOk(body, "compare_set");
  return in.str(store::kMaxValueBytes);
}

bool TcpStore::remove(const std::string& key) {
  std::lock_guard lock(impl_->mutex);
  store::Writer w;
  w.u8(uint8_t(store::Op::remove)).str(key);
  const std::string body = impl_->roundTrip(w.frame(), impl_->replyTimeout());
  store::Reader in(body);
  if (Impl::status(in) != Reply::ok) impl_->expectOk(body, "remove");
  return in.u8() != 0;
}

std::string TcpStore::localAddress() const {
  asio::error_code ec;
  auto ep = impl_->socket.local_endpoint(ec);
  return ec ? std::string("127.0.0.1") : ep.address().to_string();
}

}  // namespace gyre
