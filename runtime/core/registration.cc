// Memory registered with the transports (rdma's direct sends, GPUDirect RDMA's unstaged
// ones) and what moved straight from user memory.
#include <mutex>

#include "runtime/core/communicator.h"
#include "runtime/core/communicator_impl.h"
#include "transport/registry.h"

namespace gyre {

void* Communicator::registerBuffer(const void* p, size_t bytes) {
  auto& d = *impl_;
  if (!p || bytes == 0) {
    fail(Code::invalid_argument, d.who() + ": gyreCommRegister: null buffer or size 0");
  }
  std::lock_guard lock(d.registrationsMutex);
  if (d.registrations.size() >= 1024) {
    fail(Code::invalid_usage, d.who() + ": gyreCommRegister: 1024 buffers are registered " +
                                  "already; deregister some first");
  }
  auto reg = std::make_unique<Impl::Registration>();
  reg->p = p;
  reg->bytes = bytes;
  reg->handles = d.transports->registerMemory(p, bytes, d.who());
  const Impl::Registration* handle = reg.get();
  d.registrations.emplace(handle, std::move(reg));
  return const_cast<Impl::Registration*>(handle);
}

void Communicator::deregisterBuffer(void* handle) {
  auto& d = *impl_;
  std::lock_guard lock(d.registrationsMutex);
  auto it = d.registrations.find(static_cast<const Impl::Registration*>(handle));
  if (it == d.registrations.end()) {
    fail(Code::invalid_argument,
         d.who() + ": gyreCommDeregister: not a handle gyreCommRegister gave this communicator");
  }
  d.transports->deregisterMemory(it->second->handles);
  d.registrations.erase(it);
}

bool Communicator::sendsUnstaged(int peer, const void* buf, size_t bytes) {
  return impl_->supportsUnstagedSend(peer, buf, bytes);
}

bool Communicator::Impl::supportsUnstagedSend(int peer, const void* p, size_t bytes) {
  if (!p || bytes == 0 || peer < 0 || peer >= config.nranks || peer == config.rank) return false;
  // The transport's regions, not the handles: a region re-registered smaller covers less.
  try {
    return transports->forPeer(peers[config.rank], peers[peer]).sendsUnstaged(p, bytes);
  } catch (const Failure&) {
    return false;  // no transport reaches it; the call itself reports that
  }
}

uint64_t Communicator::directSends() const {
  std::lock_guard lock(impl_->opMutex);
  uint64_t total = 0;
  for (const auto& [key, conn] : impl_->connections) total += conn->directCounts().sentFromUser;
  return total;
}

}  // namespace gyre
