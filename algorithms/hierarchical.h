// Hierarchical all-reduce, all-gather and reduce-scatter for ranks laid out host by host (rank =
// host · L + local index, as gyre-run and Slurm's block distribution place them): the network
// carries each byte as few times as the number of hosts requires, not the number of ranks.
//   1. reduce-scatter inside each host, a ring over its L ranks: local rank j ends with its
//      host's sum of slice j (slice j: elements [count·j/L, count·(j+1)/L));
//   2. all-reduce of slice j across hosts, a ring over the K ranks with local index j (one
//      "rail" per local index, so every rank's link to other hosts works at once);
//   3. all-gather of the slices inside each host.
// A host link carries 2(K-1)/K of the buffer against a flat ring's 2(n-1)/n. The all-gather
// runs the same rails first, then gathers inside the hosts (hierarchicalAllGather); the
// reduce-scatter reduces inside the hosts into the rails (hierarchicalReduceScatter). Each phase
// runs in rounds of at most `chunkElems` per step, like the flat ring (ring.h), and a phase
// waits only on the one before it, so no wait is circular.
#pragma once

#include "algorithms/common.h"
#include "algorithms/ring.h"

namespace gyre::algo {

struct HostBlocks {
  int hosts;  // K
  int local;  // L ranks on every host
  GYRE_HD int host(int rank) const { return rank / local; }
  GYRE_HD int index(int rank) const { return rank % local; }
  GYRE_HD int rank(int host, int index) const { return host * local + index; }
};

// Slice j of `count` over `parts` slices: [lo, lo + len).
GYRE_HD inline size_t sliceLo(size_t count, int j, int parts) {
  return count * size_t(j) / size_t(parts);
}
GYRE_HD inline size_t sliceLen(size_t count, int j, int parts) {
  return sliceLo(count, j + 1, parts) - sliceLo(count, j, parts);
}

// One round of a ring over a host's L slices: slice s's elements [base, base + chunk), where
// it has them (a slice shorter than base takes part with none).
struct SliceRound {
  size_t count;
  int parts;
  size_t base, chunk;
  GYRE_HD size_t len(int s) const {
    const size_t n = sliceLen(count, s, parts);
    return n > base ? min_(chunk, n - base) : size_t(0);
  }
  GYRE_HD size_t at(int s) const { return sliceLo(count, s, parts) + base; }
};

template <class Prims>
GYRE_HD void hierarchicalAllReduce(Prims& p, int rank, const HostBlocks& t, size_t count,
                                   size_t chunkElems) {
  const int L = t.local, K = t.hosts, h = t.host(rank), j = t.index(rank);
  // Phase 1: ring reduce-scatter of the L slices among this host's ranks, into the output.
  if (L == 1) {
    p.localCopy(0, 0, count);
  } else {
    const int prev = t.rank(h, mod(j - 1, L)), next = t.rank(h, mod(j + 1, L));
    p.setPeers(&prev, 1, &next, 1);
    const size_t longest = divUp(count, size_t(L));
    for (size_t base = 0; base < longest; base += chunkElems) {
      const SliceRound r{count, L, base, chunkElems};
      int s = mod(j - 1, L);
      p.send(r.at(s), r.len(s));
      for (int step = 2; step < L; ++step) {
        s = mod(j - step, L);
        p.recvReduceSend(r.at(s), r.len(s));
      }
      p.recvReduceCopy(r.at(j), r.at(j), r.len(j), /*final=*/K == 1);
    }
  }
  p.useOutputAsInput();
  // Phase 2: ring all-reduce of slice j among the ranks with local index j, in place.
  if (K > 1) {
    ringAllReduceSpan(p, h, K, t.rank(mod(h - 1, K), j), t.rank(mod(h + 1, K), j),
                      sliceLo(count, j, L), sliceLen(count, j, L), chunkElems);
  }
  // Phase 3: ring all-gather of the slices among this host's ranks; each already holds its own.
  if (L == 1) return;
  const int prev = t.rank(h, mod(j - 1, L)), next = t.rank(h, mod(j + 1, L));
  p.setPeers(&prev, 1, &next, 1);
  const size_t longest = divUp(count, size_t(L));
  for (size_t base = 0; base < longest; base += chunkElems) {
    const SliceRound r{count, L, base, chunkElems};
    p.send(r.at(j), r.len(j));
    for (int step = 1; step < L - 1; ++step) {
      const int s = mod(j - step, L);
      p.recvCopySend(r.at(s), r.len(s));
    }
    const int s = mod(j + 1, L);
    p.recv(r.at(s), r.len(s));
  }
}

// recv[r*stride + i] = send of rank r [i] for i < count, ranks host by host:
//   1. all-gather across hosts on rail j: rank (h, j) ends with the block of every (h', j);
//   2. all-gather inside each host of those K blocks per local rank, one ring per host h' in
//      turn.
// The network carries (K-1)/K of the gathered buffer per host, against (n-1)/n over a flat
// ring's link between two hosts, spread over every rank's link.
template <class Prims>
GYRE_HD void hierarchicalAllGather(Prims& p, int rank, const HostBlocks& t, size_t count,
                                   size_t stride, size_t chunkElems) {
  const int L = t.local, K = t.hosts, h = t.host(rank), j = t.index(rank);
  auto at = [&](int host, int index) { return size_t(t.rank(host, index)) * stride; };
  // Phase 1: a ring all-gather among the ranks with local index j.
  if (K == 1) {
    p.localCopy(0, at(h, j), count);
  } else {
    const int prev = t.rank(mod(h - 1, K), j), next = t.rank(mod(h + 1, K), j);
    p.setPeers(&prev, 1, &next, 1);
    for (size_t base = 0; base < count; base += chunkElems) {
      const size_t len = min_(chunkElems, count - base);
      p.copySend(base, at(h, j) + base, len);
      for (int s = 1; s < K - 1; ++s) p.recvCopySend(at(mod(h - s, K), j) + base, len);
      p.recv(at(mod(h + 1, K), j) + base, len);
    }
  }
  if (L == 1) return;
  p.useOutputAsInput();
  // Phase 2: inside the host, a ring all-gather of host g's blocks for every host g in turn.
  const int prev = t.rank(h, mod(j - 1, L)), next = t.rank(h, mod(j + 1, L));
  p.setPeers(&prev, 1, &next, 1);
  for (size_t base = 0; base < count; base += chunkElems) {
    const size_t len = min_(chunkElems, count - base);
    for (int g = 0; g < K; ++g) {
      p.send(at(g, j) + base, len);
      for (int s = 1; s < L - 1; ++s) p.recvCopySend(at(g, mod(j - s, L)) + base, len);
      p.recv(at(g, mod(j + 1, L)) + base, len);
    }
  }
}

// recv[i] = op over ranks of send[rank*stride + i] for i < count, ranks host by host. For each
// host g in turn, from the previous one on the rail to this one, a ring reduce-scatter inside
// the host of g's blocks whose last step hands the host's partial of block (g, j) to the rail
// instead of keeping it: rank (h, j) adds what came from (h-1, j) and passes it to (h+1, j),
// and at g = h the sum of all ranks lands in the output. No scratch, and the rail ring and the
// rings inside the host keep the flat ring's pattern (a send, then a receive before every
// further send), so no wait is circular. (K-1)/K of the buffer crosses a host's link.
template <class Prims>
GYRE_HD void hierarchicalReduceScatter(Prims& p, int rank, const HostBlocks& t, size_t count,
                                       size_t stride, size_t chunkElems) {
  const int L = t.local, K = t.hosts, h = t.host(rank), j = t.index(rank);
  if (L == 1 && K == 1) {
    p.localCopy(0, 0, count);
    return;
  }
  const int intraPrev = t.rank(h, mod(j - 1, L)), intraNext = t.rank(h, mod(j + 1, L));
  const int railPrev = t.rank(mod(h - 1, K), j), railNext = t.rank(mod(h + 1, K), j);
  auto in = [&](int host, int index) { return size_t(t.rank(host, index)) * stride; };
  for (size_t base = 0; base < count; base += chunkElems) {
    const size_t len = min_(chunkElems, count - base);
    for (int step = 1; step <= K; ++step) {
      const int g = mod(h - step, K);  // the last step: this host
      if (L > 1) {
        p.setPeers(&intraPrev, 1, &intraNext, 1);
        p.send(in(g, mod(j - 1, L)) + base, len);
        for (int s = 2; s < L; ++s) p.recvReduceSend(in(g, mod(j - s, L)) + base, len);
      }
      // Block (g, j): the host's ring brings the other local ranks' part, the rail the
      // previous hosts'.
      int from[2];
      int nFrom = 0;
      if (L > 1) from[nFrom++] = intraPrev;
      if (step > 1) from[nFrom++] = railPrev;
      if (step < K) {
        p.setPeers(from, nFrom, &railNext, 1);
        if (nFrom == 0) {
          p.send(in(g, j) + base, len);
        } else {
          p.recvReduceSend(in(g, j) + base, len);
        }
      } else {
        p.setPeers(from, nFrom, &railNext, 0);
        p.recvReduceCopy(in(h, j) + base, base, len, /*final=*/true);
      }
    }
  }
}

}  // namespace gyre::algo
