// The tcp links' prices (Tuner::tcpLoopback, tcpNetwork, pinnedInTwoBlocksOverTcp): the model's
// figures fitted on loopback and the bounds measured where ranks share cores (docs/tuning.md,
// docs/tuning_shared_cores.md, docs/tuning_tcp.md).
#include <algorithm>

#include "algorithms/tree.h"
#include "runtime/core/tuner.h"

namespace gyre {

namespace {

// Fitted to the ring and the doubling all-reduce at n = 2 over loopback tcp, 16 KiB to 2 MiB
// (docs/tuning.md).
constexpr double kTcpAlphaUs = 7.0;
constexpr double kTcpBetaBytesUs = 5000.0;
constexpr double kTcpWholeBufferStep = 1.2;
// The trees' extra local passes, measured against the ring at n = 4 (docs/tuning.md).
constexpr double kTcpExtraPassBytes = 2.0;
// Bruck's rotations cost less beside a socket's copies: its all-gather beat the ring at n = 4
// and 8 on 2 cores up to 128 KiB (n = 4, 64 KiB: 51 against 71-75 us), the two were even at
// 256 KiB, and the ring won from 512 KiB (docs/tuning.md).
constexpr double kTcpBruckPassBytes = 1.4;
// Where ranks share cores and the scheduler places them, the chain's broadcast beat the tree's
// up to 2 MiB and its reduce from 256 KiB (tuner_shm.cc: kShmSharedCoresTreeBroadcastFrom).
constexpr size_t kTcpSharedCoresTreeBroadcastFrom = 4 << 20;
// Tcp scatters below this take the binomial tree: n = 4 and 8 on 2 cores, 64 B-64 KiB, it took
// 0.55-0.80 of the flat tree's time; from 256 KiB to 2 MiB 0.81-1.20 at n = 8 (docs/tuning.md).
constexpr size_t kTcpBinomialScattersBelow = 256 << 10;
constexpr size_t kTcpSharedCoresChainReduceFrom = 256 << 10;
// Pinned in blocks where n is not a power of two the chain's reduce led the tree's from 32 KiB
// at n = 3 (1.2-1.6 times faster), 128 KiB at n = 5 (1.5-1.7), 512 KiB at n = 7 (1.1-1.3; the
// tree 1.3-1.4 times faster at 128 KiB) and was level at 2 MiB at n = 6 (the tree ahead to 256
// KiB): a crossing that moves with the chain's hops beyond the tree's depth, as the model's
// does, but earlier (2026-12-03, docs/tuning_shared_cores.md).
constexpr size_t kTcpPinnedChainReducesFrom = 32 << 10;
constexpr size_t kTcpPinnedChainReduceBytesPerHop = 128 << 10;
// There Bruck's all-gather beat the ring up to 512 KiB and lost from 1 MiB at n = 4, 6 and 8
// (unpaced BBR, ranks pinned in blocks, 2026-12-03: n = 4, 512 KiB 130 against 147 us, 1 MiB
// level; n = 8, 512 KiB 340 against 396 in one run, 479 against 455 in the next; 2 MiB the
// ring 1.08-1.26 times faster; docs/tuning_tcp.md). The model's crossing moves with n (116 KiB at
// n = 4, 400 KiB at n = 8) and missed the rows between.
constexpr size_t kTcpSharedCoresBruckAllGathersBelow = 1 << 20;
// The all-reduce's doubling beat the ring and the tree up to 128 KiB at n = 3, 4, 5 and 6 (32
// KiB: 25-87 against the ring's 55-212 us; 128 KiB at n = 5: 199 against 225-250); at 160 KiB
// it was level with the ring at n = 4-6 and 1.15 times slower at n = 3, and from 192 or 256 KiB
// the ring was ahead. The model crossed at 15 KiB (n = 3), 44 (n = 5), 67 (n = 6), 155 (n = 4)
// and 208 (n = 8) (2026-12-03, docs/tuning_tcp.md).
constexpr size_t kTcpSharedCoresDoublingAllReducesBelow = 160 << 10;
// From there halving, then doubling (Rabenseifner; power-of-two n) led the ring and the tree up
// to 2 MiB at n = 4, bound or floating (256 KiB: 154-165 against 195-203 us; 1 MiB 513-594
// against the ring's 516-754) and at n = 8 floating from 256 KiB (512 KiB: 856 against the
// tree's 1059), and was level with the ring at 4 MiB, in one process with the others; at n = 8
// pinned in two blocks the tree kept ahead of it to 512 KiB (1.03-1.22), where the tree's band
// takes precedence (2026-12-03).
constexpr size_t kTcpSharedCoresHalvingAllReducesBelow = 2 << 20;
// The reduce-scatter's whole-buffer doubling (non-power-of-two n; an all-reduce of the whole
// buffer in one message) beat the ring up to 63 KiB and lost from 64 KiB at n = 4, 6 and 8
// (2026-12-03: 32 KiB 45-130 against 53-203 us, 63 KiB 55 and 107 against 59 and 126 at n = 4 and
// 6; 64 KiB the ring 1.04-1.54 times faster), where a message outgrows one loopback segment (MTU 64
// KiB); the model crossed at 21 KiB (n = 4), 51 KiB (n = 8) and 9 KiB (n = 6, whose doubling folds
// two ranks in and out). At n = 3 too: 18-22 against the ring's 23-27 us from 12 B to 12 KiB,
// 30-31 against 32-34 at 48 KiB, launched alone, where the model kept the ring.
constexpr size_t kTcpSharedCoresDoublingReduceScattersBelow = 63 << 10;
// The recursive halving (power-of-two n) beat the ring from 64 B to 512 KiB at n = 4 and 8 on
// 2 cores (64 B: 24 against 40 us at n = 4, 74 against 185 at n = 8; 256 KiB 83 and 223
// against 98 and 339), was level at 768 KiB-1 MiB, and took 1.08-1.19 times the ring's time
// from 1.1 MiB (2026-12-03). There the same bound for both n; where ranks have cores (and
// between hosts, unmeasured) its pieces are priced at 1.1 times the ring's bytes, which puts
// the crossing near 470 KiB at n = 4 and 1.6 MiB at n = 8.
constexpr size_t kTcpSharedCoresHalvingReduceScattersBelow = 1 << 20;
constexpr double kTcpHalvingPassBytes = 1.1;
// n = 4 on 2 cores over tcp, pinned in blocks, the binomial tree against it alternated with the
// relayed tree call by call: 8 B 7.7-10.0 µs against 6.4-7.6, 4 KiB 9.9-10.5 against 9.2-9.8,
// 8 KiB 10.4-10.8 against 11.0-11.3, 16 KiB 11.7-11.8 against 14.5-15.0 (docs/perf/small_calls.md).
constexpr size_t kTcpTwoBlocksRelayedBroadcastBelow = 8 << 10;
// Where ranks share cores over tcp, at n = 8 the tree all-reduce beat the doubling and the ring
// at 64 and 128 KiB, floating (the whole-buffer doubling 1.03-1.11 times its time) and pinned in
// two blocks (64 KiB: 166-205 against the doubling's 206-258 us), and pinned up to 512 KiB
// (512 KiB: 797-922 against the ring's 970-1040, the halving's 862). Floating, halving then
// doubling led from 256 KiB (above); pinned, the ring from 1 MiB. At n = 6 (three ranks a CPU)
// the tree was never ahead (2026-12-03, unpaced BBR; docs/tuning_tcp.md).
constexpr size_t kTcpSharedCoresTreeAllReduceFrom = 64 << 10;
constexpr size_t kTcpSharedCoresTreeAllReduceBelow = 128 << 10;
constexpr size_t kTcpTwoBlocksTreeAllReduceBelow = 1 << 20;
constexpr int kTcpSharedCoresTreeAllReduceRanks = 8;
// Between hosts: a hop through two kernels and a switch (docs/tuning.md).
constexpr double kNetAlphaUs = 15.0;

}  // namespace

LinkCost Tuner::tcpLoopback(int coresPerRank, bool ranksHaveCores) {
  LinkCost cost{kTcpAlphaUs,         kTcpBetaBytesUs,
                kTcpWholeBufferStep, kTcpExtraPassBytes,
                kTcpBruckPassBytes,  std::clamp(coresPerRank, 1, kMaxAutoChannels)};
  cost.binomialScattersBelow = kTcpBinomialScattersBelow;
  cost.halvingPassBytes = kTcpHalvingPassBytes;
  if (!ranksHaveCores) {
    cost.treeBroadcastFrom = kTcpSharedCoresTreeBroadcastFrom;
    cost.treeReduceRootPerChild = true;
    cost.chainReducesFrom = kTcpSharedCoresChainReduceFrom;
    cost.pinnedChainReducesFrom = kTcpPinnedChainReducesFrom;
    cost.pinnedChainReduceBytesPerHop = kTcpPinnedChainReduceBytesPerHop;
    cost.bruckAllGathersBelow = kTcpSharedCoresBruckAllGathersBelow;
    cost.doublingAllReducesBelow = kTcpSharedCoresDoublingAllReducesBelow;
    cost.halvingAllReducesBelow = kTcpSharedCoresHalvingAllReducesBelow;
    cost.treeAllReducesFrom = kTcpSharedCoresTreeAllReduceFrom;
    cost.treeAllReducesBelow = kTcpSharedCoresTreeAllReduceBelow;
    cost.treeAllReducesFromRanks = kTcpSharedCoresTreeAllReduceRanks;
    cost.doublingReduceScattersBelow = kTcpSharedCoresDoublingReduceScattersBelow;
    cost.halvingReduceScattersBelow = kTcpSharedCoresHalvingReduceScattersBelow;
  }
  return cost;
}

LinkCost Tuner::tcpNetwork(int coresPerRank, double gbits) {
  // Bruck between hosts is unmeasured: priced as the trees' passes.
  LinkCost cost{kNetAlphaUs,         gbits * 1e9 / 8 / 1e6,
                kTcpWholeBufferStep, kTcpExtraPassBytes,
                kTcpExtraPassBytes,  std::clamp(coresPerRank, 1, kMaxAutoChannels)};
  cost.treeBroadcastRootPerChild = cost.treeReduceRootPerChild = true;  // one egress link
  cost.halvingPassBytes = kTcpHalvingPassBytes;
  return cost;
}

// Pinned in blocks over tcp, a small broadcast in a loop runs at the pace of the block whose
// CPU makes the most socket calls (sends and receives). The tree lost where its busiest block
// made more than the chain's (n = 5 and 6 on 2 cores: 6 against 5, the tree 1.5-2.8 times the
// chain's time at 8-512 B, 1.13-1.22 at 256 KiB-4 MiB; n = 10: 11 against 9) and kept up where
// they tied (n = 4 and 8). Run the other way round, root first to root - 1, the chain evens out
// blocks of unequal size (n = 3: 2 and 2 against 3 and 1; the tree's 7.0-9.3 us at 8 B against
// 2.8-4.6, at n = 5 14.6-21.5 against 3.5-4.2, at n = 7 14.7-15.8 against 5.2-5.6; 2026-12-03,
// docs/tuning_tcp.md).
namespace {
std::vector<int> blocksOf(const std::vector<std::vector<int>>& cpusOfRank) {
  std::vector<int> blockOfRank;
  for (const auto& cpus : cpusOfRank) {
    const auto first = std::find(cpusOfRank.begin(), cpusOfRank.end(), cpus);
    blockOfRank.push_back(int(first - cpusOfRank.begin()));  // named by its first rank
  }
  return blockOfRank;
}
}  // namespace

int Tuner::busiestBlockCalls(const std::vector<int>& blockOfRank, BroadcastShape shape, int root) {
  const int n = int(blockOfRank.size());
  std::vector<int> calls(size_t(n), 0);
  for (int r = 0; r < n; ++r) {
    int sends = 0;
    if (shape == BroadcastShape::tree) {
      sends = algo::binomialNode(r, n, root).nChildren;
    } else {
      const int step = shape == BroadcastShape::reversedChain ? -1 : 1;
      sends = algo::mod((r - root) * step, n) < n - 1 ? 1 : 0;
    }
    calls[size_t(blockOfRank[size_t(r)])] += sends + (r != root ? 1 : 0);
  }
  return *std::max_element(calls.begin(), calls.end());
}

LinkCost Tuner::pinnedInBlocksOverTcp(LinkCost pinned,
                                      const std::vector<std::vector<int>>& cpusOfRank) {
  const std::vector<int> blocks = blocksOf(cpusOfRank);
  const int chain = std::min(busiestBlockCalls(blocks, BroadcastShape::chain, 0),
                             busiestBlockCalls(blocks, BroadcastShape::reversedChain, 0));
  pinned.chainBroadcasts = chain < busiestBlockCalls(blocks, BroadcastShape::tree, 0);
  return pinned;
}

std::vector<bool> Tuner::reversedChains(const std::vector<std::vector<int>>& cpusOfRank) {
  const std::vector<int> blocks = blocksOf(cpusOfRank);
  std::vector<bool> reversed;
  for (int root = 0; root < int(blocks.size()); ++root) {
    reversed.push_back(busiestBlockCalls(blocks, BroadcastShape::reversedChain, root) <
                       busiestBlockCalls(blocks, BroadcastShape::chain, root));
  }
  return reversed;
}

LinkCost Tuner::pinnedInTwoBlocksOverTcp(LinkCost pinned) {
  pinned.relayedBroadcastsBelow = kTcpTwoBlocksRelayedBroadcastBelow;
  pinned.treeAllReducesBelow = kTcpTwoBlocksTreeAllReduceBelow;
  return pinned;
}

}  // namespace gyre
