// The NCCL-shaped device calls that need no GPU to be checked: gyreCommCuDevice's answers (the
// devices gyreCommInitAll was given, a child's parent's, none where the process has no CUDA
// driver) and the argument checks of gyreMemAlloc and gyreMemFree, which touch no CUDA. Their
// device paths: tests/cuda/buffers_test.cc; a failing allocation: tests/unit/driver_look_test.cc.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "base/device_memory.h"
#include "gyre/gyre.h"
#include "tests/harness/c_api_ranks.h"

namespace {

std::string lastError() {
  return gyreGetLastError(nullptr);
}

}  // namespace

TEST_CASE("gyreCommCuDevice: gyreCommInitAll's devlist, a child's parent's, refused arguments") {
  const int n = 2;
  std::vector<gyreComm_t> comms(n, nullptr);
  const int devices[n] = {3, 5};
  OK(gyreCommInitAll(comms.data(), n, devices));
  gyre::test::onThreads(n, [&](int r) {
    int device = -1;
    OK(gyreCommCuDevice(comms[r], &device));
    CHECK(device == devices[r]);
    gyreComm_t dup = nullptr, split = nullptr;
    OK(gyreCommDup(comms[r], &dup));
    OK(gyreCommSplit(comms[r], 0, r, &split, nullptr));
    for (gyreComm_t child : {dup, split}) {
      device = -1;
      OK(gyreCommCuDevice(child, &device));
      CHECK(device == devices[r]);
      OK(gyreCommDestroy(child));
    }
  });
  CHECK(gyreCommCuDevice(comms[0], nullptr) == gyreInvalidArgument);
  CHECK(lastError().find("device is null") != std::string::npos);
  for (auto c : comms) OK(gyreCommDestroy(c));
  int device = -1;
  CHECK(gyreCommCuDevice(comms[0], &device) == gyreInvalidUsage);  // destroyed
  CHECK(device == -1);

  // Without devlist, NCCL's devices 0 .. ndev - 1.
  OK(gyreCommInitAll(comms.data(), n, nullptr));
  for (int r = 0; r < n; ++r) {
    OK(gyreCommCuDevice(comms[r], &device));
    CHECK(device == r);
    OK(gyreCommDestroy(comms[r]));
  }
}

TEST_CASE("gyreCommCuDevice: a communicator made without the CUDA driver has no device") {
  if (gyre::findCudaDriver()) return;  // this process went to CUDA: the device is whatever it chose
  auto comms = gyre::test::initComms(1);
  int device = -7;
  CHECK(gyreCommCuDevice(comms[0], &device) == gyreInvalidUsage);
  CHECK(device == -7);
  CHECK(lastError().find("rank 0: gyreCommCuDevice: the communicator has no CUDA device") !=
        std::string::npos);
  OK(gyreCommDestroy(comms[0]));
  CHECK_FALSE(gyre::findCudaDriver());  // asking loaded nothing
}

TEST_CASE("gyreMemAlloc and gyreMemFree: arguments refused before CUDA is touched") {
  const bool loaded = gyre::findCudaDriver();
  CHECK(gyreMemAlloc(nullptr, 64) == gyreInvalidArgument);
  CHECK(lastError().find("gyreMemAlloc: ptr is null") != std::string::npos);
  void* p = &p;
  CHECK(gyreMemAlloc(&p, 0) == gyreInvalidArgument);
  CHECK(lastError().find("gyreMemAlloc: size is 0") != std::string::npos);
  CHECK(p == nullptr);
  OK(gyreMemFree(nullptr));
  CHECK(gyre::findCudaDriver() == loaded);
}
