#include "transport/rdma/verbs.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <openssl/rand.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "base/log.h"
#include "base/status.h"

namespace gyre {

namespace {

constexpr size_t align64(size_t n) {
  return (n + 63) / 64 * 64;
}

bool isIpv4Mapped(const ibv_gid& gid) {
  static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return std::memcmp(gid.raw, prefix, sizeof prefix) == 0;
}

std::string gidText(const ibv_gid& gid) {
  char text[INET6_ADDRSTRLEN] = {};
  inet_ntop(AF_INET6, gid.raw, text, sizeof text);
  return text;
}

int mtuBytes(ibv_mtu mtu) {
  return 128 << int(mtu);  // IBV_MTU_256 = 1
}

// The GID to use on an Ethernet port: `wanted` if given, else the first RoCE v2 GID that
// holds an IPv4 address (routable, what every RoCE v2 fabric is set up for). -1: none.
int pickGid(ibv_context* context, uint8_t port, int tableLength, int wanted, std::string& whyNot) {
  for (int index = wanted >= 0 ? wanted : 0; index < tableLength; ++index) {
    ibv_gid_entry entry{};
    if (ibv_query_gid_ex(context, port, uint32_t(index), &entry, 0) != 0) {
      if (wanted >= 0) {
        whyNot = "GID index " + std::to_string(wanted) + " (GYRE_IB_GID_INDEX) is empty";
        return -1;
      }
      continue;
    }
    if (wanted >= 0) return index;
    ibv_gid gid;
    std::memcpy(gid.raw, entry.gid.raw, sizeof gid.raw);
    if (entry.gid_type == IBV_GID_TYPE_ROCE_V2 && isIpv4Mapped(gid)) return index;
  }
  whyNot = wanted >= 0 ? "GID index " + std::to_string(wanted) + " (GYRE_IB_GID_INDEX) is past " +
                             "the table's " + std::to_string(tableLength) + " entries"
                       : "no RoCE v2 GID with an IPv4 address (set GYRE_IB_GID_INDEX)";
  return -1;
}

}  // namespace

RdmaDevice::~RdmaDevice() {
  for (auto& [id, region] : user_) ibv_dereg_mr(region.mr);
  if (pd) ibv_dealloc_pd(pd);
  if (context) ibv_close_device(context);
}

uint64_t RdmaDevice::registerUser(const void* p, size_t bytes, const DmabufRange* dmabuf) {
  const auto begin = reinterpret_cast<uintptr_t>(p);
  std::lock_guard lock(userMutex_);
  auto it = user_.find(begin);
  if (it != user_.end() && it->second.end == begin + bytes) {
    ++it->second.holders;
    return begin;
  }
  // The flags as an int: ibv_reg_mr's macro masks them with a flag of another enum (an
  // enum-enum operation, deprecated in C++20).
  ibv_mr* mr = dmabuf ? ibv_reg_dmabuf_mr(pd, dmabuf->offset, bytes, begin, dmabuf->fd,
                                          IBV_ACCESS_LOCAL_WRITE)
                      : ibv_reg_mr(pd, const_cast<void*>(p), bytes, int(IBV_ACCESS_LOCAL_WRITE));
  if (!mr) {
    fail(Code::system_error, "rdma on " + name + ": cannot register " + std::to_string(bytes) +
                                 " bytes of " +
                                 (dmabuf ? "dma-buf memory: " + errnoText(errno)
                                         : "user memory: " + errnoText(errno) +
                                               " (locked memory is limited by ulimit -l)"));
  }
  if (it == user_.end()) {
    user_[begin] = {begin + bytes, mr, 1};
    return begin;
  }
  GYRE_LOG(info, "rdma on " + name + ": the buffer registered at " + pointerText(p) + " (" +
                     std::to_string(it->second.end - begin) + " bytes) is registered again with " +
                     std::to_string(bytes) + " bytes: the old region is dropped");
  ibv_dereg_mr(it->second.mr);
  it->second = {begin + bytes, mr, it->second.holders + 1};
  return begin;
}

void RdmaDevice::deregisterUser(uint64_t id) {
  std::lock_guard lock(userMutex_);
  auto it = user_.find(static_cast<uintptr_t>(id));
  if (it == user_.end() || --it->second.holders > 0) return;
  ibv_dereg_mr(it->second.mr);
  user_.erase(it);
}

bool RdmaDevice::userKey(const void* p, size_t bytes, uint32_t& lkey) const {
  const auto begin = reinterpret_cast<uintptr_t>(p);
  std::lock_guard lock(userMutex_);
  // Regions may nest or overlap; the closest start at or below p is the likely cover.
  for (auto it = user_.upper_bound(begin); it != user_.begin();) {
    --it;
    if (begin + bytes <= it->second.end) {
      lkey = it->second.mr->lkey;
      return true;
    }
  }
  return false;
}

std::string RdmaDevice::describe() const {
  std::string text = name + ", port " + std::to_string(port);
  text += ethernet ? ", RoCE GID " + std::to_string(gidIndex) + " (" + gidText(gid) + ")"
                   : ", LID " + std::to_string(lid);
  return text + ", MTU " + std::to_string(mtuBytes(activeMtu));
}

std::shared_ptr<RdmaDevice> openRdmaDevice(const std::string& hca, int gidIndex,
                                           std::string& whyNot) {
  std::string wantedName = hca;
  int wantedPort = 0;
  if (const auto colon = hca.find(':'); colon != std::string::npos) {
    wantedName = hca.substr(0, colon);
    wantedPort = std::atoi(hca.c_str() + colon + 1);
  }
  int count = 0;
  ibv_device** list = ibv_get_device_list(&count);
  if (!list) {
    whyNot = "no RDMA devices (" + errnoText(errno) + ")";
    return nullptr;
  }
  struct FreeList {
    ibv_device** list;
    ~FreeList() { ibv_free_device_list(list); }
  } freeList{list};
  if (count == 0) {
    whyNot = "no RDMA devices";
    return nullptr;
  }
  std::vector<std::string> reasons;
  for (int i = 0; i < count; ++i) {
    const std::string name = ibv_get_device_name(list[i]);
    if (!wantedName.empty() && name != wantedName) continue;
    auto device = std::make_shared<RdmaDevice>();
    device->name = name;
    device->context = ibv_open_device(list[i]);
    if (!device->context) {
      reasons.push_back(name + ": cannot open (" + errnoText(errno) + ")");
      continue;
    }
    ibv_device_attr attr{};
    if (ibv_query_device(device->context, &attr) != 0) {
      reasons.push_back(name + ": cannot query it");
      continue;
    }
    for (int port = 1; port <= attr.phys_port_cnt; ++port) {
      if (wantedPort != 0 && port != wantedPort) continue;
      ibv_port_attr portAttr{};
      if (ibv_query_port(device->context, uint8_t(port), &portAttr) != 0) continue;
      const std::string where = name + " port " + std::to_string(port);
      if (portAttr.state != IBV_PORT_ACTIVE) {
        reasons.push_back(where + " is not ACTIVE");
        continue;
      }
      device->port = uint8_t(port);
      device->ethernet = portAttr.link_layer == IBV_LINK_LAYER_ETHERNET;
      device->lid = portAttr.lid;
      device->activeMtu = portAttr.active_mtu;
      std::string gidWhyNot;
      const int wanted = device->ethernet ? pickGid(device->context, uint8_t(port),
                                                    portAttr.gid_tbl_len, gidIndex, gidWhyNot)
                                          : std::max(gidIndex, 0);
      if (wanted < 0) {
        reasons.push_back(where + ": " + gidWhyNot);
        continue;
      }
      device->gidIndex = wanted;
      if (ibv_query_gid(device->context, uint8_t(port), wanted, &device->gid) != 0) {
        reasons.push_back(where + ": cannot read GID " + std::to_string(wanted));
        continue;
      }
      device->pd = ibv_alloc_pd(device->context);
      if (!device->pd) {
        reasons.push_back(name + ": cannot allocate a protection domain");
        break;
      }
      return device;
    }
  }
  if (reasons.empty()) {
    whyNot = wantedName.empty() ? "no device has a usable port"
                                : "no device named '" + hca + "' (GYRE_IB_HCA)";
  } else {
    whyNot.clear();
    for (const auto& r : reasons) whyNot += (whyNot.empty() ? "" : "; ") + r;
  }
  return nullptr;
}

RdmaEndpoint::RdmaEndpoint(std::shared_ptr<RdmaDevice> device, uint32_t nSlots, size_t slotBytes)
    : device_(std::move(device)), nSlots_(nSlots), slotBytes_(slotBytes) {
  const std::string who = "rdma on " + device_->name + ": ";
  stride_ = kDataOffset + align64(slotBytes);
  const size_t at = 2 * size_t(nSlots) * stride_;
  base_ = static_cast<std::byte*>(std::aligned_alloc(4096, (at + 4095) / 4096 * 4096));
  if (!base_) fail(Code::system_error, who + "out of memory for the slots");
  std::memset(base_, 0, at);
  struct Undo {
    RdmaEndpoint* self;
    bool done = false;
    ~Undo() {
      if (!done) self->release();
    }
  } undo{this};
  mr_ = ibv_reg_mr(device_->pd, base_, at, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (!mr_) fail(Code::system_error, who + "cannot register the slots: " + errnoText(errno));
  channel_ = ibv_create_comp_channel(device_->context);
  if (!channel_) fail(Code::system_error, who + "cannot create a completion channel");
  const int flags = fcntl(channel_->fd, F_GETFL);
  if (flags < 0 || fcntl(channel_->fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    fail(Code::system_error, who + "cannot make the completion channel non-blocking");
  }
  // Sends: a payload write and a header write per slot, and a credit per slot received.
  maxSendWr_ = 4 * nSlots + 8;
  maxRecvWr_ = 2 * nSlots + 8;
  cq_ = ibv_create_cq(device_->context, int(maxSendWr_ + maxRecvWr_), nullptr, channel_, 0);
  if (!cq_) fail(Code::system_error, who + "cannot create a completion queue: " + errnoText(errno));
  ibv_qp_init_attr init{};
  init.send_cq = cq_;
  init.recv_cq = cq_;
  init.qp_type = IBV_QPT_RC;
  init.cap.max_send_wr = maxSendWr_;
  init.cap.max_recv_wr = maxRecvWr_;
  init.cap.max_send_sge = 2;  // a slot's header, and its payload from user memory
  init.cap.max_recv_sge = 1;
  // Small slots go inline (no DMA read of our memory); devices differ in how much they take.
  for (uint32_t inlineBytes : {256u, 64u, 0u}) {
    init.cap.max_inline_data = inlineBytes;
    if ((qp_ = ibv_create_qp(device_->pd, &init))) break;
  }
  if (!qp_) fail(Code::system_error, who + "cannot create a queue pair: " + errnoText(errno));
  maxInline_ = init.cap.max_inline_data;
  RAND_bytes(reinterpret_cast<unsigned char*>(&psn_), sizeof psn_);
  psn_ &= 0xffffff;
  undo.done = true;
}

RdmaEndpoint::~RdmaEndpoint() {
  release();
}

void RdmaEndpoint::release() {
  if (qp_) ibv_destroy_qp(qp_);
  if (cq_) ibv_destroy_cq(cq_);
  if (channel_) ibv_destroy_comp_channel(channel_);
  if (mr_) ibv_dereg_mr(mr_);
  std::free(base_);
  qp_ = nullptr;
  cq_ = nullptr;
  channel_ = nullptr;
  mr_ = nullptr;
  base_ = nullptr;
}

RdmaAddress RdmaEndpoint::address() const {
  RdmaAddress a;
  a.qpn = qp_->qp_num;
  a.psn = psn_;
  std::memcpy(a.gid, device_->gid.raw, sizeof a.gid);
  a.lid = device_->lid;
  a.mtu = uint8_t(device_->activeMtu);
  a.ethernet = device_->ethernet ? 1 : 0;
  a.rkey = mr_->rkey;
  a.ring = reinterpret_cast<uintptr_t>(recvRing());
  a.stride = stride_;
  a.nSlots = nSlots_;
  a.slotBytes = uint32_t(slotBytes_);
  return a;
}

void RdmaEndpoint::connect(const RdmaAddress& peer) {
  const std::string who = "rdma on " + device_->name + ": ";
  auto modify = [&](ibv_qp_attr& attr, int mask, const char* state) {
    if (const int rc = ibv_modify_qp(qp_, &attr, mask); rc != 0) {
      fail(Code::system_error,
           who + "cannot move the queue pair to " + state + ": " + errnoText(rc));
    }
  };
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_INIT;
  attr.pkey_index = 0;
  attr.port_num = device_->port;
  attr.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
  modify(attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, "INIT");
  // Every slot header and every credit the peer sends consumes one (they carry no payload),
  // and the connection reposts one per completion; all must be there before RTR.
  for (uint32_t i = 0; i < maxRecvWr_; ++i) {
    ibv_recv_wr wr{};
    ibv_recv_wr* bad = nullptr;
    if (const int rc = ibv_post_recv(qp_, &wr, &bad); rc != 0) {
      fail(Code::system_error, who + "cannot post receive requests: " + errnoText(rc));
    }
  }

  attr = {};
  attr.qp_state = IBV_QPS_RTR;
  attr.path_mtu = std::min(device_->activeMtu, ibv_mtu(peer.mtu));
  attr.dest_qp_num = peer.qpn;
  attr.rq_psn = peer.psn;
  attr.max_dest_rd_atomic = 1;
  attr.min_rnr_timer = 12;  // 0.64 ms
  attr.ah_attr.port_num = device_->port;
  attr.ah_attr.dlid = peer.lid;
  if (device_->ethernet) {
    attr.ah_attr.is_global = 1;
    std::memcpy(attr.ah_attr.grh.dgid.raw, peer.gid, sizeof peer.gid);
    attr.ah_attr.grh.sgid_index = uint8_t(device_->gidIndex);
    attr.ah_attr.grh.hop_limit = 64;
  }
  modify(attr,
         IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
             IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER,
         "RTR");

  attr = {};
  attr.qp_state = IBV_QPS_RTS;
  attr.sq_psn = psn_;
  attr.timeout = 14;   // 4.096 µs · 2^14 = 67 ms per try
  attr.retry_cnt = 7;  // a peer that vanished: retry-exceeded after about half a second
  attr.rnr_retry = 7;  // receive requests are reposted as they complete: never give up on RNR
  attr.max_rd_atomic = 1;
  modify(attr,
         IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
             IBV_QP_MAX_QP_RD_ATOMIC,
         "RTS");
}

}  // namespace gyre
