// Strangers and wrong secrets never reach a link or a store key, and never disturb a job.
#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <thread>

#include "runtime/store/tcp_store.h"
#include "tests/harness/thread_ranks.h"
#include "transport/tcp/handshake.h"

using namespace gyre;
using namespace std::chrono_literals;

namespace {

struct Endpoint {
  std::string host;
  uint16_t port;
};

Endpoint endpointOf(const std::string& address) {
  Endpoint e;
  splitHostPort(address, e.host, e.port);
  return e;
}

// One hostile visit to a port: returns after the server closed it (or `waitMs` passed).
// Plain sockets: Asio's synchronous reads ignore receive timeouts.
void visit(const Endpoint& e, const std::string& bytes, int waitMs = 3000) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(e.port);
  inet_pton(AF_INET, e.host.c_str(), &addr.sin_addr);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
    if (!bytes.empty()) (void)!::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(waitMs);
    char buf[512];
    while (std::chrono::steady_clock::now() < until) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 50) > 0 && ::recv(fd, buf, sizeof buf, MSG_DONTWAIT) <= 0) break;
    }
  }
  ::close(fd);
}

// A Hello a real rank would send for this job, then a made-up proof.
std::string forgedHandshake(const std::string& job, int from, int to, int n) {
  wire::Hello h{};
  std::memcpy(h.magic, wire::kHelloMagic, 4);
  h.version = wire::kProtocolVersion;
  wire::copyJobId(h.jobId, job);
  h.fromRank = from;
  h.toRank = to;
  h.nranks = n;
  h.nSlots = 4;
  h.slotBytes = 256;
  wire::Proof p{};
  std::memcpy(p.magic, wire::kProofMagic, 4);
  std::memset(p.mac, 0x42, sizeof p.mac);
  return std::string(reinterpret_cast<const char*>(&h), sizeof h) +
         std::string(reinterpret_cast<const char*>(&p), sizeof p);
}

}  // namespace

TEST_CASE("ranks with different secrets fail to connect, saying why") {
  test::ThreadJob* job = nullptr;
  CommConfig base = test::tinySlots(3000ms);
  base.secret = "one";
  // Rank 1 joins with another secret: its store login is refused.
  StoreServerOptions options;
  options.secret = "one";
  StoreServer server(options);
  server.start();
  std::vector<Status> result(2);
  test::onThreads(2, [&](int r) {
    CommConfig c = base;
    c.rank = r;
    c.nranks = 2;
    c.rendezvous = server.address();
    c.jobId = "secrets";
    if (r == 1) c.secret = "two";
    try {
      Communicator::create(c);
    } catch (const Failure& f) {
      result[r] = f.status();
    }
  });
  (void)job;
  CAPTURE(result[1].message);
  CHECK(result[1].code == Code::invalid_usage);
  CHECK(result[1].message.find("secret") != std::string::npos);
  CHECK(result[0].code == Code::timeout);  // rank 0 waited for a rank that never came
}

TEST_CASE("strangers on every port during running collectives change nothing") {
  CommConfig base = test::tinySlots(30000ms);
  base.secret = "the-real-secret";
  const int n = 3;
  test::ThreadJob job(n, base, "strangers");
  std::vector<Endpoint> ports;
  for (int r = 0; r < n; ++r) ports.push_back(endpointOf(job.comm(r).dataAddress()));
  ports.push_back(endpointOf(job.server().address()));

  std::atomic<bool> running{true};
  std::atomic<int> visits{0};
  std::thread stranger([&] {
    while (running) {
      for (size_t i = 0; i < ports.size() && running; ++i) {
        visit(ports[i], std::string(1024, '\x17'));  // garbage
        visit(ports[i], forgedHandshake("strangers", (int(i) + 1) % n, int(i) % n, n));
        visit(ports[i], "", 50);  // silence
        visits += 3;
      }
      // The rendezvous with the wrong secret.
      TcpStoreOptions o;
      o.host = ports.back().host;
      o.port = ports.back().port;
      o.jobId = "strangers";
      o.secret = "guess";
      o.connectTimeout = 2000ms;
      try {
        TcpStore intruder(o);
        FAIL("a client with the wrong secret got into the rendezvous");
      } catch (const Failure&) {
      }
    }
  });

  // Rank 0 keeps the job going (a broadcast each round) until every port saw strangers.
  const int target = int(ports.size()) * 3 * 3;
  std::vector<int> wrong(n, 0);
  job.run([&](Communicator& c, int r) {
    std::vector<int32_t> in(4099), out(4099);
    for (int iter = 0; iter < 100000; ++iter) {
      for (size_t i = 0; i < in.size(); ++i) in[i] = int32_t(r * 1000 + iter + int(i));
      c.allReduce(in.data(), out.data(), in.size(), DataType::i32, RedOp::sum);
      for (size_t i = 0; i < out.size(); ++i) {
        const int32_t expect = 1000 * (n * (n - 1) / 2) + n * (iter + int(i));
        wrong[r] += out[i] != expect;
      }
      int32_t go = r == 0 ? int32_t(visits.load() < target) : -1;
      c.broadcast(&go, &go, 1, DataType::i32, 0);
      if (!go) break;
    }
  });
  running = false;
  stranger.join();
  MESSAGE(visits.load() << " hostile connections during the collectives");
  CHECK(visits.load() >= target);
  for (int r = 0; r < n; ++r) CHECK(wrong[r] == 0);
}

