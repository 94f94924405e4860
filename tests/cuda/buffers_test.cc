// Collectives on CUDA memory through the C API, stream-ordered (docs/cuda.md): ranks as
// threads sharing the one GPU, each with its own non-blocking stream. Every collective on
// device buffers, every type and op where one applies, in and out of place, n = 2 and 4;
// outputs poisoned first (unwritten bytes show), inputs drawn from a seed picked fresh each
// run (printed; GYRE_TEST_SEED replays it) and chosen so that every result is exact in its
// type, so results are compared bit for bit. Then stream order (a kernel writes the input
// right before the call and another reads the output right after, ten calls deep with no
// synchronization between), groups, two streams per rank, premul sums, and the kinds of memory.
// Graph capture and streams let go on failures: failures_test.cc. Without a CUDA device the program
// exits 77 (ctest: skipped).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gyre/gyre.h"
#include "kernels/cuda/reduce.h"
#include "tests/cuda/buffers_harness.h"
#include "tests/harness/reference.h"

using namespace std::chrono_literals;
using namespace gyre::test::gpu;

namespace {

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

// torch's backend wraps every call in a group: collectives alone in theirs keep the kernels.
TEST_CASE("a group of collectives alone on device memory runs as the kernels, exact") {
  for (int n : {2, 4}) {
    Job job(n);
    const size_t count = 300001;
    const gyre::test::Data sum{DataType::f32, RedOp::sum, n, gSeed};
    const gyre::test::Data gathered{DataType::i32, RedOp::sum, n, gSeed + 1};
    job.run([&](int r) {
      gyreComm_t comm = job.comms[r];
      cudaStream_t s = job.streams[r];
      DeviceBuffer reduced(count * 4), mine(count * 4), all(count * 4 * size_t(n));
      reduced.upload(inputOf(sum, r, 0, count));
      mine.upload(inputOf(gathered, r, 0, count));
      OK(gyreGroupStart());
      OK(gyreAllReduce(reduced.p, reduced.p, count, gyreFloat32, gyreSum, comm, s));
      OK(gyreAllGather(mine.p, all.p, count, gyreInt32, comm, s));
      OK(gyreGroupEnd());
      CUDA_OK(cudaStreamSynchronize(s));
      checkBytes(reduced.download(), 0, expectedOf(sum, 0, count), "grouped all_reduce");
      const auto got = all.download();
      for (int p = 0; p < n; ++p) {
        checkBytes(got, size_t(p) * count * 4, inputOf(gathered, p, 0, count),
                   "grouped all_gather");
      }
      // The kernels set up the links and staged nothing (GYRE_CUDA_IPC=0: staged).
      CHECK(onIpcLinks(comm) == ipcWanted());
      CHECK((gyre::api::commOf(comm).stagingBytes() == 0) == ipcWanted());
      CHECK(failureOf(comm) == "ok");
    });
  }
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
    // Channel 0 to every peer, channels 1.. to the ring neighbours, each ring nSlots (4 in
    // this Job) slots of 256 KiB; GYRE_CUDA_CHANNELS (32) channels, at most multiprocessors / n
    // (docs/cuda.md).
    int device = 0, multiprocessors = 0;
    REQUIRE(cudaGetDevice(&device) == cudaSuccess);
    REQUIRE(cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, device) ==
            cudaSuccess);
    const char* setting = std::getenv("GYRE_CUDA_CHANNELS");
    const int channels =
        std::clamp(multiprocessors / n, 1, setting ? std::max(1, std::atoi(setting)) : 32);
    const size_t rings = size_t(n - 1) + size_t(channels - 1) * (n == 2 ? 1 : 2);
    const size_t ring = 4 * (size_t(256) << 10);
    const size_t bytes = gyre::api::commOf(job.comms[0]).deviceLinkBytes();
    MESSAGE("n = ", n, ": ", channels, " channels, ", bytes >> 20,
            " MiB of device memory per rank");
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

// Premul sums on device buffers: staged, the scalar of a gyreScalarDevice op read in stream
// order (the stream writes it right before each call), the input left as it was.
TEST_CASE("premul sums in stream order: the device scalar as the stream left it, exact") {
  const int n = 2;
  Job job(n);
  const size_t count = 1031, bytes = count * 4;
  const float factors[4] = {0.5f, 2.0f, -1.0f, 4.0f};
  job.run([&](int r) {
    gyreComm_t comm = job.comms[r];
    cudaStream_t s = job.streams[r];
    std::vector<float> in(count);
    for (size_t i = 0; i < count; ++i) in[i] = float((r + 1) * int(i % 50));
    std::vector<unsigned char> inBytes(bytes);
    std::memcpy(inBytes.data(), in.data(), bytes);
    DeviceBuffer send(bytes), scalar(4);
    send.upload(inBytes);
    gyreRedOp_t op;
    OK(gyreRedOpCreatePreMulSum(&op, scalar.p, gyreFloat32, gyreScalarDevice, comm));
    std::vector<std::unique_ptr<DeviceBuffer>> outs;
    for (const float& f : factors) {
      CUDA_OK(cudaMemcpyAsync(scalar.p, &f, 4, cudaMemcpyHostToDevice, s));
      outs.push_back(std::make_unique<DeviceBuffer>(bytes));
      OK(gyreAllReduce(send.p, outs.back()->p, count, gyreFloat32, op, comm, s));
    }
    CUDA_OK(cudaStreamSynchronize(s));
    for (size_t k = 0; k < 4; ++k) {
      std::vector<float> want(count);
      for (size_t i = 0; i < count; ++i) want[i] = factors[k] * 3.0f * float(i % 50);
      std::vector<unsigned char> wantBytes(bytes);
      std::memcpy(wantBytes.data(), want.data(), bytes);
      checkBytes(outs[k]->download(), 0, wantBytes, "premul sum, factor " + std::to_string(k));
    }
    checkBytes(send.download(), 0, inBytes, "the premul sum's input");
    OK(gyreRedOpDestroy(op, comm));
  });
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

TEST_CASE("gyreMemAlloc's memory in every rank's all-reduce; gyreCommCuDevice names the device") {
  Job job(2);  // made on new threads, whose current device is CUDA's default: 0
  const size_t count = 4099;
  const gyre::test::Data data{DataType::f64, RedOp::sum, 2, gSeed};
  job.run([&](int r) {
    int commDevice = -1;
    OK(gyreCommCuDevice(job.comms[r], &commDevice));
    CHECK(commDevice == 0);
    void* send = nullptr;
    void* recv = nullptr;
    OK(gyreMemAlloc(&send, count * 8));
    OK(gyreMemAlloc(&recv, count * 8));
    cudaPointerAttributes attributes{};
    CUDA_OK(cudaPointerGetAttributes(&attributes, recv));
    CHECK(attributes.type == cudaMemoryTypeDevice);
    const auto in = inputOf(data, r, 0, count);
    CUDA_OK(cudaMemcpy(send, in.data(), in.size(), cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemset(recv, 0xff, count * 8));  // poisoned: unwritten elements show
    OK(gyreAllReduce(send, recv, count, gyreFloat64, gyreSum, job.comms[r], job.streams[r]));
    CUDA_OK(cudaStreamSynchronize(job.streams[r]));
    std::vector<unsigned char> out(count * 8);
    CUDA_OK(cudaMemcpy(out.data(), recv, out.size(), cudaMemcpyDeviceToHost));
    checkBytes(out, 0, expectedOf(data, 0, count), "gyreMemAlloc's buffers");
    OK(gyreMemFree(send));
    OK(gyreMemFree(recv));
  });
  int host = 0;
  CHECK(gyreMemFree(&host) != gyreSuccess);  // not CUDA's: refused, named
  CHECK(std::string(gyreGetLastError(nullptr)).find("gyreMemFree: cudaFree failed") !=
        std::string::npos);
}

int main(int argc, char** argv) {
  return runTests("cuda buffers test", argc, argv);
}
