// The C API's collectives and groups (work handles: api_work.cc; a group's stream-ordered
// calls: api_stream_group.cc; premul sums: api_premul.cc). Host buffers with no stream run the
// blocking host form (or are deferred inside a group); a stream or CUDA device memory takes the
// stream-ordered form (docs/cuda.md).
#include <algorithm>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "base/device_memory.h"
#include "runtime/api/api_internal.h"
#include "runtime/core/arg_checks.h"

using namespace gyre::api;

namespace {

struct GroupState {
  std::vector<std::pair<gyreComm_t, gyre::GroupOp>> ops;
  std::vector<StreamOp> streamOps;
};
thread_local GroupState group;
// Open gyreGroupStart calls on this thread. Every call reads it: a plain word needs no look
// whether the thread's GroupState was constructed yet.
thread_local int groupDepth = 0;

[[gnu::noinline]] void defer(gyreComm_t comm, const gyre::GroupOp& op) {
  commOf(comm);
  group.ops.emplace_back(comm, op);
}

// Defers `op` when a group is open; returns false when the caller should run it now.
inline bool deferred(gyreComm_t comm, const gyre::GroupOp& op) {
  if (groupDepth == 0) return false;
  defer(comm, op);
  return true;
}

// The group's calls per communicator, in order of first use.
std::vector<std::pair<gyreComm_t, std::vector<gyre::GroupOp>>> takeGroup() {
  std::vector<std::pair<gyreComm_t, std::vector<gyre::GroupOp>>> byComm;
  for (auto& entry : group.ops) {
    const gyreComm_t comm = entry.first;
    auto it = std::find_if(byComm.begin(), byComm.end(), [&](auto& e) { return e.first == comm; });
    if (it == byComm.end()) it = byComm.insert(byComm.end(), {comm, {}});
    it->second.push_back(std::move(entry.second));
  }
  group.ops.clear();
  return byComm;
}

// Calls that groups run in their place, unfused. Outside a group nothing is wrapped: a
// std::function of the call would allocate on every call.
template <class Call>
void runOrDefer(gyreComm_t comm, Call call) {
  if (groupDepth == 0) return call(commOf(comm));
  gyre::GroupOp g;
  g.other = call;
  defer(comm, g);
}

gyre::GroupOp groupOp(gyre::Collective coll, const void* send, void* recv, size_t count,
                      gyre::DataType type, gyre::RedOp op = gyre::RedOp::sum) {
  gyre::GroupOp g;
  g.coll = coll;
  g.send = send;
  g.recv = recv;
  g.count = count;
  g.type = type;
  g.op = op;
  return g;
}

// --- stream-ordered calls (docs/cuda.md) ---------------------------------------------------

constexpr auto In = gyre::StagedBuffer::in;
constexpr auto Out = gyre::StagedBuffer::out;
constexpr auto InOut = gyre::StagedBuffer::inOut;
constexpr auto Unstaged = gyre::StagedBuffer::unstaged;

// A call names a stream, or passes CUDA device memory: it is stream-ordered. Host buffers with
// no stream take the blocking host form.
bool anyOnDevice(std::initializer_list<const void*> buffers) {
  return std::any_of(buffers.begin(), buffers.end(),
                     [](const void* p) { return p && gyre::isCudaDeviceMemory(p); });
}
// Inline, the look at each buffer out of line: a tiny host call's path feels every frame.
[[gnu::always_inline]] inline bool onStream(gyreStream_t stream,
                                            std::initializer_list<const void*> buffers) {
  if (stream) return true;
  if (!gyre::cudaDriverLoaded()) return false;  // one look for every buffer of the call
  return anyOnDevice(buffers);
}

// "rank R: what", for errors found before the call is enqueued.
std::string callOf(gyreComm_t comm, const char* what) {
  return "rank " + std::to_string(commOf(comm).rank()) + ": " + what;
}

size_t bytesOf(gyreComm_t comm, const char* what, size_t count, gyre::DataType type,
               size_t blocks = 1) {
  return gyre::checkedBytes(commOf(comm).rank(), what, count, type, blocks);
}

// Whether this rank is `root`, after checking it names a rank (the host call checks again,
// but only once the stream reaches it).
bool checkedRoot(gyreComm_t comm, const char* what, int root, const char* role = "root") {
  auto& c = commOf(comm);
  gyre::checkRank(c.rank(), what, root, c.size(), role);
  return c.rank() == root;
}

// One size_t per rank, copied: the call runs after this one returns.
std::vector<size_t> copied(gyreComm_t comm, const char* what, const size_t* values,
                           const char* name) {
  if (!values)
    gyre::fail(gyre::Code::invalid_argument, callOf(comm, what) + ": " + name + " is null");
  return std::vector<size_t>(values, values + commOf(comm).size());
}

// Bytes from a buffer's start to the end of its furthest block.
size_t extentBytes(gyreComm_t comm, const char* what, const std::vector<size_t>& counts,
                   const std::vector<size_t>& displs, gyre::DataType type) {
  size_t end = 0;
  for (size_t r = 0; r < counts.size(); ++r) {
    if (counts[r] == 0) continue;
    if (displs[r] > SIZE_MAX - counts[r]) {
      gyre::fail(gyre::Code::invalid_argument, callOf(comm, what) + ": displacement overflows");
    }
    end = std::max(end, displs[r] + counts[r]);
  }
  return bytesOf(comm, what, end, type);
}

// Enqueues a stream-ordered call, or defers it when a group is open: `asGroupOp` makes the
// GroupOp that fuses and batches (all-reduce, broadcast, reduce, all-gather, reduce-scatter,
// send, recv); other calls run in the group's place as they are.
void streamed(gyreComm_t comm, gyreStream_t stream, const char* what,
              std::vector<gyre::StagedBuffer> buffers, gyre::StagedBody body, size_t elems = 0,
              size_t elemBytes = 0, std::function<gyre::GroupOp(const Staged&)> asGroupOp = {},
              std::optional<gyre::KernelCall> kernel = std::nullopt) {
  if (groupDepth > 0) {
    commOf(comm);
    if (!asGroupOp) {
      asGroupOp = [body, elems](const Staged& staged) {
        gyre::GroupOp g;
        g.other = [body, staged, elems](gyre::Communicator& c) { body(c, staged, elems); };
        return g;
      };
    }
    group.streamOps.push_back({comm, stream, std::move(buffers), std::move(asGroupOp), what,
                               std::move(body), elems, elemBytes, kernel});
    return;
  }
  commOf(comm).enqueueOnStream(stream, what, std::move(buffers), std::move(body), elems, elemBytes,
                               kernel);
}

// What a collective kernel over cuda_ipc links needs to run the call instead of staging it.
gyre::KernelCall kernelCall(gyre::Collective coll, size_t count, gyre::DataType type,
                            gyre::RedOp op = gyre::RedOp::sum, int root = -1) {
  return {coll, type, op, count, root};
}

// A GroupOp over staged pointers: send = staged[0], recv = staged[1] (or staged[0] alone for a
// receive).
std::function<gyre::GroupOp(const Staged&)> staging(gyre::GroupOp g) {
  return [g](const Staged& s) {
    gyre::GroupOp op = g;
    if (op.coll == gyre::Collective::send_recv && !op.isSend) {
      op.recv = s[0];
    } else {
      op.send = s[0];
      if (s.size() > 1) op.recv = s[1];
    }
    return op;
  };
}

// A call with a premul sum (gyreRedOpCreatePreMulSum): its input scaled into a new buffer as
// the call runs (in stream order where it is stream-ordered, the scalar too), then summed by
// `sum`. Never a kernel and never fused in a group: the scaling comes first.
void preMulCall(gyreComm_t comm, gyreStream_t stream, const char* what, const PreMulSum& p,
                const void* send, size_t inCount, size_t inBlocks, void* recv, size_t outBytes,
                std::function<void(gyre::Communicator&, const void* in, void* out)> sum) {
  const size_t inBytes = bytesOf(comm, what, inCount, p.type, inBlocks);
  inCount *= inBlocks;  // checked just above
  // Checked here: the collective itself sees only the scaled copy.
  if (inBytes && !send)
    gyre::fail(gyre::Code::invalid_argument, callOf(comm, what) + ": sendbuff is null");
  if (outBytes && !recv)
    gyre::fail(gyre::Code::invalid_argument, callOf(comm, what) + ": recvbuff is null");
  if (onStream(stream, {send, recv, p.immediate ? nullptr : p.scalar})) {
    std::vector<gyre::StagedBuffer> buffers{{send, inBytes, In, "sendbuff"},
                                            {recv, outBytes, Out, "recvbuff"}};
    if (!p.immediate) buffers.push_back({p.scalar, gyre::dataTypeSize(p.type), In, "scalar"});
    return streamed(comm, stream, what, std::move(buffers),
                    [=](gyre::Communicator& c, const Staged& s, size_t) {
                      sum(c, preMultiplied(p, s[0], inCount, p.immediate ? nullptr : s[2]).get(),
                          s[1]);
                    });
  }
  runOrDefer(comm,
             [=](gyre::Communicator& c) { sum(c, preMultiplied(p, send, inCount).get(), recv); });
}

}  // namespace

