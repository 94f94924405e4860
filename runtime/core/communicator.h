// A communicator: its ranks, its connections and its progress thread. Collectives on host
// buffers run on the calling thread (HostPrims) while the event loop moves bytes. Calls on one
// communicator run in issue order (blocking calls wait for earlier asynchronous ones). The
// first failure poisons it: later calls fail fast with the same cause.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "gyre/types.h"
#include "runtime/core/config.h"
#include "runtime/core/work.h"

namespace gyre {

class Communicator;

// One deferred call of a group (gyreGroupStart/End): what runGroup fuses and batches.
struct GroupOp {
  Collective coll = Collective::all_reduce;  // all_reduce, broadcast, reduce, all_gather,
                                             // reduce_scatter, or send_recv
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;
  DataType type = DataType::f32;
  RedOp op = RedOp::sum;
  int root = -1;        // broadcast/reduce root
  int peer = -1;        // send_recv: the other rank
  bool isSend = false;  // send_recv: this rank sends (else receives)
  // Any other call: run in its place, as is.
  std::function<void(Communicator&)> other;
};

// A buffer of a stream-ordered call on CUDA memory (Communicator::enqueueOnStream).
struct StagedBuffer {
  enum Use {
    in,     // read only
    out,    // every byte written, none read
    inOut,  // read, or written only in part (what is not written must come back unchanged)
    // read where it is, never staged: the host call only hands it to the adapter (a send
    // from device memory registered for GPUDirect RDMA)
    unstaged,
  };
  const void* p = nullptr;
  size_t bytes = 0;
  Use use = in;
  const char* name = "buffer";  // for errors: "sendbuff", "recvbuff"
};
// Every non-empty buffer is CUDA device memory (what a kernel on any GPU of the host can reach
// through the links' peers; pinned and pageable host memory stay staged): it decides between
// the cuda_ipc kernels and staging, so every rank must answer alike.
bool onDevice(const std::vector<StagedBuffer>& buffers);
// Runs a host call over the staged copies, one pointer per StagedBuffer, in order (null where
// the buffer is null or empty), for `count` elements (see enqueueOnStream).
using StagedBody =
    std::function<void(Communicator&, const std::vector<void*>& staged, size_t count)>;

// A stream-ordered collective that may run as one kernel over cuda_ipc links instead of being
// staged (docs/cuda.md § CUDA IPC): buffers[0] is its sendbuff, buffers[1] its recvbuff.
struct KernelCall {
  Collective coll = Collective::all_reduce;
  DataType type = DataType::f32;
  RedOp op = RedOp::sum;
  size_t count = 0;
  int root = -1;
};

// Communicator::placementProbes.
struct PlacementProbes {
  uint64_t probes = 0;   // probes during calls
  uint64_t changes = 0;  // probes that found the CPUs moved (close to far or back)
  bool farApart = false;
  bool probing = false;  // probes run during calls (every rank has a core; rank 0's setting)
  long setUpNs = 0;      // rank 0's round trip at set-up (0: none measured)
};

// The measured choice (runtime/core/measured_choice.h) so far.
struct MeasuredChoices {
  bool measuring = false;   // it runs (rank 0's GYRE_TUNE, a core per rank, the host window)
  uint64_t trialCalls = 0;  // calls timed as trials
  uint64_t decisions = 0;   // collective and size classes settled by their trials
  uint64_t changes = 0;     // of those, settled on another algorithm than the model's pick
  uint64_t awaiting = 0;    // classes whose trials all ran: their next call decides
};

class Communicator {
 public:
  static std::unique_ptr<Communicator> create(CommConfig config);
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const;
  int size() const;
  // host:port where this rank accepts data connections (for logs and tests).
  std::string dataAddress() const;

  void allReduce(const void* send, void* recv, size_t count, DataType type, RedOp op);
  void allGather(const void* send, void* recv, size_t sendCount, DataType type);
  void reduceScatter(const void* send, void* recv, size_t recvCount, DataType type, RedOp op);
  void broadcast(const void* send, void* recv, size_t count, DataType type, int root);
  // recv is written on root only; other ranks may pass null.
  void reduce(const void* send, void* recv, size_t count, DataType type, RedOp op, int root);
  // count elements per rank; recv (n*count) is used on root only.
  void gather(const void* send, void* recv, size_t count, DataType type, int root);
  // count elements per rank; send (n*count) is read on root only.
  void scatter(const void* send, void* recv, size_t count, DataType type, int root);
  // count elements to and from every rank; send and recv hold n*count and must not overlap.
  void allToAll(const void* send, void* recv, size_t count, DataType type);
  // Rank r contributes recvCounts[r] elements, placed at recv + displs[r] (elements).
  void allGatherV(const void* send, size_t sendCount, void* recv, const size_t* recvCounts,
                  const size_t* displs, DataType type);
  // sendCounts[r] elements from send + sendDispls[r] go to rank r, which places them at its
  // recv + recvDispls[this rank]. Counts must agree pairwise.
  void allToAllV(const void* send, const size_t* sendCounts, const size_t* sendDispls, void* recv,
                 const size_t* recvCounts, const size_t* recvDispls, DataType type);
  void barrier();
  // Point to point; the other rank makes the matching call. Connections to ranks that are not
  // ring neighbours open on first use.
  void send(const void* buf, size_t count, DataType type, int peer);
  void recv(void* buf, size_t count, DataType type, int peer);
  // GPUDirect RDMA: a send whose every slot leaves straight from `buf` without the CPU reading
  // it (device memory), so a slot that cannot fails the call instead of being copied.
  // sendsUnstaged() says beforehand whether [buf, buf + bytes) to `peer` qualifies: a
  // registration (registerBuffer) covers it and the peer is reached over rdma.
  void sendUnstaged(const void* buf, size_t count, DataType type, int peer);
  bool sendsUnstaged(int peer, const void* buf, size_t bytes);

