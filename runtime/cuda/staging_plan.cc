#include "runtime/cuda/staging_plan.h"

#include <algorithm>

#include "runtime/core/communicator_impl.h"

namespace gyre {

bool piecewise(const std::vector<StagedBuffer>& buffers) {
  for (size_t i = 0; i < buffers.size(); ++i) {
    for (size_t j = i + 1; j < buffers.size(); ++j) {
      const auto &x = buffers[i], &y = buffers[j];
      const bool same = x.p == y.p && x.bytes == y.bytes;
      if (!same && x.p && y.p && overlaps(x.p, x.bytes, y.p, y.bytes)) return false;
    }
  }
  return true;
}

std::pair<size_t, size_t> StagingPlan::pieceBytes(size_t k, size_t regionBytes) const {
  if (pieces == 1) return {0, regionBytes};
  const size_t lo = std::min(regionBytes, k * pieceElems * elemBytes);
  return {lo, std::min(regionBytes, lo + pieceElems * elemBytes)};
}

StagingPlan planStaging(const std::vector<StagedBuffer>& buffers, size_t elems, size_t elemBytes) {
  StagingPlan plan;
  std::vector<StagingPlan::Region> regions;
  const auto staged = [](const StagedBuffer& b) {
    return b.p && b.bytes && b.use != StagedBuffer::unstaged;
  };
  for (const auto& b : buffers) {
    if (!staged(b)) continue;
    const auto lo = reinterpret_cast<uintptr_t>(b.p);
    regions.push_back({lo, lo + b.bytes, b.use != StagedBuffer::out, b.use != StagedBuffer::in});
  }
  std::sort(regions.begin(), regions.end(), [](auto& x, auto& y) { return x.lo < y.lo; });
  for (const auto& r : regions) {
    if (!plan.regions.empty() && r.lo < plan.regions.back().hi) {
      auto& m = plan.regions.back();
      // Bytes of an `out` buffer that another buffer also covers may be read: copy in.
      m.copyIn = m.copyIn || r.copyIn || r.copyOut;
      m.copyOut = m.copyOut || r.copyOut;
      m.hi = std::max(m.hi, r.hi);
    } else {
      plan.regions.push_back(r);
    }
  }
  for (auto& r : plan.regions) {
    // 256-byte blocks, keeping each buffer's offset within them (CPU kernels vectorise alike).
    r.offset = (plan.bytes + 255) / 256 * 256 + r.lo % 256;
    plan.bytes = r.offset + (r.hi - r.lo);
  }
  for (const auto& b : buffers) {
    if (!staged(b)) {
      plan.bufferOffsets.push_back(StagingPlan::kNone);
      continue;
    }
    const auto p = reinterpret_cast<uintptr_t>(b.p);
    const auto& r = *std::find_if(plan.regions.begin(), plan.regions.end(),
                                  [&](const auto& x) { return p >= x.lo && p < x.hi; });
    plan.bufferOffsets.push_back(r.offset + (p - r.lo));
  }
  plan.pieceElems = elems;
  plan.elemBytes = elemBytes;
  if (elems && elemBytes && elems * elemBytes >= 2 * kMinPieceBytes && piecewise(buffers)) {
    plan.pieces = std::min<size_t>(kMaxPieces, elems * elemBytes / kMinPieceBytes);
    plan.pieceElems = (elems + plan.pieces - 1) / plan.pieces;
    plan.pieces = (elems + plan.pieceElems - 1) / plan.pieceElems;
  }
  return plan;
}

}  // namespace gyre
