// The tuner's choices from its model, and what GYRE_ALGO may force.
#include <doctest/doctest.h>

#include <array>
#include <map>

#include "base/status.h"
#include "link/mailbox.h"
#include "runtime/core/tuner.h"
#include "tests/unit/tuner_geometry.h"

using namespace gyre;
using namespace gyre::test;

TEST_CASE("the tuner: recursive doubling for small all-reduces, the ring for large ones") {
  const Tuner t(Tuner::tcpLoopback(), "", kChunk, kSlot);
  for (int n : {2, 3, 4, 8}) {
    CAPTURE(n);
    CHECK(t.choose(Collective::all_reduce, 8, n).algorithm == Algorithm::doubling);
    CHECK(t.choose(Collective::all_reduce, 64 << 20, n).algorithm != Algorithm::doubling);
    // A small reduce-scatter all-reduces the whole buffer by doubling once it saves steps.
    CHECK(t.choose(Collective::reduce_scatter, 8, n).algorithm ==
          (n >= 4 ? Algorithm::doubling : Algorithm::ring));
    CHECK(t.choose(Collective::reduce_scatter, 64 << 20, n).algorithm == Algorithm::ring);
    CHECK(t.choose(Collective::all_to_all, 8, n).algorithm == Algorithm::pairwise);
    CHECK(t.choose(Collective::barrier, 0, n).algorithm == Algorithm::dissemination);
  }
  // Small scatters over sockets take the binomial tree (log2(n) sends on the root), large ones
  // and those over shared memory the flat one.
  CHECK(t.binomialScatter(64 << 10));
  CHECK_FALSE(t.binomialScatter(1 << 20));
  CHECK_FALSE(Tuner(Tuner::sharedMemory(true), "", kChunk, kSlot).binomialScatter(64));
  // Latency-bound broadcasts go down a tree once there are ranks enough.
  CHECK(t.choose(Collective::broadcast, 8, 8).algorithm == Algorithm::tree);
  // The choice explains itself with every candidate's prediction.
  const Choice c = t.choose(Collective::all_reduce, 8, 4);
  const std::string why = t.explain(c, Collective::all_reduce, 8, 4);
  CHECK(why.find("ring") != std::string::npos);
  CHECK(why.find("rd") != std::string::npos);
  CHECK(c.predictedUs > 0);
}

TEST_CASE("GYRE_ALGO forces an algorithm where the collective has it, and only there") {
  const Tuner tree(Tuner::tcpLoopback(), "tree", kChunk, kSlot);
  CHECK(tree.choose(Collective::all_reduce, 8, 4).algorithm == Algorithm::tree);
  CHECK(tree.choose(Collective::broadcast, 64 << 20, 4).algorithm == Algorithm::tree);
  const Choice rs = tree.choose(Collective::reduce_scatter, 8, 4);
  CHECK(rs.algorithm == Tuner(Tuner::tcpLoopback(), "", kChunk, kSlot)
                            .choose(Collective::reduce_scatter, 8, 4)
                            .algorithm);
  CHECK(tree.explain(rs, Collective::reduce_scatter, 8, 4)
            .find("does not implement reduce_scatter") != std::string::npos);
  const Tuner rd(Tuner::tcpLoopback(), "rd", kChunk, kSlot);
  CHECK(rd.choose(Collective::all_reduce, 64 << 20, 8).algorithm == Algorithm::doubling);
  CHECK(rd.choose(Collective::all_gather, 64 << 20, 8).algorithm == Algorithm::doubling);
  CHECK(rd.choose(Collective::reduce_scatter, 64 << 20, 8).algorithm == Algorithm::doubling);
  // The all-to-alls' exchange over the links, even where the window would carry the call.
  Tuner pairwise(Tuner::sharedMemory(true), "pairwise", kChunk, kSlot);
  pairwise.setOneShot(64 << 10);
  CHECK(pairwise.choose(Collective::all_to_all, 16, 2).algorithm == Algorithm::pairwise);
  CHECK(pairwise.choose(Collective::all_to_all, 16, 2).forced);
  CHECK(!pairwise.choose(Collective::all_reduce, 8, 2).forced);
  CHECK_THROWS_AS(Tuner(Tuner::tcpLoopback(), "fastest", kChunk, kSlot), Failure);
}

TEST_CASE("over tcp the all-reduce takes the doubling, then the ring; never the tree") {
  const Tuner tcp(Tuner::tcpLoopback(), "", kChunk, kSlot);
  for (int n = 2; n <= 8; ++n) {
    for (size_t bytes = 8; bytes <= (size_t(1) << 30); bytes *= 2) {
      CAPTURE(n);
      CAPTURE(bytes);
      CHECK(tcp.choose(Collective::all_reduce, bytes, n).algorithm != Algorithm::tree);
    }
  }
  // Two ranks: one whole-buffer exchange until the ring's second step costs less than the
  // doubling's extra bytes (measured crossover between 128 and 256 KiB).
  CHECK(tcp.choose(Collective::all_reduce, 128 << 10, 2).algorithm == Algorithm::doubling);
  CHECK(tcp.choose(Collective::all_reduce, 256 << 10, 2).algorithm == Algorithm::ring);
}

