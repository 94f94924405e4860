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
                                         const PlanShape& shape) {
  if (!deviceCallSupported(k.coll)) return std::nullopt;
  const auto* send = buffers.size() > 0 ? static_cast<const char*>(buffers[0].p) : nullptr;
  auto* recv = buffers.size() > 1 ? static_cast<char*>(const_cast<void*>(buffers[1].p)) : nullptr;
  const size_t sendBytes = buffers.size() > 0 ? buffers[0].bytes : 0;
  const size_t recvBytes = buffers.size() > 1 ? buffers[1].bytes : 0;
  if (!validInPlace(k, send, sendBytes, recv, recvBytes, rank)) return std::nullopt;
  DeviceCall call{};
  call.send = send;
  call.recv = recv;
  call.dtype = k.type;
  call.op = k.op;
  // The kernel runs the rings (the tuner's other choices are host algorithms).
  call.plan = planCollective(k.coll, k.type, k.count, k.root, Algorithm::ring, shape);
  return call;
}

}  // namespace gyre
