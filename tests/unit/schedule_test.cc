// Every algorithm against the fake Prims for n = 1..9 and awkward counts: no deadlock with
// bounded links, exact results, untouched outputs where a collective must not write, and the
// traffic the algorithm is meant to send.
#include <doctest/doctest.h>

#include <algorithm>
#include <set>
#include <string>

#include "algorithms/prims.h"
#include "tests/harness/fake_prims.h"
#include "tests/unit/schedule_cases.h"

using namespace gyre::test::schedule;

TEST_CASE("ring all_reduce: every n, count and op; bounded links; 2(n-1)/n traffic") {
  checkAllReduce(algo::ringAllReduce<FakePrims>, true);
}

TEST_CASE("double binary tree all_reduce: every n, count and op") {
  // Both trees together move every element up and down n-1 edges, as the ring does.
  checkAllReduce(algo::doubleTreeAllReduce<FakePrims>, true);
}

TEST_CASE("double binary tree: two spanning trees; every rank is a leaf in one of them") {
  for (int n = 1; n <= 70; ++n) {
    CAPTURE(n);
    int interiorInBoth = 0;
    for (int which = 0; which < 2; ++which) {
      std::vector<int> parentOf(n, -2);
      int roots = 0;
      for (int r = 0; r < n; ++r) {
        const auto t = algo::doubleTreeNode(r, n, which);
        REQUIRE(t.nChildren <= 2);
        if (t.parent < 0) ++roots;
        for (int i = 0; i < t.nChildren; ++i) {
          const int c = t.children[i];
          REQUIRE(c >= 0);
          REQUIRE(c < n);
          REQUIRE(parentOf[c] == -2);  // one parent each
          parentOf[c] = r;
          REQUIRE(algo::doubleTreeNode(c, n, which).parent == r);
        }
      }
      CHECK(roots == 1);
      for (int r = 0; r < n; ++r) {
        // Every rank reaches the root in at most log2(n) + 2 steps: no cycles, shallow.
        int steps = 0;
        for (int v = r; algo::doubleTreeNode(v, n, which).parent >= 0; ++steps) {
          v = algo::doubleTreeNode(v, n, which).parent;
          REQUIRE(steps <= 20);
        }
      }
    }
    for (int r = 0; r < n; ++r) {
      if (algo::doubleTreeNode(r, n, 0).nChildren > 0 &&
          algo::doubleTreeNode(r, n, 1).nChildren > 0)
        ++interiorInBoth;
    }
    // Odd n leaves one rank interior in both trees (NCCL's construction does the same).
    CHECK(interiorInBoth <= (n % 2 ? 1 : 0));
  }
}

TEST_CASE("relayed tree: the root sends once, to the rank n/2 on; spanning, log2(n-1)+1 deep") {
  for (int n = 3; n <= 40; ++n) {
    for (int root = 0; root < n; ++root) {
      CAPTURE(n);
      CAPTURE(root);
      const auto top = algo::relayedBinomialNode(root, n, root);
      REQUIRE(top.parent < 0);
      REQUIRE(top.nChildren == 1);
      CHECK(top.children[0] == (root + n / 2) % n);
      std::vector<int> parentOf(n, -2);
      for (int r = 0; r < n; ++r) {
        const auto t = algo::relayedBinomialNode(r, n, root);
        REQUIRE((t.parent < 0) == (r == root));
        for (int i = 0; i < t.nChildren; ++i) {
          REQUIRE(t.children[i] != root);
          REQUIRE(parentOf[t.children[i]] == -2);
          parentOf[t.children[i]] = r;
          REQUIRE(algo::relayedBinomialNode(t.children[i], n, root).parent == r);
        }
      }
      int depth = 1;
      while ((1 << (depth - 1)) < n - 1) ++depth;
      for (int r = 0; r < n; ++r) {
        if (r != root) CHECK(parentOf[r] >= 0);
        int steps = 0;
        for (int v = r; v != root && steps <= n; v = algo::relayedBinomialNode(v, n, root).parent) {
          ++steps;
        }
        CHECK(steps <= depth);
      }
    }
  }
}

