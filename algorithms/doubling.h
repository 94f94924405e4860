// Recursive doubling: log2(n) steps in which every rank exchanges with a partner at distance
// 1, 2, 4, ...: the fewest steps for small messages. Non-power-of-two n folds the extra ranks
// onto partners first (all-reduce) or uses Bruck's rotation (all-gather, barrier), which
// works for any n. Exchanges run in rounds of at most `chunkElems`, so both partners can send
// a round before either receives it.
#pragma once

#include "algorithms/common.h"

namespace gyre::algo {

// recv[i] = op over ranks of send[i]. Ranks at or above the largest power of two p2 hand
// their input to rank - p2 and get the result back from it. Needs (ahead + 1) pieces of
// `chunkElems` to fit a link.
template <class Prims>
GYRE_HD void doublingAllReduce(Prims& p, int rank, int n, size_t count, size_t chunkElems,
                               int ahead) {
  if (n == 1) {
    p.localCopy(0, 0, count);
    return;
  }
  int p2 = 1;
  while (p2 * 2 <= n) p2 *= 2;
  if (rank >= p2) {
    const int partner = rank - p2;
    p.setPeers(&partner, 1, &partner, 1);
    p.send(0, count);
    p.recv(0, count);
    return;
  }
  const bool hasExtra = rank + p2 < n;
  if (hasExtra) {
    const int extra = rank + p2;
    p.setPeers(&extra, 1, &extra, 1);
    p.recvReduceCopy(0, 0, count, /*final=*/false);
  } else {
    p.localCopy(0, 0, count);
  }
  p.useOutputAsInput();
  for (int dist = 1; dist < p2; dist *= 2) {
    const int partner = rank ^ dist;
    const bool last = dist * 2 == p2;
    p.setPeers(&partner, 1, &partner, 1);
    // Keep `ahead` pieces in flight: each side sends piece k + ahead before it waits for
    // piece k, so the exchange streams instead of paying a latency per piece.
    const size_t pieces = divUp(count, chunkElems);
    for (size_t k = 0; k < pieces + size_t(ahead); ++k) {
      if (k < pieces) p.send(k * chunkElems, min_(chunkElems, count - k * chunkElems));
      if (k >= size_t(ahead)) {
        const size_t j = k - size_t(ahead);
        p.recvReduceCopy(j * chunkElems, j * chunkElems, min_(chunkElems, count - j * chunkElems),
                         last);
      }
    }
  }
  if (hasExtra) {
    const int extra = rank + p2;
    p.setPeers(&extra, 1, &extra, 1);
    p.send(0, count);
  }
}

// Calls fn(block, offsetInBlock, len) for the pieces of elements [begin, begin+len) of a run
// of consecutive blocks of `count` elements each.
template <class Fn>
GYRE_HD void forEachBlockPiece(size_t begin, size_t len, size_t count, Fn fn) {
  while (len > 0) {
    const size_t block = begin / count, inBlock = begin % count;
    const size_t piece = min_(len, count - inBlock);
    fn(block, inBlock, piece);
    begin += piece;
    len -= piece;
  }
}

// recv[r*count + i] = send of rank r [i] (Bruck): after the step at distance d a rank holds
// the blocks of ranks rank .. rank+2d-1; it sends the ones it has to rank-d and receives the
// next ones from rank+d.
template <class Prims>
GYRE_HD void doublingAllGather(Prims& p, int rank, int n, size_t count, size_t chunkElems) {
  p.localCopy(0, size_t(rank) * count, count);
  if (n == 1 || count == 0) return;
  p.useOutputAsInput();
  for (int dist = 1; dist < n; dist *= 2) {
    const int to = mod(rank - dist, n), from = mod(rank + dist, n);
    const size_t total = size_t(dist < n - dist ? dist : n - dist) * count;
    p.setPeers(&from, 1, &to, 1);
    for (size_t base = 0; base < total; base += chunkElems) {
      const size_t len = min_(chunkElems, total - base);
      forEachBlockPiece(base, len, count, [&](size_t block, size_t at, size_t piece) {
        p.send(size_t(mod(rank + int(block), n)) * count + at, piece);
      });
      forEachBlockPiece(base, len, count, [&](size_t block, size_t at, size_t piece) {
        p.recv(size_t(mod(rank + dist + int(block), n)) * count + at, piece);
      });
    }
  }
}

// Dissemination barrier: at distance 1, 2, 4, ... each rank signals rank+d and waits for
// rank-d; after ceil(log2 n) steps every rank has heard, indirectly, from every other.
template <class Prims>
GYRE_HD void disseminationBarrier(Prims& p, int rank, int n) {
  for (int dist = 1; dist < n; dist *= 2) {
    const int to = mod(rank + dist, n), from = mod(rank - dist, n);
    p.setPeers(&from, 1, &to, 1);
    p.sendMarker();
    p.recvMarker();
  }
}

}  // namespace gyre::algo
