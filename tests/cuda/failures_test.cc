// Stream-ordered collectives on CUDA memory when things go wrong (docs/cuda.md): graph capture
// (captured and replayed over cuda_ipc links, refused clearly when staged), a stream waiting on
// a peer that never comes or on an aborted communicator let go with the error recorded, and
// ranks in different collectives told so. Ranks as threads sharing the one GPU
// (buffers_harness.h). Without a CUDA device the program exits 77 (ctest: skipped).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "gyre/gyre.h"
#include "tests/cuda/buffers_harness.h"

using namespace std::chrono_literals;
using namespace gyre::test::gpu;

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
  // Rank 1 never calls, so no event says the stream has reached its wait: 200 ms lets it get
  // there, so that the abort meets a waiting stream (one that had not would pass all the same).
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

int main(int argc, char** argv) {
  return runTests("cuda failures test", argc, argv);
}