TEST_CASE("binomial tree: spanning, rooted anywhere, log2(n) deep") {
  for (int n = 1; n <= 40; ++n) {
    for (int root = 0; root < n; ++root) {
      CAPTURE(n);
      CAPTURE(root);
      std::vector<int> parentOf(n, -2);
      for (int r = 0; r < n; ++r) {
        const auto t = algo::binomialNode(r, n, root);
        REQUIRE((t.parent < 0) == (r == root));
        for (int i = 0; i < t.nChildren; ++i) {
          REQUIRE(parentOf[t.children[i]] == -2);
          parentOf[t.children[i]] = r;
          REQUIRE(algo::binomialNode(t.children[i], n, root).parent == r);
        }
      }
      int depth = 0;
      while ((1 << depth) < n) ++depth;
      for (int r = 0; r < n; ++r) {
        int steps = 0;
        for (int v = r; v != root; v = algo::binomialNode(v, n, root).parent) ++steps;
        CHECK(steps <= depth);
      }
    }
  }
}

TEST_CASE("ring all_gather_v: blocks of different sizes, some empty") {
  for (int n = 1; n <= 7; ++n) {
    CAPTURE(n);
    std::vector<size_t> counts(n), offsets(n);
    size_t total = 0;
    for (int r = 0; r < n; ++r) {
      counts[r] = size_t((r * 37) % 23) * (r % 3 != 1);
      offsets[r] = total + 1;  // a gap between blocks must stay untouched
      total = offsets[r] + counts[r];
    }
    FakeNetwork net(n, 3, 2);
    Inputs in(n), out(n, std::vector<double>(total + 1, kPoison));
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < counts[r]; ++i) in[r].push_back(value(r, i));
    runFake(net, RedOp::sum, in, out, [&](FakePrims& p, int r) {
      algo::ringAllGatherBlocks(p, r, n, algo::VarBlocks{counts.data(), offsets.data()},
                                net.chunkElems());
    });
    for (int r = 0; r < n; ++r) {
      std::vector<double> want(total + 1, kPoison);
      for (int src = 0; src < n; ++src)
        for (size_t i = 0; i < counts[src]; ++i) want[offsets[src] + i] = value(src, i);
      REQUIRE(out[r] == want);
    }
  }
}

TEST_CASE("ring reduce_scatter: every n, count and op") {
  forEachCase(kOneToNine, [](int n, size_t count, RedOp op) {
    FakeNetwork net(n, slotFor(count), 2);
    Inputs in = inputs(n, count * n), out(n, std::vector<double>(count, kPoison));
    auto sent = runFake(net, op, in, out, [&](FakePrims& p, int r) {
      algo::ringReduceScatter(p, r, n, count, net.chunkElems(), count);
    });
    size_t total = 0;
    for (int r = 0; r < n; ++r) {
      total += sent[r];
      for (size_t i = 0; i < count; ++i) REQUIRE(out[r][i] == reduceAll(op, n, r * count + i));
    }
    CHECK(total == size_t(n) * size_t(n - 1) * count);
  });
}

TEST_CASE("broadcast: ring either way, binomial tree and relayed tree, every n, count and root") {
  for (int shape : {0, 1, 2, 3}) {  // ring, binomial tree, relayed tree, reversed ring
    const bool tree = shape == 1 || shape == 2;
    for (int n = 1; n <= 9; ++n) {
      for (size_t count : awkwardCounts(n)) {
        for (int root = 0; root < n; ++root) {
          CAPTURE(shape);
          CAPTURE(n);
          CAPTURE(count);
          CAPTURE(root);
          FakeNetwork net(n, slotFor(count), 4);
          Inputs in(n), out(n, std::vector<double>(count, kPoison));
          for (size_t i = 0; i < count; ++i) in[root].push_back(value(root, i));
          auto sent = runFake(net, RedOp::sum, in, out, [&](FakePrims& p, int r) {
            if (tree) {
              algo::binomialBroadcast(p, r, n, root, count, /*relayed=*/shape == 2);
            } else {
              algo::ringBroadcast(p, r, n, root, count, net.chunkElems(), /*reversed=*/shape == 3);
            }
          });
          size_t total = 0;
          for (int r = 0; r < n; ++r) {
            total += sent[r];
            for (size_t i = 0; i < count; ++i) REQUIRE(out[r][i] == value(root, i));
          }
          CHECK(total == size_t(n - 1) * count);
        }
      }
    }
  }
}

