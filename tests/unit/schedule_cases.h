// The cases and checks the schedule tests share: awkward counts, inputs whose reductions are
// exact in doubles, and the all-reduce check over every n from 1 to 9.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <initializer_list>
#include <vector>

#include "algorithms/prims.h"
#include "tests/harness/fake_prims.h"

namespace gyre::test::schedule {

using gyre::RedOp;
using gyre::test::FakeNetwork;
using gyre::test::FakePrims;
using gyre::test::runFake;
namespace algo = gyre::algo;

inline std::vector<size_t> awkwardCounts(int n) {
  std::vector<size_t> c{0, 1, size_t(n - 1), size_t(n), size_t(n + 1), 97, 1009};
  std::sort(c.begin(), c.end());
  c.erase(std::unique(c.begin(), c.end()), c.end());
  return c;
}

inline const RedOp kOps[] = {RedOp::sum, RedOp::prod, RedOp::min, RedOp::max, RedOp::avg};

inline double value(int rank, size_t i) {
  return double((rank * 7 + i * 3) % 11 + 1);
}

inline double reduceAll(RedOp op, int n, size_t i) {
  double acc = value(0, i);
  for (int r = 1; r < n; ++r) acc = gyre::test::refOp(op, acc, value(r, i));
  return op == RedOp::avg ? acc / n : acc;
}

inline const double kPoison = -12345.0;

// Tiny slots force many slices and rounds; large counts get larger slots to stay quick.
inline size_t slotFor(size_t count) {
  return count > 100 ? 16 : 3;
}

using Inputs = std::vector<std::vector<double>>;

inline Inputs inputs(int n, size_t count) {
  Inputs in(n);
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < count; ++i) in[r].push_back(value(r, i));
  return in;
}

// check(n, count, op) for every n of `ranks`, every awkward count and every op, each captured.
template <class Check>
void forEachCase(std::initializer_list<int> ranks, Check check) {
  for (int n : ranks) {
    for (size_t count : awkwardCounts(n)) {
      for (RedOp op : kOps) {
        CAPTURE(n);
        CAPTURE(count);
        CAPTURE(int(op));
        check(n, count, op);
      }
    }
  }
}

inline constexpr std::initializer_list<int> kOneToNine = {1, 2, 3, 4, 5, 6, 7, 8, 9};

using AllReduceAlgo = void (*)(FakePrims&, int, int, size_t, size_t);

inline void checkAllReduce(AllReduceAlgo run, bool ringTraffic) {
  forEachCase(kOneToNine, [&](int n, size_t count, RedOp op) {
    FakeNetwork net(n, slotFor(count), /*nSlots=*/4);
    Inputs in = inputs(n, count), out(n, std::vector<double>(count, kPoison));
    auto sent = runFake(net, op, in, out,
                        [&](FakePrims& p, int r) { run(p, r, n, count, net.chunkElems()); });
    size_t total = 0;
    for (int r = 0; r < n; ++r) {
      total += sent[r];
      for (size_t i = 0; i < count; ++i) REQUIRE(out[r][i] == reduceAll(op, n, i));
    }
    // Each element crosses n-1 links while reducing and n-1 while spreading.
    if (ringTraffic) CHECK(total == 2 * size_t(n - 1) * count);
  });
}

}  // namespace gyre::test::schedule
