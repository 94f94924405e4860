// Recursive doubling, Bruck and the halving algorithms against the fake Prims: exact results,
// no deadlock on bounded links, and the traffic each is meant to send.
#include <doctest/doctest.h>

#include <set>

#include "tests/unit/schedule_cases.h"

using namespace gyre::test::schedule;

TEST_CASE("recursive doubling all_reduce: every n, count and op") {
  checkAllReduce(
      [](FakePrims& p, int r, int n, size_t count, size_t) {
        // Pieces of one slot (3 elements), one in flight beyond the awaited one: two of the
        // four slots of a link.
        algo::doublingAllReduce(p, r, n, count, 3, 1);
      },
      false);
}

TEST_CASE("all_gather: ring and Bruck, every n and count") {
  for (bool bruck : {false, true}) {
    for (int n = 1; n <= 9; ++n) {
      for (size_t count : awkwardCounts(n)) {
        CAPTURE(bruck);
        CAPTURE(n);
        CAPTURE(count);
        FakeNetwork net(n, slotFor(count) - 1, 4);
        Inputs in = inputs(n, count), out(n, std::vector<double>(count * n, kPoison));
        auto sent = runFake(net, RedOp::sum, in, out, [&](FakePrims& p, int r) {
          if (bruck) {
            algo::doublingAllGather(p, r, n, count, net.slotElems(), /*ahead=*/1);
          } else {
            algo::ringAllGather(p, r, n, count, net.chunkElems());
          }
        });
        size_t total = 0;
        for (int r = 0; r < n; ++r) {
          total += sent[r];
          for (int src = 0; src < n; ++src)
            for (size_t i = 0; i < count; ++i) REQUIRE(out[r][src * count + i] == value(src, i));
        }
        CHECK(total == size_t(n) * size_t(n - 1) * count);
      }
    }
  }
}

// A Bruck step moves up to n/2 blocks to one peer; streamed, it needs no more slots than the
// window, however many ranks: 2 slots per link, up to 40 ranks, blocks of one element.
TEST_CASE("all_gather: Bruck with many ranks and links of two slots") {
  for (int n : {9, 17, 23, 33, 40}) {
    for (size_t count : {size_t(1), size_t(3)}) {
      CAPTURE(n);
      CAPTURE(count);
      FakeNetwork net(n, /*slotElems=*/2, /*nSlots=*/2);
      Inputs in = inputs(n, count), out(n, std::vector<double>(count * n, kPoison));
      runFake(net, RedOp::sum, in, out, [&](FakePrims& p, int r) {
        algo::doublingAllGather(p, r, n, count, net.slotElems(), /*ahead=*/0);
      });
      for (int r = 0; r < n; ++r)
        for (int src = 0; src < n; ++src)
          for (size_t i = 0; i < count; ++i) REQUIRE(out[r][src * count + i] == value(src, i));
    }
  }
}

// A Bruck step sends its blocks as one or two runs (two where they wrap past the last rank),
// not a message per block: small all-gathers pay a latency per run, so this is their cost.
TEST_CASE("all_gather: Bruck sends a step's blocks as at most two messages") {
  for (int n : {5, 8, 13}) {
    CAPTURE(n);
    const size_t count = 3;
    FakeNetwork net(n, /*slotElems=*/count * size_t(n), /*nSlots=*/2);
    Inputs in = inputs(n, count), out(n, std::vector<double>(count * n, kPoison));
    std::vector<size_t> calls(n);
    runFake(net, RedOp::sum, in, out, [&](FakePrims& p, int r) {
      algo::doublingAllGather(p, r, n, count, net.slotElems(), /*ahead=*/1);
      calls[r] = p.calls;
    });
    int steps = 0;
    while ((1 << steps) < n) ++steps;
    for (int r = 0; r < n; ++r) {
      CAPTURE(r);
      for (int src = 0; src < n; ++src)
        for (size_t i = 0; i < count; ++i) REQUIRE(out[r][src * count + i] == value(src, i));
      // The local copy, then per step a send and a receive of one or two runs each.
      CHECK(calls[r] >= size_t(1 + 2 * steps));
      CHECK(calls[r] <= size_t(1 + 4 * steps));
    }
    // Rank 0's blocks never wrap: one message each way per step.
    CHECK(calls[0] == size_t(1 + 2 * steps));
  }
}

// The halving algorithms serve powers of two: every one to 16, with uneven blocks where n does
// not divide the count and empty ones where the count is below n.
constexpr std::initializer_list<int> kPowersOfTwo = {1, 2, 4, 8, 16};

