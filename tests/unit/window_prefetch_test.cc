// The host window with ranks that take their next posts for writing at the end of each call
// (OneShot::prefetchFarApart, as far apart): over a window in this process with ranks as
// threads, three laps of the posts, every payload kind (inlined, a post's small piece, a data
// block) and sizes that change from call to call, some ranks prefetching and some not: every
// output exact.
#include <doctest/doctest.h>

#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "algorithms/oneshot.h"
#include "base/prefetch.h"
#include "base/status.h"
#include "tests/unit/test_window.h"

namespace gyre {
namespace {

int32_t inputAt(int rank, int call, size_t k) {
  return int32_t(rank * 1000003 + call * 31 + int(k) * 7);
}

TEST_CASE("the window: ranks that prefetch their next posts for writing, lap after lap") {
  const int n = 3, calls = 3 * kMailPosts;
  // A window of 4 KiB a post: up to 24 bytes inlined, up to 128 in a post's small piece,
  // more in a data block.
  TestWindow window(n, 4096);
  const size_t counts[] = {2, 6, 7, 32, 33, 700};
  const Collective colls[] = {Collective::reduce, Collective::all_gather, Collective::gather,
                              Collective::all_reduce};
  std::vector<std::string> errors(n);
  std::vector<int> wrong(n, 0);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      OneShot rank = window.rank(r);
      rank.prefetchFarApart(r != 2);
      if (rank.prefetchesFarApart() != (r != 2 && canPrefetchForWrite())) ++wrong[size_t(r)];
      try {
        for (int i = 0; i < calls; ++i) {
          const size_t count = counts[size_t(i) % std::size(counts)];
          const Collective coll = colls[size_t(i / 2) % std::size(colls)];
          OpContext ctx = window.call(r, uint64_t(i + 1), std::chrono::seconds(30));
          ctx.desc.count = count;
          ctx.desc.coll = coll;
          ctx.desc.dtype = DataType::i32;
          ctx.desc.root = i % n;
          std::vector<int32_t> in(count), out(count * size_t(n));
          for (size_t k = 0; k < count; ++k) in[k] = inputAt(r, i, k);
          std::memset(out.data(), 0xAB, out.size() * sizeof(int32_t));  // poison
          rank.run(ctx, in.data(), out.data());
          const bool gathers = coll == Collective::all_gather || coll == Collective::gather;
          if ((coll == Collective::reduce || coll == Collective::gather) && r != ctx.desc.root) {
            continue;  // no output
          }
          for (size_t k = 0; k < count * (gathers ? size_t(n) : 1); ++k) {
            int32_t want = 0;
            if (gathers) {
              want = inputAt(int(k / count), i, k % count);
            } else {
              for (int q = 0; q < n; ++q) want += inputAt(q, i, k);
            }
            if (out[k] != want) ++wrong[size_t(r)];
          }
        }
      } catch (const Failure& f) {
        errors[size_t(r)] = f.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) {
    CAPTURE(r);
    REQUIRE_MESSAGE(errors[size_t(r)].empty(), errors[size_t(r)]);
    CHECK(wrong[size_t(r)] == 0);
  }
}

}  // namespace
}  // namespace gyre
