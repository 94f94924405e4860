// One collective over links in GPU memory, as the kernel runs it: every channel (a thread
// block on the device, a thread in the tests) takes its part of the buffers and runs the plan
// through the same runChannel the host runs (algorithms/collective.h), over SlotPrims. The
// host fills a DeviceCall; the kernel (algorithms/device_collectives.cu) calls
// runDeviceChannel once per block. C++17.
#pragma once

#include "algorithms/collective.h"
#include "algorithms/slot_prims.h"
#include "gyre/types.h"

namespace gyre {

// Everything a kernel needs, passed by value as its parameter.
struct DeviceCall {
  DeviceLinkTable links;
  DeviceFailure* failures;       // one per channel (mapped host memory)
  const DeviceControl* control;  // the host's abort word (mapped host memory)
  const void* send;
  void* recv;
  CollectivePlan plan;  // plan.channels blocks
  uint64_t seq;         // this communicator's device calls, numbered alike on every rank
  uint64_t timeoutNs;
  int32_t rank;
  int32_t nranks;
  DataType dtype;
  RedOp op;
};

// Whether a call of `coll` can run over device links.
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

// Runs channel `c` of `call`; false when it failed (the failure is in call.failures[c]).
template <class Env>
GYRE_HD bool runDeviceChannel(Env& env, const DeviceCall& call, int c) {
  const CollectivePlan& plan = call.plan;
  // Plans that do not split run on channel 0 alone (trees reach beyond the ring neighbours,
  // which only channel 0 links).
  if (c > 0 && !splitsOverChannels(plan.coll, plan.algorithm)) return true;
  const ChannelPart part = channelPart(plan, c, call.rank, call.send, call.recv, env.elemSize());
  SlotMeta expected;
  expected.setOp(OpDesc{call.seq, plan.count, plan.root, plan.coll, call.dtype, call.op});
  algo::SlotPrims<Env> p(env, call.links, c, call.rank, call.nranks, expected, part.in, part.out,
                         call.timeoutNs);
  runChannel(p, plan, call.rank, call.nranks, part.len);
  return !p.failed();
}

}  // namespace gyre
