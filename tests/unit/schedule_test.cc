// Every ring algorithm against the fake Prims for n = 1..9 and awkward counts: no deadlock
// with bounded links, exact results, and the bytes a bandwidth-optimal ring sends.
#include <doctest/doctest.h>

#include <algorithm>

#include "algorithms/ring.h"
#include "tests/harness/fake_prims.h"

using gyre::RedOp;
using gyre::test::FakeNetwork;
using gyre::test::FakePrims;
using gyre::test::runFake;

namespace {

std::vector<size_t> awkwardCounts(int n) {
  std::vector<size_t> c{0, 1, size_t(n - 1), size_t(n), size_t(n + 1), 97, 1009};
  std::sort(c.begin(), c.end());
  c.erase(std::unique(c.begin(), c.end()), c.end());
  return c;
}

double value(int rank, size_t i) {
  return double((rank * 7 + i * 3) % 11 + 1);
}

double reduceAll(RedOp op, int n, size_t i) {
  double acc = value(0, i);
  for (int r = 1; r < n; ++r) {
    const double v = value(r, i);
    if (op == RedOp::sum || op == RedOp::avg) acc += v;
    if (op == RedOp::prod) acc *= v;
    if (op == RedOp::min) acc = std::min(acc, v);
    if (op == RedOp::max) acc = std::max(acc, v);
  }
  return op == RedOp::avg ? acc / n : acc;
}

const double kPoison = -12345.0;

// Tiny slots force many slices and rounds; large counts get larger slots to stay quick.
size_t slotFor(size_t count) {
  return count > 100 ? 16 : 3;
}

}  // namespace

TEST_CASE("ring all_reduce: every n, count and op; bounded links; 2(n-1)/n traffic") {
  for (int n = 1; n <= 9; ++n) {
    for (size_t count : awkwardCounts(n)) {
      for (RedOp op : {RedOp::sum, RedOp::prod, RedOp::min, RedOp::max, RedOp::avg}) {
        CAPTURE(n);
        CAPTURE(count);
        CAPTURE(int(op));
        FakeNetwork net(n, slotFor(count), /*nSlots=*/4);
        std::vector<std::vector<double>> in(n), out(n, std::vector<double>(count, kPoison));
        for (int r = 0; r < n; ++r)
          for (size_t i = 0; i < count; ++i) in[r].push_back(value(r, i));
        auto sent = runFake(net, op, in, out, [&](FakePrims& p, int r) {
          gyre::algo::ringAllReduce(p, r, n, count, net.chunkElems());
        });
        size_t total = 0;
        for (int r = 0; r < n; ++r) {
          total += sent[r];
          for (size_t i = 0; i < count; ++i) REQUIRE(out[r][i] == reduceAll(op, n, i));
        }
        // Each element crosses n-1 links while reducing and n-1 while spreading.
        CHECK(total == 2 * size_t(n - 1) * count);
      }
    }
  }
}

TEST_CASE("ring all_gather: every n and count") {
  for (int n = 1; n <= 9; ++n) {
    for (size_t count : awkwardCounts(n)) {
      CAPTURE(n);
      CAPTURE(count);
      FakeNetwork net(n, slotFor(count) - 1, 4);
      std::vector<std::vector<double>> in(n), out(n, std::vector<double>(count * n, kPoison));
      for (int r = 0; r < n; ++r)
        for (size_t i = 0; i < count; ++i) in[r].push_back(value(r, i));
      auto sent = runFake(net, RedOp::sum, in, out, [&](FakePrims& p, int r) {
        gyre::algo::ringAllGather(p, r, n, count, net.chunkElems());
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

TEST_CASE("ring reduce_scatter: every n, count and op") {
  for (int n = 1; n <= 9; ++n) {
    for (size_t count : awkwardCounts(n)) {
      for (RedOp op : {RedOp::sum, RedOp::prod, RedOp::min, RedOp::max, RedOp::avg}) {
        CAPTURE(n);
        CAPTURE(count);
        CAPTURE(int(op));
        FakeNetwork net(n, slotFor(count), 2);
        std::vector<std::vector<double>> in(n), out(n, std::vector<double>(count, kPoison));
        for (int r = 0; r < n; ++r)
          for (size_t i = 0; i < count * n; ++i) in[r].push_back(value(r, i));
        auto sent = runFake(net, op, in, out, [&](FakePrims& p, int r) {
          gyre::algo::ringReduceScatter(p, r, n, count, net.chunkElems());
        });
        size_t total = 0;
        for (int r = 0; r < n; ++r) {
          total += sent[r];
          for (size_t i = 0; i < count; ++i) REQUIRE(out[r][i] == reduceAll(op, n, r * count + i));
        }
        CHECK(total == size_t(n) * size_t(n - 1) * count);
      }
    }
  }
}

TEST_CASE("ring broadcast: every n, count and root") {
  for (int n = 1; n <= 9; ++n) {
    for (size_t count : awkwardCounts(n)) {
      for (int root = 0; root < n; ++root) {
        CAPTURE(n);
        CAPTURE(count);
        CAPTURE(root);
        FakeNetwork net(n, slotFor(count), 4);
        std::vector<std::vector<double>> in(n), out(n, std::vector<double>(count, kPoison));
        for (size_t i = 0; i < count; ++i) in[root].push_back(value(root, i));
        auto sent = runFake(net, RedOp::sum, in, out, [&](FakePrims& p, int r) {
          gyre::algo::ringBroadcast(p, r, n, root, count, net.chunkElems());
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

TEST_CASE("the fake network reports a deadlock instead of hanging") {
  // Both ranks receive first: nobody can ever send.
  FakeNetwork net(2, 4, 2);
  std::vector<std::vector<double>> in(2, std::vector<double>(4, 1.0)),
      out(2, std::vector<double>(4));
  CHECK_THROWS_AS(runFake(net, RedOp::sum, in, out, [](FakePrims& p, int) { p.recv(0, 4); }),
                  gyre::test::Deadlock);
}
