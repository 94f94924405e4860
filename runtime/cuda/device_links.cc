#include "runtime/cuda/device_links.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "algorithms/device_collectives.h"
#include "base/log.h"
#include "link/link.h"
#include "runtime/core/communicator.h"
#include "runtime/cuda/cuda_staging.h"
#include "runtime/cuda/device_failure.h"
#include "transport/transport.h"

namespace gyre {

namespace {

uint64_t layoutKey(const DeviceLinkLayout& l) {
  return (uint64_t(l.nSlots) << 48) ^ (uint64_t(l.channels) << 40) ^ uint64_t(l.slotBytes);
}

// Why this rank cannot take part, before anything is allocated ("" if it can).
std::string localObstacle(const std::vector<PeerInfo>& peers, int rank) {
  for (const auto& p : peers) {
    if (p.hostId != peers[size_t(rank)].hostId) {
      return "rank " + std::to_string(p.rank) + " is on another host";
    }
  }
  return "";
}

}  // namespace

std::unique_ptr<DeviceLinks> DeviceLinks::setUp(Communicator& comm,
                                                const std::vector<PeerInfo>& peers,
                                                const CommConfig& config) {
  const int n = config.nranks, rank = config.rank;
  const std::string who = "rank " + std::to_string(rank);
  std::unique_ptr<DeviceLinks> links(new DeviceLinks());
  links->rank_ = rank;
  links->timeout_ = config.timeout;
  // Every block of every rank's kernel must be resident at once (they wait for each other),
  // even with all ranks on this one GPU: at most one block per multiprocessor per rank.
  int device = 0, multiprocessors = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, device) !=
          cudaSuccess) {
    cudaGetLastError();
    multiprocessors = n;
  }
  // Ranks on GPUs with different numbers of multiprocessors take the smallest count of
  // channels, so that their layouts agree.
  const int32_t mostHere =
      std::clamp(multiprocessors / n, 1, std::min(config.cudaChannels, kMaxChannels));
  int32_t channels = mostHere;
  comm.allReduce(&mostHere, &channels, 1, DataType::i32, RedOp::min);
  links->layout_ = {n, channels, config.nSlots, uint32_t(config.cudaSlotBytes)};
  const DeviceLinkLayout& layout = links->layout_;

  IpcRegionRecord self{};
  std::string obstacle = localObstacle(peers, rank);
  if (obstacle.empty()) {
    links->region_.create(layout.regionBytes(), layoutKey(layout), self);
  } else {
    std::memcpy(self.magic, "GIPC", 4);
    std::strncpy(self.why, obstacle.c_str(), sizeof self.why - 1);
  }
  std::vector<IpcRegionRecord> all(static_cast<size_t>(n));
  comm.allGather(&self, all.data(), sizeof self, DataType::u8);

  links->mappings_.resize(size_t(n));
  if (obstacle.empty() && !self.ok) obstacle = std::string("no link region: ") + self.why;
  for (int p = 0; p < n && obstacle.empty(); ++p) {
    if (p == rank) continue;
    auto mapping = std::make_unique<IpcMapping>();
    if (std::string why = mapping->open(self, all[size_t(p)]); !why.empty()) {
      obstacle = "rank " + std::to_string(p) + ": " + why;
    }
    links->mappings_[size_t(p)] = std::move(mapping);
  }

  // Device-side tables and the mapped failure and control words.
  if (obstacle.empty()) {
    auto& l = *links;
    std::vector<DeviceLink> table(size_t(2 * n * layout.channels), DeviceLink{});
    for (int c = 0; c < layout.channels; ++c) {
      for (int p = 0; p < n; ++p) {
        const size_t at = size_t(c * n + p);
        if (layout.linked(p, rank, c)) {
          table[at] = layout.at(l.mappings_[size_t(p)]->base(), p, rank, c);
        }
        if (layout.linked(rank, p, c)) {
          table[size_t(n * layout.channels) + at] = layout.at(l.region_.base(), rank, p, c);
        }
      }
    }
    l.tableBytes_ = table.size() * sizeof(DeviceLink);
    cudaStream_t stream = nullptr;
    void* hostWords = nullptr;
    cudaError_t e = cudaMalloc(reinterpret_cast<void**>(&l.table_), l.tableBytes_);
    if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
    if (e == cudaSuccess) {
      e = cudaMemcpyAsync(l.table_, table.data(), l.tableBytes_, cudaMemcpyHostToDevice, stream);
    }
    if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
    if (stream) cudaStreamDestroy(stream);
    const size_t wordBytes = kMaxChannels * sizeof(DeviceFailure) + sizeof(DeviceControl);
    if (e == cudaSuccess) e = cudaHostAlloc(&hostWords, wordBytes, cudaHostAllocMapped);
    if (e == cudaSuccess) {
      std::memset(hostWords, 0, wordBytes);
      l.failuresHost_ = static_cast<DeviceFailure*>(hostWords);
      l.controlHost_ = reinterpret_cast<DeviceControl*>(l.failuresHost_ + kMaxChannels);
      void* device = nullptr;
      e = cudaHostGetDevicePointer(&device, hostWords, 0);
      l.failuresDevice_ = static_cast<DeviceFailure*>(device);
      l.controlDevice_ = reinterpret_cast<DeviceControl*>(l.failuresDevice_ + kMaxChannels);
    }
    if (e == cudaSuccess) e = cudaEventCreateWithFlags(&l.lastKernel_, cudaEventDisableTiming);
    if (e == cudaSuccess) e = cuda::loadDeviceCalls();
    if (e != cudaSuccess) {
      cudaGetLastError();
      obstacle = "setting up the link tables: " + cudaText(e);
    }
  }

  // Every rank must have mapped every peer: agree on it.
  const uint32_t mine = obstacle.empty() ? 1 : 0;
  uint32_t everyone = 0;
  comm.allReduce(&mine, &everyone, 1, DataType::u32, RedOp::min);
  if (!mine) {
    GYRE_LOG(info, who +
                       ": stream-ordered collectives stay staged through host memory (no "
                       "cuda_ipc links: " +
                       obstacle + ")");
    return nullptr;
  }
  if (!everyone) {
    GYRE_LOG(info, who +
                       ": stream-ordered collectives stay staged through host memory (another "
                       "rank could not set up cuda_ipc links; see its log)");
    return nullptr;
  }
  GYRE_LOG(info, who + ": cuda_ipc links up: " + std::to_string(layout.channels) + " channels, " +
                     std::to_string(layout.nSlots) + " slots of " +
                     std::to_string(layout.slotBytes) + " B, " +
                     std::to_string(links->deviceBytes() >> 10) + " KiB of device memory");
  return links;
}