TEST_CASE("halving-doubling all_reduce: every power-of-two n, count and op; 2(n-1)/n traffic") {
  forEachCase(kPowersOfTwo, [](int n, size_t count, RedOp op) {
    for (int ahead : {0, 1}) {
      FakeNetwork net(n, slotFor(count), ahead == 0 ? 2 : 4);
      Inputs in = inputs(n, count), out(n, std::vector<double>(count, kPoison));
      auto sent = runFake(net, op, in, out, [&](FakePrims& p, int r) {
        algo::halvingDoublingAllReduce(p, r, n, count, net.slotElems(), ahead);
      });
      size_t total = 0;
      for (int r = 0; r < n; ++r) {
        total += sent[r];
        for (size_t i = 0; i < count; ++i) REQUIRE(out[r][i] == reduceAll(op, n, i));
      }
      CHECK(total == 2 * size_t(n - 1) * count);
    }
  });
}

TEST_CASE("halving reduce_scatter: every power-of-two n, count and op; the ring's traffic") {
  forEachCase(kPowersOfTwo, [](int n, size_t count, RedOp op) {
    FakeNetwork net(n, slotFor(count), 2);
    Inputs in = inputs(n, count * n), out(n, std::vector<double>(count * n, kPoison));
    auto sent = runFake(net, op, in, out, [&](FakePrims& p, int r) {
      algo::halvingReduceScatter(p, r, n, count, net.slotElems(), /*ahead=*/0);
    });
    size_t total = 0;
    for (int r = 0; r < n; ++r) {
      total += sent[r];
      for (size_t i = 0; i < count; ++i) {
        REQUIRE(out[r][r * count + i] == reduceAll(op, n, r * count + i));
      }
    }
    CHECK(total == size_t(n) * size_t(n - 1) * count);
  });
}

// Bruck's all-to-all: every block where it belongs, for any n, blocks spanning several slots,
// links of two and four slots, nothing sent ahead or a whole link ahead of the receives (each
// receive overwrites a piece that was sent before it).
TEST_CASE("Bruck all_to_all: exact at any n, in pieces, on links of two slots") {
  for (int n : {1, 2, 3, 4, 5, 6, 7, 8, 9, 13, 16}) {
    for (size_t count : awkwardCounts(n)) {
      for (size_t nSlots : {2, 4}) {
        for (int ahead : {0, int(nSlots) - 1}) {
          CAPTURE(n);
          CAPTURE(count);
          CAPTURE(nSlots);
          CAPTURE(ahead);
          FakeNetwork net(n, std::max<size_t>(1, slotFor(count) / 2), nSlots);
          Inputs in = inputs(n, count * n), out(n, std::vector<double>(count * n, kPoison));
          runFake(net, RedOp::sum, in, out, [&](FakePrims& p, int r) {
            algo::bruckAllToAll(p, r, n, count, net.slotElems(), ahead);
          });
          for (int r = 0; r < n; ++r)
            for (int src = 0; src < n; ++src)
              for (size_t i = 0; i < count; ++i)
                REQUIRE(out[r][src * count + i] == value(src, r * count + i));
        }
      }
    }
  }
}

// It takes ceil(log2 n) steps, each to one rank and from another, about half the blocks each;
// a step's first pieces are held and released together before its first receive.
TEST_CASE("Bruck all_to_all: log2(n) peers, half the blocks a step, the first sends together") {
  struct StepPrims {
    std::vector<int> sendPeers;
    std::vector<size_t> sentElems;
    int to = -1, held = 0, heldBeforeRecv = 0;
    bool holding = false, receivedInStep = false;
    void setPeers(const int*, int, const int* t, int) {
      to = t[0];
      sendPeers.push_back(to);
      sentElems.push_back(0);
      receivedInStep = false;
    }
    void useOutputAsInput() {}
    void localCopy(size_t, size_t, size_t) {}
    void send(size_t, size_t n) {
      sentElems.back() += n;
      if (holding) ++held;
    }
    void recv(size_t, size_t) {
      CHECK_FALSE(holding);  // handed over before anything is overwritten
      if (!receivedInStep) heldBeforeRecv += held;
      receivedInStep = true;
      held = 0;
    }
    void holdSends(bool hold) { holding = hold; }
  };
  const size_t count = 5;
  for (int n : {2, 3, 5, 8, 16}) {
    CAPTURE(n);
    StepPrims p;
    const int rank = n - 1;
    algo::bruckAllToAll(p, rank, n, count, count, /*ahead=*/3);
    std::vector<int> expectPeers;
    std::vector<size_t> expectElems;
    for (int d = 1; d < n; d *= 2) {
      expectPeers.push_back((rank + d) % n);
      int blocks = 0;
      for (int j = 1; j < n; ++j) blocks += (j & d) != 0;
      expectElems.push_back(size_t(blocks) * count);
    }
    CHECK(p.sendPeers == expectPeers);
    CHECK(p.sentElems == expectElems);
    // Up to ahead + 1 = 4 pieces a step leave in one batch: at n = 8 every step's, at n = 16
    // four of each step's eight.
    int batched = 0;
    for (size_t e : expectElems) batched += int(std::min<size_t>(e / count, 4));
    CHECK(p.heldBeforeRecv == batched);
  }
}
