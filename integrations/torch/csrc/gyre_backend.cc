#include "gyre_backend.h"

#include <c10/util/Exception.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <string>

namespace gyre_torch {

namespace {

// torch's exception for a failed collective: DistBackendError (a RuntimeError) from torch 2.
std::exception_ptr failure(const std::string& message) {
#if TORCH_VERSION_MAJOR >= 2
  try {
    C10_THROW_ERROR(DistBackendError, message);
  } catch (...) {
    return std::current_exception();
  }
#else
  return std::make_exception_ptr(std::runtime_error(message));
#endif
}

std::string lastError() {
  const char* message = gyreGetLastError(nullptr);
  return message && *message ? message : "no message";
}

}  // namespace

// ---- work --------------------------------------------------------------------------------

bool GyreWork::isCompleted() {
  std::lock_guard lock(completion_->mutex);
  return completion_->done;
}

bool GyreWork::isSuccess() const {
  std::lock_guard lock(completion_->mutex);
  return completion_->done && !completion_->error;
}

std::exception_ptr GyreWork::exception() const {
  std::lock_guard lock(completion_->mutex);
  return completion_->error;
}

std::vector<at::Tensor> GyreWork::result() {
  return completion_->outputs;
}

bool GyreWork::wait(std::chrono::milliseconds timeout) {
  Completion& c = *completion_;
  std::function<void()> orderAfter;
  {
    std::lock_guard lock(c.mutex);
    orderAfter = c.orderAfter;
  }
  if (orderAfter) {
    // CUDA calls, as ProcessGroupNCCL's: the caller's stream waits for them, the CPU does not
    // (nor for the timeout). A failure the stream already showed raises here; a later one fails
    // the communicator's next call (docs/torch.md).
    orderAfter();
    std::lock_guard lock(c.mutex);
    if (c.error) std::rethrow_exception(c.error);
    return true;
  }
  if (c.work && !isCompleted()) {
    {
      // While this thread waits, the work's end leaves settling to it (onWorkEnd).
      std::lock_guard lock(c.mutex);
      ++c.waiters;
    }
    bool settles = true;
    if (timeout == kNoTimeout) {
      GyreBackend::settleHost(c, false);
    } else {
      // Runs the call here if it is still queued, else waits for it up to the timeout; the
      // outcome is the work's, which settleHost reads once it ended.
      gyreWorkWait(c.work, int(std::min<int64_t>(timeout.count(), INT32_MAX)));
      int done = 0;
      settles = gyreWorkTest(c.work, &done) == gyreSuccess && done;
    }
    {
      std::lock_guard lock(c.mutex);
      --c.waiters;
      // Its end came after the test, and saw this waiter: nobody else settles it.
      settles = settles || c.ended;
    }
    TORCH_CHECK(settles, "gyre: work not completed within the wait's ", timeout.count(), " ms");
    GyreBackend::settleHost(c, true);
    // What waiters settled leaves the completion thread's queue here, which that thread (not
    // woken for it) would otherwise hold until the next call: outputs are freed when the
    // caller lets go of them.
    if (auto queue = c.queue.lock()) {
      std::vector<Pending> settled;
      std::lock_guard lock(queue->mutex);
      settled = queue->takeSettled();
    }
  }
  std::unique_lock lock(c.mutex);
  const auto done = [&] { return c.done; };
  if (timeout == kNoTimeout) {
    c.changed.wait(lock, done);
  } else if (!c.changed.wait_for(lock, timeout, done)) {
    TORCH_CHECK(false, "gyre: work not completed within the wait's ", timeout.count(), " ms");
  }
  if (c.error) std::rethrow_exception(c.error);
  return true;
}

c10::intrusive_ptr<c10::ivalue::Future> GyreWork::getFuture() {
  return completion_->future;
}

// ---- backend -----------------------------------------------------------------------------

GyreBackend::GyreBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                         std::chrono::milliseconds timeout)
    : BackendBase(rank, size), timeout_(timeout) {
  // Like ProcessGroupNCCL: rank 0 makes the id, the store (already prefixed per group by
  // torch) carries it to the others.
  gyreUniqueId id;
  const std::string key = "gyre_unique_id";
  if (rank == 0) {
    if (gyreGetUniqueId(&id) != gyreSuccess) raise("init (unique id)", gyreInternalError);
    const auto* bytes = reinterpret_cast<const uint8_t*>(id.internal);
    store->set(key, std::vector<uint8_t>(bytes, bytes + sizeof id.internal));
  } else {
    store->wait({key}, timeout);
    const auto bytes = store->get(key);
    TORCH_CHECK(bytes.size() == sizeof id.internal, "gyre init: malformed unique id in the store");
    std::memcpy(id.internal, bytes.data(), bytes.size());
  }
  gyreConfig_t config = GYRE_CONFIG_INITIALIZER;
  const auto ms = timeout.count();
  config.timeoutMs = ms > 0 && ms < int64_t(INT32_MAX) ? int(ms) : 0;
  gyreComm_t comm = nullptr;
  const gyreResult_t r = gyreCommInitRankConfig(&comm, size, id, rank, &config);
  if (r != gyreSuccess) raise("init", r);
  comm_.store(comm);
  completer_ = std::thread([this] { completeLoop(); });
}

