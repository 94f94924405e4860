#include "runtime/core/tuner.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "algorithms/doubling.h"
#include "base/status.h"
#include "link/mailbox.h"

namespace gyre {

namespace {

// Close by, the window's one-shot, its blocks' payloads spread, moves a two-rank broadcast at a
// fifth of the price its post was fitted at: 16 KiB in 0.40-0.54 us, 32 KiB 0.72-0.95, 64 KiB
// 1.25-1.90, against the streamed ring's 1.21-1.68, 1.83-2.43 and 3.17-4.43 (eight launches,
// 2026-12-01; docs/perf/tuner_checks.md).
constexpr double kShmCloseWindowBroadcastBytes = 0.25;
// The direct reads (algorithms/oneshot.h) move data through the kernel at a pace that does not
// depend on where the CPUs sit, 7-11 GB/s per core on this machine (3-4 times slower than a
// memcpy), and each system call costs about 2 us even for a few bytes: a call costs 1 us for
// its waits and 2.5 us per system call a rank makes in turn, then the bytes each rank moves.
// n = 2 (docs/tuning_shm.md): at 4 KiB the all-reduce (two calls) took 6-7 us, the all-gather and
// the broadcast (one each) 3.1-4.5; at 1 MiB the all-reduce, which moves 2(n - 1)/n of the
// buffer and reduces 1/n, took 182-261 us, the all-gather, reading (n - 1)/n, 76-91, and the
// broadcast, whose root writes 1/n into every other rank while they read the rest, 53-75.
constexpr double kDirectWaitsUs = 1.0;
constexpr double kDirectSystemCallUs = 2.5;
constexpr double kDirectReduceBytesUs = 5500.0;
// The all-gather's figure is set against the ring's price close by (8000 bytes/us), which its
// slots did not reach: at 1 MiB the ring took 96-119 us (5000 bytes/us), the read 76-91.
constexpr double kDirectGatherBytesUs = 9000.0;
constexpr double kDirectBroadcastBytesUs = 8500.0;
constexpr size_t kDirectCopyFromBytes = 256 << 10;
constexpr size_t kDirectCopyFarFromBytes = 64 << 10;
// The one-shot collectives' step against a slot hand-over's: a flag and its payload in one
// cache line, read straight from the writer's mailbox (docs/tuning.md).
constexpr double kOneShotStep = 0.3;

// Where ranks share cores, the ranks of a window call that only post (a broadcast's or a
// scatter's root, a reduce's or a gather's non-roots) run up to 64 calls ahead while the
// payload fits the post or its own piece of the data blocks (`smallPost`), but only kMailData
// calls once it fills a data block, waiting for readers that share their cores: there the flat
// tree beat the window's gathers and scatters, until a gather's posts reach 32 KiB a rank
// (n = 4 and 8 on 2 cores: at 16 KiB a rank the tree took 0.78-0.81 of the window's time,
// fresh inputs or not; at 32 KiB 1.13-1.94; docs/tuning.md).
constexpr size_t kSharedCoresGatherPostFrom = 32 << 10;
// The window's two-rank reduce where each rank has a core: below 8 KiB. On this project's
// Intel Xeon the chain and the window were level at 4 KiB (0.64-0.69 us, 0.61-0.69), and the
// chain ahead from 8 KiB (0.68-0.71 against 1.00-1.10; 16 KiB 1.13-1.21 against 1.61-1.69; on
// the AMD EPYC before, the window took 0.7-1.0 of the chain's time from 4 to 64 KiB;
// docs/tuning_reduce.md). The model prices the chain's hops in full, where its other rank runs
// calls ahead of the root.
constexpr size_t kTwoRankWindowReducesBelow = 8 << 10;
bool windowPostersStall(const LinkCost& link, Collective coll, size_t bytes, int n,
                        size_t smallPost) {
  if (!link.coresShared) return false;
  const size_t runsAhead = std::max(smallPost, MailPost::kInlineBytes);  // the largest such post
  switch (coll) {
    case Collective::broadcast:
    case Collective::reduce:
    case Collective::scatter:
      return bytes > runsAhead;
    case Collective::gather: {
      const size_t post = bytes / size_t(n);
      return post > runsAhead && post < kSharedCoresGatherPostFrom;
    }
    default:
      return false;
  }
}

double log2Ceil(int n) {
  int steps = 0;
  while ((1 << steps) < n) ++steps;
  return steps;
}

// The links all blocks of Bruck's all-to-all cross: the blocks each of its steps sends.
double bruckBlockHops(int n) {
  int hops = 0;
  for (int dist = 1; dist < n; dist *= 2) hops += algo::bruckSlots(n, dist);
  return hops;
}

}  // namespace

const char* algorithmName(Algorithm a) {
  switch (a) {
    case Algorithm::ring:
      return "ring";
    case Algorithm::tree:
      return "tree";
    case Algorithm::doubling:
      return "rd";
    case Algorithm::pairwise:
      return "pairwise";
    case Algorithm::dissemination:
      return "dissemination";
    case Algorithm::hierarchical:
      return "hier";
    case Algorithm::oneshot:
      return "oneshot";
    case Algorithm::directRead:
      return "read";
  }
  return "?";
}

std::optional<Algorithm> forcedAlgorithm(const std::string& name) {
  if (name.empty() || name == "auto") return std::nullopt;
  constexpr Algorithm kForceable[] = {
      Algorithm::ring,         Algorithm::tree,    Algorithm::doubling,  Algorithm::pairwise,
      Algorithm::hierarchical, Algorithm::oneshot, Algorithm::directRead};
  std::string names;
  for (Algorithm a : kForceable) {
    if (name == algorithmName(a)) return a;
    names += std::string(algorithmName(a)) + ", ";
  }
  fail(Code::invalid_argument,
       "algorithm '" + name + "' (GYRE_ALGO or gyreConfig_t) is not one of " + names + "auto");
}

Tuner::Tuner(LinkCost link, const std::string& forced, size_t chunkBytes, size_t slotBytes)
    : link_(link), chunkBytes_(chunkBytes), slotBytes_(slotBytes) {
  if (const std::optional<Algorithm> a = forcedAlgorithm(forced)) {
    forced_ = true;
    forcedAlgorithm_ = *a;
  }
}

void Tuner::setOneShot(size_t capacity) {
  oneShotCapacity_ = capacity;
  smallPost_ = MailboxWindow::smallBytesFor(capacity);
}

void Tuner::setDirectRead(bool available) {
  directRead_ = available;
}

void Tuner::setHosts(int hosts, int localRanks, LinkCost intraHost) {
  hosts_ = hosts;
  localRanks_ = localRanks;
  intraHost_ = intraHost;
}

int Tuner::channels(size_t bytes) const {
  const size_t byBytes = std::max<size_t>(1, bytes / kBytesPerExtraChannel);
  return int(std::min<size_t>(byBytes, size_t(std::max(1, link_.maxChannels))));
}

void Tuner::setLink(LinkCost link) {
  link_ = link;
}

Tuner::SlotWrites Tuner::slotWrites(Collective coll, size_t bytes) const {
  SlotWrites w;
  w.streamed = link_.slotsStreamed;
  w.spread = !w.streamed && !link_.coresShared && !link_.placedFar && !cacheShared_;
  const bool gathers = coll == Collective::all_gather || coll == Collective::all_gather_v ||
                       coll == Collective::gather;
  w.singleCopy = gathers                       ? bytes < link_.gathersSingleCopyBelow
                 : coll == Collective::scatter ? bytes < link_.scattersSingleCopyBelow
                                               : true;
  return w;
}

// Steps are dependent message hops on the critical path; `factor` is the bytes a rank's
// busiest link carries per byte of the collective's size.
double Tuner::predictUs(Algorithm a, Collective coll, size_t bytes, int n) const {
  const double b = double(bytes), lg = log2Ceil(n), nn = n;
  double steps = -1, factor = 0;
  if (a == Algorithm::directRead) {
    // A fixed cost, then the bytes each rank moves through the kernel, at a pace that does not
    // depend on where the CPUs sit (docs/tuning_shm.md). The all-reduce reads its share of the
    // others' inputs and writes the reduced share into theirs, at the kernel copy's pace.
    if (!directRead_ || bytes == 0) return -1;
    const double share = (nn - 1) / nn * b;  // what one rank moves each way
    // The n - 1 peers' reads (and the all-reduce's writes) of the first piece, one by one.
    const double fixed = kDirectWaitsUs + (nn - 1) * kDirectSystemCallUs;
    switch (coll) {
      case Collective::all_reduce:
        return fixed + (nn - 1) * kDirectSystemCallUs +
               2 * share / (kDirectReduceBytesUs * kernelCopyPace_);
      case Collective::reduce: {
        // The busiest ranks, past the root, move n times their share: 3 (n - 1) parts of the
        // buffer's (n - 1) 3 (n - 1) + 3 n - 2, the root's share 3 n - 2 (oneshot_read.cc).
        const double parts = 3 * (nn - 1) * (nn - 1) + 3 * nn - 2;
        return fixed + kDirectSystemCallUs +
               nn * 3 * (nn - 1) / parts * b / (kDirectReduceBytesUs * kernelCopyPace_);
      }
      case Collective::reduce_scatter:  // its block of every other input read, nothing written
        return fixed + share / (kDirectReduceBytesUs * kernelCopyPace_);
      case Collective::all_gather:
      case Collective::all_to_all:
        return fixed + share / kDirectGatherBytesUs;
      case Collective::broadcast:
        return fixed + share / kDirectBroadcastBytesUs;
      case Collective::gather:
      case Collective::scatter:
        // Every rank moves its own block at once (the root's a local copy), one system call
        // each, at the kernel copy's pace measured at set-up.
        return kDirectWaitsUs + kDirectSystemCallUs +
               b / nn / (kPricedKernelCopyBytesUs * kernelCopyPace_);
      default:
        return -1;
    }
  }
  if (a == Algorithm::oneshot) {
    // One step: every rank posts (copies its payload once) and reads the posts it needs, all
    // at once. The step is a cache line from one core to another, a fraction of a slot
    // hand-over (and as much dearer where ranks share cores); the bytes are the post plus
    // the reads (docs/tuning.md).
    // A post holds one rank's block of an all-gather or a gather, the whole of the others.
    const bool blockPosted = coll == Collective::all_gather || coll == Collective::gather;
    const size_t perRank = blockPosted ? bytes / size_t(n) : bytes;
    // Nothing to move: the slot algorithms return at once, as a call of count 0 should.
    if (oneShotCapacity_ == 0 || bytes == 0 || perRank > oneShotCapacity_) return -1;
    // Such a broadcast took 1.6 times the ring's time at n = 4 on 2 cores from 32 B to 64 KiB
    // (docs/tuning.md): not even forced.
    if (coll == Collective::broadcast && windowPostersStall(link_, coll, bytes, n, smallPost_)) {
      return -1;
    }
    double moved = 0;
    switch (coll) {
      case Collective::all_reduce:
        // Every post read and reduced. Where each rank has a core, its own post stays in its
        // cache and the ranks read in parallel: the other posts' bytes are what counts (n = 2:
        // within 1.2 of the best slot algorithm up to 64 KiB, docs/tuning.md).
        moved = link_.coresShared ? (nn + 1) * b : (nn - 1) * b;
        break;
      case Collective::reduce:
        // Only the root reads, and it posts no payload: the others' posts overlap its reads
        // across calls, so with a core each its reads are what counts (n = 2, close: the
        // window took 0.7-1.0 of the chain's time from 4 to 64 KiB once the root stopped
        // copying its input into its post, 1.1-1.3 times before; docs/tuning_shm.md).
        moved = link_.coresShared ? nn * b : (nn - 1) * b;
        break;
      case Collective::reduce_scatter:
        // The whole buffer posted, this rank's block of each post read. Where each rank has a
        // core close by, the post stays in the poster's cache while the others read their
        // blocks, as for the all-reduce: at n = 2 the one-shot took 8 KiB in 0.72-0.89 us
        // against the ring's 0.89-1.25, matched it at 16 KiB and lost from 32 KiB
        // (docs/tuning.md), so the post counts once; far apart it still costs both. At n = 2
        // each rank posts only the other's block: half the post.
        {
          const double posted = n == 2 ? b / 2 : b;
          moved = link_.coresShared || link_.farApart ? posted + b / nn : posted;
        }
        break;
      case Collective::broadcast:
        // The root's post and the readers' copies overlap only across calls: at n = 2 the
        // one-shot beat the ring up to 16 KiB, matched it at 32 KiB and took 1.1-1.6 times
        // its time from 64 KiB (docs/tuning.md), before its payloads were spread; close by
        // with a core each it now runs at a fifth of that price (kShmCloseWindowBroadcastBytes).
        moved = n == 2 && bytes < link_.closeWindowBroadcastsBelow
                    ? kShmCloseWindowBroadcastBytes * b
                : bytes > MailPost::kInlineBytes ? 1.25 * b
                                                 : b;
        break;
      case Collective::all_gather:
      case Collective::gather:
        // A block posted, the n - 1 others read. Where each rank has a core the posts overlap
        // with the reads across ranks, as for the all-reduce: at n = 2 the window beat the ring
        // by 0.15-0.3 us from 4 to 64 KiB and matched it at 128 KiB (docs/tuning.md). A
        // gather's root reads as many.
        moved = link_.coresShared ? b : (nn - 1) / nn * b;
        break;
      case Collective::scatter:
        // The root's whole buffer posted, a block of it read; at n = 2 the root is the first or
        // the last rank and posts only the other block (the tuner is not told the root).
        moved = n == 2 ? b : b + b / nn;
        break;
      case Collective::all_to_all:
        // The whole input posted, a block of each other post read; at n = 2 both ranks post
        // only the other's block: at 8-64 KiB the window then took 0.8-0.93 of the pairwise
        // exchange's time, close by (docs/tuning.md). There, with a core each, the post stays
        // in the poster's cache while the other reads it, as for the reduce-scatter: it counts
        // once (16-32 KiB: 0.54-1.05 us against the exchange's 0.60-1.18, level at 64-128 KiB).
        if (n == 2) {
          moved = link_.coresShared || link_.farApart ? b : b / 2;
        } else {
          moved = b + (nn - 1) / nn * b;
        }
        break;
      default:
        return -1;
    }
    return kOneShotStep * link_.alphaUs + moved / link_.betaBytesUs;
  }
  if (a == Algorithm::hierarchical) {
    const bool oneWay = coll == Collective::all_gather || coll == Collective::reduce_scatter;
    if ((coll != Collective::all_reduce && !oneWay) || hosts_ < 2 || localRanks_ < 2) return -1;
    const double l = localRanks_, k = hosts_;
    // A ring between hosts on every rail, whose host link carries (K-1)/K of the gathered (or
    // scattered) buffer, and K rings of L - 1 steps inside each host (hierarchical.h).
    if (oneWay) {
      return k * (l - 1) * intraHost_.alphaUs + b * (l - 1) / l / intraHost_.betaBytesUs +
             (k - 1) * link_.alphaUs + b * (k - 1) / k / link_.betaBytesUs;
    }
    // A reduce-scatter and an all-gather inside the hosts, a ring all-reduce between them
    // whose host link carries 2(K-1)/K of the buffer.
    return 2 * (l - 1) * intraHost_.alphaUs + 2 * b * (l - 1) / l / intraHost_.betaBytesUs +
           2 * (k - 1) * link_.alphaUs + 2 * b * (k - 1) / k / link_.betaBytesUs;
  }
  switch (coll) {
    case Collective::all_reduce:
      if (a == Algorithm::ring) steps = 2 * (nn - 1), factor = 2 * (nn - 1) / nn;
      // Two trees one after the other per round, each up and down its depth; the pipeline
      // fills over half a chunk per tree and level before it streams at one byte per byte.
      if (a == Algorithm::tree) {
        steps = 4 * lg;
        factor = link_.extraPassBytes *
                 (1 + lg * std::min(b, double(chunkBytes_) / 2) / std::max(b, 1.0));
      }
      if (a == Algorithm::doubling) {
        const bool pow2 = (n & (n - 1)) == 0;
        const double levels = std::floor(std::log2(nn));
        steps = levels + (pow2 ? 0 : 2);
        // Every step moves and reduces the whole buffer (docs/tuning.md: over tcp the
        // crossover with the ring at n = 2 and 4 lies between 32 and 256 KiB; over shared
        // memory at n = 2 the doubling is as fast as the ring or faster up to 64 MiB).
        factor = link_.wholeBufferStep * (levels + (pow2 ? 0 : 2));
        // Halving, then doubling: twice the steps, the ring's bytes; the cheaper of the two
        // (halvesAllReduce).
        if (halvesAllReduce(bytes, n)) steps = 2 * lg, factor = halvingAllReduceBytes(n);
      }
      break;
    case Collective::all_gather:
      if (a == Algorithm::ring) steps = nn - 1, factor = (nn - 1) / nn;
      // Bruck moves the ring's bytes in fewer, larger steps, but its rotations cost: twice the
      // ring's time at 16 MiB over shared memory (n = 8), 1.5 times at 2 MiB over tcp (n = 4).
      if (a == Algorithm::doubling) steps = lg, factor = link_.bruckPassBytes * (nn - 1) / nn;
      break;
    case Collective::broadcast:
    case Collective::reduce: {
      // Both forward slot by slot: the last rank starts a slot's worth (or the whole of a
      // smaller message) after each hop before it, the chain's n - 2 hops against the tree's
      // depth - 1. Then the tree streams nearly as well as the chain (measured at n = 4 and 8:
      // within 5% for broadcast, 20% for reduce, at 16 MiB).
      const double fill = std::min(b, double(slotBytes_)) / std::max(b, 1.0);
      if (a == Algorithm::ring) {
        steps = nn - 1;
        factor = 1 + (nn - 2) * fill;
      }
      if (a == Algorithm::tree) {
        steps = lg;
        factor = (coll == Collective::broadcast ? 1.05 : 1.2) + (lg - 1) * fill;
        // Where the link makes it pay, the root sends (or receives) the buffer once per child.
        const bool rootPerChild = coll == Collective::broadcast ? link_.treeBroadcastRootPerChild
                                                                : link_.treeReduceRootPerChild;
        if (rootPerChild) factor = lg + (lg - 1) * fill;
      }
      break;
    }
    case Collective::reduce_scatter:
      if (a == Algorithm::ring) steps = nn - 1, factor = (nn - 1) / nn;
      // Recursive halving where n is a power of two: log2(n) steps with the ring's bytes.
      // Otherwise an all-reduce of the whole buffer, of which each rank keeps its block:
      // log2(n) steps (and two folding) against the ring's n - 1, each moving the whole buffer.
      if (a == Algorithm::doubling && (n & (n - 1)) == 0 && link_.halvingPassBytes > 0) {
        steps = lg, factor = link_.halvingPassBytes * (nn - 1) / nn;
      } else if (a == Algorithm::doubling) {
        return predictUs(a, Collective::all_reduce, bytes, n);
      }
      break;
    case Collective::gather:
    case Collective::scatter:
      // The root's links carry (n-1)/n of the whole either way; the chain's last block waits
      // n - 1 hops and its ranks copy n(n-1)/2 blocks in all, the flat tree's n - 1 (the work
      // that counts where ranks share cores: docs/tuning.md).
      if (a == Algorithm::ring) {
        steps = nn - 1;
        factor = link_.coresShared ? (nn - 1) / 2 : (nn - 1) / nn;
      }
      if (a == Algorithm::tree) steps = 1, factor = (nn - 1) / nn;
      break;
    case Collective::all_to_all:
    case Collective::all_to_all_v:
      if (a == Algorithm::pairwise) steps = nn - 1, factor = (nn - 1) / nn;
      // Bruck's: log2(n) steps where the pairwise exchange makes n - 1, but a block crosses as
      // many links as its distance has bits, in passes that cost as the all-gather's.
      if (a == Algorithm::doubling && coll == Collective::all_to_all && bruckAllToAll_) {
        steps = lg, factor = link_.bruckPassBytes * bruckBlockHops(n) / nn;
      }
      break;
    case Collective::all_gather_v:
      if (a == Algorithm::ring) steps = nn - 1, factor = (nn - 1) / nn;
      break;
    case Collective::barrier:
      if (a == Algorithm::dissemination) steps = lg;
      break;
    case Collective::send_recv:
      if (a == Algorithm::pairwise) steps = 1, factor = 1;
      break;
  }
  if (steps < 0) return -1;
  return priceUs(steps, factor, bytes);
}

namespace {
constexpr Algorithm kAll[] = {
    Algorithm::ring,          Algorithm::tree,         Algorithm::doubling, Algorithm::pairwise,
    Algorithm::dissemination, Algorithm::hierarchical, Algorithm::oneshot,  Algorithm::directRead};
}

// Where ranks share cores, a window reduce whose posters stall (its payload fills a data
// block) took twice the chain's time (n = 4 and 8 on 2 cores), and such gathers and scatters
// twice the flat tree's. The tuner leaves those to the links there (GYRE_ALGO still forces a
// reduce, gather or scatter; docs/tuning.md).
double Tuner::halvingAllReduceBytes(int n) const {
  return link_.halvingPassBytes * 2 * double(n - 1) / n;
}

bool Tuner::halvesAllReduce(size_t bytes, int n) const {
  if ((n & (n - 1)) != 0 || n < 4 || link_.halvingPassBytes <= 0) return false;
  const double lg = std::log2(double(n));
  return priceUs(2 * lg, halvingAllReduceBytes(n), bytes) <
         priceUs(lg, link_.wholeBufferStep * lg, bytes);
}

double Tuner::priceUs(double steps, double factor, size_t bytes) const {
  return steps * link_.alphaUs + double(bytes) * factor / link_.betaBytesUs;
}

size_t Tuner::doublingBound(Collective coll, int n) const {
  const bool pow2 = (n & (n - 1)) == 0;
  switch (coll) {
    case Collective::all_reduce:
      if (n <= 2 || link_.doublingAllReducesBelow == 0) return 0;
      return pow2 ? std::max(link_.doublingAllReducesBelow, link_.halvingAllReducesBelow)
                  : link_.doublingAllReducesBelow;
    case Collective::reduce_scatter:
      if (n < 3) return 0;
      return pow2 ? link_.halvingReduceScattersBelow : link_.doublingReduceScattersBelow;
    case Collective::all_gather:
      return n > 2 ? link_.bruckAllGathersBelow : 0;
    default:
      return 0;
  }
}

bool Tuner::candidate(Algorithm a, Collective coll, size_t bytes, int n) const {
  // Where ranks share cores each copies the n - 1 other inputs on a core another rank needs:
  // only the large all-gathers, broadcasts, gathers, scatters and all-to-alls and the middling
  // all-reduces read directly there, and nothing else (GYRE_ALGO=read still forces it).
  if (directRead_ && !kernelCopySlow_ && link_.readsDirectlyOnSharedCores(coll, bytes, n)) {
    return a == Algorithm::directRead;
  }
  if (a == Algorithm::directRead && (link_.coresShared || kernelCopySlow_)) return false;
  // The direct all-gather and broadcast from 256 KiB, from 64 KiB far apart. Below, the
  // window's posts and the ring's slots beat them (n = 2, close, broadcast of 64 KiB: 3.4-6.1
  // against 6.4-7.8 us; far, all-gather of 16 KiB: 3.8-4.1 against 4.8-5.8), though the model,
  // whose far price for a post was fitted to larger copies, says otherwise (docs/tuning_shm.md).
  // The reduces, as the all-reduces, go by the model's price and the measured choice.
  if (a == Algorithm::directRead && coll != Collective::all_reduce && coll != Collective::reduce &&
      bytes < (link_.farApart ? kDirectCopyFarFromBytes : kDirectCopyFromBytes)) {
    return false;
  }
  if (a == Algorithm::oneshot && coll != Collective::broadcast &&
      windowPostersStall(link_, coll, bytes, n, smallPost_)) {
    return false;
  }
  if (a == Algorithm::oneshot && coll == Collective::all_reduce &&
      bytes >= link_.windowAllReducesBelow) {
    return false;
  }
  if (a == Algorithm::oneshot && coll == Collective::reduce && n == 2 && !link_.coresShared &&
      bytes >= kTwoRankWindowReducesBelow) {
    return false;
  }
  if (a == Algorithm::doubling && coll == Collective::all_to_all &&
      bytes >= link_.bruckAllToAllsBelow) {
    return false;
  }
  if (coll == Collective::broadcast && link_.chainBroadcasts) return a == Algorithm::ring;
  const size_t pinnedChain = coll == Collective::reduce ? pinnedChainReducesFrom(n) : SIZE_MAX;
  if (a == Algorithm::ring && link_.chainsWaitForCores &&
      (coll == Collective::broadcast || (coll == Collective::reduce && bytes < pinnedChain))) {
    return false;
  }
  if (a == Algorithm::tree && coll == Collective::reduce &&
      (bytes >= link_.chainReducesFrom || bytes >= pinnedChain)) {
    return false;
  }
  if (a == Algorithm::ring || a == Algorithm::tree || a == Algorithm::doubling) {
    if (coll == Collective::all_reduce && link_.treeAllReducesFromRanks > 0 &&
        n >= link_.treeAllReducesFromRanks && bytes >= link_.treeAllReducesFrom &&
        bytes < link_.treeAllReducesBelow) {
      return a == Algorithm::tree;
    }
    const size_t below = doublingBound(coll, n);
    if (below > 0 && (a == Algorithm::doubling) != (bytes < below)) return false;
  }
  return !(a == Algorithm::tree && coll == Collective::broadcast &&
           bytes < link_.treeBroadcastFrom);
}

size_t Tuner::pinnedChainReducesFrom(int n) const {
  if (!link_.chainsWaitForCores) return SIZE_MAX;
  if ((n & (n - 1)) == 0) return link_.pinnedPow2ChainReducesFrom;
  const int extraHops = std::max(0, n - 1 - int(log2Ceil(n)));
  return std::max(link_.pinnedChainReducesFrom,
                  link_.pinnedChainReduceBytesPerHop * size_t(extraHops));
}

// On every call: no allocation, no formatting.
Choice Tuner::choose(Collective coll, size_t bytes, int n) const {
  if (forced_) {
    const double t = predictUs(forcedAlgorithm_, coll, bytes, n);
    if (t >= 0) return {forcedAlgorithm_, t, true};
  }
  Choice best{Algorithm::ring, -1, false};
  for (Algorithm a : kAll) {
    const double t = candidate(a, coll, bytes, n) ? predictUs(a, coll, bytes, n) : -1;
    if (t >= 0 && (best.predictedUs < 0 || t < best.predictedUs)) best = {a, t, false};
  }
  return best;
}

std::vector<Algorithm> Tuner::trialAlgorithms(const Choice& pick, Collective coll, size_t bytes,
                                              int n) const {
  std::vector<std::pair<double, Algorithm>> others;
  for (Algorithm a : kAll) {
    if (a == pick.algorithm || a == Algorithm::hierarchical) continue;
    const double t = predictUs(a, coll, bytes, n);
    if (t >= 0 && t <= kTrialSpread * pick.predictedUs) others.emplace_back(t, a);
  }
  std::stable_sort(others.begin(), others.end(),
                   [](const auto& x, const auto& y) { return x.first < y.first; });
  std::vector<Algorithm> algorithms{pick.algorithm};
  for (const auto& [t, a] : others) algorithms.push_back(a);
  return algorithms;
}

std::string Tuner::explain(const Choice& choice, Collective coll, size_t bytes, int n) const {
  if (choice.forced) return "forced by GYRE_ALGO";
  std::ostringstream why;
  why.precision(3);
  why << "predicted";
  const char* separator = " ";
  for (Algorithm a : kAll) {
    const double t = candidate(a, coll, bytes, n) ? predictUs(a, coll, bytes, n) : -1;
    if (t < 0) continue;
    why << separator << algorithmName(a) << " " << t << " us";
    separator = ", ";
  }
  if (forced_) {
    why << " (GYRE_ALGO=" << algorithmName(forcedAlgorithm_) << " does not implement "
        << collectiveName(coll) << ")";
  }
  return why.str();
}

}  // namespace gyre
