#include "transport/tcp/tcp_connection.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>
#include <asio/write.hpp>

#include <cstring>
#include <span>

#include "base/copy_bytes.h"
#include "base/fd.h"

namespace gyre {

TcpConnection::TcpConnection(EventLoop& loop, asio::ip::tcp::socket socket, int selfRank, int peer,
                             int channel, const LinkConfig& config)
    : Connection(peer, channel),
      loop_(loop),
      selfRank_(selfRank),
      fd_([&] {
        asio::error_code ignored;
        socket.set_option(asio::ip::tcp::no_delay(true), ignored);
        setTcpLiveness(socket.native_handle(), config.tcpDeadAfter);
        return socket.release();  // leaves Asio's reactor; we own the descriptor now
      }()),
      through_(config.nSlots),
      staging_(kStagingBytes) {
  initRing(sendRing_, send_, config);
  initRing(recvRing_, recv_, config);
}

TcpConnection::~TcpConnection() {
  ::close(fd_);
}

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

void TcpConnection::close() {
  closed_ = true;
  ::shutdown(fd_, SHUT_RDWR);
  loop_.post([self = shared_from_this()] {
    if (self->loopWriter_) {
      asio::error_code ignored;
      self->loopWriter_->cancel(ignored);
    }
  });
}

// ---- sending ------------------------------------------------------------------------------

// User thread: the producer advanced tail. Take the writer token if it is free and write
// directly; otherwise its holder (the proxy) finds the new slot when its write ends.
void TcpConnection::sendPublished() {
  if (throughCount_ > 0 || writerFree_.exchange(false, std::memory_order_seq_cst)) writeDirect();
}

// Taking the token here keeps the proxy from starting a write that would read `src` after
// sendPublished() returned.
bool TcpConnection::sendThrough(const std::byte* src, uint32_t /*bytes*/) {
  if (closed_.load() || failed_.load()) return false;
  if (throughCount_ == 0 && !writerFree_.exchange(false, std::memory_order_seq_cst)) return false;
  const uint32_t index = sendRing_.counters.tail.value.load(std::memory_order_relaxed);
  through_[index % send_.nSlots] = {index, src};
  ++throughCount_;
  return true;
}

void TcpConnection::writeDirect() {
  auto& tail = sendRing_.counters.tail.value;
  while (!closed_.load() && !failed_.load()) {
    const uint32_t filled = tail.load(std::memory_order_acquire);
    if (filled == sent_) {
      keepThroughPayloads();  // all of them went
      // Only this thread publishes, so nothing can arrive between this check and the release.
      writerFree_.store(true, std::memory_order_seq_cst);
      return;
    }
    const size_t count = gatherFrames(filled);
    iovec iov[2 * kMaxSlotsPerWrite];
    for (size_t i = 0; i < count; ++i) {
      iov[i].iov_base = const_cast<void*>(writeBuffers_[i].data());
      iov[i].iov_len = writeBuffers_[i].size();
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = count;
    const ssize_t n = ::sendmsg(fd_, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n > 0) {
      advanceSent(size_t(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
      fail("send to", errno);
      break;
    }
    break;  // the socket is full: the proxy takes over
  }
  keepThroughPayloads();
  if (closed_.load() || failed_.load()) return;
  loop_.post([self = shared_from_this()] { self->pumpSendOnLoop(); });
}

void TcpConnection::keepThroughPayloads() {
  if (throughCount_ == 0) return;
  for (Through& t : through_) {
    if (!t.src) continue;
    const int32_t ahead = int32_t(t.index - sent_);  // >= 0: not completely written
    if (ahead >= 0) {
      const uint32_t bytes = send_.meta(t.index).bytes;
      const size_t written =
          ahead == 0 && sentOffset_ > sizeof(SlotMeta) ? sentOffset_ - sizeof(SlotMeta) : 0;
      copyBytes(send_.slot(t.index) + written, t.src + written, bytes - written);
    } else {
      throughSends_.fetch_add(1, std::memory_order_relaxed);
    }
    t.src = nullptr;
  }
  throughCount_ = 0;
}

// Runs only while the proxy holds the writer token.
void TcpConnection::pumpSendOnLoop() {
  if (closed_.load() || failed_.load()) return;
  auto& tail = sendRing_.counters.tail.value;
  uint32_t filled = tail.load(std::memory_order_acquire);
  if (filled == sent_) {
    // Leave the loop's reactor while idle, release the token, then look again: the producer
    // may have published in between and found the token taken.
    if (loopWriter_) {
      loopWriter_->release();
      loopWriter_.reset();
    }
    writerFree_.store(true, std::memory_order_seq_cst);
    filled = tail.load(std::memory_order_seq_cst);
    if (filled == sent_ || !writerFree_.exchange(false, std::memory_order_seq_cst)) return;
  }
  if (!loopWriter_) {
    asio::error_code ec;
    loopWriter_ = std::make_unique<asio::posix::stream_descriptor>(loop_.context());
    loopWriter_->assign(fd_, ec);
    if (ec) return fail("send to", ec.value());
  }
  const size_t count = gatherFrames(filled);
  asio::async_write(*loopWriter_, std::span(writeBuffers_.data(), count),
                    [self = shared_from_this()](const asio::error_code& ec, size_t n) {
                      if (ec == asio::error::operation_aborted) return;
                      if (ec) return self->fail("send to", ec.value());
                      self->advanceSent(n);
                      self->pumpSendOnLoop();
                    });
}

size_t TcpConnection::gatherFrames(uint32_t filled) {
  const uint32_t count = std::min<uint32_t>(filled - sent_, kMaxSlotsPerWrite);
  size_t used = 0;
  size_t skip = sentOffset_;
  for (uint32_t i = 0; i < count; ++i) {
    const uint32_t index = sent_ + i;
    const SlotMeta& meta = send_.meta(index);
    const Through& t = through_[index % send_.nSlots];
    const std::byte* payload = t.src && t.index == index ? t.src : send_.slot(index);
    const asio::const_buffer parts[2] = {asio::buffer(&meta, sizeof(SlotMeta)),
                                         asio::buffer(payload, meta.bytes)};
    for (const auto& part : parts) {
      if (skip >= part.size()) {
        skip -= part.size();
        continue;
      }
      writeBuffers_[used++] = part + skip;
      skip = 0;
    }
  }
  return used;
}

void TcpConnection::advanceSent(size_t bytes) {
  const uint32_t before = sent_;
  while (bytes > 0) {
    const size_t frame = sizeof(SlotMeta) + send_.meta(sent_).bytes;
    const size_t step = std::min(bytes, frame - sentOffset_);
    sentOffset_ += step;
    bytes -= step;
    if (sentOffset_ == frame) {
      ++sent_;
      sentOffset_ = 0;
    }
  }
  if (sent_ != before) {
    sendRing_.counters.head.value.store(sent_, std::memory_order_seq_cst);
    notifyAll(sendRing_.counters.head);
  }
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

// ---- receiving ----------------------------------------------------------------------------

void TcpConnection::awaitRecv(Clock::time_point until) {
  while (!failed_.load(std::memory_order_acquire)) {
    if (readFrames() > 0) return;
    const auto now = Clock::now();
    if (now >= until || failed_.load()) return;
    const auto ms = std::chrono::ceil<std::chrono::milliseconds>(until - now).count();
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, int(std::min<int64_t>(ms, 1 << 30))) == 0) return;
  }
}

void TcpConnection::offerTarget(const RecvTarget& target) {
  offer_ = {target.index, target.data, target.bytes, target.desc};
}

bool TcpConnection::fillStaging() {
  stagingBegin_ = stagingEnd_ = 0;
  while (true) {
    const ssize_t n = ::recv(fd_, staging_.data(), staging_.size(), MSG_DONTWAIT);
    if (n > 0) {
      stagingEnd_ = size_t(n);
      return true;
    }
    if (n == 0) {
      fail("receive from", 0);
      return false;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) fail("receive from", errno);
    return false;
  }
}

// Small frames arrive whole through the staging buffer (one recv for header and payload);
// the bulk of a large payload is read straight into its slot.
uint32_t TcpConnection::readFrames() {
  auto& tail = recvRing_.counters.tail.value;
  const auto& head = recvRing_.counters.head.value;
  while (received_ - head.load(std::memory_order_acquire) < recv_.nSlots) {
    SlotMeta& meta = recv_.meta(received_);
    const bool inHeader = receivedOffset_ < sizeof(SlotMeta);
    auto* dst = inHeader ? reinterpret_cast<std::byte*>(&meta) + receivedOffset_
                         : payload_ + (receivedOffset_ - sizeof(SlotMeta));
    const size_t want = inHeader ? sizeof(SlotMeta) - receivedOffset_
                                 : sizeof(SlotMeta) + meta.bytes - receivedOffset_;
    size_t got = 0;
    if (stagingBegin_ < stagingEnd_) {
      got = std::min(want, stagingEnd_ - stagingBegin_);
      copyBytes(dst, staging_.data() + stagingBegin_, got);
      stagingBegin_ += got;
    } else if (!inHeader && want >= staging_.size()) {
      const ssize_t n = ::recv(fd_, dst, want, MSG_DONTWAIT);
      if (n == 0) {
        fail("receive from", 0);
        return 0;
      }
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) fail("receive from", errno);
        return 0;
      }
      got = size_t(n);
    } else if (want > 0 && !fillStaging()) {
      return 0;
    }
    receivedOffset_ += got;
    if (receivedOffset_ == sizeof(SlotMeta) && inHeader) {
      if (meta.bytes > recv_.slotBytes) {
        fail(Status{Code::remote_error,
                    "rank " + std::to_string(selfRank_) + ": rank " + std::to_string(peer()) +
                        " sent a " + std::to_string(meta.bytes) + "-byte frame, larger than the " +
                        std::to_string(recv_.slotBytes) +
                        "-byte slot (do all ranks use the same GYRE_SLOT_BYTES?)"});
        return 0;
      }
      const bool direct = offer_.dst && offer_.index == received_ && offer_.bytes == meta.bytes &&
                          meta.sameOp(offer_.desc);
      payload_ = direct ? offer_.dst : recv_.slot(received_);
    }
    if (receivedOffset_ >= sizeof(SlotMeta) && receivedOffset_ == sizeof(SlotMeta) + meta.bytes) {
      landedDirect_ = payload_ != recv_.slot(received_);
      landedIndex_ = received_;
      receivedOffset_ = 0;
      ++received_;
      tail.store(received_, std::memory_order_release);
      return 1;  // the waiter needs one slot; more are read when it asks again
    }
  }
  return 0;
}

// ---- failures -----------------------------------------------------------------------------

void TcpConnection::fail(const std::string& what, int err) {
  if (closed_.load()) return;
  const std::string cause = err == 0 ? "connection closed by the peer" : errnoText(err);
  fail(Status{Code::remote_error,
              "rank " + std::to_string(selfRank_) + ": " + what + " rank " +
                  std::to_string(peer()) + " failed over tcp: " + cause,
              peer()});
}

void TcpConnection::fail(Status status) {
  {
    std::lock_guard lock(failureMutex_);
    if (failure_.ok()) failure_ = std::move(status);
  }
  failed_.store(true, std::memory_order_seq_cst);
  ::shutdown(fd_, SHUT_RDWR);
  for (auto* word : {&sendRing_.counters.head, &sendRing_.counters.tail, &recvRing_.counters.head,
                     &recvRing_.counters.tail}) {
    notifyAll(*word);
  }
}

Status TcpConnection::failure() const {
  if (!failed_.load(std::memory_order_acquire)) return {};
  std::lock_guard lock(failureMutex_);
  return failure_;
}

Status TcpConnection::peerGone() {
  if (Status s = failure(); !s.ok()) return s;
  pollfd p{fd_, POLLRDHUP, 0};
  if (::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0) {
    fail("the connection to", 0);  // a live peer never closes a communicator's connection
  }
  return failure();
}

}  // namespace gyre
