#include "base/device_memory.h"

#include <dlfcn.h>
#include <link.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <string>

namespace gyre {

namespace {

// The driver API's ABI (cuda.h), stable since CUDA 7: cuPointerGetAttribute(s) and the values
// of CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_IS_MANAGED and
// CU_MEMORYTYPE_DEVICE.
using PointerGetAttribute = int (*)(void* data, int attribute, unsigned long long pointer);
using PointerGetAttributes = int (*)(unsigned count, int* attributes, void** data,
                                     unsigned long long pointer);
constexpr int kAttributeMemoryType = 2;
constexpr int kAttributeIsManaged = 8;
constexpr unsigned kMemoryTypeDevice = 2;
constexpr int kAttributeDeviceOrdinal = 9;
// cuDeviceGetAttribute, cuMemGetAddressRange_v2 and cuMemGetHandleForAddressRange (CUDA 11.7),
// with CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED and CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD.
using DeviceGetAttribute = int (*)(int* value, int attribute, int device);
using MemGetAddressRange = int (*)(unsigned long long* base, size_t* size,
                                   unsigned long long pointer);
using MemGetHandleForAddressRange = int (*)(void* handle, unsigned long long pointer, size_t size,
                                            int type, unsigned long long flags);
constexpr int kAttributeDmabufSupported = 124;
constexpr int kHandleTypeDmabufFd = 1;

std::atomic<void*> gLibrary{nullptr};
std::atomic<int64_t> gNextLook{0};  // CLOCK_MONOTONIC_COARSE nanoseconds

// Finds the loaded driver library's path (its name varies: libcuda.so.1, libcuda.so, ...).
int findLibcuda(dl_phdr_info* info, size_t, void* path) {
  const char* name = info->dlpi_name;
  if (name && std::strstr(name, "/libcuda.so")) {
    *static_cast<std::string*>(path) = name;
    return 1;  // stop
  }
  return 0;
}

// The driver library once the process has loaded it, else null: until it is found, every call
// looks through the loaded libraries (a few microseconds).
void* driverLibrary() {
  if (void* library = gLibrary.load(std::memory_order_acquire)) return library;
  std::string path;
  dl_iterate_phdr(findLibcuda, &path);
  if (path.empty()) return nullptr;
  // Already loaded, so this only takes a reference to it, which is kept: the driver stays
  // loaded for the process anyway.
  void* library = dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (library) gLibrary.store(library, std::memory_order_release);
  return library;
}

// A driver function once the driver is loaded, looked up once.
template <typename Function>
Function driverFunction(std::atomic<Function>& cached, const char* name) {
  if (Function f = cached.load(std::memory_order_acquire)) return f;
  void* library = driverLibrary();
  if (!library) return nullptr;
  auto f = reinterpret_cast<Function>(dlsym(library, name));
  if (f) cached.store(f, std::memory_order_release);
  return f;
}

PointerGetAttribute driverQuery() {
  static std::atomic<PointerGetAttribute> query{nullptr};
  return driverFunction(query, "cuPointerGetAttribute");
}

}  // namespace

bool cudaDriverLoaded() {
  if (gLibrary.load(std::memory_order_acquire)) return true;
  // The coarse clock costs a few nanoseconds (no hardware read); its ticks of a few ms are
  // plenty for a look every 100 ms.
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  const int64_t now = int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
  int64_t next = gNextLook.load(std::memory_order_relaxed);
  if (now < next || !gNextLook.compare_exchange_strong(next, now + 100'000'000)) return false;
  return driverLibrary() != nullptr;
}

bool findCudaDriver() {
  return driverLibrary() != nullptr;
}

bool isCudaDeviceMemory(const void* p) {
  if (!p) return false;
  static std::atomic<PointerGetAttributes> cached{nullptr};
  PointerGetAttributes query = driverFunction(cached, "cuPointerGetAttributes");
  if (!query) return false;
  // The plural query answers memory CUDA does not know (ordinary host memory) with zeros and
  // success, where the singular one fails: no error for every host buffer a call is given,
  // which compute-sanitizer would report.
  int attributes[] = {kAttributeMemoryType, kAttributeIsManaged};
  unsigned type = 0;
  int managed = 0;
  void* values[] = {&type, &managed};
  if (query(2, attributes, values, reinterpret_cast<unsigned long long>(p)) != 0) return false;
  return type == kMemoryTypeDevice && !managed;
}

int cudaDmabufOf(const void* p, size_t bytes, uint64_t& offset, std::string& whyNot) {
  void* library = driverLibrary();
  PointerGetAttribute query = driverQuery();
  if (!library || !query) {
    whyNot = "the CUDA driver is not loaded";
    return -1;
  }
  auto getAttribute = reinterpret_cast<DeviceGetAttribute>(dlsym(library, "cuDeviceGetAttribute"));
  auto addressRange =
      reinterpret_cast<MemGetAddressRange>(dlsym(library, "cuMemGetAddressRange_v2"));
  auto handleFor = reinterpret_cast<MemGetHandleForAddressRange>(
      dlsym(library, "cuMemGetHandleForAddressRange"));
  if (!getAttribute || !addressRange || !handleFor) {
    whyNot = "the CUDA driver predates dma-buf export (CUDA 11.7)";
    return -1;
  }
  const auto address = reinterpret_cast<unsigned long long>(p);
  int device = -1, supported = 0;
  if (query(&device, kAttributeDeviceOrdinal, address) != 0 ||
      getAttribute(&supported, kAttributeDmabufSupported, device) != 0 || !supported) {
    whyNot = "the GPU or its driver does not export memory as dma-buf";
    return -1;
  }
  // The driver exports whole pages of one allocation: take the allocation, pages rounded out.
  unsigned long long base = 0;
  size_t size = 0;
  if (addressRange(&base, &size, address) != 0 || address + bytes > base + size) {
    whyNot = "the buffer is not inside one CUDA allocation";
    return -1;
  }
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  const unsigned long long first = base / page * page;
  const size_t length = (base + size - first + page - 1) / page * page;
  int fd = -1;
  if (const int r = handleFor(&fd, first, length, kHandleTypeDmabufFd, 0); r != 0 || fd < 0) {
    whyNot =
        "cuMemGetHandleForAddressRange refused the allocation (CUresult " + std::to_string(r) + ")";
    return -1;
  }
  offset = address - first;
  return fd;
}

}  // namespace gyre