TEST_CASE("over shared memory the doubling pays where the ranks' CPUs sit far apart") {
  const Tuner close(Tuner::sharedMemory(true, 120), "", kChunk, kSlot);
  const Tuner far(Tuner::sharedMemory(true, 530, /*streamsWhenFar=*/false), "", kChunk, kSlot);
  const Tuner farStreamed(Tuner::sharedMemory(true, 530), "", kChunk, kSlot);
  const Tuner unmeasured(Tuner::sharedMemory(true), "", kChunk, kSlot);
  const Tuner tcp(Tuner::tcpLoopback(), "", kChunk, kSlot);
  // Two ranks, CPUs close: the ring's two half steps beat one exchange of the whole buffer
  // from 16 KiB up (measured 0.65-0.75 times its time); far apart with cached slots, the
  // exchange wins at every size measured (the ring 1.4-1.6 times slower); far apart with
  // streamed slots the ring is ahead again from 256 KiB (1 MiB: 62-77 us against 87-91).
  // Unmeasured counts as close.
  for (size_t bytes : {size_t(64) << 10, size_t(1) << 20, size_t(16) << 20}) {
    CAPTURE(bytes);
    CHECK(close.choose(Collective::all_reduce, bytes, 2).algorithm == Algorithm::ring);
    CHECK(unmeasured.choose(Collective::all_reduce, bytes, 2).algorithm == Algorithm::ring);
    CHECK(far.choose(Collective::all_reduce, bytes, 2).algorithm == Algorithm::doubling);
    if (bytes >= (size_t(1) << 20)) {
      CHECK(farStreamed.choose(Collective::all_reduce, bytes, 2).algorithm == Algorithm::ring);
    }
  }
  // Streamed, far slots cost about what close ones do, not five times as much.
  CHECK(farStreamed.predictUs(Algorithm::ring, Collective::all_reduce, 16 << 20, 2) <
        far.predictUs(Algorithm::ring, Collective::all_reduce, 16 << 20, 2) / 5);
  CHECK(tcp.choose(Collective::all_reduce, 16 << 20, 2).algorithm == Algorithm::ring);
  // More ranks: the doubling's log n whole-buffer steps lose for large buffers.
  for (const Tuner* shm : {&close, &far, &farStreamed}) {
    CHECK(shm->choose(Collective::all_reduce, 8, 8).algorithm == Algorithm::doubling);
    CHECK(shm->choose(Collective::all_reduce, 64 << 20, 8).algorithm != Algorithm::doubling);
  }
  // A step costs a microsecond, not tcp's seven.
  CHECK(close.predictUs(Algorithm::doubling, Collective::all_reduce, 8, 2) <
        tcp.predictUs(Algorithm::doubling, Collective::all_reduce, 8, 2) / 5);
}

TEST_CASE("tcp rings per call: one per core each rank has to itself, each carrying 2 MiB") {
  const size_t mib = size_t(1) << 20;
  // Ranks that share their cores (this machine: 2 ranks, 2 cores) get one ring at any size.
  const Tuner shared(Tuner::tcpLoopback(1), "", kChunk, kSlot);
  CHECK(shared.channels(8) == 1);
  CHECK(shared.channels(size_t(1) << 30) == 1);
  // Eight cores a rank: more rings as the message grows, never more than four.
  const Tuner roomy(Tuner::tcpLoopback(8), "", kChunk, kSlot);
  CHECK(roomy.channels(8) == 1);
  CHECK(roomy.channels(2 * mib) == 1);
  CHECK(roomy.channels(4 * mib) == 2);
  CHECK(roomy.channels(6 * mib) == 3);
  CHECK(roomy.channels(size_t(1) << 30) == Tuner::kMaxAutoChannels);
  CHECK(Tuner(Tuner::tcpLoopback(3), "", kChunk, kSlot).channels(size_t(1) << 30) == 3);
  CHECK(Tuner(Tuner::tcpLoopback(0), "", kChunk, kSlot).channels(size_t(1) << 30) == 1);
  // Shared memory is bound by memory, not by a core's copying: one ring.
  CHECK(Tuner(Tuner::sharedMemory(true), "", kChunk, kSlot).channels(size_t(1) << 30) == 1);
}

TEST_CASE("ranks sharing cores: the doubling's whole-buffer steps cost more") {
  const size_t mib = size_t(1) << 20;
  const Tuner roomy(Tuner::sharedMemory(true, 530, /*streamsWhenFar=*/false), "", kChunk, kSlot);
  const Tuner sleeping(Tuner::sharedMemory(false), "", kChunk, kSlot);
  // Partners reduce at the same time on the same cores: 16 MiB at n = 4 measured 2.5 times the
  // ring's time with the doubling on 2 cores. With cores of their own and far apart (slots
  // cached), the doubling's two exchanges win.
  CHECK(roomy.choose(Collective::all_reduce, 16 * mib, 4).algorithm == Algorithm::doubling);
  CHECK(sleeping.choose(Collective::all_reduce, 16 * mib, 4).algorithm == Algorithm::ring);
  CHECK(sleeping.choose(Collective::all_reduce, 8, 4).algorithm == Algorithm::doubling);
  // 256 KiB at n = 4 and 8: the ring took 0.4-0.7 times the doubling's time.
  CHECK(sleeping.choose(Collective::all_reduce, 256 << 10, 4).algorithm == Algorithm::ring);
  CHECK(sleeping.choose(Collective::all_reduce, 256 << 10, 8).algorithm == Algorithm::ring);
}

