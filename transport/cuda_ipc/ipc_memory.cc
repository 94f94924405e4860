#include "transport/cuda_ipc/ipc_memory.h"

#include <cuda_runtime_api.h>
#include <unistd.h>

#include <cstring>

namespace gyre {

namespace {

constexpr char kMagic[4] = {'G', 'I', 'P', 'C'};

void setWhy(IpcRegionRecord& record, const std::string& why) {
  record.ok = 0;
  std::strncpy(record.why, why.c_str(), sizeof record.why - 1);
}

std::string errorText(const char* step, cudaError_t e) {
  return std::string(step) + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
}

}  // namespace

IpcRegion::~IpcRegion() {
  if (base_) cudaFree(base_);
}

void IpcRegion::create(size_t bytes, uint64_t layout, IpcRegionRecord& record) {
  std::memset(&record, 0, sizeof record);
  std::memcpy(record.magic, kMagic, 4);
  record.pid = int32_t(getpid());
  record.layout = layout;
  record.bytes = bytes;
  int device = 0;
  if (cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) {
    return setWhy(record, errorText("cudaGetDevice", e));
  }
  record.device = device;
  cudaDeviceProp prop{};
  if (cudaError_t e = cudaGetDeviceProperties(&prop, device); e != cudaSuccess) {
    return setWhy(record, errorText("cudaGetDeviceProperties", e));
  }
  std::memcpy(record.uuid, &prop.uuid, sizeof record.uuid);
  void* p = nullptr;
  if (cudaError_t e = cudaMalloc(&p, bytes); e != cudaSuccess) {
    cudaGetLastError();
    return setWhy(record, errorText("cudaMalloc of the link region", e));
  }
  base_ = static_cast<unsigned char*>(p);
  // Zeroed on a private stream that waits for no other (the legacy default stream would wait
  // for every blocking stream, some of which may be waiting for this rank).
  cudaStream_t stream = nullptr;
  cudaError_t e = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  if (e == cudaSuccess) e = cudaMemsetAsync(p, 0, bytes, stream);
  if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
  if (stream) cudaStreamDestroy(stream);
  if (e != cudaSuccess) return setWhy(record, errorText("zeroing the link region", e));
  cudaIpcMemHandle_t handle;
  if (e = cudaIpcGetMemHandle(&handle, p); e != cudaSuccess) {
    cudaGetLastError();
    return setWhy(record, errorText("cudaIpcGetMemHandle", e));
  }
  std::memcpy(record.handle, &handle, sizeof record.handle);
  record.address = reinterpret_cast<uintptr_t>(p);
  record.ok = 1;
}

IpcMapping::~IpcMapping() {
  if (imported_ && base_) cudaIpcCloseMemHandle(base_);
}

std::string IpcMapping::open(const IpcRegionRecord& self, const IpcRegionRecord& peer) {
  if (std::memcmp(peer.magic, kMagic, 4) != 0) return "a malformed region record";
  if (!peer.ok) return std::string("it has no link region (") + peer.why + ")";
  if (peer.layout != self.layout)
    return "it lays its links out differently (GYRE_NSLOTS, "
           "GYRE_CUDA_SLOT_BYTES or GYRE_CUDA_CHANNELS differ)";
  const bool sameDevice = std::memcmp(peer.uuid, self.uuid, sizeof self.uuid) == 0;
  if (!sameDevice) {
    // Its device as this process numbers it, if it sees it at all.
    int count = 0, ordinal = -1;
    if (cudaGetDeviceCount(&count) == cudaSuccess) {
      for (int d = 0; d < count && ordinal < 0; ++d) {
        cudaDeviceProp prop{};
        if (cudaGetDeviceProperties(&prop, d) == cudaSuccess &&
            std::memcmp(&prop.uuid, peer.uuid, sizeof peer.uuid) == 0) {
          ordinal = d;
        }
      }
    }
    if (ordinal < 0) return "its GPU is not visible to this process";
    int can = 0;
    if (cudaDeviceCanAccessPeer(&can, self.device, ordinal) != cudaSuccess || !can) {
      return "GPU " + std::to_string(self.device) + " cannot access GPU " +
             std::to_string(ordinal) + " (no peer-to-peer path)";
    }
    if (peer.pid == self.pid) {
      const cudaError_t e = cudaDeviceEnablePeerAccess(ordinal, 0);
      if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled) {
        cudaGetLastError();
        return errorText("cudaDeviceEnablePeerAccess", e);
      }
      cudaGetLastError();
    }
  }
  if (peer.pid == self.pid) {
    base_ = reinterpret_cast<unsigned char*>(uintptr_t(peer.address));
    return "";
  }
  cudaIpcMemHandle_t handle;
  std::memcpy(&handle, peer.handle, sizeof handle);
  void* p = nullptr;
  if (cudaError_t e = cudaIpcOpenMemHandle(&p, handle, cudaIpcMemLazyEnablePeerAccess);
      e != cudaSuccess) {
    cudaGetLastError();
    return errorText("cudaIpcOpenMemHandle", e);
  }
  base_ = static_cast<unsigned char*>(p);
  imported_ = true;
  return "";
}

}  // namespace gyre
