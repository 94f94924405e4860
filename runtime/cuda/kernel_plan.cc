#include "runtime/cuda/kernel_plan.h"

#include <algorithm>

namespace gyre {

namespace {

bool validInPlace(const KernelCall& k, const char* send, size_t sendBytes, const char* recv,
                  size_t recvBytes, int rank) {
  if (!send || !recv || !sendBytes || !recvBytes) return true;
  if (send >= recv + recvBytes || recv >= send + sendBytes) return true;
  const size_t block = k.count * dataTypeSize(k.type) * size_t(rank);
  switch (k.coll) {
    case Collective::all_reduce:
    case Collective::broadcast:
    case Collective::reduce:
      return send == recv;
    case Collective::all_gather:
    case Collective::gather:
      return send == recv + block;
    case Collective::reduce_scatter:
    case Collective::scatter:
      return recv == send + block;
    default:
      return false;
  }
}

}  // namespace

std::optional<DeviceCall> planKernelCall(const KernelCall& k,
                                         const std::vector<StagedBuffer>& buffers, int rank,
                                         size_t slotBytes, int maxChannels, size_t chunkElems) {
  if (!deviceCallSupported(k.coll)) return std::nullopt;
  const auto* send = buffers.size() > 0 ? static_cast<const char*>(buffers[0].p) : nullptr;
  auto* recv = buffers.size() > 1 ? static_cast<char*>(const_cast<void*>(buffers[1].p)) : nullptr;
  const size_t sendBytes = buffers.size() > 0 ? buffers[0].bytes : 0;
  const size_t recvBytes = buffers.size() > 1 ? buffers[1].bytes : 0;
  if (!validInPlace(k, send, sendBytes, recv, recvBytes, rank)) return std::nullopt;
  DeviceCall call{};
  call.send = send;
  call.recv = recv;
  call.count = k.count;
  call.root = k.root;
  call.coll = k.coll;
  call.dtype = k.type;
  call.op = k.op;
  call.algorithm = DeviceAlgorithm::ring;
  call.chunkElems = chunkElems;
  // One channel per slot's worth of the (per-rank) count, up to maxChannels.
  const size_t slotElems = std::max<size_t>(1, slotBytes / dataTypeSize(k.type));
  call.channels = deviceCallSplits(k.coll)
                      ? int(std::clamp<size_t>(k.count / slotElems, 1, size_t(maxChannels)))
                      : 1;
  return call;
}

}  // namespace gyre