extern "C" {

gyreResult_t gyreAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           gyreDataType_t datatype, gyreRedOp_t op, gyreComm_t comm,
                           gyreStream_t stream) {
  return guarded([&] {
    if (const auto p = preMulSumOf(comm, op, typeOf(datatype), "all_reduce")) {
      return preMulCall(comm, stream, "all_reduce", *p, sendbuff, count, 1, recvbuff,
                        bytesOf(comm, "all_reduce", count, p->type),
                        [=](gyre::Communicator& c, const void* in, void* out) {
                          c.allReduce(in, out, count, p->type, gyre::RedOp::sum);
                        });
    }
    auto g = groupOp(gyre::Collective::all_reduce, sendbuff, recvbuff, count, typeOf(datatype),
                     opOf(op));
    if (onStream(stream, {sendbuff, recvbuff})) {
      const size_t bytes = bytesOf(comm, "all_reduce", count, g.type);
      return streamed(
          comm, stream, "all_reduce",
          {{sendbuff, bytes, In, "sendbuff"}, {recvbuff, bytes, Out, "recvbuff"}},
          [=](gyre::Communicator& c, const Staged& s, size_t n) {
            c.allReduce(s[0], s[1], n, g.type, g.op);
          },
          count, gyre::dataTypeSize(g.type), staging(g), kernelCall(g.coll, count, g.type, g.op));
    }
    if (!deferred(comm, g)) commOf(comm).allReduce(sendbuff, recvbuff, count, g.type, g.op);
  });
}

