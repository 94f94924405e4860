#include "runtime/communicator.h"

#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>

#include <cstring>

#include "algorithms/host_prims.h"
#include "algorithms/ring.h"
#include "runtime/bootstrap.h"
#include "runtime/failure_board.h"
#include "runtime/log.h"
#include "runtime/store/server.h"
#include "runtime/store/tcp_store.h"
#include "transport/event_loop.h"
#include "transport/tcp/tcp_transport.h"

namespace gyre {

namespace {

std::string interfaceAddress(const std::string& ifname) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) fail(Code::system_error, "getifaddrs: " + errnoText(errno));
  std::string found;
  for (ifaddrs* a = list; a && found.empty(); a = a->ifa_next) {
    if (!a->ifa_addr || ifname != a->ifa_name) continue;
    const int family = a->ifa_addr->sa_family;
    if (family != AF_INET && family != AF_INET6) continue;
    char host[NI_MAXHOST];
    const socklen_t len = family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
    if (getnameinfo(a->ifa_addr, len, host, sizeof host, nullptr, 0, NI_NUMERICHOST) == 0) {
      found = host;
      if (auto pct = found.find('%'); pct != std::string::npos) found.resize(pct);
    }
  }
  freeifaddrs(list);
  if (found.empty()) {
    fail(Code::invalid_argument, "GYRE_SOCKET_IFNAME=" + ifname + ": no IPv4/IPv6 address");
  }
  return found;
}

bool overlaps(const void* a, size_t aBytes, const void* b, size_t bBytes) {
  const auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  return aBytes && bBytes && x < y + bBytes && y < x + aBytes;
}

}  // namespace

struct Communicator::Impl {
  CommConfig config;
  std::unique_ptr<StoreServer> hostedServer;  // rank 0, torch-style
  std::unique_ptr<Bootstrap> bootstrap;
  std::unique_ptr<FailureBoard> board;
  std::vector<PeerInfo> peers;
  std::unique_ptr<EventLoop> loop;
  std::unique_ptr<TcpTransport> tcp;
  std::map<std::pair<int, int>, std::shared_ptr<Connection>> connections;  // (peer, channel)

  std::mutex opMutex;
  uint64_t seq = 0;
  std::atomic<bool> abortFlag{false};
  mutable std::mutex poisonMutex;
  Status poison;

  ~Impl();
  std::string who() const { return "rank " + std::to_string(config.rank); }

  void init();
  std::shared_ptr<Store> openStore();
  Connection& connection(int peer, int channel);
  size_t chunkElems(DataType type) const {
    return std::max<size_t>(1, (config.nSlots / 2) * config.slotBytes / dataTypeSize(type));
  }

  void setPoison(const Status& s) {
    std::lock_guard lock(poisonMutex);
    if (poison.ok()) poison = s;
  }
  Status poisoned() const {
    std::lock_guard lock(poisonMutex);
    return poison;
  }

  // Validates, then runs `body(ctx)` under the op lock with a fresh sequence number.
  template <class Body>
  void run(Collective coll, size_t count, DataType type, RedOp op, int root, Body&& body);
  void checkType(const char* what, DataType type, RedOp op) const;
  void checkRoot(const char* what, int root) const;
  void checkBuffers(const char* what, const void* send, size_t sendBytes, const void* recv,
                    size_t recvBytes, bool sendUsed, const void* inPlaceSend) const;
};

std::shared_ptr<Store> Communicator::Impl::openStore() {
  if (config.store) return config.store;
  TcpStoreOptions opts;
  opts.jobId = config.jobId;
  opts.secret = config.secret;
  opts.connectTimeout = config.timeout;
  opts.replyTimeout = std::min<std::chrono::milliseconds>(config.timeout, std::chrono::seconds(30));
  std::string address = config.rendezvous;
  if (address.empty()) {
    if (config.hostAddress.empty()) {
      if (config.nranks == 1) return makeMemoryStore();
      fail(Code::invalid_argument, who() +
                                       ": no rendezvous: set GYRE_RENDEZVOUS=host:port "
                                       "or MASTER_ADDR/MASTER_PORT");
    }
    address = config.hostAddress;
    if (config.rank == 0) {
      StoreServerOptions server;
      splitHostPort(address, server.host, server.port);
      server.secret = config.secret;
      hostedServer = std::make_unique<StoreServer>(server);
      hostedServer->start();
      GYRE_LOG(info, who() + ": hosting the rendezvous at " + hostedServer->address());
    }
  }
  splitHostPort(address, opts.host, opts.port);
  return std::make_shared<TcpStore>(opts);
}

