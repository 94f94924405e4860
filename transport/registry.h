// A communicator's transports, in one list in order of preference. The runtime speaks to this
// and to the Transport interface only: which transports exist, how each is built, and which
// one reaches a peer are decided here, so adding a transport touches transport/ alone.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "transport/event_loop.h"
#include "transport/transport.h"

namespace gyre {

struct TransportOptions {
  LinkConfig link;
  std::string listenHost;  // where tcp listens (the interface that reaches the rendezvous)
  // GYRE_TRANSPORT: "auto" (every transport this build has, the first that reaches a peer
  // wins) or one name, which then must reach every peer.
  std::string only = "auto";
  std::string shmDir;   // GYRE_SHM_DIR
  std::string ibHca;    // GYRE_IB_HCA
  int ibGidIndex = -1;  // GYRE_IB_GID_INDEX
};

class Transports {
 public:
  // Builds the transports `options.only` allows; tcp is always built (the others set up
  // their connections over its handshake) but carries data only when allowed.
  Transports(EventLoop& loop, const TransportOptions& options);
  ~Transports();

  // Every transport writes its part of this rank's descriptor.
  void publish(PeerInfo& self);
  // The first allowed transport that reaches `peer`; throws invalid_usage naming the peer and
  // the reason when the one GYRE_TRANSPORT names cannot.
  Transport& forPeer(const PeerInfo& self, const PeerInfo& peer) const;
  // Registers memory with every transport that can use it: sends over that transport from it
  // need no copy. Returns one handle per transport (0: nothing registered there).
  std::vector<uint64_t> registerMemory(const void* p, size_t bytes, const std::string& who);
  void deregisterMemory(const std::vector<uint64_t>& handles);
  // Transport::setSingleCopyBytes on every transport.
  void setSingleCopyBytes(size_t bytes);
  // Stops accepting; before the event loop stops.
  void shutdown();
  // Where `peer` accepts data connections ("host:port"), or "none".
  std::string address(const PeerInfo& peer) const;
  // The transports that may carry data, in order of preference.
  std::vector<const Transport*> carriers() const;

 private:
  struct Entry {
    std::unique_ptr<Transport> transport;
    bool carriesData = true;
  };
  std::vector<Entry> list_;  // in order of preference
  std::string only_;
  std::string missing_;  // why GYRE_TRANSPORT's choice is not in this build, if it is not
};

// Every transport GYRE_TRANSPORT may name, in order of preference, whether or not this build
// has it (one it lacks fails naming why when a peer needs it).
const std::vector<std::string>& transportNames();

}  // namespace gyre
