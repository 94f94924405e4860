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

#include "base/status.h"
#include "base/wait.h"
#include "gyre/types.h"
#include "link/slot.h"

namespace gyre {

// "all_reduce #7 (count 1000, float, sum)"
std::string describeOp(const OpDesc& d);
std::string describeOp(const SlotMeta& m);

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
  // The peer's CPU reads the slots where this side writes them (shared memory), so how they
  // are stored decides where the peer finds them (cpu::Stores).
  bool peerReadsInPlace = false;

  std::byte* slot(uint32_t index) {
    return data + size_t(index % nSlots) * (slotStride ? slotStride : slotBytes);
  }
  SlotMeta& meta(uint32_t index) {
    if (metaStride == 0) return metas[index % nSlots];
    return *reinterpret_cast<SlotMeta*>(reinterpret_cast<std::byte*>(metas) +
                                        size_t(index % nSlots) * metaStride);
  }
};

// A send slot's payload where it already lies in the caller's memory.
struct SendSource {
  const std::byte* data = nullptr;
  uint32_t bytes = 0;
  bool stable = false;      // unchanged until the operation returns (the input of a send)
  bool cpuReadable = true;  // false: device memory, which only a DMA engine may read
  // The receiver takes part in the same operation (a collective), so the operation may wait
  // for it to read the payload; a lone send must not (its receiver may come later).
  bool receiverInCall = false;
  // The sender has a core of its own and nothing to receive in the operation: filling the slot
  // itself may cost the operation nothing (noteFill tells the transport how fast it went).
  bool senderIdle = false;
  // The receiver may copy the payload from where it is (shm's single copy). False where the
  // tuner found the senders' own fills faster (Tuner::slotWrites, OpContext::singleCopy).
  bool receiverCopies = true;
};
// How a transport took a SendSource.
enum class Taken : uint8_t {
  no,              // not at all: the executor fills the slot
  untilPublished,  // read by sendPublished(), which copies what it cannot send at once
  untilReleased,   // read by the transport until releaseSources() returns
};
// Where a recv slot's payload may land instead of the slot.
struct RecvTarget {
  uint32_t index = 0;  // the recv slot
  std::byte* data = nullptr;
  uint32_t bytes = 0;
  OpDesc desc;  // the call the slot must belong to
};
struct DirectCounts {
  uint64_t sentThrough = 0;   // slots taken untilPublished and sent wholly from the source
  uint64_t sentFromUser = 0;  // slots taken untilReleased
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
  // failure(), or, where the transport can tell without moving bytes, that the peer's end has
  // closed: for a wait on that peer that does not use this connection (another channel's
  // connection being opened to it), which a peer gone while this one was idle would otherwise
  // hold until the deadline. The caller is the thread that runs the collectives.
  virtual Status peerGone() { return failure(); }
  // Blocks until every published send slot left this process, or the deadline passes.
  virtual Status flush(Clock::time_point deadline) = 0;
  // Stops moving bytes and releases the OS resources; pending data is dropped.
  virtual void close() = 0;
  // close(), because this rank failed with `cause`: where the transport can, the peer learns
  // the cause with the close (so a peer that cannot reach the failure board still names the
  // rank that was lost first).
  virtual void closeWithCause(const Status& cause) {
    (void)cause;
    close();
  }
  // Which transport carries it ("tcp", "shm", ...), for logs.
  virtual const char* transportName() const = 0;

  // Direct placement, as NCCL's direct pointers: a slot's payload may come from, or go to,
  // the caller's memory instead of the slot, wherever the transport can move it from there.
  // The executor offers; the transport answers how it took the offer. No offer is ever
  // required: a transport that takes none is still complete.

  // The producer, about to publish its next send slot, offers where that slot's payload
  // already is. Taken::no: copy it into the slot as usual.
  virtual Taken offerSource(const SendSource& /*source*/) { return Taken::no; }
  // After the producer filled a slot of `bytes` itself, for a source offered as senderIdle:
  // how long the copy took.
  virtual void noteFill(uint32_t /*bytes*/, Clock::duration /*took*/) {}
  // Blocks until nothing taken Taken::untilReleased is read any more, the connection failed,
  // or the deadline passed; the operation returns only after this, polling as `busy` says
  // before it sleeps (the communicator's busy phase of every wait).
  virtual Status releaseSources(Clock::time_point /*deadline*/, BusyPhase /*busy*/ = {}) {
    return {};
  }
  // The operation failed before releaseSources(): from now on nothing taken
  // Taken::untilReleased may be read. Transports that can withdraw the sources do (the peer
  // then fails instead of reading memory the caller got back); the others wait as
  // releaseSources() does.
  virtual void abandonSources(Clock::time_point deadline) { (void)releaseSources(deadline); }
  // The consumer, about to wait for recv slot `target.index`, offers where its payload should
  // go. A frame that does not match `target` (other call, other size) lands in the slot as
  // usual so the mismatch is reported without touching the memory. The offer lasts until
  // withdrawTarget(index), which says whether slot `index` landed there.
  virtual void offerTarget(const RecvTarget& /*target*/) {}
  virtual bool withdrawTarget(uint32_t /*index*/) { return false; }
  // The consumer, once recv slot `index` is filled and its header matches the call, asks where
  // its payload is: in the slot (the default), or, where the producer left it in its own
  // memory (shm's single copy), copied now into `target` (the offered target; null: the slot).
  // Null when that copy failed; failure() then says why.
  virtual const std::byte* recvPayload(uint32_t index, std::byte* /*target*/) {
    return recv_.slot(index);
  }
  // Slots this connection moved directly so far (diagnostics and tests).
  virtual DirectCounts directCounts() const { return {}; }

 protected:
  Connection(int peer, int channel) : peer_(peer), channel_(channel) {}
  Link send_;
  Link recv_;

 private:
  int peer_;
  int channel_;
};

}  // namespace gyre
