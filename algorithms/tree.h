// Tree algorithms over the primitives: a binomial tree (reduce and broadcast of small
// messages: log2(n) steps instead of n-1), NCCL's double binary tree for all-reduce
// (two complementary trees, each carrying half the data, so every rank is a leaf in one of
// them and the work of interior nodes is balanced), a tree of depth one for gather and
// scatter (every rank straight to or from the root), and a binomial scatter for links where
// each of the root's sends costs more than its bytes (a socket's).
#pragma once

#include "algorithms/common.h"

namespace gyre::algo {

struct TreeNode {
  int parent = -1;  // -1 at the root
  int nChildren = 0;
  int children[kMaxTreeChildren] = {};
};

// Binomial tree rooted at `root`: relative rank v's parent is v without its lowest set bit;
// its children are v + 2^k for every 2^k below that bit, the largest subtree first.
GYRE_HD inline TreeNode binomialNode(int rank, int n, int root) {
  TreeNode t;
  const int v = mod(rank - root, n);
  if (v != 0) t.parent = mod((v & (v - 1)) + root, n);
  int low = 1;
  while (low < n && !(v & low)) low <<= 1;  // v's lowest set bit (n or more for v = 0)
  for (int step = low >> 1; step >= 1; step >>= 1) {
    if (v + step < n) t.children[t.nChildren++] = mod(v + step + root, n);
  }
  return t;
}

// The relayed broadcast tree (n >= 3): the root sends once, to the rank n/2 after it, which
// roots a binomial tree over the other n - 1 ranks, in rank order from itself. Where ranks
// are held in two blocks of CPUs, the binomial tree puts the root's log2(n) sends on the
// root's CPU every call; taking this tree every other call moves part of them to the other.
GYRE_HD inline TreeNode relayedBinomialNode(int rank, int n, int root) {
  const int v = mod(rank - root, n), others = n - 1, half = n / 2;
  // Relative rank v (1..n-1) is u = v - half (mod n - 1) in the relay's tree, the relay u = 0.
  auto toRank = [&](int u) { return mod(1 + mod(u + half - 1, others) + root, n); };
  TreeNode t;
  if (v == 0) {
    t.nChildren = 1;
    t.children[0] = toRank(0);
    return t;
  }
  const TreeNode b = binomialNode(mod(v - half, others), others, 0);
  t.parent = b.parent < 0 ? root : toRank(b.parent);
  t.nChildren = b.nChildren;
  for (int i = 0; i < b.nChildren; ++i) t.children[i] = toRank(b.children[i]);
  return t;
}

// One binary tree over 0..n-1 in in-order layout: rank r sits at the level of its lowest set
// bit; 0 is the root and has one child, the largest power of two below n.
GYRE_HD inline TreeNode binaryNode(int r, int n) {
  TreeNode t;
  if (n == 1) return t;
  if (r == 0) {
    int top = 1;
    while (top * 2 < n) top *= 2;
    t.children[t.nChildren++] = top;
    return t;
  }
  const int bit = r & -r;
  int up = (r ^ bit) | (bit << 1);
  t.parent = up < n ? up : (r ^ bit);
  const int half = bit >> 1;
  if (half == 0) return t;  // odd ranks are leaves
  t.children[t.nChildren++] = r - half;
  for (int h = half; h >= 1; h >>= 1) {  // the right child, or the nearest one inside n
    if (r + h < n) {
      t.children[t.nChildren++] = r + h;
      break;
    }
  }
  return t;
}

// Tree `which` (0 or 1) of the double binary tree. Tree 1 relabels tree 0 so that tree 0's
// leaves (the odd ranks) are interior nodes in tree 1: mirrored for even n, shifted by one
// for odd n.
GYRE_HD inline TreeNode doubleTreeNode(int rank, int n, int which) {
  if (which == 0) return binaryNode(rank, n);
  const bool mirror = n % 2 == 0;
  auto toVirtual = [&](int r) { return mirror ? n - 1 - r : mod(r - 1, n); };
  auto toReal = [&](int v) { return mirror ? n - 1 - v : mod(v + 1, n); };
  TreeNode t = binaryNode(toVirtual(rank), n);
  if (t.parent >= 0) t.parent = toReal(t.parent);
  for (int i = 0; i < t.nChildren; ++i) t.children[i] = toReal(t.children[i]);
  return t;
}

// Up a tree: leaves send, interior nodes add their children's partial results to their
// input and send on, the root finishes the reduction into its output. With `down`, the root
// also starts sending the result back to its children in the same pass.
template <class Prims>
GYRE_HD void treeUp(Prims& p, const TreeNode& t, size_t off, size_t len, bool down) {
  if (len == 0) return;
  if (t.parent < 0) {
    if (down) {
      p.setPeers(t.children, t.nChildren, t.children, t.nChildren);
      p.recvReduceCopySend(off, off, len, /*final=*/true);
    } else {
      p.setPeers(t.children, t.nChildren, nullptr, 0);
      p.recvReduceCopy(off, off, len, /*final=*/true);
    }
    return;
  }
  p.setPeers(t.children, t.nChildren, &t.parent, 1);
  if (t.nChildren == 0) {
    p.send(off, len);
  } else {
    p.recvReduceSend(off, len);
  }
}

// Down a tree from its root: every non-root rank receives into its output and forwards.
template <class Prims>
GYRE_HD void treeDown(Prims& p, const TreeNode& t, size_t off, size_t len) {
  if (len == 0 || t.parent < 0) return;
  p.setPeers(&t.parent, 1, t.children, t.nChildren);
  if (t.nChildren == 0) {
    p.recv(off, len);
  } else {
    p.recvCopySend(off, len);
  }
}

// recv[i] on root = op over ranks of send[i]; other ranks' recv is not touched.
template <class Prims>
GYRE_HD void binomialReduce(Prims& p, int rank, int n, int root, size_t count) {
  if (n == 1) {
    p.localCopy(0, 0, count);
    return;
  }
  treeUp(p, binomialNode(rank, n, root), 0, count, /*down=*/false);
}

// recv[i] = send of root [i] on every rank. The root sends and goes on, like any sender: ranks
// that each believe they are root leave data in each other's links, which their next call
// meets (ranks disagree), as with a scatter. `relayed`: down relayedBinomialNode's tree.
template <class Prims>
GYRE_HD void binomialBroadcast(Prims& p, int rank, int n, int root, size_t count,
                               bool relayed = false) {
  if (n == 1) {
    p.localCopy(0, 0, count);
    return;
  }
  if (count == 0) return;  // nothing moves, and no rank names a peer to connect to
  const TreeNode t =
      relayed && n >= 3 ? relayedBinomialNode(rank, n, root) : binomialNode(rank, n, root);
  if (rank == root) {
    p.setPeers(nullptr, 0, t.children, t.nChildren);
    p.copySend(0, 0, count);
  } else {
    treeDown(p, t, 0, count);
  }
}

// All-reduce over the double binary tree. Each round gives each tree half of at most
// `chunkElems` elements; a link carries at most one chunk of each tree per direction and
// round, so rounds fit the links whatever the order ranks reach them in. Ranks at different
// depths work on different trees and rounds at once, so both trees' links stay busy.
template <class Prims>
GYRE_HD void doubleTreeAllReduce(Prims& p, int rank, int n, size_t count, size_t chunkElems) {
  if (n == 1) {
    p.localCopy(0, 0, count);
    return;
  }
  const TreeNode a = doubleTreeNode(rank, n, 0), b = doubleTreeNode(rank, n, 1);
  const size_t half = chunkElems / 2 > 0 ? chunkElems / 2 : 1;
  for (size_t base = 0; base < count; base += 2 * half) {
    const size_t part = min_(2 * half, count - base);
    const size_t aLen = divUp(part, 2), bLen = part - aLen;
    // Tree a's pass, then tree b's: every link then carries its pieces in the order both
    // ends handle them, even where a root sends down while the other tree still goes up.
    treeUp(p, a, base, aLen, /*down=*/true);
    treeDown(p, a, base, aLen);
    treeUp(p, b, base + aLen, bLen, /*down=*/true);
    treeDown(p, b, base + aLen, bLen);
  }
}

// recv[r*count + i] on root = send of rank r [i]: every rank sends its block straight to the
// root, which takes them in turn. Each block crosses one link once, where the chain
// (ringGather) forwards the blocks of the ranks before it: n(n-1)/2 block hops against n-1.
template <class Prims>
GYRE_HD void flatGather(Prims& p, int rank, int n, int root, size_t count) {
  if (rank != root) {
    p.setPeers(nullptr, 0, &root, 1);
    p.send(0, count);
    return;
  }
  p.localCopy(0, size_t(root) * count, count);
  for (int j = 1; j < n; ++j) {
    const int from = mod(root + j, n);
    p.setPeers(&from, 1, nullptr, 0);
    p.recv(size_t(from) * count, count);
  }
}

// recv[i] on rank r = send of root [r*count + i]: the root sends each block straight to its
// rank, in turn.
template <class Prims>
GYRE_HD void flatScatter(Prims& p, int rank, int n, int root, size_t count) {
  if (rank != root) {
    p.setPeers(&root, 1, nullptr, 0);
    p.recv(0, count);
    return;
  }
  for (int j = 1; j < n; ++j) {
    const int to = mod(root + j, n);
    p.setPeers(nullptr, 0, &to, 1);
    p.send(size_t(to) * count, count);
  }
  p.localCopy(size_t(root) * count, 0, count);
}

// The binomial tree of the scatter, in relative ranks v = rank - root (mod n):
// v's subtree holds v .. v + subtreeSize(v) - 1, its children are v + 1, v + 2, v + 4, ...
// below v's lowest set bit, the smallest first, so a subtree's blocks come in rank order one
// after the other. A link carries one message per block, relayed as it came; the sends to
// one peer leave together (holdSends): log2(n) sends on the root where the flat tree makes
// n - 1, the rest spread over the other ranks.
GYRE_HD inline int subtreeSize(int v, int n) {
  if (v == 0) return n;
  const int low = v & -v;
  return v + low < n ? low : n - v;
}

// recv[i] on rank r = send of root [r*count + i], down the binomial tree.
template <class Prims>
GYRE_HD void binomialScatter(Prims& p, int rank, int n, int root, size_t count) {
  const int v = mod(rank - root, n);
  if (n > 1 && count > 0) {
    p.holdSends(true);
    if (v == 0) {
      for (int c = 1; c < n; c <<= 1) {
        const int to = mod(c + root, n);
        p.setPeers(nullptr, 0, &to, 1);
        for (int b = c; b < c + subtreeSize(c, n); ++b)
          p.send(size_t(mod(b + root, n)) * count, count);
      }
    } else {
      const int parent = mod((v & (v - 1)) + root, n);
      p.setPeers(&parent, 1, nullptr, 0);
      p.recv(0, count);
      for (int c = v + 1; c < v + subtreeSize(v, n); c += c - v) {
        const int to = mod(c + root, n);
        p.setPeers(&parent, 1, &to, 1);
        for (int b = 0; b < subtreeSize(c, n); ++b) p.recvSend(count);
      }
    }
    p.holdSends(false);
  }
  if (v == 0) p.localCopy(size_t(root) * count, 0, count);  // a no-op in place
}

}  // namespace gyre::algo
