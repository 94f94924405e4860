#include "runtime/communicator.h"

#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <sched.h>
#include <unistd.h>

#include <cstring>

#include <algorithm>
#include <limits>
#include <map>
#include <set>

#include "runtime/bootstrap.h"
#include "runtime/communicator_impl.h"
#include "runtime/device_memory.h"
#include "runtime/failure_board.h"
#include "runtime/log.h"
#include "runtime/store/server.h"
#include "runtime/store/tcp_store.h"
#include "transport/event_loop.h"
#include "transport/shm/shm_transport.h"
#include "transport/tcp/tcp_transport.h"
#ifdef GYRE_HAVE_IBVERBS
#include "transport/rdma/rdma_transport.h"
#endif

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

// Cores per host: the CPUs its ranks may use together, and how many ranks share them.
struct HostCores {
  std::set<int> cpus;
  int ranks = 0;
};
std::map<std::string, HostCores> coresByHost(const std::vector<PeerInfo>& peers) {
  std::map<std::string, HostCores> hosts;
  for (const auto& p : peers) {
    auto& h = hosts[p.hostId];
    h.cpus.insert(p.cpus.begin(), p.cpus.end());
    ++h.ranks;
  }
  return hosts;
}

// The fewest cores any rank has to itself: its own CPUs, and no more than its share of its
// host's. Computed from what every rank published, so all ranks agree on it.
int coresPerRank(const std::vector<PeerInfo>& peers) {
  const auto hosts = coresByHost(peers);
  int fewest = std::numeric_limits<int>::max();
  for (const auto& p : peers) {
    const auto& h = hosts.at(p.hostId);
    fewest = std::min({fewest, p.cores(), std::max(1, int(h.cpus.size())) / h.ranks});
  }
  return std::max(1, fewest);
}

}  // namespace

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
      hostedServer = std::make_shared<StoreServer>(server);
      hostedServer->start();
      GYRE_LOG(info, who() + ": hosting the rendezvous at " + hostedServer->address());
    }
  }
  splitHostPort(address, opts.host, opts.port);
  return std::make_shared<TcpStore>(opts);
}

