#include "runtime/cuda/device_alloc.h"

#include "base/device_memory.h"
#include "base/status.h"

#ifdef GYRE_HAVE_CUDA
#include "runtime/cuda/cuda_staging.h"
#endif

namespace gyre {

#ifdef GYRE_HAVE_CUDA

int currentCudaDevice() {
  if (!findCudaDriver()) return -1;
  int device = -1;
  if (cudaGetDevice(&device) != cudaSuccess) {
    cudaGetLastError();  // not sticky: leave no error behind for the application's next call
    return -1;
  }
  return device;
}

void* allocateDeviceMemory(size_t bytes, const std::string& who) {
  void* p = nullptr;
  if (cudaError_t e = cudaMalloc(&p, bytes); e != cudaSuccess) {
    cudaGetLastError();
    fail(Code::system_error,
         who + ": cudaMalloc of " + std::to_string(bytes) + " bytes failed: " + cudaText(e));
  }
  return p;
}

void freeDeviceMemory(void* p, const std::string& who) {
  if (!p) return;
  if (cudaError_t e = cudaFree(p); e != cudaSuccess) {
    cudaGetLastError();
    fail(e == cudaErrorInvalidValue ? Code::invalid_argument : Code::system_error,
         who + ": cudaFree failed: " + cudaText(e));
  }
}

#else  // no CUDA in this build

namespace {
const char* const kNoCuda =
    "this build of gyre has no CUDA support (GYRE_WITH_CUDA=OFF, or no nvcc at build time)";
}

int currentCudaDevice() {
  return -1;
}

void* allocateDeviceMemory(size_t, const std::string& who) {
  fail(Code::invalid_usage, who + ": " + kNoCuda);
}

void freeDeviceMemory(void* p, const std::string& who) {
  if (p) fail(Code::invalid_usage, who + ": " + kNoCuda);
}

#endif

}  // namespace gyre