gyreResult_t gyreAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                           gyreDataType_t datatype, gyreComm_t comm, gyreStream_t stream) {
  return guarded([&] {
    auto g = groupOp(gyre::Collective::all_gather, sendbuff, recvbuff, sendcount, typeOf(datatype));
    if (onStream(stream, {sendbuff, recvbuff})) {
      const size_t n = size_t(commOf(comm).size());
      return streamed(
          comm, stream, "all_gather",
          {{sendbuff, bytesOf(comm, "all_gather", sendcount, g.type), In, "sendbuff"},
           {recvbuff, bytesOf(comm, "all_gather", sendcount, g.type, n), Out, "recvbuff"}},
          [=](gyre::Communicator& c, const Staged& s, size_t) {
            c.allGather(s[0], s[1], sendcount, g.type);
          },
          0, 0, staging(g), kernelCall(g.coll, sendcount, g.type));
    }
    if (!deferred(comm, g)) commOf(comm).allGather(sendbuff, recvbuff, sendcount, g.type);
  });
}

gyreResult_t gyreReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                               gyreDataType_t datatype, gyreRedOp_t op, gyreComm_t comm,
                               gyreStream_t stream) {
  return guarded([&] {
    if (const auto p = preMulSumOf(comm, op, typeOf(datatype), "reduce_scatter")) {
      const size_t n = size_t(commOf(comm).size());
      return preMulCall(comm, stream, "reduce_scatter", *p, sendbuff, recvcount, n, recvbuff,
                        bytesOf(comm, "reduce_scatter", recvcount, p->type),
                        [=](gyre::Communicator& c, const void* in, void* out) {
                          c.reduceScatter(in, out, recvcount, p->type, gyre::RedOp::sum);
                        });
    }
    auto g = groupOp(gyre::Collective::reduce_scatter, sendbuff, recvbuff, recvcount,
                     typeOf(datatype), opOf(op));
    if (onStream(stream, {sendbuff, recvbuff})) {
      const size_t n = size_t(commOf(comm).size());
      return streamed(
          comm, stream, "reduce_scatter",
          {{sendbuff, bytesOf(comm, "reduce_scatter", recvcount, g.type, n), In, "sendbuff"},
           {recvbuff, bytesOf(comm, "reduce_scatter", recvcount, g.type), Out, "recvbuff"}},
          [=](gyre::Communicator& c, const Staged& s, size_t) {
            c.reduceScatter(s[0], s[1], recvcount, g.type, g.op);
          },
          0, 0, staging(g), kernelCall(g.coll, recvcount, g.type, g.op));
    }
    if (!deferred(comm, g)) commOf(comm).reduceScatter(sendbuff, recvbuff, recvcount, g.type, g.op);
  });
}

