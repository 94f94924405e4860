// The tcp frame reader (SlotMeta header + payload, partial reads, the staging buffer) fed
// arbitrary bytes through a socketpair, consumed as the primitives would.
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>

#include "transport/event_loop.h"
#include "transport/tcp/tcp_connection.h"

using namespace gyre;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static EventLoop loop("fuzz-loop");
  if (size > 60000) return 0;
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) return 0;
  int big = 1 << 20;
  setsockopt(fds[1], SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
  if (size) (void)!::send(fds[1], data, size, MSG_NOSIGNAL);
  ::close(fds[1]);  // end of stream after the input

  LinkConfig config;
  config.nSlots = 4;
  config.slotBytes = 256;
  asio::ip::tcp::socket socket(loop.context());
  socket.assign(asio::ip::tcp::v4(), fds[0]);
  auto conn = std::make_shared<TcpConnection>(loop, std::move(socket), 0, 1, 0, config);
  Link& link = conn->recvLink();
  uint32_t head = 0;
  size_t consumed = 0;
  for (int rounds = 0; rounds < 100000; ++rounds) {
    conn->awaitRecv(Clock::now());
    const uint32_t tail = link.counters->tail.value.load();
    if (tail == head) break;  // no progress: end of stream or a failure
    for (; head != tail; ++head) {
      const SlotMeta& meta = link.meta(head);
      if (meta.bytes > link.slotBytes) __builtin_trap();  // must have been refused
      consumed += sizeof(SlotMeta) + meta.bytes;
      link.counters->head.value.store(head + 1);
    }
  }
  if (consumed > size) __builtin_trap();
  conn->close();
  return 0;
}
