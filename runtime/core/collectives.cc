// The collectives: argument checks, the tuner's choice, and the algorithm each one runs.
#include <numeric>

#include "algorithms/collective.h"
#include "algorithms/prims.h"
#include "base/copy_bytes.h"
#include "base/log.h"
#include "runtime/core/arg_checks.h"
#include "runtime/core/communicator_impl.h"
#include "runtime/core/plan.h"

namespace gyre {

namespace {

const char* at(const void* base, size_t elems, DataType type) {
  return static_cast<const char*>(base) + elems * dataTypeSize(type);
}

}  // namespace

void Communicator::Impl::checkType(const char* what, DataType type, RedOp op) const {
  checkTypeAndOp(config.rank, what, type, op);
}

void Communicator::Impl::checkRoot(const char* what, int root, const char* role) const {
  checkRank(config.rank, what, root, config.nranks, role);
}

void Communicator::Impl::failBuffers(const char* what, const char* why) const {
  fail(Code::invalid_argument, who() + ": " + what + ": " + why);
}

void Communicator::Impl::checkedEnd(const char* what, size_t displ, size_t count, const char* side,
                                    int i) const {
  if (displ > SIZE_MAX - count) {
    fail(Code::invalid_argument, who() + ": " + what + ": " + side + " block " + std::to_string(i) +
                                     " (displacement " + std::to_string(displ) + ", count " +
                                     std::to_string(count) + ") ends past SIZE_MAX");
  }
}

size_t Communicator::Impl::checkedBytes(const char* what, size_t count, DataType type,
                                        size_t blocks) const {
  return gyre::checkedBytes(config.rank, what, count, type, blocks);
}

template <class Body>
void Communicator::Impl::runChannels(const OpContext& ctx, int channels, const Body& body) {
  if (channels <= 1) return body(ctx, 0);  // on this thread, with no type erasure on the way
  const int n = config.nranks, r = config.rank;
  if (n > 1) {
    const int prev = (r + n - 1) % n, next = (r + 1) % n;
    try {
      for (int peer : {std::min(prev, next), std::max(prev, next)})
        for (int c = 0; c < channels; ++c) connection(peer, c);  // ascending (peer, channel)
    } catch (const Failure& f) {  // a channel's first use opens its connections: name the call
      throw Failure(Status{f.status().code,
                           who() + ": " + describeOp(ctx.desc) + " failed: " + f.status().message,
                           f.status().lostRank});
    }
  }
  std::atomic<bool> failed{false};
  std::atomic<int> first{-1};  // the channel that failed first; the others it stopped
  OpContext shared = ctx;
  shared.channelFailed = &failed;
  std::vector<Status> results(static_cast<size_t>(channels));
  channelWorkers.run(channels, [&](int c) {
    Status result;
    try {
      body(shared, c);
      return;
    } catch (const Failure& f) {
      result = f.status();
    } catch (const std::exception& e) {
      result = {Code::internal, who() + ": channel " + std::to_string(c) + ": " + e.what()};
    }
    results[size_t(c)] = result;
    int none = -1;
    first.compare_exchange_strong(none, c);
    failed.store(true);
  });
  if (first.load() >= 0) throw Failure(results[size_t(first.load())]);
}

CollectivePlan Communicator::Impl::plan(const OpDesc& desc, size_t bytes) {
  return plan(desc, bytes, choose(desc.coll, bytes));
}

CollectivePlan Communicator::Impl::plan(const OpDesc& desc, size_t bytes, Algorithm algorithm) {
  PlanShape shape;
  shape.nSlots = config.nSlots;
  shape.slotBytes = config.slotBytes;
  shape.maxChannels = config.channels > 0 ? config.channels : tuner->channels(bytes);
  shape.hosts = planHosts;
  shape.localRanks = planLocalRanks;
  shape.relayed = tuner->relaysBroadcast(bytes, desc.seq);
  shape.reversed = desc.coll == Collective::broadcast && desc.root >= 0 &&
                   size_t(desc.root) < reversedChains.size() && reversedChains[size_t(desc.root)];
  shape.binomial = tuner->binomialScatter(bytes);
  shape.halving = desc.coll == Collective::all_reduce && algorithm == Algorithm::doubling &&
                  tuner->halvesAllReduce(bytes, config.nranks);
  return planCollective(desc.coll, desc.dtype, desc.count, desc.root, algorithm, shape);
}

void Communicator::Impl::runPlanned(const OpContext& ctx, size_t bytes, const void* send,
                                    void* recv) {
  Algorithm algorithm = choose(ctx.desc.coll, bytes);
  const LastChoice& last = lastChoice[size_t(ctx.desc.coll)];
  if (countsTowardProbe(last, bytes)) {
    if (reachesProbe(last)) {
      sincePlacementProbeUs = 0;
      remeasurePlacement(ctx);
      algorithm = choose(ctx.desc.coll, bytes);
    } else {
      sincePlacementProbeUs += last.predictedUs;
    }
  }
  if (measuring && MeasuredChoice::measures(ctx.desc.coll, bytes) &&
      !measured.settled(ctx.desc.coll, bytes)) {
    return runMeasured(ctx, algorithm, bytes, send, recv);
  }
  runAlgorithm(ctx, algorithm, bytes, send, recv);
}

void Communicator::Impl::runMeasured(const OpContext& ctx, Algorithm modelPick, size_t bytes,
                                     const void* send, void* recv) {
  const Collective coll = ctx.desc.coll;
  // The next call of this size asks choose() again, which takes the class's algorithm once it
  // settles (until then only a trial by a window algorithm goes the straight path).
  lastChoice[size_t(coll)].bytes = SIZE_MAX;
  if (!measured.started(coll, bytes)) {
    const Choice pick{modelPick, tuner->predictUs(modelPick, coll, bytes, config.nranks), false};
    measured.start(coll, bytes, tuner->trialAlgorithms(pick, coll, bytes, config.nranks));
    if (const Algorithm* settled = measured.settled(coll, bytes)) {
      return runAlgorithm(ctx, *settled, bytes, send, recv);  // the only one
    }
  }
  if (measured.settling(coll, bytes)) return runAlgorithm(ctx, modelPick, bytes, send, recv);
  if (!measured.trialsDone(coll, bytes)) {
    const Algorithm trial = measured.nextTrial(coll, bytes);
    measured.begin(coll, bytes, MeasuredChoice::nowNs());
    runAlgorithm(ctx, trial, bytes, send, recv);
    return;
  }
  const Algorithm a = measured.decide(
      coll, bytes, oneShot->shareTrials(ctx, measured.times(coll, bytes)), config.nranks);
  if (logEnabled(LogLevel::info)) {
    std::string trials;
    for (const auto& [tried, median] : measured.medians(coll, bytes)) {
      trials += std::string(trials.empty() ? "" : ", ") + algorithmName(tried) + " " +
                std::to_string(median / 1000.0).substr(0, 6) + " us";
    }
    GYRE_LOG(info, who() + ": " + collectiveName(coll) + " of " + std::to_string(bytes) +
                       " B at n=" + std::to_string(config.nranks) + ": measured " +
                       algorithmName(a) + " (median trials " + trials + "; the model's pick " +
                       algorithmName(modelPick) + ")");
  }
  runAlgorithm(ctx, a, bytes, send, recv);
}

void Communicator::Impl::runAlgorithm(const OpContext& ctx, Algorithm algorithm, size_t bytes,
                                      const void* send, void* recv) {
  OpContext placed = ctx;
  const Tuner::SlotWrites writes = slotWrites(ctx.desc.coll, bytes);
  placed.spreadSlots = writes.spread;
  placed.singleCopy = writes.singleCopy;
  if (algorithm == Algorithm::oneshot || algorithm == Algorithm::directRead) {
    return runOneShot(placed, send, recv, algorithm == Algorithm::directRead);
  }
  const CollectivePlan plan = this->plan(ctx.desc, bytes, algorithm);
  const size_t es = dataTypeSize(ctx.desc.dtype);
  placed.streamSlots = writes.streamed;
  if (plan.coll == Collective::reduce_scatter && plan.algorithm == Algorithm::doubling) {
    return reduceScatterByDoubling(placed, plan, send, recv);
  }
  runChannels(placed, plan.channels, [&](const OpContext& cctx, int c) {
    const ChannelPart part = channelPart(plan, c, config.rank, send, recv, es);
    execute(
        cctx, part.in, part.out,
        [&](auto& p) { runChannel(p, plan, config.rank, config.nranks, part.len); }, c);
  });
}

// The whole buffer all-reduced by recursive doubling into scratch the communicator keeps, of
// which this rank keeps its block: log2(n) exchanges where the ring makes n - 1, for buffers
// small enough that each message's cost outweighs its bytes (docs/tuning.md). Every send has
// left and every peer's read of this input ended (finish) before the copy, which in place
// overwrites this rank's block of the input.
void Communicator::Impl::reduceScatterByDoubling(const OpContext& ctx, const CollectivePlan& plan,
                                                 const void* send, void* recv) {
  const size_t es = dataTypeSize(ctx.desc.dtype);
  const int n = config.nranks;
  const size_t total = size_t(plan.count) * size_t(n);
  wholeBuffer.resize(total * es);
  const bool pow2 = (n & (n - 1)) == 0;
  execute(ctx, send, wholeBuffer.data(), [&](auto& p) {
    if (pow2) {
      algo::halvingReduceScatter(p, config.rank, n, size_t(plan.count), size_t(plan.slotElems),
                                 plan.ahead);
    } else {
      algo::doublingAllReduce(p, config.rank, n, total, size_t(plan.slotElems), plan.ahead);
    }
  });
  if (plan.count > 0) {
    copyBytes(recv, wholeBuffer.data() + size_t(config.rank) * size_t(plan.count) * es,
              size_t(plan.count) * es);
  }
}

Algorithm Communicator::Impl::choose(Collective coll, size_t bytes) {
  static_assert(std::size(decltype(lastChoice){}) > size_t(Collective::all_to_all_v));
  LastChoice& last = lastChoice[size_t(coll)];
  if (last.bytes == bytes) return last.algorithm;
  Choice c = tuner->choose(coll, bytes, config.nranks);
  if (const Algorithm* settled = measuring ? measured.settled(coll, bytes) : nullptr) {
    c.algorithm = *settled;
  }
  // The placement matters where the other placement's tuner chooses otherwise, and wherever
  // the call goes through slots whose stores follow it (GYRE_SLOT_STORES=auto): the links'
  // slots, and the window's data blocks (a payload over a post's small piece; each rank's
  // share of the call's bytes stands for it).
  const bool windowBlocks =
      c.algorithm == Algorithm::oneshot &&
      bytes / size_t(config.nranks) > MailboxWindow::smallBytesFor(config.oneShotBytes);
  const bool slotsFollow = config.slotStores == CommConfig::SlotStores::automatic &&
                           c.algorithm != Algorithm::directRead &&
                           (c.algorithm != Algorithm::oneshot || windowBlocks);
  last = {bytes, c.algorithm, std::max(0.0, c.predictedUs),
          otherPlacement &&
              (slotsFollow ||
               otherPlacement->choose(coll, bytes, config.nranks).algorithm != c.algorithm)};
  // Logged once per collective, algorithm and power-of-two size class.
  if (!logEnabled(LogLevel::info)) return c.algorithm;
  int sizeClass = 0;
  while (sizeClass < 63 && (size_t(1) << (sizeClass + 1)) <= bytes) ++sizeClass;
  if (loggedChoices.insert((int(coll) << 16) | (int(c.algorithm) << 8) | sizeClass).second) {
    GYRE_LOG(info, who() + ": " + collectiveName(coll) + " of " + std::to_string(bytes) +
                       " B at n=" + std::to_string(config.nranks) + ": " +
                       algorithmName(c.algorithm) + " (" +
                       tuner->explain(c, coll, bytes, config.nranks) + ")");
  }
  return c.algorithm;
}

void Communicator::Impl::runCollective(const OpDesc& desc, size_t bytes, const void* send,
                                       void* recv) {
  if (runInWindow(desc, bytes, send, recv)) return;
  run(desc, [&](const OpContext& ctx) { runPlanned(ctx, bytes, send, recv); });
}

void Communicator::allReduce(const void* send, void* recv, size_t count, DataType type, RedOp op) {
  auto& d = *impl_;
  d.checkType("all_reduce", type, op);
  const size_t bytes = d.checkedBytes("all_reduce", count, type);
  d.checkBuffers("all_reduce", send, bytes, recv, bytes, true, recv);
  d.drainQueue();
  d.runCollective({0, count, -1, Collective::all_reduce, type, op}, bytes, send, recv);
}

void Communicator::allGather(const void* send, void* recv, size_t sendCount, DataType type) {
  auto& d = *impl_;
  d.checkType("all_gather", type, RedOp::sum);
  const int n = d.config.nranks, r = d.config.rank;
  const size_t total = d.checkedBytes("all_gather", sendCount, type, size_t(n));
  const void* inPlace = recv ? at(recv, size_t(r) * sendCount, type) : nullptr;
  d.checkBuffers("all_gather", send, total / size_t(n), recv, total, true, inPlace);
  d.drainQueue();
  d.runCollective({0, sendCount, -1, Collective::all_gather, type, RedOp::sum}, total, send, recv);
}

void Communicator::reduceScatter(const void* send, void* recv, size_t recvCount, DataType type,
                                 RedOp op) {
  auto& d = *impl_;
  d.checkType("reduce_scatter", type, op);
  const int n = d.config.nranks, r = d.config.rank;
  const size_t total = d.checkedBytes("reduce_scatter", recvCount, type, size_t(n));
  // In place: recvbuff is this rank's block of sendbuff, so recv's overlap is allowed there.
  const bool inPlace = send && recv == at(send, size_t(r) * recvCount, type);
  d.checkBuffers("reduce_scatter", send, total, recv, total / size_t(n), true,
                 inPlace ? send : recv);
  d.drainQueue();
  d.runCollective({0, recvCount, -1, Collective::reduce_scatter, type, op}, total, send, recv);
}

void Communicator::broadcast(const void* send, void* recv, size_t count, DataType type, int root) {
  auto& d = *impl_;
  d.checkType("broadcast", type, RedOp::sum);
  d.checkRoot("broadcast", root);
  const size_t bytes = d.checkedBytes("broadcast", count, type);
  const bool isRoot = d.config.rank == root;
  d.checkBuffers("broadcast", send, bytes, recv, bytes, isRoot, recv);
  d.drainQueue();
  d.runCollective({0, count, root, Collective::broadcast, type, RedOp::sum}, bytes, send, recv);
}

void Communicator::reduce(const void* send, void* recv, size_t count, DataType type, RedOp op,
                          int root) {
  auto& d = *impl_;
  d.checkType("reduce", type, op);
  d.checkRoot("reduce", root);
  const size_t bytes = d.checkedBytes("reduce", count, type);
  const bool isRoot = d.config.rank == root;
  d.checkBuffers("reduce", send, bytes, isRoot ? recv : nullptr, isRoot ? bytes : 0, true,
                 isRoot ? recv : nullptr);
  d.drainQueue();
  d.runCollective({0, count, root, Collective::reduce, type, op}, bytes, send, recv);
}

void Communicator::gather(const void* send, void* recv, size_t count, DataType type, int root) {
  auto& d = *impl_;
  d.checkType("gather", type, RedOp::sum);
  d.checkRoot("gather", root);
  const int n = d.config.nranks, r = d.config.rank;
  const size_t total = d.checkedBytes("gather", count, type, size_t(n));
  const bool isRoot = r == root;
  const void* inPlace = isRoot && recv ? at(recv, size_t(r) * count, type) : nullptr;
  d.checkBuffers("gather", send, total / size_t(n), isRoot ? recv : nullptr, isRoot ? total : 0,
                 true, inPlace);
  d.drainQueue();
  d.runCollective({0, count, root, Collective::gather, type, RedOp::sum}, total, send, recv);
}

void Communicator::scatter(const void* send, void* recv, size_t count, DataType type, int root) {
  auto& d = *impl_;
  d.checkType("scatter", type, RedOp::sum);
  d.checkRoot("scatter", root);
  const int n = d.config.nranks, r = d.config.rank;
  const size_t total = d.checkedBytes("scatter", count, type, size_t(n));
  const bool isRoot = r == root;
  const bool inPlace = isRoot && send && recv == at(send, size_t(r) * count, type);
  d.checkBuffers("scatter", send, total, recv, total / size_t(n), isRoot, inPlace ? send : recv);
  d.drainQueue();
  d.runCollective({0, count, root, Collective::scatter, type, RedOp::sum}, total, send, recv);
}

void Communicator::allToAll(const void* send, void* recv, size_t count, DataType type) {
  auto& d = *impl_;
  d.checkType("all_to_all", type, RedOp::sum);
  const int n = d.config.nranks;
  const size_t total = d.checkedBytes("all_to_all", count, type, size_t(n));
  d.checkBuffers("all_to_all", send, total, recv, total, true, nullptr);
  d.drainQueue();
  d.runCollective({0, count, -1, Collective::all_to_all, type, RedOp::sum}, total, send, recv);
}

void Communicator::allGatherV(const void* send, size_t sendCount, void* recv,
                              const size_t* recvCounts, const size_t* displs, DataType type) {
  auto& d = *impl_;
  d.checkType("all_gather_v", type, RedOp::sum);
  const int n = d.config.nranks, r = d.config.rank;
  if (!recvCounts || !displs) {
    fail(Code::invalid_argument, d.who() + ": all_gather_v: recvcounts or displs is null");
  }
  if (recvCounts[r] != sendCount) {
    fail(Code::invalid_argument, d.who() + ": all_gather_v: sendcount " +
                                     std::to_string(sendCount) + " differs from recvcounts[" +
                                     std::to_string(r) + "] = " + std::to_string(recvCounts[r]));
  }
  size_t extent = 0, total = 0;
  for (int i = 0; i < n; ++i) {
    d.checkedBytes("all_gather_v", recvCounts[i], type);
    d.checkedBytes("all_gather_v", displs[i], type);
    d.checkedEnd("all_gather_v", displs[i], recvCounts[i], "recv", i);
    extent = std::max(extent, displs[i] + recvCounts[i]);
    total += recvCounts[i];
  }
  const size_t bytes = d.checkedBytes("all_gather_v", extent, type);
  const void* inPlace = recv ? at(recv, displs[r], type) : nullptr;
  d.checkBuffers("all_gather_v", send, sendCount * dataTypeSize(type), recv, bytes, true, inPlace);
  d.drainQueue();
  // The descriptor's count is the total, which every rank knows alike.
  d.run({0, total, -1, Collective::all_gather_v, type, RedOp::sum}, [&](const OpContext& ctx) {
    const CollectivePlan plan = d.plan(ctx.desc, total * dataTypeSize(type));
    d.execute(ctx, send, recv, [&](auto& p) {
      algo::ringAllGatherBlocks(p, r, n, algo::VarBlocks{recvCounts, displs}, plan.chunkElems);
    });
  });
}

void Communicator::allToAllV(const void* send, const size_t* sendCounts, const size_t* sendDispls,
                             void* recv, const size_t* recvCounts, const size_t* recvDispls,
                             DataType type) {
  auto& d = *impl_;
  d.checkType("all_to_all_v", type, RedOp::sum);
  const int n = d.config.nranks, r = d.config.rank;
  if (!sendCounts || !sendDispls || !recvCounts || !recvDispls) {
    fail(Code::invalid_argument, d.who() + ": all_to_all_v: a count or displacement array is null");
  }
  if (sendCounts[r] != recvCounts[r]) {
    fail(Code::invalid_argument, d.who() + ": all_to_all_v: sends itself " +
                                     std::to_string(sendCounts[r]) + " elements but expects " +
                                     std::to_string(recvCounts[r]));
  }
  size_t sendExtent = 0, recvExtent = 0;
  for (int i = 0; i < n; ++i) {
    for (size_t v : {sendCounts[i], sendDispls[i], recvCounts[i], recvDispls[i]})
      d.checkedBytes("all_to_all_v", v, type);
    d.checkedEnd("all_to_all_v", sendDispls[i], sendCounts[i], "send", i);
    d.checkedEnd("all_to_all_v", recvDispls[i], recvCounts[i], "recv", i);
    sendExtent = std::max(sendExtent, sendDispls[i] + sendCounts[i]);
    recvExtent = std::max(recvExtent, recvDispls[i] + recvCounts[i]);
  }
  const size_t sendBytes = d.checkedBytes("all_to_all_v", sendExtent, type);
  const size_t recvBytes = d.checkedBytes("all_to_all_v", recvExtent, type);
  d.checkBuffers("all_to_all_v", send, sendBytes, recv, recvBytes, true, nullptr);
  d.drainQueue();
  // Counts differ per rank, so the descriptor carries none; slot sizes still must agree.
  d.run({0, 0, -1, Collective::all_to_all_v, type, RedOp::sum}, [&](const OpContext& ctx) {
    const CollectivePlan plan = d.plan(ctx.desc, sendBytes);
    d.execute(ctx, send, recv, [&](auto& p) {
      algo::pairwiseAllToAll(p, r, n,
                             algo::VarExchange{sendCounts, sendDispls, recvCounts, recvDispls},
                             plan.chunkElems);
    });
  });
}

void Communicator::barrier() {
  auto& d = *impl_;
  d.drainQueue();
  d.run({0, 0, -1, Collective::barrier, DataType::u8, RedOp::sum},
        [&](const OpContext& ctx) { d.runPlanned(ctx, 0, nullptr, nullptr); });
}

void Communicator::send(const void* buf, size_t count, DataType type, int peer) {
  impl_->send(buf, count, type, peer, /*unstaged=*/false);
}

void Communicator::sendUnstaged(const void* buf, size_t count, DataType type, int peer) {
  impl_->send(buf, count, type, peer, /*unstaged=*/true);
}

void Communicator::Impl::send(const void* buf, size_t count, DataType type, int peer,
                              bool unstaged) {
  checkType("send", type, RedOp::sum);
  checkRoot("send", peer, "peer");
  if (peer == config.rank)
    fail(Code::invalid_argument, who() + ": send: to itself (use a local copy)");
  const size_t bytes = checkedBytes("send", count, type);
  if (!unstaged) {
    checkBuffers("send", buf, bytes, nullptr, 0, true, nullptr);
  } else if (bytes && !supportsUnstagedSend(peer, buf, bytes)) {
    fail(Code::invalid_usage, who() + ": send: no registration with the rdma adapter covers " +
                                  "the buffer, or rank " + std::to_string(peer) +
                                  " is not reached over rdma, so the CPU would have to read it");
  }
  drainQueue();
  run(
      {0, count, config.rank, Collective::send_recv, type, RedOp::sum},
      [&](const OpContext& base) {
        OpContext ctx = base;
        ctx.desc.seq = ++sentTo[peer];
        ctx.inputUnreadable = unstaged;
        execute(ctx, buf, nullptr, [&](auto& p) { algo::sendTo(p, peer, count); });
      },
      /*p2p=*/true);
}

void Communicator::recv(void* buf, size_t count, DataType type, int peer) {
  auto& d = *impl_;
  d.checkType("recv", type, RedOp::sum);
  d.checkRoot("recv", peer, "peer");
  if (peer == d.config.rank) {
    fail(Code::invalid_argument, d.who() + ": recv: from itself (use a local copy)");
  }
  const size_t bytes = d.checkedBytes("recv", count, type);
  d.checkBuffers("recv", nullptr, 0, buf, bytes, false, nullptr);
  d.drainQueue();
  d.run(
      {0, count, peer, Collective::send_recv, type, RedOp::sum},
      [&](const OpContext& base) {
        OpContext ctx = base;
        ctx.desc.seq = ++d.receivedFrom[peer];
        d.execute(ctx, nullptr, buf, [&](auto& p) { algo::recvFrom(p, peer, count); });
      },
      /*p2p=*/true);
}

}  // namespace gyre
