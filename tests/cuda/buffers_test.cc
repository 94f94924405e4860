// What collectives do with memory from CUDA: device memory (cudaMalloc) is refused with a
// clear error before anything moves, and the communicator stays usable; pinned host memory
// (cudaMallocHost) and managed memory (cudaMallocManaged) are host-addressable and give
// exact results. Without a CUDA device the program exits 77 (ctest: skipped).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cuda_runtime_api.h>

#include <cstdio>
#include <vector>

#include "runtime/communicator.h"
#include "tests/cuda/device.h"
#include "tests/harness/checks.h"
#include "tests/harness/thread_ranks.h"

using namespace gyre;
using namespace std::chrono_literals;

using test::contains;

TEST_CASE("device memory is refused, naming the buffer; pinned and managed memory work") {
  test::ThreadJob job(2, test::tinySlots(20000ms), "cuda-buffers");
  const size_t count = 1001;
  float* device[2] = {};
  float* pinned[2] = {};
  float* managed[2] = {};
  for (int r = 0; r < 2; ++r) {
    REQUIRE(cudaMalloc(reinterpret_cast<void**>(&device[r]), count * 4) == cudaSuccess);
    REQUIRE(cudaMallocHost(reinterpret_cast<void**>(&pinned[r]), count * 4) == cudaSuccess);
    REQUIRE(cudaMallocManaged(reinterpret_cast<void**>(&managed[r]), count * 4) == cudaSuccess);
  }
  std::vector<Status> refused(2);
  job.run([&](Communicator& c, int r) {
    try {
      c.allReduce(device[r], device[r], count, DataType::f32, RedOp::sum);
    } catch (const Failure& f) {
      refused[r] = f.status();
    }
  });
  for (int r = 0; r < 2; ++r) {
    CAPTURE(refused[r].message);
    CHECK(refused[r].code == Code::invalid_argument);
    CHECK(contains(refused[r].message, "sendbuff is CUDA device memory"));
  }
  for (float** buffers : {pinned, managed}) {
    job.run([&](Communicator& c, int r) {
      for (size_t i = 0; i < count; ++i) buffers[r][i] = float(r + 1) * float(i % 100);
      c.allReduce(buffers[r], buffers[r], count, DataType::f32, RedOp::sum);
      for (size_t i = 0; i < count; ++i) REQUIRE(buffers[r][i] == 3.0f * float(i % 100));
    });
  }
  for (int r = 0; r < 2; ++r) {
    cudaFree(device[r]);
    cudaFreeHost(pinned[r]);
    cudaFree(managed[r]);
  }
}

int main(int argc, char** argv) {
  gyre::test::exitUnlessCudaDevice();
  doctest::Context context(argc, argv);
  return context.run();
}
