// The C API: argument checks that need no communicator, exceptions turned into result codes,
// and the last error message kept per thread.
#include <algorithm>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "gyre/gyre.h"
#include "runtime/auth.h"
#include "runtime/communicator.h"
#include "runtime/device_memory.h"
#include "runtime/store/server.h"

struct gyreComm {
  std::unique_ptr<gyre::Communicator> impl;
};

struct gyreWork {
  std::vector<std::shared_ptr<gyre::Work>> parts;  // one per communicator of the group
};

namespace {

thread_local std::string lastError;

gyreResult_t toResult(gyre::Code code) {
  return static_cast<gyreResult_t>(code);
}

template <class Fn>
gyreResult_t guarded(Fn&& fn) {
  try {
    fn();
    return gyreSuccess;
  } catch (const gyre::Failure& f) {
    lastError = f.status().message;
    return toResult(f.status().code);
  } catch (const std::bad_alloc&) {
    lastError = "out of memory";
    return gyreSystemError;
  } catch (const std::exception& e) {
    lastError = std::string("internal error: ") + e.what();
    return gyreInternalError;
  }
}

gyre::Communicator& commOf(gyreComm_t comm) {
  if (!comm || !comm->impl) gyre::fail(gyre::Code::invalid_argument, "comm is null or destroyed");
  return *comm->impl;
}

gyre::DataType typeOf(gyreDataType_t t) {
  if (int(t) < 0 || int(t) >= gyreNumTypes) {
    gyre::fail(gyre::Code::invalid_argument, "unknown data type " + std::to_string(int(t)));
  }
  return static_cast<gyre::DataType>(t);
}

gyre::RedOp opOf(gyreRedOp_t op) {
  if (int(op) < 0 || int(op) >= gyreNumOps) {
    gyre::fail(gyre::Code::invalid_argument, "unknown reduction op " + std::to_string(int(op)));
  }
  return static_cast<gyre::RedOp>(op);
}

// Unique id layout (128 bytes): magic "GYU2", u16 port, u8 host length, host (up to 46
// bytes), job id (32 hex chars), secret (32 hex chars), zero padding.
constexpr char kIdMagic[4] = {'G', 'Y', 'U', '2'};
constexpr size_t kIdHostOffset = 7, kIdHostMax = 46, kIdJobOffset = kIdHostOffset + kIdHostMax,
                 kIdSecretOffset = kIdJobOffset + 32;
static_assert(kIdSecretOffset + 32 <= GYRE_UNIQUE_ID_BYTES, "unique id layout");

// Calls deferred between gyreGroupStart and gyreGroupEnd on this thread.
struct GroupState {
  int depth = 0;
  std::vector<std::pair<gyreComm_t, gyre::GroupOp>> ops;
};
thread_local GroupState group;

// Defers `op` when a group is open; returns false when the caller should run it now.
bool deferred(gyreComm_t comm, gyre::GroupOp op) {
  if (group.depth == 0) return false;
  commOf(comm);
  group.ops.emplace_back(comm, std::move(op));
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

// Calls that groups run in their place, unfused.
template <class Call>
void runOrDefer(gyreComm_t comm, Call call) {
  gyre::GroupOp g;
  g.other = call;
  if (!deferred(comm, g)) call(commOf(comm));
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

using Staged = std::vector<void*>;
constexpr auto In = gyre::StagedBuffer::in;
constexpr auto Out = gyre::StagedBuffer::out;
constexpr auto InOut = gyre::StagedBuffer::inOut;

// A call names a stream, or passes CUDA device memory: it is stream-ordered. Host buffers with
// no stream take the blocking host form.
bool onStream(gyreStream_t stream, std::initializer_list<const void*> buffers) {
  if (stream) return true;
  return std::any_of(buffers.begin(), buffers.end(),
                     [](const void* p) { return p && gyre::isCudaDeviceMemory(p); });
}

size_t bytesOf(const char* what, size_t count, gyre::DataType type, size_t blocks = 1) {
  const size_t es = gyre::dataTypeSize(type);
  if (count > SIZE_MAX / es / std::max<size_t>(1, blocks)) {
    gyre::fail(gyre::Code::invalid_argument,
               std::string(what) + ": count " + std::to_string(count) + " is too large");
  }
  return count * es * blocks;
}

// Whether this rank is `root`, after checking it names a rank (the host call checks again,
// but only once the stream reaches it).
bool checkedRoot(gyreComm_t comm, const char* what, int root, const char* role = "root") {
  auto& c = commOf(comm);
  if (root < 0 || root >= c.size()) {
    gyre::fail(gyre::Code::invalid_argument,
               "rank " + std::to_string(c.rank()) + ": " + what + ": " + role + " " +
                   std::to_string(root) + " is outside [0, " + std::to_string(c.size()) + ")");
  }
  return c.rank() == root;
}

// One size_t per rank, copied: the call runs after this one returns.
std::vector<size_t> copied(gyreComm_t comm, const char* what, const size_t* values,
                           const char* name) {
  if (!values)
    gyre::fail(gyre::Code::invalid_argument, std::string(what) + ": " + name + " is null");
  return std::vector<size_t>(values, values + commOf(comm).size());
}

// Bytes from a buffer's start to the end of its furthest block.
size_t extentBytes(const char* what, const std::vector<size_t>& counts,
                   const std::vector<size_t>& displs, gyre::DataType type) {
  size_t end = 0;
  for (size_t r = 0; r < counts.size(); ++r) {
    if (counts[r] == 0) continue;
    if (displs[r] > SIZE_MAX - counts[r]) {
      gyre::fail(gyre::Code::invalid_argument, std::string(what) + ": displacement overflows");
    }
    end = std::max(end, displs[r] + counts[r]);
  }
  return bytesOf(what, end, type);
}

void streamed(gyreComm_t comm, gyreStream_t stream, const char* what,
              std::vector<gyre::StagedBuffer> buffers, gyre::StagedBody body, size_t elems = 0,
              size_t elemBytes = 0) {
  if (group.depth > 0) {
    gyre::fail(gyre::Code::invalid_usage,
               std::string(what) + ": CUDA streams and device buffers inside gyreGroupStart/" +
                   "gyreGroupEnd are not supported yet; call it outside the group");
  }
  commOf(comm).enqueueOnStream(stream, what, std::move(buffers), std::move(body), elems, elemBytes);
}

std::mutex serversMutex;
std::vector<std::unique_ptr<gyre::StoreServer>> servers;  // live until the process exits

}  // namespace

extern "C" {

int gyreGetVersion(int* version) {
  if (!version) return gyreInvalidArgument;
  *version = GYRE_VERSION_CODE;
  return gyreSuccess;
}

gyreResult_t gyreGetUniqueId(gyreUniqueId* uniqueId) {
  return guarded([&] {
    if (!uniqueId) gyre::fail(gyre::Code::invalid_argument, "uniqueId is null");
    gyre::StoreServerOptions options;
    const std::string secret = gyre::auth::randomHex(16);
    options.secret = secret;
    const char* host = std::getenv("GYRE_RENDEZVOUS_HOST");
    if (host && *host) options.host = host;
    if (options.host.size() > kIdHostMax) {
      gyre::fail(gyre::Code::invalid_argument, "GYRE_RENDEZVOUS_HOST is too long");
    }
    auto server = std::make_unique<gyre::StoreServer>(options);
    server->start();
    std::memset(uniqueId->internal, 0, sizeof uniqueId->internal);
    char* id = uniqueId->internal;
    std::memcpy(id, kIdMagic, 4);
    const uint16_t port = server->port();
    std::memcpy(id + 4, &port, 2);
    id[6] = char(server->host().size());
    std::memcpy(id + kIdHostOffset, server->host().data(), server->host().size());
    const std::string job = gyre::auth::randomHex(16);
    std::memcpy(id + kIdJobOffset, job.data(), job.size());
    std::memcpy(id + kIdSecretOffset, secret.data(), secret.size());
    std::lock_guard lock(serversMutex);
    servers.push_back(std::move(server));
  });
}

gyreResult_t gyreCommInitRank(gyreComm_t* comm, int nranks, gyreUniqueId commId, int rank) {
  return gyreCommInitRankConfig(comm, nranks, commId, rank, nullptr);
}

gyreResult_t gyreCommInitRankConfig(gyreComm_t* comm, int nranks, gyreUniqueId commId, int rank,
                                    const gyreConfig_t* userConfig) {
  return guarded([&] {
    if (!comm) gyre::fail(gyre::Code::invalid_argument, "comm is null");
    *comm = nullptr;
    const char* id = commId.internal;
    const size_t hostLen = size_t(static_cast<unsigned char>(id[6]));
    if (std::memcmp(id, kIdMagic, 4) != 0 || hostLen == 0 || hostLen > kIdHostMax) {
      gyre::fail(gyre::Code::invalid_argument, "not a gyreUniqueId (from gyreGetUniqueId)");
    }
    uint16_t port;
    std::memcpy(&port, id + 4, 2);
    gyre::CommConfig config;
    config.rank = rank;
    config.nranks = nranks;
    config.rendezvous = gyre::joinHostPort(std::string(id + kIdHostOffset, hostLen), port);
    config.jobId = std::string(id + kIdJobOffset, 32);
    config.secret = std::string(id + kIdSecretOffset, 32);
    gyre::applyTuningEnv(config);
    if (userConfig) {
      if (userConfig->size < sizeof(gyreConfig_t)) {
        gyre::fail(gyre::Code::invalid_argument,
                   "gyreConfig_t.size is wrong: start from GYRE_CONFIG_INITIALIZER");
      }
      if (userConfig->timeoutMs < 0 || userConfig->slotBytes < 0 || userConfig->nSlots < 0) {
        gyre::fail(gyre::Code::invalid_argument, "gyreConfig_t fields must not be negative");
      }
      if (userConfig->timeoutMs) config.timeout = std::chrono::milliseconds(userConfig->timeoutMs);
      if (userConfig->slotBytes) config.slotBytes = size_t(userConfig->slotBytes);
      if (userConfig->nSlots) config.nSlots = uint32_t(userConfig->nSlots);
      if (userConfig->algorithm) config.algorithm = userConfig->algorithm;
      if (userConfig->channels > 0) config.channels = userConfig->channels;
    }
    auto impl = gyre::Communicator::create(std::move(config));
    *comm = new gyreComm{std::move(impl)};
  });
}

gyreResult_t gyreCommInitFromEnv(gyreComm_t* comm) {
  return guarded([&] {
    if (!comm) gyre::fail(gyre::Code::invalid_argument, "comm is null");
    *comm = nullptr;
    auto impl = gyre::Communicator::create(gyre::configFromEnv());
    *comm = new gyreComm{std::move(impl)};
  });
}

gyreResult_t gyreCommDestroy(gyreComm_t comm) {
  return guarded([&] {
    if (!comm) gyre::fail(gyre::Code::invalid_argument, "comm is null");
    delete comm;
  });
}

gyreResult_t gyreCommAbort(gyreComm_t comm) {
  return guarded([&] { commOf(comm).abort(); });
}

gyreResult_t gyreCommRegister(const gyreComm_t comm, void* buff, size_t size, void** handle) {
  return guarded([&] {
    if (!handle) gyre::fail(gyre::Code::invalid_argument, "gyreCommRegister: handle is null");
    *handle = commOf(comm).registerBuffer(buff, size);
  });
}

gyreResult_t gyreCommDeregister(const gyreComm_t comm, void* handle) {
  return guarded([&] { commOf(comm).deregisterBuffer(handle); });
}

gyreResult_t gyreCommGetAsyncError(gyreComm_t comm, gyreResult_t* asyncError) {
  return guarded([&] {
    if (!asyncError) gyre::fail(gyre::Code::invalid_argument, "asyncError is null");
    const gyre::Status s = commOf(comm).asyncError();
    *asyncError = toResult(s.code);
    if (!s.ok()) lastError = s.message;
  });
}

gyreResult_t gyreCommCount(const gyreComm_t comm, int* count) {
  return guarded([&] {
    if (!count) gyre::fail(gyre::Code::invalid_argument, "count is null");
    *count = commOf(comm).size();
  });
}

gyreResult_t gyreCommUserRank(const gyreComm_t comm, int* rank) {
  return guarded([&] {
    if (!rank) gyre::fail(gyre::Code::invalid_argument, "rank is null");
    *rank = commOf(comm).rank();
  });
}

gyreResult_t gyreAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           gyreDataType_t datatype, gyreRedOp_t op, gyreComm_t comm,
                           gyreStream_t stream) {
  return guarded([&] {
    auto g = groupOp(gyre::Collective::all_reduce, sendbuff, recvbuff, count, typeOf(datatype),
                     opOf(op));
    if (onStream(stream, {sendbuff, recvbuff})) {
      const size_t bytes = bytesOf("all_reduce", count, g.type);
      return streamed(
          comm, stream, "all_reduce",
          {{sendbuff, bytes, In, "sendbuff"}, {recvbuff, bytes, Out, "recvbuff"}},
          [=](gyre::Communicator& c, const Staged& s, size_t n) {
            c.allReduce(s[0], s[1], n, g.type, g.op);
          },
          count, gyre::dataTypeSize(g.type));
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
      return streamed(comm, stream, "all_gather",
                      {{sendbuff, bytesOf("all_gather", sendcount, g.type), In, "sendbuff"},
                       {recvbuff, bytesOf("all_gather", sendcount, g.type, n), Out, "recvbuff"}},
                      [=](gyre::Communicator& c, const Staged& s, size_t) {
                        c.allGather(s[0], s[1], sendcount, g.type);
                      });
    }
    if (!deferred(comm, g)) commOf(comm).allGather(sendbuff, recvbuff, sendcount, g.type);
  });
}

gyreResult_t gyreReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                               gyreDataType_t datatype, gyreRedOp_t op, gyreComm_t comm,
                               gyreStream_t stream) {
  return guarded([&] {
    auto g = groupOp(gyre::Collective::reduce_scatter, sendbuff, recvbuff, recvcount,
                     typeOf(datatype), opOf(op));
    if (onStream(stream, {sendbuff, recvbuff})) {
      const size_t n = size_t(commOf(comm).size());
      return streamed(comm, stream, "reduce_scatter",
                      {{sendbuff, bytesOf("reduce_scatter", recvcount, g.type, n), In, "sendbuff"},
                       {recvbuff, bytesOf("reduce_scatter", recvcount, g.type), Out, "recvbuff"}},
                      [=](gyre::Communicator& c, const Staged& s, size_t) {
                        c.reduceScatter(s[0], s[1], recvcount, g.type, g.op);
                      });
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
      const size_t bytes = bytesOf("broadcast", count, g.type);
      return streamed(
          comm, stream, "broadcast",
          {{isRoot ? sendbuff : nullptr, isRoot ? bytes : 0, In, "sendbuff"},
           {recvbuff, bytes, Out, "recvbuff"}},
          [=](gyre::Communicator& c, const Staged& s, size_t n) {
            c.broadcast(s[0], s[1], n, g.type, root);
          },
          count, gyre::dataTypeSize(g.type));
    }
    if (!deferred(comm, g)) commOf(comm).broadcast(sendbuff, recvbuff, count, g.type, root);
  });
}

gyreResult_t gyreReduce(const void* sendbuff, void* recvbuff, size_t count, gyreDataType_t datatype,
                        gyreRedOp_t op, int root, gyreComm_t comm, gyreStream_t stream) {
  return guarded([&] {
    auto g =
        groupOp(gyre::Collective::reduce, sendbuff, recvbuff, count, typeOf(datatype), opOf(op));
    g.root = root;
    if (onStream(stream, {sendbuff, recvbuff})) {
      const bool isRoot = checkedRoot(comm, "reduce", root);
      const size_t bytes = bytesOf("reduce", count, g.type);
      return streamed(
          comm, stream, "reduce",
          {{sendbuff, bytes, In, "sendbuff"},
           {isRoot ? recvbuff : nullptr, isRoot ? bytes : 0, Out, "recvbuff"}},
          [=](gyre::Communicator& c, const Staged& s, size_t n) {
            c.reduce(s[0], s[1], n, g.type, g.op, root);
          },
          count, gyre::dataTypeSize(g.type));
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
      return streamed(comm, stream, "gather",
                      {{sendbuff, bytesOf("gather", count, type), In, "sendbuff"},
                       {isRoot ? recvbuff : nullptr, isRoot ? bytesOf("gather", count, type, n) : 0,
                        Out, "recvbuff"}},
                      [=](gyre::Communicator& c, const Staged& s, size_t) {
                        c.gather(s[0], s[1], count, type, root);
                      });
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
      return streamed(comm, stream, "scatter",
                      {{isRoot ? sendbuff : nullptr,
                        isRoot ? bytesOf("scatter", count, type, n) : 0, In, "sendbuff"},
                       {recvbuff, bytesOf("scatter", count, type), Out, "recvbuff"}},
                      [=](gyre::Communicator& c, const Staged& s, size_t) {
                        c.scatter(s[0], s[1], count, type, root);
                      });
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
      const size_t bytes = bytesOf("all_to_all", count, type, size_t(commOf(comm).size()));
      return streamed(comm, stream, "all_to_all",
                      {{sendbuff, bytes, In, "sendbuff"}, {recvbuff, bytes, Out, "recvbuff"}},
                      [=](gyre::Communicator& c, const Staged& s, size_t) {
                        c.allToAll(s[0], s[1], count, type);
                      });
    }
    runOrDefer(comm, [=](gyre::Communicator& c) { c.allToAll(sendbuff, recvbuff, count, type); });
  });
}

gyreResult_t gyreAllGatherV(const void* sendbuff, size_t sendcount, void* recvbuff,
                            const size_t* recvcounts, const size_t* displs, gyreDataType_t datatype,
                            gyreComm_t comm, gyreStream_t stream) {
  return guarded([&] {
    const auto type = typeOf(datatype);
    if (onStream(stream, {sendbuff, recvbuff})) {
      const auto counts = copied(comm, "all_gather_v", recvcounts, "recvcounts");
      const auto at = copied(comm, "all_gather_v", displs, "displs");
      return streamed(
          comm, stream, "all_gather_v",
          {{sendbuff, bytesOf("all_gather_v", sendcount, type), In, "sendbuff"},
           {recvbuff, extentBytes("all_gather_v", counts, at, type), InOut, "recvbuff"}},
          [=](gyre::Communicator& c, const Staged& s, size_t) {
            c.allGatherV(s[0], sendcount, s[1], counts.data(), at.data(), type);
          });
    }
    runOrDefer(comm, [=](gyre::Communicator& c) {
      c.allGatherV(sendbuff, sendcount, recvbuff, recvcounts, displs, type);
    });
  });
}

gyreResult_t gyreAllToAllV(const void* sendbuff, const size_t* sendcounts, const size_t* sdispls,
                           void* recvbuff, const size_t* recvcounts, const size_t* rdispls,
                           gyreDataType_t datatype, gyreComm_t comm, gyreStream_t stream) {
  return guarded([&] {
    const auto type = typeOf(datatype);
    if (onStream(stream, {sendbuff, recvbuff})) {
      const auto sc = copied(comm, "all_to_all_v", sendcounts, "sendcounts");
      const auto sd = copied(comm, "all_to_all_v", sdispls, "sdispls");
      const auto rc = copied(comm, "all_to_all_v", recvcounts, "recvcounts");
      const auto rd = copied(comm, "all_to_all_v", rdispls, "rdispls");
      return streamed(comm, stream, "all_to_all_v",
                      {{sendbuff, extentBytes("all_to_all_v", sc, sd, type), In, "sendbuff"},
                       {recvbuff, extentBytes("all_to_all_v", rc, rd, type), InOut, "recvbuff"}},
                      [=](gyre::Communicator& c, const Staged& s, size_t) {
                        c.allToAllV(s[0], sc.data(), sd.data(), s[1], rc.data(), rd.data(), type);
                      });
    }
    runOrDefer(comm, [=](gyre::Communicator& c) {
      c.allToAllV(sendbuff, sendcounts, sdispls, recvbuff, recvcounts, rdispls, type);
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
      return streamed(comm, stream, "send",
                      {{sendbuff, bytesOf("send", count, g.type), In, "sendbuff"}},
                      [=](gyre::Communicator& c, const Staged& s, size_t) {
                        c.send(s[0], count, g.type, peer);
                      });
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
      return streamed(comm, stream, "recv",
                      {{recvbuff, bytesOf("recv", count, g.type), Out, "recvbuff"}},
                      [=](gyre::Communicator& c, const Staged& s, size_t) {
                        c.recv(s[0], count, g.type, peer);
                      });
    }
    if (!deferred(comm, g)) commOf(comm).recv(recvbuff, count, g.type, peer);
  });
}

gyreResult_t gyreGroupStart(void) {
  ++group.depth;
  return gyreSuccess;
}

gyreResult_t gyreGroupEnd(void) {
  return guarded([&] {
    if (group.depth == 0)
      gyre::fail(gyre::Code::invalid_usage, "gyreGroupEnd without gyreGroupStart");
    if (--group.depth > 0) return;
    // Every communicator runs its part even when an earlier one failed; the first error wins.
    std::unique_ptr<gyre::Failure> first;
    for (auto& [comm, ops] : takeGroup()) {
      try {
        commOf(comm).runGroup(ops);
      } catch (const gyre::Failure& f) {
        if (!first) first = std::make_unique<gyre::Failure>(f);
      }
    }
    if (first) throw *first;
  });
}

gyreResult_t gyreGroupEndAsync(gyreWork_t* work) {
  return guarded([&] {
    if (!work) gyre::fail(gyre::Code::invalid_argument, "work is null");
    *work = nullptr;
    if (group.depth == 0) {
      gyre::fail(gyre::Code::invalid_usage, "gyreGroupEndAsync without gyreGroupStart");
    }
    if (--group.depth > 0) {
      gyre::fail(gyre::Code::invalid_usage, "gyreGroupEndAsync inside a nested group");
    }
    auto handle = std::make_unique<gyreWork>();
    for (auto& [comm, ops] : takeGroup()) {
      handle->parts.push_back(
          commOf(comm).async([ops = std::move(ops)](gyre::Communicator& c) { c.runGroup(ops); }));
    }
    *work = handle.release();
  });
}

gyreResult_t gyreWorkWait(gyreWork_t work, int timeoutMs) {
  return guarded([&] {
    if (!work) gyre::fail(gyre::Code::invalid_argument, "work is null");
    if (timeoutMs < 0) gyre::fail(gyre::Code::invalid_argument, "timeoutMs is negative");
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeoutMs);
    for (auto& part : work->parts) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      const gyre::Status s = part->wait(std::max(left, std::chrono::milliseconds(0)));
      if (!s.ok()) throw gyre::Failure(s);
    }
  });
}

