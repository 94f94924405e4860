#include "algorithms/host_prims.h"

#include <algorithm>
#include <sstream>

#include "kernels/cpu/reduce.h"

namespace gyre {

HostPrims::HostPrims(const OpContext& ctx, Connection* recvFrom, Connection* sendTo,
                     const void* input, void* output)
    : ctx_(ctx),
      recvFrom_(recvFrom),
      sendTo_(sendTo),
      input_(static_cast<const std::byte*>(input)),
      output_(static_cast<std::byte*>(output)),
      elemSize_(dataTypeSize(ctx.desc.dtype)) {
  size_t slotBytes = SIZE_MAX;
  if (recvFrom_) {
    slotBytes = std::min(slotBytes, recvFrom_->recvLink().slotBytes);
    recvHead_ = recvFrom_->recvLink().counters->head.value.load(std::memory_order_relaxed);
  }
  if (sendTo_) {
    slotBytes = std::min(slotBytes, sendTo_->sendLink().slotBytes);
    sendTail_ = sendTo_->sendLink().counters->tail.value.load(std::memory_order_relaxed);
  }
  sliceElems_ = std::max<size_t>(1, slotBytes == SIZE_MAX ? SIZE_MAX / 2 : slotBytes / elemSize_);
}

void HostPrims::run(unsigned what, size_t inOff, size_t outOff, size_t n, bool final) {
  const DataType type = ctx_.desc.dtype;
  const RedOp op = ctx_.desc.op;
  const int divisor = (final && op == RedOp::avg) ? ctx_.nranks : 0;
  for (size_t done = 0; done < n; done += sliceElems_) {
    const size_t k = std::min(sliceElems_, n - done);
    const uint32_t bytes = uint32_t(k * elemSize_);
    const std::byte* in = (what & kInput) ? input_ + (inOff + done) * elemSize_ : nullptr;
    std::byte* out = (what & kOutput) ? output_ + (outOff + done) * elemSize_ : nullptr;
    const std::byte* received = (what & kRecv) ? waitRecv(bytes) : nullptr;
    std::byte* slot = (what & kSend) ? waitSend() : nullptr;
    // The first destination is the output when there is one, else the send slot.
    void* dst = out ? static_cast<void*>(out) : static_cast<void*>(slot);
    void* dst2 = out ? static_cast<void*>(slot) : nullptr;
    if (received && in) {
      cpu::reduce(type, op, dst, dst2, in, received, k, divisor);
    } else {
      cpu::copy(dst, dst2, received ? received : in, bytes);
    }
    if (received) releaseRecv();
    if (slot) publishSend(bytes);
  }
}

void HostPrims::sendMarker() {
  waitSend();
  publishSend(0);
}

void HostPrims::recvMarker() {
  waitRecv(0);
  releaseRecv();
}

void HostPrims::releaseRecv() {
  Link& link = recvFrom_->recvLink();
  link.counters->head.value.store(++recvHead_, std::memory_order_seq_cst);
  notifyAll(link.counters->head);
}

void HostPrims::publishSend(uint32_t bytes) {
  Link& link = sendTo_->sendLink();
  SlotMeta& meta = link.meta(sendTail_);
  meta.bytes = bytes;
  meta.setOp(ctx_.desc);
  link.counters->tail.value.store(++sendTail_, std::memory_order_seq_cst);
  notifyAll(link.counters->tail);
  sendTo_->sendPublished();
}

const std::byte* HostPrims::waitRecv(uint32_t bytes) {
  Link& link = recvFrom_->recvLink();
  auto& tail = link.counters->tail;
  waitUntil([&] { return tail.value.load(std::memory_order_acquire) != recvHead_; },
            [&](Clock::time_point until) { recvFrom_->awaitRecv(until); }, *recvFrom_, "data from");
  const SlotMeta& meta = link.meta(recvHead_);
  if (!meta.sameOp(ctx_.desc) || meta.bytes != bytes) mismatch(meta, bytes);
  return link.slot(recvHead_);
}

std::byte* HostPrims::waitSend() {
  Link& link = sendTo_->sendLink();
  auto& head = link.counters->head;
  waitUntil([&] { return sendTail_ - head.value.load(std::memory_order_acquire) < link.nSlots; },
            [&](Clock::time_point until) {
              const uint32_t observed = head.value.load(std::memory_order_seq_cst);
              if (sendTail_ - observed >= link.nSlots) sleepWhileEqual(head, observed, until);
            },
            *sendTo_, "buffer space at");
  return link.slot(sendTail_);
}

template <class Ready, class Await>
void HostPrims::waitUntil(Ready ready, Await await, Connection& conn, const char* direction) {
  if (ready()) return;
  // Optional busy phase (GYRE_SPIN_US): worth it only with a core to spare per rank.
  if (ctx_.spin.count() > 0) {
    const auto spinEnd = Clock::now() + ctx_.spin;
    do {
      await(Clock::time_point{});  // a non-blocking attempt
      if (ready()) return;
      cpuRelax();
    } while (Clock::now() < spinEnd);
  }
  while (true) {
    if (ready()) return;
    // Data that arrived before a failure is still used; the failure counts only when stuck.
    Status broken = conn.failure();
    if (!broken.ok()) {
      const std::string what = "rank " + std::to_string(ctx_.rank) + ": " + describeOp(ctx_.desc);
      throw Failure(broken.code, what + " failed: " + broken.message);
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
    // Wait in short slices so an abort is seen promptly even without a wake-up.
    await(std::min(ctx_.deadline, now + std::chrono::milliseconds(20)));
  }
}

void HostPrims::mismatch(const SlotMeta& meta, uint32_t expectedBytes) {
  std::string message = "rank " + std::to_string(ctx_.rank) + ": ranks disagree: this rank is in " +
                        describeOp(ctx_.desc) + " but rank " + std::to_string(recvFrom_->peer()) +
                        " sent data for " + describeOp(meta);
  if (meta.sameOp(ctx_.desc)) {
    message += " in a " + std::to_string(meta.bytes) + "-byte piece where " +
               std::to_string(expectedBytes) + " bytes were expected";
  }
  fail(Code::invalid_usage, message);
}

}  // namespace gyre