void Communicator::Impl::init(const std::string& explicitNamespace) {
  validate(config);
  if (!rootStore) rootStore = openStore();
  auto& store = rootStore;
  std::string listenHost = "127.0.0.1";
  if (!config.socketIfname.empty()) {
    listenHost = interfaceAddress(config.socketIfname);
  } else if (auto* tcpStore = dynamic_cast<TcpStore*>(store.get())) {
    listenHost = tcpStore->localAddress();  // the interface that reaches the rendezvous
  }
  // Every rank creates a job's top-level communicators in the same order, so counting its
  // own gives all ranks the same fresh namespace for this one. Children of split() are named
  // after their parent instead.
  storeNamespace = explicitNamespace;
  if (storeNamespace.empty()) {
    const int64_t index = store->add("communicators/" + std::to_string(config.rank), 1);
    storeNamespace = "comm" + std::to_string(index);
  }
  auto commStore = makePrefixStore(storeNamespace, store);
  bootstrap = std::make_unique<Bootstrap>(commStore, config.rank, config.nranks, config.timeout);
  loop = std::make_unique<EventLoop>("gyre-progress");
  LinkConfig link;
  link.jobId = config.jobId;
  link.secret = config.secret;
  link.rank = config.rank;
  link.nranks = config.nranks;
  link.nSlots = config.nSlots;
  link.slotBytes = config.slotBytes;
  link.tcpCongestion = config.tcpCongestion;
  tcp = std::make_unique<TcpTransport>(*loop, link, listenHost);

  PeerInfo self;
  self.rank = config.rank;
  self.hostId = localHostId();
  if (config.transport == "auto" || config.transport == "shm") {
    shm = std::make_unique<ShmTransport>(*tcp, link, config.shmDir, config.transport == "shm");
  }
  if (config.transport == "auto" || config.transport == "rdma") {
#ifdef GYRE_HAVE_IBVERBS
    rdma = std::make_unique<RdmaTransport>(*tcp, link, config.ibHca, config.ibGidIndex,
                                           config.transport == "rdma");
#else
    rdmaUnusable = "this build of gyre has no rdma transport (libibverbs-dev was missing)";
#endif
  }
  self.cpus = allowedCpus();
  tcp->publish(self);
  if (shm) shm->publish(self);
#ifdef GYRE_HAVE_IBVERBS
  if (rdma) {
    rdma->publish(self);
    if (!self.rdma) rdmaUnusable = static_cast<RdmaTransport&>(*rdma).unusableReason();
  }
#endif
  const auto all = bootstrap->allGather(self.encode());
  for (const auto& text : all) peers.push_back(PeerInfo::decode(text));
  for (int r = 0; r < config.nranks; ++r) {
    if (peers[r].rank != r) fail(Code::internal, who() + ": rendezvous returned a wrong rank");
  }
  board = std::make_unique<FailureBoard>(commStore, config.rank, config.nranks);
  // Polling pays only while no rank waits for a core: one thread per rank on this host. A
  // launcher may bind each rank to cores of its own (gyre-run does), so count the host's.
  const auto hosts = coresByHost(peers);
  const auto& host = hosts.at(self.hostId);
  const bool ranksHaveCores = host.ranks <= std::max<int>(1, int(host.cpus.size()));
  // Where ranks outnumber cores a waiter polls too, but hands its core over between looks
  // (sched_yield) so that the rank it waits for can run: 4 ranks on 2 cores, 8 B all-reduce
  // 64 -> 28 µs, 8 MiB 3.9 -> 3.2 ms against sleeping at once.
  yieldWhileSpinning = !ranksHaveCores;
  spin = config.spin;
  if (spin.count() < 0) spin = std::chrono::microseconds(ranksHaveCores ? 50 : 200);
  // Collectives move at the pace of their slowest link: shared memory only if every peer is
  // reached over it.
  const bool allShm = shm && std::all_of(peers.begin(), peers.end(), [&](const PeerInfo& p) {
                        return p.rank == self.rank || shm->canConnect(self, p);
                      });
  tuner = std::make_unique<Tuner>(
      allShm ? Tuner::sharedMemory(ranksHaveCores) : Tuner::tcpLoopback(coresPerRank(peers)),
      config.algorithm, size_t(config.nSlots / 2) * config.slotBytes, config.slotBytes);
  sentTo.assign(config.nranks, 0);
  receivedFrom.assign(config.nranks, 0);
  // Ring neighbours now (in ascending order, like execute()); other pairs on first use.
  if (config.nranks > 1) {
    const int next = (config.rank + 1) % config.nranks;
    const int prev = (config.rank + config.nranks - 1) % config.nranks;
    connection(std::min(next, prev), 0);
    connection(std::max(next, prev), 0);
  }
  if (logEnabled(LogLevel::info)) {
    int byShm = 0, byRdma = 0, byTcp = 0;
    for (const PeerInfo& p : peers) {
      if (p.rank == self.rank) continue;
      const bool overShm = shm && shm->canConnect(self, p);
      (overShm ? byShm : rdma && rdma->canConnect(self, p) ? byRdma : byTcp) += 1;
    }
    const std::string transports = "peers over shm " + std::to_string(byShm) + ", rdma " +
                                   std::to_string(byRdma) + ", tcp " + std::to_string(byTcp);
    const auto spinUs = std::chrono::duration_cast<std::chrono::microseconds>(spin).count();
    const std::string rings = config.channels > 0
                                  ? std::to_string(config.channels) + " (GYRE_CHANNELS)"
                                  : "up to " + std::to_string(tuner->maxChannels()) + ", one per " +
                                        std::to_string(Tuner::kBytesPerExtraChannel >> 20) + " MiB";
    GYRE_LOG(info, who() + " of " + std::to_string(config.nranks) + ": ready, listening on " +
                       listenHost + ":" + std::to_string(self.tcpPort) + "; cpus " +
                       formatCpuList(self.cpus) + ", waiters poll " + std::to_string(spinUs) +
                       " us" + (yieldWhileSpinning ? " yielding" : "") + "; " + transports +
                       ", rings per call: " + rings);
  }
}

