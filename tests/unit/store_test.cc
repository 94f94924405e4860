// The rendezvous store: in-memory and prefix stores, the server with the tcp client, and
// hostile clients that must lose only their own connection.
#include <doctest/doctest.h>

#include <sys/resource.h>
#include <unistd.h>

#include <asio/connect.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/read.hpp>
#include <asio/write.hpp>
#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

#include "base/auth.h"
#include "base/status.h"
#include "runtime/store/protocol.h"
#include "runtime/store/server.h"
#include "runtime/store/tcp_store.h"

using namespace gyre;
using namespace std::chrono_literals;

namespace {

std::shared_ptr<TcpStore> client(const StoreServer& server, const std::string& job,
                                 const std::string& secret = "") {
  TcpStoreOptions o;
  o.host = server.host();
  o.port = server.port();
  o.jobId = job;
  o.secret = secret;
  o.connectTimeout = 5000ms;
  return std::make_shared<TcpStore>(o);
}

// `other` is a second handle on the same data (a tcp client serves one request at a time).
void exerciseStore(Store& s, Store& other) {
  s.set("a", "1");
  CHECK(s.get("a", 100ms) == "1");
  s.set("a", std::string("x\0y", 3));  // values are bytes
  CHECK(s.get("a", 100ms) == std::string("x\0y", 3));
  CHECK(s.add("n", 5) == 5);
  CHECK(s.add("n", -7) == -2);
  CHECK(s.compareSet("c", "", "first") == "first");        // absent counts as ""
  CHECK(s.compareSet("c", "wrong", "second") == "first");  // no swap, current returned
  CHECK(s.compareSet("c", "first", "second") == "second");
  CHECK(s.remove("c"));
  CHECK_FALSE(s.remove("c"));
  s.wait({"a", "n"}, 100ms);
  CHECK_THROWS_AS(s.get("missing", 50ms), Failure);
  try {
    s.wait({"a", "missing"}, 50ms);
    FAIL("wait returned for a missing key");
  } catch (const Failure& f) {
    CHECK(f.status().code == Code::timeout);
  }
  // get blocks until another thread sets the key.
  std::thread setter([&] {
    std::this_thread::sleep_for(50ms);  // the getter must be waiting first
    other.set("late", "here");
  });
  CHECK(s.get("late", 5000ms) == "here");
  setter.join();
}

std::string helloFrame(const std::string& job, const auth::Nonce& nonce) {
  store::Writer w;
  w.u8(uint8_t(store::Op::hello)).u16(store::kVersion).str(job).str(auth::view(nonce));
  return w.frame();
}

std::string readFrame(asio::ip::tcp::socket& sock) {
  uint32_t n = 0;
  asio::read(sock, asio::buffer(&n, 4));
  std::string body(n, '\0');
  asio::read(sock, asio::buffer(body));
  return body;
}

// Says hello and authenticates with the empty secret, as a well-behaved client would.
void handshake(asio::ip::tcp::socket& sock, const std::string& job) {
  const auto nonce = auth::randomNonce();
  asio::write(sock, asio::buffer(helloFrame(job, nonce)));
  const std::string reply = readFrame(sock);  // Reader views it: keep it alive
  store::Reader in(reply);
  REQUIRE(in.u8() == 0);
  const std::string serverNonce = in.str(64);
  const auto m =
      auth::mac(auth::jobKey("", job), "gyre-store-client", job, serverNonce, auth::view(nonce));
  store::Writer w;
  w.u8(uint8_t(store::Op::auth)).str({reinterpret_cast<const char*>(m.data()), m.size()});
  asio::write(sock, asio::buffer(w.frame()));
  REQUIRE(readFrame(sock) == std::string(1, '\0'));
}

// Sends raw bytes on a fresh connection (after a proper handshake if `authenticated`);
// returns true if the server closed it afterwards.
bool serverCloses(const StoreServer& server, const std::string& bytes, bool authenticated = false) {
  asio::io_context io;
  asio::ip::tcp::socket sock(io);
  sock.connect({asio::ip::make_address(server.host()), server.port()});
  if (authenticated) handshake(sock, "job");
  if (!bytes.empty()) asio::write(sock, asio::buffer(bytes));
  char buf[256];
  asio::error_code ec;
  // Drain replies until the server closes (eof) or 3 s pass.
  sock.non_blocking(false);
  timeval tv{3, 0};
  setsockopt(sock.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  while (true) {
    sock.read_some(asio::buffer(buf), ec);
    if (ec == asio::error::eof || ec == asio::error::connection_reset) return true;
    if (ec) return false;
  }
}

std::string frame(const std::string& body) {
  std::string f(4, '\0');
  const uint32_t n = uint32_t(body.size());
  std::memcpy(f.data(), &n, 4);
  return f + body;
}

}  // namespace

TEST_CASE("memory store: every command") {
  auto s = makeMemoryStore();
  exerciseStore(*s, *s);
}

TEST_CASE("prefix stores share the inner store without seeing each other's keys") {
  auto inner = makeMemoryStore();
  auto a = makePrefixStore("a", inner), b = makePrefixStore("b", inner);
  a->set("k", "from a");
  b->set("k", "from b");
  CHECK(a->get("k", 10ms) == "from a");
  CHECK(b->get("k", 10ms) == "from b");
  CHECK(inner->get("a/k", 10ms) == "from a");
  exerciseStore(*a, *a);
}

TEST_CASE("tcp store against the server: every command") {
  StoreServer server;
  server.start();
  auto s = client(server, "job1");
  auto other = client(server, "job1");
  exerciseStore(*s, *other);
}

TEST_CASE("one server, many jobs: keys never cross jobs") {
  StoreServer server;
  server.start();
  auto a = client(server, "jobA"), b = client(server, "jobB");
  a->set("key", "A");
  CHECK_THROWS_AS(b->get("key", 50ms), Failure);
  b->set("key", "B");
  CHECK(a->get("key", 50ms) == "A");
  CHECK(b->get("key", 50ms) == "B");
}

TEST_CASE("concurrent adds from many clients are atomic") {
  StoreServer server;
  server.start();
  auto holder = client(server, "counter");  // keeps the job (and its keys) alive throughout
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      auto s = client(server, "counter");
      for (int i = 0; i < 100; ++i) s->add("n", 1);
    });
  }
  for (auto& t : threads) t.join();
  CHECK(holder->add("n", 0) == 800);
}