TEST_CASE("reduce: ring chain and binomial tree; only root's output is written") {
  for (bool tree : {false, true}) {
    for (int n = 1; n <= 9; ++n) {
      for (size_t count : awkwardCounts(n)) {
        for (RedOp op : kOps) {
          for (int root = 0; root < n; root += 2) {
            CAPTURE(tree);
            CAPTURE(n);
            CAPTURE(count);
            CAPTURE(int(op));
            CAPTURE(root);
            FakeNetwork net(n, slotFor(count), 2);
            Inputs in = inputs(n, count), out(n, std::vector<double>(count, kPoison));
            auto sent = runFake(net, op, in, out, [&](FakePrims& p, int r) {
              if (tree) {
                algo::binomialReduce(p, r, n, root, count);
              } else {
                algo::ringReduce(p, r, n, root, count);
              }
            });
            size_t total = 0;
            for (int r = 0; r < n; ++r) {
              total += sent[r];
              for (size_t i = 0; i < count; ++i)
                REQUIRE(out[r][i] == (r == root ? reduceAll(op, n, i) : kPoison));
            }
            CHECK(total == size_t(n - 1) * count);
          }
        }
      }
    }
  }
}

// Scatters `count` elements to each of n ranks from `root` with `scatter` over links of two
// slots and checks every output element.
template <class Scatter>
void checkScatter(int n, int root, size_t count, Scatter scatter) {
  FakeNetwork net(n, slotFor(count), 2);
  Inputs in(n), out(n, std::vector<double>(count, kPoison));
  for (size_t i = 0; i < count * n; ++i) in[root].push_back(value(root, i));
  runFake(net, RedOp::sum, in, out, scatter);
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < count; ++i) REQUIRE(out[r][i] == value(root, r * count + i));
}

TEST_CASE("gather and scatter chains: every n, count and root") {
  for (int n = 1; n <= 9; ++n) {
    for (size_t count : awkwardCounts(n)) {
      for (int root = 0; root < n; ++root) {
        CAPTURE(n);
        CAPTURE(count);
        CAPTURE(root);
        {
          FakeNetwork net(n, slotFor(count), 2);
          Inputs in = inputs(n, count), out(n, std::vector<double>(count * n, kPoison));
          runFake(net, RedOp::sum, in, out,
                  [&](FakePrims& p, int r) { algo::ringGather(p, r, n, root, count); });
          for (int r = 0; r < n; ++r)
            for (size_t i = 0; i < count * n; ++i)
              REQUIRE(out[r][i] == (r == root ? value(int(i / count), i % count) : kPoison));
        }
        checkScatter(n, root, count,
                     [&](FakePrims& p, int r) { algo::ringScatter(p, r, n, root, count); });
      }
    }
  }
}

TEST_CASE("binomial scatter: every n, count and root") {
  for (int n = 1; n <= 17; ++n) {
    for (size_t count : awkwardCounts(n)) {
      for (int root = 0; root < n; ++root) {
        CAPTURE(n);
        CAPTURE(count);
        CAPTURE(root);
        checkScatter(n, root, count,
                     [&](FakePrims& p, int r) { algo::binomialScatter(p, r, n, root, count); });
      }
    }
  }
}

// The root of a binomial scatter sends to ceil(log2 n) ranks, one run of blocks each, and
// holds its sends until all are published; every other rank relays to its own subtree only.
TEST_CASE("binomial scatter: the root's peers and its sends held together") {
  struct PeerPrims {
    std::set<int> sendPeers;
    int current = -1, holds = 0, sendsHeld = 0, sends = 0;
    bool held = false;
    void setPeers(const int*, int, const int* to, int nTo) { current = nTo ? to[0] : -1; }
    void send(size_t, size_t) {
      sendPeers.insert(current);
      ++sends;
      if (held) ++sendsHeld;
    }
    void recv(size_t, size_t) {}
    void recvSend(size_t) { sendPeers.insert(current); }
    void localCopy(size_t, size_t, size_t) {}
    void holdSends(bool hold) {
      held = hold;
      holds += hold;
    }
  };
  for (int n : {2, 3, 5, 8, 13, 16}) {
    CAPTURE(n);
    PeerPrims root;
    algo::binomialScatter(root, 3 % n, n, 3 % n, 4);
    int lg = 0;
    while ((1 << lg) < n) ++lg;
    CHECK(int(root.sendPeers.size()) == lg);
    CHECK(root.sends == n - 1);
    CHECK(root.sendsHeld == n - 1);
    CHECK(root.holds == 1);
    CHECK_FALSE(root.held);
  }
}

