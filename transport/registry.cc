#include "transport/registry.h"

#include "transport/shm/shm_transport.h"
#include "transport/tcp/tcp_transport.h"
#ifdef GYRE_HAVE_IBVERBS
#include "transport/rdma/rdma_transport.h"
#endif

namespace gyre {

const std::vector<std::string>& transportNames() {
  static const std::vector<std::string> names{"shm", "rdma", "tcp"};
  return names;
}

Transports::Transports(EventLoop& loop, const TransportOptions& options) : only_(options.only) {
  const auto wanted = [&](const char* name) { return only_ == "auto" || only_ == name; };
  auto tcp = std::make_unique<TcpTransport>(loop, options.link, options.listenHost);
  // The list, in order of preference: shared memory within a host, rdma between hosts, tcp.
  if (wanted("shm")) {
    list_.push_back(
        {std::make_unique<ShmTransport>(*tcp, options.link, options.shmDir, only_ == "shm"), true});
  }
#ifdef GYRE_HAVE_IBVERBS
  if (wanted("rdma")) {
    list_.push_back({std::make_unique<RdmaTransport>(*tcp, options.link, options.ibHca,
                                                     options.ibGidIndex, only_ == "rdma"),
                     true});
  }
#else
  if (only_ == "rdma")
    missing_ = "this build of gyre has no rdma transport (libibverbs-dev was missing)";
#endif
  list_.push_back({std::move(tcp), wanted("tcp")});
}

Transports::~Transports() = default;

void Transports::publish(PeerInfo& self) {
  // tcp listens first: the others' connections start as tcp handshakes.
  list_.back().transport->publish(self);
  for (size_t i = 0; i + 1 < list_.size(); ++i) list_[i].transport->publish(self);
}

Transport& Transports::forPeer(const PeerInfo& self, const PeerInfo& peer) const {
  std::string why;
  for (const Entry& e : list_) {
    if (!e.carriesData) continue;
    why = e.transport->unreachable(self, peer);
    if (why.empty()) return *e.transport;
  }
  if (only_ != "auto") {
    if (!missing_.empty()) why = "this rank: " + missing_;
    fail(Code::invalid_usage,
         "rank " + std::to_string(self.rank) + ": GYRE_TRANSPORT=" + only_ + " but rank " +
             std::to_string(peer.rank) + " cannot be reached over " +
             (only_ == "shm" ? std::string("shared memory") : only_) + ": " + why);
  }
  fail(Code::invalid_usage, "rank " + std::to_string(self.rank) + ": no transport reaches rank " +
                                std::to_string(peer.rank) + ": " + why);
}

std::vector<uint64_t> Transports::registerMemory(const void* p, size_t bytes,
                                                 const std::string& who) {
  std::vector<uint64_t> handles;
  try {
    for (const Entry& e : list_) handles.push_back(e.transport->registerMemory(p, bytes, who));
  } catch (...) {
    deregisterMemory(handles);
    throw;
  }
  return handles;
}

void Transports::deregisterMemory(const std::vector<uint64_t>& handles) {
  for (size_t i = 0; i < handles.size() && i < list_.size(); ++i) {
    if (handles[i]) list_[i].transport->deregisterMemory(handles[i]);
  }
}

void Transports::setSingleCopyBytes(size_t bytes) {
  for (const Entry& e : list_) e.transport->setSingleCopyBytes(bytes);
}

void Transports::shutdown() {
  for (const Entry& e : list_) e.transport->shutdown();
}

std::string Transports::address(const PeerInfo& peer) const {
  for (const Entry& e : list_)
    if (std::string a = e.transport->address(peer); !a.empty()) return a;
  return "none";
}

std::vector<const Transport*> Transports::carriers() const {
  std::vector<const Transport*> out;
  for (const Entry& e : list_)
    if (e.carriesData) out.push_back(e.transport.get());
  return out;
}

}  // namespace gyre