void Communicator::Impl::init() {
  validate(config);
  auto store = openStore();
  std::string listenHost = "127.0.0.1";
  if (!config.socketIfname.empty()) {
    listenHost = interfaceAddress(config.socketIfname);
  } else if (auto* tcpStore = dynamic_cast<TcpStore*>(store.get())) {
    listenHost = tcpStore->localAddress();  // the interface that reaches the rendezvous
  }
  // Every rank creates a job's communicators in the same order, so counting its own gives
  // all ranks the same fresh namespace for this one.
  const int64_t index = store->add("communicators/" + std::to_string(config.rank), 1);
  auto commStore = makePrefixStore("comm" + std::to_string(index), store);
  bootstrap = std::make_unique<Bootstrap>(commStore, config.rank, config.nranks, config.timeout);
  loop = std::make_unique<EventLoop>("gyre-progress");
  LinkConfig link;
  link.jobId = config.jobId;
  link.secret = config.secret;
  link.rank = config.rank;
  link.nranks = config.nranks;
  link.nSlots = config.nSlots;
  link.slotBytes = config.slotBytes;
  tcp = std::make_unique<TcpTransport>(*loop, link, listenHost);

  PeerInfo self;
  self.rank = config.rank;
  self.hostId = localHostId();
  tcp->publish(self);
  const auto all = bootstrap->allGather(self.encode());
  for (const auto& text : all) peers.push_back(PeerInfo::decode(text));
  for (int r = 0; r < config.nranks; ++r) {
    if (peers[r].rank != r) fail(Code::internal, who() + ": rendezvous returned a wrong rank");
  }
  board = std::make_unique<FailureBoard>(commStore, config.rank, config.nranks);
  // Ring neighbours now; other pairs connect on first use.
  if (config.nranks > 1) {
    connection((config.rank + 1) % config.nranks, 0);
    connection((config.rank + config.nranks - 1) % config.nranks, 0);
  }
  GYRE_LOG(info, who() + " of " + std::to_string(config.nranks) + ": ready, listening on " +
                     listenHost + ":" + std::to_string(self.tcpPort));
}

Connection& Communicator::Impl::connection(int peer, int channel) {
  const auto key = std::make_pair(peer, channel);
  auto it = connections.find(key);
  if (it != connections.end()) return *it->second;
  const auto deadline = Clock::now() + config.timeout;
  auto conn = tcp->connect(peers[peer], channel, deadline);
  GYRE_LOG(trace, who() + ": connected to rank " + std::to_string(peer) + " channel " +
                      std::to_string(channel) + " over " + conn->transportName());
  return *connections.emplace(key, std::move(conn)).first->second;
}

void Communicator::Impl::checkType(const char* what, DataType type, RedOp op) const {
  if (static_cast<int>(type) >= kNumDataTypes) {
    fail(Code::invalid_argument,
         who() + ": " + what + ": unknown data type " + std::to_string(static_cast<int>(type)));
  }
  if (static_cast<int>(op) >= kNumRedOps) {
    fail(Code::invalid_argument,
         who() + ": " + what + ": unknown reduction op " + std::to_string(static_cast<int>(op)));
  }
}

void Communicator::Impl::checkRoot(const char* what, int root) const {
  if (root < 0 || root >= config.nranks) {
    fail(Code::invalid_argument, who() + ": " + what + ": root " + std::to_string(root) +
                                     " is outside [0, " + std::to_string(config.nranks) + ")");
  }
}