TEST_CASE("pairwise all_to_all: equal and variable blocks") {
  for (int n = 1; n <= 9; ++n) {
    for (size_t count : awkwardCounts(n)) {
      CAPTURE(n);
      CAPTURE(count);
      FakeNetwork net(n, slotFor(count), 2);
      Inputs in = inputs(n, count * n), out(n, std::vector<double>(count * n, kPoison));
      runFake(net, RedOp::sum, in, out, [&](FakePrims& p, int r) {
        algo::pairwiseAllToAll(p, r, n, algo::EqualExchange{count}, net.chunkElems());
      });
      for (int r = 0; r < n; ++r)
        for (int src = 0; src < n; ++src)
          for (size_t i = 0; i < count; ++i)
            REQUIRE(out[r][src * count + i] == value(src, r * count + i));
    }
    // Variable: rank s sends (s + 2d) % 5 * 3 elements to rank d.
    auto amount = [](int s, int d) { return size_t((s + 2 * d) % 5) * 3; };
    std::vector<std::vector<size_t>> sc(n), so(n), rc(n), ro(n);
    Inputs in(n), out(n);
    for (int r = 0; r < n; ++r) {
      size_t s = 0, t = 0;
      for (int p = 0; p < n; ++p) {
        sc[r].push_back(amount(r, p));
        so[r].push_back(s);
        s += amount(r, p);
        rc[r].push_back(amount(p, r));
        ro[r].push_back(t);
        t += amount(p, r);
      }
      for (size_t i = 0; i < s; ++i) in[r].push_back(value(r, i));
      out[r].assign(t, kPoison);
    }
    FakeNetwork net(n, 2, 2);
    runFake(net, RedOp::sum, in, out, [&](FakePrims& p, int r) {
      algo::pairwiseAllToAll(
          p, r, n, algo::VarExchange{sc[r].data(), so[r].data(), rc[r].data(), ro[r].data()},
          net.chunkElems());
    });
    for (int r = 0; r < n; ++r)
      for (int src = 0; src < n; ++src)
        for (size_t i = 0; i < rc[r][src]; ++i)
          REQUIRE(out[r][ro[r][src] + i] == value(src, so[src][r] + i));
  }
}

// The exchange's order on one rank: each send a chunk ahead of the receive of the chunk
// before it, so at most two chunks (half a link each) wait in a link.
TEST_CASE("pairwise all_to_all: sends run one chunk ahead of receives") {
  struct OrderPrims {
    std::vector<std::string> ops;
    void setPeers(const int*, int, const int*, int) {}
    void localCopy(size_t in, size_t out, size_t k) {
      ops.push_back("copy " + std::to_string(in) + ">" + std::to_string(out) + "/" +
                    std::to_string(k));
    }
    void send(size_t off, size_t k) {
      ops.push_back("send " + std::to_string(off) + "/" + std::to_string(k));
    }
    void recv(size_t off, size_t k) {
      ops.push_back("recv " + std::to_string(off) + "/" + std::to_string(k));
    }
  };
  OrderPrims p;
  // Rank 0 of 2, blocks of 5 elements, chunks of 2: its block for rank 1 is 5..9.
  algo::pairwiseAllToAll(p, 0, 2, algo::EqualExchange{5}, 2);
  const std::vector<std::string> expected = {"copy 0>0/5", "send 5/2", "send 7/2", "recv 5/2",
                                             "send 9/1",   "recv 7/2", "recv 9/1"};
  CHECK(p.ops == expected);
  // Unequal blocks: only receives once the sends are done, and no empty send or receive.
  OrderPrims q;
  const size_t sc[] = {0, 1}, so[] = {0, 0}, rc[] = {0, 4}, ro[] = {0, 0};
  algo::pairwiseAllToAll(q, 0, 2, algo::VarExchange{sc, so, rc, ro}, 2);
  const std::vector<std::string> unequal = {"copy 0>0/0", "send 0/1", "recv 0/2", "recv 2/2"};
  CHECK(q.ops == unequal);
}

TEST_CASE("dissemination barrier: log2(n) rounds, no deadlock") {
  for (int n = 1; n <= 9; ++n) {
    FakeNetwork net(n, 1, 2);
    Inputs in(n), out(n);
    size_t steps = 0;
    for (int d = 1; d < n; d *= 2) ++steps;
    std::vector<size_t> calls(n);
    runFake(net, RedOp::sum, in, out, [&](FakePrims& p, int r) {
      algo::disseminationBarrier(p, r, n);
      calls[r] = p.calls;
    });
    for (int r = 0; r < n; ++r) CHECK(calls[r] == 2 * steps);
  }
}