GyreBackend::~GyreBackend() {
  stopCompleter();
  if (gyreComm_t c = comm_.exchange(nullptr)) gyreCommDestroy(c);
}

#if GYRE_TORCH_ABORT
void GyreBackend::shutdown() {
  if (gyreComm_t c = comm_.load()) {
    // The calls' own Works report their errors: finalize only waits for them.
    std::optional<pybind11::gil_scoped_release> noGil;
    if (Py_IsInitialized() && PyGILState_Check()) noGil.emplace();
    gyreCommFinalize(c);
  }
  stopCompleter();  // completes what is queued; not under launchMutex_ (callbacks may launch)
  std::lock_guard lock(launchMutex_);
  if (gyreComm_t c = comm_.exchange(nullptr)) gyreCommDestroy(c);
}

void GyreBackend::abort() {
  // A destroyed handle stays valid to pass (gyreCommDestroy keeps it): no race with shutdown.
  if (gyreComm_t c = comm_.load()) gyreCommAbort(c);
}
#endif

void GyreBackend::stopCompleter() {
  // torch may destroy the group while holding the GIL (destroy_process_group), and the
  // completion thread may need it: dropping its reference to a tensor that Python already let
  // go of frees a Python object. Waiting for that thread with the GIL held would deadlock.
  std::optional<pybind11::gil_scoped_release> noGil;
  if (Py_IsInitialized() && PyGILState_Check()) noGil.emplace();
  {
    std::lock_guard lock(queue_->mutex);
    queue_->stopping = true;
  }
  queue_->changed.notify_all();
  // stopAllAtExit holds a reference while it stops one: never beside the destructor.
  if (completer_.joinable()) completer_.join();
}

namespace {
std::mutex liveMutex;
std::vector<c10::weak_intrusive_ptr<GyreBackend>> live;
}  // namespace

void GyreBackend::track(const c10::intrusive_ptr<GyreBackend>& backend) {
  std::lock_guard lock(liveMutex);
  live.erase(std::remove_if(live.begin(), live.end(), [](const auto& w) { return w.expired(); }),
             live.end());
  live.emplace_back(backend);
}

void GyreBackend::stopAllAtExit() {
  std::vector<c10::intrusive_ptr<GyreBackend>> alive;
  {
    std::lock_guard lock(liveMutex);
    for (auto& w : live) {
      if (auto b = w.lock()) alive.push_back(std::move(b));
    }
    live.clear();
  }
  for (auto& b : alive) b->stopCompleter();
  // The last reference to a backend may be this one: then it goes here, the GIL held, which
  // its destructor expects.
}

void GyreBackend::raise(const char* what, gyreResult_t result) const {
  TORCH_CHECK(false, "gyre ", what, " failed (", gyreGetErrorString(result), "): ", lastError());
}

namespace {

// The CUDA device of a call's tensors, or -1 when they are on the host; mixing is refused.
int deviceOf(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b, const char* what) {
  int device = -2;
  for (const auto* list : {&a, &b}) {
    for (const auto& t : *list) {
      if (!t.defined()) continue;
      const int d = t.is_cuda() ? int(t.get_device()) : -1;
      TORCH_CHECK(device == -2 || device == d, "gyre ", what,
                  ": tensors on different devices (CPU and CUDA, or two GPUs) in one call");
      device = d;
    }
  }
  return device == -2 ? -1 : device;
}

}  // namespace

