#include "transport/tcp/tcp_connection.h"

#include <asio/read.hpp>
#include <asio/write.hpp>
#include <span>

namespace gyre {

TcpConnection::TcpConnection(EventLoop& loop, asio::ip::tcp::socket socket, int selfRank,
                             int peer, int channel, const LinkConfig& config)
    : Connection(peer, channel), loop_(loop), socket_(std::move(socket)), selfRank_(selfRank) {
  initRing(sendRing_, send_, config);
  initRing(recvRing_, recv_, config);
  asio::error_code ignored;
  socket_.set_option(asio::ip::tcp::no_delay(true), ignored);
}

TcpConnection::~TcpConnection() = default;

void TcpConnection::initRing(Ring& ring, Link& link, const LinkConfig& config) {
  ring.metas.resize(config.nSlots);
  const size_t bytes = (config.nSlots * config.slotBytes + 63) / 64 * 64;
  ring.data.reset(static_cast<std::byte*>(std::aligned_alloc(64, bytes)));
  if (!ring.data) throw std::bad_alloc();
  link.counters = &ring.counters;
  link.metas = ring.metas.data();
  link.data = ring.data.get();
  link.nSlots = config.nSlots;
  link.slotBytes = config.slotBytes;
}

void TcpConnection::start() {
  loop_.post([self = shared_from_this()] { self->pumpRecvOnLoop(); });
}

void TcpConnection::close() {
  loop_.post([self = shared_from_this()] {
    self->closed_ = true;
    asio::error_code ignored;
    self->socket_.shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
    self->socket_.close(ignored);
  });
}

// User thread: the producer advanced tail. Wake the loop only if it went idle.
void TcpConnection::sendPublished() {
  if (sendIdle_.exchange(false, std::memory_order_seq_cst)) {
    loop_.post([self = shared_from_this()] { self->pumpSendOnLoop(); });
  }
}

// User thread: the consumer advanced head. Wake the loop only if it ran out of slots.
void TcpConnection::recvReleased() {
  if (recvStalled_.exchange(false, std::memory_order_seq_cst)) {
    loop_.post([self = shared_from_this()] { self->pumpRecvOnLoop(); });
  }
}

void TcpConnection::pumpSendOnLoop() {
  if (writing_ || closed_ || failed_.load()) return;
  auto& tail = sendRing_.counters.tail.value;
  uint32_t filled = tail.load(std::memory_order_acquire);
  if (filled == sent_) {
    // Go idle, then look again: the producer may have published between the two reads.
    sendIdle_.store(true, std::memory_order_seq_cst);
    filled = tail.load(std::memory_order_seq_cst);
    if (filled == sent_ || !sendIdle_.exchange(false, std::memory_order_seq_cst)) return;
  }
  // Gather consecutive slots (meta + payload each) into one write.
  const uint32_t count = std::min<uint32_t>(filled - sent_, kMaxSlotsPerWrite);
  auto& buffers = writeBuffers_;  // a member: it must outlive the async write
  for (uint32_t i = 0; i < count; ++i) {
    const uint32_t index = sent_ + i;
    const SlotMeta& meta = send_.meta(index);
    buffers[2 * i] = asio::buffer(&meta, sizeof(SlotMeta));
    buffers[2 * i + 1] = asio::buffer(send_.slot(index), meta.bytes);
  }
  writing_ = true;
  asio::async_write(
      socket_, std::span(buffers.data(), 2 * count),
      [self = shared_from_this(), count](const asio::error_code& ec, size_t) {
        self->writing_ = false;
        if (ec) return self->failOnLoop("send to", ec);
        self->sent_ += count;
        self->sendRing_.counters.head.value.store(self->sent_, std::memory_order_seq_cst);
        notifyAll(self->sendRing_.counters.head);
        self->pumpSendOnLoop();
      });
}

void TcpConnection::pumpRecvOnLoop() {
  if (reading_ || closed_ || failed_.load()) return;
  auto& head = recvRing_.counters.head.value;
  if (received_ - head.load(std::memory_order_acquire) >= recv_.nSlots) {
    recvStalled_.store(true, std::memory_order_seq_cst);
    if (received_ - head.load(std::memory_order_seq_cst) >= recv_.nSlots ||
        !recvStalled_.exchange(false, std::memory_order_seq_cst)) {
      return;
    }
  }
  reading_ = true;
  const uint32_t index = received_;
  asio::async_read(socket_, asio::buffer(&recv_.meta(index), sizeof(SlotMeta)),
                   [self = shared_from_this(), index](const asio::error_code& ec, size_t) {
                     if (ec) {
                       self->reading_ = false;
                       return self->failOnLoop("receive from", ec);
                     }
                     self->readPayloadOnLoop(index);
                   });
}

void TcpConnection::readPayloadOnLoop(uint32_t index) {
  const uint32_t bytes = recv_.meta(index).bytes;
  if (bytes > recv_.slotBytes) {
    reading_ = false;
    return failOnLoop(Status{Code::remote_error,
                             "rank " + std::to_string(selfRank_) + ": rank " +
                                 std::to_string(peer()) + " sent a " + std::to_string(bytes) +
                                 "-byte frame, larger than the " +
                                 std::to_string(recv_.slotBytes) +
                                 "-byte slot (do all ranks use the same GYRE_SLOT_BYTES?)"});
  }
  asio::async_read(socket_, asio::buffer(recv_.slot(index), bytes),
                   [self = shared_from_this()](const asio::error_code& ec, size_t) {
                     self->reading_ = false;
                     if (ec) return self->failOnLoop("receive from", ec);
                     ++self->received_;
                     auto& tail = self->recvRing_.counters.tail;
                     tail.value.store(self->received_, std::memory_order_seq_cst);
                     notifyAll(tail);
                     self->pumpRecvOnLoop();
                   });
}

void TcpConnection::failOnLoop(const std::string& what, const asio::error_code& ec) {
  if (closed_ || ec == asio::error::operation_aborted) return;
  const std::string cause =
      ec == asio::error::eof ? "connection closed by the peer" : ec.message();
  failOnLoop(Status{Code::remote_error, "rank " + std::to_string(selfRank_) + ": " + what +
                                            " rank " + std::to_string(peer()) +
                                            " failed over tcp: " + cause});
}

void TcpConnection::failOnLoop(Status status) {
  {
    std::lock_guard lock(failureMutex_);
    if (failure_.ok()) failure_ = std::move(status);
  }
  failed_.store(true, std::memory_order_seq_cst);
  asio::error_code ignored;
  socket_.close(ignored);
  for (auto* word : {&sendRing_.counters.head, &sendRing_.counters.tail,
                     &recvRing_.counters.head, &recvRing_.counters.tail}) {
    notifyAll(*word);
  }
}

Status TcpConnection::failure() const {
  if (!failed_.load(std::memory_order_acquire)) return {};
  std::lock_guard lock(failureMutex_);
  return failure_;
}

Status TcpConnection::flush(Clock::time_point deadline) {
  auto& head = sendRing_.counters.head;
  const uint32_t target = sendRing_.counters.tail.value.load(std::memory_order_acquire);
  while (true) {
    const uint32_t done = head.value.load(std::memory_order_acquire);
    if (done == target) return {};
    Status s = failure();
    if (!s.ok()) return s;
    if (Clock::now() >= deadline) {
      return {Code::timeout, "rank " + std::to_string(selfRank_) +
                                 ": timed out sending the last data to rank " +
                                 std::to_string(peer())};
    }
    sleepWhileEqual(head, done, std::min(deadline, Clock::now() + std::chrono::milliseconds(50)));
  }
}

}  // namespace gyre
