// The pieces of one gyre-bench run: its options, the collective it calls, its buffers (host
// or CUDA) and the check of every element that came back. gyre-bench's main.cc drives them
// (soak.cc for --soak).
#pragma once

#include <unistd.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#ifdef GYRE_BENCH_CUDA
#include <cuda_runtime_api.h>
#endif

#include "gyre/gyre.h"
#include "gyre/types.h"
#include "tools/bench/pattern.h"

namespace gyre::bench {

enum class Coll {
  all_reduce,
  all_gather,
  reduce_scatter,
  broadcast,
  reduce,
  gather,
  scatter,
  all_to_all,
  sendrecv  // nccl-tests' sendrecv: each rank sends to the next and receives from the previous
};
const char* const kCollNames[] = {"all_reduce", "all_gather", "reduce_scatter",
                                  "broadcast",  "reduce",     "gather",
                                  "scatter",    "all_to_all", "sendrecv"};

struct Options {
  Coll coll = Coll::all_reduce;
  size_t minBytes = 8, maxBytes = 256 << 20;
  double factor = 2;
  int iters = 20, warmup = 5, check = 1, root = 0;
  DataType type = DataType::f32;
  RedOp op = RedOp::sum;
  bool inPlace = false;
  int batch = 1;            // all_reduce calls per iteration, on consecutive output slices
  bool group = false;       // inside gyreGroupStart/End
  bool async = false;       // each call ends with gyreGroupEndAsync and is waited for at once
  bool registered = false;  // buffers registered with gyreCommRegister
  bool cuda = false;        // buffers in CUDA device memory, calls on a stream
  // Before each call every rank stores to every cache line of its input, as an application
  // that produces fresh data does: the call then finds those lines modified in this CPU's
  // cache, where a loop over an untouched buffer lets readers on other CPUs keep clean copies.
  bool rewrite = false;
};

[[noreturn]] inline void die(const char* what, gyreResult_t r) {
  std::fprintf(stderr, "gyre-bench: %s failed: %s: %s\n", what, gyreGetErrorString(r),
               gyreGetLastError(nullptr));
  std::exit(1);
}
#define CHECK(call)                        \
  do {                                     \
    gyreResult_t r_ = (call);              \
    if (r_ != gyreSuccess) die(#call, r_); \
  } while (0)

#ifdef GYRE_BENCH_CUDA
inline void cudaCheck(cudaError_t e) {
  if (e == cudaSuccess) return;
  std::fprintf(stderr, "gyre-bench: CUDA: %s\n", cudaGetErrorString(e));
  std::exit(1);
}
#endif

inline size_t parseSize(const std::string& text) {
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  switch (*end) {
    case 'G':
    case 'g':
      v *= 1024.0;
      [[fallthrough]];
    case 'M':
    case 'm':
      v *= 1024.0;
      [[fallthrough]];
    case 'K':
    case 'k':
      v *= 1024.0;
      ++end;
      break;
    default:
      break;
  }
  if (*end != '\0' && !(*end == 'B' && end[1] == '\0'))
    throw CLI::ValidationError("bad size " + text);
  return size_t(v);
}

inline double busFactor(Coll c, int n) {
  switch (c) {
    case Coll::all_reduce:
      return 2.0 * (n - 1) / n;
    case Coll::all_gather:
    case Coll::reduce_scatter:
      return double(n - 1) / n;
    case Coll::broadcast:
    case Coll::reduce:
    case Coll::sendrecv:
      return 1.0;
    case Coll::gather:
    case Coll::scatter:
    case Coll::all_to_all:
      return double(n - 1) / n;
  }
  return 1.0;
}

struct Run {
  const Options& o;
  gyreComm_t comm;
  int rank, n;
  size_t es;
  std::vector<unsigned char> send, recv, expected;
  unsigned char* deviceSend = nullptr;  // --cuda: device twins of send and recv
  unsigned char* deviceRecv = nullptr;
  void* stream = nullptr;

  // Element counts of the send and recv buffers for a row of `bytes`.
  size_t perRank(size_t bytes) const { return std::max<size_t>(1, bytes / es / n); }
  size_t sendCount(size_t bytes) const {
    switch (o.coll) {
      case Coll::all_gather:
      case Coll::gather:
        return perRank(bytes);
      case Coll::reduce_scatter:
      case Coll::scatter:
      case Coll::all_to_all:
        return perRank(bytes) * n;
      default:
        return std::max<size_t>(1, bytes / es);
    }
  }
  size_t recvCount(size_t bytes) const {
    switch (o.coll) {
      case Coll::all_gather:
      case Coll::gather:
      case Coll::all_to_all:
        return perRank(bytes) * n;
      case Coll::reduce_scatter:
      case Coll::scatter:
        return perRank(bytes);
      default:
        return std::max<size_t>(1, bytes / es);
    }
  }

  void* hostSendPtr(size_t bytes) {
    if (!o.inPlace) return send.data();
    if (o.coll == Coll::all_gather || o.coll == Coll::gather) {
      return recv.data() + size_t(rank) * perRank(bytes) * es;
    }
    return recv.data();
  }
  void* hostRecvPtr(size_t bytes, int slice = 0) {
    if (o.inPlace && (o.coll == Coll::reduce_scatter || o.coll == Coll::scatter)) {
      return recv.data() + size_t(rank) * perRank(bytes) * es;
    }
    return recv.data() + size_t(slice) * recvCount(bytes) * es;
  }

  // The device address of a host-vector address (--cuda), else the address itself.
  void* onDevice(void* p) {
    if (!o.cuda) return p;
    auto* c = static_cast<unsigned char*>(p);
    if (c >= send.data() && c < send.data() + send.size()) return deviceSend + (c - send.data());
    return deviceRecv + (c - recv.data());
  }
  void* sendPtr(size_t bytes) { return onDevice(hostSendPtr(bytes)); }
  void* recvPtr(size_t bytes, int slice = 0) { return onDevice(hostRecvPtr(bytes, slice)); }

  // One call's arguments for the row prepare() set up, worked out there as other benchmarks
  // do: the timed loop makes the calls and nothing else (a division costs tens of cycles, a
  // tiny call a few hundred).
  struct CallArgs {
    void *s = nullptr, *r = nullptr;
    size_t sendCount = 0, recvCount = 0, perRank = 0;
    std::vector<void*> slices;       // the batch's recv buffers (--batch)
    unsigned char* input = nullptr;  // --rewrite: the bytes the call reads on this rank
    size_t inputBytes = 0;
  };
  CallArgs args{};

  // One call of the row the last prepare() set up.
  void once() {
    if (o.rewrite) rewriteInput();
    if (!o.async) return issue();
    // As a framework issues calls that it waits for at once (torch's synchronous collectives).
    CHECK(gyreGroupStart());
    issue();
    gyreWork_t work = nullptr;
    CHECK(gyreGroupEndAsync(&work));
    CHECK(gyreWorkWait(work, INT32_MAX));
    CHECK(gyreWorkFree(work));
  }

  // A store of the value already there to each line: the line leaves every other cache.
  void rewriteInput() {
    auto* p = static_cast<volatile unsigned char*>(args.input);
    for (size_t i = 0; i < args.inputBytes; i += 64) p[i] = p[i];
  }

  void issue() {
    const auto t = static_cast<gyreDataType_t>(o.type);
    const auto op = static_cast<gyreRedOp_t>(o.op);
    const CallArgs& a = args;
    void* s = a.s;
    void* r = a.r;
    switch (o.coll) {
      case Coll::all_reduce:
        if (o.group) CHECK(gyreGroupStart());
        for (int k = 0; k < o.batch; ++k) {
          CHECK(gyreAllReduce(o.inPlace ? a.slices[size_t(k)] : s, a.slices[size_t(k)], a.recvCount,
                              t, op, comm, stream));
        }
        if (o.group) CHECK(gyreGroupEnd());
        break;
      case Coll::reduce:
        CHECK(gyreReduce(s, r, a.recvCount, t, op, o.root, comm, stream));
        break;
      case Coll::gather:
        CHECK(gyreGather(s, r, a.perRank, t, o.root, comm, stream));
        break;
      case Coll::scatter:
        CHECK(gyreScatter(s, r, a.perRank, t, o.root, comm, stream));
        break;
      case Coll::all_to_all:
        CHECK(gyreAllToAll(s, r, a.perRank, t, comm, stream));
        break;
      case Coll::all_gather:
        CHECK(gyreAllGather(s, r, a.perRank, t, comm, stream));
        break;
      case Coll::reduce_scatter:
        CHECK(gyreReduceScatter(s, r, a.perRank, t, op, comm, stream));
        break;
      case Coll::broadcast:
        CHECK(gyreBroadcast(s, r, a.recvCount, t, o.root, comm, stream));
        break;
      case Coll::sendrecv:
        CHECK(gyreGroupStart());
        CHECK(gyreSend(s, a.sendCount, t, (rank + 1) % n, comm, stream));
        CHECK(gyreRecv(r, a.recvCount, t, (rank + n - 1) % n, comm, stream));
        CHECK(gyreGroupEnd());
        break;
    }
  }

  // Sets up a row of `bytes` for once(): works out the call's arguments, fills this rank's
  // input (where the collective reads it), poisons the output and, when checking, computes
  // the expected output.
  void prepare(size_t bytes, bool withExpected) {
    args = {sendPtr(bytes), recvPtr(bytes), sendCount(bytes), recvCount(bytes), perRank(bytes), {}};
    for (int k = 0; k < o.batch; ++k) args.slices.push_back(recvPtr(bytes, k));
    using gyre::bench::fillPeriodic;
    const bool reduces =
        o.coll == Coll::all_reduce || o.coll == Coll::reduce_scatter || o.coll == Coll::reduce;
    const RedOp valueOp = reduces ? o.op : RedOp::max;
    const size_t period = gyre::bench::patternPeriod(valueOp, n);
    std::memset(recv.data(), 0xA5, recv.size());
    if (o.inPlace && o.coll == Coll::all_reduce) {
      args.input = static_cast<unsigned char*>(hostRecvPtr(bytes));
      args.inputBytes = size_t(o.batch) * recvCount(bytes) * es;
      for (int k = 0; k < o.batch; ++k) {
        fillPeriodic(o.type, hostRecvPtr(bytes, k), sendCount(bytes), period,
                     [&](size_t i) { return patternValue(valueOp, rank, n, i); });
      }
    } else {
      args.input = static_cast<unsigned char*>(hostSendPtr(bytes));
      args.inputBytes = sendCount(bytes) * es;
      fillPeriodic(o.type, hostSendPtr(bytes), sendCount(bytes), period,
                   [&](size_t i) { return patternValue(valueOp, rank, n, i); });
    }
    if (!withExpected) return;
    const size_t rc = recvCount(bytes), per = perRank(bytes);
    switch (o.coll) {
      case Coll::all_reduce:
        fillPeriodic(o.type, expected.data(), rc, period,
                     [&](size_t i) { return reducedValue(o.op, n, i); });
        break;
      case Coll::all_gather:
        for (int r = 0; r < n; ++r) {
          fillPeriodic(o.type, expected.data() + size_t(r) * per * es, per, period,
                       [&](size_t i) { return patternValue(RedOp::max, r, n, i); });
        }
        break;
      case Coll::reduce_scatter:
        // Offsets start at rank * rc, which need not be a multiple of the period.
        for (size_t i = 0; i < rc; ++i)
          storeValue(o.type, expected.data(), i, reducedValue(o.op, n, size_t(rank) * rc + i));
        break;
      case Coll::broadcast:
        fillPeriodic(o.type, expected.data(), rc, period,
                     [&](size_t i) { return patternValue(RedOp::max, o.root, n, i); });
        break;
      case Coll::reduce:
        fillPeriodic(o.type, expected.data(), rc, period,
                     [&](size_t i) { return reducedValue(o.op, n, i); });
        break;
      case Coll::gather:
        for (size_t i = 0; i < rc; ++i)
          storeValue(o.type, expected.data(), i,
                     patternValue(RedOp::max, int(i / per), n, i % per));
        break;
      case Coll::scatter:
        for (size_t i = 0; i < rc; ++i)
          storeValue(o.type, expected.data(), i,
                     patternValue(RedOp::max, o.root, n, size_t(rank) * rc + i));
        break;
      case Coll::all_to_all:
        for (size_t i = 0; i < rc; ++i)
          storeValue(o.type, expected.data(), i,
                     patternValue(RedOp::max, int(i / per), n, size_t(rank) * per + i % per));
        break;
      case Coll::sendrecv:
        fillPeriodic(o.type, expected.data(), rc, period,
                     [&](size_t i) { return patternValue(RedOp::max, (rank + n - 1) % n, n, i); });
        break;
    }
  }

  // --cuda: the host vectors to the device, and the results back.
  void upload() {
#ifdef GYRE_BENCH_CUDA
    if (!o.cuda) return;
    cudaCheck(cudaMemcpy(deviceSend, send.data(), send.size(), cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy(deviceRecv, recv.data(), recv.size(), cudaMemcpyHostToDevice));
#endif
  }
  void finish() {
#ifdef GYRE_BENCH_CUDA
    if (o.cuda) cudaCheck(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)));
#endif
  }

  // Outputs that only root receives are checked there.
  size_t wrong(size_t bytes) {
#ifdef GYRE_BENCH_CUDA
    if (o.cuda) {
      finish();
      cudaCheck(cudaMemcpy(recv.data(), deviceRecv, recv.size(), cudaMemcpyDeviceToHost));
    }
#endif
    if ((o.coll == Coll::reduce || o.coll == Coll::gather) && rank != o.root) return 0;
    size_t bad = 0;
    for (int k = 0; k < (o.coll == Coll::all_reduce ? o.batch : 1); ++k) {
      bad += gyre::bench::countMismatches(o.type, hostRecvPtr(bytes, k), expected.data(),
                                          recvCount(bytes));
    }
    return bad;
  }

  void barrier() {
    barrier(comm);
  }
  void barrier(gyreComm_t on) {
    double x = 0;
    CHECK(gyreAllReduce(&x, &x, 1, gyreFloat64, gyreSum, on, nullptr));
  }
  double maxOverRanks(double v) {
    CHECK(gyreAllReduce(&v, &v, 1, gyreFloat64, gyreMax, comm, nullptr));
    return v;
  }
  uint64_t sumOverRanks(uint64_t v) {
    CHECK(gyreAllReduce(&v, &v, 1, gyreUint64, gyreSum, comm, nullptr));
    return v;
  }
};

// The timed iterations that take about `seconds` at this row's pace: batches of calls, four
// times longer each, until one lasts a twentieth of `seconds` (at least a millisecond) on the
// slowest rank, whose pace every rank then uses, so all run the same count. A short batch
// misjudges a pace that settles after the first calls (an emulated rdma device's: 8 calls at
// 150 us, then 30 us each). At least 5, as the peer benchmarks' minimum of 3 to 20.
// `peer`: the count the peer benchmarks (../shared/peers: mpi_bench, gloo_bench) take at the
// same pace instead, so a same-run comparison times both sides over as many calls: by default
// at least 20 and at most 1000, fewer where they would pass 10 s (at least 3). A short loop of
// small calls can keep another pace than a long one: over tcp at n = 8 a broadcast of 8 B took
// 17-19 us a call over 1000 calls and 24-27 over half a second.
struct PeerRule {  // the peer benchmarks' --min-iters, --max-iters and --max-s
  int minIters = 20;
  int maxIters = 1000;
  double maxSeconds = 10;
};

inline int itersFor(Run& run, double seconds, const PeerRule* peer) {
  constexpr int kMaxIters = 1 << 22;
  const double enough = std::max(1e-3, seconds / 20);
  for (int batch = 1;; batch *= 4) {
    run.barrier();
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < batch; ++i) run.once();
    run.finish();
    const double elapsed = run.maxOverRanks(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    if (elapsed >= enough || batch >= kMaxIters / 4) {
      const double pace = elapsed / batch;
      if (!peer) return int(std::clamp(std::ceil(seconds / pace), 5.0, double(kMaxIters)));
      double iters =
          std::clamp(std::ceil(seconds / pace), double(peer->minIters), double(peer->maxIters));
      if (iters * pace > peer->maxSeconds)
        iters = std::max(3.0, std::floor(peer->maxSeconds / pace));
      return int(std::min(iters, double(peer->maxIters)));
    }
  }
}

// Random verified collectives until `seconds` pass on rank 0 (soak.cc); 0: none wrong.
int soak(gyreComm_t comm, const Options& base, double seconds, uint64_t seed);

}  // namespace gyre::bench