TEST_CASE("hostile clients lose their own connection; the server keeps serving") {
  StoreServerOptions options;
  options.frameTimeout = 300ms;
  StoreServer server(options);
  server.start();
  auto good = client(server, "job");
  good->set("alive", "yes");

  SUBCASE("oversized frame length") {
    std::string bytes(4, '\xff');
    CHECK(serverCloses(server, bytes));
  }
  SUBCASE("request before hello") {
    store::Writer w;
    w.u8(uint8_t(store::Op::set)).str("k").str("v");
    CHECK(serverCloses(server, w.frame()));
  }
  SUBCASE("unknown opcode") {
    CHECK(serverCloses(server, frame("\x63"), true));
  }
  SUBCASE("a request after hello but before auth") {
    store::Writer w;
    w.u8(uint8_t(store::Op::set)).str("k").str("v");
    CHECK(serverCloses(server, helloFrame("job", auth::randomNonce()) + w.frame()));
  }
  SUBCASE("a wrong proof") {
    store::Writer w;
    w.u8(uint8_t(store::Op::auth)).str(std::string(32, 'x'));
    CHECK(serverCloses(server, helloFrame("job", auth::randomNonce()) + w.frame()));
  }
  SUBCASE("string length past the end of the frame") {
    std::string body = "\x02";                          // set
    body += std::string("\x10\x00\x00\x00", 4) + "ab";  // key claims 16 bytes, has 2
    CHECK(serverCloses(server, frame(body), true));
  }
  SUBCASE("trailing bytes after a valid request") {
    store::Writer w;
    w.u8(uint8_t(store::Op::remove)).str("k").u8(0);
    CHECK(serverCloses(server, w.frame(), true));
  }
  SUBCASE("truncated frame, then silence: closed after the frame timeout") {
    CHECK(serverCloses(server, std::string("\x10\x00\x00\x00\x02", 5)));
  }
  SUBCASE("connect and say nothing: closed after the frame timeout") {
    CHECK(serverCloses(server, ""));
  }
  SUBCASE("wrong protocol version") {
    store::Writer w;
    w.u8(uint8_t(store::Op::hello)).u16(999).str("job").str(auth::view(auth::randomNonce()));
    CHECK(serverCloses(server, w.frame()));
  }
  SUBCASE("key over the size limit") {
    store::Writer w;
    w.u8(uint8_t(store::Op::set)).str(std::string(store::kMaxKeyBytes + 1, 'k')).str("v");
    CHECK(serverCloses(server, w.frame(), true));
  }
  SUBCASE("a second request while a get is parked") {
    store::Writer get1, get2;
    get1.u8(uint8_t(store::Op::get)).str("never").u32(10000);
    get2.u8(uint8_t(store::Op::get)).str("never").u32(10000);
    CHECK(serverCloses(server, get1.frame() + get2.frame(), true));
  }
  CHECK(good->get("alive", 100ms) == "yes");
  good->set("still", "serving");
  CHECK(good->get("still", 100ms) == "serving");
}

