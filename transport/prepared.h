// For transports whose listening side is set up on the event loop (shm, rdma): what the loop
// made of a peer's offer, kept per (peer, channel) until connect() collects it.
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <utility>

namespace gyre {

template <class Prepared>
class PreparedByPeer {
 public:
  void put(int peer, int channel, Prepared prepared) {
    std::lock_guard lock(mutex_);
    byPeer_.insert_or_assign({peer, channel}, std::move(prepared));
  }
  // Removes and returns it; nothing when the loop never got an offer from that peer.
  std::optional<Prepared> take(int peer, int channel) {
    std::lock_guard lock(mutex_);
    auto it = byPeer_.find({peer, channel});
    if (it == byPeer_.end()) return std::nullopt;
    std::optional<Prepared> prepared(std::move(it->second));
    byPeer_.erase(it);
    return prepared;
  }

 private:
  std::mutex mutex_;
  std::map<std::pair<int, int>, Prepared> byPeer_;
};

}  // namespace gyre
