// What a post in the host window holds of a whole input: the poster's own block left out only
// where no one reads it and the others' blocks lie together.
#include <doctest/doctest.h>

#include <initializer_list>

#include "algorithms/oneshot_layout.h"

namespace gyre {
namespace {

TEST_CASE("post layout: the first and the last rank leave their own block out") {
  constexpr uint32_t kWhole = 4 * 96;  // four blocks of 96 bytes
  // n = 4: rank 0 posts blocks 1-3, rank 3 blocks 0-2, the middle ranks everything.
  CHECK(othersBlocks(kWhole, 0, 4).bytes == 3 * 96);
  CHECK(othersBlocks(kWhole, 0, 4).skipped == 1);
  CHECK(othersBlocks(kWhole, 3, 4).bytes == 3 * 96);
  CHECK(othersBlocks(kWhole, 3, 4).skipped == 0);
  for (int middle : {1, 2}) {
    CHECK(othersBlocks(kWhole, middle, 4).bytes == kWhole);
    CHECK(othersBlocks(kWhole, middle, 4).skipped == 0);
  }
  // n = 2: both halve; n = 1: nothing to leave out.
  CHECK(othersBlocks(200, 0, 2).bytes == 100);
  CHECK(othersBlocks(200, 1, 2).bytes == 100);
  CHECK(othersBlocks(200, 0, 1).bytes == 200);
}

TEST_CASE("post layout: per collective, a reduce-scatter's later last rank keeps its block") {
  // A reduce-scatter's rank 0 always, rank 1 only where it is the last (n = 2).
  CHECK(postLayout(Collective::reduce_scatter, 300, 0, -1, 3).bytes == 200);
  CHECK(postLayout(Collective::reduce_scatter, 300, 2, -1, 3).bytes == 300);
  CHECK(postLayout(Collective::reduce_scatter, 200, 1, -1, 2).bytes == 100);
  // A scatter's root only; its receivers' posts are the whole size the call counts.
  CHECK(postLayout(Collective::scatter, 300, 2, 2, 3).bytes == 200);
  CHECK(postLayout(Collective::scatter, 300, 0, 2, 3).bytes == 300);
  CHECK(postLayout(Collective::scatter, 300, 1, 1, 3).bytes == 300);  // a middle root
  CHECK(postLayout(Collective::all_to_all, 300, 2, -1, 3).bytes == 200);
  for (Collective c : {Collective::all_reduce, Collective::reduce, Collective::broadcast,
                       Collective::all_gather, Collective::gather}) {
    CHECK(postLayout(c, 300, 0, 0, 3).bytes == 300);
    CHECK(postLayout(c, 300, 0, 0, 3).skipped == 0);
  }
}

}  // namespace
}  // namespace gyre