DeviceLinks::~DeviceLinks() {
  if (launched_) {
    const auto deadline =
        Clock::now() + std::min<Clock::duration>(timeout_, std::chrono::seconds(10));
    if (pollEvent(lastKernel_, deadline) == cudaErrorNotReady) {
      raiseAbort();  // end our waits; what peers still write lands in memory we keep mapped
      pollEvent(lastKernel_, Clock::now() + std::chrono::seconds(10));
    }
  }
  if (lastKernel_) cudaEventDestroy(lastKernel_);
  if (table_) cudaFree(table_);
  if (failuresHost_) cudaFreeHost(failuresHost_);
  mappings_.clear();
}

Status DeviceLinks::launch(DeviceCall call, cudaStream_t stream, const std::string& who,
                           bool capturing) {
  call.links = {layout_.nranks, layout_.channels, table_,
                table_ + size_t(layout_.nranks * layout_.channels)};
  call.failures = failuresDevice_;
  call.control = controlDevice_;
  call.seq = ++seq_;
  call.timeoutNs = uint64_t(std::chrono::nanoseconds(timeout_).count());
  call.rank = rank_;
  call.nranks = layout_.nranks;
  // The links carry one collective at a time: a kernel waits for the previous one of this
  // communicator even when it was issued on another stream.
  cudaError_t e = cudaSuccess;
  if (!capturing && launched_ && stream != lastStream_) {
    e = cudaStreamWaitEvent(stream, lastKernel_, 0);
  }
  if (e == cudaSuccess) e = cuda::launchDeviceCall(call, stream);
  if (e == cudaSuccess && !capturing) e = cudaEventRecord(lastKernel_, stream);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return {Code::system_error, who + ": launching the collective kernel failed: " + cudaText(e)};
  }
  if (!capturing) {
    launched_ = true;
    lastStream_ = stream;
  }
  return {};
}

Status DeviceLinks::failure(const std::string& who) const {
  for (int c = 0; c < kMaxChannels; ++c) {
    DeviceFailure& f = failuresHost_[c];
    if (std::atomic_ref<uint32_t>(f.code).load(std::memory_order_acquire) == 0) continue;
    return deviceFailureStatus(f, who, timeout_);
  }
  return {};
}

void DeviceLinks::raiseAbort() {
  if (controlHost_) std::atomic_ref<uint32_t>(controlHost_->abort).store(1);
}

}  // namespace gyre
