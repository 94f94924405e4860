#include "algorithms/host_prims.h"

#include <algorithm>
#include <sstream>

#include "kernels/cpu/reduce.h"

namespace gyre {

namespace {
constexpr Clock::duration kFirstPeerCheck = std::chrono::seconds(1);
constexpr Clock::duration kLastPeerCheck = std::chrono::seconds(16);
}  // namespace

HostPrims::HostPrims(const OpContext& ctx, ConnectionTo connectionTo, const void* input,
                     void* output)
    : ctx_(ctx),
      connectionTo_(std::move(connectionTo)),
      input_(static_cast<const std::byte*>(input)),
      output_(static_cast<std::byte*>(output)),
      elemSize_(dataTypeSize(ctx.desc.dtype)),
      inputReadOnly_(ctx.inputReadOnly) {}

HostPrims::~HostPrims() {
  flushSends();
  // Only after a failure: finish() emptied the list otherwise.
  for (int i = 0; i < nReadingInput_; ++i) readingInput_[i]->abandonSources(ctx_.deadline);
}

void HostPrims::finish() {
  flushSends();
  for (; nReadingInput_ > 0; --nReadingInput_) {
    Connection& conn = *readingInput_[nReadingInput_ - 1];
    if (Status s = conn.releaseSources(ctx_.deadline, ctx_.busy); !s.ok()) {
      throw Failure(Status{s.code,
                           "rank " + std::to_string(ctx_.rank) + ": " + describeOp(ctx_.desc) +
                               " failed: " + s.message,
                           s.lostRank});
    }
  }
}

void HostPrims::setPeers(const int* recvPeers, int nRecv, const int* sendPeers, int nSend) {
  if (nRecv < 0 || nRecv > kMaxPeers || nSend < 0 || nSend > kMaxPeers) {
    fail(Code::internal, "rank " + std::to_string(ctx_.rank) + ": " + describeOp(ctx_.desc) +
                             ": an algorithm named too many peers");
  }
  size_t slotBytes = SIZE_MAX;
  nRecv_ = nRecv;
  nSend_ = nSend;
  for (int i = 0; i < nRecv; ++i) {
    recvFrom_[i] = &connectionTo_(recvPeers[i]);
    slotBytes = std::min(slotBytes, recvFrom_[i]->recvLink().slotBytes);
  }
  for (int i = 0; i < nSend; ++i) {
    sendTo_[i] = &connectionTo_(sendPeers[i]);
    slotBytes = std::min(slotBytes, sendTo_[i]->sendLink().slotBytes);
  }
  sliceElems_ = std::max<size_t>(1, slotBytes == SIZE_MAX ? SIZE_MAX / 2 : slotBytes / elemSize_);
}

void HostPrims::run(unsigned what, size_t inOff, size_t outOff, size_t n, bool final) {
  const DataType type = ctx_.desc.dtype;
  const RedOp op = ctx_.desc.op;
  const int divisor = (final && op == RedOp::avg) ? ctx_.nranks : 0;
  const int nRecv = (what & kRecv) ? nRecv_ : 0;
  const int nSend = (what & kSend) ? nSend_ : 0;
  if (((what & kRecv) && nRecv == 0) || ((what & kSend) && nSend == 0) ||
      (nRecv > 1 && !(what & kInput))) {
    fail(Code::internal, "rank " + std::to_string(ctx_.rank) + ": " + describeOp(ctx_.desc) +
                             ": a primitive does not fit the peers the algorithm set");
  }
  const std::byte* received[kMaxPeers];
  std::byte* slots[kMaxPeers];
  // Slots bound what crosses a link; a local copy goes in one pass.
  const size_t slice = (nRecv || nSend) ? sliceElems_ : std::max<size_t>(1, n);
  for (size_t done = 0; done < n; done += slice) {
    const size_t k = std::min(slice, n - done);
    const uint32_t bytes = uint32_t(k * elemSize_);
    const std::byte* in = (what & kInput) ? input_ + (inOff + done) * elemSize_ : nullptr;
    std::byte* out = (what & kOutput) ? output_ + (outOff + done) * elemSize_ : nullptr;
    // A plain copy out of one peer may be received straight into the output.
    std::byte* direct = (what & (kInput | kOutput)) == kOutput ? out : nullptr;
    for (int i = 0; i < nRecv; ++i) received[i] = waitRecv(*recvFrom_[i], bytes, direct);
    for (int i = 0; i < nSend; ++i) slots[i] = waitSend(*sendTo_[i], bytes);
    // The first destination is the output when there is one, else the first send slot; the
    // kernels write a second one in the same pass, and further ones are copied from the first.
    std::byte* dst = out ? out : slots[0];
    std::byte* dst2 = out ? (nSend ? slots[0] : nullptr) : (nSend > 1 ? slots[1] : nullptr);
    // A single send may leave from where its payload already is: the input where it is sent as
    // it is (a transport may read it until the operation returns where nothing writes it), else
    // the output (offered before it is written: a transport that takes it reads it only when
    // the slot is published).
    Taken taken = Taken::no;
    const bool sendsInput = (what & (kRecv | kInput | kSend)) == (kInput | kSend) && nSend == 1;
    if (sendsInput && (inputReadOnly_ || !out)) {
      taken = sendTo_[0]->offerSource({in, bytes, inputReadOnly_, !ctx_.inputUnreadable,
                                       ctx_.receiversInCall, ctx_.senderIdle, ctx_.singleCopy});
    } else if (out && nSend == 1) {
      taken =
          sendTo_[0]->offerSource({out, bytes, false, !ctx_.inputUnreadable, ctx_.receiversInCall});
    }
    if (taken == Taken::untilReleased) noteReadingInput(*sendTo_[0]);
    if (taken != Taken::no && out) dst2 = nullptr;  // the slot stays empty
    if (taken != Taken::no && !out) {
      // a plain send: the transport moves the input itself
    } else if (in && ctx_.inputUnreadable) {
      const std::string via = nSend
                                  ? std::string(sendTo_[0]->transportName()) +
                                        " connection to rank " + std::to_string(sendTo_[0]->peer())
                                  : std::string("operation");
      fail(Code::invalid_usage, "rank " + std::to_string(ctx_.rank) + ": " + describeOp(ctx_.desc) +
                                    ": the input is memory the CPU cannot read, and no " +
                                    "registration lets the " + via +
                                    " send it directly (was it deregistered?)");
    } else if (nRecv && in) {
      const std::byte* acc = in;
      for (int i = 0; i < nRecv; ++i) {
        const bool last = i == nRecv - 1;
        // Only the last pass writes what the peers read; earlier ones stay in this cache.
        const cpu::Stores stores = last ? slotStores(out != nullptr, nSend) : cpu::Stores{};
        cpu::reduce(type, op, dst, last ? dst2 : nullptr, acc, received[i], k, last ? divisor : 0,
                    stores);
        acc = dst;
      }
    } else {
      // An idle sender's fill is timed: the transport takes the source while filling runs slowly.
      const bool timed = sendsInput && ctx_.senderIdle && taken == Taken::no;
      const auto start = timed ? Clock::now() : Clock::time_point{};
      cpu::copy(dst, dst2, nRecv ? received[0] : in, bytes, slotStores(out != nullptr, nSend));
      if (timed) sendTo_[0]->noteFill(bytes, Clock::now() - start);
    }
    for (int i = out ? 1 : 2; i < nSend; ++i)
      cpu::copy(slots[i], nullptr, dst, bytes, {streams(*sendTo_[i]), false});
    for (int i = 0; i < nRecv; ++i) releaseRecv(*recvFrom_[i]);
    for (int i = 0; i < nSend; ++i) publishSend(*sendTo_[i], bytes);
    // After the sends, which may carry the credits along (rdma).
    for (int i = 0; i < nRecv; ++i) recvFrom_[i]->recvReleased();
  }
  if (!holding_) flushSends();
}

bool HostPrims::streams(Connection& to) const {
  return ctx_.streamSlots && to.sendLink().peerReadsInPlace;
}

cpu::Stores HostPrims::slotStores(bool toOutput, int nSend) const {
  // As in run(): the first destination is the output, else the first send slot; the second is
  // the next send slot.
  const int firstSlot = toOutput ? -1 : 0;
  return {firstSlot == 0 && nSend > 0 && streams(*sendTo_[0]),
          nSend > firstSlot + 1 && streams(*sendTo_[firstSlot + 1])};
}

void HostPrims::flushSends() {
  for (; nUnflushed_ > 0; --nUnflushed_) unflushed_[nUnflushed_ - 1]->sendPublished();
}

void HostPrims::noteReadingInput(Connection& conn) {
  for (int i = 0; i < nReadingInput_; ++i)
    if (readingInput_[i] == &conn) return;
  if (nReadingInput_ == kMaxPeers) finish();  // make room: wait for the oldest ones
  readingInput_[nReadingInput_++] = &conn;
}

void HostPrims::sendMarker() {
  for (int i = 0; i < nSend_; ++i) {
    waitSend(*sendTo_[i], 0);
    publishSend(*sendTo_[i], 0);
  }
  flushSends();
}

void HostPrims::recvMarker() {
  for (int i = 0; i < nRecv_; ++i) {
    waitRecv(*recvFrom_[i], 0);
    releaseRecv(*recvFrom_[i]);
    recvFrom_[i]->recvReleased();
  }
}

// The consumer's head of a recv link and the producer's tail of a send link are written by
// this side only, so the counters themselves are the positions.
void HostPrims::releaseRecv(Connection& from) {
  Link& link = from.recvLink();
  const uint32_t head = link.counters->head.value.load(std::memory_order_relaxed);
  link.counters->head.value.store(head + 1, std::memory_order_seq_cst);
  notifyAll(link.counters->head);
}

void HostPrims::publishSend(Connection& to, uint32_t bytes) {
  Link& link = to.sendLink();
  const uint32_t tail = link.counters->tail.value.load(std::memory_order_relaxed);
  SlotMeta& meta = link.meta(tail);
  meta.bytes = bytes;
  meta.offset = payloadOffset(link, tail, bytes);
  meta.setOp(ctx_.desc);
  link.counters->tail.value.store(tail + 1, std::memory_order_seq_cst);
  notifyAll(link.counters->tail);
  if (!to.batchesSends()) return to.sendPublished();
  for (int i = 0; i < nUnflushed_; ++i)
    if (unflushed_[i] == &to) return;
  if (nUnflushed_ == kMaxPeers) flushSends();
  unflushed_[nUnflushed_++] = &to;
}

const std::byte* HostPrims::waitRecv(Connection& from, uint32_t bytes, std::byte* direct) {
  Link& link = from.recvLink();
  auto& tail = link.counters->tail;
  const uint32_t head = link.counters->head.value.load(std::memory_order_relaxed);
  const auto ready = [&] { return tail.value.load(std::memory_order_acquire) != head; };
  const auto await = [&](Clock::time_point until) { from.awaitRecv(until); };
  bool landed = false;
  if (direct && !ready()) {
    from.offerTarget({head, direct, bytes, ctx_.desc});
    struct Withdraw {  // also when the wait throws
      Connection& conn;
      uint32_t index;
      bool& landed;
      ~Withdraw() { landed = conn.withdrawTarget(index); }
    } withdraw{from, head, landed};
    waitUntil(ready, await, from, "data from");
  } else {
    waitUntil(ready, await, from, "data from");
  }
  const SlotMeta& meta = link.meta(head);
  if (!meta.sameOp(ctx_.desc) || meta.bytes != bytes) mismatch(from, meta, bytes);
  if (landed) return direct;
  if (const std::byte* payload = from.recvPayload(head, direct)) return payload;
  const Status broken = from.failure();
  throw Failure(Status{broken.code,
                       "rank " + std::to_string(ctx_.rank) + ": " + describeOp(ctx_.desc) +
                           " failed: " + broken.message,
                       broken.lostRank});
}

std::byte* HostPrims::waitSend(Connection& to, uint32_t bytes) {
  Link& link = to.sendLink();
  auto& head = link.counters->head;
  const uint32_t tail = link.counters->tail.value.load(std::memory_order_relaxed);
  waitUntil([&] { return tail - head.value.load(std::memory_order_acquire) < link.nSlots; },
            [&](Clock::time_point until) { to.awaitSend(until); }, to, "buffer space at");
  return link.slot(tail) + payloadOffset(link, tail, bytes);
}

uint32_t HostPrims::payloadOffset(const Link& link, uint32_t index, uint32_t bytes) const {
  // Small payloads first: no division on the path of the smallest calls.
  if (bytes < kSpreadFromBytes || !ctx_.spreadSlots || !link.peerReadsInPlace) return 0;
  return spreadOffset(index / link.nSlots, bytes, link.slotBytes);
}

template <class Ready, class Await>
void HostPrims::waitUntil(Ready ready, Await await, Connection& conn, const char* direction) {
  if (ready()) return;
  flushSends();  // a peer may wait for them before it can give what this wait needs
  // The busy phase (GYRE_SPIN_US), each poll a non-blocking attempt of the transport first.
  if (pollFor(ctx_.busy, [&] {
        await(Clock::time_point{});
        return ready();
      })) {
    return;
  }
  auto peerCheckInterval = kFirstPeerCheck;
  auto nextPeerCheck = Clock::now() + peerCheckInterval;
  while (true) {
    if (ready()) return;
    // Data that arrived before a failure is still used; the failure counts only when stuck.
    Status broken = conn.failure();
    if (!broken.ok()) {
      // The failure may have been seen before what arrived ahead of it was looked at (rdma:
      // the peer's last write sits in the completion queue when its socket closes).
      await(Clock::time_point{});
      if (ready()) return;
      const std::string what = "rank " + std::to_string(ctx_.rank) + ": " + describeOp(ctx_.desc);
      throw Failure(Status{broken.code, what + " failed: " + broken.message, broken.lostRank});
    }
    if (ctx_.channelFailed && ctx_.channelFailed->load(std::memory_order_relaxed)) {
      fail(Code::aborted, "rank " + std::to_string(ctx_.rank) + ": " + describeOp(ctx_.desc) +
                              " stopped: another channel of it failed");
    }
    if (ctx_.abort && ctx_.abort->load(std::memory_order_relaxed)) {
      fail(Code::aborted, "rank " + std::to_string(ctx_.rank) + ": " + describeOp(ctx_.desc) +
                              " aborted by gyreCommAbort");
    }
    const auto now = Clock::now();
    if (now >= ctx_.deadline) {
      std::ostringstream secs;
      secs << std::chrono::duration<double>(ctx_.timeout).count();
      fail(Code::timeout, "rank " + std::to_string(ctx_.rank) + ": " + describeOp(ctx_.desc) +
                              " timed out after " + secs.str() + " s waiting for " + direction +
                              " rank " + std::to_string(conn.peer()) + " over " +
                              conn.transportName());
    }
    if (ctx_.checkPeers && now >= nextPeerCheck) {
      if (Status s = ctx_.checkPeers(); !s.ok()) {
        throw Failure(s.code, "rank " + std::to_string(ctx_.rank) + ": " + s.message);
      }
      peerCheckInterval = std::min(2 * peerCheckInterval, kLastPeerCheck);
      nextPeerCheck = now + peerCheckInterval;
    }
    // Wait in short slices so an abort is seen promptly even without a wake-up.
    await(std::min(ctx_.deadline, now + std::chrono::milliseconds(20)));
  }
}

void HostPrims::mismatch(const Connection& from, const SlotMeta& meta, uint32_t expectedBytes) {
  std::string message = "rank " + std::to_string(ctx_.rank) + ": ranks disagree: this rank is in " +
                        describeOp(ctx_.desc) + " but rank " + std::to_string(from.peer()) +
                        " sent data for " + describeOp(meta);
  if (meta.sameOp(ctx_.desc)) {
    message += " in a " + std::to_string(meta.bytes) + "-byte piece where " +
               std::to_string(expectedBytes) + " bytes were expected";
  }
  fail(Code::invalid_usage, message);
}

}  // namespace gyre