Connection& Communicator::Impl::connection(int peer, int channel) {
  const auto key = std::make_pair(peer, channel);
  auto it = connections.find(key);
  if (it != connections.end()) return *it->second;
  const auto deadline = Clock::now() + config.timeout;
  auto conn = transportFor(peer).connect(peers[peer], channel, deadline, [this]() -> Status {
    if (abortFlag.load()) return {Code::aborted, "aborted by gyreCommAbort"};
    return board ? board->recorded() : Status{};
  });
  GYRE_LOG(trace, who() + ": connected to rank " + std::to_string(peer) + " channel " +
                      std::to_string(channel) + " over " + conn->transportName());
  return *connections.emplace(key, std::move(conn)).first->second;
}

Transport& Communicator::Impl::transportFor(int peer) {
  const PeerInfo& self = peers[config.rank];
  if (shm && shm->canConnect(self, peers[peer])) return *shm;
  if (config.transport == "shm") {
    const std::string why = !shm->unusableReason().empty() ? "this rank: " + shm->unusableReason()
                            : peers[peer].hostId != self.hostId
                                ? "it runs on another host (" + peers[peer].hostId + ")"
                                : "its shared memory is unusable (see its log)";
    fail(Code::invalid_usage, who() + ": GYRE_TRANSPORT=shm but rank " + std::to_string(peer) +
                                  " cannot be reached over shared memory: " + why);
  }
  if (rdma && rdma->canConnect(self, peers[peer])) return *rdma;
  if (config.transport == "rdma") {
    const std::string why = !rdmaUnusable.empty() ? "this rank: " + rdmaUnusable
                                                  : "it has no usable rdma device (see its log)";
    fail(Code::invalid_usage, who() + ": GYRE_TRANSPORT=rdma but rank " + std::to_string(peer) +
                                  " cannot be reached over rdma: " + why);
  }
  return *tcp;
}

void Communicator::Impl::drainQueue() {
  std::unique_lock lock(queueMutex);
  if (std::this_thread::get_id() == worker.get_id()) return;  // the worker runs in order
  queueChanged.wait(lock, [&] { return unfinished == 0; });
}

void Communicator::Impl::run(OpDesc desc, const std::function<void(const OpContext&)>& body,
                             bool p2p) {
  std::lock_guard lock(opMutex);
  if (Status s = poisoned(); !s.ok()) {
    throw Failure(s.code, who() + ": " + collectiveName(desc.coll) +
                              " refused: the communicator failed earlier: " + s.message);
  }
  OpContext ctx;
  ctx.desc = desc;
  if (!p2p) ctx.desc.seq = ++seq;
  ctx.rank = config.rank;
  ctx.nranks = config.nranks;
  ctx.timeout = config.timeout;
  ctx.deadline = Clock::now() + config.timeout;
  ctx.abort = &abortFlag;
  ctx.spin = spin;
  ctx.yieldWhileSpinning = yieldWhileSpinning;
  // A send only reads its buffer, so its slots may leave straight from it (registered memory
  // over rdma); collectives write where they read (in place, or the output they forward).
  ctx.inputReadOnly = p2p;
  if (!p2p) {
    board->started(ctx.desc);
    ctx.checkPeers = [board = board.get(), desc = ctx.desc] { return board->disagreement(desc); };
  }
  try {
    body(ctx);
  } catch (const Failure& f) {
    Status s = f.status();
    if (s.code == Code::timeout && !p2p) s.message += "; " + board->attribute(ctx.desc);
    // Record the cause before closing: the neighbours woken by the close then report it.
    s = board->report(s, ctx.desc);
    setPoison(s);
    // Closing our connections makes every neighbour fail now instead of at its deadline.
    for (auto& [key, conn] : connections) conn->close();
    throw Failure(s);
  }
  if (!p2p) board->completed(ctx.desc);
}

Communicator::Communicator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

std::unique_ptr<Communicator> Communicator::create(CommConfig config) {
  auto impl = std::make_unique<Impl>();
  impl->config = std::move(config);
  impl->init("");
  return std::unique_ptr<Communicator>(new Communicator(std::move(impl)));
}

