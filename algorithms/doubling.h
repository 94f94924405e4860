// Recursive doubling: log2(n) steps in which every rank exchanges with a partner at distance
// 1, 2, 4, ...: the fewest steps for small messages. Non-power-of-two n folds the extra ranks
// onto partners first (all-reduce) or uses Bruck's rotation (all-gather, all-to-all, barrier),
// which works for any n. Exchanges run in rounds of at most `chunkElems`, so both partners can
// send a round before either receives it.
#pragma once

#include <cstdint>

#include "algorithms/common.h"

namespace gyre::algo {

// One exchange with a partner: elements [give, give + giveElems) leave and [take, take +
// takeElems) come in, each run cut into pieces of `chunkElems` from its start as the partner
// cuts it. `ahead` pieces stay in flight: piece k + ahead leaves before piece k is awaited, so
// the exchange streams instead of paying a latency per piece. What comes in is reduced into the
// output (`reduce`; `final` on a block's last reduction) or copied there.
template <class Prims>
GYRE_HD void exchangeRuns(Prims& p, size_t give, size_t giveElems, size_t take, size_t takeElems,
                          size_t chunkElems, int ahead, bool reduce, bool final) {
  const size_t sends = divUp(giveElems, chunkElems), recvs = divUp(takeElems, chunkElems);
  for (size_t k = 0; k < (sends > recvs ? sends : recvs) + size_t(ahead); ++k) {
    if (k < sends) p.send(give + k * chunkElems, min_(chunkElems, giveElems - k * chunkElems));
    if (k >= size_t(ahead) && k - size_t(ahead) < recvs) {
      const size_t j = k - size_t(ahead), at = take + j * chunkElems;
      const size_t len = min_(chunkElems, takeElems - j * chunkElems);
      if (reduce) {
        p.recvReduceCopy(at, at, len, final);
      } else {
        p.recv(at, len);
      }
    }
  }
}

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
    exchangeRuns(p, 0, count, 0, count, chunkElems, ahead, true, last);
  }
  if (hasExtra) {
    const int extra = rank + p2;
    p.setPeers(&extra, 1, &extra, 1);
    p.send(0, count);
  }
}

// Recursive halving over n blocks (a power of two), block b starting at start(b), start(n) the
// end: at distance n/2, n/4, ..., 1 a rank keeps the half of its current run of blocks that
// holds its own block and sends its partner (rank ^ distance) the other half, reducing what
// comes back into its own. Each rank ends with its block reduced in the output; log2(n) steps
// moving (n - 1)/n of the buffer, the ring's bytes in the doubling's steps.
template <class Prims, class Start>
GYRE_HD void halveBlocks(Prims& p, int rank, int n, const Start& start, size_t chunkElems,
                         int ahead) {
  for (int dist = n / 2; dist >= 1; dist /= 2) {
    const int partner = rank ^ dist, base = rank & ~(2 * dist - 1);
    const int mine = (rank & dist) ? base + dist : base, other = (rank & dist) ? base : base + dist;
    p.setPeers(&partner, 1, &partner, 1);
    exchangeRuns(p, start(other), start(other + dist) - start(other), start(mine),
                 start(mine + dist) - start(mine), chunkElems, ahead, true, dist == 1);
    if (dist == n / 2) p.useOutputAsInput();
  }
}

// out[rank*count + i] = op over ranks of send[rank*count + i] for a power-of-two n by
// recursive halving (halveBlocks over blocks of `count`), the other blocks of `out` left as
// scratch.
template <class Prims>
GYRE_HD void halvingReduceScatter(Prims& p, int rank, int n, size_t count, size_t chunkElems,
                                  int ahead) {
  if (n == 1) {
    p.localCopy(0, 0, count);
    return;
  }
  halveBlocks(
      p, rank, n, [count](int block) { return size_t(block) * count; }, chunkElems, ahead);
}

// recv[i] = op over ranks of send[i] for a power-of-two n by halving, then doubling
// (Rabenseifner): halveBlocks over n blocks of `count` (block b starts at b*count/n), which
// leaves each rank its block reduced, then an all-gather that doubles each rank's run of blocks
// at distance 1, 2, ..., n/2. 2 log2(n) steps carrying the ring's bytes, where
// doublingAllReduce moves the whole buffer at each of its log2(n).
template <class Prims>
GYRE_HD void halvingDoublingAllReduce(Prims& p, int rank, int n, size_t count, size_t chunkElems,
                                      int ahead) {
  if (n == 1 || count == 0) {
    if (count > 0) p.localCopy(0, 0, count);
    return;
  }
  const auto start = [count, n](int block) {
    return size_t(uint64_t(count) * uint64_t(block) / uint64_t(n));
  };
  halveBlocks(p, rank, n, start, chunkElems, ahead);
  for (int dist = 1; dist < n; dist *= 2) {
    const int partner = rank ^ dist, mine = rank & ~(dist - 1), other = mine ^ dist;
    p.setPeers(&partner, 1, &partner, 1);
    exchangeRuns(p, start(mine), start(mine + dist) - start(mine), start(other),
                 start(other + dist) - start(other), chunkElems, ahead, false, false);
  }
}

