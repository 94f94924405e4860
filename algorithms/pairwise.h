// Point-to-point schedules over the primitives: the pairwise all-to-all (at step s every
// rank sends to rank+s and receives from rank-s, a chunk at a time, its sends a chunk ahead of
// its receives) and single sends and receives.
#pragma once

#include "algorithms/common.h"

namespace gyre::algo {

// Equal blocks (all_to_all): `count` elements to and from every rank, block r at r*count.
struct EqualExchange {
  size_t n;
  GYRE_HD size_t sendCount(int) const { return n; }
  GYRE_HD size_t sendOffset(int r) const { return size_t(r) * n; }
  GYRE_HD size_t recvCount(int) const { return n; }
  GYRE_HD size_t recvOffset(int r) const { return size_t(r) * n; }
};

// Any blocks (all_to_all_v): per-rank counts and offsets in elements.
struct VarExchange {
  const size_t* sendCounts;
  const size_t* sendOffsets;
  const size_t* recvCounts;
  const size_t* recvOffsets;
  GYRE_HD size_t sendCount(int r) const { return sendCounts[r]; }
  GYRE_HD size_t sendOffset(int r) const { return sendOffsets[r]; }
  GYRE_HD size_t recvCount(int r) const { return recvCounts[r]; }
  GYRE_HD size_t recvOffset(int r) const { return recvOffsets[r]; }
};

// recv[x.recvOffset(r) + i] = send of rank r [its sendOffset(rank) + i]. `chunkElems` is at
// most half a link: a rank sends chunk c + 1 before it receives chunk c, so the next chunk is
// on its way while this one is read, and two chunks in flight fill a link without waiting for
// its receiver (slot by slot in lockstep, a two-rank exchange of 1 MiB over tcp took 1.3-1.6
// times as long: docs/tuning.md, "The pairwise exchange a chunk ahead").
template <class Prims, class Exchange>
GYRE_HD void pairwiseAllToAll(Prims& p, int rank, int n, const Exchange& x, size_t chunkElems) {
  p.localCopy(x.sendOffset(rank), x.recvOffset(rank), x.sendCount(rank));
  for (int s = 1; s < n; ++s) {
    const int to = mod(rank + s, n), from = mod(rank - s, n);
    const size_t sendLen = x.sendCount(to), recvLen = x.recvCount(from);
    p.setPeers(&from, 1, &to, 1);
    if (sendLen > 0) p.send(x.sendOffset(to), min_(chunkElems, sendLen));
    for (size_t base = 0; base < sendLen || base < recvLen; base += chunkElems) {
      const size_t next = base + chunkElems;
      if (next < sendLen) p.send(x.sendOffset(to) + next, min_(chunkElems, sendLen - next));
      if (base < recvLen) p.recv(x.recvOffset(from) + base, min_(chunkElems, recvLen - base));
    }
  }
}

template <class Prims>
GYRE_HD void sendTo(Prims& p, int peer, size_t count) {
  p.setPeers(nullptr, 0, &peer, 1);
  p.send(0, count);
}

template <class Prims>
GYRE_HD void recvFrom(Prims& p, int peer, size_t count) {
  p.setPeers(&peer, 1, nullptr, 0);
  p.recv(0, count);
}

}  // namespace gyre::algo