std::unique_ptr<Communicator> Communicator::split(int color, int key, const CommConfig* overrides) {
  auto& d = *impl_;
  d.drainQueue();
  std::unique_ptr<Impl> child;
  {
    std::lock_guard lock(d.opMutex);
    if (Status s = d.poisoned(); !s.ok()) {
      throw Failure(s.code,
                    d.who() + ": split refused: the communicator failed earlier: " + s.message);
    }
    const int index = d.splits++;
    const auto all = d.bootstrap->allGather(std::to_string(color) + " " + std::to_string(key));
    std::vector<std::pair<int, int>> members;  // (key, parent rank) of my color
    for (int r = 0; r < d.config.nranks; ++r) {
      int c = 0, k = 0;
      if (std::sscanf(all[r].c_str(), "%d %d", &c, &k) != 2) {
        fail(Code::internal, d.who() + ": split: malformed entry from rank " + std::to_string(r));
      }
      if (c == color) members.emplace_back(k, r);
    }
    if (color < 0) return nullptr;
    std::sort(members.begin(), members.end());
    const auto me = std::find(members.begin(), members.end(), std::make_pair(key, d.config.rank));
    child = std::make_unique<Impl>();
    child->config = d.config;
    child->config.rank = int(me - members.begin());
    child->config.nranks = int(members.size());
    if (overrides) {
      if (overrides->timeout.count()) child->config.timeout = overrides->timeout;
      if (overrides->nSlots) child->config.nSlots = overrides->nSlots;
      if (overrides->slotBytes) child->config.slotBytes = overrides->slotBytes;
      if (!overrides->algorithm.empty()) child->config.algorithm = overrides->algorithm;
      if (overrides->channels > 0) child->config.channels = overrides->channels;
    }
    child->rootStore = d.rootStore;
    child->hostedServer = d.hostedServer;
    child->init(d.storeNamespace + "/split" + std::to_string(index) + "/color" +
                std::to_string(color));
  }
  return std::unique_ptr<Communicator>(new Communicator(std::move(child)));
}

std::shared_ptr<Work> Communicator::async(std::function<void(Communicator&)> body) {
  auto& d = *impl_;
  auto work = std::make_shared<Work>();
  std::lock_guard lock(d.queueMutex);
  if (!d.worker.joinable()) {
    d.worker = std::thread([&d] {
      std::unique_lock lock(d.queueMutex);
      while (true) {
        d.queueChanged.wait(lock, [&] { return d.stopWorker || !d.queue.empty(); });
        if (d.queue.empty()) return;  // stopping, nothing left
        auto next = std::move(d.queue.front());
        d.queue.pop_front();
        lock.unlock();
        next();
        lock.lock();
        --d.unfinished;
        d.queueChanged.notify_all();
      }
    });
  }
  ++d.unfinished;
  d.queue.push_back([this, work, body = std::move(body)] {
    try {
      body(*this);
      work->finish({});
    } catch (const Failure& f) {
      work->finish(f.status());
    } catch (const std::exception& e) {
      work->finish({Code::internal, impl_->who() + ": " + e.what()});
    }
  });
  d.queueChanged.notify_all();
  return work;
}

