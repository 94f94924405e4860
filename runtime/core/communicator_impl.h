// The communicator's state, shared by communicator.cc (set-up, teardown, split, the worker),
// collectives.cc (argument checks and algorithm choice) and group.cc (fusion and batching).
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_set>

#include "algorithms/host_prims.h"
#include "algorithms/oneshot.h"
#include "algorithms/peer_recorder.h"
#include "base/call_lock.h"
#include "base/function_ref.h"
#include "runtime/core/call_queue.h"
#include "runtime/core/channel_workers.h"
#include "runtime/core/communicator.h"
#include "runtime/core/measured_choice.h"
#include "runtime/core/tuner.h"
#include "transport/shm/segment.h"
#include "transport/transport.h"

namespace gyre {

class Bootstrap;
class CudaStaging;
class DeviceLinks;
class EventLoop;
class FailureBoard;
class StoreServer;
class Transports;

// Whether two byte ranges share a byte.
inline bool overlaps(const void* a, size_t aBytes, const void* b, size_t bBytes) {
  const auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  return aBytes && bBytes && x < y + bBytes && y < x + aBytes;
}

struct Communicator::Impl {
  CommConfig config;
  std::string storeNamespace;                 // this communicator's prefix in the store
  std::shared_ptr<Store> rootStore;           // the job's store, shared with children
  std::shared_ptr<StoreServer> hostedServer;  // rank 0, torch-style; children keep it alive
  std::unique_ptr<Bootstrap> bootstrap;
  std::unique_ptr<FailureBoard> board;
  std::vector<PeerInfo> peers;
  std::unique_ptr<EventLoop> loop;
  std::unique_ptr<Transports> transports;
  struct Registration {
    const void* p = nullptr;
    size_t bytes = 0;
    std::vector<uint64_t> handles;  // per transport (Transports::registerMemory)
  };
  std::mutex registrationsMutex;
  std::map<const Registration*, std::unique_ptr<Registration>> registrations;
  std::map<std::pair<int, int>, std::shared_ptr<Connection>> connections;  // (peer, channel)
  std::vector<Connection*> connectionList;  // the same, flat: what every window call looks at
  std::vector<int> connectedPeers;          // per channel: peers with a connection on it
  std::unique_ptr<Tuner> tuner;
  // Where ranks 0 and placementPartner probe where their CPUs sit during calls (host_window.cc):
  // the tuner for the other placement, swapped in when a probe finds the CPUs moved; the predicted
  // time between probes (rank 0's setting, 0: never) and how much has passed since the last.
  std::unique_ptr<Tuner> otherPlacement;
  double placementProbeUs = 0;
  double sincePlacementProbeUs = 0;
  uint64_t placementProbes = 0, placementChanges = 0;
  long placementSetUpNs = 0;  // rank 0's round trip at set-up (0: none measured)
  // The measured choice (runPlanned): rank 0's GYRE_TUNE where every rank has a core and the
  // host window is up, the tuner not forced.
  bool measuring = false;
  MeasuredChoice measured;
  // Hosts and ranks per host where ranks lie host by host (else 1, 1): the hierarchical plans.
  int planHosts = 1;
  int planLocalRanks = 1;
  // The host window and its one-shot collectives (host_window.cc), where every rank shares
  // this host over shared memory; null elsewhere.
  ShmSegment windowSegment;
  std::unique_ptr<OneShot> oneShot;
  BusyPhase busy;                    // of every wait (config.spin resolved)
  bool ranksHaveCores = false;       // one core per rank on this host
  std::vector<bool> reversedChains;  // per root: its chain broadcast runs to root - 1 first
  bool ranksPinnedInBlocks = false;  // ranks share cores, each block on CPUs of its own
  // The rank whose CPU rank 0 probes against (host_window.cc): 1 where every rank has a core,
  // the first rank of another block where ranks are pinned in blocks, else none (-1).
  int placementPartner = -1;
  std::unique_ptr<SpinBudget> spinBudget;  // busy.budget's: GYRE_SPIN_US unset, a core per rank
  int splits = 0;                          // split() calls so far: names children's namespaces
  int shrinks = 0;                         // shrink() calls so far: the same
  std::vector<std::byte> groupStaging;     // fused all-reduces of groups
  ChannelWorkers channelWorkers;           // channels 1.. of multi-channel calls (under opMutex)