// Links of two slots (the fewest GYRE_NSLOTS allows) with many ranks: an algorithm that sends
// several pieces to one peer before it receives would hang here once ranks outnumber slots.
// Chunks of one slot and no piece ahead, as the communicator runs with two slots.
TEST_CASE("many ranks on links of two slots: every algorithm, exact results") {
  for (int n : {16, 33}) {
    for (size_t count : {size_t(1), size_t(5), size_t(97)}) {
      CAPTURE(n);
      CAPTURE(count);
      const size_t slot = 3;
      auto expectAllReduce = [&](const char* name, auto algorithm) {
        CAPTURE(name);
        FakeNetwork net(n, slot, 2);
        Inputs in = inputs(n, count), out(n, std::vector<double>(count, kPoison));
        runFake(net, RedOp::max, in, out, [&](FakePrims& p, int r) { algorithm(p, r); });
        for (int r = 0; r < n; ++r)
          for (size_t i = 0; i < count; ++i) REQUIRE(out[r][i] == reduceAll(RedOp::max, n, i));
      };
      expectAllReduce("ring",
                      [&](FakePrims& p, int r) { algo::ringAllReduce(p, r, n, count, slot); });
      expectAllReduce("double tree", [&](FakePrims& p, int r) {
        algo::doubleTreeAllReduce(p, r, n, count, slot);
      });
      expectAllReduce("doubling", [&](FakePrims& p, int r) {
        algo::doublingAllReduce(p, r, n, count, slot, 0);
      });
      for (bool bruck : {false, true}) {
        CAPTURE(bruck);
        FakeNetwork net(n, slot, 2);
        Inputs in = inputs(n, count), out(n, std::vector<double>(count * n, kPoison));
        runFake(net, RedOp::sum, in, out, [&](FakePrims& p, int r) {
          if (bruck) {
            algo::doublingAllGather(p, r, n, count, slot, 0);
          } else {
            algo::ringAllGather(p, r, n, count, slot);
          }
        });
        for (int r = 0; r < n; ++r)
          for (int src = 0; src < n; ++src)
            for (size_t i = 0; i < count; ++i) REQUIRE(out[r][src * count + i] == value(src, i));
      }
      for (bool tree : {false, true}) {
        CAPTURE(tree);
        const int root = n / 3;
        FakeNetwork net(n, slot, 2);
        Inputs in = inputs(n, count), out(n, std::vector<double>(count, kPoison));
        runFake(net, RedOp::sum, in, out, [&](FakePrims& p, int r) {
          if (tree) {
            algo::binomialReduce(p, r, n, root, count);
          } else {
            algo::ringReduce(p, r, n, root, count);
          }
        });
        for (size_t i = 0; i < count; ++i) REQUIRE(out[root][i] == reduceAll(RedOp::sum, n, i));
        FakeNetwork net2(n, slot, 2);
        Inputs one(n), got(n, std::vector<double>(count, kPoison));
        for (size_t i = 0; i < count; ++i) one[root].push_back(value(root, i));
        runFake(net2, RedOp::sum, one, got, [&](FakePrims& p, int r) {
          if (tree) {
            algo::binomialBroadcast(p, r, n, root, count);
          } else {
            algo::ringBroadcast(p, r, n, root, count, slot);
          }
        });
        for (int r = 0; r < n; ++r)
          for (size_t i = 0; i < count; ++i) REQUIRE(got[r][i] == value(root, i));
      }
      {
        FakeNetwork net(n, slot, 2);
        Inputs in = inputs(n, count * n), out(n, std::vector<double>(count * n, kPoison));
        runFake(net, RedOp::sum, in, out, [&](FakePrims& p, int r) {
          algo::pairwiseAllToAll(p, r, n, algo::EqualExchange{count}, slot);
        });
        for (int r = 0; r < n; ++r)
          for (int src = 0; src < n; ++src)
            for (size_t i = 0; i < count; ++i)
              REQUIRE(out[r][src * count + i] == value(src, r * count + i));
      }
    }
  }
}

TEST_CASE("the fake network reports a deadlock instead of hanging") {
  // Both ranks receive first: nobody can ever send.
  FakeNetwork net(2, 4, 2);
  std::vector<std::vector<double>> in(2, std::vector<double>(4, 1.0)),
      out(2, std::vector<double>(4));
  CHECK_THROWS_AS(runFake(net, RedOp::sum, in, out,
                          [](FakePrims& p, int r) {
                            const int peer = 1 - r;
                            p.setPeers(&peer, 1, &peer, 1);
                            p.recv(0, 4);
                          }),
                  gyre::test::Deadlock);
}