void Communicator::Impl::checkBuffers(const char* what, const void* send, size_t sendBytes,
                                      const void* recv, size_t recvBytes, bool sendUsed,
                                      const void* inPlaceSend) const {
  if (sendUsed && sendBytes && !send) {
    fail(Code::invalid_argument, who() + ": " + what + ": sendbuff is null");
  }
  if (recvBytes && !recv) fail(Code::invalid_argument, who() + ": " + what + ": recvbuff is null");
  if (sendUsed && send != inPlaceSend && overlaps(send, sendBytes, recv, recvBytes)) {
    fail(Code::invalid_argument,
         who() + ": " + what + ": sendbuff and recvbuff overlap without being in place");
  }
}

template <class Body>
void Communicator::Impl::run(Collective coll, size_t count, DataType type, RedOp op, int root,
                             Body&& body) {
  std::lock_guard lock(opMutex);
  if (Status s = poisoned(); !s.ok()) {
    throw Failure(s.code, who() + ": " + collectiveName(coll) +
                              " refused: the communicator failed earlier: " + s.message);
  }
  OpContext ctx;
  ctx.desc = OpDesc{++seq, count, root, coll, type, op};
  ctx.rank = config.rank;
  ctx.nranks = config.nranks;
  ctx.timeout = config.timeout;
  ctx.deadline = Clock::now() + config.timeout;
  ctx.abort = &abortFlag;
  ctx.spin = config.spin;
  board->started(ctx.desc);
  try {
    body(ctx);
  } catch (const Failure& f) {
    Status s = f.status();
    if (s.code == Code::timeout) s.message += "; " + board->attribute(ctx.desc);
    // Record the cause before closing: the neighbours woken by the close then report it.
    s = board->report(s, ctx.desc);
    setPoison(s);
    // Closing our connections makes every neighbour fail now instead of at its deadline.
    for (auto& [key, conn] : connections) conn->close();
    throw Failure(s);
  }
  board->completed(ctx.desc);
}

Communicator::Communicator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

std::unique_ptr<Communicator> Communicator::create(CommConfig config) {
  auto impl = std::make_unique<Impl>();
  impl->config = std::move(config);
  impl->init();
  return std::unique_ptr<Communicator>(new Communicator(std::move(impl)));
}

Communicator::~Communicator() {
  auto& d = *impl_;
  d.board.reset();
  if (d.poisoned().ok()) {
    // Let the last slots of the last collective reach the peers before closing.
    const auto deadline =
        Clock::now() + std::min<Clock::duration>(d.config.timeout, std::chrono::seconds(10));
    for (auto& [key, conn] : d.connections) {
      Status s = conn->flush(deadline);
      if (!s.ok()) GYRE_LOG(warn, "destroy: " + s.message);
    }
  }
  // The rest is ~Impl's, which also runs when create() fails half way.
}

// Stops the event loop before the transport and connections it serves are destroyed: the
// members alone would be destroyed in the wrong order for that.
Communicator::Impl::~Impl() {
  board.reset();
  if (tcp) tcp->shutdown();
  for (auto& [key, conn] : connections) conn->close();
  if (loop) loop->stop();
  connections.clear();
}

int Communicator::rank() const {
  return impl_->config.rank;
}
int Communicator::size() const {
  return impl_->config.nranks;
}
std::string Communicator::dataAddress() const {
  const auto& self = impl_->peers[impl_->config.rank];
  return joinHostPort(self.tcpHost, self.tcpPort);
}

void Communicator::abort() {
  impl_->abortFlag.store(true);
  impl_->setPoison({Code::aborted, impl_->who() + ": communicator aborted by gyreCommAbort"});
}

Status Communicator::asyncError() const {
  return impl_->poisoned();
}

