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

// recv[r*count + i] = send of rank r [i] (Bruck): after the step at distance d a rank holds
// the blocks of ranks rank .. rank+2d-1; it sends the ones it has to rank-d and receives the
// next ones from rank+d. A block goes in pieces of at most `chunkElems`, streamed: piece
// k + ahead leaves before piece k is awaited, so at most ahead + 1 pieces wait on a link
// whatever n and count (sending a whole step before receiving would need n/2 slots).
template <class Prims>
GYRE_HD void doublingAllGather(Prims& p, int rank, int n, size_t count, size_t chunkElems,
                               int ahead) {
  p.localCopy(0, size_t(rank) * count, count);
  if (n == 1 || count == 0) return;
  p.useOutputAsInput();
  const size_t perBlock = divUp(count, chunkElems);
  for (int dist = 1; dist < n; dist *= 2) {
    const int to = mod(rank - dist, n), from = mod(rank + dist, n);
    const size_t pieces = size_t(dist < n - dist ? dist : n - dist) * perBlock;
    p.setPeers(&from, 1, &to, 1);
    for (size_t k = 0; k < pieces + size_t(ahead); ++k) {
      if (k < pieces) {
        const int block = int(k / perBlock);
        const size_t at = (k % perBlock) * chunkElems;
        p.send(size_t(mod(rank + block, n)) * count + at, min_(chunkElems, count - at));
      }
      if (k >= size_t(ahead)) {
        const size_t j = k - size_t(ahead);
        const int block = int(j / perBlock);
        const size_t at = (j % perBlock) * chunkElems;
        p.recv(size_t(mod(rank + dist + block, n)) * count + at, min_(chunkElems, count - at));
      }
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