  CallLock opMutex;  // every call and every look at the call state
  // runInWindow's context, kept from call to call: a call sets what changes (the call, its
  // deadline and flags), a dozen stores fewer than a fresh one on a tiny call's path.
  OpContext windowContext;
  bool windowContextSet = false;
  uint64_t straightWindowCalls = 0;
  struct WindowBoardCheck {  // windowContext.checkPeers
    Impl* impl;
    Status operator()() const;
  } windowBoardCheck{this};
  // What a call's context starts from: copied, where value-initialising one in place took a
  // `rep stos` (tens of cycles) on every call.
  const OpContext blankContext{};
  uint64_t seq = 0;
  std::vector<uint64_t> sentTo, receivedFrom;  // point-to-point sequence numbers per peer
  std::unordered_set<int> loggedChoices;       // (collective, algorithm, size class) logged once
  // The last choice per collective: a loop of same-sized calls asks the tuner once.
  struct LastChoice {
    size_t bytes = SIZE_MAX;
    Algorithm algorithm = Algorithm::ring;
    double predictedUs = 0;         // counted toward the next placement probe
    bool placementMatters = false;  // the other placement chooses or stores otherwise
  };
  LastChoice lastChoice[16];
  std::atomic<bool> abortFlag{false};
  std::atomic<bool> revoked{false};  // gyreCommRevoke: only split, shrink and destroy remain
  mutable std::mutex poisonMutex;
  Status poison;
  std::atomic<bool> poisonSet{false};  // poison is not ok: a call needs the lock only then

  // Stream-ordered calls (stream_calls.cc): staging made on first use. A shared_ptr so that
  // builds without CUDA need not see the type.
  std::mutex stagingMutex;
  std::shared_ptr<CudaStaging> staging;
  // cuda_ipc links (device_links.h): set up by the first call that may use them.
  std::shared_ptr<DeviceLinks> deviceLinks;
  bool deviceLinksTried = false;
  // Polls the kernels' failure words into the poison (no-op without CUDA or links).
  void pollDeviceFailure();
  void raiseDeviceAbort();

  // The calls of async(), in issue order: on their worker thread (started on first use) or on
  // a thread that waits for them. Shared with their Work handles, which may outlive this.
  std::shared_ptr<CallQueue> calls = std::make_shared<CallQueue>();

  ~Impl();
  std::string who() const { return "rank " + std::to_string(config.rank); }

  void init(const std::string& explicitNamespace);
  void setUpWithPeers(const PeerInfo& self);
  // Where every rank shares this host over memory: rank 0 creates the host window, every rank
  // maps it, and all agree to use it (host_window.cc).
  void setUpHostWindow(bool allMemory);
  // `directRead`: the direct-read collective, else the one-shot collective of ctx.
  void runOneShot(const OpContext& ctx, const void* send, void* recv, bool directRead);
  // runOneShot's work, inline in host_window.cc's two callers (runOneShot, runInWindow).
  void callWindow(const OpContext& ctx, const void* send, void* recv, bool directRead);
  [[noreturn, gnu::cold, gnu::noinline]] void failStrayLinkData(const OpDesc& desc,
                                                                const Connection& conn,
                                                                const SlotMeta& meta) const;
  void enableDirectRead();  // at set-up, once the window is up
  // Within call ctx, at the same call on every rank: ranks 0 and 1 measure again how far apart
  // their CPUs sit; where they moved, every rank swaps in the other placement's tuner.
  void remeasurePlacement(const OpContext& ctx);
  // Whether slots (and the window's data blocks) get streaming stores: the placement's tuner
  // says so, or GYRE_SLOT_STORES=streaming.
  bool streamsSlots() const {
    return tuner->link().slotsStreamed || config.slotStores == CommConfig::SlotStores::streaming;
  }
  // How one call writes the shared-memory slots, decided once per call: the tuner's rule
  // (Tuner::slotWrites), overridden by GYRE_SLOT_STORES=streaming (streamed, never spread) and
  // GYRE_SLOT_SPREAD=on|off.
  Tuner::SlotWrites slotWrites(Collective coll, size_t bytes) const {
    Tuner::SlotWrites w = tuner->slotWrites(coll, bytes);
    if (config.slotStores == CommConfig::SlotStores::streaming) w = {true, false};
    if (config.slotSpread != CommConfig::SlotSpread::automatic) {
      w.spread = config.slotSpread == CommConfig::SlotSpread::on;
    }
    return w;
  }
  // Claims this rank of the job for this process, or fails naming the process that holds it.
  void claimRank(Store& store);
  std::shared_ptr<Store> openStore();
  Connection& connection(int peer, int channel);
  // The plan of the call `desc` names, `bytes` long (the tuner's choice is logged once per
  // size class): algorithm, channels and step sizes (runtime/core/plan).
  CollectivePlan plan(const OpDesc& desc, size_t bytes);  // the tuner's algorithm
  CollectivePlan plan(const OpDesc& desc, size_t bytes, Algorithm algorithm);

