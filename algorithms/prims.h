// The primitives vocabulary every algorithm speaks. An executor (HostPrims on the calling
// thread, a recording fake in tests, device prims in a CUDA kernel) implements:
//
//   setPeers(recv, nRecv, send, nSend)      the ranks the next calls receive from / send to
//   useOutputAsInput()                      later input offsets address the output buffer
//
//   send(inOff, n)                          input            -> next
//   recv(outOff, n)                         prev             -> output
//   recvSend(n)                             prev             -> next
//   copySend(inOff, outOff, n)              input            -> output, next
//   recvCopySend(outOff, n)                 prev             -> output, next
//   recvReduceSend(inOff, n)                prev (+) input   -> next
//   recvReduceCopy(inOff, outOff, n, fin)   prev (+) input   -> output
//   recvReduceCopySend(inOff, outOff, n, fin) prev (+) input -> output, next
//   localCopy(inOff, outOff, n)             input            -> output
//   sendMarker() / recvMarker()             an empty slot: carries only the op descriptor
//   holdSends(hold)                         while held, sends to one peer may leave together
//                                           (a wait, or the release, sends them)
//
// "prev" is every recv peer: reductions fold in all of them (a tree node's children); plain
// receives take exactly one. "next" is every send peer: each gets the same data. Offsets and
// n count elements of the user's input and output buffers. `fin` marks the step that
// completes a reduction (avg divides there). Executors slice each call into link slots; both
// ends of a link see the same calls, so they slice alike.
//
// Algorithms: ring.h (ring and chains), tree.h (binomial, double binary tree, flat gather and
// scatter), doubling.h (recursive doubling, Bruck, dissemination), pairwise.h (all-to-all,
// send/recv), hierarchical.h (inside hosts, then across them).
#pragma once

#include "algorithms/common.h"
#include "algorithms/doubling.h"
#include "algorithms/hierarchical.h"
#include "algorithms/pairwise.h"
#include "algorithms/ring.h"
#include "algorithms/tree.h"