gyreResult_t gyreBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                           gyreDataType_t datatype, int root, gyreComm_t comm,
                           gyreStream_t stream) {
  return guarded([&] {
    auto g = groupOp(gyre::Collective::broadcast, sendbuff, recvbuff, count, typeOf(datatype));
    g.root = root;
    if (onStream(stream, {sendbuff, recvbuff})) {
      const bool isRoot = checkedRoot(comm, "broadcast", root);
      const size_t bytes = bytesOf(comm, "broadcast", count, g.type);
      return streamed(
          comm, stream, "broadcast",
          {{isRoot ? sendbuff : nullptr, isRoot ? bytes : 0, In, "sendbuff"},
           {recvbuff, bytes, Out, "recvbuff"}},
          [=](gyre::Communicator& c, const Staged& s, size_t n) {
            c.broadcast(s[0], s[1], n, g.type, root);
          },
          count, gyre::dataTypeSize(g.type), staging(g),
          kernelCall(g.coll, count, g.type, gyre::RedOp::sum, root));
    }
    if (!deferred(comm, g)) commOf(comm).broadcast(sendbuff, recvbuff, count, g.type, root);
  });
}

gyreResult_t gyreBcast(void* buff, size_t count, gyreDataType_t datatype, int root, gyreComm_t comm,
                       gyreStream_t stream) {
  return gyreBroadcast(buff, buff, count, datatype, root, comm, stream);
}

gyreResult_t gyreReduce(const void* sendbuff, void* recvbuff, size_t count, gyreDataType_t datatype,
                        gyreRedOp_t op, int root, gyreComm_t comm, gyreStream_t stream) {
  return guarded([&] {
    if (const auto p = preMulSumOf(comm, op, typeOf(datatype), "reduce")) {
      const bool isRoot = checkedRoot(comm, "reduce", root);
      return preMulCall(comm, stream, "reduce", *p, sendbuff, count, 1, isRoot ? recvbuff : nullptr,
                        isRoot ? bytesOf(comm, "reduce", count, p->type) : 0,
                        [=](gyre::Communicator& c, const void* in, void* out) {
                          c.reduce(in, out, count, p->type, gyre::RedOp::sum, root);
                        });
    }
    auto g =
        groupOp(gyre::Collective::reduce, sendbuff, recvbuff, count, typeOf(datatype), opOf(op));
    g.root = root;
    if (onStream(stream, {sendbuff, recvbuff})) {
      const bool isRoot = checkedRoot(comm, "reduce", root);
      const size_t bytes = bytesOf(comm, "reduce", count, g.type);
      return streamed(
          comm, stream, "reduce",
          {{sendbuff, bytes, In, "sendbuff"},
           {isRoot ? recvbuff : nullptr, isRoot ? bytes : 0, Out, "recvbuff"}},
          [=](gyre::Communicator& c, const Staged& s, size_t n) {
            c.reduce(s[0], s[1], n, g.type, g.op, root);
          },
          count, gyre::dataTypeSize(g.type), staging(g),
          kernelCall(g.coll, count, g.type, g.op, root));
    }
    if (!deferred(comm, g)) commOf(comm).reduce(sendbuff, recvbuff, count, g.type, g.op, root);
  });
}

