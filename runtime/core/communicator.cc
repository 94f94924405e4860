#include "runtime/core/communicator.h"

#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <sched.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include <algorithm>
#include <limits>
#include <map>
#include <mutex>
#include <set>

#include "base/auth.h"
#include "base/device_memory.h"
#include "base/log.h"
#include "runtime/core/agreement.h"
#include "runtime/core/bootstrap.h"
#include "runtime/core/communicator_impl.h"
#include "runtime/core/failure_board.h"
#include "runtime/store/server.h"
#include "runtime/store/tcp_store.h"
#include "transport/event_loop.h"
#include "transport/registry.h"

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
  std::set<std::vector<int>> blocks;  // the distinct CPU sets its ranks may run on
  int ranks = 0;
  bool coreForEveryRank() const { return ranks <= std::max<int>(1, int(cpus.size())); }
  // Every rank held on CPUs that only the ranks of its block share (gyre-run --bind auto),
  // so the scheduler never moves one onto another block's CPU.
  bool pinnedInBlocks() const {
    size_t inBlocks = 0;
    for (const auto& b : blocks) {
      if (b.empty()) return false;  // a rank whose CPUs are unknown
      inBlocks += b.size();
    }
    return blocks.size() > 1 && inBlocks == cpus.size();  // disjoint: no CPU in two blocks
  }
};
std::map<std::string, HostCores> coresByHost(const std::vector<PeerInfo>& peers) {
  std::map<std::string, HostCores> hosts;
  for (const auto& p : peers) {
    auto& h = hosts[p.hostId];
    h.cpus.insert(p.cpus.begin(), p.cpus.end());
    h.blocks.insert(p.cpus);
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

// Names this process to the other processes of its jobs, so that a second process claiming
// the same rank is told who holds it.
const std::string& processIdentity() {
  static const std::string id = [] {
    char host[256] = {};
    gethostname(host, sizeof(host) - 1);
    return "pid " + std::to_string(getpid()) + " on " + host + " (" + auth::randomHex(4) + ")";
  }();
  return id;
}

// Once per process: a job without a secret is open to anyone who reaches its ports.
void warnUnauthenticated(const CommConfig& config) {
  static std::once_flag once;
  std::call_once(once, [&] {
    GYRE_LOG(warn, "rank " + std::to_string(config.rank) + ": job '" + config.jobId +
                       "' has no secret, so its connections are not authenticated: anyone who "
                       "reaches the rendezvous or a rank's port can join it or send it data. "
                       "Set GYRE_SECRET to the same value on every rank and the rendezvous "
                       "(gyre-run on one machine and gyreGetUniqueId make one themselves)");
  });
}

// The job-level conflict a rank recorded (a rank claimed twice), or ok.
Status jobConflict(Store& store) {
  try {
    return {Code::invalid_usage, store.get("conflict", std::chrono::milliseconds(0))};
  } catch (const Failure&) {
    return {};
  }
}

}  // namespace

void Communicator::Impl::claimRank(Store& store) {
  const std::string key = "members/" + std::to_string(config.rank);
  const std::string holder = store.compareSet(key, "", processIdentity());
  if (holder == processIdentity()) return;
  const std::string why = "rank " + std::to_string(config.rank) + " of job '" + config.jobId +
                          "' was claimed twice: by " + holder + " and by " + processIdentity() +
                          " (two processes given the same rank, one gyreUniqueId used by two "
                          "jobs, or an earlier launch of this job id still running)";
  try {
    store.compareSet("conflict", "", why);  // stops the ranks that are waiting for it
  } catch (const Failure&) {
  }
  fail(Code::invalid_usage, who() + ": " + why);
}

namespace {

// Fails (stopping the other ranks' bootstrap too) where a rank disagrees with this one.
void checkAgreement(Bootstrap& bootstrap, const std::string& who, const Agreement& mine,
                    const std::vector<std::string>& all) {
  for (int r = 0; r < int(all.size()); ++r) {
    const std::string what = mine.differenceFrom(Agreement::decode(all[size_t(r)]), r, who);
    if (!what.empty()) bootstrap.abort(who + ": ranks disagree: " + what);
  }
}

}  // namespace

std::shared_ptr<Store> Communicator::Impl::openStore() {
  if (config.store) return config.store;
  TcpStoreOptions opts;
  opts.jobId = config.jobId;
  opts.secret = config.secret;
  opts.connectTimeout = config.timeout;
  opts.replyTimeout = std::min<std::chrono::milliseconds>(config.timeout, std::chrono::seconds(30));
  opts.deadAfter = config.tcpTimeout;
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
  if (config.secret.empty() && config.nranks > 1) warnUnauthenticated(config);
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
    claimRank(*store);
    const int64_t index = store->add("communicators/" + std::to_string(config.rank), 1);
    storeNamespace = "comm" + std::to_string(index);
  }
  auto commStore = makePrefixStore(storeNamespace, store);
  // Later exchanges (the host window's, split's) also stop for a failure another rank recorded.
  bootstrap = std::make_unique<Bootstrap>(commStore, config.rank, config.nranks, config.timeout,
                                          [this, store] {
                                            if (Status s = jobConflict(*store); !s.ok()) return s;
                                            return board ? board->recorded() : Status{};
                                          });
  loop = std::make_unique<EventLoop>("gyre-progress");
  TransportOptions options;
  options.link.jobId = config.jobId;
  options.link.secret = auth::jobKey(config.secret, config.jobId);
  options.link.rank = config.rank;
  options.link.nranks = config.nranks;
  options.link.nSlots = config.nSlots;
  // A peer may be stalled (stopped, swapping) mid-handshake for as long as any other wait.
  options.link.handshakeTimeout = config.timeout;
  options.link.slotBytes = config.slotBytes;
  options.link.tcpCongestion = config.tcpCongestion;
  options.link.tcpDeadAfter = config.tcpTimeout;
  options.link.singleCopyBytes = config.shmSingleCopyBytes;
  options.listenHost = listenHost;
  options.only = config.transport;
  options.shmDir = config.shmDir;
  options.ibHca = config.ibHca;
  options.ibGidIndex = config.ibGidIndex;
  transports = std::make_unique<Transports>(*loop, options);

  PeerInfo self;
  self.rank = config.rank;
  self.hostId = localHostId();
  self.cpus = allowedCpus();
  transports->publish(self);
  const Agreement agreed = Agreement::of(config);
  const auto all = bootstrap->allGather(agreed.encode() + self.encode());
  checkAgreement(*bootstrap, who(), agreed, all);
  for (const auto& text : all) peers.push_back(PeerInfo::decode(text));
  for (int r = 0; r < config.nranks; ++r) {
    if (peers[r].rank != r) fail(Code::internal, who() + ": rendezvous returned a wrong rank");
  }
  board = std::make_unique<FailureBoard>(commStore, config.rank, config.nranks);
  try {
    setUpWithPeers(self);
  } catch (const Failure& f) {
    // Peers may already be in their first call: one that fails there while this rank still
    // connects closes its connections, and this rank must name the first cause, not the
    // closed socket. A failure of its own here is recorded for the others alike.
    throw Failure(board->report(f.status(), "setting up the communicator"));
  }
}