  void setPoison(const Status& s) {
    std::lock_guard lock(poisonMutex);
    if (poison.ok()) poison = s;
    poisonSet.store(!poison.ok(), std::memory_order_release);
  }
  // gyreCommAbort's and gyreCommRevoke's first step: waits end at once, calls fail with `cause`.
  void stopCalls(const Status& cause) {
    abortFlag.store(true);
    raiseDeviceAbort();
    setPoison(cause);
  }
  Status poisoned() const {
    if (!poisonSet.load(std::memory_order_acquire)) return {};
    std::lock_guard lock(poisonMutex);
    return poison;
  }

  // Waits until every asynchronous call issued earlier finished (issue order).
  void drainQueue();
  // A child's state before its init(): this communicator's settings (and rendezvous) with
  // `rank` of `nranks` and the non-zero `overrides` (split, shrink).
  std::unique_ptr<Impl> child(int rank, int nranks, const CommConfig* overrides) const;
  // Runs `body(ctx)` under the op lock with a fresh sequence number. Point-to-point calls
  // (`p2p`) are numbered by `body` per pair and direction (sentTo, receivedFrom): other
  // ranks take no part, so they neither count nor publish progress.
  void run(OpDesc desc, FunctionRef<void(const OpContext&)> body, bool p2p = false);
  // A collective of `bytes` the tuner sizes: in the window where runInWindow takes it, else
  // run(runPlanned).
  void runCollective(const OpDesc& desc, size_t bytes, const void* send, void* recv);
  // run(runPlanned)'s work for a call that goes to the window (the tuner's choice for the last
  // call of this collective and size, no placement probe due), without its layers: far apart
  // a tiny call's own stores set its pace (docs/perf/small_calls.md). False, having done
  // nothing, for any other call. host_window.cc.
  bool runInWindow(const OpDesc& desc, size_t bytes, const void* send, void* recv);
  // run's parts: the failure a call meets once the communicator failed; the context of a call
  // (a fresh sequence number unless `p2p`); and what a failed call does (records and publishes
  // the cause, stops the window, closes the connections, throws).
  void refuseIfFailed(const OpDesc& desc) const;
  OpContext callContext(const OpDesc& desc, bool p2p) {
    OpContext ctx = blankContext;
    ctx.rank = config.rank;
    ctx.nranks = config.nranks;
    ctx.timeout = config.timeout;
    ctx.abort = &abortFlag;
    ctx.busy = busy;
    setCall(ctx, desc, p2p);
    return ctx;
  }
  // What changes from call to call in a context: the call, its deadline and its flags.
  void setCall(OpContext& ctx, const OpDesc& desc, bool p2p) {
    ctx.desc = desc;
    if (!p2p) ctx.desc.seq = ++seq;
    ctx.deadline = coarseNow() + config.timeout;
    // A send only reads its buffer, so its slots may leave straight from it (registered memory
    // over rdma, the receiver's single copy over shm). So do the collectives that move data
    // without reducing it: they never write their input (in place, their output writes other
    // blocks). Reductions write where they read.
    ctx.inputReadOnly = p2p || !reduces(desc.coll);
    ctx.receiversInCall = !p2p;
    // Only sending: a broadcast's or scatter's root, a gather's leaf. With a core each, its
    // copy into the slots may run beside the receiver's copy out (transport/shm: where it runs
    // fast).
    const bool root = desc.root == config.rank;
    ctx.senderIdle =
        ranksHaveCores &&
        ((root && (desc.coll == Collective::broadcast || desc.coll == Collective::scatter)) ||
         (!root && desc.coll == Collective::gather));
  }
  // Whether a call `last` stands for counts toward the next placement probe, and whether it
  // reaches it (runPlanned probes there). Every rank counts the same predictions of the same
  // calls, so all probe at the same call.
  bool countsTowardProbe(const LastChoice& last, size_t bytes) const {
    return placementProbeUs > 0 && bytes > 0 && last.placementMatters;
  }
  bool reachesProbe(const LastChoice& last) const {
    return sincePlacementProbeUs + last.predictedUs >= placementProbeUs;
  }
  [[noreturn, gnu::cold]] void failCall(const OpContext& ctx, const Failure& f, bool p2p);
  // The sends and receives of a group, all moving together in rounds (group.cc).
  void sendRecvBatch(const std::vector<GroupOp>& ops);
  // Opens the connections `algo` needs, in ascending rank order (every rank dials the higher
  // ranks and waits for the lower, so no two ranks wait on each other), then runs it.
  template <class Algo>
  void execute(const OpContext& ctx, const void* input, void* output, Algo&& algo,
               int channel = 0) {
    // Once a channel reaches every peer, no algorithm can need a new connection on it.
    const bool allConnected = size_t(channel) < connectedPeers.size() &&
                              connectedPeers[size_t(channel)] == config.nranks - 1;
    if (!allConnected) {
      PeerRecorder recorder;
      algo(recorder);
      for (int peer : recorder.peers()) connection(peer, channel);
    }
    HostPrims prims(
        ctx, [this, channel](int peer) -> Connection& { return connection(peer, channel); }, input,
        output);
    algo(prims);
    prims.finish();
  }
  // `channels` independent rings: body(ctx, channel) runs on one thread per channel (channel
  // 0 on the caller, the others on channelWorkers), each on its own connections, opened here
  // first. The first failure stops the other channels.
  // Defined in collectives.cc, its only user.
  template <class Body>
  void runChannels(const OpContext& ctx, int channels, const Body& body);
  // Plans the call ctx.desc names (runtime/core/plan: the tuner's algorithm, channels, steps)
  // and runs every channel's part of it (algorithms/collective.h); `bytes` sizes the choice.
  void runPlanned(const OpContext& ctx, size_t bytes, const void* send, void* recv);
  // runPlanned's call by `algorithm`.
  void runAlgorithm(const OpContext& ctx, Algorithm algorithm, size_t bytes, const void* send,
                    void* recv);
  // runPlanned's call of a class the measured choice has not settled: a timed trial, or, once
  // every trial ran, the decision (every rank's times shared through the window), then the call.
  void runMeasured(const OpContext& ctx, Algorithm modelPick, size_t bytes, const void* send,
                   void* recv);
  // runPlanned's reduce-scatter by recursive doubling: an all-reduce into wholeBuffer.
  void reduceScatterByDoubling(const OpContext& ctx, const CollectivePlan& plan, const void* send,
                               void* recv);
  std::vector<std::byte> wholeBuffer;  // as large as the largest such reduce-scatter's input
  Algorithm choose(Collective coll, size_t bytes);