  // Runs the calls of a group: consecutive all-reduces of one type and op become one, and all
  // sends and receives run together (so a rank may send to and receive from the same peers
  // without deadlock), after the collectives.
  void runGroup(const std::vector<GroupOp>& ops);

  // Runs `body` after every call issued before it, on this communicator's worker thread or on
  // a thread that waits for it (`helpable`; runtime/core/call_queue.h); the handle reports
  // when it finished and how. Buffers must outlive the work.
  std::shared_ptr<Work> async(std::function<void(Communicator&)> body, bool helpable = true);

  // Stream-ordered calls (docs/cuda.md): on the CUDA stream `stream` (a cudaStream_t; null is
  // the default stream), copies the buffers `body` reads to pinned host memory, then holds the
  // stream while `body` runs over the copies on the worker thread (in issue order with every
  // other call), then copies what it wrote back; returns at once. Buffers may be device, pinned,
  // managed or host memory; they must stay valid until the stream has passed the call. An error
  // found later poisons the communicator (asyncError) and releases the stream.
  // Elementwise calls (all_reduce, broadcast, reduce) pass `elems` elements of `elemBytes` that
  // every buffer holds: large ones then run as a few host calls on consecutive pieces (body
  // gets each piece's pointers and count) so that copies overlap the host work. Otherwise
  // body runs once with count = elems.
  // `kernel`: the call may run as a kernel over cuda_ipc links where every rank has them
  // (set up, collectively, by the first call that names one) and its buffers are device
  // memory; otherwise it is staged.
  void enqueueOnStream(void* stream, const char* what, std::vector<StagedBuffer> buffers,
                       StagedBody body, size_t elems = 0, size_t elemBytes = 0,
                       std::optional<KernelCall> kernel = std::nullopt);
  // Device memory this communicator holds for cuda_ipc links (0 until set up, or without).
  size_t deviceLinkBytes() const;
  // Pinned host bytes this communicator holds for stream-ordered calls.
  size_t stagingBytes() const;

  // A new communicator of the ranks that passed the same color (>= 0), ordered by key, then
  // by rank here. Every rank calls it; ranks passing a negative color get null. Children meet
  // through the same rendezvous and own their connections: destroying the parent leaves them
  // working.
  // Non-zero `overrides` fields (timeout, nSlots, slotBytes, algorithm, channels) replace the
  // parent's.
  std::unique_ptr<Communicator> split(int color, int key, const CommConfig* overrides = nullptr);
  std::unique_ptr<Communicator> dup() { return split(0, rank()); }
  // A new communicator of this one's ranks but `exclude`, as NCCL's ncclCommShrink: for the
  // ranks that remain after others failed or left. Only they call it, each with the same list
  // and as often as the others; nothing travels over this communicator, which may have failed
  // (they meet through the rendezvous). New ranks keep the old order. `abortFirst`: this
  // communicator is aborted first, so its queued calls fail at once; else they are waited for
  // (each ends by the timeout). `overrides` as for split.
  std::unique_ptr<Communicator> shrink(const std::vector<int>& exclude, bool abortFirst,
                                       const CommConfig* overrides = nullptr);

  // From any thread: waiting calls fail with Code::aborted promptly; the comm is poisoned.
  void abort();
  // As NCCL's ncclCommRevoke: aborts what runs or is queued on this rank, returns once none
  // of it runs, and leaves the communicator to split, shrink and destroy; its collectives fail
  // (Code::aborted) and asyncError() reports nothing from then on. Called again, it returns.
  void revoke();
  bool revoked() const;

  // gyreCommRegister / gyreCommDeregister: pins [p, p + bytes) for the rdma direct path and
  // returns a handle (a no-op registration where there is no rdma). CUDA device memory is
  // registered for GPUDirect RDMA (dma-buf, else peer memory) where the system allows it;
  // where it does not, the registration is a no-op and says why at GYRE_DEBUG=INFO.
  void* registerBuffer(const void* p, size_t bytes);
  void deregisterBuffer(void* handle);
  // Slots sent straight from registered user memory so far (diagnostics and tests).
  uint64_t directSends() const;
  // Collectives run through the host window so far, and those of them by the direct read
  // (diagnostics and tests).
  uint64_t windowCalls() const;
  uint64_t directReads() const;
  // Of the window's calls, those that went there straight, past the general path's layers
  // (a collective of the size the tuner last sent there; diagnostics and tests).
  uint64_t straightWindowCalls() const;
  // Whether the window wakes its sleepers without a fence in every notify (base/wait.h:
  // WakeOrder::sleeperBarrier; diagnostics and tests).
  bool windowSleeperBarriers() const;
  // The placement probes during calls so far, how many found the CPUs moved, and whether the
  // tuner now prices shared memory for CPUs far apart (diagnostics and tests).
  PlacementProbes placementProbes() const;
  // What the measured choice has done (diagnostics and tests), and the algorithm it settled
  // on for `coll` of `bytes` ("" while the class is not settled or not measured).
  MeasuredChoices measuredChoices() const;
  std::string measuredAlgorithm(Collective coll, size_t bytes) const;
  // Ok, or the failure that poisoned the communicator (ok once revoked).
  Status asyncError() const;

  struct Impl;

 private:
  explicit Communicator(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gyre