TEST_CASE("ranks sharing cores: large reduces and small broadcasts go down the chain") {
  const Tuner sleeping(Tuner::sharedMemory(false), "", kChunk, kSlot);
  const Tuner roomy(Tuner::sharedMemory(true), "", kChunk, kSlot);
  for (int n : {4, 8}) {
    CAPTURE(n);
    for (size_t bytes : {size_t(256) << 10, size_t(2) << 20, size_t(16) << 20}) {
      CAPTURE(bytes);
      CHECK(sleeping.choose(Collective::reduce, bytes, n).algorithm == Algorithm::ring);
    }
    for (size_t bytes : {size_t(64), size_t(4) << 10, size_t(32) << 10}) {
      CAPTURE(bytes);
      CHECK(sleeping.choose(Collective::reduce, bytes, n).algorithm == Algorithm::tree);
    }
    CHECK(sleeping.choose(Collective::broadcast, 4 << 10, n).algorithm != Algorithm::tree);
    // Larger broadcasts and ranks with cores still price the tree.
    CHECK(sleeping.predictUs(Algorithm::tree, Collective::broadcast, 32 << 10, n) > 0);
    CHECK(roomy.choose(Collective::broadcast, 4 << 10, 8).algorithm == Algorithm::tree);
  }
  // Over tcp the chain takes broadcasts below 4 MiB there (n = 8, 1 MiB: 1.20-1.30 times
  // faster than the tree); the tree keeps its reduces.
  const Tuner tcpShared(Tuner::tcpLoopback(1, false), "", kChunk, kSlot);
  const Tuner tcpRoomy(Tuner::tcpLoopback(1, true), "", kChunk, kSlot);
  for (size_t bytes : {size_t(8), size_t(4) << 10, size_t(256) << 10}) {
    CAPTURE(bytes);
    CHECK(tcpShared.choose(Collective::broadcast, bytes, 4).algorithm == Algorithm::ring);
    CHECK(tcpRoomy.choose(Collective::broadcast, bytes, 4).algorithm == Algorithm::tree);
  }
  for (int n : {4, 8}) {
    CHECK(tcpShared.choose(Collective::broadcast, 1 << 20, n).algorithm == Algorithm::ring);
    CHECK(tcpShared.choose(Collective::broadcast, 2 << 20, n).algorithm == Algorithm::ring);
  }
  CHECK(tcpShared.choose(Collective::broadcast, 8 << 20, 8).algorithm == Algorithm::tree);
  // Bruck's all-gather below 1 MiB at every n, the ring from there; with a core each the
  // model's crossing, which moves with n.
  for (int n : {3, 4, 6, 8}) {
    CAPTURE(n);
    for (size_t bytes : {size_t(64) << 10, size_t(512) << 10, (size_t(1) << 20) - 1}) {
      CAPTURE(bytes);
      CHECK(tcpShared.choose(Collective::all_gather, bytes, n).algorithm == Algorithm::doubling);
    }
    CHECK(tcpShared.choose(Collective::all_gather, 1 << 20, n).algorithm == Algorithm::ring);
    CHECK(tcpShared.choose(Collective::all_gather, 16 << 20, n).algorithm == Algorithm::ring);
  }
  CHECK(tcpRoomy.choose(Collective::all_gather, 64 << 10, 4).algorithm == Algorithm::doubling);
  CHECK(tcpRoomy.choose(Collective::all_gather, 512 << 10, 4).algorithm == Algorithm::ring);
  // The reduce-scatter's rd from n = 3: the halving below 1 MiB where n is a power of two,
  // the whole-buffer doubling below 63 KiB elsewhere; the ring from there.
  for (int n : {3, 4, 6, 8}) {
    CAPTURE(n);
    const bool pow2 = (n & (n - 1)) == 0;
    const size_t below = pow2 ? size_t(1) << 20 : size_t(63) << 10;
    for (size_t bytes : {size_t(8), size_t(16) << 10, below - 1}) {
      CAPTURE(bytes);
      CHECK(tcpShared.choose(Collective::reduce_scatter, bytes, n).algorithm ==
            Algorithm::doubling);
    }
    CHECK(tcpShared.choose(Collective::reduce_scatter, below, n).algorithm == Algorithm::ring);
  }
  // Priced as halving: at n = 8 the whole-buffer doubling would cost three buffers.
  CHECK(tcpShared.predictUs(Algorithm::doubling, Collective::reduce_scatter, 1 << 20, 8) <
        tcpShared.predictUs(Algorithm::doubling, Collective::all_reduce, 1 << 20, 8));
  CHECK(tcpShared.choose(Collective::reduce_scatter, 32 << 10, 2).algorithm == Algorithm::ring);
  // The all-reduce's doubling below 160 KiB from n = 3, the ring from there (at 8 ranks or more
  // the tree takes 64-512 KiB: below); at n = 4 halving, then doubling, up to 2 MiB.
  for (int n : {3, 4, 5, 6}) {
    CAPTURE(n);
    for (size_t bytes : {size_t(8), size_t(64) << 10, (size_t(160) << 10) - 1}) {
      CAPTURE(bytes);
      CHECK(tcpShared.choose(Collective::all_reduce, bytes, n).algorithm == Algorithm::doubling);
    }
    const size_t ringFrom = n == 4 ? size_t(2) << 20 : size_t(160) << 10;
    CHECK(tcpShared.choose(Collective::all_reduce, ringFrom - 1, n).algorithm ==
          Algorithm::doubling);
    CHECK(tcpShared.choose(Collective::all_reduce, ringFrom, n).algorithm == Algorithm::ring);
  }
  // Which doubling: the whole buffer at every step for small buffers, halving then doubling for
  // larger ones, never where n is not a power of two or the link does not price it.
  CHECK_FALSE(tcpShared.halvesAllReduce(8, 4));
  CHECK(tcpShared.halvesAllReduce(256 << 10, 4));
  CHECK(tcpShared.halvesAllReduce(1 << 20, 8));
  CHECK_FALSE(tcpShared.halvesAllReduce(1 << 20, 6));
  CHECK_FALSE(Tuner(Tuner::sharedMemory(false), "", kChunk, kSlot).halvesAllReduce(1 << 20, 4));
  CHECK(tcpShared.predictUs(Algorithm::doubling, Collective::all_reduce, 1 << 20, 4) <
        1.1 * 2 * 0.75 * (1 << 20) / 5000.0 + 4 * 7.0 + 1e-6);
  // Forced, Bruck still runs at any size.
  const Tuner bruck(Tuner::tcpLoopback(1, false), "rd", kChunk, kSlot);
  CHECK(bruck.choose(Collective::all_gather, 16 << 20, 4).algorithm == Algorithm::doubling);
  CHECK(tcpShared.choose(Collective::reduce, 8, 4).algorithm == Algorithm::tree);
  CHECK(tcpShared.choose(Collective::reduce, 32 << 10, 8).algorithm == Algorithm::tree);
  CHECK(tcpShared.choose(Collective::reduce, 128 << 10, 8).algorithm == Algorithm::tree);
  // From 256 KiB the tree's root takes each child's buffer through a socket copy on a shared
  // core: the chain was faster at n = 8 (256 KiB: 1.12-1.40 times), and at n = 4.
  for (int n : {4, 8}) {
    CHECK(tcpShared.choose(Collective::reduce, 256 << 10, n).algorithm == Algorithm::ring);
    CHECK(tcpShared.choose(Collective::reduce, 2 << 20, n).algorithm == Algorithm::ring);
  }
  CHECK(tcpRoomy.choose(Collective::reduce, 256 << 10, 8).algorithm == Algorithm::tree);
  CHECK(tcpShared.predictUs(Algorithm::tree, Collective::reduce, 2 << 20, 8) >
        tcpRoomy.predictUs(Algorithm::tree, Collective::reduce, 2 << 20, 8));
  // Forced, the tree still runs.
  const Tuner forced(Tuner::sharedMemory(false), "tree", kChunk, kSlot);
  CHECK(forced.choose(Collective::reduce, 8, 4).algorithm == Algorithm::tree);
}