// Everything after the rendezvous: the tuner, the host window, the ring's connections.
void Communicator::Impl::setUpWithPeers(const PeerInfo& self) {
  // Polling pays only while no rank waits for a core: one thread per rank on this host. A
  // launcher may bind each rank to cores of its own (gyre-run does), so count the host's.
  const auto hosts = coresByHost(peers);
  const auto& host = hosts.at(self.hostId);
  ranksHaveCores = host.coreForEveryRank();
  // Where ranks outnumber cores a waiter polls too, but hands its core over between looks
  // (sched_yield) so that the rank it waits for can run: 4 ranks on 2 cores, 8 B all-reduce
  // 64 -> 28 µs, 8 MiB 3.9 -> 3.2 ms against sleeping at once.
  busy.yield = !ranksHaveCores;
  busy.spin = config.spin;
  if (busy.spin.count() < 0) {
    busy.spin = std::chrono::microseconds(ranksHaveCores ? 2000 : 200);
    // With a core per rank up to 2 ms, shortened while polls run out (base/wait.h) down to
    // 50 µs, the phase that measured best where the ranks of several namespace hosts share
    // cores.
    if (ranksHaveCores) {
      spinBudget = std::make_unique<SpinBudget>(std::chrono::microseconds(50), busy.spin);
      busy.budget = spinBudget.get();
    }
  }
  // Collectives move at the pace of their slowest link: the memory model only if every peer
  // is reached through memory.
  const bool allMemory = std::all_of(peers.begin(), peers.end(), [&](const PeerInfo& p) {
    return p.rank == self.rank || transports->forPeer(self, p).medium() == Medium::memory;
  });
  // Hosts numbered by their first rank. Where ranks lie host by host, L on each, the
  // hierarchical all-reduce is a candidate (algorithms/hierarchical.h).
  std::map<std::string, int> hostIndex;
  for (const auto& p : peers) hostIndex.emplace(p.hostId, int(hostIndex.size()));
  const int nHosts = int(hostIndex.size()), perHost = config.nranks / nHosts;
  bool hostBlocks = nHosts > 1 && perHost > 1 && config.nranks % nHosts == 0;
  for (int r = 0; hostBlocks && r < config.nranks; ++r) {
    hostBlocks = hostIndex.at(peers[r].hostId) == r / perHost;
  }
  const int cores = coresPerRank(peers);
  LinkCost slowest = allMemory    ? Tuner::sharedMemory(ranksHaveCores)
                     : nHosts > 1 ? Tuner::tcpNetwork(cores, config.netGbits)
                                  : Tuner::tcpLoopback(cores, ranksHaveCores);
  ranksPinnedInBlocks = !ranksHaveCores && nHosts == 1 && host.pinnedInBlocks();
  if (ranksPinnedInBlocks) slowest = Tuner::pinnedInBlocks(slowest);
  // The first half of the ranks on one block of CPUs, the second on the other.
  bool inTwoHalves = ranksPinnedInBlocks && host.blocks.size() == 2 && config.nranks % 2 == 0;
  for (int r = 1; inTwoHalves && r < config.nranks; ++r) {
    inTwoHalves = (peers[size_t(r)].cpus == peers[0].cpus) == (r < config.nranks / 2);
  }
  if (inTwoHalves && !allMemory) slowest = Tuner::pinnedInTwoBlocksOverTcp(slowest);
  if (ranksPinnedInBlocks && !allMemory) {
    std::vector<std::vector<int>> cpusOfRank;
    for (const auto& p : peers) cpusOfRank.push_back(p.cpus);
    slowest = Tuner::pinnedInBlocksOverTcp(slowest, cpusOfRank);
    reversedChains = Tuner::reversedChains(cpusOfRank);
  }
  if (config.nranks > 1 && ranksHaveCores) placementPartner = 1;
  for (int r = 1; ranksPinnedInBlocks && placementPartner < 0 && r < config.nranks; ++r) {
    if (peers[size_t(r)].cpus != peers[0].cpus) placementPartner = r;
  }
  tuner = std::make_unique<Tuner>(slowest, config.algorithm,
                                  size_t(config.nSlots / 2) * config.slotBytes, config.slotBytes);
  // No Bruck all-to-all where a link may run over rdma: decided from the parts every rank
  // published, which all ranks hold alike, so every rank plans the same algorithm.
  const bool rdmaMayCarry =
      !allMemory && config.transport != "tcp" &&
      std::any_of(peers.begin(), peers.end(), [](const PeerInfo& p) { return p.part("rdma"); });
  tuner->setBruckAllToAll(!rdmaMayCarry);
  if (hostBlocks) {
    // Priced from what every rank knows alike (the peers' cores, the configured transport),
    // never from this host alone: all ranks must choose the same algorithm.
    const bool everyHostHasCores = std::all_of(
        hosts.begin(), hosts.end(), [](const auto& h) { return h.second.coreForEveryRank(); });
    tuner->setHosts(nHosts, perHost,
                    config.transport == "tcp" ? Tuner::tcpLoopback(cores, everyHostHasCores)
                                              : Tuner::sharedMemory(everyHostHasCores));
    planHosts = nHosts;
    planLocalRanks = perHost;
  }
  sentTo.assign(config.nranks, 0);
  receivedFrom.assign(config.nranks, 0);
  setUpHostWindow(allMemory);
  // Ring neighbours now (in ascending order, like execute()); other pairs on first use.
  if (config.nranks > 1) {
    const int next = (config.rank + 1) % config.nranks;
    const int prev = (config.rank + config.nranks - 1) % config.nranks;
    connection(std::min(next, prev), 0);
    connection(std::max(next, prev), 0);
  }
  // A second process that claimed a rank of this job after this one's bootstrap finished.
  if (Status s = jobConflict(*rootStore); !s.ok()) fail(s.code, who() + ": " + s.message);
  if (logEnabled(LogLevel::info)) {
    std::map<std::string, int> byTransport;
    for (const PeerInfo& p : peers) {
      if (p.rank != self.rank) ++byTransport[transports->forPeer(self, p).name()];
    }
    std::string reached = "peers over";  // "peers over shm 1, rdma 2, tcp 0"
    for (const Transport* t : transports->carriers()) {
      reached += std::string(reached.size() > 10 ? ", " : " ") + t->name() + " " +
                 std::to_string(byTransport[t->name()]);
    }
    const auto spinUs = std::chrono::duration_cast<std::chrono::microseconds>(busy.spin).count();
    const std::string rings = config.channels > 0
                                  ? std::to_string(config.channels) + " (GYRE_CHANNELS)"
                                  : "up to " + std::to_string(tuner->maxChannels()) + ", one per " +
                                        std::to_string(Tuner::kBytesPerExtraChannel >> 20) + " MiB";
    GYRE_LOG(info, who() + " of " + std::to_string(config.nranks) + ": ready, listening on " +
                       transports->address(self) + "; cpus " + formatCpuList(self.cpus) +
                       ", waiters poll " + (spinBudget ? "50-" : "") + std::to_string(spinUs) +
                       " us" + (busy.yield ? " yielding" : "") +
                       (ranksPinnedInBlocks ? " (ranks share cores, pinned in blocks)" : "") +
                       "; " + reached + ", rings per call: " + rings);
  }
}

