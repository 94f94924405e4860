// The link contract's wire words, shared by every executor (host and device) and every
// transport: the descriptor of a collective, the 32-byte header each slot carries (so that a
// receiver compares what arrived with the call it is in), and a host link's counters. Plain data,
// C++17: compiled by the host compiler and by nvcc, written across processes (shared memory, CUDA
// IPC), over rdma and as the tcp frame header (little-endian hosts only).
#pragma once

#include <cstdint>

#include "base/hd.h"
#include "base/wait.h"
#include "gyre/types.h"

namespace gyre {

// Identifies one collective; every slot carries it and receivers compare it with their own.
struct OpDesc {
  uint64_t seq = 0;
  uint64_t count = 0;
  int32_t root = -1;
  Collective coll = Collective::all_reduce;
  DataType dtype = DataType::f32;
  RedOp op = RedOp::sum;
};

// Per-slot header.
struct SlotMeta {
  uint32_t bytes = 0;
  uint8_t coll = 0;
  uint8_t dtype = 0;
  uint8_t op = 0;
  uint8_t reserved = 0;
  int32_t root = 0;
  // Where the payload starts in its slot (or window data block): spreadOffset() where the sender
  // spreads payloads over shared memory, else 0.
  uint32_t offset = 0;
  uint64_t seq = 0;
  uint64_t count = 0;

  GYRE_HD void setOp(const OpDesc& d) {
    coll = uint8_t(d.coll);
    dtype = uint8_t(d.dtype);
    op = uint8_t(d.op);
    root = d.root;
    seq = d.seq;
    count = d.count;
  }
  // Same call (bytes aside).
  GYRE_HD bool sameOp(const SlotMeta& m) const {
    return coll == m.coll && dtype == m.dtype && op == m.op && root == m.root && seq == m.seq &&
           count == m.count;
  }
  GYRE_HD bool sameOp(const OpDesc& d) const {  // per received slot: no temporary
    return coll == uint8_t(d.coll) && dtype == uint8_t(d.dtype) && op == uint8_t(d.op) &&
           root == d.root && seq == d.seq && count == d.count;
  }
};
static_assert(sizeof(SlotMeta) == 32, "SlotMeta is a wire format");

// Spreading: a payload of shared memory that another CPU reads lands at a new place of its
// region (a slot, a window data block) each time the region comes round again, so a line
// written now was last written several rounds ago. By then both CPUs' private caches have let
// it go, and the writer takes it from the shared cache without first taking it back from the
// reader's (docs/tuning_spread.md: two ranks on cores close by, 16-128 KiB, 0.5-0.77 times the
// time). The smallest payload spread: below it a line's round trip, not its bytes, sets the time.
constexpr uint32_t kSpreadFromBytes = 8192;
// Where a payload of `bytes` starts in a region of `span` bytes on the region's `round`-th use:
// page-aligned places one after the other, 0 where fewer than two fit or below kSpreadFromBytes.
GYRE_HD inline uint32_t spreadOffset(uint64_t round, uint32_t bytes, uint64_t span) {
  const uint64_t step = (uint64_t(bytes) + 4095) / 4096 * 4096;
  const uint64_t places = bytes < kSpreadFromBytes ? 0 : span / step;
  return places < 2 ? 0 : uint32_t(round % places * step);
}

// The two counters of a host link (shm, tcp, rdma), each a futex-waitable word on its own
// cache line; device links keep theirs in GPU memory (link/device_link.h, DeviceCounters).
struct LinkCounters {
  WaitWord tail;  // slots the producer filled; written by the producer only
  WaitWord head;  // slots the consumer released; written by the consumer only
};

}  // namespace gyre
