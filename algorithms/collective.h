// One collective as every executor runs it. The runtime plans a call once (which algorithm,
// how many channels, the step sizes: runtime/core/plan); then each channel takes its part
// of the user's buffers (channelPart) and runs the algorithm over its executor's primitives
// (runChannel): HostPrims on the calling thread and the channel workers, SlotPrims in the
// collective kernel. C++17 and nvcc-clean.
#pragma once

#include <cstdint>

#include "algorithms/prims.h"
#include "gyre/types.h"

namespace gyre {

// oneshot: every rank posts once into a host window and reads the others' posts
// (algorithms/oneshot.h); directRead: every rank reads the others' inputs through the kernel
// and reduces them itself (all-reduce over a host window). Both host-only: the runtime runs
// them before any plan.
enum class Algorithm : uint8_t {
  ring,
  tree,
  doubling,
  pairwise,
  dissemination,
  hierarchical,
  oneshot,
  directRead
};

struct CollectivePlan {
  Collective coll = Collective::all_reduce;
  Algorithm algorithm = Algorithm::ring;
  int32_t channels = 1;  // the ring collectives split their elements among them
  int32_t root = -1;
  uint64_t count = 0;       // the call's count: per rank for the gathers and scatters
  uint64_t chunkElems = 1;  // a ring step's or an exchange's chunk: half a link
  uint64_t slotElems = 1;   // a slot's elements: doubling goes slot by slot
  int32_t ahead = 0;        // slots an exchange keeps in flight beyond the one it waits for
  // Hosts, and ranks on each, where ranks lie host by host (hierarchical.h); else 1 and n.
  int32_t hosts = 1;
  int32_t localRanks = 1;
  // A tree broadcast down the relayed tree (tree.h: relayedBinomialNode).
  bool relayed = false;
  // A ring broadcast from the root to root - 1 first (ring.h: ringBroadcast).
  bool reversed = false;
  // A tree scatter down the binomial tree (tree.h: binomialScatter), else the flat one.
  bool binomial = false;
  // An all-reduce by doubling halves, then doubles (doubling.h: halvingDoublingAllReduce) where
  // n is a power of two, else moves the whole buffer at each step.
  bool halving = false;
};

// Whether the plan splits its elements over channels (the rings of all-reduce, all-gather,
// reduce-scatter and broadcast); every other plan runs on channel 0 alone.
GYRE_HD inline bool splitsOverChannels(Collective coll, Algorithm algorithm) {
  return algorithm == Algorithm::ring &&
         (coll == Collective::all_reduce || coll == Collective::all_gather ||
          coll == Collective::reduce_scatter || coll == Collective::broadcast);
}

// Elements [lo, hi) of `count` that channel c of `channels` moves.
GYRE_HD inline void channelSlice(uint64_t count, int c, int channels, uint64_t& lo, uint64_t& hi) {
  lo = count * uint64_t(c) / uint64_t(channels);
  hi = count * uint64_t(c + 1) / uint64_t(channels);
}

// What one channel works on: its input and output (null where this rank has none: a
// broadcast's or scatter's non-root input, a reduce's or gather's non-root output) and its
// length in elements.
struct ChannelPart {
  const unsigned char* in;
  unsigned char* out;
  uint64_t len;
};
GYRE_HD inline ChannelPart channelPart(const CollectivePlan& plan, int c, int rank,
                                       const void* send, void* recv, size_t elemSize) {
  uint64_t lo = 0, hi = plan.count;
  if (plan.channels > 1 && splitsOverChannels(plan.coll, plan.algorithm)) {
    channelSlice(plan.count, c, plan.channels, lo, hi);
  }
  const bool isRoot = rank == plan.root;
  const bool inAtRoot = plan.coll == Collective::broadcast || plan.coll == Collective::scatter;
  const bool outAtRoot = plan.coll == Collective::reduce || plan.coll == Collective::gather;
  const auto* in = static_cast<const unsigned char*>(send);
  auto* out = static_cast<unsigned char*>(recv);
  ChannelPart part;
  part.in = in && (isRoot || !inAtRoot) ? in + lo * elemSize : nullptr;
  part.out = out && (isRoot || !outAtRoot) ? out + lo * elemSize : nullptr;
  part.len = hi - lo;
  return part;
}

// Runs one channel's part of `plan` over `p` (built on that channel's ChannelPart). Plans
// the executor cannot run (a collective outside the switch) run nothing.
template <class Prims>
GYRE_HD void runChannel(Prims& p, const CollectivePlan& plan, int rank, int n, uint64_t len) {
  namespace a = algo;
  const size_t count = size_t(plan.count), part = size_t(len);
  const size_t chunk = size_t(plan.chunkElems), slot = size_t(plan.slotElems);
  const int root = plan.root;
  switch (plan.coll) {
    case Collective::all_reduce:
      if (plan.algorithm == Algorithm::tree) return a::doubleTreeAllReduce(p, rank, n, part, chunk);
      if (plan.algorithm == Algorithm::doubling && plan.halving && (n & (n - 1)) == 0) {
        return a::halvingDoublingAllReduce(p, rank, n, part, slot, plan.ahead);
      }
      if (plan.algorithm == Algorithm::doubling) {
        return a::doublingAllReduce(p, rank, n, part, slot, plan.ahead);
      }
      if (plan.algorithm == Algorithm::hierarchical) {
        return a::hierarchicalAllReduce(p, rank, a::HostBlocks{plan.hosts, plan.localRanks}, part,
                                        chunk);
      }
      return a::ringAllReduce(p, rank, n, part, chunk);
    case Collective::all_gather:
      if (plan.algorithm == Algorithm::doubling) {
        return a::doublingAllGather(p, rank, n, part, slot, plan.ahead);
      }
      if (plan.algorithm == Algorithm::hierarchical) {
        return a::hierarchicalAllGather(p, rank, a::HostBlocks{plan.hosts, plan.localRanks}, part,
                                        count, chunk);
      }
      return a::ringAllGatherBlocks(p, rank, n, a::StridedBlocks{part, count}, chunk);
    case Collective::reduce_scatter:
      if (plan.algorithm == Algorithm::hierarchical) {
        return a::hierarchicalReduceScatter(p, rank, a::HostBlocks{plan.hosts, plan.localRanks},
                                            part, count, chunk);
      }
      return a::ringReduceScatter(p, rank, n, part, chunk, count);
    case Collective::broadcast:
      if (plan.algorithm == Algorithm::tree) {
        return a::binomialBroadcast(p, rank, n, root, part, plan.relayed);
      }
      return a::ringBroadcast(p, rank, n, root, part, chunk, plan.reversed);
    case Collective::reduce:
      if (plan.algorithm == Algorithm::tree) return a::binomialReduce(p, rank, n, root, part);
      return a::ringReduce(p, rank, n, root, part);
    case Collective::gather:
      if (plan.algorithm == Algorithm::tree) return a::flatGather(p, rank, n, root, part);
      return a::ringGather(p, rank, n, root, part);
    case Collective::scatter:
      if (plan.algorithm == Algorithm::tree) {
        return plan.binomial ? a::binomialScatter(p, rank, n, root, part)
                             : a::flatScatter(p, rank, n, root, part);
      }
      return a::ringScatter(p, rank, n, root, part);
    case Collective::all_to_all:
      if (plan.algorithm == Algorithm::doubling) {
        return a::bruckAllToAll(p, rank, n, part, slot, plan.ahead);
      }
      return a::pairwiseAllToAll(p, rank, n, a::EqualExchange{part}, chunk);
    case Collective::barrier:
      return a::disseminationBarrier(p, rank, n);
    default:
      return;
  }
}

}  // namespace gyre