Connection& Communicator::Impl::connection(int peer, int channel) {
  const auto key = std::make_pair(peer, channel);
  auto it = connections.find(key);
  if (it != connections.end()) return *it->second;
  const auto deadline = Clock::now() + config.timeout;
  auto conn = transports->forPeer(peers[config.rank], peers[peer])
                  .connect(peers[peer], channel, deadline, [this, peer]() -> Status {
                    if (abortFlag.load()) return {Code::aborted, "aborted by gyreCommAbort"};
                    if (Status s = board ? board->recorded() : Status{}; !s.ok()) return s;
                    // A peer that left while its connections were idle (no failure recorded:
                    // it exited) would hold this until the deadline.
                    for (Connection* c : connectionList) {
                      if (c->peer() != peer) continue;
                      if (Status s = c->peerGone(); !s.ok()) return s;
                    }
                    return Status{};
                  });
  GYRE_LOG(trace, who() + ": connected to rank " + std::to_string(peer) + " channel " +
                      std::to_string(channel) + " over " + conn->transportName());
  if (size_t(channel) >= connectedPeers.size()) connectedPeers.resize(size_t(channel) + 1, 0);
  ++connectedPeers[size_t(channel)];
  connectionList.push_back(conn.get());
  return *connections.emplace(key, std::move(conn)).first->second;
}

