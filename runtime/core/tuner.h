// Picks the algorithm for each call from a cost model, time = steps·α + bytes·factor/β,
// with α and β per link kind (docs/tuning.md has the model, the measured defaults and how
// they were measured). GYRE_ALGO forces an algorithm where the collective has it.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "algorithms/collective.h"
#include "gyre/types.h"

namespace gyre {

const char* algorithmName(Algorithm a);  // "ring", "tree", "rd", ...
// The algorithm GYRE_ALGO (or gyreConfig_t's algorithm) forces: "ring", "tree", "rd",
// "pairwise", "hier", "oneshot" or "read"; nullopt for "" or "auto" (the tuner chooses);
// anything else throws InvalidArgument.
std::optional<Algorithm> forcedAlgorithm(const std::string& name);

struct LinkCost {
  double alphaUs;      // fixed cost of one dependent step, microseconds
  double betaBytesUs;  // bytes per microsecond one link sustains
  // Bytes per byte of a step that moves and reduces the whole buffer (recursive doubling):
  // over tcp both socket copies come on top of the reduction; over shared memory the
  // receiver reduces straight out of the slot the sender wrote.
  double wholeBufferStep;
  // Bytes of the trees relative to the ring's: their data takes extra local passes (tree
  // levels), which memory or the cores pay for.
  double extraPassBytes;
  // The same for Bruck's all-gather (its rotations): over tcp they cost less beside the
  // sockets' copies than the trees' passes do.
  double bruckPassBytes;
  // Rings that may run side by side, each on its own sockets and thread (channels): as many
  // as every rank has cores to itself, at most kMaxAutoChannels; 1 where the link itself is
  // the limit (shared memory is bound by memory, not by one core's copying).
  int maxChannels = 1;
  // A tree's root pays once per child: for a broadcast's sends, a reduce's receives. Through
  // one egress link (a host's network link) every byte a rank sends leaves through the same
  // wire; over tcp where ranks share cores, a reduce's root takes each child's buffer through a
  // socket copy of its own on a shared core. Loopback and memory have no such bottleneck.
  bool treeBroadcastRootPerChild = false;
  bool treeReduceRootPerChild = false;
  // More ranks than cores: a rank often waits for one that shares its core.
  bool coresShared = false;
  // Shared memory whose ranks' CPUs sit far apart (the set-up probe): copies through slots
  // slow down, a copy through the kernel does not. Priced only where ranks have cores.
  bool farApart = false;
  // Where the probe put the CPUs, priced or not (ranks that share cores: only the stores
  // follow it).
  bool placedFar = false;
  // Far apart with `streamsWhenFar`: the ranks fill their slots with streaming stores
  // (OpContext::streamSlots follows this), and where ranks have cores the link is priced so.
  bool slotsStreamed = false;
  // Close by, where ranks have cores and the stores follow the placement, two-rank window
  // broadcasts below this are priced at kShmCloseWindowBroadcastBytes of their bytes
  // (docs/tuning_shm.md).
  size_t closeWindowBroadcastsBelow = 0;
  // Where ranks share cores and the scheduler places them, a tree's inner ranks feed two
  // children from a shared core while a chain's ranks each pass one slot on: broadcasts below
  // `treeBroadcastFrom` and reduces from `chainReducesFrom` go down the chain (measured per
  // link kind, docs/tuning.md).
  size_t treeBroadcastFrom = 0;
  size_t chainReducesFrom = SIZE_MAX;
  // Ranks that share cores but are each held on CPUs of their block (pinned): a chain's
  // hand-overs wait for the other ranks of its CPU in turn, while a tree's subtrees run on
  // both CPUs at once. Broadcasts and reduces take the tree (or the window) at every size.
  bool chainsWaitForCores = false;
  // Except the reduces where n is not a power of two, whose blocks cut the binomial tree's
  // subtrees: they take the chain from pinnedChainReducesFrom, or from
  // pinnedChainReduceBytesPerHop times the hops the chain has beyond the tree's depth where
  // that is more (Tuner::pinnedChainReducesFrom).
  size_t pinnedChainReducesFrom = SIZE_MAX;
  size_t pinnedChainReduceBytesPerHop = 0;
  // Where n is a power of two, from this size (the tree's reduce falls behind as the buffer
  // outgrows the caches).
  size_t pinnedPow2ChainReducesFrom = SIZE_MAX;
  // There, over tcp, where a broadcast from rank 0 down the chain keeps the busiest block's CPU
  // less busy than down the binomial tree: broadcasts take the chain at every size
  // (Tuner::pinnedInBlocksOverTcp).
  bool chainBroadcasts = false;
  // Tree broadcasts below this take the relayed tree every other call (algorithms/tree.h:
  // relayedBinomialNode), so the root's CPU does not make the root's sends every call.
  size_t relayedBroadcastsBelow = 0;
  // Tree scatters below this go down the binomial tree instead of the flat one: log2(n) sends
  // on the root, where each send costs more than its bytes (a socket's).
  size_t binomialScattersBelow = 0;
  // Where ranks share cores, the gathers (all-gather, gather) from this size fill their slots
  // rather than leave payloads for the receivers' single copy: the copies then split between
  // the senders and the receivers on both cores (docs/perf/fresh_data.md, "Gathers through
  // slots where ranks share cores").
  size_t gathersSingleCopyBelow = SIZE_MAX;
  // The same for the scatters, whose many receivers share the copying, from a larger size.
  size_t scattersSingleCopyBelow = SIZE_MAX;
  // There, from these sizes, the collectives below read directly (where every rank may read
  // every other and the kernel's copy is not slow), the only candidate: readsDirectlyOnSharedCores.
  // The all-gather reads the other ranks' inputs; from kManyRanksOnShared ranks, from the
  // second size.
  size_t sharedCoresDirectGathersFrom = SIZE_MAX;
  size_t sharedCoresDirectGathersFromManyRanks = SIZE_MAX;
  static constexpr int kManyRanksOnShared = 8;
  // The gathers, scatters and all-to-alls move each block once through the kernel.
  size_t sharedCoresDirectBlocksFrom = SIZE_MAX;
  // The broadcasts read the root's buffer: from kBroadcastReadersOnShared ranks; four ranks
  // from the second size; fewer never.
  size_t sharedCoresDirectBroadcastsFrom = SIZE_MAX;
  size_t sharedCoresDirectBroadcastsFromFourRanks = SIZE_MAX;
  static constexpr int kBroadcastReadersOnShared = 6;
  // The all-reduces from this size while all n buffers together stay within the footprint.
  size_t sharedCoresDirectAllReducesFrom = SIZE_MAX;
  size_t sharedCoresDirectAllReducesFootprint = 0;
  bool readsDirectlyOnSharedCores(Collective coll, size_t bytes, int n) const {
    if (coll == Collective::all_reduce) {
      return bytes >= sharedCoresDirectAllReducesFrom &&
             bytes <= sharedCoresDirectAllReducesFootprint / size_t(n);
    }
    return bytes >= sharedCoresDirectReadsFrom(coll, n);
  }
  size_t sharedCoresDirectReadsFrom(Collective coll, int n) const {
    switch (coll) {
      case Collective::all_gather:
        return n >= kManyRanksOnShared ? sharedCoresDirectGathersFromManyRanks
                                       : sharedCoresDirectGathersFrom;
      case Collective::broadcast:
        return n >= kBroadcastReadersOnShared ? sharedCoresDirectBroadcastsFrom
               : n == 4                       ? sharedCoresDirectBroadcastsFromFourRanks
                                              : SIZE_MAX;
      case Collective::gather:
      case Collective::scatter:
      case Collective::all_to_all:
        return sharedCoresDirectBlocksFrom;
      default:
        return SIZE_MAX;
    }
  }
  // Where set (tcp where ranks share cores), all-gathers of n > 2 take Bruck below this and
  // the ring from it, whatever the model says: the crossing measured there lies at the same
  // size for n = 4, 6 and 8, where the model's moves with n.
  size_t bruckAllGathersBelow = 0;
  // All-to-alls take Bruck's only below this, where the model may pick it (shared memory: its
  // passes through slots cost more there than its price says).
  size_t bruckAllToAllsBelow = SIZE_MAX;
  // Likewise reduce-scatters take `rd` (recursive halving for a power-of-two n, else the
  // whole buffer all-reduced by doubling, from n = 3) below these, the ring from them, and
  // all-reduces of n > 2 the doubling below `doublingAllReducesBelow`, the ring or the tree
  // (the model's choice of the two) from it.
  size_t halvingReduceScattersBelow = 0;
  size_t doublingReduceScattersBelow = 0;
  size_t doublingAllReducesBelow = 0;
  // All-reduces from this size do not take the window's posts (shared memory where ranks share
  // cores, with the bound above: the slots' ring from it).
  size_t windowAllReducesBelow = SIZE_MAX;
  // From there to below this, all-reduces of a power-of-two n take `rd` too (halving, then
  // doubling, there), but where the tree's band below takes them.
  size_t halvingAllReducesBelow = 0;
  // Bytes of the reduce-scatter's recursive halving relative to the ring's (its log2(n) steps
  // move the ring's bytes, in pieces that halve); 0 where it is priced as the whole-buffer
  // doubling instead (shared memory, where it never led the ring outside the window's sizes).
  double halvingPassBytes = 0;
  // All-reduces of `treeAllReducesFrom` up to below `treeAllReducesBelow` take the tree at n of
  // `treeAllReducesFromRanks` or more, whatever the model says (tcp where ranks share cores,
  // measured with 8 on 2: the ring's steps and the doubling's whole-buffer exchanges wait for
  // the ranks of a core in turn, where a tree's subtrees run on every core at once).
  size_t treeAllReducesFrom = SIZE_MAX;
  size_t treeAllReducesBelow = 0;
  int treeAllReducesFromRanks = 0;
};

struct Choice {
  Algorithm algorithm;
  double predictedUs;
  bool forced;  // by GYRE_ALGO (or the communicator's config)
};

class Tuner {
 public:
  // `forced`: a GYRE_ALGO name (forcedAlgorithm). `chunkBytes`: the data a round puts on a link
  // (half a link's slots); `slotBytes`: one slot, the unit a chain forwards (a hop passes a slot on
  // before the next one arrives).
  Tuner(LinkCost link, const std::string& forced, size_t chunkBytes, size_t slotBytes);
  static constexpr int kMaxAutoChannels = 4;
  // A channel past the first costs a thread per call: it must carry at least this much.
  static constexpr size_t kBytesPerExtraChannel = size_t(2) << 20;

