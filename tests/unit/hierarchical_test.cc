// The hierarchical all-reduce against the fake Prims: K hosts × L ranks, awkward counts,
// every op, exact results, and the links between hosts carrying 2(K-1) times the buffer.
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
