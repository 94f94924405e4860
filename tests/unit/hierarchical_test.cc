// The hierarchical all-reduce and all-gather against the fake Prims: K hosts × L ranks,
// awkward counts, every op, exact results, and what the links between hosts carry.
#include <doctest/doctest.h>

#include "algorithms/prims.h"
#include "tests/harness/fake_prims.h"
#include "tests/harness/ref_op.h"

using gyre::RedOp;
using gyre::test::FakeNetwork;
using gyre::test::FakePrims;
using gyre::test::runFake;
namespace algo = gyre::algo;

namespace {

double value(int rank, size_t i) {
  return double((rank * 5 + i * 7) % 13 + 1);
}

}  // namespace

TEST_CASE("hierarchical all_reduce: K hosts × L ranks, every op and awkward count") {
  const RedOp ops[] = {RedOp::sum, RedOp::prod, RedOp::min, RedOp::max, RedOp::avg};
  for (int hosts = 1; hosts <= 4; ++hosts) {
    for (int local = 1; local <= 4; ++local) {
      const int n = hosts * local;
      for (size_t count :
           {size_t(0), size_t(1), size_t(local - 1), size_t(n + 1), size_t(97), size_t(1009)}) {
        for (RedOp op : ops) {
          CAPTURE(hosts);
          CAPTURE(local);
          CAPTURE(count);
          CAPTURE(int(op));
          FakeNetwork net(n, count > 100 ? 16 : 3, /*nSlots=*/4);
          std::vector<std::vector<double>> in(n), out(n, std::vector<double>(count, -12345.0));
          for (int r = 0; r < n; ++r)
            for (size_t i = 0; i < count; ++i) in[r].push_back(value(r, i));
          std::vector<size_t> offHost(n, 0);
          const algo::HostBlocks t{hosts, local};
          runFake(net, op, in, out, [&](FakePrims& p, int r) {
            algo::hierarchicalAllReduce(p, r, t, count, net.chunkElems());
            for (const auto& [peer, elems] : p.sentTo)
              if (t.host(peer) != t.host(r)) offHost[r] += elems;
          });
          for (size_t i = 0; i < count; ++i) {
            double want = value(0, i);
            for (int r = 1; r < n; ++r) want = gyre::test::refOp(op, want, value(r, i));
            if (op == RedOp::avg) want /= n;
            for (int r = 0; r < n; ++r) REQUIRE(out[r][i] == doctest::Approx(want));
          }
          // The rails' rings between hosts move 2(K-1) times the buffer in all: 2(K-1)/K of
          // it leaves each host, against 2(n-1)/n from each host of a flat ring.
          size_t crossing = 0;
          for (int r = 0; r < n; ++r) crossing += offHost[r];
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
        {
          CAPTURE(hosts);
          CAPTURE(local);
          CAPTURE(count);
          FakeNetwork net(n, count > 100 ? 16 : 3, /*nSlots=*/4);
          std::vector<std::vector<double>> in(n), out(n, std::vector<double>(n * count, -12345.0));
          for (int r = 0; r < n; ++r) {
            for (size_t i = 0; i < count; ++i) in[r].push_back(value(r, i));
          }
          std::vector<size_t> offHost(n, 0);
          const algo::HostBlocks t{hosts, local};
          runFake(net, RedOp::sum, in, out, [&](FakePrims& p, int r) {
            algo::hierarchicalAllGather(p, r, t, count, count, net.chunkElems());
            for (const auto& [peer, elems] : p.sentTo)
              if (t.host(peer) != t.host(r)) offHost[r] += elems;
          });
          for (int r = 0; r < n; ++r)
            for (int from = 0; from < n; ++from)
              for (size_t i = 0; i < count; ++i)
                REQUIRE(out[r][from * count + i] == value(from, i));
          // Each rank sends its block to the K - 1 other hosts once, on its own rail: (K-1)/K
          // of the gathered buffer leaves each host, against (n-1)/n over a flat ring's link.
          for (int r = 0; r < n; ++r) CHECK(offHost[r] == size_t(hosts - 1) * count);
        }
      }
    }
  }
}

TEST_CASE("hierarchical reduce_scatter: K hosts × L ranks, every op and awkward count") {
  const RedOp ops[] = {RedOp::sum, RedOp::prod, RedOp::min, RedOp::max, RedOp::avg};
  for (int hosts = 1; hosts <= 4; ++hosts) {
    for (int local = 1; local <= 4; ++local) {
      const int n = hosts * local;
      for (size_t count : {size_t(0), size_t(1), size_t(5), size_t(97), size_t(1009)}) {
        for (RedOp op : ops) {
          CAPTURE(hosts);
          CAPTURE(local);
          CAPTURE(count);
          CAPTURE(int(op));
          FakeNetwork net(n, count > 100 ? 16 : 3, /*nSlots=*/4);
          std::vector<std::vector<double>> in(n), out(n, std::vector<double>(count, -12345.0));
          for (int r = 0; r < n; ++r)
            for (size_t i = 0; i < n * count; ++i) in[r].push_back(value(r, i));
          std::vector<size_t> offHost(n, 0);
          const algo::HostBlocks t{hosts, local};
          runFake(net, op, in, out, [&](FakePrims& p, int r) {
            algo::hierarchicalReduceScatter(p, r, t, count, count, net.chunkElems());
            for (const auto& [peer, elems] : p.sentTo)
              if (t.host(peer) != t.host(r)) offHost[r] += elems;
          });
          for (int r = 0; r < n; ++r) {
            for (size_t i = 0; i < count; ++i) {
              const size_t at = r * count + i;
              double want = value(0, at);
              for (int q = 1; q < n; ++q) want = gyre::test::refOp(op, want, value(q, at));
              if (op == RedOp::avg) want /= n;
              REQUIRE(out[r][i] == doctest::Approx(want));
            }
          }
          // Each rank hands K - 1 partial blocks to the next host on its rail.
          for (int r = 0; r < n; ++r) CHECK(offHost[r] == size_t(hosts - 1) * count);
        }
      }
    }
  }
}
