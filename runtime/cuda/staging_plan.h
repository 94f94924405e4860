// Where a stream-ordered call's buffers go in pinned staging, what is copied each way, and the
// pieces large elementwise calls run in (docs/cuda.md). Pure arithmetic, so that it is tested
// on machines without a GPU; runtime/cuda/stream_calls.cc carries it out.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "runtime/core/communicator.h"

namespace gyre {

struct StagingPlan {
  // Overlapping buffers (in place calls) share one region, so that the host call sees them
  // overlap exactly as they do on the device.
  struct Region {
    uintptr_t lo = 0, hi = 0;  // user addresses
    bool copyIn = false, copyOut = false;
    size_t offset = 0;  // in the staging block; offset % 256 == lo % 256
  };
  std::vector<Region> regions;  // by address
  size_t bytes = 0;             // the staging block's size
  // Per buffer, its offset in the staging block; kNone for a null, empty or unstaged buffer
  // (the host call gets the user's pointer).
  std::vector<size_t> bufferOffsets;
  static constexpr size_t kNone = SIZE_MAX;

  // Elementwise calls: `pieces` host calls of `pieceElems` elements (the last may be shorter).
  size_t pieces = 1, pieceElems = 0, elemBytes = 0;
  // Bytes [lo, hi) of piece k within a region of `regionBytes` (all of it when in one piece).
  std::pair<size_t, size_t> pieceBytes(size_t k, size_t regionBytes) const;
};

// Pieces of at least 4 MiB, at most 8 per call, from 8 MiB up.
inline constexpr size_t kMinPieceBytes = size_t(4) << 20;
inline constexpr size_t kMaxPieces = 8;

// Whether every two buffers are either the same bytes (in place) or disjoint.
bool piecewise(const std::vector<StagedBuffer>& buffers);

// `elems` elements of `elemBytes` in every buffer for elementwise calls (all-reduce, broadcast,
// reduce), 0 otherwise. Every rank cuts the same pieces: they depend on the count alone.
StagingPlan planStaging(const std::vector<StagedBuffer>& buffers, size_t elems, size_t elemBytes);

}  // namespace gyre
