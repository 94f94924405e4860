// Links that live in GPU memory, for the cuda_ipc transport (the slot header is link/slot.h's,
// as on the host): one direction of one (peer,
// channel) pair is a ring of nSlots slots in the RECEIVER's device memory, plus its header
// words and two counters. The sender writes slots, headers and `tail` through a CUDA IPC
// mapping (or directly, for ranks of one process); the receiver writes `head`. Both sides
// read the counters to learn their positions, so positions survive from one kernel to the
// next with no host involvement. Plain data, C++17: compiled by nvcc and by the host compiler
// (the host runs the same protocol in tests, with host memory standing in for device memory).
#pragma once

#include <cstddef>
#include <cstdint>

#include "link/slot.h"

namespace gyre {

// Each counter on its own 128-byte line: one is written from the other side.
struct DeviceCounters {
  uint64_t tail;  // slots the sender filled (written by the sender only)
  uint64_t pad0[15];
  uint64_t head;  // slots the receiver released (written by the receiver only)
  uint64_t pad1[15];
};
static_assert(sizeof(DeviceCounters) == 256, "DeviceCounters layout");

struct DeviceLink {
  DeviceCounters* counters;  // null: no such link
  SlotMeta* metas;
  unsigned char* data;
  uint32_t nSlots;
  uint32_t slotBytes;
};

// Where each (receiver, sender, channel) ring lies in the receiver's region. Channel 0 links
// every pair (trees, chains and pairwise exchanges talk to any rank); channels 1.. link only
// ring neighbours, which is all the multi-channel ring collectives use. A pure function of the
// communicator's shape: both ends compute the same offsets.
struct DeviceLinkLayout {
  int nranks;
  int channels;
  uint32_t nSlots;
  uint32_t slotBytes;

  // Bytes of one ring (counters, headers, slots), 256-byte aligned.
  size_t ringBytes() const {
    const size_t bytes =
        sizeof(DeviceCounters) + size_t(nSlots) * sizeof(SlotMeta) + size_t(nSlots) * slotBytes;
    return (bytes + 255) / 256 * 256;
  }
  bool linked(int receiver, int sender, int channel) const {
    if (receiver == sender || receiver < 0 || sender < 0 || receiver >= nranks ||
        sender >= nranks || channel < 0 || channel >= channels) {
      return false;
    }
    if (channel == 0) return true;
    const int prev = (receiver + nranks - 1) % nranks, next = (receiver + 1) % nranks;
    return sender == prev || sender == next;
  }
  // Rings in one receiver's region: channel 0 from every other rank, then per further
  // channel from the ring neighbours (one when n = 2).
  int ringsPerRank() const {
    if (nranks < 2) return 0;
    const int neighbours = nranks == 2 ? 1 : 2;
    return (nranks - 1) + (channels - 1) * neighbours;
  }
  size_t regionBytes() const { return size_t(ringsPerRank()) * ringBytes(); }
  // Offset of the ring from `sender` on `channel` in `receiver`'s region; only for linked().
  size_t offset(int receiver, int sender, int channel) const {
    if (channel == 0) return size_t(sender < receiver ? sender : sender - 1) * ringBytes();
    const int neighbours = nranks == 2 ? 1 : 2;
    const int prev = (receiver + nranks - 1) % nranks;
    const int which = (neighbours == 2 && sender != prev) ? 1 : 0;
    return size_t((nranks - 1) + (channel - 1) * neighbours + which) * ringBytes();
  }
  // The link over the ring at `base + offset(...)`.
  DeviceLink at(unsigned char* regionBase, int receiver, int sender, int channel) const {
    unsigned char* base = regionBase + offset(receiver, sender, channel);
    DeviceLink link;
    link.counters = reinterpret_cast<DeviceCounters*>(base);
    link.metas = reinterpret_cast<SlotMeta*>(base + sizeof(DeviceCounters));
    link.data = base + sizeof(DeviceCounters) + size_t(nSlots) * sizeof(SlotMeta);
    link.nSlots = nSlots;
    link.slotBytes = slotBytes;
    return link;
  }
};

// A rank's view of all its links: send[channel * nranks + peer] lies in the peer's region,
// recv[channel * nranks + peer] in its own. Unlinked pairs have null counters.
struct DeviceLinkTable {
  int nranks;
  int channels;
  const DeviceLink* send;
  const DeviceLink* recv;
};

// What a kernel that could not finish reports: the first failure wins (code from 0).
enum class DeviceFailureCode : uint32_t {
  none = 0,
  timeout = 1,    // a peer did not move within the deadline
  aborted = 2,    // the host raised the abort word
  mismatch = 3,   // a slot's header names another collective or size
  no_link = 4,    // an algorithm named a peer with no link on this channel (a bug)
  bad_peers = 5,  // more peers than a primitive supports (a bug)
};
enum class DeviceWaitKind : uint32_t { data_from = 0, space_at = 1 };

struct DeviceFailure {
  uint32_t code;  // DeviceFailureCode
  int32_t peer;
  int32_t channel;
  uint32_t waitKind;     // DeviceWaitKind, for timeouts
  uint32_t wantedBytes;  // for mismatches: what this rank expected
  uint32_t reserved;
  SlotMeta seen;  // for mismatches: the header that arrived
  SlotMeta call;  // the collective this rank was in
};

// Host-written words the kernels read (mapped pinned memory).
struct DeviceControl {
  uint32_t abort;  // non-zero: every waiting kernel gives up
  uint32_t reserved[31];
};

}  // namespace gyre