TEST_CASE("ranks sharing cores, pinned in blocks: broadcasts and reduces take the tree") {
  // Bound in blocks (n = 4 and 8 on 2 CPUs) the tree was faster at every size where the chain
  // was picked for floating ranks: over shared memory the 16 MiB broadcast at n = 4 1756
  // against 3317 us, over tcp the 16 MiB reduce 6350 against 10953 (docs/tuning.md).
  for (const bool tcp : {false, true}) {
    CAPTURE(tcp);
    const LinkCost floating = tcp ? Tuner::tcpLoopback(1, false) : Tuner::sharedMemory(false);
    const Tuner pinned(Tuner::pinnedInBlocks(floating), "", kChunk, kSlot);
    const Tuner unpinned(floating, "", kChunk, kSlot);
    for (int n : {4, 8}) {
      CAPTURE(n);
      for (size_t bytes :
           {size_t(8), size_t(4) << 10, size_t(256) << 10, size_t(2) << 20, size_t(16) << 20}) {
        CAPTURE(bytes);
        CHECK(pinned.choose(Collective::broadcast, bytes, n).algorithm == Algorithm::tree);
        // Over shared memory the reduce takes the chain from 8 MiB (a test case below).
        if (tcp || bytes < (8 << 20)) {
          CHECK(pinned.choose(Collective::reduce, bytes, n).algorithm == Algorithm::tree);
        }
      }
      // Floating ranks keep the chain where it was measured faster for them.
      CHECK(unpinned.choose(Collective::reduce, 2 << 20, n).algorithm == Algorithm::ring);
      CHECK(unpinned.choose(Collective::broadcast, 4 << 10, n).algorithm == Algorithm::ring);
      // The all-reduce and all-gather are priced as before.
      CHECK(pinned.choose(Collective::all_reduce, 16 << 20, n).algorithm ==
            unpinned.choose(Collective::all_reduce, 16 << 20, n).algorithm);
      CHECK(pinned.choose(Collective::all_gather, 64 << 10, n).algorithm ==
            unpinned.choose(Collective::all_gather, 64 << 10, n).algorithm);
    }
    // The window's inlined broadcast still wins the smallest calls; GYRE_ALGO still forces the
    // chain.
    Tuner window(Tuner::pinnedInBlocks(floating), "", kChunk, kSlot);
    window.setOneShot(64 << 10);
    if (!tcp) CHECK(window.choose(Collective::broadcast, 8, 4).algorithm == Algorithm::oneshot);
    const Tuner forced(Tuner::pinnedInBlocks(floating), "ring", kChunk, kSlot);
    CHECK(forced.choose(Collective::reduce, 2 << 20, 4).algorithm == Algorithm::ring);
  }
}

TEST_CASE("pinned in two blocks over tcp: small tree broadcasts relay every other call") {
  const LinkCost pinned = Tuner::pinnedInBlocks(Tuner::tcpLoopback(1, false));
  const Tuner twoBlocks(Tuner::pinnedInTwoBlocksOverTcp(pinned), "", kChunk, kSlot);
  const Tuner blocks(pinned, "", kChunk, kSlot);
  for (uint64_t seq = 1; seq <= 4; ++seq) {
    CAPTURE(seq);
    CHECK(twoBlocks.relaysBroadcast(8, seq) == (seq % 2 == 1));
    CHECK(twoBlocks.relaysBroadcast(4 << 10, seq) == (seq % 2 == 1));
    CHECK_FALSE(twoBlocks.relaysBroadcast(8 << 10, seq));  // from 8 KiB the relay lost
    CHECK_FALSE(blocks.relaysBroadcast(8, seq));
  }
  CHECK(twoBlocks.choose(Collective::broadcast, 8, 4).algorithm == Algorithm::tree);
}

