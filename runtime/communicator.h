// A communicator: its ranks, its connections and its progress thread. Collectives on host
// buffers run on the calling thread (HostPrims) while the event loop moves bytes. Calls on one
// communicator are serialised in issue order. The first failure poisons it: later calls fail
// fast with the same cause.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "gyre/types.h"
#include "runtime/config.h"
#include "runtime/status.h"

namespace gyre {

class Communicator {
 public:
  static std::unique_ptr<Communicator> create(CommConfig config);
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const;
  int size() const;
  // host:port where this rank accepts data connections (for logs and tests).
  std::string dataAddress() const;

  void allReduce(const void* send, void* recv, size_t count, DataType type, RedOp op);
  void allGather(const void* send, void* recv, size_t sendCount, DataType type);
  void reduceScatter(const void* send, void* recv, size_t recvCount, DataType type, RedOp op);
  void broadcast(const void* send, void* recv, size_t count, DataType type, int root);

  // From any thread: waiting calls fail with Code::aborted promptly; the comm is poisoned.
  void abort();
  // Ok, or the failure that poisoned the communicator.
  Status asyncError() const;

 private:
  struct Impl;
  explicit Communicator(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gyre
