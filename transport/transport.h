// What a transport is: it decides whether it can reach a peer, publishes where it can be
// reached, and turns a (peer, channel) pair into a Connection whose links it fills.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "transport/link.h"

namespace gyre {

// What every rank publishes through the bootstrap.
struct PeerInfo {
  int rank = -1;
  std::string hostId;   // hostname + boot id: equal means same machine
  std::string tcpHost;  // data-plane listen address
  uint16_t tcpPort = 0;
  bool shm = false;       // accepts shared-memory connections from ranks on its host
  bool rdma = false;      // has an active rdma device and accepts rdma connections
  std::vector<int> cpus;  // the CPUs this rank may run on (its affinity), ascending

  // CPUs this rank has; at least 1 even when unknown.
  int cores() const { return cpus.empty() ? 1 : int(cpus.size()); }

  std::string encode() const;
  static PeerInfo decode(const std::string& text);  // throws Failure on malformed input
};

// Settings every transport of one communicator shares.
struct LinkConfig {
  std::string jobId;   // at most 32 bytes; the handshake refuses other jobs
  std::string secret;  // both ends of a connection prove they know it
  int rank = 0;
  int nranks = 1;
  uint32_t nSlots = 8;
  size_t slotBytes = 128 * 1024;
  Clock::duration handshakeTimeout = std::chrono::seconds(10);
  // Congestion control of tcp data connections: "auto" (a non-pacing one to peers on this
  // host, see tcp_transport.cc), "system", or a name set on every connection.
  std::string tcpCongestion = "auto";
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual const char* name() const = 0;
  virtual bool canConnect(const PeerInfo& self, const PeerInfo& peer) const = 0;
  // Opens listeners and writes this rank's addresses into `self`.
  virtual void publish(PeerInfo& self) = 0;
  // Both ranks call this for each other with the same channel; returns when the connection is
  // ready or throws Failure (timeout, refused, handshake error) naming the peer. While it
  // waits it polls `interrupted` every 100 ms and throws what it returns if not ok (the peer
  // may have died before it ever connected).
  using Interrupt = std::function<Status()>;
  virtual std::shared_ptr<Connection> connect(const PeerInfo& peer, int channel,
                                              Clock::time_point deadline,
                                              const Interrupt& interrupted) = 0;
};

std::string localHostId();
// The CPUs the calling thread may run on, ascending.
std::vector<int> allowedCpus();
// "0-3,8" for {0,1,2,3,8} and back; parseCpuList throws std::exception on garbage.
std::string formatCpuList(const std::vector<int>& cpus);
std::vector<int> parseCpuList(const std::string& text);

}  // namespace gyre