gyreResult_t gyreGather(const void* sendbuff, void* recvbuff, size_t count, gyreDataType_t datatype,
                        int root, gyreComm_t comm, gyreStream_t stream) {
  return guarded([&] {
    const auto type = typeOf(datatype);
    if (onStream(stream, {sendbuff, recvbuff})) {
      const bool isRoot = checkedRoot(comm, "gather", root);
      const size_t n = size_t(commOf(comm).size());
      return streamed(
          comm, stream, "gather",
          {{sendbuff, bytesOf(comm, "gather", count, type), In, "sendbuff"},
           {isRoot ? recvbuff : nullptr, isRoot ? bytesOf(comm, "gather", count, type, n) : 0, Out,
            "recvbuff"}},
          [=](gyre::Communicator& c, const Staged& s, size_t) {
            c.gather(s[0], s[1], count, type, root);
          },
          0, 0, {}, kernelCall(gyre::Collective::gather, count, type, gyre::RedOp::sum, root));
    }
    runOrDefer(comm,
               [=](gyre::Communicator& c) { c.gather(sendbuff, recvbuff, count, type, root); });
  });
}

gyreResult_t gyreScatter(const void* sendbuff, void* recvbuff, size_t count,
                         gyreDataType_t datatype, int root, gyreComm_t comm, gyreStream_t stream) {
  return guarded([&] {
    const auto type = typeOf(datatype);
    if (onStream(stream, {sendbuff, recvbuff})) {
      const bool isRoot = checkedRoot(comm, "scatter", root);
      const size_t n = size_t(commOf(comm).size());
      return streamed(
          comm, stream, "scatter",
          {{isRoot ? sendbuff : nullptr, isRoot ? bytesOf(comm, "scatter", count, type, n) : 0, In,
            "sendbuff"},
           {recvbuff, bytesOf(comm, "scatter", count, type), Out, "recvbuff"}},
          [=](gyre::Communicator& c, const Staged& s, size_t) {
            c.scatter(s[0], s[1], count, type, root);
          },
          0, 0, {}, kernelCall(gyre::Collective::scatter, count, type, gyre::RedOp::sum, root));
    }
    runOrDefer(comm,
               [=](gyre::Communicator& c) { c.scatter(sendbuff, recvbuff, count, type, root); });
  });
}

gyreResult_t gyreAllToAll(const void* sendbuff, void* recvbuff, size_t count,
                          gyreDataType_t datatype, gyreComm_t comm, gyreStream_t stream) {
  return guarded([&] {
    const auto type = typeOf(datatype);
    if (onStream(stream, {sendbuff, recvbuff})) {
      const size_t bytes = bytesOf(comm, "all_to_all", count, type, size_t(commOf(comm).size()));
      return streamed(
          comm, stream, "all_to_all",
          {{sendbuff, bytes, In, "sendbuff"}, {recvbuff, bytes, Out, "recvbuff"}},
          [=](gyre::Communicator& c, const Staged& s, size_t) {
            c.allToAll(s[0], s[1], count, type);
          },
          0, 0, {}, kernelCall(gyre::Collective::all_to_all, count, type));
    }
    runOrDefer(comm, [=](gyre::Communicator& c) { c.allToAll(sendbuff, recvbuff, count, type); });
  });
}

