// What a rank's post in the host window holds of a call whose post is a whole input of n
// blocks (a scatter's root, an all-to-all, a reduce-scatter): where no other rank reads the
// poster's own block and the others lie together, the post leaves it out (algorithms/oneshot.h).
#pragma once

#include <cstddef>
#include <cstdint>

#include "gyre/types.h"

namespace gyre {

struct PostLayout {
  uint32_t bytes;  // what the post holds
  size_t skipped;  // blocks of the input left out before the post's first
};

// A scatter's root or an all-to-all's rank: where it is the first or the last rank, only the
// others' blocks (at n = 2 half the lines its readers take); elsewhere all of it.
inline PostLayout othersBlocks(uint32_t bytes, int poster, int n) {
  if (n == 1 || (poster != 0 && poster != n - 1)) return {bytes, 0};
  return {bytes - bytes / uint32_t(n), poster == 0 ? size_t(1) : 0};
}

// A reduce-scatter's rank leaves its own block out only where it reduces its part from its
// own input even in place (ranks 0 and 1, whose part the first reduce step reads before it
// writes it) and is the first or the last rank: rank 0, and rank 1 at n = 2.
inline PostLayout reduceScatterPost(uint32_t bytes, int poster, int n) {
  return poster <= 1 ? othersBlocks(bytes, poster, n) : PostLayout{bytes, 0};
}

// The layout of `poster`'s post in a call of `coll` whose whole input (or buffer) is `bytes`.
inline PostLayout postLayout(Collective coll, uint32_t bytes, int poster, int root, int n) {
  switch (coll) {
    case Collective::scatter:
      return poster == root ? othersBlocks(bytes, poster, n) : PostLayout{bytes, 0};
    case Collective::all_to_all:
      return othersBlocks(bytes, poster, n);
    case Collective::reduce_scatter:
      return reduceScatterPost(bytes, poster, n);
    default:
      return {bytes, 0};
  }
}

}  // namespace gyre
