// The memory side of the cuda_ipc transport: a rank's region of device memory that holds the
// rings its peers write (DeviceLinkLayout), described in a fixed-size record that ranks
// exchange, and the peers' regions mapped into this process (CUDA IPC between processes, the
// pointer itself between ranks of one process, peer access between devices). Knows nothing of
// collectives: runtime/cuda/device_links.cc exchanges the records and builds the link tables.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace gyre {

// What a rank publishes about its region; a wire format between ranks of one host.
struct IpcRegionRecord {
  char magic[4];
  uint32_t ok;  // 0: no region (see `why`)
  int32_t pid;
  int32_t device;  // ordinal in the publisher's process, for messages
  unsigned char uuid[16];
  unsigned char handle[64];  // cudaIpcMemHandle_t
  uint64_t address;          // for ranks of the same process
  uint64_t bytes;
  uint64_t layout;  // nSlots, slotBytes and channels: every rank must agree
  char why[104];
};
static_assert(sizeof(IpcRegionRecord) == 224, "IpcRegionRecord is a wire format");

// A zeroed region of device memory on the current device, exportable by CUDA IPC.
class IpcRegion {
 public:
  IpcRegion() = default;
  ~IpcRegion();
  IpcRegion(const IpcRegion&) = delete;
  IpcRegion& operator=(const IpcRegion&) = delete;

  // Fills `record`; on failure record.ok = 0 and record.why says why (nothing thrown).
  void create(size_t bytes, uint64_t layout, IpcRegionRecord& record);
  unsigned char* base() const { return base_; }

 private:
  unsigned char* base_ = nullptr;
};

// A peer's region mapped into this process.
class IpcMapping {
 public:
  IpcMapping() = default;
  ~IpcMapping();
  IpcMapping(const IpcMapping&) = delete;
  IpcMapping& operator=(const IpcMapping&) = delete;

  // Maps `peer`'s region; returns "" or why it cannot be reached from the current device.
  std::string open(const IpcRegionRecord& self, const IpcRegionRecord& peer);
  unsigned char* base() const { return base_; }

 private:
  unsigned char* base_ = nullptr;
  bool imported_ = false;  // opened with cudaIpcOpenMemHandle (closed at destruction)
};

}  // namespace gyre
