// The primitives vocabulary every algorithm speaks. An executor (HostPrims on the calling
// thread, a recording fake in tests, device prims in a CUDA kernel) implements:
//
//   send(inOff, n)                          input            -> next
//   recv(outOff, n)                         prev             -> output
//   copySend(inOff, outOff, n)              input            -> output, next
//   recvCopySend(outOff, n)                 prev             -> output, next
//   recvReduceSend(inOff, n)                prev (+) input   -> next
//   recvReduceCopy(inOff, outOff, n, fin)   prev (+) input   -> output
//   recvReduceCopySend(inOff, outOff, n, fin) prev (+) input -> output, next
//   localCopy(inOff, outOff, n)             input            -> output
//   sendMarker() / recvMarker()             an empty slot: carries only the op descriptor
//
// Offsets and n count elements of the user's input and output buffers. `fin` marks the step
// that completes a reduction (avg divides there). Executors slice each call into link slots;
// both ends of a link see the same calls, so they slice alike.
#pragma once

#include "algorithms/common.h"
#include "algorithms/ring.h"
