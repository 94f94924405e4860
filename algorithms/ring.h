// Ring algorithms over the primitives vocabulary (see algorithms/prims.h). Each rank receives
// from rank-1 and sends to rank+1. Work proceeds in rounds whose per-step chunk is at most
// `chunkElems`, less than a link's capacity, so every rank can finish its first send of a
// round before its successor starts receiving: no circular wait, whatever the count.
// Chains (reduce, gather, scatter) use the same links but never close the ring, so they
// need no rounds.
#pragma once

#include "algorithms/common.h"

namespace gyre::algo {

template <class Prims>
GYRE_HD void ringPeers(Prims& p, int rank, int n) {
  const int prev = mod(rank - 1, n), next = mod(rank + 1, n);
  p.setPeers(&prev, 1, &next, 1);
}

// The ring all-reduce of elements [lo, lo + count) among n > 1 ranks in a ring, this one at
// `position`, receiving from `prev` and sending to `next` (global ranks): the flat ring, and
// the rings between hosts of the hierarchical all-reduce.
template <class Prims>
GYRE_HD void ringAllReduceSpan(Prims& p, int position, int n, int prev, int next, size_t lo,
                               size_t count, size_t chunkElems) {
  p.setPeers(&prev, 1, &next, 1);
  const size_t loop = size_t(n) * chunkElems;
  for (size_t base = 0; base < count; base += loop) {
    const size_t part = min_(loop, count - base);
    const size_t chunk = divUp(part, size_t(n));
    auto start = [&](int c) { return min_(size_t(c) * chunk, part); };
    auto off = [&](int c) { return lo + base + start(c); };
    auto len = [&](int c) { return min_(chunk, part - start(c)); };

    int c = mod(position - 1, n);
    p.send(off(c), len(c));
    for (int j = 2; j < n; ++j) {
      c = mod(position - j, n);
      p.recvReduceSend(off(c), len(c));
    }
    c = position;
    p.recvReduceCopySend(off(c), off(c), len(c), /*final=*/true);
    for (int j = 1; j < n - 1; ++j) {
      c = mod(position - j, n);
      p.recvCopySend(off(c), len(c));
    }
    c = mod(position + 1, n);
    p.recv(off(c), len(c));
  }
}

// recv[i] = op over ranks of send[i], for i < count.
template <class Prims>
GYRE_HD void ringAllReduce(Prims& p, int rank, int n, size_t count, size_t chunkElems) {
  if (n == 1) {
    p.localCopy(0, 0, count);
    return;
  }
  ringAllReduceSpan(p, rank, n, mod(rank - 1, n), mod(rank + 1, n), 0, count, chunkElems);
}

// Equal blocks of `count` elements, rank r's at r*count: the all_gather layout.
struct EqualBlocks {
  size_t n;
  GYRE_HD size_t count(int) const { return n; }
  GYRE_HD size_t offset(int r) const { return size_t(r) * n; }
};

// Equal blocks `stride` elements apart: one channel's slice of every rank's all_gather block.
struct StridedBlocks {
  size_t len;
  size_t stride;
  GYRE_HD size_t count(int) const { return len; }
  GYRE_HD size_t offset(int r) const { return size_t(r) * stride; }
};

// Blocks of any size (all_gather_v): rank r's has counts[r] elements at offsets[r].
struct VarBlocks {
  const size_t* counts;
  const size_t* offsets;
  GYRE_HD size_t count(int r) const { return counts[r]; }
  GYRE_HD size_t offset(int r) const { return offsets[r]; }
};

// recv[blocks.offset(r) + i] = send of rank r [i] for i < blocks.count(r).
template <class Prims, class Blocks>
GYRE_HD void ringAllGatherBlocks(Prims& p, int rank, int n, const Blocks& blocks,
                                 size_t chunkElems) {
  if (n == 1) {
    p.localCopy(0, blocks.offset(0), blocks.count(0));
    return;
  }
  ringPeers(p, rank, n);
  size_t longest = 0;
  for (int r = 0; r < n; ++r) longest = blocks.count(r) > longest ? blocks.count(r) : longest;
  for (size_t base = 0; base < longest; base += chunkElems) {
    auto len = [&](int c) {
      return blocks.count(c) > base ? min_(chunkElems, blocks.count(c) - base) : size_t(0);
    };
    auto out = [&](int c) { return blocks.offset(c) + base; };
    p.copySend(base, out(rank), len(rank));
    for (int j = 1; j < n - 1; ++j) p.recvCopySend(out(mod(rank - j, n)), len(mod(rank - j, n)));
    p.recv(out(mod(rank + 1, n)), len(mod(rank + 1, n)));
  }
}

// recv[r*count + i] = send of rank r [i]; recv holds n*count elements.
template <class Prims>
GYRE_HD void ringAllGather(Prims& p, int rank, int n, size_t count, size_t chunkElems) {
  ringAllGatherBlocks(p, rank, n, EqualBlocks{count}, chunkElems);
}

// recv[i] = op over ranks of send[rank*stride + i] for i < count; send holds n blocks
// `stride` elements apart (stride = count, or more for one channel's slice of each block).
template <class Prims>
GYRE_HD void ringReduceScatter(Prims& p, int rank, int n, size_t count, size_t chunkElems,
                               size_t stride) {
  if (n == 1) {
    p.localCopy(0, 0, count);
    return;
  }
  ringPeers(p, rank, n);
  for (size_t base = 0; base < count; base += chunkElems) {
    const size_t len = min_(chunkElems, count - base);
    auto in = [&](int c) { return size_t(c) * stride + base; };
    p.send(in(mod(rank - 1, n)), len);
    for (int j = 2; j < n; ++j) p.recvReduceSend(in(mod(rank - j, n)), len);
    p.recvReduceCopy(in(rank), base, len, /*final=*/true);
  }
}

// recv[i] = send of root [i] on every rank; a pipeline along the ring starting at root, to
// root + 1 first or, `reversed`, to root - 1. The root sends and goes on: ranks that each
// believe they are root leave data in each other's links, which their next call meets
// (binomialBroadcast).
template <class Prims>
GYRE_HD void ringBroadcast(Prims& p, int rank, int n, int root, size_t count, size_t chunkElems,
                           bool reversed = false) {
  if (n == 1) {
    p.localCopy(0, 0, count);
    return;
  }
  const int step = reversed ? -1 : 1;
  const int prev = mod(rank - step, n), next = mod(rank + step, n);
  p.setPeers(&prev, 1, &next, 1);
  const int position = mod((rank - root) * step, n);
  // A middle rank forwards half a link at a time, so the next hop receives one half while this
  // rank fills the other. Two ranks have no middle: the root streams the whole buffer through
  // one primitive, whose sends leave in batches as large as the link (over tcp 15-35 % faster
  // at 1-4 MiB than half-link chunks, docs/tuning.md).
  const size_t chunk = n == 2 ? count : chunkElems;
  for (size_t base = 0; base < count; base += chunk) {
    const size_t len = min_(chunk, count - base);
    if (position == 0) {
      p.copySend(base, base, len);
    } else if (position == n - 1) {
      p.recv(base, len);
    } else {
      p.recvCopySend(base, len);
    }
  }
}

// recv[i] on root = op over ranks of send[i]: a chain from root+1 to root. Other ranks'
// recv is not touched.
template <class Prims>
GYRE_HD void ringReduce(Prims& p, int rank, int n, int root, size_t count) {
  if (n == 1) {
    p.localCopy(0, 0, count);
    return;
  }
  ringPeers(p, rank, n);
  const int position = mod(rank - root - 1, n);  // root is last
  if (position == 0) {
    p.send(0, count);
  } else if (position == n - 1) {
    p.recvReduceCopy(0, 0, count, /*final=*/true);
  } else {
    p.recvReduceSend(0, count);
  }
}

// recv[r*count + i] on root = send of rank r [i]: each rank sends its block down the chain
// towards root, then forwards the blocks of the ranks before it.
template <class Prims>
GYRE_HD void ringGather(Prims& p, int rank, int n, int root, size_t count) {
  if (rank == root) p.localCopy(0, size_t(root) * count, count);
  if (n == 1) return;
  ringPeers(p, rank, n);
  const int position = mod(rank - root - 1, n);  // root is last
  if (rank == root) {
    for (int j = 1; j < n; ++j) p.recv(size_t(mod(root - j, n)) * count, count);
    return;
  }
  p.send(0, count);
  for (int j = 0; j < position; ++j) p.recvSend(count);
}

// recv[i] on rank r = send of root [r*count + i]: root sends the farthest rank's block
// first; each rank forwards the blocks meant for ranks after it and keeps the last.
template <class Prims>
GYRE_HD void ringScatter(Prims& p, int rank, int n, int root, size_t count) {
  if (n == 1) {
    p.localCopy(0, 0, count);
    return;
  }
  ringPeers(p, rank, n);
  const int distance = mod(rank - root, n);
  if (distance == 0) {
    for (int j = n - 1; j >= 1; --j) p.send(size_t(mod(root + j, n)) * count, count);
    p.localCopy(size_t(root) * count, 0, count);
    return;
  }
  for (int j = n - 1; j > distance; --j) p.recvSend(count);
  p.recv(0, count);
}

}  // namespace gyre::algo
