// gyre as a torch.distributed backend: one gyre communicator per process group, every
// operation issued through gyre's public C API as a gyre group that completes asynchronously.
// Compiles against torch 1.13 (a c10d::ProcessGroup) and torch 2.x (a c10d::Backend).
#pragma once

#include <torch/version.h>

#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
#else
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#endif
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "gyre/gyre.h"

namespace gyre_torch {

// Backend::abort and Backend::shutdown, which destroy_process_group and
// _abort_process_group (and torchft) call: from torch 2.7.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 7)
#define GYRE_TORCH_ABORT 1
#else
#define GYRE_TORCH_ABORT 0
#endif

#if TORCH_VERSION_MAJOR >= 2
using BackendBase = c10d::Backend;
#else
using BackendBase = c10d::ProcessGroup;
#endif

struct Completion;

// A call in flight for the completion thread: a gyre work (host tensors: completion->work), or
// a wait for the CUDA stream to pass the calls (device tensors: waitStream).
struct Pending {
  std::function<gyreResult_t()> waitStream;
  std::shared_ptr<Completion> completion;
};

// The completion thread's queue, completed in order (gyre runs the works in order). Each
// Completion holds it weakly, so that a work's end and a Work's waiter reach it while the
// backend lives. What a waiter settled leaves from the front by that waiter, or by the
// completion thread once the items before it ended.
struct CompletionQueue {
  std::mutex mutex;
  std::condition_variable changed;
  std::deque<Pending> items;
  bool stopping = false;
  // Under `mutex`: takes the items at the front that a Work's waiter settled, for the caller
  // to drop once it released the lock (a tensor may free a Python object).
  std::vector<Pending> takeSettled();
};

// What one gyre work (one torch call, or a coalesced batch of them) finishes: the copies
// back into non-contiguous outputs, the future, and every waiter. Settled once, by the thread
// that first sees its gyre work end: a Work's waiter (which may run the work itself, saving
// the hand-over to the completion thread and back) or the completion thread, which the work's
// end wakes only when no Work waits for it.
struct Completion {
  Completion() = default;
  Completion(const Completion&) = delete;
  Completion& operator=(const Completion&) = delete;
  ~Completion();
  gyreWork_t work = nullptr;             // host calls: their gyre work, freed with this
  std::weak_ptr<CompletionQueue> queue;  // whose thread settles it if no Work waits
  std::mutex mutex;
  std::condition_variable changed;
  std::atomic<bool> claimed{false};  // a thread settles it (set under `mutex`)
  std::atomic<bool> ended{false};    // the gyre work has run (set under `mutex`)
  int waiters = 0;                   // threads in GyreWork::wait, which settle it
  bool done = false;
  std::exception_ptr error;
  std::vector<std::function<void()>> finishers;  // run on success, before `done`
  std::vector<at::Tensor> outputs;               // Work::result() and the future's value
  std::vector<at::Tensor> keepAlive;             // staging tensors gyre reads or writes
  c10::intrusive_ptr<c10::ivalue::Future> future;
  // Calls of a coalesced batch, which end with this one's outcome.
  std::vector<std::shared_ptr<Completion>> followers;
  // CUDA calls, ordered on torch's current stream as ProcessGroupNCCL orders its own: makes the
  // caller's current stream wait for the point after the calls (a CUDA event). Their Work's
  // wait() does that instead of blocking the CPU, and their future completed as they were
  // enqueued; `done` still comes once the stream has passed them, with what gyre found. Null
  // for host calls.
  std::function<void()> orderAfter;
};

class GyreWork : public c10d::Work {
 public:
  explicit GyreWork(std::shared_ptr<Completion> completion) : completion_(std::move(completion)) {}
  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  std::vector<at::Tensor> result() override;
  bool wait(std::chrono::milliseconds timeout) override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;

