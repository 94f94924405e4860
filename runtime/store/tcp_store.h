// Client of the rendezvous server. Thread-safe (one request at a time); every call has a
// deadline; a broken connection fails the call with a message naming the server.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "runtime/store/store.h"

namespace gyre {

struct TcpStoreOptions {
  std::string host;
  uint16_t port = 0;
  std::string jobId;
  std::string secret;  // the job's shared secret (empty: the empty key)
  // How long to keep trying to reach the server (it may start after us).
  std::chrono::milliseconds connectTimeout{30000};
  // How long past its own wait a request may take before the server counts as lost.
  std::chrono::milliseconds replyTimeout{30000};
  // The server's host silent this long is gone (base/fd.h setTcpLiveness).
  std::chrono::milliseconds deadAfter{std::chrono::seconds(6)};
};

class TcpStore : public Store {
 public:
  explicit TcpStore(TcpStoreOptions options);  // connects; throws Failure
  ~TcpStore() override;

  void set(const std::string& key, const std::string& value) override;
  std::string get(const std::string& key, Duration timeout) override;
  int64_t add(const std::string& key, int64_t delta) override;
  void wait(const std::vector<std::string>& keys, Duration timeout) override;
  std::string compareSet(const std::string& key, const std::string& expected,
                         const std::string& desired) override;
  bool remove(const std::string& key) override;

  // The local address of the connection: the interface that reaches the server.
  std::string localAddress() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gyre
