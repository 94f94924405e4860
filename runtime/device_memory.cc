#include "runtime/device_memory.h"

#include <dlfcn.h>
#include <link.h>
#include <time.h>

#include <atomic>
#include <cstring>
#include <string>

namespace gyre {

namespace {

// The driver API's ABI (cuda.h), stable since CUDA 4: cuPointerGetAttribute and the values
// of CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_IS_MANAGED and
// CU_MEMORYTYPE_DEVICE.
using PointerGetAttribute = int (*)(void* data, int attribute, unsigned long long pointer);
constexpr int kAttributeMemoryType = 2;
constexpr int kAttributeIsManaged = 8;
constexpr unsigned kMemoryTypeDevice = 2;

std::atomic<PointerGetAttribute> gQuery{nullptr};
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

PointerGetAttribute driverQuery() {
  if (PointerGetAttribute query = gQuery.load(std::memory_order_acquire)) return query;
  // The coarse clock costs a few nanoseconds (no hardware read); its ticks of a few ms are
  // plenty for a look every 100 ms.
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  const int64_t now = int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
  int64_t next = gNextLook.load(std::memory_order_relaxed);
  if (now < next || !gNextLook.compare_exchange_strong(next, now + 100'000'000)) return nullptr;
  std::string path;
  dl_iterate_phdr(findLibcuda, &path);
  if (path.empty()) return nullptr;
  // Already loaded, so this only takes a reference to it.
  void* library = dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (!library) return nullptr;
  auto query = reinterpret_cast<PointerGetAttribute>(dlsym(library, "cuPointerGetAttribute"));
  if (query) gQuery.store(query, std::memory_order_release);
  return query;  // the reference is kept: the driver stays loaded for the process anyway
}

}  // namespace

bool isCudaDeviceMemory(const void* p) {
  if (!p) return false;
  PointerGetAttribute query = driverQuery();
  if (!query) return false;
  const auto address = reinterpret_cast<unsigned long long>(p);
  unsigned type = 0;
  // An error (CUDA_ERROR_INVALID_VALUE) means memory CUDA does not know: ordinary host memory.
  if (query(&type, kAttributeMemoryType, address) != 0 || type != kMemoryTypeDevice) return false;
  unsigned managed = 0;
  return !(query(&managed, kAttributeIsManaged, address) == 0 && managed);
}

}  // namespace gyre