TEST_CASE("server limits: clients and keys per job") {
  StoreServerOptions options;
  options.maxClients = 2;
  options.maxKeysPerJob = 3;
  StoreServer server(options);
  server.start();
  auto a = client(server, "job");
  auto b = client(server, "job");
  TcpStoreOptions o;
  o.host = server.host();
  o.port = server.port();
  o.jobId = "job";
  o.connectTimeout = 1000ms;
  CHECK_THROWS_AS(TcpStore{o}, Failure);  // third client refused
  a->set("k1", "v");
  a->set("k2", "v");
  a->set("k3", "v");
  a->set("k3", "overwrite is fine");
  try {
    a->set("k4", "v");
    FAIL("key limit not enforced");
  } catch (const Failure& f) {
    CHECK(std::string(f.what()).find("limit") != std::string::npos);
  }
  CHECK(b->get("k3", 100ms) == "overwrite is fine");
}

TEST_CASE("a client that disconnects while waiting is forgotten") {
  StoreServer server;
  server.start();
  {
    asio::io_context io;
    asio::ip::tcp::socket sock(io);
    sock.connect({asio::ip::make_address(server.host()), server.port()});
    handshake(sock, "job");
    store::Writer get;
    get.u8(uint8_t(store::Op::get)).str("never").u32(60000);
    asio::write(sock, asio::buffer(get.frame()));
  }
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (server.clientCount() != 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(10ms);  // polling a counter the server updates
  }
  CHECK(server.clientCount() == 0);
  auto c = client(server, "job");
  c->set("never", "now");  // waking a departed waiter must not crash
  CHECK(c->get("never", 100ms) == "now");
}

TEST_CASE("a client whose server is gone fails fast with a clear error") {
  auto server = std::make_unique<StoreServer>();
  server->start();
  auto c = client(*server, "job");
  const std::string address = server->address();
  server.reset();
  try {
    c->set("k", "v");
    FAIL("set succeeded without a server");
  } catch (const Failure& f) {
    CHECK(f.status().code == Code::remote_error);
    CHECK(std::string(f.what()).find(address) != std::string::npos);
  }
}

TEST_CASE("the job secret: right secret in, wrong or missing secret out, both directions") {
  StoreServerOptions options;
  options.secret = "s3cret";
  StoreServer server(options);
  server.start();
  auto good = client(server, "job", "s3cret");
  good->set("k", "v");
  for (const std::string bad : {"", "S3CRET"}) {
    try {
      client(server, "job", bad);
      FAIL("a client with the wrong secret got in");
    } catch (const Failure& f) {
      CHECK(f.status().code == Code::invalid_usage);
      CHECK(std::string(f.what()).find("secret") != std::string::npos);
    }
  }
  // A client with a secret refuses a server that cannot prove it.
  StoreServer open;
  open.start();
  CHECK_THROWS_AS(client(open, "job", "s3cret"), Failure);
  CHECK(good->get("k", 100ms) == "v");
}

