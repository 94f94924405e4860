// The rendezvous server: a key-value store on one Asio loop thread. Many jobs share one server
// (each client says its job first; keys never cross jobs; a job's keys go when its last client
// does) and a slow, silent or malicious client can only lose its own connection.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

namespace gyre {

struct StoreServerOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 0;         // 0 picks a free port
  size_t maxClients = 1024;  // clients that proved the secret, served at once
  // Connections that have not proved it yet; when they are all taken, a new connection
  // pushes out the oldest of them, so strangers that hold connections open cannot lock
  // the jobs out (a real client proves the secret within a round trip).
  size_t maxPendingClients = 64;
  size_t maxKeysPerJob = 1 << 16;
  size_t maxQueuedReplyBytes = 8 << 20;
  // A frame whose first byte arrived must be complete within this.
  std::chrono::milliseconds frameTimeout{10000};
  // Clients must prove they know it (HMAC challenge-response); empty: the empty key.
  std::string secret;
  // Non-zero: once clients that proved the secret came and all of them left, and none came
  // back within this time, the server stops by itself (closes its port, ends its thread). A
  // server made for one job (gyreGetUniqueId) ends with that job.
  std::chrono::milliseconds stopWhenIdleFor{0};
};

class StoreServer {
 public:
  explicit StoreServer(StoreServerOptions options = {});  // binds; throws Failure
  ~StoreServer();
  StoreServer(const StoreServer&) = delete;
  StoreServer& operator=(const StoreServer&) = delete;

  void start();  // serves on a thread of its own
  void run();    // serves on the calling thread until stop()
  void stop();   // from any thread

  const std::string& host() const;
  uint16_t port() const;
  std::string address() const;  // "host:port", brackets for IPv6
  size_t clientCount() const;
  // Jobs with keys held: a job is forgotten, keys and all, when its last client leaves.
  size_t jobCount() const;
  // It stopped by itself (stopWhenIdleFor) or was stopped.
  bool stopped() const;

  struct Impl;  // public so the session code in server.cc can name it

 private:
  std::unique_ptr<Impl> impl_;
};

// "host:port" or "[v6]:port" -> parts; throws Failure(invalid_argument).
void splitHostPort(const std::string& address, std::string& host, uint16_t& port);
std::string joinHostPort(const std::string& host, uint16_t port);

}  // namespace gyre
