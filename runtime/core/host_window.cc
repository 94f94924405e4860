// The host window (link/mailbox.h) behind the one-shot collectives (algorithms/oneshot.h):
// one shared-memory segment that every rank of a communicator maps, where all of them share
// this host and reach each other over memory.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "base/copy_bytes.h"
#include "base/log.h"
#include "runtime/core/bootstrap.h"
#include "runtime/core/communicator_impl.h"
#include "runtime/core/failure_board.h"
#include "transport/registry.h"

namespace gyre {

namespace {

// "1" (offered) and the handle.
std::string offerOf(const ShmHandle& h) {
  std::ostringstream out;
  out << '1' << h.pid << ':' << h.fd << ':' << h.inode << ':' << h.device << ':' << h.bytes;
  return out.str();
}

ShmHandle decodeHandle(const std::string& text) {
  ShmHandle h;
  char sep[4];
  std::istringstream in(text);
  in >> h.pid >> sep[0] >> h.fd >> sep[1] >> h.inode >> sep[2] >> h.device >> sep[3] >> h.bytes;
  if (!in) fail(Code::internal, "malformed host window offer '" + text + "'");
  return h;
}

// For the partner (rank 1, or another block's first rank) to map the window and answer rank
// 0's probe (a rank that could not map it never answers: the agreement that follows says why).
constexpr auto kProbeWait = std::chrono::seconds(2);
// Ranks that share cores probe during calls this many times less often (GYRE_PLACEMENT_PROBE_MS).
constexpr double kSharedCoresProbeEvery = 10;
// A kernel copy of 1 MiB at this many hundredths of a memcpy's time or more counts as slow: the
// shm single copy and the direct reads were fitted where it took 1.9 times as long and won;
// at 4.5 times, two copies through slots beat them by up to 2.2 times (docs/tuning_shm.md).
constexpr long kKernelCopySlowPercent = 300;

}  // namespace

// After the exchange of peer infos, so that only a communicator whose ranks all share this
// host makes a window: rank 0 creates it and offers it in one more exchange, the others map
// it, and a last exchange tells every rank whether all did. Whether to try is decided from
// what every rank knows alike (the peers' infos); a rank's own settings travel in the offer
// exchange, so all of them take part or none.
void Communicator::Impl::setUpHostWindow(bool allMemory) {
  const bool everyPeerShm = std::all_of(peers.begin(), peers.end(),
                                        [](const PeerInfo& p) { return p.part("shm") != nullptr; });
  if (!allMemory || !everyPeerShm || config.nranks < 2 ||
      (config.transport != "auto" && config.transport != "shm")) {
    return;
  }
  // Rank 0 offers the window ("1<handle>"); every rank says whether it takes part ("1", or
  // "0<why not>"), so one set to GYRE_ONESHOT_BYTES=0 leaves the others waiting for nothing.
  std::string offer = "1";
  if (config.oneShotBytes == 0) {
    offer = "0GYRE_ONESHOT_BYTES=0 on rank " + std::to_string(config.rank);
  } else if (config.rank == 0) {
    try {
      windowSegment = ShmSegment::create(
          config.shmDir, MailboxWindow::bytesFor(config.nranks, config.oneShotBytes));
      MailboxWindow(windowSegment.data(), config.nranks, config.oneShotBytes, /*format=*/true);
      offer = offerOf(windowSegment.handle());
    } catch (const Failure& f) {
      offer = std::string("0") + f.what();
    }
  }
  const auto offers = bootstrap->allGather(offer);
  for (const std::string& o : offers) {
    if (!o.empty() && o[0] == '1') continue;
    if (config.rank == 0) GYRE_LOG(info, who() + ": no host window: " + o.substr(1));
    windowSegment = {};
    return;
  }
  offer = offers[0];
  // Whether this rank takes part in the sleepers' barriers (base/wait.h), then rank 0's also
  // carries the round trip it measured and how often calls measure it again.
  std::string mine = registerSleeperBarriers() ? "1b" : "1f";
  try {
    if (config.rank != 0) windowSegment = ShmSegment::open(decodeHandle(offer.substr(1)));
    MailboxWindow window(windowSegment.data(), config.nranks, config.oneShotBytes, false);
    MailState& state = *window.mailbox(config.rank).state;
    state.pid = int32_t(getpid());
    state.pidAddress = reinterpret_cast<uintptr_t>(&state.pid);
    // Measured here rather than within a first call: whether this CPU's copies stall where the
    // destination lies just past the source (base/copy_bytes.h), which bulk copies then avoid.
    const bool userStalls = stringCopyStallsNearby(), kernelStalls = kernelCopyStallsNearby();
    if (config.rank == 0 && (userStalls || kernelStalls)) {
      GYRE_LOG(info, who() + ": copies to just past their source (modulo 4 KiB) stall here:" +
                         (userStalls ? " memcpy's take vector loops" : "") +
                         (userStalls && kernelStalls ? ";" : "") +
                         (kernelStalls ? " process_vm_readv's go through a bounce buffer" : ""));
    }
    // How far apart the CPUs of rank 0 and its partner sit: where ranks have cores of their
    // own it prices the algorithms (runtime/core/tuner.h); where ranks share cores pinned in
    // blocks, the slots' stores follow it. Ranks that share cores unpinned would measure the
    // scheduler: their round trip goes as 0. The kernel's copy against a memcpy is one core's.
    const int partner = placementPartner;
    if (config.rank == 0) {
      const double ns = partner > 0 ? measureRoundTrip(*window.mailbox(0).state,
                                                       *window.mailbox(partner).state, kProbeWait)
                                    : 0;
      // Probes during calls: for the tuner's pricing, and wherever the slots' stores follow
      // the placement, under a forced algorithm too.
      const bool probes =
          ns > 0 && config.nranks >= 2 &&
          (!tuner->forced() || config.slotStores == CommConfig::SlotStores::automatic);
      mine.append(" ").append(std::to_string(std::lround(ns))).append(" ");
      mine.append(std::to_string(probes ? config.placementProbe.count() : 0)).append(" ");
      const KernelCopy copy = measureKernelCopy();
      mine.append(std::to_string(std::lround(100 * copy.ratio))).append(" ");
      mine.append(std::to_string(std::lround(copy.microseconds))).append(" ");
      // The measured choice times calls only where each rank has a core: where ranks share
      // cores a call's time is mostly the scheduler's.
      mine.append(config.tune == CommConfig::Tune::measure && !tuner->forced() && ranksHaveCores
                      ? "1"
                      : "0");
    } else if (partner > 0 && config.rank == partner) {
      answerRoundTrips(*window.mailbox(partner).state, *window.mailbox(0).state, 2 * kProbeWait);
    }
  } catch (const Failure& f) {
    mine = std::string("0") + f.what();
  }
  const auto all = bootstrap->allGather(mine);
  for (int r = 0; r < config.nranks; ++r) {
    if (all[size_t(r)][0] == '1') continue;
    if (config.rank == 0) {
      GYRE_LOG(info, who() + ": no host window: rank " + std::to_string(r) +
                         " could not map it: " + all[size_t(r)].substr(1));
    }
    windowSegment = {};
    return;
  }
  // Every rank has mapped it: the creator's descriptor is no longer needed.
  if (config.rank == 0) windowSegment.closeHandle();
  oneShot = std::make_unique<OneShot>(
      MailboxWindow(windowSegment.data(), config.nranks, config.oneShotBytes, false), config.rank);
  tuner->setOneShot(config.oneShotBytes);
  enableDirectRead();
  // Rank 0's figures, so every rank prices its calls alike and probes at the same calls.
  long roundTripNs = 0, probeUs = 0, kernelCopyPercent = 0, kernelCopyUs = 0, measures = 0;
  if (all[0].size() > 3) {
    std::sscanf(all[0].c_str() + 3, "%ld %ld %ld %ld %ld", &roundTripNs, &probeUs,
                &kernelCopyPercent, &kernelCopyUs, &measures);
  }
  measuring = measures == 1;
  tuner->setKernelCopyUs(double(kernelCopyUs));
  // Wakes without a notifier's fence only where every rank's sleeps order themselves.
  if (std::all_of(all.begin(), all.end(), [](const std::string& a) { return a[1] == 'b'; })) {
    oneShot->useSleeperBarriers();
  } else if (config.rank == 0) {
    GYRE_LOG(info, who() +
                       ": the host window fences every wake-up: not every rank could "
                       "register for membarrier's global barriers");
  }
  // Where the kernel's copy is much slower than a memcpy, two copies through slots beat one
  // through the kernel: no single copy, and no direct read unless forced (docs/tuning_shm.md).
  if (kernelCopyPercent >= kKernelCopySlowPercent) {
    transports->setSingleCopyBytes(0);
    tuner->setKernelCopySlow(true);
    if (config.rank == 0) {
      GYRE_LOG(info, who() + ": a copy through the kernel takes " +
                         std::to_string(kernelCopyPercent / 100.0).substr(0, 4) +
                         " times a memcpy's here: slots carry every payload");
    }
  }
  placementSetUpNs = roundTripNs;
  if (roundTripNs > 0) {
    const bool far = Tuner::farApart(double(roundTripNs));
    // Slots streamed where far apart unless told otherwise (GYRE_SLOT_STORES=cached: far apart
    // they stay slow; =streaming: close by they slow down, which the tuner does not price).
    const bool streamsWhenFar = config.slotStores != CommConfig::SlotStores::cached;
    const auto link = [&](bool apart) {
      const LinkCost shm = Tuner::sharedMemoryAt(ranksHaveCores, apart, streamsWhenFar);
      return ranksPinnedInBlocks ? Tuner::pinnedInBlocks(shm) : shm;
    };
    tuner->setLink(link(far));
    if (probeUs > 0) {
      otherPlacement = std::make_unique<Tuner>(*tuner);
      otherPlacement->setLink(link(!far));
      // Where ranks share cores a probe waits for every rank to get its turn on a core (n = 8
      // on 2, a scatter of 2 MiB: 8-20 % slower probing every 10 ms of calls, level every 100).
      placementProbeUs = double(probeUs) * (ranksHaveCores ? 1 : kSharedCoresProbeEvery);
    }
    tuner->setCacheShared(Tuner::sharesCache(double(roundTripNs)));
    if (otherPlacement) otherPlacement->setCacheShared(tuner->cacheShared());
    if (config.rank == 0) {
      GYRE_LOG(info, who() + ": a cache line between the CPUs of ranks 0 and " +
                         std::to_string(placementPartner) + " goes there and back in " +
                         std::to_string(roundTripNs) + " ns; the kernel copies 1 MiB in " +
                         std::to_string(kernelCopyUs) + " us");
    }
  }
  oneShot->streamBlocks(streamsSlots());
  oneShot->prefetchFarApart(tuner->link().placedFar);
}

// The direct-read collectives need every rank to read and write every other's memory through the
// kernel (same user, ptrace allowed): each tries, and one more exchange makes it all ranks' or
// none's.
void Communicator::Impl::enableDirectRead() {
  const MailboxWindow window(windowSegment.data(), config.nranks, config.oneShotBytes, false);
  std::string mine = "1";
  for (int r = 0; r < config.nranks && mine == "1"; ++r) {
    if (r == config.rank) continue;
    const std::string why = checkReadsPeer(*window.mailbox(r).state);
    if (!why.empty()) mine = "0rank " + std::to_string(r) + ": " + why;
  }
  const auto all = bootstrap->allGather(mine);
  for (int r = 0; r < config.nranks; ++r) {
    if (all[size_t(r)][0] == '1') continue;
    if (config.rank == 0) {
      GYRE_LOG(info, who() + ": no direct-read all-reduce: rank " + std::to_string(r) +
                         " cannot read the memory of " + all[size_t(r)].substr(1));
    }
    return;
  }
  oneShot->enableDirectRead();
  tuner->setDirectRead(true);
}

void Communicator::Impl::remeasurePlacement(const OpContext& ctx) {
  const uint32_t ns = oneShot->remeasurePlacement(ctx, placementPartner);
  ++placementProbes;
  if (ns == 0) return;
  // Moved apart or close (the other tuner), or onto or off one core's caches (both tuners).
  const bool wasFar = tuner->link().placedFar;
  const bool moved = Tuner::stillFarApart(ns, wasFar) != wasFar;
  if (!moved && Tuner::sharesCache(ns) == tuner->cacheShared()) return;
  tuner->setCacheShared(Tuner::sharesCache(ns));
  otherPlacement->setCacheShared(tuner->cacheShared());
  if (moved) std::swap(tuner, otherPlacement);
  oneShot->streamBlocks(streamsSlots());
  oneShot->prefetchFarApart(tuner->link().placedFar);
  for (LastChoice& last : lastChoice) last = {};
  measured.reset();  // every rank at this call: the classes try again where the CPUs now sit
  ++placementChanges;
  if (config.rank == 0) {
    GYRE_LOG(info, who() + ": the CPUs of ranks 0 and " + std::to_string(placementPartner) +
                       " moved " +
                       (tuner->link().placedFar ? "apart"
                        : tuner->cacheShared()  ? "onto one core's caches"
                                                : "close") +
                       " (a cache line there and back in " + std::to_string(ns) + " ns, at call " +
                       std::to_string(ctx.desc.seq) + "): the tuner prices that from now on");
  }
}

PlacementProbes Communicator::placementProbes() const {
  std::lock_guard lock(impl_->opMutex);
  return {impl_->placementProbes, impl_->placementChanges,
          impl_->tuner && impl_->tuner->link().placedFar, impl_->placementProbeUs > 0,
          impl_->placementSetUpNs};
}

MeasuredChoices Communicator::measuredChoices() const {
  std::lock_guard lock(impl_->opMutex);
  const MeasuredChoice& m = impl_->measured;
  return {impl_->measuring, m.trialCalls(), m.decisions(), m.changes(), m.awaitingDecision()};
}

std::string Communicator::measuredAlgorithm(Collective coll, size_t bytes) const {
  std::lock_guard lock(impl_->opMutex);
  const Algorithm* a = impl_->measured.settled(coll, bytes);
  return a ? algorithmName(*a) : "";
}

uint64_t Communicator::windowCalls() const {
  std::lock_guard lock(impl_->opMutex);
  return impl_->oneShot ? impl_->oneShot->calls() : 0;
}

bool Communicator::windowSleeperBarriers() const {
  std::lock_guard lock(impl_->opMutex);
  return impl_->oneShot && impl_->oneShot->usesSleeperBarriers();
}

uint64_t Communicator::straightWindowCalls() const {
  std::lock_guard lock(impl_->opMutex);
  return impl_->straightWindowCalls;
}

uint64_t Communicator::directReads() const {
  std::lock_guard lock(impl_->opMutex);
  return impl_->oneShot ? impl_->oneShot->directReads() : 0;
}

void Communicator::Impl::failStrayLinkData(const OpDesc& desc, const Connection& conn,
                                           const SlotMeta& meta) const {
  fail(Code::invalid_usage, who() + ": ranks disagree: this rank is in " + describeOp(desc) +
                                " but rank " + std::to_string(conn.peer()) + " sent data for " +
                                describeOp(meta));
}

// runOneShot's body, inline in both of its callers here (runInWindow's path keeps no frame).
[[gnu::always_inline]] inline void Communicator::Impl::callWindow(const OpContext& ctx,
                                                                  const void* send, void* recv,
                                                                  bool directRead) {
  // A call the ranks disagreed on may have left data in a link (a scatter where each rank was
  // its own root only sends). Link calls find it in their next slot; a window call does not
  // read the links, so it looks: a slot of this call or an earlier one is such data. A peer
  // may already send for a later call, or point-to-point data for a recv to come.
  for (Connection* conn : connectionList) {
    Link& link = conn->recvLink();
    const uint32_t head = link.counters->head.value.load(std::memory_order_relaxed);
    if (link.counters->tail.value.load(std::memory_order_acquire) == head) continue;
    const SlotMeta& meta = link.meta(head);
    if (meta.coll == uint8_t(Collective::send_recv) || meta.seq > ctx.desc.seq) continue;
    failStrayLinkData(ctx.desc, *conn, meta);
  }
  if (directRead) {
    oneShot->runDirectRead(ctx, send, recv);
  } else {
    oneShot->run(ctx, send, recv);
  }
}

Status Communicator::Impl::WindowBoardCheck::operator()() const {
  return impl->board->disagreement(impl->windowContext.desc);
}

bool Communicator::Impl::runInWindow(const OpDesc& desc, size_t bytes, const void* send,
                                     void* recv) {
  if (!oneShot) return false;
  std::lock_guard lock(opMutex);
  if (measured.pending()) measured.end(MeasuredChoice::nowNs());  // a trial's loop ends here
  const LastChoice& last = lastChoice[size_t(desc.coll)];
  Algorithm algorithm = last.algorithm;
  // A trial of the measured choice by a window algorithm goes straight too, as the class's
  // calls will once settled: by the general path its trials took about 1 us more a call
  // than its loop, enough to put a slot algorithm ahead of it.
  const bool trial = measuring && bytes >= MeasuredChoice::kFromBytes &&
                     MeasuredChoice::measures(desc.coll, bytes) &&
                     measured.inTrials(desc.coll, bytes);
  if (trial) algorithm = measured.nextTrial(desc.coll, bytes);
  if ((!trial && last.bytes != bytes) ||
      (algorithm != Algorithm::oneshot && algorithm != Algorithm::directRead) ||
      poisonSet.load(std::memory_order_acquire)) {
    return false;
  }
  // runPlanned's count toward the next placement probe: the call that reaches it goes that way.
  const bool counted = countsTowardProbe(last, bytes);
  if (counted && reachesProbe(last)) return false;
  if (counted) sincePlacementProbeUs += last.predictedUs;
  OpContext& ctx = windowContext;
  if (!windowContextSet) {
    ctx = callContext(desc, false);
    ctx.checkPeers = windowBoardCheck;
    windowContextSet = true;
  } else {
    setCall(ctx, desc, false);
  }
  ctx.spreadSlots = slotWrites(desc.coll, bytes).spread;
  ++straightWindowCalls;
  if (trial) measured.begin(desc.coll, bytes, MeasuredChoice::nowNs());
  board->started(ctx.desc);
  try {
    callWindow(ctx, send, recv, algorithm == Algorithm::directRead);
  } catch (const Failure& f) {
    failCall(ctx, f, false);
  }
  board->completed(ctx.desc);
  return true;
}

void Communicator::Impl::runOneShot(const OpContext& ctx, const void* send, void* recv,
                                    bool directRead) {
  callWindow(ctx, send, recv, directRead);
}

}  // namespace gyre