 private:
  std::shared_ptr<Completion> completion_;
};

// Whether torch's caller waits for the call at once: torch 2's Python API passes async_op in
// the options (asyncOp), and a synchronous call is waited for before control returns to
// Python. Older torch does not say: false.
template <class Options, class = void>
struct HasAsyncOp : std::false_type {};
template <class Options>
struct HasAsyncOp<Options, std::void_t<decltype(std::declval<Options>().asyncOp)>>
    : std::true_type {};
template <class Options>
bool callerWaits(const Options& opts) {
  if constexpr (HasAsyncOp<Options>::value) {
    return !opts.asyncOp;
  } else {
    return false;
  }
}

class GyreBackend : public BackendBase {
 public:
  // Collective over the store: rank 0 makes a gyre unique id and publishes it there.
  GyreBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
              std::chrono::milliseconds timeout);
  ~GyreBackend() override;

  // At interpreter exit (Python's atexit, while threads may still take the GIL): stops the
  // completion thread of every backend alive, after it has completed what is queued. Once the
  // interpreter finalizes, a thread that takes the GIL is ended by pthread_exit, which unwinding
  // through a destructor (a future's Python callback, a tensor's Python object) turns into
  // std::terminate; a backend torch frees only then would let its thread do that. Later calls
  // on a stopped backend complete on the caller's thread. Called with the GIL held.
  static void stopAllAtExit();
  // Makes `backend` one stopAllAtExit stops (create_backend, once it is constructed).
  static void track(const c10::intrusive_ptr<GyreBackend>& backend);

  const std::string getBackendName() const override { return "gyre"; }
#if GYRE_TORCH_ABORT
  // destroy_process_group: waits for the calls issued (gyreCommFinalize), completes their
  // Works, then frees the communicator; later calls raise saying the group was shut down.
  void shutdown() override;
  // _abort_process_group, torchft: calls in flight and later ones fail at once, "aborted"
  // (gyreCommAbort, from any thread, also while a call holds the backend).
  void abort() override;
#endif

