// The tuner's choices where ranks share cores (more ranks than cores, or pinned in blocks),
// over shared memory and tcp.
#include <doctest/doctest.h>

#include <array>
#include <map>

#include "link/mailbox.h"
#include "runtime/core/tuner.h"
#include "tests/unit/tuner_geometry.h"

using namespace gyre;
using namespace gyre::test;

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
  // against 3317 us, over tcp the 16 MiB reduce 6350 against 10953 (docs/tuning_shared_cores.md).
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
