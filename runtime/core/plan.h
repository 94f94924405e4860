// Planning one call (algorithms/collective.h): the steps and channels that follow from the
// call and the links it runs over. A pure function, so every rank plans alike; the host
// collectives and the cuda_ipc kernel both plan through it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "algorithms/collective.h"

namespace gyre {

// The links a plan runs over, and how many channels it may use at most.
struct PlanShape {
  uint32_t nSlots = 8;
  size_t slotBytes = 128 * 1024;
  int maxChannels = 1;
  // Ranks host by host, `localRanks` on each of `hosts` (hierarchical.h): 1 and 1 otherwise.
  int hosts = 1;
  int localRanks = 1;
  // A tree broadcast takes the relayed tree (CollectivePlan::relayed).
  bool relayed = false;
  // A ring broadcast runs to root - 1 first (CollectivePlan::reversed).
  bool reversed = false;
  // A tree scatter takes the binomial tree (CollectivePlan::binomial).
  bool binomial = false;
  // An all-reduce by doubling halves, then doubles (CollectivePlan::halving).
  bool halving = false;
};

// `algorithm` is the tuner's choice (or a fixed one); collectives with one algorithm ignore it.
CollectivePlan planCollective(Collective coll, DataType type, uint64_t count, int root,
                              Algorithm algorithm, const PlanShape& shape);

}  // namespace gyre