  // The tcp figures measured on loopback (docs/tuning.md). `coresPerRank`: the fewest cores
  // any rank has to itself (its cores over the ranks on its host); each tcp stream is copied
  // by one core at each end, so more streams pay only with more cores.
  static LinkCost tcpLoopback(int coresPerRank = 1, bool ranksHaveCores = true);
  // Shared memory between ranks on this machine; a step costs a futex wake-up and a trip
  // through the scheduler unless every rank has a core to poll on. `roundTripNs`: a cache
  // line's round trip between two ranks' CPUs, measured over the host window (0: unmeasured);
  // far apart, copies through shared memory slow down and fewer, larger steps pay.
  // `streamsWhenFar`: far apart, the ranks fill their slots with streaming stores
  // (GYRE_SLOT_STORES=auto), which the reader takes from memory at nearly the close pace.
  static LinkCost sharedMemory(bool ranksHaveCores, double roundTripNs = 0,
                               bool streamsWhenFar = true);
  // The same where the CPUs are known to sit close or `farApart` (a round trip of 440 ns or
  // more, two lines bounced, counts as far).
  static LinkCost sharedMemoryAt(bool ranksHaveCores, bool farApart, bool streamsWhenFar = true);
  static bool farApart(double roundTripNs);
  // A probe during calls where the tuner's placement `wasFar`: far apart stays so down to 340 ns,
  // so that round trips about the bound do not swap the tuners at every probe.
  static bool stillFarApart(double roundTripNs, bool wasFar);
  // A round trip under 80 ns: the probed CPUs share a core's caches (two hardware threads of one
  // core: 47-48 ns where other cores took 93-116 and far ones 475-550). There the window's
  // one-shot took a two-rank broadcast of 16 KiB in 0.72 us and the streamed ring in 2.1-2.2, so
  // such broadcasts keep cached slots and their price (docs/tuning_shm.md).
  static bool sharesCache(double roundTripNs);
  void setCacheShared(bool shared) { cacheShared_ = shared; }
  bool cacheShared() const { return cacheShared_; }
  // tcp between hosts: a datacenter network of `gbits` Gbit/s per host link (GYRE_NET_GBITS,
  // default 10; docs/tuning.md).
  static LinkCost tcpNetwork(int coresPerRank = 1, double gbits = 10);
  // `shared` (a link where ranks share cores) for ranks that are pinned to CPUs of their own
  // block of ranks (gyre-run --bind auto), not placed by the scheduler.
  static LinkCost pinnedInBlocks(LinkCost shared);
  // Where ranks pinned in blocks take the chain's reduce at n (SIZE_MAX: nowhere).
  size_t pinnedChainReducesFrom(int n) const;
  // Over tcp on one host with the ranks pinned in two blocks of CPUs (n even, so the relay n/2
  // after the root sits in the other block): small tree broadcasts alternate the two trees,
  // and the tree's all-reduces reach 1 MiB.
  static LinkCost pinnedInTwoBlocksOverTcp(LinkCost pinned);
  // Over tcp on one host with the ranks pinned in blocks, rank r on the CPUs cpusOfRank[r]:
  // sets chainBroadcasts where a broadcast from rank 0 down the chain, either way, makes fewer
  // socket calls on its busiest block than down the binomial tree (docs/tuning_tcp.md).
  static LinkCost pinnedInBlocksOverTcp(LinkCost pinned,
                                        const std::vector<std::vector<int>>& cpusOfRank);
  // There, per root: whether its chain broadcast runs to root - 1 first (CollectivePlan::
  // reversed), where that way makes fewer socket calls on the busiest block.
  static std::vector<bool> reversedChains(const std::vector<std::vector<int>>& cpusOfRank);
  // The sends and receives a broadcast from `root` makes on its busiest block of ranks, rank r
  // in block blockOfRank[r]: a small tcp broadcast in a loop runs at that block's pace.
  enum class BroadcastShape { tree, chain, reversedChain };
  static int busiestBlockCalls(const std::vector<int>& blockOfRank, BroadcastShape shape, int root);

