// A link is one direction of a connection: a ring of nSlots slots of slotBytes each plus two
// counters, tail (slots the producer filled) and head (slots the consumer released).
// Primitives produce into the send link of one connection and consume from the recv link of
// another; the transport behind the connection moves the slots (a proxy on the event loop
// for tcp, the peer writing directly for shared memory). Nothing here knows what a
// collective is beyond the descriptor every slot carries so ranks that disagree are caught.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "gyre/types.h"
#include "runtime/status.h"
#include "transport/wait.h"

namespace gyre {

// Identifies one collective; every slot carries it and receivers compare it with their own.
struct OpDesc {
  uint64_t seq = 0;
  uint64_t count = 0;
  int32_t root = -1;
  Collective coll = Collective::all_reduce;
  DataType dtype = DataType::f32;
  RedOp op = RedOp::sum;
};

// Per-slot header; 32 bytes, also the tcp frame header (little-endian hosts only).
struct SlotMeta {
  uint32_t bytes = 0;
  uint8_t coll = 0;
  uint8_t dtype = 0;
  uint8_t op = 0;
  uint8_t reserved = 0;
  int32_t root = 0;
  uint32_t reserved2 = 0;
  uint64_t seq = 0;
  uint64_t count = 0;

  void setOp(const OpDesc& d) {
    coll = uint8_t(d.coll);
    dtype = uint8_t(d.dtype);
    op = uint8_t(d.op);
    root = d.root;
    seq = d.seq;
    count = d.count;
  }
  bool sameOp(const OpDesc& d) const {
    return coll == uint8_t(d.coll) && dtype == uint8_t(d.dtype) && op == uint8_t(d.op) &&
           root == d.root && seq == d.seq && count == d.count;
  }
};
static_assert(sizeof(SlotMeta) == 32, "SlotMeta is a wire format");

// "all_reduce #7 (count 1000, float, sum)"
std::string describeOp(const OpDesc& d);
std::string describeOp(const SlotMeta& m);

struct LinkCounters {
  WaitWord tail;  // written by the producer only
  WaitWord head;  // written by the consumer only
};

struct Link {
  LinkCounters* counters = nullptr;
  SlotMeta* metas = nullptr;
  std::byte* data = nullptr;
  uint32_t nSlots = 0;
  size_t slotBytes = 0;
  // Distance from one slot (header) to the next; 0: slotBytes (sizeof(SlotMeta)), i.e. arrays.
  // rdma interleaves each header with its slot so that one write carries both.
  size_t slotStride = 0;
  size_t metaStride = 0;

  std::byte* slot(uint32_t index) {
    return data + size_t(index % nSlots) * (slotStride ? slotStride : slotBytes);
  }
  SlotMeta& meta(uint32_t index) {
    if (metaStride == 0) return metas[index % nSlots];
    return *reinterpret_cast<SlotMeta*>(reinterpret_cast<std::byte*>(metas) +
                                        size_t(index % nSlots) * metaStride);
  }
};

// One peer over one channel. The primitives own the producer side of sendLink() and the
// consumer side of recvLink(); the transport owns the other sides. One thread at a time
// uses a connection's primitive side (the communicator serialises its collectives).
class Connection {
 public:
  virtual ~Connection() = default;

  int peer() const { return peer_; }
  int channel() const { return channel_; }
  Link& sendLink() { return send_; }
  Link& recvLink() { return recv_; }

  // Called by the producer after it advanced sendLink().counters->tail: at once for every
  // slot, or, where batchesSends(), for all slots published since the last call, before the
  // producer waits for anything and at the end of each primitive.
  virtual void sendPublished() = 0;
  // True where one sendPublished() for several slots costs less than one each (tcp: one
  // sendmsg carries them all).
  virtual bool batchesSends() const { return false; }
  // Called by the consumer once per step, after it advanced recvLink().counters->head and
  // published the step's sends: transports whose sender cannot see that counter (rdma)
  // return the credits here, unless a send to the same peer already carried them.
  virtual void recvReleased() {}
  // Called by the producer when sendLink() has no free slot: sleeps until the head may have
  // moved, the connection failed, or `until` passed (at once if it has). Transports that
  // learn of freed slots only by polling (rdma) poll here. Callers re-check and loop.
  virtual void awaitSend(Clock::time_point until) {
    WaitWord& head = send_.counters->head;
    const uint32_t tail = send_.counters->tail.value.load(std::memory_order_relaxed);
    const uint32_t observed = head.value.load(std::memory_order_seq_cst);
    if (tail - observed >= send_.nSlots) sleepWhileEqual(head, observed, until);
  }
  // Called by the consumer when recvLink() has no filled slot: moves bytes on the calling
  // thread where the transport needs that, or sleeps, until at least one new slot may be
  // filled, the connection failed, or `until` passed. Callers re-check and loop.
  virtual void awaitRecv(Clock::time_point until) = 0;
  // Not ok once the connection broke; the message names the peer and the cause.
  virtual Status failure() const = 0;
  // Blocks until every published send slot left this process, or the deadline passes.
  virtual Status flush(Clock::time_point deadline) = 0;
  // Stops moving bytes and releases the OS resources; pending data is dropped.
  virtual void close() = 0;
  // Which transport carries it ("tcp", "shm", ...), for logs.
  virtual const char* transportName() const = 0;

  // Direct send, for transports whose adapter reads memory itself (rdma): the producer about
  // to publish its next send slot offers `src` (user memory that stays unchanged until
  // releaseUserMemory()) as that slot's payload instead of copying it in. False: not possible
  // here (no registration covers it), copy as usual.
  virtual bool sendFrom(const std::byte* /*src*/, uint32_t /*bytes*/) { return false; }
  // Blocks until no transfer reads memory handed to sendFrom() any more, the connection
  // failed, or the deadline passed; the operation returns only after this.
  virtual Status releaseUserMemory(Clock::time_point /*deadline*/) { return {}; }
  // Write-through send, for transports that copy payloads into the kernel anyway (tcp): the
  // producer about to publish its next send slot offers `src` as its payload. sendPublished()
  // writes from it what the socket takes at once and copies the rest into the slot before it
  // returns, so `src` is the caller's again then. False: not now (the progress thread is
  // writing), fill the slot as usual.
  virtual bool sendThrough(const std::byte* /*src*/, uint32_t /*bytes*/) { return false; }
  // Slots whose payload sendThrough() wrote wholly from user memory (diagnostics and tests).
  virtual uint64_t throughSends() const { return 0; }
  // Slots whose payload went straight from user memory (diagnostics and tests).
  virtual uint64_t directSends() const { return 0; }

  // Direct receive, for transports that copy received bytes anyway (tcp): the consumer about
  // to wait for recv slot `index` offers `dst`, where the payload goes straight from the
  // socket if the frame is for `desc` and exactly `bytes` long; a frame that does not match
  // lands in the slot as usual so the mismatch is reported without touching `dst`. The offer
  // lasts until withdrawDirect(); landedDirect(index) says where slot `index` went.
  virtual void offerDirect(uint32_t /*index*/, std::byte* /*dst*/, uint32_t /*bytes*/,
                           const OpDesc& /*desc*/) {}
  virtual void withdrawDirect() {}
  virtual bool landedDirect(uint32_t /*index*/) const { return false; }

 protected:
  Connection(int peer, int channel) : peer_(peer), channel_(channel) {}
  Link send_;
  Link recv_;

 private:
  int peer_;
  int channel_;
};

}  // namespace gyre