gyreResult_t gyreAllGatherV(const void* sendbuff, size_t sendcount, void* recvbuff,
                            const size_t* recvcounts, const size_t* displs, gyreDataType_t datatype,
                            gyreComm_t comm, gyreStream_t stream) {
  return guarded([&] {
    const auto type = typeOf(datatype);
    // Copied now: a group runs the call later, when the caller's arrays may be gone.
    const auto counts = copied(comm, "all_gather_v", recvcounts, "recvcounts");
    const auto at = copied(comm, "all_gather_v", displs, "displs");
    if (onStream(stream, {sendbuff, recvbuff})) {
      return streamed(
          comm, stream, "all_gather_v",
          {{sendbuff, bytesOf(comm, "all_gather_v", sendcount, type), In, "sendbuff"},
           {recvbuff, extentBytes(comm, "all_gather_v", counts, at, type), InOut, "recvbuff"}},
          [=](gyre::Communicator& c, const Staged& s, size_t) {
            c.allGatherV(s[0], sendcount, s[1], counts.data(), at.data(), type);
          });
    }
    runOrDefer(comm, [=](gyre::Communicator& c) {
      c.allGatherV(sendbuff, sendcount, recvbuff, counts.data(), at.data(), type);
    });
  });
}

gyreResult_t gyreAllToAllV(const void* sendbuff, const size_t* sendcounts, const size_t* sdispls,
                           void* recvbuff, const size_t* recvcounts, const size_t* rdispls,
                           gyreDataType_t datatype, gyreComm_t comm, gyreStream_t stream) {
  return guarded([&] {
    const auto type = typeOf(datatype);
    // Copied now: a group runs the call later, when the caller's arrays may be gone.
    const auto sc = copied(comm, "all_to_all_v", sendcounts, "sendcounts");
    const auto sd = copied(comm, "all_to_all_v", sdispls, "sdispls");
    const auto rc = copied(comm, "all_to_all_v", recvcounts, "recvcounts");
    const auto rd = copied(comm, "all_to_all_v", rdispls, "rdispls");
    if (onStream(stream, {sendbuff, recvbuff})) {
      return streamed(
          comm, stream, "all_to_all_v",
          {{sendbuff, extentBytes(comm, "all_to_all_v", sc, sd, type), In, "sendbuff"},
           {recvbuff, extentBytes(comm, "all_to_all_v", rc, rd, type), InOut, "recvbuff"}},
          [=](gyre::Communicator& c, const Staged& s, size_t) {
            c.allToAllV(s[0], sc.data(), sd.data(), s[1], rc.data(), rd.data(), type);
          });
    }
    runOrDefer(comm, [=](gyre::Communicator& c) {
      c.allToAllV(sendbuff, sc.data(), sd.data(), recvbuff, rc.data(), rd.data(), type);
    });
  });
}

gyreResult_t gyreBarrier(gyreComm_t comm) {
  return guarded([&] { runOrDefer(comm, [](gyre::Communicator& c) { c.barrier(); }); });
}

gyreResult_t gyreSend(const void* sendbuff, size_t count, gyreDataType_t datatype, int peer,
                      gyreComm_t comm, gyreStream_t stream) {
  return guarded([&] {
    auto g = groupOp(gyre::Collective::send_recv, sendbuff, nullptr, count, typeOf(datatype));
    g.peer = peer;
    g.isSend = true;
    if (onStream(stream, {sendbuff})) {
      checkedRoot(comm, "send", peer, "peer");
      const size_t bytes = bytesOf(comm, "send", count, g.type);
      // GPUDirect RDMA: device memory registered with the adapter leaves from where it is.
      const bool unstaged = groupDepth == 0 && gyre::isCudaDeviceMemory(sendbuff) &&
                            commOf(comm).sendsUnstaged(peer, sendbuff, bytes);
      return streamed(
          comm, stream, "send", {{sendbuff, bytes, unstaged ? Unstaged : In, "sendbuff"}},
          [=](gyre::Communicator& c, const Staged& s, size_t) {
            if (unstaged) {
              c.sendUnstaged(s[0], count, g.type, peer);
            } else {
              c.send(s[0], count, g.type, peer);
            }
          },
          0, 0, staging(g));
    }
    if (!deferred(comm, g)) commOf(comm).send(sendbuff, count, g.type, peer);
  });
}