Communicator::~Communicator() {
  auto& d = *impl_;
  if (d.worker.joinable()) {
    {
      std::lock_guard lock(d.queueMutex);
      d.stopWorker = true;  // the worker finishes what is queued (each call has a deadline)
    }
    d.queueChanged.notify_all();
    d.worker.join();
  }
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

#ifdef GYRE_HAVE_IBVERBS
namespace {

// GPUDirect RDMA for device memory: through a dma-buf where the GPU driver exports one, else
// ibv_reg_mr on the device address (a peer-memory module, nvidia-peermem, makes that work).
// 0 when neither does: calls from the buffer then stage through host memory.
uint64_t registerDeviceMemory(RdmaTransport& rdma, const void* p, size_t bytes,
                              const std::string& who) {
  std::string viaDmabuf, viaPeerMemory;
  uint64_t offset = 0;
  if (const int fd = cudaDmabufOf(p, bytes, offset, viaDmabuf); fd >= 0) {
    const DmabufRange range{fd, offset};
    try {
      const uint64_t id = rdma.registerUser(p, bytes, &range);
      close(fd);  // the region holds its own reference
      GYRE_LOG(info, who + ": gyreCommRegister: device buffer at " + pointerText(p) +
                         " registered for GPUDirect RDMA through a dma-buf");
      return id;
    } catch (const Failure& f) {
      viaDmabuf = f.status().message;
    }
    close(fd);
  }
  try {
    const uint64_t id = rdma.registerUser(p, bytes);
    GYRE_LOG(info, who + ": gyreCommRegister: device buffer at " + pointerText(p) +
                       " registered for GPUDirect RDMA through peer memory");
    return id;
  } catch (const Failure& f) {
    viaPeerMemory = f.status().message;
  }
  GYRE_LOG(info, who + ": gyreCommRegister: no GPUDirect RDMA for the device buffer at " +
                     pointerText(p) + " (dma-buf: " + viaDmabuf + "; peer memory: " +
                     viaPeerMemory + "): calls from it stage through host memory");
  return 0;
}

}  // namespace
#endif

void* Communicator::registerBuffer(const void* p, size_t bytes) {
  auto& d = *impl_;
  if (!p || bytes == 0) {
    fail(Code::invalid_argument, d.who() + ": gyreCommRegister: null buffer or size 0");
  }
  std::lock_guard lock(d.registrationsMutex);
  if (d.registrations.size() >= 1024) {
    fail(Code::invalid_usage, d.who() + ": gyreCommRegister: 1024 buffers are registered " +
                                  "already; deregister some first");
  }
  auto reg = std::make_unique<Impl::Registration>();
  reg->p = p;
  reg->bytes = bytes;
#ifdef GYRE_HAVE_IBVERBS
  if (d.rdma && d.peers[d.config.rank].rdma) {
    auto& rdma = static_cast<RdmaTransport&>(*d.rdma);
    reg->rdmaId = isCudaDeviceMemory(p) ? registerDeviceMemory(rdma, p, bytes, d.who())
                                        : rdma.registerUser(p, bytes);
  }
#endif
  const Impl::Registration* handle = reg.get();
  d.registrations.emplace(handle, std::move(reg));
  return const_cast<Impl::Registration*>(handle);
}

void Communicator::deregisterBuffer(void* handle) {
  auto& d = *impl_;
  std::lock_guard lock(d.registrationsMutex);
  auto it = d.registrations.find(static_cast<const Impl::Registration*>(handle));
  if (it == d.registrations.end()) {
    fail(Code::invalid_argument,
         d.who() + ": gyreCommDeregister: not a handle gyreCommRegister gave this communicator");
  }
#ifdef GYRE_HAVE_IBVERBS
  if (it->second->rdmaId) static_cast<RdmaTransport&>(*d.rdma).deregisterUser(it->second->rdmaId);
#endif
  d.registrations.erase(it);
}

bool Communicator::sendsUnstaged(int peer, const void* buf, size_t bytes) {
  return impl_->supportsUnstagedSend(peer, buf, bytes);
}

bool Communicator::Impl::supportsUnstagedSend(int peer, const void* p, size_t bytes) {
  if (!p || bytes == 0 || peer < 0 || peer >= config.nranks || peer == config.rank) return false;
#ifdef GYRE_HAVE_IBVERBS
  if (!rdma || !peers[config.rank].rdma || !rdma->canConnect(peers[config.rank], peers[peer]) ||
      (shm && shm->canConnect(peers[config.rank], peers[peer]))) {
    return false;  // transportFor() picks another transport for this peer
  }
  // The adapter's regions, not the handles: a region re-registered smaller covers less.
  return static_cast<RdmaTransport&>(*rdma).covers(p, bytes);
#endif
  return false;
}

uint64_t Communicator::directSends() const {
  std::lock_guard lock(impl_->opMutex);
  uint64_t total = 0;
  for (const auto& [key, conn] : impl_->connections) total += conn->directSends();
  return total;
}

void Communicator::abort() {
  impl_->abortFlag.store(true);
  impl_->raiseDeviceAbort();
  impl_->setPoison({Code::aborted, impl_->who() + ": communicator aborted by gyreCommAbort"});
}

Status Communicator::asyncError() const {
  impl_->pollDeviceFailure();
  return impl_->poisoned();
}

}  // namespace gyre
