// CUDA tensors: gyre's stream-ordered calls on torch's current stream, as ProcessGroupNCCL
// orders its collectives. Compiled where torch has CUDA (GYRE_TORCH_CUDA); elsewhere CUDA
// tensors are refused before they get here.
#include <c10/util/Exception.h>

#include "gyre_backend.h"

#ifdef GYRE_TORCH_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace gyre_torch {

#ifdef GYRE_TORCH_CUDA

gyreStream_t GyreBackend::currentStream(int device) {
  if (device < 0) return nullptr;
  return static_cast<gyreStream_t>(
      c10::cuda::getCurrentCUDAStream(c10::DeviceIndex(device)).stream());
}

c10::intrusive_ptr<c10::ivalue::Future> GyreBackend::newFuture(int device) {
  auto type = c10::ListType::create(c10::TensorType::get());
  if (device < 0) return c10::make_intrusive<c10::ivalue::Future>(type);
  return c10::make_intrusive<c10::ivalue::Future>(
      type, std::vector<c10::Device>{c10::Device(c10::kCUDA, c10::DeviceIndex(device))});
}

Pending GyreBackend::endOnStream(std::shared_ptr<Completion> c, int device) {
  auto end = std::make_shared<at::cuda::CUDAEvent>();
  end->record(c10::cuda::getCurrentCUDAStream(c10::DeviceIndex(device)));
  auto orderAfter = [end, device] {
    end->block(c10::cuda::getCurrentCUDAStream(c10::DeviceIndex(device)));
  };
  // Completed on the stream the calls are on: a future's CUDA waiters wait for this point.
  auto enqueued = [&](Completion& part) {
    {
      std::lock_guard lock(part.mutex);
      part.orderAfter = orderAfter;
    }
    part.future->markCompleted(c10::IValue(part.outputs));
  };
  enqueued(*c);
  for (auto& follower : c->followers) enqueued(*follower);
  gyreComm_t comm = comm_;
  auto waitStream = [end, comm] {
    end->synchronize();
    gyreResult_t asyncError = gyreSuccess;
    const gyreResult_t r = gyreCommGetAsyncError(comm, &asyncError);
    return r != gyreSuccess ? r : asyncError;
  };
  return {waitStream, std::move(c)};
}

c10::intrusive_ptr<c10d::Work> GyreBackend::launchOnStream(Launch& l,
                                                           std::shared_ptr<Completion> completion,
                                                           int device) {
  c10::cuda::CUDAGuard guard{c10::DeviceIndex(device)};
  if (gyreGroupStart() != gyreSuccess) raise(l.what, gyreInternalError);
  const gyreResult_t r = l.call(comm_, currentStream(device));
  const std::string callError = r == gyreSuccess ? "" : gyreGetLastError(nullptr);
  const gyreResult_t e = gyreGroupEnd();  // enqueues the calls on the stream
  TORCH_CHECK(r == gyreSuccess, "gyre ", l.what, " failed (", gyreGetErrorString(r),
              "): ", callError);
  if (e != gyreSuccess) raise(l.what, e);
  // Copies back into the caller's tensors follow on the same stream.
  for (auto& finish : l.finishers) finish();
  completion->keepAlive = std::move(l.keepAlive);  // until the stream has passed the calls
  enqueue(endOnStream(completion, device));
  return c10::make_intrusive<GyreWork>(completion);
}

#else

gyreStream_t GyreBackend::currentStream(int device) {
  TORCH_CHECK(device < 0, "gyre: this build has no CUDA");
  return nullptr;
}

c10::intrusive_ptr<c10::ivalue::Future> GyreBackend::newFuture(int device) {
  TORCH_CHECK(device < 0, "gyre: this build has no CUDA");
  return c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()));
}

Pending GyreBackend::endOnStream(std::shared_ptr<Completion>, int) {
  TORCH_CHECK(false, "gyre: this build has no CUDA");
}

c10::intrusive_ptr<c10d::Work> GyreBackend::launchOnStream(Launch& l, std::shared_ptr<Completion>,
                                                           int) {
  TORCH_CHECK(false, "gyre ", l.what, ": this build has no CUDA");
}

#endif

}  // namespace gyre_torch