// The blocks start, start+1, ... start+blocks-1 (mod n) of an all-gather's output as at most
// two contiguous runs (the second where they wrap past rank n-1), each cut into pieces of at
// most `chunkElems`. Sender and receiver of a Bruck step name the same blocks, so they cut
// them alike: one message per piece, not one per block.
struct BlockRun {
  size_t headElems, tailElems, chunkElems, startElem;
  GYRE_HD BlockRun(int start, int blocks, int n, size_t count, size_t chunk)
      : headElems(size_t(blocks < n - start ? blocks : n - start) * count),
        tailElems(size_t(blocks) * count - headElems),
        chunkElems(chunk),
        startElem(size_t(start) * count) {}
  GYRE_HD size_t headPieces() const { return divUp(headElems, chunkElems); }
  GYRE_HD size_t pieces() const { return headPieces() + divUp(tailElems, chunkElems); }
  // Piece k as (offset, length) in elements of the output.
  GYRE_HD size_t offset(size_t k) const {
    const size_t h = headPieces();
    return k < h ? startElem + k * chunkElems : (k - h) * chunkElems;
  }
  GYRE_HD size_t length(size_t k) const {
    const size_t h = headPieces();
    return k < h ? min_(chunkElems, headElems - k * chunkElems)
                 : min_(chunkElems, tailElems - (k - h) * chunkElems);
  }
};

// recv[r*count + i] = send of rank r [i] (Bruck): after the step at distance d a rank holds
// the blocks of ranks rank .. rank+2d-1; it sends the ones it has to rank-d and receives the
// next ones from rank+d, each step's blocks as one or two contiguous runs. The runs go in
// pieces of at most `chunkElems`, streamed: piece k + ahead leaves before piece k is awaited,
// so at most ahead + 1 pieces wait on a link whatever n and count (sending a whole step before
// receiving would need n/2 slots). A rank's send and receive runs may wrap at different
// blocks and so differ by a piece; each is matched exactly by its partner's.
template <class Prims>
GYRE_HD void doublingAllGather(Prims& p, int rank, int n, size_t count, size_t chunkElems,
                               int ahead) {
  p.localCopy(0, size_t(rank) * count, count);
  if (n == 1 || count == 0) return;
  p.useOutputAsInput();
  for (int dist = 1; dist < n; dist *= 2) {
    const int to = mod(rank - dist, n), from = mod(rank + dist, n);
    const int blocks = dist < n - dist ? dist : n - dist;
    const BlockRun out(rank, blocks, n, count, chunkElems), in(from, blocks, n, count, chunkElems);
    const size_t sends = out.pieces(), recvs = in.pieces();
    p.setPeers(&from, 1, &to, 1);
    for (size_t k = 0; k < (sends > recvs ? sends : recvs) + size_t(ahead); ++k) {
      if (k < sends) p.send(out.offset(k), out.length(k));
      if (k >= size_t(ahead) && k - size_t(ahead) < recvs) {
        const size_t j = k - size_t(ahead);
        p.recv(in.offset(j), in.length(j));
      }
    }
  }
}

// The q-th of the slots 1 .. n-1 whose distance has bit `dist` set (q from 0): they come in
// runs of `dist` at a stride of 2 dist.
GYRE_HD inline int bruckSlot(int q, int dist) {
  return q / dist * 2 * dist + dist + q % dist;
}
GYRE_HD inline int bruckSlots(int n, int dist) {
  const int rest = n % (2 * dist) - dist;
  return n / (2 * dist) * dist + (rest > 0 ? rest : 0);
}

// recv[r*count + i] = send of rank r [rank*count + i] (Bruck's all-to-all): ceil(log2 n) steps
// where the pairwise exchange makes n - 1, each moving the blocks whose distance has the step's
// bit set (about half the buffer): for small blocks, whose messages cost more than their bytes.
// Slot j of a rank lives in output block (rank - j) mod n. It starts as the input block bound
// for rank + j; the step at distance d, where j has bit d, sends it on to slot j of rank + d
// and takes rank - d's in its place; so it ends holding the block from rank - j, where it lies,
// with no rotation back. A step's pieces (of at most `chunkElems`) leave `ahead` before the
// receive that overwrites the first of them; those first ones leave together (holdSends) and are
// handed over before that receive. As the ring's, `ahead` + 1 pieces may fill at most half a
// link: rdma hands a link's slots back half a link at a time, so a sender further ahead could
// wait for slots its receiver, waiting in turn, has not handed back.
template <class Prims>
GYRE_HD void bruckAllToAll(Prims& p, int rank, int n, size_t count, size_t chunkElems, int ahead) {
  for (int j = 0; j < n; ++j)
    p.localCopy(size_t(mod(rank + j, n)) * count, size_t(mod(rank - j, n)) * count, count);
  if (n == 1 || count == 0) return;
  p.useOutputAsInput();
  const size_t perBlock = divUp(count, chunkElems);
  for (int dist = 1; dist < n; dist *= 2) {
    const int to = mod(rank + dist, n), from = mod(rank - dist, n);
    const size_t pieces = size_t(bruckSlots(n, dist)) * perBlock;
    const auto offset = [&](size_t k) {
      const int j = bruckSlot(int(k / perBlock), dist);
      return size_t(mod(rank - j, n)) * count + k % perBlock * chunkElems;
    };
    const auto length = [&](size_t k) {
      return min_(chunkElems, count - k % perBlock * chunkElems);
    };
    const size_t batch = min_(pieces, size_t(ahead) + 1);
    p.setPeers(&from, 1, &to, 1);
    p.holdSends(true);
    for (size_t k = 0; k < pieces + size_t(ahead); ++k) {
      if (k < pieces) p.send(offset(k), length(k));
      if (k + 1 == batch) p.holdSends(false);
      if (k >= size_t(ahead) && k - size_t(ahead) < pieces) {
        const size_t j = k - size_t(ahead);
        p.recv(offset(j), length(j));
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
