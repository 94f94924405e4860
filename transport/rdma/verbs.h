// libibverbs resources for the rdma transport: the device (context, protection domain, the
// port and GID it uses) and one endpoint per connection (registered slot memory, completion
// queue and channel, RC queue pair) with the state changes that connect it to a peer's.
#pragma once

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace gyre {

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
  uint64_t metas = 0;  // the receive ring's slot headers and slots, in the peer's memory
  uint64_t data = 0;
  uint32_t nSlots = 0;
  uint32_t slotBytes = 0;
};
static_assert(sizeof(RdmaAddress) == 56, "wire format");

// One connection's verbs objects. Memory layout: send metas, send slots, recv metas, recv
// slots, each 64-byte aligned, all in one registration the peer may write into.
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

  std::byte* sendMetas() const { return base_ + layout_.sendMetas; }
  std::byte* sendData() const { return base_ + layout_.sendData; }
  std::byte* recvMetas() const { return base_ + layout_.recvMetas; }
  std::byte* recvData() const { return base_ + layout_.recvData; }
  uint32_t lkey() const { return mr_->lkey; }
  ibv_qp* qp() const { return qp_; }
  ibv_cq* cq() const { return cq_; }
  ibv_comp_channel* channel() const { return channel_; }
  uint32_t maxSendWr() const { return maxSendWr_; }
  uint32_t maxInline() const { return maxInline_; }
  const RdmaDevice& device() const { return *device_; }

 private:
  struct Layout {
    size_t sendMetas = 0, sendData = 0, recvMetas = 0, recvData = 0, total = 0;
  };
  void release();

  std::shared_ptr<RdmaDevice> device_;
  const uint32_t nSlots_;
  const size_t slotBytes_;
  Layout layout_;
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
