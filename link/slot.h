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
  uint32_t reserved2 = 0;
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

// The two counters of a host link (shm, tcp, rdma), each a futex-waitable word on its own
// cache line; device links keep theirs in GPU memory (link/device_link.h, DeviceCounters).
struct LinkCounters {
  WaitWord tail;  // slots the producer filled; written by the producer only
  WaitWord head;  // slots the consumer released; written by the consumer only
};

}  // namespace gyre
