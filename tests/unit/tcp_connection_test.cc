// The tcp connection's write-through send: a payload offered from user memory is written from
// there while publishing, and whatever the socket cannot take at once is copied into the slot
// before sendPublished() returns, so the caller may overwrite its buffer right after.
#include <doctest/doctest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "base/fd.h"
#include "transport/event_loop.h"
#include "transport/tcp/tcp_connection.h"

namespace gyre {
namespace {

constexpr uint32_t kSlotBytes = 64 * 1024;

struct Pair {
  EventLoop loop{"tcp-test-loop"};
  std::shared_ptr<TcpConnection> sender, receiver;

  // Socket buffers of `socketBytes` (0: the system's) on a stream socketpair.
  explicit Pair(int socketBytes) {
    int fds[2];
    REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, fds) == 0);
    if (socketBytes > 0) {
      for (int fd : fds) {
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &socketBytes, sizeof socketBytes);
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &socketBytes, sizeof socketBytes);
      }
    }
    LinkConfig config;
    config.nSlots = 4;
    config.slotBytes = kSlotBytes;
    sender = make(fds[0], 0, 1, config);
    receiver = make(fds[1], 1, 0, config);
  }
  ~Pair() {
    sender->close();
    receiver->close();
    loop.stop();
  }
  std::shared_ptr<TcpConnection> make(int fd, int self, int peer, const LinkConfig& config) {
    asio::ip::tcp::socket socket(loop.context());
    socket.assign(asio::ip::tcp::v4(), fd);
    return std::make_shared<TcpConnection>(loop, std::move(socket), self, peer, 0, config);
  }

  bool sendSlotFree() {
    Link& link = sender->sendLink();
    return link.counters->tail.value.load() - link.counters->head.value.load() < link.nSlots;
  }

  // What HostPrims does around a send into a free slot: offer `src`, publish.
  bool publishThrough(const std::byte* src, uint32_t bytes, uint64_t seq) {
    Link& link = sender->sendLink();
    REQUIRE(sendSlotFree());
    const uint32_t tail = link.counters->tail.value.load();
    const bool through = sender->offerSource({src, bytes, false, true}) == Taken::untilPublished;
    if (!through) std::memcpy(link.slot(tail), src, bytes);
    SlotMeta& meta = link.meta(tail);
    meta.bytes = bytes;
    meta.seq = seq;
    link.counters->tail.value.store(tail + 1);
    sender->sendPublished();
    return through;
  }

  // Receives the next slot and returns its payload.
  std::vector<std::byte> receive(uint64_t seq) {
    Link& link = receiver->recvLink();
    const uint32_t head = link.counters->head.value.load();
    const auto until = Clock::now() + std::chrono::seconds(10);
    while (link.counters->tail.value.load() == head && Clock::now() < until) {
      receiver->awaitRecv(Clock::now() + std::chrono::milliseconds(20));
    }
    REQUIRE(link.counters->tail.value.load() != head);
    const SlotMeta& meta = link.meta(head);
    CHECK(meta.seq == seq);
    std::vector<std::byte> payload(link.slot(head), link.slot(head) + meta.bytes);
    link.counters->head.value.store(head + 1);
    notifyAll(link.counters->head);
    return payload;
  }
};

std::vector<std::byte> pattern(uint32_t bytes, int salt) {
  std::vector<std::byte> v(bytes);
  for (uint32_t i = 0; i < bytes; ++i) v[i] = std::byte((i * 131 + uint32_t(salt) * 7) & 0xff);
  return v;
}

TEST_CASE("tcp write-through: a payload the socket takes at once leaves from user memory") {
  Pair pair(0);
  auto src = pattern(4096, 1);
  const uint64_t before = pair.sender->directCounts().sentThrough;
  CHECK(pair.publishThrough(src.data(), 4096, 1));
  std::fill(src.begin(), src.end(), std::byte{0xEE});
  CHECK(pair.receive(1) == pattern(4096, 1));
  CHECK(pair.sender->directCounts().sentThrough - before == 1);
}

TEST_CASE("tcp write-through: what a full socket refuses is copied before publishing returns") {
  Pair pair(16 * 1024);  // far less than a slot: every payload is cut short
  constexpr int kFrames = 8;
  std::vector<std::byte> src(kSlotBytes);
  int through = 0, received = 0;
  for (int f = 0; f < kFrames; ++f) {
    const auto expected = pattern(kSlotBytes, f);
    std::memcpy(src.data(), expected.data(), kSlotBytes);
    through += pair.publishThrough(src.data(), kSlotBytes, uint64_t(f)) ? 1 : 0;
    // The caller owns its buffer again: poison it before the peer has read anything more.
    std::fill(src.begin(), src.end(), std::byte{0xEE});
    // Read only when the sender runs out of slots, so the socket stays full.
    for (int wait = 0; f + 1 < kFrames && !pair.sendSlotFree() && wait < 500; ++wait) {
      if (received < f + 1) {
        CHECK(pair.receive(uint64_t(received)) == pattern(kSlotBytes, received));
        ++received;
      } else {  // all of it arrived; the proxy is about to free the slot
        pair.sender->awaitSend(Clock::now() + std::chrono::milliseconds(20));
      }
    }
  }
  for (; received < kFrames; ++received) {
    CHECK(pair.receive(uint64_t(received)) == pattern(kSlotBytes, received));
  }
  CHECK(through > 0);                                        // the path under test was taken
  CHECK(pair.sender->directCounts().sentThrough < kFrames);  // and cut short at least once
  CHECK(pair.sender->flush(Clock::now() + std::chrono::seconds(10)).ok());
}

}  // namespace
}  // namespace gyre

TEST_CASE("tcp liveness: keepalive and a user timeout that together end at the deadline") {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  auto get = [&](int level, int name) {
    int value = -1;
    socklen_t len = sizeof value;
    REQUIRE(::getsockopt(fd, level, name, &value, &len) == 0);
    return value;
  };
  gyre::setTcpLiveness(fd, std::chrono::milliseconds(0));  // the system's: untouched
  CHECK(get(SOL_SOCKET, SO_KEEPALIVE) == 0);
  gyre::setTcpLiveness(fd, std::chrono::seconds(6));
  CHECK(get(SOL_SOCKET, SO_KEEPALIVE) == 1);
  CHECK(get(IPPROTO_TCP, TCP_USER_TIMEOUT) == 6000);
  const int idle = get(IPPROTO_TCP, TCP_KEEPIDLE);
  const int interval = get(IPPROTO_TCP, TCP_KEEPINTVL);
  const int probes = get(IPPROTO_TCP, TCP_KEEPCNT);
  CHECK(idle + interval * probes == 6);
  ::close(fd);
}
