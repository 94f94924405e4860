// Groups: consecutive all-reduces of one type and op fused into one pass through a staging
// buffer, and every send and receive of the group run together.
#include <cstring>

#include "base/copy_bytes.h"
#include "runtime/core/communicator_impl.h"

namespace gyre {

namespace {

bool fusable(const GroupOp& a, const GroupOp& b) {
  return a.coll == Collective::all_reduce && b.coll == Collective::all_reduce && a.type == b.type &&
         a.op == b.op;
}

// The sends (or receives) of a group to (or from) one peer, cut into rounds of at most
// `slotsPerRound` slots. Both ends of a link cut the same list alike, so a round's pieces
// always fit the link and every rank can finish its sends of a round before it receives.
struct LinkQueue {
  std::vector<size_t> ops;  // indexes into the group's p2p ops, in issue order
  size_t current = 0;       // first unfinished op
  size_t done = 0;          // elements of it already moved
};

}  // namespace

void Communicator::runGroup(const std::vector<GroupOp>& ops) {
  auto& d = *impl_;
  std::vector<GroupOp> p2p;
  for (size_t i = 0; i < ops.size();) {
    const GroupOp& op = ops[i];
    if (op.other) {
      op.other(*this);
      ++i;
      continue;
    }
    if (op.coll == Collective::send_recv) {
      p2p.push_back(op);
      ++i;
      continue;
    }
    size_t j = i + 1;
    size_t total = op.count;
    while (j < ops.size() && !ops[j].other &&
           (fusable(op, ops[j]) || ops[j].coll == Collective::send_recv)) {
      if (ops[j].coll != Collective::send_recv) {
        // The fused buffer holds them all: its size must fit, as one call's would.
        if (ops[j].count > SIZE_MAX - total) {
          fail(Code::invalid_argument,
               d.who() + ": all_reduce in a group: counts " + std::to_string(total) + " and " +
                   std::to_string(ops[j].count) + " fused exceed SIZE_MAX elements");
        }
        total += ops[j].count;
      }
      ++j;
    }
    if (total != op.count) d.checkedBytes("all_reduce in a group (fused)", total, op.type);
    if (op.coll != Collective::all_reduce || total == op.count) {
      switch (op.coll) {
        case Collective::all_reduce:
          allReduce(op.send, op.recv, op.count, op.type, op.op);
          break;
        case Collective::broadcast:
          broadcast(op.send, op.recv, op.count, op.type, op.root);
          break;
        case Collective::reduce:
          reduce(op.send, op.recv, op.count, op.type, op.op, op.root);
          break;
        case Collective::all_gather:
          allGather(op.send, op.recv, op.count, op.type);
          break;
        case Collective::reduce_scatter:
          reduceScatter(op.send, op.recv, op.count, op.type, op.op);
          break;
        default:
          fail(Code::invalid_argument,
               d.who() + ": " + collectiveName(op.coll) + " cannot be part of a group");
      }
      if (op.coll != Collective::all_reduce) {
        ++i;
        continue;
      }
    } else {
      // One all-reduce over the concatenation of ops i..j-1 (sends and receives among them
      // wait for the batch at the end).
      const size_t es = dataTypeSize(op.type);
      std::vector<std::byte>& staging = d.groupStaging;
      staging.resize(total * es);
      size_t at = 0;
      for (size_t k = i; k < j; ++k) {
        if (ops[k].coll != Collective::all_reduce) continue;
        if (ops[k].count && !ops[k].send) {
          fail(Code::invalid_argument, d.who() + ": all_reduce in a group: sendbuff is null");
        }
        if (ops[k].count && !ops[k].recv) {
          fail(Code::invalid_argument, d.who() + ": all_reduce in a group: recvbuff is null");
        }
        if (ops[k].count) copyBytes(staging.data() + at, ops[k].send, ops[k].count * es);
        at += ops[k].count * es;
      }
      allReduce(staging.data(), staging.data(), total, op.type, op.op);
      at = 0;
      for (size_t k = i; k < j; ++k) {
        if (ops[k].coll != Collective::all_reduce) continue;
        if (ops[k].count) copyBytes(ops[k].recv, staging.data() + at, ops[k].count * es);
        at += ops[k].count * es;
      }
    }
    // The sends and receives inside the fused run still belong to the batch.
    for (size_t k = i + 1; k < j; ++k)
      if (ops[k].coll == Collective::send_recv) p2p.push_back(ops[k]);
    i = j;
  }
  if (!p2p.empty()) d.sendRecvBatch(p2p);
}

void Communicator::Impl::sendRecvBatch(const std::vector<GroupOp>& ops) {
  const int n = config.nranks;
  for (const GroupOp& op : ops) {
    const char* what = op.isSend ? "send" : "recv";
    checkType(what, op.type, RedOp::sum);
    checkRoot(what, op.peer, "peer");
    if (op.peer == config.rank) fail(Code::invalid_argument, who() + ": " + what + " to itself");
    const size_t bytes = checkedBytes(what, op.count, op.type);
    if (bytes && !(op.isSend ? op.send : op.recv)) {
      fail(Code::invalid_argument, who() + ": " + what + " in a group: the buffer is null");
    }
  }
  drainQueue();
  OpDesc batch{0, ops.size(), config.rank, Collective::send_recv, DataType::u8, RedOp::sum};
  run(
      batch,
      [&](const OpContext& base) {
        std::vector<LinkQueue> sends(n), recvs(n);
        std::vector<OpContext> contexts(ops.size(), base);
        std::vector<int> peers;
        for (size_t k = 0; k < ops.size(); ++k) {
          const GroupOp& op = ops[k];
          OpDesc& desc = contexts[k].desc;
          desc = {op.isSend ? ++sentTo[op.peer] : ++receivedFrom[op.peer],
                  op.count,
                  op.isSend ? config.rank : op.peer,
                  Collective::send_recv,
                  op.type,
                  RedOp::sum};
          (op.isSend ? sends : recvs)[op.peer].ops.push_back(k);
          peers.push_back(op.peer);
        }
        std::sort(peers.begin(), peers.end());
        for (int peer : peers) connection(peer, 0);  // ascending: see execute()
        // A send may leave straight from its buffer (registered memory over rdma) unless a
        // receive of the same group writes into it.
        for (size_t k = 0; k < ops.size(); ++k) {
          if (!ops[k].isSend) continue;
          const size_t bytes = ops[k].count * dataTypeSize(ops[k].type);
          for (const GroupOp& other : ops) {
            if (!other.isSend &&
                overlaps(ops[k].send, bytes, other.recv, other.count * dataTypeSize(other.type))) {
              contexts[k].inputReadOnly = false;
            }
          }
        }
        std::vector<std::unique_ptr<HostPrims>> prims;
        for (size_t k = 0; k < ops.size(); ++k) {
          const GroupOp& op = ops[k];
          prims.push_back(std::make_unique<HostPrims>(
              contexts[k], [this](int peer) -> Connection& { return connection(peer, 0); }, op.send,
              op.recv));
          if (op.isSend) {
            prims.back()->setPeers(nullptr, 0, &op.peer, 1);
          } else {
            prims.back()->setPeers(&op.peer, 1, nullptr, 0);
          }
        }
        const size_t slotsPerRound = std::max<size_t>(1, config.nSlots / 2);
        // Moves the next round of one link's queue; false once the queue is empty.
        auto step = [&](LinkQueue& q) {
          size_t budget = slotsPerRound;
          while (budget > 0 && q.current < q.ops.size()) {
            const size_t k = q.ops[q.current];
            const GroupOp& op = ops[k];
            const size_t sliceElems = std::max<size_t>(1, config.slotBytes / dataTypeSize(op.type));
            const size_t left = op.count - q.done;
            const size_t take = std::min(left, budget * sliceElems);
            if (take > 0) {
              if (op.isSend) {
                prims[k]->send(q.done, take);
              } else {
                prims[k]->recv(q.done, take);
              }
              budget -= (take + sliceElems - 1) / sliceElems;
            }
            q.done += take;
            if (q.done == op.count) {
              ++q.current;
              q.done = 0;
            }
          }
          return q.current < q.ops.size();
        };
        for (bool more = true; more;) {
          more = false;
          for (auto& q : sends) more = step(q) || more;
          for (auto& q : recvs) more = step(q) || more;
        }
        for (auto& p : prims) p->finish();
      },
      /*p2p=*/true);
}

}  // namespace gyre
