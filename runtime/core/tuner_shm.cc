// The shared-memory links' prices (Tuner::sharedMemory, sharedMemoryAt, pinnedInBlocks): the
// model's figures fitted where the ranks' CPUs sit close or far apart, and the bounds measured
// where ranks share cores (docs/tuning.md, docs/tuning_shared_cores.md, docs/tuning_shm.md).
#include "runtime/core/tuner.h"

namespace gyre {

namespace {

// Fitted as the tcp link's are (tuner_tcp.cc), over shared memory (docs/tuning.md).
constexpr double kShmAlphaUs = 1.0;
constexpr double kShmSleepingAlphaUs = 13.0;  // 4 ranks on 2 cores
constexpr double kShmBetaBytesUs = 8000.0;
// The doubling's one exchange of the whole buffer against the ring's two halves depends on how
// far apart the ranks' CPUs sit: at n = 2, 16 KiB to 16 MiB, the ring took 0.65-0.75 times the
// doubling's time where one cache line went between them and back in 70-80 ns, and 1.4-1.6
// times where it took 290-390 ns (docs/tuning_shm.md). The communicator's probe bounces two lines,
// one written by each rank: 115-150 ns close, 475-550 far apart on that machine. On a mesh of
// many cores it took 257-314 ns (once each 408 and 452) between two CPUs that one line crossed
// in 120-180 (line_pingpong) and where streamed slots took 1.3-2 times the cached ones' time (n =
// 2 all-reduce, 16 KiB to 16 MiB). On a guest whose CPUs one line crossed in 320-353 ns far apart
// (52-65 close) it took 446-497 far apart, and there the cached slots lost: far apart starts
// between the two (docs/tuning_shm.md). Unmeasured, the CPUs are taken to be close.
constexpr double kShmWholeBufferStep = 1.5;
constexpr double kShmFarWholeBufferStep = 0.7;
constexpr double kFarRoundTripNs = 440;
// Once far apart, a probe during calls must find them under this to count them close again: far
// apart on that guest the probes during calls read 378-601 ns, either side of the set-up's
// bound, and each crossing swapped the tuners and sent every class back to its trials (a
// two-rank reduce of 32 KiB at 14-16 us a call against 3.3 where the placement held still).
// Close by they read 90-120 there, 257-314 on the mesh (docs/tuning_shm.md).
constexpr double kStillFarRoundTripNs = 340;
constexpr double kSharedCacheRoundTripNs = 80;
// Far apart, every line a slot or a post carries crosses at that distance twice (written on
// one CPU, read on the other): n = 2 all-reduce over shared memory, 16 KiB to 1 MiB, ran at
// 1400-1900 bytes/us against 8000 close (docs/tuning_shm.md).
constexpr double kShmFarBetaBytesUs = 1500.0;
// Unless the slots are filled with streaming stores there (GYRE_SLOT_STORES=auto): the reader
// then takes the lines from memory. n = 2, far apart: the ring all-reduce took 6.9-7.2 us at
// 64 KiB, 62-77 at 1 MiB and 1360-1450 at 16 MiB, about 14000 bytes/us; the doubling, which
// did not gain from the stores, 6.3 and 87-91 (w = 1.13), and a one-shot post of 64 KiB 5.4
// (docs/tuning_shm.md).
constexpr double kShmFarStreamedBetaBytesUs = 14000.0;
constexpr double kShmFarStreamedWholeBufferStep = 1.13;
// Where ranks outnumber cores the doubling's partners reduce at the same time on shared cores:
// at 256 KiB it took 1.5-2.3 times the ring's time at n = 4 and 8 on 2 cores
// (docs/tuning_shared_cores.md).
constexpr double kShmSleepingWholeBufferStep = 2.2;
// There, with the scheduler placing the ranks, a tree's inner ranks feed two children from a
// core they share, while the chain's ranks each pass one slot on (n = 4 and 8 on 2 cores,
// docs/tuning_shared_cores.md): over shared memory the chain's broadcast beat the tree's
// below 32 KiB; over tcp its broadcast up to 2 MiB (n = 8, 1 MiB: 1.20-1.30 times faster in
// four runs, 2 MiB 1.06-1.11; from 4 MiB the two were even), while the tree's reduce kept up
// below 256 KiB (from there the chain's was 1.12-1.40 times faster at n = 8 in most runs; its
// root's core takes each child's buffer: treeReduceRootPerChild, which alone put the crossing
// at n = 8 near 320 KiB).
constexpr size_t kShmSharedCoresTreeBroadcastFrom = 32 << 10;
// Bruck's all-to-all beat the pairwise exchange over the slots below 16 KiB and lost from there
// (n = 4 and 8 on 2 cores, 2026-12-04: n = 8, 4 KiB 23.3 against 27.3 us, 16 KiB 32.1 against
// 33.0, 64 KiB 57.7 against 53.3; n = 4, 64 KiB 18.1 against 13.8), where the model, whose
// steps cost a sleeping rank's wake-up, put the crossing past 128 KiB. The window's one-shot
// takes those sizes where it is up (docs/tuning_tcp.md, "Bruck's all-to-all").
constexpr size_t kShmBruckAllToAllsBelow = 16 << 10;
// Over shared memory the tree's reduce later caught up below 256 KiB (2026-11-27, floating
// ranks: 1.01-1.25 times faster than the chain from 64 B to 32 KiB in two runs at n = 4 and 8).
constexpr size_t kShmSharedCoresChainReduceFrom = 256 << 10;
// Pinned in blocks the tree's reduce kept up with the chain's at n = 4 and 8 on 2 cores (within
// 4 % from 128 KiB, ahead below), but where n is not a power of two the chain's led from 128 KiB:
// 1.15-1.54 times faster at n = 3, 5, 6 and 7 to 8 MiB (2026-12-03, docs/tuning_shared_cores.md).
constexpr size_t kShmPinnedChainReducesFrom = 128 << 10;
// Where n is a power of two, from 8 MiB: there on the mesh of 2026-12-04 the chain's reduce
// took 0.84-0.90 of the tree's time at n = 4 (0.88-0.95 with fresh inputs) and 0.87-0.97 at
// n = 8 (fresh, level: 0.99-1.02), 8-64 MiB (docs/tuning_shm.md, "All-reduces and reduces where
// ranks share cores").
constexpr size_t kShmPinnedPow2ChainReducesFrom = 8 << 20;
constexpr double kShmExtraPassBytes = 2.0;
// There the single copy leaves a gather's receivers every copy (a gather's root every block):
// from 2 MiB the senders' fills, on the other core, were level or up to 25 % faster at n = 4 and 8,
// and the direct all-gather, one copy a byte, beat the ring by 3-31 % from 4 MiB, fresh data or not
// (2026-12-03, docs/perf/fresh_data.md, "Gathers through slots where ranks share cores").
constexpr size_t kShmSharedGathersSingleCopyBelow = 2 << 20;
// A scatter's receivers share the copying: the single copy led it 1.2-2.4 times at 512 KiB-8
// MiB, but from 32 MiB the slots were faster, at n = 4 by 14-19 %, at n = 8 by 2-28 % (32
// MiB) and 15-20 % (64-128 MiB).
constexpr size_t kShmSharedScattersSingleCopyBelow = 32 << 20;
constexpr size_t kShmSharedCoresDirectGathersFrom = 4 << 20;
// At n = 8 the read led from 1 MiB with fresh data too: by 1.08-1.18 (pinned and unpinned) on
// the machine above, by 1.24 (1 MiB) and 1.01 (2 MiB) on the mesh of 2026-12-04, untouched by
// 1.13-1.40 and 1.25-1.28, where at n = 4 the ring led with fresh data at 1-2 MiB (up to 1.20).
constexpr size_t kShmSharedCoresDirectGathersFromManyRanks = 1 << 20;
// A gather's or a scatter's direct read moves each block once, every rank its own (the
// slots: twice, or the receivers' single copy on their shared cores): at n = 4 and 8 on the 2
// vCPUs of the mesh it beat the flat tree from 256 KiB, 0.69-0.90 of its time at 256 KiB and
// 0.38-0.44 at 1-4 MiB for the gather, 0.90-0.92 at 256 KiB and 0.52-1.04 at 1-4 MiB for the
// scatter, 0.36-0.64 at 32 and 128 MiB (2026-12-04, docs/tuning_shm.md, "Gathers and scatters
// by direct read"). The all-to-all's took 0.74-1.01 of the pairwise exchange's time at 256 KiB-16
// MiB there, 0.84-1.05 with fresh inputs (docs/tuning_shm.md; where the kernel's copy took 3.9-4.6
// times a memcpy's the exchange had led, but there the direct reads are off).
constexpr size_t kShmSharedCoresDirectBlocksFrom = 256 << 10;
// A broadcast's direct read, each non-root copying the root's buffer once through the kernel,
// against the slots' chain or tree, whose inner ranks copy on the cores their children need:
// at n = 6, 7 and 8 on the 2 vCPUs of the mesh it took 0.74-0.98 of the best other's time at 4-64
// MiB (0.94-1.00 at 128 MiB), fresh inputs or not, where at 512 KiB-2 MiB with fresh inputs it
// was level or up to 6 % behind; at n = 4 it led from 16 MiB (0.79-1.01) and not below (4-8 MiB:
// 1.07-1.12 untouched), at n = 3 and 5 it was mixed (0.82-1.18; 2026-12-04, docs/tuning_shm.md).
constexpr size_t kShmSharedCoresDirectBroadcastsFrom = 4 << 20;
constexpr size_t kShmSharedCoresDirectBroadcastsFromFourRanks = 16 << 20;
// There the all-reduces from 64 KiB take the slots' ring (or the tree, the model's choice), not
// the doubling nor the window's posts, which the model prices below it: at n = 4 and 8 on the 2
// vCPUs of the mesh the doubling and the window took 1.08-1.31 of the ring's time at 64 KiB and
// 1.20-1.97 at 128 KiB, untouched or fresh (the model's pick there: 1.17-1.95), and 0.42-0.83 of
// it at 16-32 KiB (2026-12-04, docs/tuning_shm.md, "All-reduces and reduces where ranks
// share cores").
constexpr size_t kShmSharedCoresRingAllReducesFrom = 64 << 10;
// From 1 MiB, while the n buffers together take at most 32 MiB, the all-reduce's direct read
// (each rank reads its share of every input, reduces it and writes it into every other output:
// 2 (n - 1) / n of the buffer through the kernel) beat the ring and the tree there: at n = 3 to
// 8 on the 2 vCPUs of the mesh, pinned in blocks or not, it took 0.82-0.93 of the best other's
// time at 2-4 MiB with fresh inputs (0.75-1.01 untouched) and 0.88-1.03 at 1 MiB (0.81-0.94
// untouched); at 512 KiB it lost with fresh inputs at n = 3, 5, 6 and 8 (1.05-1.14), and past
// the footprint at n = 5, 6 and 8 at 8 MiB (1.03-1.20) and mostly at 16 MiB (0.97-1.28)
// (2026-12-04, docs/tuning_shm.md, "The all-reduce's direct read where ranks share cores").
constexpr size_t kShmSharedCoresDirectAllReducesFrom = 1 << 20;
constexpr size_t kShmSharedCoresDirectAllReducesFootprint = 32 << 20;

}  // namespace

bool Tuner::farApart(double roundTripNs) {
  return roundTripNs >= kFarRoundTripNs;
}

bool Tuner::stillFarApart(double roundTripNs, bool wasFar) {
  return wasFar ? roundTripNs >= kStillFarRoundTripNs : farApart(roundTripNs);
}

bool Tuner::sharesCache(double roundTripNs) {
  return roundTripNs > 0 && roundTripNs < kSharedCacheRoundTripNs;
}

LinkCost Tuner::sharedMemory(bool ranksHaveCores, double roundTripNs, bool streamsWhenFar) {
  return sharedMemoryAt(ranksHaveCores, farApart(roundTripNs), streamsWhenFar);
}

LinkCost Tuner::sharedMemoryAt(bool ranksHaveCores, bool farApart, bool streamsWhenFar) {
  // Where ranks share cores the prices are those measured close; far apart their slots are
  // streamed all the same: a reader on the other CPU then takes them from memory instead of
  // from the writer's cache (n = 8 on 2 cores, a scatter of 2 MiB 124 µs against 477-484
  // cached, where close by streaming cost 119 against 85-88).
  const bool far = ranksHaveCores && farApart;
  const bool streamed = farApart && streamsWhenFar;
  const double wholeBufferStep = !ranksHaveCores   ? kShmSleepingWholeBufferStep
                                 : far && streamed ? kShmFarStreamedWholeBufferStep
                                 : far             ? kShmFarWholeBufferStep
                                                   : kShmWholeBufferStep;
  const double beta = far && streamed ? kShmFarStreamedBetaBytesUs
                      : far           ? kShmFarBetaBytesUs
                                      : kShmBetaBytesUs;
  LinkCost cost{ranksHaveCores ? kShmAlphaUs : kShmSleepingAlphaUs, beta, wholeBufferStep,
                kShmExtraPassBytes, kShmExtraPassBytes};
  cost.coresShared = !ranksHaveCores;
  cost.bruckAllToAllsBelow = kShmBruckAllToAllsBelow;
  if (!ranksHaveCores) {
    cost.treeBroadcastFrom = kShmSharedCoresTreeBroadcastFrom;
    cost.chainReducesFrom = kShmSharedCoresChainReduceFrom;
    cost.pinnedChainReducesFrom = kShmPinnedChainReducesFrom;
    cost.pinnedPow2ChainReducesFrom = kShmPinnedPow2ChainReducesFrom;
    cost.gathersSingleCopyBelow = kShmSharedGathersSingleCopyBelow;
    cost.scattersSingleCopyBelow = kShmSharedScattersSingleCopyBelow;
    cost.sharedCoresDirectGathersFrom = kShmSharedCoresDirectGathersFrom;
    cost.sharedCoresDirectGathersFromManyRanks = kShmSharedCoresDirectGathersFromManyRanks;
    cost.sharedCoresDirectBlocksFrom = kShmSharedCoresDirectBlocksFrom;
    cost.sharedCoresDirectBroadcastsFrom = kShmSharedCoresDirectBroadcastsFrom;
    cost.sharedCoresDirectBroadcastsFromFourRanks = kShmSharedCoresDirectBroadcastsFromFourRanks;
    cost.sharedCoresDirectAllReducesFrom = kShmSharedCoresDirectAllReducesFrom;
    cost.sharedCoresDirectAllReducesFootprint = kShmSharedCoresDirectAllReducesFootprint;
    cost.doublingAllReducesBelow = kShmSharedCoresRingAllReducesFrom;
    cost.windowAllReducesBelow = kShmSharedCoresRingAllReducesFrom;
  }
  cost.farApart = far;
  cost.placedFar = farApart;
  cost.slotsStreamed = streamed;
  // Close by, the window's two-rank broadcasts run at a fraction of their post's price. Their
  // slots stay cached: streamed, a two-rank broadcast's loop ran at 1.4-1.5 times the cached
  // pace only for its first hundred or so calls, then at 0.6-0.7 (docs/tuning_shm.md).
  if (ranksHaveCores && !farApart && streamsWhenFar) {
    cost.closeWindowBroadcastsBelow = 128 << 10;
  }
  return cost;
}

LinkCost Tuner::pinnedInBlocks(LinkCost shared) {
  shared.treeBroadcastFrom = 0;
  shared.chainReducesFrom = SIZE_MAX;
  shared.treeReduceRootPerChild = false;
  shared.chainsWaitForCores = true;
  return shared;
}

}  // namespace gyre