TEST_CASE("before authentication a frame may not be large: closed at once") {
  StoreServer server;  // frame timeout 10 s: a close within 2 s is the size check's
  server.start();
  const auto start = std::chrono::steady_clock::now();
  CHECK(serverCloses(server, std::string("\x00\x00\x10\x00", 4)));  // declares 1 MiB
  CHECK(std::chrono::steady_clock::now() - start < 2s);
  auto good = client(server, "job");           // the server still serves
  good->set("k", std::string(64 << 10, 'v'));  // and large frames after authentication
  CHECK(good->get("k", 100ms).size() == (64 << 10));
}

TEST_CASE("strangers holding connections cannot lock a job out; a full server says why") {
  StoreServerOptions options;
  options.maxClients = 2;
  options.maxPendingClients = 4;
  StoreServer server(options);
  server.start();
  asio::io_context io;
  std::vector<asio::ip::tcp::socket> strangers;
  for (int i = 0; i < 16; ++i) {  // connect and say nothing: each holds a slot for 10 s
    strangers.emplace_back(io);
    strangers.back().connect({asio::ip::make_address(server.host()), server.port()});
  }
  auto a = client(server, "job");
  auto b = client(server, "job");
  a->set("k", "v");
  CHECK(b->get("k", 100ms) == "v");
  TcpStoreOptions o;
  o.host = server.host();
  o.port = server.port();
  o.jobId = "job";
  o.connectTimeout = 2000ms;
  try {
    TcpStore third(o);
    FAIL("a third client was served past maxClients = 2");
  } catch (const Failure& f) {
    CHECK_MESSAGE(std::string(f.what()).find("--max-clients") != std::string::npos, f.what());
  }
}

namespace {

// CPU time (user + system, seconds) this process used so far; needs no descriptor.
double processCpuSeconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         double(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

}  // namespace

TEST_CASE("out of descriptors, the rendezvous backs off instead of spinning, then serves") {
  StoreServer server;
  server.start();
  asio::io_context io;
  std::vector<asio::ip::tcp::socket> clients;
  for (int i = 0; i < 8; ++i) {  // sockets made now: connecting later takes no descriptor
    clients.emplace_back(io);
    clients.back().open(asio::ip::tcp::v4());
  }
  // The lowest free descriptor becomes the limit: no new descriptor can be made.
  const int lowestFree = ::dup(0);
  REQUIRE(lowestFree >= 0);
  ::close(lowestFree);
  rlimit saved{};
  REQUIRE(::getrlimit(RLIMIT_NOFILE, &saved) == 0);
  rlimit low = saved;
  low.rlim_cur = rlim_t(lowestFree);
  REQUIRE(::setrlimit(RLIMIT_NOFILE, &low) == 0);
  const double before = processCpuSeconds();
  for (auto& c : clients) c.connect({asio::ip::make_address(server.host()), server.port()});
  // A measuring window, not a wait for an event: the server cannot accept them during it.
  std::this_thread::sleep_for(1s);
  const double spent = processCpuSeconds() - before;
  REQUIRE(::setrlimit(RLIMIT_NOFILE, &saved) == 0);
  CHECK_MESSAGE(spent < 0.3, "the process used " << spent << " s of CPU in 1 s of waiting");
  // With descriptors back it accepts what waited in the kernel's queue.
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (server.clientCount() < 8 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(10ms);
  }
  CHECK(server.clientCount() == 8);
  auto good = client(server, "job");
  good->set("k", "v");
  CHECK(good->get("k", 100ms) == "v");
}

TEST_CASE("a job is forgotten when its last client leaves: memory freed, counters start over") {
  StoreServer server;
  server.start();
  const auto waitForJobs = [&](size_t n) {
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    while (server.jobCount() != n && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(5ms);  // polling a counter the server updates
    }
    return server.jobCount();
  };
  // Many finished jobs leave nothing behind.
  for (int j = 0; j < 200; ++j) {
    auto c = client(server, "job" + std::to_string(j));
    c->set("peer/0", std::string(4096, 'x'));
    c->add("communicators/0", 1);
  }
  CHECK(waitForJobs(0) == 0);
  // A failed launch of job "default": rank 0 counted its communicator, rank 1 never came.
  {
    auto rank0 = client(server, "default");
    CHECK(rank0->add("communicators/0", 1) == 1);
  }
  CHECK(waitForJobs(0) == 0);
  // The next launch of the same id starts from scratch, so its ranks agree again.
  auto rank0 = client(server, "default");
  auto rank1 = client(server, "default");
  CHECK(rank0->add("communicators/0", 1) == 1);
  CHECK(rank1->add("communicators/1", 1) == 1);
  // While one client stays, the job keeps its keys for the others.
  rank1.reset();
  auto again = client(server, "default");
  CHECK(again->add("communicators/0", 1) == 2);
  CHECK(server.jobCount() == 1);
}

TEST_CASE("the empty key is never used: a job without a secret gets a key of its own") {
  CHECK_THROWS_AS(auth::mac("", "label", "a"), Failure);
  CHECK(auth::jobKey("s3", "job") == "s3");
  const std::string a = auth::jobKey("", "job-a"), b = auth::jobKey("", "job-b");
  CHECK_FALSE(a.empty());
  CHECK(a != b);
  CHECK(auth::mac(a, "label", "x") != auth::mac(b, "label", "x"));
}

namespace {

// A one-connection server that reads the client's hello and answers with `respond` (given the
// hello body); then holds the connection silent until the test ends.
class FakeServer {
 public:
  explicit FakeServer(std::function<std::string(const std::string&)> respond)
      : acceptor_(io_, {asio::ip::make_address("127.0.0.1"), 0}) {
    thread_ = std::thread([this, respond = std::move(respond)] {
      asio::ip::tcp::socket sock(io_);
      acceptor_.accept(sock);
      const std::string hello = readFrame(sock);
      asio::write(sock, asio::buffer(respond(hello)));
      std::unique_lock lock(mutex_);
      done_.wait(lock, [&] { return stop_; });
    });
  }
  ~FakeServer() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    done_.notify_all();
    thread_.join();
  }
  uint16_t port() const { return acceptor_.local_endpoint().port(); }

