// What the CUDA buffer tests share (buffers_test.cc, failures_test.cc): device buffers poisoned
// when made, ranks as threads each with a communicator and a non-blocking stream, inputs and
// expected outputs of the seeded data, and byte-exact checks.
#pragma once

#include <doctest/doctest.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "gyre/gyre.h"
#include "runtime/api/api_internal.h"
#include "runtime/core/communicator.h"
#include "tests/cuda/device.h"
#include "tests/harness/reference.h"
#include "tests/harness/thread_ranks.h"

namespace gyre::test::gpu {

using gyre::DataType;
using gyre::RedOp;

inline uint64_t gSeed = 0;  // main sets it
constexpr unsigned char kPoison = 0xA5;

#define OK(call) REQUIRE_MESSAGE((call) == gyreSuccess, std::string(gyreGetLastError(nullptr)))
#define CUDA_OK(call) REQUIRE_MESSAGE((call) == cudaSuccess, #call)

// Device buffers whose rank is done with them: freed only once every rank's thread is (Job::run),
// since cudaFree synchronizes the whole device. In one process that waits for every other
// rank's stream, which may wait for a host flag that rank's worker sets only once the driver
// lock cudaFree holds is free (a reduce's non-root returns before its root, docs/cuda.md).
inline std::mutex gUnfreedMutex;
inline std::vector<void*> gUnfreed;
inline void freeUnfreed() {
  std::lock_guard lock(gUnfreedMutex);
  for (void* p : gUnfreed) cudaFree(p);
  gUnfreed.clear();
}

// A device buffer, poisoned when made. Its copies synchronize the legacy default stream only:
// a device-wide synchronization in one rank's thread would wait for another rank's stream,
// which may be waiting for this rank's next call (docs/cuda.md).
struct DeviceBuffer {
  void* p = nullptr;
  size_t bytes = 0;
  explicit DeviceBuffer(size_t b) : bytes(b) {
    CUDA_OK(cudaMalloc(&p, std::max<size_t>(bytes, 1)));
    poison();
  }
  ~DeviceBuffer() {
    std::lock_guard lock(gUnfreedMutex);
    gUnfreed.push_back(p);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void poison() {
    CUDA_OK(cudaMemset(p, kPoison, bytes));
    CUDA_OK(cudaStreamSynchronize(nullptr));
  }
  void upload(const std::vector<unsigned char>& host) {
    REQUIRE(host.size() <= bytes);
    CUDA_OK(cudaMemcpy(p, host.data(), host.size(), cudaMemcpyHostToDevice));
    CUDA_OK(cudaStreamSynchronize(nullptr));
  }
  std::vector<unsigned char> download() const {
    std::vector<unsigned char> host(bytes);
    CUDA_OK(cudaMemcpy(host.data(), p, bytes, cudaMemcpyDeviceToHost));
    return host;
  }
  char* at(size_t offset) const { return static_cast<char*>(p) + offset; }
};

// One non-blocking stream per rank, made once: streams share the device's hardware queues
// (CUDA_DEVICE_MAX_CONNECTIONS, set to 32 in main), and a rank's stream waiting for the host
// must not sit in a queue ahead of another rank's copies (docs/cuda.md).
inline cudaStream_t rankStream(int r) {
  static cudaStream_t streams[4] = {};
  REQUIRE(r < 4);
  if (!streams[r]) CUDA_OK(cudaStreamCreateWithFlags(&streams[r], cudaStreamNonBlocking));
  return streams[r];
}

// n communicators (the C API), one thread and one stream per rank.
struct Job {
  std::vector<gyreComm_t> comms;
  std::vector<cudaStream_t> streams;
  explicit Job(int n, int timeoutMs = 30000) : comms(n), streams(n) {
    gyreUniqueId id;
    REQUIRE(gyreGetUniqueId(&id) == gyreSuccess);
    gyreConfig_t config = GYRE_CONFIG_INITIALIZER;
    config.timeoutMs = timeoutMs;
    config.slotBytes = 4096;  // several slices per call
    config.nSlots = 4;
    gyre::test::onThreads(n,
                          [&](int r) { OK(gyreCommInitRankConfig(&comms[r], n, id, r, &config)); });
    for (int r = 0; r < n; ++r) streams[size_t(r)] = rankStream(r);
  }
  ~Job() {
    for (auto s : streams) cudaStreamSynchronize(s);
    freeUnfreed();
    for (auto c : comms)
      if (c) gyreCommDestroy(c);
  }
  int size() const { return int(comms.size()); }
  void run(const std::function<void(int)>& body) {
    gyre::test::onThreads(size(), body);
    for (auto s : streams) cudaStreamSynchronize(s);
    freeUnfreed();
  }
};

// The bytes rank `rank` contributes: `count` elements of data's global indices from `first`.
inline std::vector<unsigned char> inputOf(const gyre::test::Data& data, int rank, size_t first,
                                          size_t count) {
  std::vector<unsigned char> out(count * gyre::dataTypeSize(data.type));
  for (size_t i = 0; i < count; ++i) data.input(out.data(), i, rank, first + i);
  return out;
}
inline std::vector<unsigned char> expectedOf(const gyre::test::Data& data, size_t first,
                                             size_t count, int only = -1) {
  std::vector<unsigned char> out(count * gyre::dataTypeSize(data.type));
  for (size_t i = 0; i < count; ++i) data.expected(out.data(), i, first + i, only);
  return out;
}

// `got` at byte `offset` equals `want`.
inline void checkBytes(const std::vector<unsigned char>& got, size_t offset,
                       const std::vector<unsigned char>& want, const std::string& what) {
  REQUIRE(offset + want.size() <= got.size());
  size_t wrong = 0, first = SIZE_MAX;
  for (size_t i = 0; i < want.size(); ++i) {
    if (got[offset + i] != want[i]) {
      ++wrong;
      if (first == SIZE_MAX) first = i;
    }
  }
  CHECK_MESSAGE(wrong == 0, what, ": ", wrong, " wrong bytes, the first at byte ", first, " (seed ",
                gSeed, ")");
}
inline void checkPoison(const std::vector<unsigned char>& got, size_t offset, size_t bytes,
                        const std::string& what) {
  checkBytes(got, offset, std::vector<unsigned char>(bytes, kPoison), what + " (left untouched)");
}

// Ok, or the failure that poisoned `comm` (which every later call reports).
inline std::string failureOf(gyreComm_t comm) {
  gyreResult_t async = gyreInternalError;
  if (gyreCommGetAsyncError(comm, &async) != gyreSuccess) return "no communicator";
  if (async == gyreSuccess) return "ok";
  gyreAllReduce(nullptr, nullptr, 0, gyreFloat32, gyreSum, comm, nullptr);
  return gyreGetLastError(nullptr);
}

// Whether stream-ordered collectives of `comm` run as kernels over cuda_ipc links (set up by
// its first collective), rather than staged through host memory (GYRE_CUDA_IPC=0).
inline bool onIpcLinks(gyreComm_t comm) {
  return gyre::api::commOf(comm).deviceLinkBytes() > 0;
}
inline bool ipcWanted() {
  const char* v = std::getenv("GYRE_CUDA_IPC");
  return !(v && std::string(v) == "0");
}

// One all-reduce on every rank: sets up the cuda_ipc links, which takes every rank.
inline void warmUp(Job& job) {
  job.run([&](int r) {
    DeviceBuffer b(64 * 4);
    OK(gyreAllReduce(b.p, b.p, 64, gyreFloat32, gyreSum, job.comms[r], job.streams[r]));
    CUDA_OK(cudaStreamSynchronize(job.streams[r]));
    CHECK(onIpcLinks(job.comms[r]) == ipcWanted());
  });
}

inline std::string name(const char* coll, int n, DataType type, RedOp op) {
  return std::string(coll) + " n=" + std::to_string(n) + " " + gyre::dataTypeName(type) + " " +
         gyre::redOpName(op);
}

inline gyreDataType_t c(DataType t) {
  return gyreDataType_t(int(t));
}
inline gyreRedOp_t c(RedOp op) {
  return gyreRedOp_t(int(op));
}

// The test program's main: exits 77 without a CUDA device, picks the seed (GYRE_TEST_SEED
// replays it) and runs the test cases.
inline int runTests(const char* what, int argc, char** argv) {
  // Ranks as threads: a kernel loaded lazily at its first launch may wait for the whole device,
  // including another rank's stream that waits for this rank (docs/cuda.md).
  setenv("CUDA_MODULE_LOADING", "EAGER", 0);
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
  gyre::test::exitUnlessCudaDevice();
  const char* fixed = std::getenv("GYRE_TEST_SEED");
  gSeed = fixed ? std::strtoull(fixed, nullptr, 10) : std::random_device{}();
  std::printf("%s, seed %llu (GYRE_TEST_SEED replays it)\n", what,
              static_cast<unsigned long long>(gSeed));
  doctest::Context context(argc, argv);
  return context.run();
}

}  // namespace gyre::test::gpu