TEST_CASE("pinned in blocks: reduces take the chain where n is not a power of two") {
  const Tuner shm(Tuner::pinnedInBlocks(Tuner::sharedMemory(false)), "", kChunk, kSlot);
  const Tuner tcp(Tuner::pinnedInBlocks(Tuner::tcpLoopback(1, false)), "", kChunk, kSlot);
  auto reduce = [](const Tuner& t, size_t bytes, int n) {
    return t.choose(Collective::reduce, bytes, n).algorithm;
  };
  for (int n : {3, 5, 6, 7}) {
    CAPTURE(n);
    CHECK(shm.pinnedChainReducesFrom(n) == size_t(128) << 10);
    CHECK(reduce(shm, 64 << 10, n) == Algorithm::tree);
    CHECK(reduce(shm, 128 << 10, n) == Algorithm::ring);
    CHECK(reduce(shm, 16 << 20, n) == Algorithm::ring);
    // Over tcp from 128 KiB per hop past the tree's depth, 32 KiB at least.
    const int hops = n - 1 - (n <= 4 ? 2 : 3);  // the chain's n - 1 against ceil(log2 n)
    const size_t from = std::max(size_t(32) << 10, (size_t(128) << 10) * size_t(hops));
    CHECK(tcp.pinnedChainReducesFrom(n) == from);
    CHECK(reduce(tcp, from - 1, n) == Algorithm::tree);
    CHECK(reduce(tcp, from, n) == Algorithm::ring);
    // Broadcasts keep the tree.
    CHECK(shm.choose(Collective::broadcast, 16 << 20, n).algorithm == Algorithm::tree);
  }
  // Where it is, over shared memory from 8 MiB, as the tree falls behind in large buffers.
  for (int n : {4, 8}) {
    CAPTURE(n);
    CHECK(shm.pinnedChainReducesFrom(n) == size_t(8) << 20);
    CHECK(reduce(shm, (8 << 20) - 1, n) == Algorithm::tree);
    CHECK(reduce(shm, 16 << 20, n) == Algorithm::ring);
    CHECK(tcp.pinnedChainReducesFrom(n) == SIZE_MAX);
    CHECK(reduce(tcp, 16 << 20, n) == Algorithm::tree);
  }
  // Floating ranks keep their own bound.
  CHECK(Tuner(Tuner::sharedMemory(false), "", kChunk, kSlot).pinnedChainReducesFrom(3) == SIZE_MAX);
}

TEST_CASE("pinned in blocks over tcp: broadcasts take the shape with the least busy block") {
  using Shape = Tuner::BroadcastShape;
  // Blocks as gyre-run makes them on 2 CPUs: the first (n + 1) / 2 ranks, then the others.
  auto blocks = [](int n) {
    std::vector<int> b;
    for (int r = 0; r < n; ++r) b.push_back(r < (n + 1) / 2 ? 0 : (n + 1) / 2);
    return b;
  };
  auto cpus = [](int n) {
    std::vector<std::vector<int>> c;
    for (int r = 0; r < n; ++r) c.push_back({r < (n + 1) / 2 ? 0 : 1});
    return c;
  };
  // Sends and receives on the busiest block, from rank 0: tree, chain, reversed chain. At
  // n = 6 the tree's root makes three sends beside rank 2's one on the first block; at n = 3
  // the reversed chain 0-2-1 gives each block two calls where the chain gives the first three.
  const std::map<int, std::array<int, 3>> expected{
      {3, {3, 3, 2}}, {4, {3, 3, 4}}, {5, {6, 5, 4}},    {6, {6, 5, 6}},
      {7, {7, 7, 6}}, {8, {7, 7, 8}}, {10, {11, 9, 10}}, {12, {12, 11, 12}}};
  const LinkCost pinned = Tuner::pinnedInBlocks(Tuner::tcpLoopback(1, false));
  for (const auto& [n, calls] : expected) {
    CAPTURE(n);
    CHECK(Tuner::busiestBlockCalls(blocks(n), Shape::tree, 0) == calls[0]);
    CHECK(Tuner::busiestBlockCalls(blocks(n), Shape::chain, 0) == calls[1]);
    CHECK(Tuner::busiestBlockCalls(blocks(n), Shape::reversedChain, 0) == calls[2]);
    const bool chain = std::min(calls[1], calls[2]) < calls[0];
    const LinkCost link = Tuner::pinnedInBlocksOverTcp(pinned, cpus(n));
    CHECK(link.chainBroadcasts == chain);
    CHECK(Tuner::reversedChains(cpus(n))[0] == (calls[2] < calls[1]));
    const Tuner t(link, "", kChunk, kSlot);
    for (size_t bytes : {size_t(8), size_t(4) << 10, size_t(256) << 10, size_t(16) << 20}) {
      CAPTURE(bytes);
      CHECK(t.choose(Collective::broadcast, bytes, n).algorithm ==
            (chain ? Algorithm::ring : Algorithm::tree));
    }
    // Reduces send once from every rank down either shape: small ones keep the tree.
    CHECK(t.choose(Collective::reduce, 8, n).algorithm == Algorithm::tree);
  }
  // A root alone on its block gains nothing either way: the chain runs forward.
  CHECK_FALSE(Tuner::reversedChains(cpus(3))[2]);
  // GYRE_ALGO still forces the tree.
  const Tuner forced(Tuner::pinnedInBlocksOverTcp(pinned, cpus(6)), "tree", kChunk, kSlot);
  CHECK(forced.choose(Collective::broadcast, 8, 6).algorithm == Algorithm::tree);
}