void Communicator::allReduce(const void* send, void* recv, size_t count, DataType type, RedOp op) {
  auto& d = *impl_;
  d.checkType("all_reduce", type, op);
  const size_t bytes = count * dataTypeSize(type);
  d.checkBuffers("all_reduce", send, bytes, recv, bytes, true, recv);
  d.run(Collective::all_reduce, count, type, op, -1, [&](const OpContext& ctx) {
    const int n = d.config.nranks, r = d.config.rank;
    Connection* prev = n > 1 ? &d.connection((r + n - 1) % n, 0) : nullptr;
    Connection* next = n > 1 ? &d.connection((r + 1) % n, 0) : nullptr;
    HostPrims prims(ctx, prev, next, send, recv);
    algo::ringAllReduce(prims, r, n, count, d.chunkElems(type));
  });
}

void Communicator::allGather(const void* send, void* recv, size_t sendCount, DataType type) {
  auto& d = *impl_;
  d.checkType("all_gather", type, RedOp::sum);
  const size_t es = dataTypeSize(type), n = size_t(d.config.nranks);
  if (sendCount > SIZE_MAX / es / n)
    fail(Code::invalid_argument, d.who() + ": all_gather: count too large");
  const void* inPlace =
      recv ? static_cast<const char*>(recv) + d.config.rank * sendCount * es : nullptr;
  d.checkBuffers("all_gather", send, sendCount * es, recv, n * sendCount * es, true, inPlace);
  d.run(Collective::all_gather, sendCount, type, RedOp::sum, -1, [&](const OpContext& ctx) {
    const int nr = d.config.nranks, r = d.config.rank;
    Connection* prev = nr > 1 ? &d.connection((r + nr - 1) % nr, 0) : nullptr;
    Connection* next = nr > 1 ? &d.connection((r + 1) % nr, 0) : nullptr;
    HostPrims prims(ctx, prev, next, send, recv);
    algo::ringAllGather(prims, r, nr, sendCount, d.chunkElems(type));
  });
}

void Communicator::reduceScatter(const void* send, void* recv, size_t recvCount, DataType type,
                                 RedOp op) {
  auto& d = *impl_;
  d.checkType("reduce_scatter", type, op);
  const size_t es = dataTypeSize(type), n = size_t(d.config.nranks);
  if (recvCount > SIZE_MAX / es / n)
    fail(Code::invalid_argument, d.who() + ": reduce_scatter: count too large");
  // In place: recvbuff is this rank's block of sendbuff, so recv's overlap is allowed there.
  const bool inPlace =
      send && recv == static_cast<const char*>(send) + d.config.rank * recvCount * es;
  d.checkBuffers("reduce_scatter", send, n * recvCount * es, recv, recvCount * es, true,
                 inPlace ? send : recv);
  d.run(Collective::reduce_scatter, recvCount, type, op, -1, [&](const OpContext& ctx) {
    const int nr = d.config.nranks, r = d.config.rank;
    Connection* prev = nr > 1 ? &d.connection((r + nr - 1) % nr, 0) : nullptr;
    Connection* next = nr > 1 ? &d.connection((r + 1) % nr, 0) : nullptr;
    HostPrims prims(ctx, prev, next, send, recv);
    algo::ringReduceScatter(prims, r, nr, recvCount, d.chunkElems(type));
  });
}

void Communicator::broadcast(const void* send, void* recv, size_t count, DataType type, int root) {
  auto& d = *impl_;
  d.checkType("broadcast", type, RedOp::sum);
  d.checkRoot("broadcast", root);
  const size_t bytes = count * dataTypeSize(type);
  const bool isRoot = d.config.rank == root;
  d.checkBuffers("broadcast", send, bytes, recv, bytes, isRoot, recv);
  d.run(Collective::broadcast, count, type, RedOp::sum, root, [&](const OpContext& ctx) {
    const int n = d.config.nranks, r = d.config.rank;
    Connection* prev = n > 1 ? &d.connection((r + n - 1) % n, 0) : nullptr;
    Connection* next = n > 1 ? &d.connection((r + 1) % n, 0) : nullptr;
    HostPrims prims(ctx, prev, next, isRoot ? send : nullptr, recv);
    algo::ringBroadcast(prims, r, n, root, count, d.chunkElems(type));
  });
}

}  // namespace gyre