TEST_CASE("no descriptor of a job is inherited by the processes a rank starts") {
  // Every socket (data listeners, connections both ways, the rendezvous server and its
  // clients) and every other descriptor gyre opened is close-on-exec, so a helper process a
  // rank starts cannot keep a dead rank's connections open.
  test::ThreadJob job(3, test::tinySlots(30000ms), "inherit");
  job.run([](Communicator& c, int r) {
    int32_t v = r + 1, sum = 0;
    c.allReduce(&v, &sum, 1, DataType::i32, RedOp::sum);
    CHECK(sum == 6);
  });
  int sockets = 0;
  for (int fd = 3; fd < 4096; ++fd) {
    char link[64] = {}, target[256] = {};
    std::snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    const ssize_t n = ::readlink(link, target, sizeof target - 1);
    if (n <= 0) continue;
    const std::string what(target, size_t(n));
    if (what.rfind("socket:", 0) != 0 && what.rfind("anon_inode:", 0) != 0) continue;
    sockets += what.rfind("socket:", 0) == 0;
    const int flags = ::fcntl(fd, F_GETFD);
    CAPTURE(fd);
    CAPTURE(what);
    CHECK((flags >= 0 && (flags & FD_CLOEXEC)));
  }
  CHECK(sockets >= 3 * 2 + 1);  // at least: each rank's two ring connections, a listener
}

namespace {

size_t openDescriptors() {
  size_t n = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/fd"))
    ++n;
  return n;
}

}  // namespace

TEST_CASE("silent strangers on a data port are bounded in number, not by a fixed 10 s timer") {
  CommConfig base = test::tinySlots(30000ms);
  base.secret = "the-real-secret";
  test::ThreadJob job(4, base, "silent-strangers");  // pairs 0-2 and 1-3 connect on first use
  const Endpoint port2 = endpointOf(job.comm(2).dataAddress());
  const size_t before = openDescriptors();
  std::vector<int> strangers;
  for (int i = 0; i < 200; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port2.port);
    inet_pton(AF_INET, port2.host.c_str(), &addr.sin_addr);
    REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    strangers.push_back(fd);
  }
  // Counts whose connections rank 2 has closed (reads end of file at once).
  const auto closedByRank2 = [&] {
    int closed = 0;
    for (int fd : strangers) {
      pollfd p{fd, POLLIN, 0};
      char byte;
      if (::poll(&p, 1, 0) > 0 && ::recv(fd, &byte, 1, MSG_DONTWAIT) == 0) ++closed;
    }
    return closed;
  };
  // Rank 2 keeps at most 64 handshakes open: the oldest strangers are dropped as others come.
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (closedByRank2() < 200 - 64 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(10ms);
  }
  CHECK(closedByRank2() >= 200 - 64);
  CHECK(openDescriptors() - before <= 200 + 64 + 8);
  // The rest wait as long as the job's timeout (30 s) allows, past the old fixed 10 s: a
  // rank stalled mid-handshake is still let in.
  std::this_thread::sleep_for(11s);
  CHECK(closedByRank2() <= 200 - 64 + 1);
  // And the job's own new connections get through.
  std::vector<int32_t> value(1000);
  job.run([&](Communicator& c, int r) {
    if (r == 0) {
      std::iota(value.begin(), value.end(), 7);
      c.send(value.data(), value.size(), DataType::i32, 2);
    } else if (r == 2) {
      std::vector<int32_t> got(1000, -1);
      c.recv(got.data(), got.size(), DataType::i32, 0);
      for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == int32_t(7 + i));
    }
  });
  for (int fd : strangers) ::close(fd);
}
