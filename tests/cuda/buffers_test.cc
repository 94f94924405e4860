// Collectives on CUDA memory through the C API, stream-ordered (docs/cuda.md): ranks as
// threads sharing the one GPU, each with its own non-blocking stream. Every collective on
// device buffers, every type and op where one applies, in and out of place, n = 2 and 4;
// outputs poisoned first (unwritten bytes show), inputs drawn from a seed picked fresh each
// run (printed; GYRE_TEST_SEED replays it) and chosen so that every result is exact in its
// type, so results are compared bit for bit. Then stream order (a kernel writes the input
// right before the call and another reads the output right after, ten calls deep with no
// synchronization between), graph capture refused clearly, and a stream waiting on a peer
// that never comes, or on an aborted communicator, let go with the error recorded. Without a
// CUDA device the program exits 77 (ctest: skipped).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gyre/gyre.h"
#include "kernels/cuda/reduce.h"
#include "runtime/api/api_internal.h"
#include "runtime/core/communicator.h"
#include "tests/cuda/device.h"
#include "tests/harness/reference.h"
#include "tests/harness/thread_ranks.h"

using namespace std::chrono_literals;
using gyre::DataType;
using gyre::RedOp;

namespace {

uint64_t gSeed = 0;
constexpr unsigned char kPoison = 0xA5;

#define OK(call) REQUIRE_MESSAGE((call) == gyreSuccess, std::string(gyreGetLastError(nullptr)))
#define CUDA_OK(call) REQUIRE_MESSAGE((call) == cudaSuccess, #call)

// Device buffers whose rank is done with them: freed only once every rank's thread is (Job::run),
// since cudaFree synchronizes the whole device. In one process that waits for every other
// rank's stream, which may wait for a host flag that rank's worker sets only once the driver
// lock cudaFree holds is free (a reduce's non-root returns before its root, docs/cuda.md).
std::mutex gUnfreedMutex;
std::vector<void*> gUnfreed;
void freeUnfreed() {
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
cudaStream_t rankStream(int r) {
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
std::vector<unsigned char> inputOf(const gyre::test::Data& data, int rank, size_t first,
                                   size_t count) {
  std::vector<unsigned char> out(count * gyre::dataTypeSize(data.type));
  for (size_t i = 0; i < count; ++i) data.input(out.data(), i, rank, first + i);
  return out;
}
std::vector<unsigned char> expectedOf(const gyre::test::Data& data, size_t first, size_t count,
                                      int only = -1) {
  std::vector<unsigned char> out(count * gyre::dataTypeSize(data.type));
  for (size_t i = 0; i < count; ++i) data.expected(out.data(), i, first + i, only);
  return out;
}

// `got` at byte `offset` equals `want`.
void checkBytes(const std::vector<unsigned char>& got, size_t offset,
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
void checkPoison(const std::vector<unsigned char>& got, size_t offset, size_t bytes,
                 const std::string& what) {
  checkBytes(got, offset, std::vector<unsigned char>(bytes, kPoison), what + " (left untouched)");
}

// Ok, or the failure that poisoned `comm` (which every later call reports).
std::string failureOf(gyreComm_t comm) {
  gyreResult_t async = gyreInternalError;
  if (gyreCommGetAsyncError(comm, &async) != gyreSuccess) return "no communicator";
  if (async == gyreSuccess) return "ok";
  gyreAllReduce(nullptr, nullptr, 0, gyreFloat32, gyreSum, comm, nullptr);
  return gyreGetLastError(nullptr);
}

// Whether stream-ordered collectives of `comm` run as kernels over cuda_ipc links (set up by
// its first collective), rather than staged through host memory (GYRE_CUDA_IPC=0).
bool onIpcLinks(gyreComm_t comm) {
  return gyre::api::commOf(comm).deviceLinkBytes() > 0;
}
bool ipcWanted() {
  const char* v = std::getenv("GYRE_CUDA_IPC");
  return !(v && std::string(v) == "0");
}

// One all-reduce on every rank: sets up the cuda_ipc links, which takes every rank.
void warmUp(Job& job) {
  job.run([&](int r) {
    DeviceBuffer b(64 * 4);
    OK(gyreAllReduce(b.p, b.p, 64, gyreFloat32, gyreSum, job.comms[r], job.streams[r]));
    CUDA_OK(cudaStreamSynchronize(job.streams[r]));
    CHECK(onIpcLinks(job.comms[r]) == ipcWanted());
  });
}

std::string name(const char* coll, int n, DataType type, RedOp op) {
  return std::string(coll) + " n=" + std::to_string(n) + " " + gyre::dataTypeName(type) + " " +
         gyre::redOpName(op);
}

gyreDataType_t c(DataType t) {
  return gyreDataType_t(int(t));
}
gyreRedOp_t c(RedOp op) {
  return gyreRedOp_t(int(op));
}

constexpr size_t kCount = 1031;  // elements per rank: a prime, several slots

void reductions(Job& job, DataType type, RedOp op) {
  const int n = job.size();
  const size_t es = gyre::dataTypeSize(type), bytes = kCount * es;
  const gyre::test::Data data{type, op, n, gSeed ^ (uint64_t(type) << 8) ^ uint64_t(op)};
  const int root = n - 1;
  job.run([&](int r) {
    gyreComm_t comm = job.comms[r];
    cudaStream_t s = job.streams[r];
    // all_reduce, out of place and in place.
    DeviceBuffer send(bytes), recv(bytes), inPlace(bytes);
    send.upload(inputOf(data, r, 0, kCount));
    inPlace.upload(inputOf(data, r, 0, kCount));
    OK(gyreAllReduce(send.p, recv.p, kCount, c(type), c(op), comm, s));
    OK(gyreAllReduce(inPlace.p, inPlace.p, kCount, c(type), c(op), comm, s));
    // reduce_scatter: rank r's block is global elements [r*kCount, (r+1)*kCount).
    DeviceBuffer scatterIn(bytes * size_t(n)), scatterOut(bytes);
    scatterIn.upload(inputOf(data, r, 0, kCount * size_t(n)));
    OK(gyreReduceScatter(scatterIn.p, scatterOut.p, kCount, c(type), c(op), comm, s));
    // reduce to the last rank; the others' recvbuff stays untouched.
    DeviceBuffer reduced(bytes);
    OK(gyreReduce(send.p, reduced.p, kCount, c(type), c(op), root, comm, s));
    CUDA_OK(cudaStreamSynchronize(s));

    const auto all = expectedOf(data, 0, kCount);
    checkBytes(recv.download(), 0, all, name("all_reduce", n, type, op));
    checkBytes(inPlace.download(), 0, all, name("all_reduce in place", n, type, op));
    checkBytes(send.download(), 0, inputOf(data, r, 0, kCount), "all_reduce: sendbuff unchanged");
    checkBytes(scatterOut.download(), 0, expectedOf(data, size_t(r) * kCount, kCount),
               name("reduce_scatter", n, type, op));
    if (r == root) {
      checkBytes(reduced.download(), 0, all, name("reduce", n, type, op));
    } else {
      checkPoison(reduced.download(), 0, bytes, name("reduce (non-root)", n, type, op));
    }
    CHECK(failureOf(comm) == "ok");
  });
}

void movements(Job& job, DataType type) {
  const int n = job.size();
  const size_t es = gyre::dataTypeSize(type), bytes = kCount * es, nb = bytes * size_t(n);
  const gyre::test::Data data{type, RedOp::sum, n, gSeed ^ (uint64_t(type) << 16)};
  job.run([&](int r) {
    gyreComm_t comm = job.comms[r];
    cudaStream_t s = job.streams[r];
    const auto mine = inputOf(data, r, 0, kCount);
    DeviceBuffer send(bytes), gathered(nb), gatheredInPlace(nb), bcast(bytes), gatherRoot(nb),
        scatterFrom(nb), scattered(bytes), a2aIn(nb), a2aOut(nb), sent(bytes), received(bytes);
    send.upload(mine);
    OK(gyreAllGather(send.p, gathered.p, kCount, c(type), comm, s));
    // In place: this rank's block already sits at its place in recvbuff.
    CUDA_OK(cudaMemcpy(gatheredInPlace.at(size_t(r) * bytes), mine.data(), bytes,
                       cudaMemcpyHostToDevice));
    CUDA_OK(cudaStreamSynchronize(nullptr));
    OK(gyreAllGather(gatheredInPlace.at(size_t(r) * bytes), gatheredInPlace.p, kCount, c(type),
                     comm, s));
    const int bRoot = 1 % n, gRoot = 0, sRoot = n - 1;
    if (r == bRoot) bcast.upload(mine);
    OK(gyreBroadcast(bcast.p, bcast.p, kCount, c(type), bRoot, comm, s));
    OK(gyreGather(send.p, gatherRoot.p, kCount, c(type), gRoot, comm, s));
    // Scatter from the last rank: block k holds rank k's input.
    std::vector<unsigned char> blocks;
    for (int k = 0; k < n; ++k) {
      const auto b = inputOf(data, k, 0, kCount);
      blocks.insert(blocks.end(), b.begin(), b.end());
    }
    if (r == sRoot) scatterFrom.upload(blocks);
    OK(gyreScatter(scatterFrom.p, scattered.p, kCount, c(type), sRoot, comm, s));
    // all_to_all: the block for rank k is global elements [k*kCount, ...) of this rank's input.
    a2aIn.upload(inputOf(data, r, 0, kCount * size_t(n)));
    OK(gyreAllToAll(a2aIn.p, a2aOut.p, kCount, c(type), comm, s));
    // send/recv around the ring, even ranks sending first.
    const int next = (r + 1) % n, prev = (r + n - 1) % n;
    if (r % 2 == 0) {
      OK(gyreSend(send.p, kCount, c(type), next, comm, s));
      OK(gyreRecv(received.p, kCount, c(type), prev, comm, s));
    } else {
      OK(gyreRecv(received.p, kCount, c(type), prev, comm, s));
      OK(gyreSend(send.p, kCount, c(type), next, comm, s));
    }
    // all_gather_v with gaps: rank k gives k+1 elements, placed at k*(n+2); gaps stay poison.
    std::vector<size_t> counts(static_cast<size_t>(n)), displs(static_cast<size_t>(n));
    for (int k = 0; k < n; ++k) {
      counts[size_t(k)] = size_t(k) + 1;
      displs[size_t(k)] = size_t(k) * size_t(n + 2);
    }
    DeviceBuffer vOut(size_t(n) * size_t(n + 2) * es);
    OK(gyreAllGatherV(send.p, size_t(r) + 1, vOut.p, counts.data(), displs.data(), c(type), comm,
                      s));
    counts.assign(counts.size(), 0);  // the call copied them: changing them now is harmless
    CUDA_OK(cudaStreamSynchronize(s));

    const auto g = gathered.download(), gi = gatheredInPlace.download(), gr = gatherRoot.download();
    const auto a2a = a2aOut.download(), v = vOut.download();
    for (int k = 0; k < n; ++k) {
      const auto theirs = inputOf(data, k, 0, kCount);
      checkBytes(g, size_t(k) * bytes, theirs, name("all_gather", n, type, RedOp::sum));
      checkBytes(gi, size_t(k) * bytes, theirs, name("all_gather in place", n, type, RedOp::sum));
      if (r == gRoot) checkBytes(gr, size_t(k) * bytes, theirs, "gather");
      checkBytes(a2a, size_t(k) * bytes, inputOf(data, k, size_t(r) * kCount, kCount),
                 name("all_to_all", n, type, RedOp::sum));
      const size_t at = size_t(k) * size_t(n + 2) * es;
      checkBytes(v, at, inputOf(data, k, 0, size_t(k) + 1), "all_gather_v");
      checkPoison(v, at + (size_t(k) + 1) * es, (size_t(n + 1) - size_t(k)) * es,
                  "all_gather_v gap");
    }
    if (r != gRoot) checkPoison(gr, 0, nb, "gather (non-root)");
    checkBytes(bcast.download(), 0, inputOf(data, bRoot, 0, kCount), "broadcast");
    checkBytes(scattered.download(), 0, inputOf(data, r, 0, kCount), "scatter");
    checkBytes(received.download(), 0, inputOf(data, prev, 0, kCount), "send/recv");
    CHECK(failureOf(comm) == "ok");
  });
}

}  // namespace

TEST_CASE("every collective on device buffers, every type and op, n = 2 and 4, on one GPU") {
  for (int n : {2, 4}) {
    Job job(n);
    for (int t = 0; t < gyre::kNumDataTypes; ++t) {
      const auto type = DataType(t);
      for (int o = 0; o < gyre::kNumRedOps; ++o) reductions(job, type, RedOp(o));
      movements(job, type);
    }
  }
}

TEST_CASE("stream order: a kernel writes the input right before, another reads the output after") {
  const int n = 2, calls = 10;
  Job job(n);
  const size_t count = 300007, bytes = count * 4;
  job.run([&](int r) {
    cudaStream_t s = job.streams[r];
    // Inputs for every call, prepared up front; the stream copies each into `send` just
    // before its call, and doubles each result into its own buffer right after.
    std::vector<std::unique_ptr<DeviceBuffer>> inputs, doubled;
    std::vector<gyre::test::Data> data;
    for (int k = 0; k < calls; ++k) {
      data.push_back({DataType::f32, RedOp::sum, n, gSeed + uint64_t(k) * 7919});
      inputs.push_back(std::make_unique<DeviceBuffer>(bytes));
      inputs.back()->upload(inputOf(data.back(), r, 0, count));
      doubled.push_back(std::make_unique<DeviceBuffer>(bytes));
    }
    DeviceBuffer send(bytes), recv(bytes), scratch(bytes);
    for (int k = 0; k < calls; ++k) {
      // A two-output copy is a kernel (a one-output copy would be cudaMemcpyAsync).
      REQUIRE(gyre::cuda::copy(send.p, scratch.p, inputs[size_t(k)]->p, bytes, s) == cudaSuccess);
      OK(gyreAllReduce(send.p, recv.p, count, gyreFloat32, gyreSum, job.comms[r], s));
      REQUIRE(gyre::cuda::reduce(DataType::f32, RedOp::sum, doubled[size_t(k)]->p, nullptr, recv.p,
                                 recv.p, count, 0, s) == cudaSuccess);
    }
    CUDA_OK(cudaStreamSynchronize(s));
    for (int k = 0; k < calls; ++k) {
      auto want = expectedOf(data[size_t(k)], 0, count);
      auto* f = reinterpret_cast<float*>(want.data());
      for (size_t i = 0; i < count; ++i) f[i] *= 2;  // exact: small integers
      checkBytes(doubled[size_t(k)]->download(), 0, want, "call " + std::to_string(k));
    }
  });
}

TEST_CASE("large elementwise calls run in pieces that overlap their copies, with exact results") {
  const int n = 2;
  Job job(n);
  const size_t count = (size_t(6) << 20) + 13;  // 24 MiB of f32: six pieces and a ragged end
  const size_t bytes = count * 4;
  const gyre::test::Data data{DataType::f32, RedOp::sum, n, gSeed};
  job.run([&](int r) {
    gyreComm_t comm = job.comms[r];
    cudaStream_t s = job.streams[r];
    DeviceBuffer send(bytes), recv(bytes), inPlace(bytes), bcast(bytes), reduced(bytes);
    send.upload(inputOf(data, r, 0, count));
    inPlace.upload(inputOf(data, r, 0, count));
    if (r == 0) bcast.upload(inputOf(data, 0, 0, count));
    OK(gyreAllReduce(send.p, recv.p, count, gyreFloat32, gyreSum, comm, s));
    OK(gyreAllReduce(inPlace.p, inPlace.p, count, gyreFloat32, gyreSum, comm, s));
    OK(gyreBroadcast(bcast.p, bcast.p, count, gyreFloat32, 0, comm, s));
    OK(gyreReduce(send.p, reduced.p, count, gyreFloat32, gyreSum, 1, comm, s));
    CUDA_OK(cudaStreamSynchronize(s));
    const auto all = expectedOf(data, 0, count);
    checkBytes(recv.download(), 0, all, "all_reduce in pieces");
    checkBytes(inPlace.download(), 0, all, "all_reduce in place, in pieces");
    checkBytes(bcast.download(), 0, inputOf(data, 0, 0, count), "broadcast in pieces");
    if (r == 1) {
      checkBytes(reduced.download(), 0, all, "reduce in pieces");
    } else {
      checkPoison(reduced.download(), 0, bytes, "reduce in pieces (non-root)");
    }
    CHECK(failureOf(comm) == "ok");
  });
}

TEST_CASE("a group of stream-ordered calls: fused all-reduces and a two-way exchange") {
  const int n = 2;
  Job job(n);
  const size_t slice = 1000, slices = 8, exchange = size_t(1) << 20;  // 4 MiB each way
  const gyre::test::Data data{DataType::f32, RedOp::sum, n, gSeed};
  job.run([&](int r) {
    gyreComm_t comm = job.comms[r];
    cudaStream_t s = job.streams[r];
    DeviceBuffer grads(slice * slices * 4), out(exchange * 4), in(exchange * 4);
    grads.upload(inputOf(data, r, 0, slice * slices));
    out.upload(inputOf(data, r, 0, exchange));
    const int other = 1 - r;
    OK(gyreGroupStart());
    for (size_t k = 0; k < slices; ++k) {
      float* p = reinterpret_cast<float*>(grads.at(k * slice * 4));
      OK(gyreAllReduce(p, p, slice, gyreFloat32, gyreSum, comm, s));
    }
    // Both ranks send first: only moving together, as a group does, lets this through.
    OK(gyreSend(out.p, exchange, gyreFloat32, other, comm, s));
    OK(gyreRecv(in.p, exchange, gyreFloat32, other, comm, s));
    OK(gyreGroupEnd());
    CUDA_OK(cudaStreamSynchronize(s));
    checkBytes(grads.download(), 0, expectedOf(data, 0, slice * slices), "grouped all-reduces");
    checkBytes(in.download(), 0, inputOf(data, other, 0, exchange), "grouped exchange");
    CHECK(failureOf(comm) == "ok");

    // A group may not mix host and stream-ordered calls on one communicator.
    float host = 1;
    OK(gyreGroupStart());
    OK(gyreAllReduce(&host, &host, 1, gyreFloat32, gyreSum, comm, nullptr));
    OK(gyreAllReduce(grads.p, grads.p, 1, gyreFloat32, gyreSum, comm, s));
    CHECK(gyreGroupEnd() == gyreInvalidUsage);
    CHECK(std::string(gyreGetLastError(nullptr)).find("mixes") != std::string::npos);
    CHECK(failureOf(comm) == "ok");
  });
}

// Over cuda_ipc links a collective is one kernel, which a graph captures like any other; the
// staged path needs the host at run time and refuses.
TEST_CASE(
    "CUDA graph capture: kernels over cuda_ipc links are captured and replayed; staged "
    "calls are refused and the communicator goes on") {
  Job job(2);
  warmUp(job);
  const size_t count = 1000;
  DeviceBuffer buf0(count * 4), buf1(count * 4);
  DeviceBuffer* bufs[2] = {&buf0, &buf1};
  const gyre::test::Data data{DataType::f32, RedOp::sum, 2, gSeed};
  if (!ipcWanted()) {
    cudaStream_t s0 = job.streams[0];
    CUDA_OK(cudaStreamBeginCapture(s0, cudaStreamCaptureModeThreadLocal));
    const gyreResult_t refused =
        gyreAllReduce(buf0.p, buf0.p, count, gyreFloat32, gyreSum, job.comms[0], s0);
    const std::string message = gyreGetLastError(nullptr);
    cudaGraph_t graph = nullptr;
    CUDA_OK(cudaStreamEndCapture(s0, &graph));
    if (graph) cudaGraphDestroy(graph);
    CHECK(refused == gyreInvalidUsage);
    CHECK_MESSAGE(message.find("captured into a CUDA graph") != std::string::npos, message);
  } else {
    // Each rank captures out of place from its input into `bufs`, then replays twice.
    DeviceBuffer in0(count * 4), in1(count * 4);
    DeviceBuffer* ins[2] = {&in0, &in1};
    job.run([&](int r) {
      ins[r]->upload(inputOf(data, r, 0, count));
      cudaStream_t s = job.streams[r];
      CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
      const gyreResult_t captured =
          gyreAllReduce(ins[r]->p, bufs[r]->p, count, gyreFloat32, gyreSum, job.comms[r], s);
      const std::string message = gyreGetLastError(nullptr);
      cudaGraph_t graph = nullptr;
      CUDA_OK(cudaStreamEndCapture(s, &graph));
      REQUIRE_MESSAGE(captured == gyreSuccess, message);
      cudaGraphExec_t exec = nullptr;
      CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
      for (int replay = 0; replay < 2; ++replay) {
        CUDA_OK(cudaMemsetAsync(bufs[r]->p, kPoison, count * 4, s));
        CUDA_OK(cudaGraphLaunch(exec, s));
        CUDA_OK(cudaStreamSynchronize(s));
        checkBytes(bufs[r]->download(), 0, expectedOf(data, 0, count), "graph replay");
      }
      cudaGraphExecDestroy(exec);
      cudaGraphDestroy(graph);
    });
  }
  job.run([&](int r) {
    bufs[r]->upload(inputOf(data, r, 0, count));
    OK(gyreAllReduce(bufs[r]->p, bufs[r]->p, count, gyreFloat32, gyreSum, job.comms[r],
                     job.streams[r]));
    CUDA_OK(cudaStreamSynchronize(job.streams[r]));
    checkBytes(bufs[r]->download(), 0, expectedOf(data, 0, count), "after the capture");
    CHECK(failureOf(job.comms[r]) == "ok");
  });
}

TEST_CASE("a stream waiting on a peer that never calls is let go at the timeout, with the error") {
  Job job(2, 1500);
  warmUp(job);
  const size_t count = 4096;
  DeviceBuffer buf(count * 4);
  const auto start = std::chrono::steady_clock::now();
  OK(gyreAllReduce(buf.p, buf.p, count, gyreFloat32, gyreSum, job.comms[0], job.streams[0]));
  CUDA_OK(cudaStreamSynchronize(job.streams[0]));  // rank 1 never calls
  const auto waited = std::chrono::steady_clock::now() - start;
  CHECK(waited >= 1400ms);
  CHECK(waited < 20s);
  gyreResult_t async = gyreSuccess;
  OK(gyreCommGetAsyncError(job.comms[0], &async));
  CHECK(async == gyreTimeout);
  // The next call fails at once with the same cause.
  CHECK(gyreAllReduce(buf.p, buf.p, count, gyreFloat32, gyreSum, job.comms[0], job.streams[0]) ==
        gyreTimeout);
  const std::string message = gyreGetLastError(nullptr);
  CHECK_MESSAGE(message.find("rank 0") != std::string::npos, message);
}

TEST_CASE("gyreCommAbort lets a waiting stream go at once") {
  Job job(2, 120000);
  warmUp(job);
  const size_t count = 4096;
  DeviceBuffer buf(count * 4);
  OK(gyreAllReduce(buf.p, buf.p, count, gyreFloat32, gyreSum, job.comms[0], job.streams[0]));
  std::this_thread::sleep_for(200ms);
  CHECK(cudaStreamQuery(job.streams[0]) == cudaErrorNotReady);  // still waiting for rank 1
  const auto start = std::chrono::steady_clock::now();
  OK(gyreCommAbort(job.comms[0]));
  CUDA_OK(cudaStreamSynchronize(job.streams[0]));
  CHECK(std::chrono::steady_clock::now() - start < 10s);
  gyreResult_t async = gyreSuccess;
  OK(gyreCommGetAsyncError(job.comms[0], &async));
  CHECK(async == gyreAborted);
}

TEST_CASE("ranks in different collectives: the error says they disagree, within the timeout") {
  Job job(2, 1500);
  warmUp(job);
  const size_t count = 4096;
  DeviceBuffer a(count * 4 * 2), b(count * 4 * 2);
  job.run([&](int r) {
    if (r == 0) {
      OK(gyreAllReduce(a.p, a.p, count, gyreFloat32, gyreSum, job.comms[0], job.streams[0]));
    } else {
      OK(gyreBroadcast(b.p, b.p, count, gyreFloat32, 1, job.comms[1], job.streams[1]));
    }
    CUDA_OK(cudaStreamSynchronize(job.streams[r]));
  });
  std::string messages;
  for (int r = 0; r < 2; ++r) messages += failureOf(job.comms[r]) + "\n";
  CHECK_MESSAGE(messages.find("ranks disagree") != std::string::npos, messages);
}

TEST_CASE("calls alternating between two streams per rank run in issue order, exact") {
  Job job(2);
  warmUp(job);
  const size_t count = 70001;
  job.run([&](int r) {
    cudaStream_t other = nullptr;
    CUDA_OK(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking));
    std::vector<std::unique_ptr<DeviceBuffer>> bufs;
    std::vector<gyre::test::Data> data;
    for (int k = 0; k < 6; ++k) {
      data.push_back({DataType::i32, RedOp::sum, 2, gSeed + uint64_t(k)});
      bufs.push_back(std::make_unique<DeviceBuffer>(count * 4));
      bufs.back()->upload(inputOf(data.back(), r, 0, count));
    }
    for (int k = 0; k < 6; ++k) {
      OK(gyreAllReduce(bufs[size_t(k)]->p, bufs[size_t(k)]->p, count, gyreInt32, gyreSum,
                       job.comms[r], k % 2 ? other : job.streams[r]));
    }
    CUDA_OK(cudaStreamSynchronize(job.streams[r]));
    CUDA_OK(cudaStreamSynchronize(other));
    for (int k = 0; k < 6; ++k) {
      checkBytes(bufs[size_t(k)]->download(), 0, expectedOf(data[size_t(k)], 0, count),
                 "all_reduce on alternating streams");
    }
    CHECK(failureOf(job.comms[r]) == "ok");
    cudaStreamDestroy(other);
  });
}

TEST_CASE("cuda_ipc links hold the documented device memory per communicator") {
  for (int n : {2, 4}) {
    Job job(n);
    warmUp(job);
    if (!ipcWanted()) return;
    // Channel 0 to every peer, channels 1..7 to the ring neighbours, each ring nSlots (4 in
    // this Job) slots of 256 KiB (docs/cuda.md).
    const size_t rings = size_t(n - 1) + 7 * (n == 2 ? 1 : 2), ring = 4 * (size_t(256) << 10);
    const size_t bytes = gyre::api::commOf(job.comms[0]).deviceLinkBytes();
    MESSAGE("n = ", n, ": ", bytes >> 20, " MiB of device memory per rank");
    CHECK(bytes >= rings * ring);
    CHECK(bytes < rings * ring + (1 << 20));
  }
}

// gyreCommRegister takes device memory: for GPUDirect RDMA where rdma carries the peer (not
// on one GPU's host, where the registration changes nothing), and sends from it stay exact.
TEST_CASE("device memory can be registered; sends from it are exact, deregistered after") {
  Job job(2);
  const size_t count = 4099;
  const gyre::test::Data data{DataType::f32, RedOp::sum, 2, gSeed};
  DeviceBuffer from(count * 4), to(count * 4);
  from.upload(inputOf(data, 0, 0, count));
  void* handle = nullptr;
  OK(gyreCommRegister(job.comms[0], from.p, count * 4, &handle));
  CHECK(handle != nullptr);
  OK(gyreSend(from.p, count, gyreFloat32, 1, job.comms[0], job.streams[0]));
  OK(gyreRecv(to.p, count, gyreFloat32, 0, job.comms[1], job.streams[1]));
  CUDA_OK(cudaStreamSynchronize(job.streams[0]));
  CUDA_OK(cudaStreamSynchronize(job.streams[1]));
  checkBytes(to.download(), 0, inputOf(data, 0, 0, count), "send from registered device memory");
  OK(gyreCommDeregister(job.comms[0], handle));
  CHECK(failureOf(job.comms[0]) == "ok");
}

TEST_CASE("device memory with no stream runs on the default stream") {
  Job job(1);
  const size_t count = 777;
  const gyre::test::Data data{DataType::i32, RedOp::max, 1, gSeed};
  DeviceBuffer send(count * 4), recv(count * 4);
  send.upload(inputOf(data, 0, 0, count));
  OK(gyreAllReduce(send.p, recv.p, count, gyreInt32, gyreMax, job.comms[0], nullptr));
  CUDA_OK(cudaStreamSynchronize(nullptr));
  checkBytes(recv.download(), 0, expectedOf(data, 0, count), "default stream");
}

// Large enough that the receivers read the senders' buffers through the kernel (single copy,
// the direct reads) where the tuner or GYRE_ALGO picks them.
TEST_CASE("pinned and managed memory with no stream are host memory: blocking calls") {
  gyre::test::ThreadJob job(2, gyre::test::tinySlots(20000ms), "cuda-buffers");
  const size_t count = 300001;
  float* pinned[2] = {};
  float* managed[2] = {};
  for (int r = 0; r < 2; ++r) {
    REQUIRE(cudaMallocHost(reinterpret_cast<void**>(&pinned[r]), count * 4) == cudaSuccess);
    REQUIRE(cudaMallocManaged(reinterpret_cast<void**>(&managed[r]), count * 4) == cudaSuccess);
  }
  for (float** buffers : {pinned, managed}) {
    job.run([&](gyre::Communicator& comm, int r) {
      for (size_t i = 0; i < count; ++i) buffers[r][i] = float(r + 1) * float(i % 100);
      comm.allReduce(buffers[r], buffers[r], count, DataType::f32, RedOp::sum);
      for (size_t i = 0; i < count; ++i) REQUIRE(buffers[r][i] == 3.0f * float(i % 100));
    });
  }
  for (int r = 0; r < 2; ++r) {
    cudaFreeHost(pinned[r]);
    cudaFree(managed[r]);
  }
}

int main(int argc, char** argv) {
  // Ranks as threads: a kernel loaded lazily at its first launch may wait for the whole device,
  // including another rank's stream that waits for this rank (docs/cuda.md).
  setenv("CUDA_MODULE_LOADING", "EAGER", 0);
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
  gyre::test::exitUnlessCudaDevice();
  const char* fixed = std::getenv("GYRE_TEST_SEED");
  gSeed = fixed ? std::strtoull(fixed, nullptr, 10) : std::random_device{}();
  std::printf("cuda buffers test, seed %llu (GYRE_TEST_SEED replays it)\n",
              static_cast<unsigned long long>(gSeed));
  doctest::Context context(argc, argv);
  return context.run();
}