c10::intrusive_ptr<c10d::Work> GyreBackend::launch(Launch l) {
  auto completion = std::make_shared<Completion>();
  completion->outputs = l.outputs;
  const int device = deviceOf(l.keepAlive, l.outputs, l.what);
  completion->future = newFuture(device);
  std::unique_lock lock(launchMutex_);
  TORCH_CHECK(comm_.load(), "gyre ", l.what,
              ": the process group was shut down (destroy_process_group)");
  if (device >= 0 && !coalescing_) return launchOnStream(l, completion, device);
  completion->keepAlive = std::move(l.keepAlive);
  completion->finishers = std::move(l.finishers);
  if (l.synchronous && !coalescing_) {
    const auto [result, error] = issueGroup(l, nullptr);
    lock.unlock();  // settling runs the future's callbacks, which may issue calls
    settle(*completion, result, error);
    return c10::make_intrusive<GyreWork>(completion);
  }
  if (coalescing_) {
    TORCH_CHECK(coalesced_.empty() || coalescedDevice_ == device, "gyre ", l.what,
                ": a coalesced batch mixes host and CUDA tensors");
    coalescedDevice_ = device;
    const gyreResult_t r = l.call(comm_, currentStream(device));
    if (r != gyreSuccess) raise(l.what, r);
    coalesced_.push_back(completion);
    return c10::make_intrusive<GyreWork>(completion);
  }
  gyreWork_t work = nullptr;
  const auto [result, error] = issueGroup(l, &work);
  if (result != gyreSuccess) {
    TORCH_CHECK(false, "gyre ", l.what, " failed (", gyreGetErrorString(result), "): ", error);
  }
  completion->work = work;
  enqueue({{}, completion});
  return c10::make_intrusive<GyreWork>(completion);
}

std::pair<gyreResult_t, std::string> GyreBackend::issueGroup(Launch& l, gyreWork_t* work) {
  if (gyreGroupStart() != gyreSuccess) raise(l.what, gyreInternalError);
  const gyreResult_t r = l.call(comm_, nullptr);
  const std::string callError = r == gyreSuccess ? "" : lastError();
  // The group ends even when the call failed its checks, and then has nothing to run; ended
  // here, it runs after every call queued before it.
  const gyreResult_t e = work ? gyreGroupEndAsync(work) : gyreGroupEnd();
  const std::string endError = e == gyreSuccess ? "" : lastError();
  if (r != gyreSuccess) {
    if (work && *work) {
      gyreWorkWait(*work, 0);
      gyreWorkFree(*work);
      *work = nullptr;
    }
    TORCH_CHECK(false, "gyre ", l.what, " failed (", gyreGetErrorString(r), "): ", callError);
  }
  return {e, endError};
}

std::vector<Pending> CompletionQueue::takeSettled() {
  std::vector<Pending> settled;
  while (!items.empty() && items.front().completion->claimed) {
    settled.push_back(std::move(items.front()));
    items.pop_front();
  }
  return settled;
}

void GyreBackend::enqueue(Pending p) {
  Completion& c = *p.completion;
  if (c.work) {
    c.queue = queue_;
    const gyreResult_t r = gyreWorkOnEnd(c.work, &GyreBackend::onWorkEnd, &c);
    if (r != gyreSuccess) raise("a call's end callback", r);
  }
  {
    std::lock_guard lock(queue_->mutex);
    if (!queue_->stopping) {
      queue_->items.push_back(std::move(p));
      if (!c.work || c.ended) queue_->changed.notify_all();
      return;
    }
  }
  // Stopped at exit: the caller's thread completes it (it holds the GIL, which the callbacks
  // may take again).
  complete(p, false);
}

void GyreBackend::onWorkEnd(void* arg) {
  Completion& c = *static_cast<Completion*>(arg);
  {
    std::lock_guard lock(c.mutex);
    c.ended = true;
    if (c.waiters > 0) return;
  }
  // The Completion outlives this: it waits for its work to finish, which happens once this
  // returns. The queue is gone only with its backend and completion thread.
  if (auto queue = c.queue.lock()) {
    { std::lock_guard lock(queue->mutex); }  // the completion thread waits or sees `ended`
    queue->changed.notify_all();
  }
}

bool GyreBackend::frontReady() const {
  const Completion& c = *queue_->items.front().completion;
  return !c.work || c.ended || c.claimed;
}

void GyreBackend::completeLoop() {
  while (true) {
    Pending item;
    {
      CompletionQueue& q = *queue_;
      std::unique_lock lock(q.mutex);
      q.changed.wait(lock, [&] { return q.stopping || (!q.items.empty() && frontReady()); });
      if (q.items.empty()) return;
      item = std::move(q.items.front());
      q.items.pop_front();
    }
    if (!item.completion->claimed) complete(item, true);
  }
}

Completion::~Completion() {
  if (work) gyreWorkFree(work);  // ended: whoever settled this waited for it
}