  // Ranks lie host by host, `localRanks` on each of `hosts`, and reach each other inside a
  // host over `intraHost`: the hierarchical all-reduce becomes a candidate, priced with
  // `intraHost` inside the hosts and the tuner's link between them.
  void setHosts(int hosts, int localRanks, LinkCost intraHost);
  // Every rank shares a host window whose posts hold `capacity` bytes: the one-shot
  // collectives become candidates for calls whose post fits (0: none).
  void setOneShot(size_t capacity);
  // Every rank may read every other's memory through the kernel (process_vm_readv) and shares
  // the host window: the direct-read collectives become candidates.
  void setDirectRead(bool available);
  // The kernel's copy is slow here against a memcpy (measured at set-up): the direct reads are
  // no candidates, though GYRE_ALGO=read still forces them.
  void setKernelCopySlow(bool slow) { kernelCopySlow_ = slow; }
  // Whether the all-to-all has Bruck's (`rd`): not where a link may run over rdma, where it ran
  // past its deadline in the Soft-RoCE guest, untraced (docs/rdma.md); GYRE_ALGO=rd then
  // leaves the all-to-all to the model, as for a collective rd does not implement.
  void setBruckAllToAll(bool available) { bruckAllToAll_ = available; }
  // A copy of 1 MiB through the kernel took `us` here (rank 0's set-up figure; 0: unmeasured).
  // The direct all-reduce, whose bytes go through two such copies, was priced where it took
  // 104 us; its pace, and the direct gather's and scatter's, follows the figure, within a
  // factor of 3 (docs/tuning_shm.md).
  void setKernelCopyUs(double us) {
    kernelCopyPace_ = us > 0 ? std::clamp(kPricedKernelCopyUs / us, 1.0 / 3, 3.0) : 1.0;
  }
  // Prices every call with `link` from now on (the same on every rank).
  void setLink(LinkCost link);
  // Whether the tree broadcast of call `seq` (the same on every rank) takes the relayed tree.
  bool relaysBroadcast(size_t bytes, uint64_t seq) const {
    return bytes < link_.relayedBroadcastsBelow && seq % 2 == 1;
  }
  // Whether a tree scatter of `bytes` (the scattered whole) takes the binomial tree.
  bool binomialScatter(size_t bytes) const { return bytes < link_.binomialScattersBelow; }
  // Whether an all-reduce by doubling halves, then doubles (n a power of two, where the link
  // prices the halving and that price is the lower).
  bool halvesAllReduce(size_t bytes, int nranks) const;