void Communicator::Impl::drainQueue() {
  calls->drain();
}

void Communicator::Impl::refuseIfFailed(const OpDesc& desc) const {
  if (Status s = poisoned(); !s.ok()) {
    throw Failure(s.code, who() + ": " + collectiveName(desc.coll) +
                              " refused: the communicator failed earlier: " + s.message);
  }
}

void Communicator::Impl::failCall(const OpContext& ctx, const Failure& f, bool p2p) {
  Status s = f.status();
  if (s.code == Code::timeout && !p2p) s.message += "; " + board->attribute(ctx.desc);
  // Record the cause before closing: the neighbours woken by the close then report it.
  s = board->report(s, ctx.desc);
  setPoison(s);
  if (oneShot) oneShot->markFailed(s);  // ranks waiting in the window stop now
  // Closing our connections makes every neighbour fail now instead of at its deadline, and
  // tells those it can why (a neighbour cut off from the failure board still names the
  // rank lost first).
  for (auto& [key, conn] : connections) conn->closeWithCause(s);
  throw Failure(s);
}

void Communicator::Impl::run(OpDesc desc, FunctionRef<void(const OpContext&)> body, bool p2p) {
  std::lock_guard lock(opMutex);
  if (measured.pending()) measured.end(MeasuredChoice::nowNs());
  refuseIfFailed(desc);
  OpContext ctx = callContext(desc, p2p);
  auto askBoard = [&] { return board->disagreement(ctx.desc); };
  if (!p2p) {
    board->started(ctx.desc);
    ctx.checkPeers = askBoard;
  }
  try {
    body(ctx);
  } catch (const Failure& f) {
    failCall(ctx, f, p2p);
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

std::shared_ptr<Work> Communicator::async(std::function<void(Communicator&)> body, bool helpable) {
  auto& d = *impl_;
  auto work = std::make_shared<Work>(d.calls);
  d.calls->push(
      [this, work, body = std::move(body)] {
        try {
          body(*this);
          work->finish({});
        } catch (const Failure& f) {
          work->finish(f.status());
        } catch (const std::exception& e) {
          work->finish({Code::internal, impl_->who() + ": " + e.what()});
        }
      },
      helpable);
  return work;
}

Communicator::~Communicator() {
  auto& d = *impl_;
  d.calls->stop();  // what is queued runs first (each call has a deadline)
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
  if (oneShot) oneShot->markLeft();  // ranks still waiting in the window name this one
  board.reset();
  if (transports) transports->shutdown();
  for (auto& [key, conn] : connections) conn->close();
  if (loop) loop->stop();
  connectionList.clear();
  connections.clear();
}

int Communicator::rank() const {
  return impl_->config.rank;
}
int Communicator::size() const {
  return impl_->config.nranks;
}
std::string Communicator::dataAddress() const {
  return impl_->transports->address(impl_->peers[impl_->config.rank]);
}

void Communicator::abort() {
  impl_->stopCalls({Code::aborted, impl_->who() + ": communicator aborted by gyreCommAbort"});
}

void Communicator::revoke() {
  auto& d = *impl_;
  d.revoked.store(true);
  d.stopCalls({Code::aborted, d.who() + ": communicator revoked by gyreCommRevoke (only split, "
                                        "shrink and destroy remain)"});
  d.drainQueue();                   // the queued calls fail at once
  std::lock_guard lock(d.opMutex);  // and a call on another thread has returned
}

bool Communicator::revoked() const {
  return impl_->revoked.load();
}

Status Communicator::asyncError() const {
  if (impl_->revoked.load()) return {};
  impl_->pollDeviceFailure();
  return impl_->poisoned();
}

}  // namespace gyre