gyreResult_t gyreWorkTest(gyreWork_t work, int* done) {
  return guarded([&] {
    if (!work || !done) gyre::fail(gyre::Code::invalid_argument, "work or done is null");
    *done = 1;
    for (auto& part : work->parts)
      if (!part->test()) *done = 0;
  });
}

gyreResult_t gyreWorkFree(gyreWork_t work) {
  return guarded([&] {
    if (!work) return;
    for (auto& part : work->parts) part->wait(std::chrono::hours(24 * 365));
    delete work;
  });
}

gyreResult_t gyreCommSplit(gyreComm_t comm, int color, int key, gyreComm_t* newcomm,
                           const gyreConfig_t* config) {
  return guarded([&] {
    if (!newcomm) gyre::fail(gyre::Code::invalid_argument, "newcomm is null");
    *newcomm = nullptr;
    if (color < 0 && color != GYRE_SPLIT_NOCOLOR) {
      gyre::fail(gyre::Code::invalid_argument, "color must be >= 0 or GYRE_SPLIT_NOCOLOR");
    }
    gyre::CommConfig overrides;
    overrides.timeout = std::chrono::milliseconds(0);
    overrides.nSlots = 0;
    overrides.slotBytes = 0;
    if (config) {
      if (config->size < sizeof(gyreConfig_t) || config->timeoutMs < 0 || config->slotBytes < 0 ||
          config->nSlots < 0) {
        gyre::fail(gyre::Code::invalid_argument,
                   "gyreConfig_t is malformed: start from GYRE_CONFIG_INITIALIZER");
      }
      overrides.timeout = std::chrono::milliseconds(config->timeoutMs);
      overrides.slotBytes = size_t(config->slotBytes);
      overrides.nSlots = uint32_t(config->nSlots);
      if (config->algorithm) overrides.algorithm = config->algorithm;
      if (config->channels > 0) overrides.channels = config->channels;
    }
    auto child = commOf(comm).split(color, key, &overrides);
    if (child) *newcomm = new gyreComm{std::move(child)};
  });
}

gyreResult_t gyreCommDup(gyreComm_t comm, gyreComm_t* newcomm) {
  return guarded([&] {
    if (!newcomm) gyre::fail(gyre::Code::invalid_argument, "newcomm is null");
    *newcomm = nullptr;
    *newcomm = new gyreComm{commOf(comm).dup()};
  });
}

const char* gyreGetErrorString(gyreResult_t result) {
  switch (result) {
    case gyreSuccess:
      return "no error";
    case gyreInvalidArgument:
      return "invalid argument";
    case gyreInvalidUsage:
      return "invalid usage";
    case gyreSystemError:
      return "system error";
    case gyreRemoteError:
      return "remote error";
    case gyreTimeout:
      return "timeout";
    case gyreAborted:
      return "aborted";
    case gyreInternalError:
      return "internal error";
    default:
      return "unknown result code";
  }
}

const char* gyreGetLastError(gyreComm_t) {
  return lastError.c_str();
}

}  // extern "C"