  void checkType(const char* what, DataType type, RedOp op) const;
  void checkRoot(const char* what, int root, const char* role = "root") const;
  // Inline, its messages out of line (failBuffers): a tiny call's path feels every frame.
  void checkBuffers(const char* what, const void* send, size_t sendBytes, const void* recv,
                    size_t recvBytes, bool sendUsed, const void* inPlaceSend) const {
    if (sendUsed && sendBytes && !send) failBuffers(what, "sendbuff is null");
    if (recvBytes && !recv) failBuffers(what, "recvbuff is null");
    // No look for CUDA device memory here: the C API sends such buffers to the stream-ordered
    // form before a host call is made (one look per call, where tiny calls feel every one).
    if (sendUsed && send != inPlaceSend && overlaps(send, sendBytes, recv, recvBytes)) {
      failBuffers(what, "sendbuff and recvbuff overlap without being in place");
    }
  }
  [[noreturn, gnu::cold, gnu::noinline]] void failBuffers(const char* what, const char* why) const;
  size_t checkedBytes(const char* what, size_t count, DataType type, size_t blocks = 1) const;
  // Block i of a variable-count call (displacement + count, in elements) ends within size_t.
  void checkedEnd(const char* what, size_t displ, size_t count, const char* side, int i) const;

  // Communicator::send and sendUnstaged.
  void send(const void* buf, size_t count, DataType type, int peer, bool unstaged);
  // The transport that reaches `peer` sends from [p, p + bytes) without the CPU reading it.
  bool supportsUnstagedSend(int peer, const void* p, size_t bytes);
};

}  // namespace gyre
