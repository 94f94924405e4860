#include "runtime/core/plan.h"

#include <algorithm>

namespace gyre {

CollectivePlan planCollective(Collective coll, DataType type, uint64_t count, int root,
                              Algorithm algorithm, const PlanShape& shape) {
  const size_t es = dataTypeSize(type);
  CollectivePlan plan;
  plan.coll = coll;
  plan.root = root;
  plan.count = count;
  // The algorithms each collective has; anything else runs its ring (or only algorithm).
  const bool tree =
      algorithm == Algorithm::tree &&
      (coll == Collective::all_reduce || coll == Collective::broadcast ||
       coll == Collective::reduce || coll == Collective::gather || coll == Collective::scatter);
  const bool doubling = algorithm == Algorithm::doubling &&
                        (coll == Collective::all_reduce || coll == Collective::all_gather ||
                         coll == Collective::reduce_scatter || coll == Collective::all_to_all);
  const bool hierarchical = algorithm == Algorithm::hierarchical &&
                            (coll == Collective::all_reduce || coll == Collective::all_gather ||
                             coll == Collective::reduce_scatter) &&
                            shape.hosts > 1 && shape.localRanks > 1;
  plan.algorithm = tree                             ? Algorithm::tree
                   : doubling                       ? Algorithm::doubling
                   : hierarchical                   ? Algorithm::hierarchical
                   : coll == Collective::all_to_all ? Algorithm::pairwise
                   : coll == Collective::barrier    ? Algorithm::dissemination
                                                    : Algorithm::ring;
  plan.slotElems = std::max<size_t>(1, shape.slotBytes / es);
  plan.chunkElems = std::max<size_t>(1, size_t(shape.nSlots / 2) * shape.slotBytes / es);
  plan.ahead = int(std::max<uint32_t>(1, shape.nSlots / 2) - 1);
  plan.relayed = tree && coll == Collective::broadcast && shape.relayed;
  plan.reversed =
      plan.algorithm == Algorithm::ring && coll == Collective::broadcast && shape.reversed;
  plan.binomial = tree && coll == Collective::scatter && shape.binomial;
  plan.halving = doubling && coll == Collective::all_reduce && shape.halving;
  if (hierarchical) {
    plan.hosts = shape.hosts;
    plan.localRanks = shape.localRanks;
  }
  // At least one slot's worth of a ring step per channel.
  plan.channels = splitsOverChannels(coll, plan.algorithm)
                      ? int(std::clamp<uint64_t>(count / plan.slotElems, 1,
                                                 uint64_t(std::max(1, shape.maxChannels))))
                      : 1;
  return plan;
}

}  // namespace gyre