TEST_CASE("ranks sharing cores over tcp: mid-sized all-reduces of 8 ranks or more take the tree") {
  const LinkCost floating = Tuner::tcpLoopback(1, false);
  const LinkCost pinned = Tuner::pinnedInBlocks(floating);
  const Tuner twoBlocks(Tuner::pinnedInTwoBlocksOverTcp(pinned), "", kChunk, kSlot);
  const Tuner blocks(pinned, "", kChunk, kSlot);
  const Tuner unpinned(floating, "", kChunk, kSlot);
  for (int n : {8, 16}) {
    CAPTURE(n);
    for (size_t bytes : {size_t(64) << 10, (size_t(128) << 10) - 1}) {
      CAPTURE(bytes);
      CHECK(twoBlocks.choose(Collective::all_reduce, bytes, n).algorithm == Algorithm::tree);
      CHECK(blocks.choose(Collective::all_reduce, bytes, n).algorithm == Algorithm::tree);
      CHECK(unpinned.choose(Collective::all_reduce, bytes, n).algorithm == Algorithm::tree);
    }
    // Pinned in two blocks up to 1 MiB; elsewhere halving, then doubling, from 128 KiB.
    for (size_t bytes : {size_t(128) << 10, size_t(512) << 10, (size_t(1) << 20) - 1}) {
      CAPTURE(bytes);
      CHECK(twoBlocks.choose(Collective::all_reduce, bytes, n).algorithm == Algorithm::tree);
      CHECK(unpinned.choose(Collective::all_reduce, bytes, n).algorithm == Algorithm::doubling);
      CHECK(unpinned.halvesAllReduce(bytes, n));
    }
    // The whole-buffer doubling below; halving, then doubling, to 2 MiB; the ring from there.
    CHECK(twoBlocks.choose(Collective::all_reduce, 32 << 10, n).algorithm == Algorithm::doubling);
    CHECK_FALSE(twoBlocks.halvesAllReduce(32 << 10, n));
    CHECK(twoBlocks.choose(Collective::all_reduce, 1 << 20, n).algorithm == Algorithm::doubling);
    CHECK(twoBlocks.choose(Collective::all_reduce, 2 << 20, n).algorithm == Algorithm::ring);
  }
  // Fewer ranks keep the doubling, halving from 256 KiB where n is a power of two; with a core
  // each the model decides; GYRE_ALGO still forces the ring.
  for (int n : {4, 6}) {
    CAPTURE(n);
    CHECK(twoBlocks.choose(Collective::all_reduce, 64 << 10, n).algorithm == Algorithm::doubling);
    CHECK(twoBlocks.choose(Collective::all_reduce, 256 << 10, n).algorithm ==
          (n == 4 ? Algorithm::doubling : Algorithm::ring));
  }
  const Tuner roomy(Tuner::tcpLoopback(1, true), "", kChunk, kSlot);
  CHECK(roomy.choose(Collective::all_reduce, 256 << 10, 8).algorithm != Algorithm::tree);
  const Tuner ring(Tuner::pinnedInTwoBlocksOverTcp(pinned), "ring", kChunk, kSlot);
  CHECK(ring.choose(Collective::all_reduce, 256 << 10, 8).algorithm == Algorithm::ring);
}

TEST_CASE("ranks sharing cores: a window broadcast only where its payload fits the post's piece") {
  Tuner roomy(Tuner::sharedMemory(true), "", kChunk, kSlot);
  Tuner sleeping(Tuner::sharedMemory(false), "", kChunk, kSlot);
  roomy.setOneShot(64 * 1024);
  sleeping.setOneShot(64 * 1024);
  // Beyond the post's piece of the data blocks (2 KiB) the root waits for readers on its own
  // core every two calls.
  const size_t piece = MailboxWindow::smallBytesFor(64 * 1024);
  CHECK(piece == 2048);
  for (size_t bytes : {size_t(8), MailPost::kInlineBytes, size_t(32), piece}) {
    CAPTURE(bytes);
    CHECK(sleeping.choose(Collective::broadcast, bytes, 4).algorithm == Algorithm::oneshot);
  }
  CHECK(sleeping.choose(Collective::broadcast, piece + 8, 4).algorithm != Algorithm::oneshot);
  CHECK(sleeping.choose(Collective::broadcast, 16 * 1024, 4).algorithm != Algorithm::oneshot);
  // The other window collectives, and every one where ranks have cores, are unchanged.
  CHECK(sleeping.choose(Collective::all_gather, 16 * 1024, 4).algorithm == Algorithm::oneshot);
  CHECK(roomy.choose(Collective::broadcast, 8 * 1024, 2).algorithm == Algorithm::oneshot);
  // Where the two ranks have cores close by, the window's broadcast runs at 2.4-3 times the
  // streamed ring's pace up to its post's 64 KiB (docs/perf/tuner_checks.md).
  CHECK(roomy.choose(Collective::broadcast, 16 * 1024, 2).algorithm == Algorithm::oneshot);
  CHECK(roomy.choose(Collective::broadcast, 64 * 1024, 2).algorithm == Algorithm::oneshot);
  CHECK(roomy.choose(Collective::broadcast, 128 * 1024, 2).algorithm != Algorithm::oneshot);
}

TEST_CASE("broadcast and reduce: the chain pays its fill per hop, the tree per level") {
  const size_t mib = size_t(1) << 20;
  const Tuner shm(Tuner::sharedMemory(true), "", kChunk, kSlot);
  // Below a slot every hop of the chain forwards the whole message in turn: the tree's three
  // levels beat the chain's seven hops at n = 8.
  CHECK(shm.choose(Collective::broadcast, 64 * 1024, 8).algorithm == Algorithm::tree);
  CHECK(shm.choose(Collective::reduce, 64 * 1024, 8).algorithm == Algorithm::tree);
  // Far past a slot the fill is small and the chain's one pass per byte wins.
  CHECK(shm.choose(Collective::broadcast, 16 * mib, 8).algorithm == Algorithm::ring);
  CHECK(shm.choose(Collective::reduce, 64 * mib, 8).algorithm == Algorithm::ring);
  // The fill is part of the prediction: a slot's worth of fill per hop.
  const double fill = double(kSlot) / 8000.0;
  const double ring = shm.predictUs(Algorithm::ring, Collective::reduce, kSlot, 8);
  CHECK(ring == doctest::Approx(7 * 1.0 + 7 * fill));
  // Two ranks: no hop between, so slot size changes nothing.
  const Tuner small(Tuner::sharedMemory(true), "", kChunk, 4096);
  CHECK(small.predictUs(Algorithm::ring, Collective::broadcast, mib, 2) ==
        doctest::Approx(shm.predictUs(Algorithm::ring, Collective::broadcast, mib, 2)));
}

