// The hierarchical all-reduce, all-gather and reduce-scatter against the fake Prims: K hosts ×
// L ranks, awkward counts, every op, exact results, and what the links between hosts carry.
#include <doctest/doctest.h>

#include <functional>

#include "algorithms/prims.h"
#include "tests/harness/fake_prims.h"
#include "tests/harness/ref_op.h"

using gyre::RedOp;
using gyre::test::FakeNetwork;
using gyre::test::FakePrims;
using gyre::test::runFake;
namespace algo = gyre::algo;

namespace {

constexpr RedOp kOps[] = {RedOp::sum, RedOp::prod, RedOp::min, RedOp::max, RedOp::avg};

double value(int rank, size_t i) {
  return double((rank * 5 + i * 7) % 13 + 1);
}

// op over every rank's value(r, i), as the collective must compute it.
double reduced(RedOp op, int n, size_t i) {
  double want = value(0, i);
  for (int r = 1; r < n; ++r) want = gyre::test::refOp(op, want, value(r, i));
  return op == RedOp::avg ? want / n : want;
}

struct HierRun {
  std::vector<std::vector<double>> out;  // per rank
  std::vector<size_t> offHost;           // per rank: elements sent to other hosts
};

// Runs `algorithm` on `hosts` × `local` ranks of the fake network, rank r's input value(r, i)
// for i < inElems, its output poisoned, outElems long.
HierRun runHierarchical(
    int hosts, int local, RedOp op, size_t count, size_t inElems, size_t outElems,
    const std::function<void(FakePrims&, int, const algo::HostBlocks&, size_t chunk)>& algorithm) {
  const int n = hosts * local;
  FakeNetwork net(n, count > 100 ? 16 : 3, /*nSlots=*/4);
  std::vector<std::vector<double>> in(n);
  HierRun run{std::vector<std::vector<double>>(n, std::vector<double>(outElems, -12345.0)),
              std::vector<size_t>(n, 0)};
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < inElems; ++i) in[r].push_back(value(r, i));
  const algo::HostBlocks t{hosts, local};
  runFake(net, op, in, run.out, [&](FakePrims& p, int r) {
    algorithm(p, r, t, net.chunkElems());
    for (const auto& [peer, elems] : p.sentTo)
      if (t.host(peer) != t.host(r)) run.offHost[r] += elems;
  });
  return run;
}

}  // namespace

TEST_CASE("hierarchical all_reduce: K hosts × L ranks, every op and awkward count") {
  for (int hosts = 1; hosts <= 4; ++hosts) {
    for (int local = 1; local <= 4; ++local) {
      const int n = hosts * local;
      for (size_t count :
           {size_t(0), size_t(1), size_t(local - 1), size_t(n + 1), size_t(97), size_t(1009)}) {
        for (RedOp op : kOps) {
          CAPTURE(hosts);
          CAPTURE(local);
          CAPTURE(count);
          CAPTURE(int(op));
          const HierRun run =
              runHierarchical(hosts, local, op, count, count, count,
                              [&](FakePrims& p, int r, const algo::HostBlocks& t, size_t chunk) {
                                algo::hierarchicalAllReduce(p, r, t, count, chunk);
                              });
          for (size_t i = 0; i < count; ++i) {
            const double want = reduced(op, n, i);
            for (int r = 0; r < n; ++r) REQUIRE(run.out[r][i] == doctest::Approx(want));
          }
          // The rails' rings between hosts move 2(K-1) times the buffer in all: 2(K-1)/K of
          // it leaves each host, against 2(n-1)/n from each host of a flat ring.
          size_t crossing = 0;
          for (int r = 0; r < n; ++r) crossing += run.offHost[r];
          CHECK(crossing == 2 * size_t(hosts - 1) * count);
        }
      }
    }
  }
}

TEST_CASE("hierarchical all_gather: K hosts × L ranks, awkward counts, poisoned outputs") {
  for (int hosts = 1; hosts <= 4; ++hosts) {
    for (int local = 1; local <= 4; ++local) {
      const int n = hosts * local;
      for (size_t count : {size_t(0), size_t(1), size_t(5), size_t(97), size_t(1009)}) {
        CAPTURE(hosts);
        CAPTURE(local);
        CAPTURE(count);
        const HierRun run =
            runHierarchical(hosts, local, RedOp::sum, count, count, n * count,
                            [&](FakePrims& p, int r, const algo::HostBlocks& t, size_t chunk) {
                              algo::hierarchicalAllGather(p, r, t, count, count, chunk);
                            });
        for (int r = 0; r < n; ++r)
          for (int from = 0; from < n; ++from)
            for (size_t i = 0; i < count; ++i)
              REQUIRE(run.out[r][from * count + i] == value(from, i));
        // Each rank sends its block to the K - 1 other hosts once, on its own rail: (K-1)/K
        // of the gathered buffer leaves each host, against (n-1)/n over a flat ring's link.
        for (int r = 0; r < n; ++r) CHECK(run.offHost[r] == size_t(hosts - 1) * count);
      }
    }
  }
}

TEST_CASE("hierarchical reduce_scatter: K hosts × L ranks, every op and awkward count") {
  for (int hosts = 1; hosts <= 4; ++hosts) {
    for (int local = 1; local <= 4; ++local) {
      const int n = hosts * local;
      for (size_t count : {size_t(0), size_t(1), size_t(5), size_t(97), size_t(1009)}) {
        for (RedOp op : kOps) {
          CAPTURE(hosts);
          CAPTURE(local);
          CAPTURE(count);
          CAPTURE(int(op));
          const HierRun run =
              runHierarchical(hosts, local, op, count, n * count, count,
                              [&](FakePrims& p, int r, const algo::HostBlocks& t, size_t chunk) {
                                algo::hierarchicalReduceScatter(p, r, t, count, count, chunk);
                              });
          for (int r = 0; r < n; ++r)
            for (size_t i = 0; i < count; ++i)
              REQUIRE(run.out[r][i] == doctest::Approx(reduced(op, n, r * count + i)));
          // Each rank hands K - 1 partial blocks to the next host on its rail.
          for (int r = 0; r < n; ++r) CHECK(run.offHost[r] == size_t(hosts - 1) * count);
        }
      }
    }
  }
}