 private:
  asio::io_context io_;
  asio::ip::tcp::acceptor acceptor_;
  std::mutex mutex_;
  std::condition_variable done_;
  bool stop_ = false;
  std::thread thread_;
};

Failure connectFails(uint16_t port) {
  TcpStoreOptions o;
  o.host = "127.0.0.1";
  o.port = port;
  o.jobId = "job";
  o.connectTimeout = 1000ms;
  try {
    TcpStore store(o);
  } catch (const Failure& f) {
    return f;
  }
  FAIL("the client connected");
  return Failure(Code::internal, "");
}

}  // namespace

TEST_CASE("a rendezvous address with port 0 is refused at once") {
  const auto start = std::chrono::steady_clock::now();
  const Failure f = connectFails(0);
  CHECK(f.status().code == Code::invalid_argument);
  CHECK_MESSAGE(std::string(f.what()).find("port 0") != std::string::npos, f.what());
  CHECK(std::chrono::steady_clock::now() - start < 500ms);
}

TEST_CASE("a server that is not a gyre rendezvous is named as such") {
  FakeServer http(
      [](const std::string&) { return std::string("HTTP/1.1 400 Bad Request\r\n\r\n"); });
  const Failure f = connectFails(http.port());
  CHECK(f.status().code == Code::remote_error);
  CHECK_MESSAGE(std::string(f.what()).find("is not a gyre rendezvous") != std::string::npos,
                f.what());
}

TEST_CASE("a rendezvous that stalls during authentication is not reported as a wrong secret") {
  // Proves the (absent) secret correctly, then never answers the client's proof.
  FakeServer stalled([](const std::string& helloBody) {
    store::Reader in(helloBody);
    in.u8();
    in.u16();
    const std::string job = in.str(64), clientNonce = in.str(64);
    const auto serverNonce = auth::randomNonce();
    const auto proof = auth::mac(auth::jobKey("", job), "gyre-store-server", job, clientNonce,
                                 auth::view(serverNonce));
    store::Writer w;
    w.u8(0).str(auth::view(serverNonce)).str({reinterpret_cast<const char*>(proof.data()), 32});
    return w.frame();
  });
  const Failure f = connectFails(stalled.port());
  CHECK(f.status().code == Code::timeout);
  const std::string text = f.what();
  CHECK_MESSAGE(text.find("did not answer this client's authentication") != std::string::npos,
                text);
  CHECK(text.find("secret") == std::string::npos);
}
