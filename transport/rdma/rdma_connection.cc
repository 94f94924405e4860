#include "transport/rdma/rdma_connection.h"

#include <arpa/inet.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>

namespace gyre {

namespace {
// A full send queue drains as the adapter completes or fails what it holds (its retries end
// within a second); this only bounds a device that stops completing anything.
constexpr auto kSendQueueLimit = std::chrono::seconds(60);

// A send request's wr_id: what it was (for error messages; a failed completion's opcode is
// undefined) and how many requests its completion accounts for.
enum RequestKind : uint64_t { kReceive = 0, kSlotWrite = 1, kCredit = 2 };
uint64_t requestId(RequestKind kind, uint32_t requests) {
  return uint64_t(kind) << 32 | requests;
}
const char* requestName(uint64_t wrId) {
  switch (wrId >> 32) {
    case kSlotWrite:
      return "the RDMA write of a slot";
    case kCredit:
      return "a credit";
    default:
      return "a receive request";
  }
}
}  // namespace

RdmaConnection::RdmaConnection(std::unique_ptr<RdmaEndpoint> endpoint,
                               const RdmaAddress& peerAddress, int fd, int selfRank, int peer,
                               int channel, const LinkConfig& config)
    : Connection(peer, channel),
      endpoint_(std::move(endpoint)),
      peerAddress_(peerAddress),
      selfRank_(selfRank),
      socket_(fd,
              "rank " + std::to_string(selfRank) + ": rank " + std::to_string(peer) +
                  " failed over rdma: ",
              peer) {
  auto linkOf = [&](LinkCounters& counters, std::byte* ring) {
    Link link;
    link.counters = &counters;
    link.metas = reinterpret_cast<SlotMeta*>(ring + RdmaEndpoint::kHeaderOffset);
    link.data = ring + RdmaEndpoint::kDataOffset;
    link.nSlots = config.nSlots;
    link.slotBytes = config.slotBytes;
    link.slotStride = endpoint_->stride();
    link.metaStride = endpoint_->stride();
    return link;
  };
  direct_.resize(config.nSlots);
  send_ = linkOf(sendCounters_, endpoint_->sendRing());
  recv_ = linkOf(recvCounters_, endpoint_->recvRing());
}

RdmaConnection::~RdmaConnection() {
  if (unackedEvents_ > 0) ibv_ack_cq_events(endpoint_->cq(), unackedEvents_);
  endpoint_.reset();
}

std::string RdmaConnection::who() const {
  return "rank " + std::to_string(selfRank_);
}

void RdmaConnection::sendPublished() {
  const uint32_t tail = send_.counters->tail.value.load(std::memory_order_acquire);
  while (posted_ != tail && !socket_.failed()) postSlot(posted_++);
}

bool RdmaConnection::sendFrom(const std::byte* src, uint32_t bytes) {
  uint32_t lkey = 0;
  if (bytes == 0 || !endpoint_->device().userKey(src, bytes, lkey)) return false;
  const uint32_t index = send_.counters->tail.value.load(std::memory_order_relaxed);
  direct_[index % send_.nSlots] = {src, lkey, true};
  return true;
}

// One write carries header and payload (contiguous in both rings, or the payload gathered
// from registered user memory); its immediate wakes the peer and returns credits.
void RdmaConnection::postSlot(uint32_t index) {
  const uint32_t slot = index % send_.nSlots;
  const uint32_t payload = send_.meta(index).bytes;
  DirectSource& direct = direct_[slot];
  ibv_sge sges[2] = {};
  sges[0] = {reinterpret_cast<uintptr_t>(&send_.meta(index)), uint32_t(sizeof(SlotMeta)),
             endpoint_->lkey()};
  int nSge = 1;
  if (direct.pending) {
    sges[1] = {reinterpret_cast<uintptr_t>(direct.src), payload, direct.lkey};
    nSge = 2;
  } else {
    sges[0].length += payload;  // the slot's payload follows its header
  }
  ibv_send_wr w{};
  w.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  w.sg_list = sges;
  w.num_sge = nSge;
  w.imm_data = htonl(takeCredits());  // the slots of theirs we freed ride along
  w.send_flags = IBV_SEND_SIGNALED;
  if (!direct.pending && sges[0].length <= endpoint_->maxInline()) w.send_flags |= IBV_SEND_INLINE;
  w.wr.rdma.remote_addr =
      peerAddress_.ring + uint64_t(slot) * peerAddress_.stride + RdmaEndpoint::kHeaderOffset;
  w.wr.rdma.rkey = peerAddress_.rkey;
  w.wr_id = requestId(kSlotWrite, 1);
  post(w, 1);
  if (direct.pending) {
    direct.pending = false;
    lastUserWr_ = postedWrs_;
    ++directSends_;
  }
}

Status RdmaConnection::releaseSources(Clock::time_point deadline, BusyPhase) {
  return completeUntil([this] { return completedWrs_ >= lastUserWr_; }, deadline,
                       "writes from user memory");
}

// Polls and sleeps on the completion queue until done(), a failure, or the deadline.
Status RdmaConnection::completeUntil(const std::function<bool()>& done, Clock::time_point deadline,
                                     const char* what) {
  while (!done()) {
    if (socket_.failed()) return failure();
    if (poll() > 0) continue;
    const auto now = Clock::now();
    if (now >= deadline) {
      return {Code::timeout, who() + ": " + what + " to rank " + std::to_string(peer()) +
                                 " over rdma did not complete in time"};
    }
    block(std::min(deadline, now + std::chrono::milliseconds(20)));
  }
  return {};
}

uint32_t RdmaConnection::takeCredits() {
  const uint32_t head = recv_.counters->head.value.load(std::memory_order_relaxed);
  const uint32_t credits = head - credited_;
  credited_ = head;
  return credits;
}

// Credits below half the ring wait for our next write to the peer to carry them. Holding
// them back only makes the peer's ring look shorter (at least half plus one slot), and every
// algorithm works with rings of 2 slots; the slots are credited at the latest once half the
// ring is free, so nothing waits on them for ever.
void RdmaConnection::recvReleased() {
  if (socket_.failed()) return;
  const uint32_t head = recv_.counters->head.value.load(std::memory_order_relaxed);
  if (head - credited_ < std::max<uint32_t>(1, recv_.nSlots / 2)) return;
  const uint32_t credits = takeCredits();
  ibv_send_wr credit{};
  credit.opcode = IBV_WR_SEND_WITH_IMM;
  credit.num_sge = 0;
  credit.imm_data = htonl(credits);
  credit.send_flags = IBV_SEND_SIGNALED;
  credit.wr_id = requestId(kCredit, 1);
  post(credit, 1);
}

void RdmaConnection::post(ibv_send_wr& first, uint32_t wrs) {
  ensureSendRoom(wrs);
  if (socket_.failed()) return;
  ibv_send_wr* bad = nullptr;
  if (const int rc = ibv_post_send(endpoint_->qp(), &first, &bad); rc != 0) {
    return failLocal("cannot post to the queue pair: " + errnoText(rc));
  }
  outstanding_ += wrs;
  postedWrs_ += wrs;
}

void RdmaConnection::ensureSendRoom(uint32_t wrs) {
  const auto limit = Clock::now() + kSendQueueLimit;
  while (outstanding_ + wrs > endpoint_->maxSendWr() && !socket_.failed()) {
    if (poll() > 0) continue;
    const auto now = Clock::now();
    if (now >= limit) return failLocal("the adapter completed nothing for 60 s");
    block(std::min(limit, now + std::chrono::milliseconds(20)));
  }
}

// Send requests complete in the order they were posted.
void RdmaConnection::retire(uint32_t wrs) {
  outstanding_ -= wrs;
  completedWrs_ += wrs;
}

void RdmaConnection::repostReceive() {
  ibv_recv_wr wr{};
  ibv_recv_wr* bad = nullptr;
  if (const int rc = ibv_post_recv(endpoint_->qp(), &wr, &bad); rc != 0) {
    failLocal("cannot post a receive request: " + errnoText(rc));
  }
}

int RdmaConnection::poll() {
  ibv_wc wc[16];
  int total = 0;
  while (true) {
    const int n = ibv_poll_cq(endpoint_->cq(), 16, wc);
    if (n < 0) {
      failLocal("polling the completion queue failed");
      return total;
    }
    for (int i = 0; i < n; ++i) {
      if (wc[i].status != IBV_WC_SUCCESS) {
        // The first failure is the cause; the requests flushed after it only echo it.
        failLocal(std::string(requestName(wc[i].wr_id)) +
                  " failed: " + ibv_wc_status_str(wc[i].status) + " (vendor error " +
                  std::to_string(wc[i].vendor_err) + ")");
        if ((wc[i].wr_id >> 32) != kReceive) retire(uint32_t(wc[i].wr_id & 0xffffffff));
        continue;
      }
      if (wc[i].opcode == IBV_WC_RECV_RDMA_WITH_IMM || wc[i].opcode == IBV_WC_RECV) {
        // A slot header (its payload already in place) or a bare credit; both carry credits.
        if (wc[i].opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
          WaitWord& tail = recv_.counters->tail;
          tail.value.store(tail.value.load(std::memory_order_relaxed) + 1,
                           std::memory_order_release);
        }
        WaitWord& head = send_.counters->head;
        head.value.store(head.value.load(std::memory_order_relaxed) + ntohl(wc[i].imm_data),
                         std::memory_order_release);
        repostReceive();
      } else {
        retire(uint32_t(wc[i].wr_id & 0xffffffff));
      }
    }
    total += n;
    if (n < 16) return total;
  }
}

void RdmaConnection::block(Clock::time_point until) {
  if (ibv_req_notify_cq(endpoint_->cq(), 0) != 0)
    return failLocal("cannot arm the completion queue");
  if (poll() > 0) return;  // arrived before the arming
  const auto left = until - Clock::now();
  if (left <= Clock::duration::zero()) return;
  pollfd fds[2] = {{endpoint_->channel()->fd, POLLIN, 0}, {socket_.fd(), POLLIN, 0}};
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
  ::poll(fds, 2, int(std::min<int64_t>(ms, 1000)));
  if (fds[0].revents & POLLIN) {
    ibv_cq* cq = nullptr;
    void* context = nullptr;
    while (ibv_get_cq_event(endpoint_->channel(), &cq, &context) == 0) ++unackedEvents_;
    if (unackedEvents_ >= 64) {
      ibv_ack_cq_events(endpoint_->cq(), unackedEvents_);
      unackedEvents_ = 0;
    }
  }
  if (fds[1].revents) {
    socket_.lookNow();  // the socket spoke: look now
    (void)failure();
  }
  poll();
}

void RdmaConnection::awaitSend(Clock::time_point until) {
  if (poll() > 0 || until <= Clock::now()) return;
  block(until);
}

void RdmaConnection::awaitRecv(Clock::time_point until) {
  if (poll() > 0 || until <= Clock::now()) return;
  block(until);
}

// Checked only by waiters that are stuck, at most every few milliseconds: one recv() peek.
Status RdmaConnection::failure() const {
  return socket_.failure();
}

Status RdmaConnection::flush(Clock::time_point deadline) {
  return completeUntil([this] { return outstanding_ == 0; }, deadline, "writes");
}

void RdmaConnection::failLocal(const std::string& what) {
  socket_.fail({Code::remote_error, who() + ": rdma connection to rank " + std::to_string(peer()) +
                                        " on " + endpoint_->device().name + ": " + what});
}

void RdmaConnection::close() {
  closeWithCause({});
}

void RdmaConnection::closeWithCause(const Status& cause) {
  if (!socket_.shutdown(&cause)) return;
  socket_.fail({Code::aborted,
                who() + ": the rdma connection to rank " + std::to_string(peer()) + " was closed"});
}

}  // namespace gyre