TEST_CASE("hosts of several ranks: the hierarchical all-reduce and all-gather once bytes matter") {
  Tuner t(Tuner::tcpNetwork(), "", kChunk, kSlot);
  // Not a candidate until the tuner knows the hosts.
  CHECK(t.predictUs(Algorithm::hierarchical, Collective::all_reduce, 64 << 20, 4) < 0);
  t.setHosts(2, 2, Tuner::sharedMemory(true));
  CHECK(t.choose(Collective::all_reduce, 64 << 20, 4).algorithm == Algorithm::hierarchical);
  CHECK(t.choose(Collective::all_reduce, 1 << 20, 8).algorithm == Algorithm::hierarchical);
  CHECK(t.choose(Collective::all_reduce, 8, 4).algorithm == Algorithm::doubling);
  // The all-gather and reduce-scatter have it too: a host link carries (K-1)/K of the
  // buffer, not (n-1)/n.
  CHECK(t.choose(Collective::all_gather, 64 << 20, 4).algorithm == Algorithm::hierarchical);
  CHECK(t.choose(Collective::reduce_scatter, 64 << 20, 4).algorithm == Algorithm::hierarchical);
  CHECK(t.predictUs(Algorithm::hierarchical, Collective::all_gather, 64 << 20, 4) <
        t.predictUs(Algorithm::ring, Collective::all_gather, 64 << 20, 4));
  CHECK(t.predictUs(Algorithm::hierarchical, Collective::broadcast, 64 << 20, 4) < 0);
  CHECK(t.choose(Collective::broadcast, 64 << 20, 4).algorithm != Algorithm::hierarchical);
  const Tuner forced(Tuner::tcpNetwork(), "hier", kChunk, kSlot);
  // Forced without hosts: the tuner chooses among what applies.
  CHECK(forced.choose(Collective::all_reduce, 8, 4).algorithm != Algorithm::hierarchical);
}

TEST_CASE("between hosts: a tree's root pays per child; a slower network moves the crossovers") {
  // At 1 MiB over 4 hosts the binomial broadcast would send the buffer twice from its root.
  const Tuner net(Tuner::tcpNetwork(1, 1.0), "", kChunk, kSlot);
  CHECK(net.choose(Collective::broadcast, 1 << 20, 4).algorithm == Algorithm::ring);
  CHECK(net.choose(Collective::broadcast, 8, 8).algorithm == Algorithm::tree);
  // On a 1 Gbit/s link the doubling's whole-buffer steps lose to the ring sooner than at 10.
  const Tuner fast(Tuner::tcpNetwork(1, 10.0), "", kChunk, kSlot);
  CHECK(fast.choose(Collective::all_reduce, 64 << 10, 4).algorithm == Algorithm::doubling);
  CHECK(net.choose(Collective::all_reduce, 64 << 10, 4).algorithm == Algorithm::ring);
}

