// The tuner's choices from its model, and what GYRE_ALGO may force.
#include <doctest/doctest.h>

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
    // Bruck's all-to-all once it saves steps (at n = 2 and 3 it takes as many as the pairwise
    // exchange, with more bytes), the exchange once bytes matter (measured crossing over tcp,
    // n = 4 and 8: between 64 and 128 KiB).
    CHECK(t.choose(Collective::all_to_all, 8, n).algorithm ==
          (n >= 4 ? Algorithm::doubling : Algorithm::pairwise));
    CHECK(t.choose(Collective::all_to_all, 32 << 10, n).algorithm ==
          (n >= 4 ? Algorithm::doubling : Algorithm::pairwise));
    CHECK(t.choose(Collective::all_to_all, 256 << 10, n).algorithm == Algorithm::pairwise);
    CHECK(t.choose(Collective::all_to_all_v, 8, n).algorithm == Algorithm::pairwise);
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
  CHECK(rd.choose(Collective::all_to_all, 64 << 20, 8).algorithm == Algorithm::doubling);
  CHECK(rd.choose(Collective::all_to_all_v, 8, 8).algorithm == Algorithm::pairwise);
  // Where a link may run over rdma the all-to-all has no Bruck: rd leaves it to the model.
  Tuner rdmaRd(Tuner::tcpNetwork(1, 10), "rd", kChunk, kSlot);
  rdmaRd.setBruckAllToAll(false);
  const Choice a2a = rdmaRd.choose(Collective::all_to_all, 64, 8);
  CHECK((a2a.algorithm == Algorithm::pairwise && !a2a.forced));
  CHECK(rdmaRd.explain(a2a, Collective::all_to_all, 64, 8).find("does not implement all_to_all") !=
        std::string::npos);
  CHECK(rdmaRd.choose(Collective::all_gather, 64, 8).algorithm == Algorithm::doubling);
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
  // us against the slot algorithms' 1.0-1.6), the ring's half steps beyond; the reduce, whose
  // root posts no payload, below 8 KiB (tuner_placement_test.cc).
  for (size_t bytes : {size_t(4) << 10, size_t(16) << 10, size_t(64) << 10}) {
    CAPTURE(bytes);
    CHECK(t.choose(Collective::all_reduce, bytes, 2).algorithm == Algorithm::oneshot);
    CHECK((t.choose(Collective::reduce, bytes, 2).algorithm == Algorithm::oneshot) ==
          (bytes < (8 << 10)));
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
