// The look for the CUDA driver (base/device_memory): a throttled look answers from its last
// look for 100 ms, so a driver loaded since goes unseen; findCudaDriver looks at once. Runs in
// a process of its own, since it loads the CUDA toolkit's stub libcuda (no GPU or driver needed),
// and exits 77 (skipped) where the toolkit's stub is not installed. With the stub as the driver,
// gyreMemAlloc fails as it does on a machine without a GPU.
#define DOCTEST_CONFIG_IMPLEMENT
#include <dlfcn.h>
#include <doctest/doctest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "base/device_memory.h"
#include "gyre/gyre.h"

namespace {

std::string stubPath() {
  const char* env = std::getenv("GYRE_TEST_LIBCUDA_STUB");
  if (env && *env) return env;
  for (const char* p : {"/usr/local/cuda/lib64/stubs/libcuda.so",
                        "/usr/local/cuda/targets/x86_64-linux/lib/stubs/libcuda.so"}) {
    if (access(p, R_OK) == 0) return p;
  }
  return "";
}

}  // namespace

TEST_CASE("a driver loaded after a look: the throttled look misses it, findCudaDriver does not") {
  using Clock = std::chrono::steady_clock;
  REQUIRE_FALSE(gyre::cudaDriverLoaded());  // a look, which holds the next one back 100 ms
  const auto looked = Clock::now();
  void* stub = dlopen(stubPath().c_str(), RTLD_NOW | RTLD_GLOBAL);
  REQUIRE_MESSAGE(stub != nullptr, dlerror());
  const bool stale = gyre::cudaDriverLoaded();
  // Only meaningful while the throttle still holds (a slow machine may take longer to load it).
  if (Clock::now() - looked < std::chrono::milliseconds(50)) CHECK_FALSE(stale);
  CHECK(gyre::findCudaDriver());
  CHECK(gyre::cudaDriverLoaded());  // found once, answered from then on
  int host = 0;
  CHECK_FALSE(gyre::isCudaDeviceMemory(&host));  // the stub fails every query: not device memory
}

TEST_CASE("gyreMemAlloc with no usable driver: refused, CUDA's error named, nothing returned") {
  REQUIRE(dlopen(stubPath().c_str(), RTLD_NOW | RTLD_GLOBAL) != nullptr);
  void* p = &p;
  const gyreResult_t r = gyreMemAlloc(&p, 1 << 20);
  const std::string message = gyreGetLastError(nullptr);
  CHECK(p == nullptr);
#ifdef GYRE_HAVE_CUDA
  CHECK(r == gyreSystemError);
  CHECK_MESSAGE(message.find("gyreMemAlloc: cudaMalloc of 1048576 bytes failed: cudaError") == 0,
                message);
#else
  CHECK(r == gyreInvalidUsage);
  CHECK_MESSAGE(message.find("gyreMemAlloc: this build of gyre has no CUDA support") == 0, message);
#endif
}

int main(int argc, char** argv) {
  if (stubPath().empty()) {
    std::printf("SKIP: no CUDA toolkit stub libcuda.so (set GYRE_TEST_LIBCUDA_STUB)\n");
    return 77;
  }
  if (gyre::cudaDriverLoaded()) {
    std::printf("SKIP: a CUDA driver is already loaded in this process\n");
    return 77;
  }
  doctest::Context context(argc, argv);
  return context.run();
}