  using Work = c10d::Work;
  using Tensors = std::vector<at::Tensor>;
  c10::intrusive_ptr<Work> broadcast(Tensors& tensors, const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<Work> allreduce(Tensors& tensors, const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<Work> allreduce_coalesced(
      Tensors& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<Work> reduce(Tensors& tensors, const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<Work> allgather(std::vector<Tensors>& outputs, Tensors& inputs,
                                     const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<Work> allgather_coalesced(std::vector<Tensors>& outputs, Tensors& inputs,
                                               const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<Work> gather(std::vector<Tensors>& outputs, Tensors& inputs,
                                  const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<Work> scatter(Tensors& outputs, std::vector<Tensors>& inputs,
                                   const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<Work> reduce_scatter(Tensors& outputs, std::vector<Tensors>& inputs,
                                          const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                         std::vector<int64_t>& outputSplits,
                                         std::vector<int64_t>& inputSplits,
                                         const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<Work> alltoall(Tensors& outputs, Tensors& inputs,
                                    const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<Work> send(Tensors& tensors, int dstRank, int tag) override;
  c10::intrusive_ptr<Work> recv(Tensors& tensors, int srcRank, int tag) override;
  c10::intrusive_ptr<Work> barrier(const c10d::BarrierOptions& opts) override;
  // Coalescing (batch_isend_irecv, bucketed collectives): the calls between start and end
  // move together, as one gyre group.
  void startCoalescing() override;
#if TORCH_VERSION_MAJOR >= 2
  c10::intrusive_ptr<Work> endCoalescing() override;
  bool supportsCoalescing() const override {
    return true;
  }
  c10::intrusive_ptr<Work> allgather_into_tensor_coalesced(
      Tensors& outputs, Tensors& inputs, const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<Work> reduce_scatter_tensor_coalesced(
      Tensors& outputs, Tensors& inputs, const c10d::ReduceScatterOptions& opts) override;
#else
  void endCoalescing(std::vector<c10::intrusive_ptr<Work>>& reqs) override;
#endif

 private:
  // A gyre call and what completes it. `call` runs inside a gyre group.
  struct Launch {
    explicit Launch(const char* name) : what(name) {}
    const char* what;
    // The caller waits for the call at once (callerWaits): host calls then run here.
    bool synchronous = false;
    // Issues the gyre calls; the stream is torch's current CUDA stream for CUDA tensors, else
    // null (host memory).
    std::function<gyreResult_t(gyreComm_t, gyreStream_t)> call;
    Tensors outputs;
    Tensors keepAlive;
    std::vector<std::function<void()>> finishers;
  };
  c10::intrusive_ptr<Work> launch(Launch l);
  // Issues a host call as one gyre group: ended asynchronously into `*work` when `work` is
  // given, else run on this thread after what is queued (Launch::synchronous). Argument errors
  // raise at once; else the group's outcome and its error message.
  std::pair<gyreResult_t, std::string> issueGroup(Launch& l, gyreWork_t* work);
  c10::intrusive_ptr<Work> endBatch();
  [[noreturn]] void raise(const char* what, gyreResult_t result) const;
  void completeLoop();
  static void finish(Completion& c, std::exception_ptr error);
  // Waits for a host call's gyre work (running it on this thread unless `passive`), then
  // settles `c` unless another thread did: the copies back, the Work, the future, followers.
  static void settleHost(Completion& c, bool passive);
  friend class GyreWork;  // its wait settles what it waited for
  // Settles `c` with the outcome `result` (`message` says what failed), unless it was settled.
  static void settle(Completion& c, gyreResult_t result, const std::string& message);

  // Null once shut down; read without launchMutex_ by abort().
  std::atomic<gyreComm_t> comm_{nullptr};
  std::chrono::milliseconds timeout_;
  std::mutex launchMutex_;
  bool coalescing_ = false;
  int coalescedDevice_ = -1;  // the CUDA device of the batch's calls, or -1 (host)
  std::vector<std::shared_ptr<Completion>> coalesced_;

  // Queues `p` for the completion thread; once that was stopped, completes it here. A host
  // call's work wakes that thread when it ends unless a Work waits for it (onWorkEnd).
  void enqueue(Pending p);
  // gyreWorkOnEnd's callback (on the thread that ran the work): marks the Completion `arg`
  // ended and, unless a waiter in GyreWork::wait will settle it, wakes the completion thread.
  static void onWorkEnd(void* arg);
  // The completion thread's next item is ready: it waits on a stream, or its work ended.
  bool frontReady() const;
  // Waits for `item` and completes its Work and future (the completion thread, passively, or
  // enqueue once that has stopped).
  void complete(Pending& item, bool passive);
  // Stops the completion thread after what is queued (the destructor, stopAllAtExit).
  void stopCompleter();
  // Torch's current CUDA stream on `device`, or null for the host (device -1).
  static gyreStream_t currentStream(int device);
  // A future for the outputs of a call on `device` (-1: host memory; else a CUDA future,
  // whose waiters' streams wait for the point it was completed at).
  static c10::intrusive_ptr<c10::ivalue::Future> newFuture(int device);
  // Once the calls of `c` (and of its followers) are enqueued on the current stream of
  // `device`: records that point, completes their futures there and lets their Works' waiters
  // order their streams after it (Completion::orderAfter). The Pending returned waits until the
  // stream passed that point, then reports what gyre's stream path found (async error).
  Pending endOnStream(std::shared_ptr<Completion> c, int device);
  // CUDA: issues `l` on the current stream of `device` and queues a wait for it.
  c10::intrusive_ptr<Work> launchOnStream(Launch& l, std::shared_ptr<Completion> completion,
                                          int device);
  // Works in flight, completed in order by completer_.
  const std::shared_ptr<CompletionQueue> queue_ = std::make_shared<CompletionQueue>();
  std::thread completer_;
};

}  // namespace gyre_torch