  // `bytes` is the collective's size as nccl-tests counts it: the buffer for all_reduce,
  // broadcast and reduce, the gathered (or scattered) whole for the others.
  Choice choose(Collective coll, size_t bytes, int nranks) const;
  // The algorithms the measured choice tries (runtime/core/measured_choice.h): `pick` (the
  // model's choice) first, then every other that runs this call, hierarchical aside, whose
  // predicted time is at most kTrialSpread times the pick's, the fastest predicted first. The
  // candidates' rules are left out: they keep the model's picks from where it was measured to
  // misprice them, and the trials measure.
  std::vector<Algorithm> trialAlgorithms(const Choice& pick, Collective coll, size_t bytes,
                                         int nranks) const;
  // The direct read's fixed cost is priced at 3.5 us at n = 2 where it took 1.4-1.6 on the mesh
  // of 2026-12-04: its broadcast of 16 KiB was predicted 5.5 times the window's time.
  static constexpr double kTrialSpread = 6;
  // Why choose() chose that, with every candidate's prediction (for GYRE_DEBUG=INFO).
  std::string explain(const Choice& choice, Collective coll, size_t bytes, int nranks) const;
  // Rings for a ring collective of `bytes`: up to the link's maxChannels, each carrying at
  // least kBytesPerExtraChannel (docs/tuning.md). Every rank computes the same number.
  int channels(size_t bytes) const;
  int maxChannels() const { return link_.maxChannels; }
  const LinkCost& link() const { return link_; }
  // How one call writes its shared-memory slots: `streamed` with streaming stores
  // (OpContext::streamSlots); `spread`, its payloads spread (OpContext::spreadSlots) where every
  // rank has a core and the probed CPUs sit close but do not share a core's caches, and the
  // slots are not streamed. Spreading is not priced: the slots and the window gain alike
  // (docs/tuning_shm.md).
  // `singleCopy`: a receiver may copy payloads straight from the sender's memory (shm), except
  // in the gathers from LinkCost::gathersSingleCopyBelow and the scatters from
  // scattersSingleCopyBelow.
  struct SlotWrites {
    bool streamed = false;
    bool spread = false;
    bool singleCopy = true;
  };
  SlotWrites slotWrites(Collective coll, size_t bytes) const;
  bool streamsSlots(Collective coll, size_t bytes) const {
    return slotWrites(coll, bytes).streamed;
  }
  bool spreadsSlots(Collective coll, size_t bytes) const { return slotWrites(coll, bytes).spread; }
  bool forced() const { return forced_; }
  // Predicted time of `a` for this call; < 0 when `a` does not implement `coll`.
  double predictUs(Algorithm a, Collective coll, size_t bytes, int nranks) const;

