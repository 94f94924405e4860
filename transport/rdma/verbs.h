// libibverbs resources for the rdma transport: the device (context, protection domain, the
// port and GID it uses) and one endpoint per connection (registered slot memory, completion
// queue and channel, RC queue pair) with the state changes that connect it to a peer's.
#pragma once

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace gyre {

// Memory the CPU cannot map but the adapter may reach (GPU memory, GPUDirect RDMA), offered
// as a dma-buf: the region starts `offset` bytes into the buffer behind `fd`.
struct DmabufRange {
  int fd = -1;
  uint64_t offset = 0;
};

struct RdmaDevice {
  ibv_context* context = nullptr;
  ibv_pd* pd = nullptr;
  std::string name;
  uint8_t port = 1;
  bool ethernet = false;  // RoCE: addressed by GID; InfiniBand: by LID
  int gidIndex = 0;
  ibv_gid gid{};
  uint16_t lid = 0;
  ibv_mtu activeMtu = IBV_MTU_1024;

  RdmaDevice() = default;
  RdmaDevice(const RdmaDevice&) = delete;
  RdmaDevice& operator=(const RdmaDevice&) = delete;
  ~RdmaDevice();

  // "rxe0, port 1, RoCE v2 GID 1 (::ffff:10.0.2.15), MTU 1024" for logs.
  std::string describe() const;

  // User buffers registered for the direct path (gyreCommRegister), one memory region per
  // start address: registering a start again at the same size shares its region; at another
  // size the buffer was reused, so the old region is dropped and the new one replaces it
  // (sends from the old extent then copy). registerUser() pins [p, p + bytes) and returns the
  // id deregisterUser() takes (throws Failure when the adapter refuses); the region goes when
  // its last holder deregisters. userKey() finds the lkey of a region covering [p, p + bytes).
  // With `dmabuf` the pages are the dma-buf's (ibv_reg_dmabuf_mr), addressed as [p, p + bytes).
  uint64_t registerUser(const void* p, size_t bytes, const DmabufRange* dmabuf = nullptr);
  void deregisterUser(uint64_t id);
  bool userKey(const void* p, size_t bytes, uint32_t& lkey) const;

 private:
  struct UserRegion {
    uintptr_t end = 0;
    ibv_mr* mr = nullptr;
    uint32_t holders = 0;
  };
  mutable std::mutex userMutex_;
  std::map<uintptr_t, UserRegion> user_;  // by start address
};

// Opens the device to use: `hca` ("" = the first device with an ACTIVE port; "name" or
// "name:port"), `gidIndex` (-1 = the first RoCE v2 GID that holds an IPv4 address). Returns
// null and says why in `whyNot` when nothing usable is found.
std::shared_ptr<RdmaDevice> openRdmaDevice(const std::string& hca, int gidIndex,
                                           std::string& whyNot);

// What one side of a connection tells the other (docs/protocol.md).
struct RdmaAddress {
  uint32_t qpn = 0;
  uint32_t psn = 0;
  uint8_t gid[16] = {};
  uint16_t lid = 0;
  uint8_t mtu = 0;  // ibv_mtu
  uint8_t ethernet = 0;
  uint32_t rkey = 0;
  uint64_t ring = 0;  // the receive ring in the sender's peer's memory (RdmaEndpoint layout)
  uint64_t stride = 0;
  uint32_t nSlots = 0;
  uint32_t slotBytes = 0;
};
static_assert(sizeof(RdmaAddress) == 56, "wire format");

// One connection's verbs objects. Memory: the send ring, then the receive ring, in one
// registration the peer may write into. In a ring each slot takes `stride` bytes: 32 bytes of
// padding, its 32-byte header, then its data (64-byte aligned), so that header and payload
// are contiguous and one write moves both.
class RdmaEndpoint {
 public:
  // Throws Failure(system_error) naming what could not be created.
  RdmaEndpoint(std::shared_ptr<RdmaDevice> device, uint32_t nSlots, size_t slotBytes);
  ~RdmaEndpoint();
  RdmaEndpoint(const RdmaEndpoint&) = delete;
  RdmaEndpoint& operator=(const RdmaEndpoint&) = delete;

  RdmaAddress address() const;
  // RESET -> INIT, posts every receive request, -> RTR -> RTS towards `peer`; throws Failure
  // when the device refuses.
  void connect(const RdmaAddress& peer);

  static constexpr size_t kHeaderOffset = 32;
  static constexpr size_t kDataOffset = 64;
  size_t stride() const { return stride_; }
  std::byte* sendRing() const { return base_; }
  std::byte* recvRing() const { return base_ + size_t(nSlots_) * stride_; }
  uint32_t lkey() const { return mr_->lkey; }
  ibv_qp* qp() const { return qp_; }
  ibv_cq* cq() const { return cq_; }
  ibv_comp_channel* channel() const { return channel_; }
  uint32_t maxSendWr() const { return maxSendWr_; }
  uint32_t maxInline() const { return maxInline_; }
  const RdmaDevice& device() const { return *device_; }

 private:
  void release();

  std::shared_ptr<RdmaDevice> device_;
  const uint32_t nSlots_;
  const size_t slotBytes_;
  size_t stride_ = 0;
  std::byte* base_ = nullptr;
  ibv_mr* mr_ = nullptr;
  ibv_comp_channel* channel_ = nullptr;
  ibv_cq* cq_ = nullptr;
  ibv_qp* qp_ = nullptr;
  uint32_t psn_ = 0;
  uint32_t maxSendWr_ = 0;
  uint32_t maxRecvWr_ = 0;
  uint32_t maxInline_ = 0;
};

}  // namespace gyre
