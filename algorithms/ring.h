// Ring algorithms over the primitives vocabulary (see algorithms/prims.h). Each rank receives
// from rank-1 and sends to rank+1. Work proceeds in rounds whose per-step chunk is at most
// `chunkElems`, less than a link's capacity, so every rank can finish its first send of a
// round before its successor starts receiving: no circular wait, whatever the count.
#pragma once

#include "algorithms/common.h"

namespace gyre::algo {

// recv[i] = op over ranks of send[i], for i < count.
template <class Prims>
GYRE_HD void ringAllReduce(Prims& p, int rank, int n, size_t count, size_t chunkElems) {
  if (n == 1) {
    p.localCopy(0, 0, count);
    return;
  }
  const size_t loop = size_t(n) * chunkElems;
  for (size_t base = 0; base < count; base += loop) {
    const size_t part = min_(loop, count - base);
    const size_t chunk = divUp(part, size_t(n));
    auto start = [&](int c) { return min_(size_t(c) * chunk, part); };
    auto off = [&](int c) { return base + start(c); };
    auto len = [&](int c) { return min_(chunk, part - start(c)); };

    int c = mod(rank - 1, n);
    p.send(off(c), len(c));
    for (int j = 2; j < n; ++j) {
      c = mod(rank - j, n);
      p.recvReduceSend(off(c), len(c));
    }
    c = rank;
    p.recvReduceCopySend(off(c), off(c), len(c), /*final=*/true);
    for (int j = 1; j < n - 1; ++j) {
      c = mod(rank - j, n);
      p.recvCopySend(off(c), len(c));
    }
    c = mod(rank + 1, n);
    p.recv(off(c), len(c));
  }
}

// recv[r*count + i] = send of rank r [i]; recv holds n*count elements.
template <class Prims>
GYRE_HD void ringAllGather(Prims& p, int rank, int n, size_t count, size_t chunkElems) {
  if (n == 1) {
    p.localCopy(0, 0, count);
    return;
  }
  for (size_t base = 0; base < count; base += chunkElems) {
    const size_t len = min_(chunkElems, count - base);
    auto out = [&](int c) { return size_t(c) * count + base; };
    p.copySend(base, out(rank), len);
    for (int j = 1; j < n - 1; ++j) p.recvCopySend(out(mod(rank - j, n)), len);
    p.recv(out(mod(rank + 1, n)), len);
  }
}

// recv[i] = op over ranks of send[rank*count + i]; send holds n*count elements.
template <class Prims>
GYRE_HD void ringReduceScatter(Prims& p, int rank, int n, size_t count, size_t chunkElems) {
  if (n == 1) {
    p.localCopy(0, 0, count);
    return;
  }
  for (size_t base = 0; base < count; base += chunkElems) {
    const size_t len = min_(chunkElems, count - base);
    auto in = [&](int c) { return size_t(c) * count + base; };
    p.send(in(mod(rank - 1, n)), len);
    for (int j = 2; j < n; ++j) p.recvReduceSend(in(mod(rank - j, n)), len);
    p.recvReduceCopy(in(rank), base, len, /*final=*/true);
  }
}

// recv[i] = send of root [i] on every rank; a pipeline along the ring starting at root. The
// last rank closes the ring with a marker to root, so root checks that its peers agree too
// (otherwise ranks that all believe they are root would never compare descriptors).
template <class Prims>
GYRE_HD void ringBroadcast(Prims& p, int rank, int n, int root, size_t count, size_t chunkElems) {
  const int position = mod(rank - root, n);
  for (size_t base = 0; base < count; base += chunkElems) {
    const size_t len = min_(chunkElems, count - base);
    if (n == 1) {
      p.localCopy(base, base, len);
    } else if (position == 0) {
      p.copySend(base, base, len);
    } else if (position == n - 1) {
      p.recv(base, len);
    } else {
      p.recvCopySend(base, len);
    }
  }
  if (n > 1 && position == n - 1) p.sendMarker();
  if (n > 1 && position == 0) p.recvMarker();
}

}  // namespace gyre::algo
