// What a transport is: it decides whether it can reach a peer, publishes where it can be
// reached, and turns a (peer, channel) pair into a Connection whose links it fills.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "link/link.h"

namespace gyre {

// What every rank publishes through the bootstrap.
struct PeerInfo {
  int rank = -1;
  std::string hostId;     // hostname + boot id: equal means same machine
  std::vector<int> cpus;  // the CPUs this rank may run on (its affinity), ascending
  // Each transport's own part, by transport name (its address, or that it accepts
  // connections); a transport absent here does not reach this rank.
  std::map<std::string, std::string> parts;

  // CPUs this rank has; at least 1 even when unknown.
  int cores() const { return cpus.empty() ? 1 : int(cpus.size()); }
  // The part `transport` published, or null.
  const std::string* part(const std::string& transport) const {
    auto it = parts.find(transport);
    return it == parts.end() ? nullptr : &it->second;
  }

  std::string encode() const;
  static PeerInfo decode(const std::string& text);  // throws Failure on malformed input
};

// Settings every transport of one communicator shares.
struct LinkConfig {
  std::string jobId;   // at most 32 bytes; the handshake refuses other jobs
  std::string secret;  // the job's key (auth::jobKey): both ends prove they know it
  int rank = 0;
  int nranks = 1;
  uint32_t nSlots = 8;
  size_t slotBytes = 128 * 1024;
  // How long an accepted connection may take to finish its handshake (the job's timeout).
  Clock::duration handshakeTimeout = std::chrono::seconds(10);
  // Congestion control of tcp data connections: "auto" (a non-pacing one to peers on this
  // host, see tcp_transport.cc), "system", or a name set on every connection.
  std::string tcpCongestion = "auto";
  // A tcp peer silent this long is gone (base/fd.h setTcpLiveness); 0: the system's.
  std::chrono::milliseconds tcpDeadAfter{std::chrono::seconds(6)};
  // The smallest shm slot payload the receiver reads straight from the sender's memory
  // (shm_connection.h); 0: never.
  size_t singleCopyBytes = 32 * 1024;
};

// What kind of medium a transport's links cross: the tuner models them differently.
enum class Medium { memory, network };

class Transport {
 public:
  virtual ~Transport() = default;
  virtual const char* name() const = 0;
  virtual Medium medium() const { return Medium::network; }
  // Why this rank cannot reach `peer` over this transport ("this rank: ..." when the cause is
  // here), or empty when it can.
  virtual std::string unreachable(const PeerInfo& self, const PeerInfo& peer) const = 0;
  bool canConnect(const PeerInfo& self, const PeerInfo& peer) const {
    return unreachable(self, peer).empty();
  }
  // Opens listeners and writes this rank's part into `self.parts` (or none, when unusable).
  virtual void publish(PeerInfo& self) = 0;
  // Where `peer` accepts this transport's connections ("host:port"), for logs; empty when
  // it has no address of its own (connections that start over another transport).
  virtual std::string address(const PeerInfo& /*peer*/) const { return {}; }
  // Both ranks call this for each other with the same channel; returns when the connection is
  // ready or throws Failure (timeout, refused, handshake error) naming the peer. While it
  // waits it polls `interrupted` every 100 ms and throws what it returns if not ok (the peer
  // may have died before it ever connected).
  using Interrupt = std::function<Status()>;
  virtual std::shared_ptr<Connection> connect(const PeerInfo& peer, int channel,
                                              Clock::time_point deadline,
                                              const Interrupt& interrupted) = 0;
  // Registers [p, p + bytes) (host or device memory) so that sends from it may leave without a
  // copy (Connection::offerSend with `stable`); returns a handle for deregisterMemory, or 0
  // where this transport has nothing to register it with. `who` prefixes its log lines.
  virtual uint64_t registerMemory(const void* /*p*/, size_t /*bytes*/, const std::string& /*who*/) {
    return 0;
  }
  virtual void deregisterMemory(uint64_t /*handle*/) {}
  // Whether a send of [p, p + bytes) to a peer over this transport needs no CPU read of it.
  virtual bool sendsUnstaged(const void* /*p*/, size_t /*bytes*/) const { return false; }
  // The smallest slot payload a receiver reads straight from the sender's memory through the
  // kernel from now on (0: never); for connections made after the call (shared memory only).
  virtual void setSingleCopyBytes(size_t /*bytes*/) {}
  // Stops accepting; from the user thread, before the event loop stops.
  virtual void shutdown() {}
};

std::string localHostId();
// The CPUs the calling thread may run on, ascending.
std::vector<int> allowedCpus();
// "0-3,8" for {0,1,2,3,8} and back; parseCpuList throws std::exception on garbage.
std::string formatCpuList(const std::vector<int>& cpus);
std::vector<int> parseCpuList(const std::string& text);

}  // namespace gyre