 private:
  bool candidate(Algorithm a, Collective coll, size_t bytes,
                 int n) const;                // for an automatic choice
  double halvingAllReduceBytes(int n) const;  // the factor of halving, then doubling
  double priceUs(double steps, double factor, size_t bytes) const;  // the model's time
  // The measured bound below which `rd` takes a call of `coll` and from which it does not (the
  // link's Bruck, doubling and halving bounds); 0 where the model decides.
  size_t doublingBound(Collective coll, int n) const;
  LinkCost link_;
  LinkCost intraHost_{};
  int hosts_ = 1;
  int localRanks_ = 1;
  size_t oneShotCapacity_ = 0;
  size_t smallPost_ = 0;  // the largest payload a post keeps in its piece of the data blocks
  bool directRead_ = false;
  bool kernelCopySlow_ = false;
  bool bruckAllToAll_ = true;
  static constexpr double kPricedKernelCopyUs = 104;
  static constexpr double kPricedKernelCopyBytesUs = double(1 << 20) / kPricedKernelCopyUs;
  double kernelCopyPace_ = 1;  // the kernel copy's measured pace over the priced one
  bool cacheShared_ = false;
  size_t chunkBytes_;
  size_t slotBytes_;
  bool forced_ = false;
  Algorithm forcedAlgorithm_ = Algorithm::ring;
};

}  // namespace gyre
