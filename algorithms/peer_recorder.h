// A Prims that moves nothing and records every peer an algorithm names, so the communicator
// can open those connections in a deadlock-free order (ascending rank) before any data moves.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

namespace gyre {

class PeerRecorder {
 public:
  void setPeers(const int* recv, int nRecv, const int* send, int nSend) {
    peers_.insert(peers_.end(), recv, recv + nRecv);
    peers_.insert(peers_.end(), send, send + nSend);
  }
  // Sorted, without duplicates.
  std::vector<int> peers() {
    std::sort(peers_.begin(), peers_.end());
    peers_.erase(std::unique(peers_.begin(), peers_.end()), peers_.end());
    return peers_;
  }

  void useOutputAsInput() {}
  void send(size_t, size_t) {}
  void recv(size_t, size_t) {}
  void recvSend(size_t) {}
  void copySend(size_t, size_t, size_t) {}
  void recvCopySend(size_t, size_t) {}
  void recvReduceSend(size_t, size_t) {}
  void recvReduceCopy(size_t, size_t, size_t, bool) {}
  void recvReduceCopySend(size_t, size_t, size_t, bool) {}
  void localCopy(size_t, size_t, size_t) {}
  void sendMarker() {}
  void recvMarker() {}
  void holdSends(bool) {}

 private:
  std::vector<int> peers_;
};

}  // namespace gyre