gyreResult_t gyreRecv(void* recvbuff, size_t count, gyreDataType_t datatype, int peer,
                      gyreComm_t comm, gyreStream_t stream) {
  return guarded([&] {
    auto g = groupOp(gyre::Collective::send_recv, nullptr, recvbuff, count, typeOf(datatype));
    g.peer = peer;
    if (onStream(stream, {recvbuff})) {
      checkedRoot(comm, "recv", peer, "peer");
      return streamed(
          comm, stream, "recv", {{recvbuff, bytesOf(comm, "recv", count, g.type), Out, "recvbuff"}},
          [=](gyre::Communicator& c, const Staged& s, size_t) {
            c.recv(s[0], count, g.type, peer);
          },
          0, 0, staging(g));
    }
    if (!deferred(comm, g)) commOf(comm).recv(recvbuff, count, g.type, peer);
  });
}

gyreResult_t gyreGroupStart(void) {
  ++groupDepth;
  return gyreSuccess;
}

gyreResult_t gyreGroupEnd(void) {
  return guarded([&] {
    if (groupDepth == 0)
      gyre::fail(gyre::Code::invalid_usage, "gyreGroupEnd without gyreGroupStart");
    if (--groupDepth > 0) return;
    auto streamOps = std::move(group.streamOps);
    group.streamOps.clear();
    for (const auto& op : streamOps) {
      for (const auto& [comm, hostOp] : group.ops) {
        if (comm == op.comm) {
          group.ops.clear();
          gyre::fail(gyre::Code::invalid_usage,
                     "a group mixes stream-ordered calls (CUDA memory or a stream) with host "
                     "calls on one communicator");
        }
      }
    }
    // Every communicator runs its part even when an earlier one failed; the first error wins.
    std::unique_ptr<gyre::Failure> first;
    try {
      runStreamGroup(std::move(streamOps));
    } catch (const gyre::Failure& f) {
      first = std::make_unique<gyre::Failure>(f);
    }
    auto parts = takeGroup();
    if (parts.size() == 1) {  // on this thread: no hand-over for the common case
      try {
        commOf(parts[0].first).runGroup(parts[0].second);
      } catch (const gyre::Failure& f) {
        if (!first) first = std::make_unique<gyre::Failure>(f);
      }
    } else {
      // Several communicators progress together, as NCCL's group does: one part waiting on
      // its peers must not hold back another (the ranks may order them differently, or this
      // thread may drive several ranks). Each part runs on its communicator's worker; the
      // parts' own waits have deadlines.
      std::vector<std::shared_ptr<gyre::Work>> works;
      for (auto& [comm, ops] : parts) {
        try {  // a communicator destroyed since its call: the others' parts still run
          works.push_back(commOf(comm).async(
              [ops = std::move(ops)](gyre::Communicator& c) { c.runGroup(ops); }, false));
        } catch (const gyre::Failure& f) {
          if (!first) first = std::make_unique<gyre::Failure>(f);
        }
      }
      for (auto& work : works) {
        const gyre::Status s = work->wait(std::chrono::hours(24 * 365), false);
        if (!s.ok() && !first) first = std::make_unique<gyre::Failure>(s);
      }
    }
    if (first) throw *first;
  });
}

gyreResult_t gyreGroupEndAsync(gyreWork_t* work) {
  return guarded([&] {
    if (!work) gyre::fail(gyre::Code::invalid_argument, "work is null");
    *work = nullptr;
    if (groupDepth == 0) {
      gyre::fail(gyre::Code::invalid_usage, "gyreGroupEndAsync without gyreGroupStart");
    }
    if (--groupDepth > 0) {
      gyre::fail(gyre::Code::invalid_usage, "gyreGroupEndAsync inside a nested group");
    }
    if (!group.streamOps.empty()) {
      group.streamOps.clear();
      group.ops.clear();
      gyre::fail(gyre::Code::invalid_usage,
                 "gyreGroupEndAsync with stream-ordered calls: use gyreGroupEnd, which enqueues "
                 "them on their stream and returns");
    }
    auto handle = std::make_unique<gyreWork>();
    for (auto& [comm, ops] : takeGroup()) {
      handle->parts.push_back(
          commOf(comm).async([ops = std::move(ops)](gyre::Communicator& c) { c.runGroup(ops); }));
    }
    *work = handle.release();
  });
}

}  // extern "C"
