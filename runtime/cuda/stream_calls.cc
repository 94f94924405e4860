// Stream-ordered calls on CUDA memory, staged through pinned host memory (docs/cuda.md).
// On the caller's stream: copies in, an event, a wait for the host, copies out. On the worker
// thread, in issue order: wait for the event, run the host call over the staging, release the
// stream. A failure releases every waiting stream and poisons the communicator, so a stream
// never waits on a call that will not come.
#include <algorithm>
#include <atomic>

#include "base/device_memory.h"
#include "base/log.h"
#include "runtime/core/communicator_impl.h"
#include "runtime/cuda/kernel_plan.h"
#include "runtime/cuda/staging_plan.h"

#ifdef GYRE_HAVE_CUDA
#include "runtime/cuda/cuda_staging.h"
#include "runtime/cuda/device_links.h"
#endif

namespace gyre {

namespace {

// Argument errors every build reports alike, before any CUDA work.
void checkStaged(const std::string& call, const std::vector<StagedBuffer>& buffers, size_t elems) {
  for (const auto& b : buffers) {
    if (b.bytes && !b.p) fail(Code::invalid_argument, call + ": " + b.name + " is null");
  }
  if (elems && !piecewise(buffers)) {
    fail(Code::invalid_argument, call + ": sendbuff and recvbuff overlap without being in place");
  }
}

}  // namespace

// isCudaDeviceMemory looks for the driver at once, never held back by an earlier look that
// found none, so every rank answers alike.
bool onDevice(const std::vector<StagedBuffer>& buffers) {
  for (const auto& b : buffers)
    if (b.p && b.bytes && !isCudaDeviceMemory(b.p)) return false;
  return true;
}

#ifdef GYRE_HAVE_CUDA

namespace {

// Raises a release word, never lowering it (the worker and a failing enqueue may both write).
void raiseTo(uint64_t& word, uint64_t value) {
  std::atomic_ref<uint64_t> a(word);
  uint64_t seen = a.load(std::memory_order_relaxed);
  while (seen < value && !a.compare_exchange_weak(seen, value, std::memory_order_release)) {
  }
}

Status awaitEvent(cudaEvent_t event, const Communicator::Impl& d, const std::string& what) {
  const cudaError_t e = pollEvent(event, Clock::now() + d.config.timeout, &d.abortFlag);
  if (e == cudaSuccess) return {};
  if (e != cudaErrorNotReady) {
    return {Code::system_error,
            what + ": copying the inputs to pinned memory failed: " + cudaText(e)};
  }
  if (d.abortFlag.load()) return {Code::aborted, what + ": aborted"};
  return {Code::timeout, what + ": the CUDA stream did not reach the call within " +
                             std::to_string(d.config.timeout.count()) + " ms"};
}

}  // namespace

void Communicator::Impl::pollDeviceFailure() {
  if (!deviceLinks) return;
  if (Status s = deviceLinks->failure(who()); !s.ok()) setPoison(s);
}

void Communicator::Impl::raiseDeviceAbort() {
  if (deviceLinks) deviceLinks->raiseAbort();
}

size_t Communicator::deviceLinkBytes() const {
  return impl_->deviceLinks ? impl_->deviceLinks->deviceBytes() : 0;
}

void Communicator::enqueueOnStream(void* streamHandle, const char* what,
                                   std::vector<StagedBuffer> buffers, StagedBody body, size_t elems,
                                   size_t elemBytes, std::optional<KernelCall> kernel) {
  auto& d = *impl_;
  const std::string call = d.who() + ": " + what;
  checkStaged(call, buffers, elems);
  d.pollDeviceFailure();
  if (Status s = d.poisoned(); !s.ok()) throw Failure(s);
  const auto stream = static_cast<cudaStream_t>(streamHandle);
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (cudaError_t e = cudaStreamIsCapturing(stream, &capture); e != cudaSuccess) {
    fail(Code::invalid_argument, call + ": the stream is not usable: " + cudaText(e));
  }

  // Every rank decides alike: same call, same configuration, links agreed on by all.
  if (kernel && d.config.cudaIpc && d.config.transport == "auto" && d.config.nranks > 1 &&
      deviceCallSupported(kernel->coll)) {
    if (!d.deviceLinksTried) {
      if (capture != cudaStreamCaptureStatusNone) {
        fail(Code::invalid_usage, call + ": the first stream-ordered collective of a " +
                                      "communicator sets up its cuda_ipc links with the host " +
                                      "and cannot be captured into a CUDA graph; run one first, " +
                                      "outside the capture");
      }
      d.deviceLinksTried = true;
      d.deviceLinks = DeviceLinks::setUp(*this, d.peers, d.config);
    }
    // Other calls take the staged path, whose host call reports what is wrong with them.
    std::optional<DeviceCall> dc;
    if (d.deviceLinks && onDevice(buffers)) {
      dc = planKernelCall(*kernel, buffers, d.config.rank,
                          {d.config.nSlots, d.config.cudaSlotBytes, d.deviceLinks->channels()});
    }
    if (dc) {
      if (Status s =
              d.deviceLinks->launch(*dc, stream, call, capture != cudaStreamCaptureStatusNone);
          !s.ok()) {
        d.setPoison(s);
        throw Failure(s);
      }
      return;
    }
  }

  if (capture != cudaStreamCaptureStatusNone) {
    fail(Code::invalid_usage, call + ": the stream is being captured into a CUDA graph, which " +
                                  "gyre's staged calls cannot join (they need the host at run "
                                  "time); run the collective outside the capture");
  }

  const StagingPlan plan = planStaging(buffers, elems, elemBytes);
  const size_t pieces = plan.pieces, pieceElems = plan.pieceElems;

  std::lock_guard lock(d.stagingMutex);  // tickets are queued in the order they are drawn
  if (!d.staging) d.staging = std::make_shared<CudaStaging>(d.who());
  CudaStaging& staging = *d.staging;
  if (const uint64_t late = std::atomic_ref(staging.host()->timedOut).load(); late != 0) {
    d.setPoison({Code::timeout, call + ": an earlier stream-ordered call (ticket " +
                                    std::to_string(late) + ") was given up by its stream"});
    throw Failure(d.poisoned());
  }
  CudaStaging::Block& block = staging.acquire(plan.bytes, d.config.timeout);
  std::vector<void*> staged;
  for (size_t i = 0; i < buffers.size(); ++i) {
    const size_t at = plan.bufferOffsets[i];
    staged.push_back(at == StagingPlan::kNone ? const_cast<void*>(buffers[i].p) : block.data + at);
  }

  std::vector<cudaEvent_t> inputsCopied(pieces, nullptr);
  // Any CUDA failure from here on leaves the stream in an unknown state: poison, and release
  // whatever waits.
  auto check = [&](cudaError_t e, const char* step) {
    if (e == cudaSuccess) return;
    for (auto event : inputsCopied)
      if (event) cudaEventDestroy(event);
    std::atomic_ref(staging.host()->failed).store(1, std::memory_order_release);
    raiseTo(staging.host()->released, CudaStaging::kReleaseAll);
    d.setPoison({Code::system_error, call + ": " + step + " failed: " + cudaText(e)});
    throw Failure(d.poisoned());
  };
  for (size_t k = 0; k < pieces; ++k) {
    check(cudaEventCreateWithFlags(&inputsCopied[k], cudaEventDisableTiming), "creating an event");
    for (const auto& r : plan.regions) {
      const auto [lo, hi] = plan.pieceBytes(k, r.hi - r.lo);
      if (!r.copyIn || lo == hi) continue;
      check(cudaMemcpyAsync(block.data + r.offset + lo, reinterpret_cast<void*>(r.lo + lo), hi - lo,
                            cudaMemcpyDefault, stream),
            "copying a buffer to pinned memory");
    }
    check(cudaEventRecord(inputsCopied[k], stream), "recording an event");
  }
  // The stream's own deadline is a backstop: the worker releases it, or fails it, first.
  const uint64_t limitNs =
      uint64_t(std::chrono::nanoseconds(d.config.timeout).count()) * 2 + 10'000'000'000ull;
  const uint64_t firstTicket = staging.nextTicket();
  for (size_t k = 1; k < pieces; ++k) staging.nextTicket();
  for (size_t k = 0; k < pieces; ++k) {
    check(staging.enqueueWait(stream, firstTicket + k, limitNs), "the stream's wait");
    for (const auto& r : plan.regions) {
      const auto [lo, hi] = plan.pieceBytes(k, r.hi - r.lo);
      if (!r.copyOut || lo == hi) continue;
      check(cudaMemcpyAsync(reinterpret_cast<void*>(r.lo + lo), block.data + r.offset + lo, hi - lo,
                            cudaMemcpyDefault, stream),
            "copying a result from pinned memory");
    }
  }
  check(cudaEventRecord(block.released, stream), "recording an event");
  block.used = true;

  auto hostPart = [&d, call, firstTicket, inputsCopied, staged = std::move(staged),
                   body = std::move(body), signal = staging.host(), pieces, pieceElems, elems,
                   elemBytes](Communicator& c) {
    Status s;
    size_t k = 0;
    for (; k < pieces; ++k) {
      s = awaitEvent(inputsCopied[k], d, call);
      if (!s.ok()) break;
      std::vector<void*> piece = staged;
      const size_t first = k * pieceElems;
      if (pieces > 1) {
        for (auto& p : piece)
          if (p) p = static_cast<std::byte*>(p) + first * elemBytes;
      }
      try {
        body(c, piece, pieces > 1 ? std::min(pieceElems, elems - first) : elems);
      } catch (const Failure& f) {
        s = f.status();
      } catch (const std::exception& e) {
        s = {Code::internal, call + ": " + e.what()};
      }
      if (!s.ok()) break;
      raiseTo(signal->released, firstTicket + k);
    }
    for (auto event : inputsCopied) cudaEventDestroy(event);
    if (!s.ok()) {
      d.setPoison(s);
      std::atomic_ref(signal->failed).store(firstTicket + k, std::memory_order_release);
      // Every stream waiting on this communicator goes on (the kernel looks at `failed`, the
      // stream operation only at `released`).
      raiseTo(signal->released, CudaStaging::kReleaseAll);
      throw Failure(s);
    }
  };
  // It waits for CUDA events: the worker's job, never a waiting caller's.
  async(std::move(hostPart), /*helpable=*/false);
}

size_t Communicator::stagingBytes() const {
  std::lock_guard lock(impl_->stagingMutex);
  return impl_->staging ? impl_->staging->pinnedBytes() : 0;
}

#else  // no CUDA in this build

void Communicator::Impl::pollDeviceFailure() {}
void Communicator::Impl::raiseDeviceAbort() {}
size_t Communicator::deviceLinkBytes() const {
  return 0;
}

void Communicator::enqueueOnStream(void*, const char* what, std::vector<StagedBuffer> buffers,
                                   StagedBody, size_t elems, size_t, std::optional<KernelCall>) {
  const std::string call = impl_->who() + ": " + what;
  checkStaged(call, buffers, elems);
  fail(Code::invalid_argument, call + ": a CUDA stream or CUDA buffers were given, but this " +
                                   "build of gyre has no CUDA support (GYRE_WITH_CUDA=OFF, or " +
                                   "no nvcc at build time)");
}

size_t Communicator::stagingBytes() const {
  return 0;
}

#endif

}  // namespace gyre