TEST_CASE("the tuner: the host window's one-shot for small calls whose post fits") {
  Tuner t(Tuner::sharedMemory(true), "", kChunk, kSlot);
  // Without a window, never.
  CHECK(t.choose(Collective::all_reduce, 8, 2).algorithm != Algorithm::oneshot);
  t.setOneShot(64 << 10);
  for (int n : {2, 4, 8}) {
    CAPTURE(n);
    for (Collective c : {Collective::all_reduce, Collective::broadcast, Collective::all_gather,
                         Collective::reduce, Collective::reduce_scatter, Collective::gather,
                         Collective::scatter, Collective::all_to_all}) {
      CAPTURE(int(c));
      const bool oneBuffer =
          c == Collective::all_reduce || c == Collective::broadcast || c == Collective::reduce;
      const size_t bytes = oneBuffer ? 8 : 8 * n;  // the whole, as the tuner counts it
      CHECK(t.choose(c, bytes, n).algorithm == Algorithm::oneshot);
    }
    // A post past the window's capacity, or nothing to move, goes through the links.
    CHECK(t.choose(Collective::all_reduce, (64 << 10) + 4, n).algorithm != Algorithm::oneshot);
    CHECK(t.choose(Collective::all_reduce, 0, n).algorithm != Algorithm::oneshot);
    CHECK(t.choose(Collective::all_to_all_v, 8 * n, n).algorithm != Algorithm::oneshot);
  }
  // An all-gather's or a gather's post is one rank's block: 64 KiB each at n = 4 still fits.
  // A scatter's root and every rank of an all-to-all post their whole input.
  for (Collective c : {Collective::all_gather, Collective::gather}) {
    CHECK(t.predictUs(Algorithm::oneshot, c, 4 * (64 << 10), 4) > 0);
    CHECK(t.predictUs(Algorithm::oneshot, c, 4 * (64 << 10) + 4, 4) < 0);
  }
  for (Collective c : {Collective::scatter, Collective::all_to_all}) {
    CHECK(t.predictUs(Algorithm::oneshot, c, 64 << 10, 4) > 0);
    CHECK(t.predictUs(Algorithm::oneshot, c, (64 << 10) + 16, 4) < 0);
  }
  // At n = 2 both ranks of an all-to-all, and a scatter's root, post only the other block: priced
  // as the buffer once, the window keeps 8 KiB, where it was measured faster than the links.
  for (Collective c : {Collective::scatter, Collective::all_to_all}) {
    CAPTURE(int(c));
    CHECK(t.choose(c, 8 << 10, 2).algorithm == Algorithm::oneshot);
    // The scatter: as many bytes as the all-gather of two 8 KiB blocks, whose ranks read one
    // block each. The all-to-all with a core each, close by: its post counts once, half that.
    const double allGather = t.predictUs(Algorithm::oneshot, Collective::all_gather, 16 << 10, 2);
    const double bytesUs = double(8 << 10) / t.link().betaBytesUs;
    CHECK(t.predictUs(Algorithm::oneshot, c, 8 << 10, 2) ==
          doctest::Approx(c == Collective::scatter ? allGather : allGather - bytesUs / 2));
    CHECK(t.predictUs(Algorithm::oneshot, c, 8 << 10, 3) >
          t.predictUs(Algorithm::oneshot, c, 8 << 10, 2));
  }
  // Without a window, gathers and scatters go straight to or from the root (the flat tree),
  // not down the chain.
  for (bool haveCores : {true, false}) {
    const Tuner links(Tuner::sharedMemory(haveCores), "", kChunk, kSlot);
    for (int n : {4, 8}) {
      CHECK(links.choose(Collective::gather, 8 * n, n).algorithm == Algorithm::tree);
      CHECK(links.choose(Collective::scatter, size_t(16) << 20, n).algorithm == Algorithm::tree);
    }
  }
  // Ranks sharing cores: a reduce and a scatter use the window only while the post fits in
  // the post's piece of the data blocks (2 KiB); a gather also from 32 KiB a rank (the flat
  // tree between).
  Tuner shared(Tuner::sharedMemory(false), "", kChunk, kSlot);
  shared.setOneShot(64 << 10);
  for (size_t bytes : {size_t(8), MailPost::kInlineBytes + 4, size_t(2048)}) {
    CAPTURE(bytes);
    CHECK(shared.choose(Collective::reduce, bytes, 4).algorithm == Algorithm::oneshot);
    CHECK(shared.choose(Collective::scatter, bytes, 4).algorithm == Algorithm::oneshot);
    CHECK(shared.choose(Collective::gather, 4 * bytes, 4).algorithm == Algorithm::oneshot);
  }
  CHECK(shared.choose(Collective::reduce, 2048 + 8, 4).algorithm != Algorithm::oneshot);
  CHECK(shared.choose(Collective::all_reduce, 8, 4).algorithm == Algorithm::oneshot);
  for (size_t perRank : {size_t(2048 + 8), size_t(8) << 10, size_t(16) << 10}) {
    CHECK(shared.choose(Collective::gather, 4 * perRank, 4).algorithm == Algorithm::tree);
    CHECK(shared.choose(Collective::scatter, 4 * perRank, 4).algorithm == Algorithm::tree);
  }
  CHECK(shared.choose(Collective::gather, 4 * (32 << 10), 4).algorithm == Algorithm::oneshot);
  CHECK(shared.choose(Collective::scatter, 4 * (32 << 10), 4).algorithm == Algorithm::tree);
  // There all-reduces from 64 KiB take the slots' ring or tree, below it the doubling or the
  // window, at any n > 2, pinned in blocks or not.
  for (const LinkCost& link :
       {Tuner::sharedMemory(false), Tuner::pinnedInBlocks(Tuner::sharedMemory(false))}) {
    Tuner t(link, "", kChunk, kSlot);
    t.setOneShot(64 << 10);
    for (int n : {3, 4, 6, 8}) {
      CAPTURE(n);
      for (size_t bytes : {size_t(64) << 10, size_t(128) << 10, size_t(16) << 20}) {
        const Algorithm a = t.choose(Collective::all_reduce, bytes, n).algorithm;
        CHECK((a == Algorithm::ring || a == Algorithm::tree));
      }
      const Algorithm small = t.choose(Collective::all_reduce, 16 << 10, n).algorithm;
      CHECK((small == Algorithm::doubling || small == Algorithm::oneshot));
    }
  }
  Tuner sharedForced(Tuner::sharedMemory(false), "oneshot", kChunk, kSlot);
  sharedForced.setOneShot(64 << 10);
  CHECK(sharedForced.choose(Collective::reduce, 64, 4).algorithm == Algorithm::oneshot);
  // Two ranks with cores: the all-reduce takes the window while the post fits (4 KiB: 0.8-1.1
  // us against the slot algorithms' 1.0-1.6), the ring's half steps beyond; so does the reduce,
  // whose root posts no payload (tuner_placement_test.cc).
  for (size_t bytes : {size_t(4) << 10, size_t(16) << 10, size_t(64) << 10}) {
    CAPTURE(bytes);
    CHECK(t.choose(Collective::all_reduce, bytes, 2).algorithm == Algorithm::oneshot);
    CHECK(t.choose(Collective::reduce, bytes, 2).algorithm == Algorithm::oneshot);
  }
  CHECK(t.choose(Collective::reduce, 128 << 10, 2).algorithm != Algorithm::oneshot);
  CHECK(t.choose(Collective::all_reduce, 128 << 10, 2).algorithm == Algorithm::ring);
  // The all-gather's posts are one block each: the window while they fit (n = 2, 4-64 KiB:
  // 0.25-1.78 us against the ring's 0.43-1.98).
  for (size_t bytes : {size_t(4) << 10, size_t(32) << 10, size_t(64) << 10}) {
    CAPTURE(bytes);
    CHECK(t.choose(Collective::all_gather, bytes, 2).algorithm == Algorithm::oneshot);
  }
  // Forced where it applies; elsewhere the tuner chooses.
  Tuner forced(Tuner::sharedMemory(true), "oneshot", kChunk, kSlot);
  forced.setOneShot(64 << 10);
  CHECK(forced.choose(Collective::all_reduce, 32 << 10, 2).algorithm == Algorithm::oneshot);
  CHECK(forced.choose(Collective::all_reduce, 1 << 20, 2).algorithm != Algorithm::oneshot);
}