void GyreBackend::complete(Pending& item, bool passive) {
  Completion& c = *item.completion;
  if (c.work) {
    settleHost(c, passive);
  } else if (item.waitStream) {
    const gyreResult_t r = item.waitStream();
    settle(c, r, r == gyreSuccess ? "" : gyreGetLastError(comm_));
  }
}

void GyreBackend::settleHost(Completion& c, bool passive) {
  {
    std::lock_guard lock(c.mutex);
    if (c.claimed) return;
  }
  // Each gyre operation ends by its own deadline (the communicator's timeout), so this wait
  // ends too; slices keep the thread responsive. gyreTimeout means "still running" or "ended
  // with a timeout": gyreWorkTest tells which. A work that finished as the slice ran out is
  // asked again for its own outcome, or its error would read "not finished".
  const auto wait = passive ? gyreWorkWaitPassive : gyreWorkWait;
  gyreResult_t r;
  while ((r = wait(c.work, 1000)) == gyreTimeout) {
    int done = 0;
    if (gyreWorkTest(c.work, &done) != gyreSuccess) break;
    if (done) {
      r = wait(c.work, 0);
      break;
    }
  }
  settle(c, r, r == gyreSuccess ? "" : lastError());
}

void GyreBackend::settle(Completion& c, gyreResult_t result, const std::string& message) {
  {
    std::lock_guard lock(c.mutex);
    if (c.claimed) return;
    c.claimed = true;
  }
  std::exception_ptr error;
  if (result != gyreSuccess) {
    error = failure(std::string("gyre: ") + gyreGetErrorString(result) + ": " + message);
  } else {
    try {
      for (auto& finish : c.finishers) finish();
    } catch (...) {
      error = std::current_exception();
    }
  }
  finish(c, error);
  for (auto& follower : c.followers) finish(*follower, error);
}

void GyreBackend::finish(Completion& c, std::exception_ptr error) {
  bool onStream = false;
  {
    std::lock_guard lock(c.mutex);
    c.error = error;
    c.done = true;
    c.keepAlive.clear();
    onStream = bool(c.orderAfter);
  }
  c.changed.notify_all();
  if (onStream) return;  // its future completed where the calls were enqueued (endOnStream)
  if (error) {
    c.future->setError(error);
  } else {
    c.future->markCompleted(c10::IValue(c.outputs));
  }
}

void GyreBackend::startCoalescing() {
  std::lock_guard lock(launchMutex_);
  TORCH_CHECK(comm_.load(), "gyre: coalescing: the process group was shut down");
  TORCH_CHECK(!coalescing_, "gyre: coalescing started twice");
  if (gyreGroupStart() != gyreSuccess) raise("start coalescing", gyreInternalError);
  coalescing_ = true;
}

#if TORCH_VERSION_MAJOR >= 2
c10::intrusive_ptr<c10d::Work> GyreBackend::endCoalescing() {
  return endBatch();
}
#else
void GyreBackend::endCoalescing(std::vector<c10::intrusive_ptr<Work>>& /*reqs*/) {
  endBatch();
}
#endif

c10::intrusive_ptr<c10d::Work> GyreBackend::endBatch() {
  std::vector<std::shared_ptr<Completion>> parts;
  gyreWork_t work = nullptr;
  gyreResult_t e;
  int device = -1;
  {
    std::lock_guard lock(launchMutex_);
    TORCH_CHECK(coalescing_, "gyre: end coalescing without start");
    coalescing_ = false;
    parts.swap(coalesced_);
    device = coalescedDevice_;
    coalescedDevice_ = -1;
    // Stream-ordered calls are enqueued on their stream by gyreGroupEnd.
    e = device >= 0 ? gyreGroupEnd() : gyreGroupEndAsync(&work);
  }
  if (e != gyreSuccess) raise("a coalesced batch", e);
  // One gyre work finishes every call of the batch: their copies back run with it, and each
  // call's Work and future end with its outcome.
  auto all = std::make_shared<Completion>();
  all->future = newFuture(device);
  for (auto& p : parts) {
    for (auto& f : p->finishers) all->finishers.push_back(std::move(f));
    p->finishers.clear();
  }
  all->followers = std::move(parts);
  all->work = work;
  if (device >= 0) {
    // Copies back follow the calls on the stream; the wait is for the stream to pass them.
    for (auto& f : all->finishers) f();
    all->finishers.clear();
    enqueue(endOnStream(all, device));
  } else {
    enqueue({{}, all});
  }
  return c10::make_intrusive<GyreWork>(all);
}

}  // namespace gyre_torch
