// One collective over links in GPU memory, as the kernel runs it: every channel (a thread
// block on the device, a thread in the tests) takes its slice of the buffers and runs the same
// algorithm headers the host runs, over SlotPrims. The host fills a DeviceCall; the kernel
// (algorithms/device_collectives.cu) calls runDeviceChannel once per block. C++17.
#pragma once

#include "algorithms/prims.h"
#include "algorithms/slot_prims.h"
#include "gyre/types.h"

namespace gyre {

enum class DeviceAlgorithm : uint8_t { ring = 0, tree = 1 };

// Everything a kernel needs, passed by value as its parameter.
struct DeviceCall {
  DeviceLinkTable links;
  DeviceFailure* failures;       // one per channel (mapped host memory)
  const DeviceControl* control;  // the host's abort word (mapped host memory)
  const void* send;
  void* recv;
  uint64_t count;  // the collective's count, as in the host descriptor
  uint64_t seq;    // this communicator's device calls, numbered alike on every rank
  uint64_t timeoutNs;
  uint64_t chunkElems;  // a ring step's most elements: half a link
  int32_t rank;
  int32_t nranks;
  int32_t root;
  int32_t channels;  // blocks; ring collectives split the buffers among them
  Collective coll;
  DataType dtype;
  RedOp op;
  DeviceAlgorithm algorithm;
};

// Elements [lo, hi) of `count` that channel c of `channels` moves (as the host splits).
GYRE_HD inline void channelSlice(uint64_t count, int c, int channels, uint64_t& lo, uint64_t& hi) {
  lo = count * uint64_t(c) / uint64_t(channels);
  hi = count * uint64_t(c + 1) / uint64_t(channels);
}

// Whether a call of `coll` can run over device links, and with how many channels at most
// (those the buffers are split over; the others run on channel 0 alone).
GYRE_HD inline bool deviceCallSupported(Collective coll) {
  switch (coll) {
    case Collective::all_reduce:
    case Collective::all_gather:
    case Collective::reduce_scatter:
    case Collective::broadcast:
    case Collective::reduce:
    case Collective::gather:
    case Collective::scatter:
    case Collective::all_to_all:
      return true;
    default:
      return false;
  }
}
GYRE_HD inline bool deviceCallSplits(Collective coll) {
  return coll == Collective::all_reduce || coll == Collective::all_gather ||
         coll == Collective::reduce_scatter || coll == Collective::broadcast;
}

// Runs channel `c` of `call`; false when it failed (the failure is in call.failures[c]).
template <class Env>
GYRE_HD bool runDeviceChannel(Env& env, const DeviceCall& call, int c) {
  namespace a = algo;
  const size_t es = env.elemSize();
  const bool tree = call.algorithm == DeviceAlgorithm::tree;
  // Trees reach beyond ring neighbours, which only channel 0 links: they run on it alone.
  if (tree && c > 0) return true;
  uint64_t lo = 0, hi = call.count;
  if (deviceCallSplits(call.coll) && !tree) channelSlice(call.count, c, call.channels, lo, hi);
  const size_t len = size_t(hi - lo);
  const auto* send = static_cast<const unsigned char*>(call.send);
  auto* recv = static_cast<unsigned char*>(call.recv);
  const int r = call.rank, n = call.nranks, root = call.root;
  const bool isRoot = r == root;
  SlotMeta expected;
  expected.setOp(OpDesc{call.seq, call.count, call.root, call.coll, call.dtype, call.op});
  const unsigned char* in = send ? send + lo * es : nullptr;
  unsigned char* out = recv ? recv + lo * es : nullptr;
  const size_t chunk = size_t(call.chunkElems);

  switch (call.coll) {
    case Collective::all_reduce: {
      a::SlotPrims<Env> p(env, call.links, c, r, n, expected, in, out, call.timeoutNs);
      if (tree) {
        a::doubleTreeAllReduce(p, r, n, len, chunk);
      } else {
        a::ringAllReduce(p, r, n, len, chunk);
      }
      return !p.failed();
    }
    case Collective::all_gather: {
      a::SlotPrims<Env> p(env, call.links, c, r, n, expected, in, out, call.timeoutNs);
      a::ringAllGatherBlocks(p, r, n, a::StridedBlocks{len, size_t(call.count)}, chunk);
      return !p.failed();
    }
    case Collective::reduce_scatter: {
      a::SlotPrims<Env> p(env, call.links, c, r, n, expected, in, out, call.timeoutNs);
      a::ringReduceScatter(p, r, n, len, chunk, size_t(call.count));
      return !p.failed();
    }
    case Collective::broadcast: {
      a::SlotPrims<Env> p(env, call.links, c, r, n, expected, isRoot ? in : nullptr, out,
                          call.timeoutNs);
      if (tree) {
        a::binomialBroadcast(p, r, n, root, len);
      } else {
        a::ringBroadcast(p, r, n, root, len, chunk);
      }
      return !p.failed();
    }
    case Collective::reduce: {
      a::SlotPrims<Env> p(env, call.links, c, r, n, expected, in, isRoot ? out : nullptr,
                          call.timeoutNs);
      if (tree) {
        a::binomialReduce(p, r, n, root, len);
      } else {
        a::ringReduce(p, r, n, root, len);
      }
      return !p.failed();
    }
    case Collective::gather: {
      a::SlotPrims<Env> p(env, call.links, c, r, n, expected, in, isRoot ? out : nullptr,
                          call.timeoutNs);
      a::ringGather(p, r, n, root, len);
      return !p.failed();
    }
    case Collective::scatter: {
      a::SlotPrims<Env> p(env, call.links, c, r, n, expected, isRoot ? in : nullptr, out,
                          call.timeoutNs);
      a::ringScatter(p, r, n, root, len);
      return !p.failed();
    }
    case Collective::all_to_all: {
      a::SlotPrims<Env> p(env, call.links, c, r, n, expected, in, out, call.timeoutNs);
      a::pairwiseAllToAll(p, r, n, a::EqualExchange{len}, chunk);
      return !p.failed();
    }
    default:
      return false;
  }
}

}  // namespace gyre
