// The C API: communicators, ids, errors. Collectives, groups and work handles are in
// api_collectives.cc; what both share is in api_internal.h.
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/auth.h"
#include "gyre/gyre.h"
#include "runtime/api/api_internal.h"
#include "runtime/cuda/device_alloc.h"
#include "runtime/store/server.h"

namespace gyre::api {

thread_local std::string lastError;

void setLastError(std::string message) {
  lastError = std::move(message);
}

Communicator& commOf(gyreComm_t comm) {
  if (!comm) fail(Code::invalid_argument, "comm is null");
  if (!comm->impl) fail(Code::invalid_usage, "comm was destroyed (gyreCommDestroy)");
  return *comm->impl;
}

DataType typeOf(gyreDataType_t t) {
  if (int(t) < 0 || int(t) >= gyreNumTypes) {
    fail(Code::invalid_argument, "unknown data type " + std::to_string(int(t)));
  }
  return static_cast<DataType>(t);
}

RedOp opOf(gyreRedOp_t op) {
  if (int(op) < 0 || int(op) >= gyreNumOps) {
    fail(Code::invalid_argument, "unknown reduction op " + std::to_string(int(op)));
  }
  return static_cast<RedOp>(op);
}

}  // namespace gyre::api

using namespace gyre::api;

namespace {

// Unique id layout (128 bytes): magic "GYU2", u16 port, u8 host length, host (up to 46
// bytes), job id (32 hex chars), secret (32 hex chars), zero padding.
constexpr char kIdMagic[4] = {'G', 'Y', 'U', '2'};
constexpr size_t kIdHostOffset = 7, kIdHostMax = 46, kIdJobOffset = kIdHostOffset + kIdHostMax,
                 kIdSecretOffset = kIdJobOffset + 32;
static_assert(kIdSecretOffset + 32 <= GYRE_UNIQUE_ID_BYTES, "unique id layout");

// Destroyed handles are kept, emptied, so that a call through one is refused as
// gyreInvalidUsage instead of reading freed memory: a handle's memory is never reused.
std::mutex tombstonesMutex;
std::vector<std::unique_ptr<gyreComm>> tombstones;

std::mutex serversMutex;
// The rendezvous servers of unique ids; each stops by itself once its job's clients all left
// (kIdServerIdle), and is reaped by the next gyreGetUniqueId.
std::vector<std::unique_ptr<gyre::StoreServer>> servers;
constexpr std::chrono::seconds kIdServerIdle{1};

// This host's address on its route to `host` (no packet is sent); empty where there is none.
std::string localAddressTowards(const std::string& host) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), "9", &hints, &found) != 0 || !found) return {};
  std::string local;
  const int fd = ::socket(found->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_storage self{};
  socklen_t len = sizeof self;
  char text[NI_MAXHOST];
  if (fd >= 0 && ::connect(fd, found->ai_addr, found->ai_addrlen) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&self), &len) == 0 &&
      getnameinfo(reinterpret_cast<sockaddr*>(&self), len, text, sizeof text, nullptr, 0,
                  NI_NUMERICHOST) == 0) {
    local = text;
  }
  if (fd >= 0) ::close(fd);
  freeaddrinfo(found);
  return local;
}

// Where a unique id's server listens and what the id advertises: GYRE_RENDEZVOUS_HOST; else,
// where MASTER_ADDR names the job's first machine (torchrun, Slurm scripts, gyre-run across
// machines), this host's address towards it, so ranks on other machines reach the server;
// else 127.0.0.1.
std::string uniqueIdHost() {
  const char* host = std::getenv("GYRE_RENDEZVOUS_HOST");
  if (host && *host) return host;
  const char* master = std::getenv("MASTER_ADDR");
  if (master && *master) {
    const std::string towards = localAddressTowards(master);
    if (!towards.empty()) return towards;
  }
  return "127.0.0.1";
}

// The non-zero fields of a split's or shrink's gyreConfig_t, which replace the parent's.
gyre::CommConfig childOverrides(const gyreConfig_t* config) {
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
  return overrides;
}

// The length of the rendezvous host an id from gyreGetUniqueId names; fails on anything else.
size_t checkedIdHostLength(const gyreUniqueId& commId) {
  const char* id = commId.internal;
  const size_t hostLen = size_t(static_cast<unsigned char>(id[6]));
  if (std::memcmp(id, kIdMagic, 4) != 0 || hostLen == 0 || hostLen > kIdHostMax) {
    gyre::fail(gyre::Code::invalid_argument, "not a gyreUniqueId (from gyreGetUniqueId)");
  }
  return hostLen;
}

// The settings of a communicator joined through `commId`: its rendezvous, job and secret, then
// the environment's tuning and the user's gyreConfig_t.
gyre::CommConfig initConfig(const gyreUniqueId& commId, int nranks, int rank,
                            const gyreConfig_t* userConfig) {
  const char* id = commId.internal;
  const size_t hostLen = checkedIdHostLength(commId);
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
  return config;
}

// FNV-1a over the ids, in order: what gyreCommInitRankScalable's ranks compare.
uint64_t idsDigest(const gyreUniqueId* ids, int n) {
  uint64_t h = 14695981039346656037ull;
  for (int i = 0; i < n; ++i) {
    for (char c : ids[i].internal) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  }
  return h;
}

// gyreCommInitAll's way back from a rank that failed.
void destroyAll(gyreComm_t* comms, int ndev) {
  for (int i = 0; i < ndev; ++i) {
    if (comms[i]) gyreCommDestroy(comms[i]);
    comms[i] = nullptr;
  }
}

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
    options.host = uniqueIdHost();
    if (options.host.size() > kIdHostMax) {
      gyre::fail(gyre::Code::invalid_argument,
                 "rendezvous host '" + options.host + "' (GYRE_RENDEZVOUS_HOST) is too long");
    }
    options.stopWhenIdleFor = kIdServerIdle;
    {
      std::lock_guard lock(serversMutex);
      std::erase_if(servers, [](const auto& s) { return s->stopped(); });
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
    *comm = new gyreComm{gyre::Communicator::create(initConfig(commId, nranks, rank, userConfig)),
                         gyre::currentCudaDevice()};
  });
}

gyreResult_t gyreCommInitRankScalable(gyreComm_t* comm, int nranks, int rank, int nId,
                                      const gyreUniqueId* commIds, const gyreConfig_t* userConfig) {
  return guarded([&] {
    if (!comm) gyre::fail(gyre::Code::invalid_argument, "comm is null");
    *comm = nullptr;
    if (!commIds)
      gyre::fail(gyre::Code::invalid_argument, "gyreCommInitRankScalable: commIds is null");
    if (nId < 1 || nId > std::max(nranks, 1)) {
      gyre::fail(gyre::Code::invalid_argument, "gyreCommInitRankScalable: nId " +
                                                   std::to_string(nId) + " must be 1 to nranks (" +
                                                   std::to_string(nranks) + ")");
    }
    for (int i = 1; i < nId; ++i) checkedIdHostLength(commIds[i]);
    // One rendezvous serves every rank; the first id names it. Every rank then compares the
    // whole list, so a rank given other ids fails here, named, instead of in a later call.
    auto impl = gyre::Communicator::create(initConfig(commIds[0], nranks, rank, userConfig));
    const uint64_t mine = idsDigest(commIds, nId);
    std::vector<uint64_t> all(size_t(impl->size()));
    impl->allGather(&mine, all.data(), 1, gyre::DataType::u64);
    for (int r = 0; r < impl->size(); ++r) {
      if (all[size_t(r)] != mine) {
        gyre::fail(gyre::Code::invalid_argument,
                   "rank " + std::to_string(rank) + ": gyreCommInitRankScalable: ranks " +
                       std::to_string(rank) + " and " + std::to_string(r) +
                       " passed different unique ids (every rank passes the same nId ids, in "
                       "the same order)");
      }
    }
    *comm = new gyreComm{std::move(impl), gyre::currentCudaDevice()};
  });
}

gyreResult_t gyreCommInitAll(gyreComm_t* comms, int ndev, const int* devlist) {
  return guarded([&] {
    if (!comms) gyre::fail(gyre::Code::invalid_argument, "gyreCommInitAll: comms is null");
    if (ndev < 1) {
      gyre::fail(gyre::Code::invalid_argument,
                 "gyreCommInitAll: ndev " + std::to_string(ndev) + " is not positive");
    }
    for (int i = 0; devlist && i < ndev; ++i) {
      if (devlist[i] < 0) {
        gyre::fail(gyre::Code::invalid_argument, "gyreCommInitAll: devlist[" + std::to_string(i) +
                                                     "] is " + std::to_string(devlist[i]));
      }
    }
    std::fill(comms, comms + ndev, nullptr);
    gyreUniqueId id;
    if (gyreResult_t r = gyreGetUniqueId(&id); r != gyreSuccess)
      gyre::fail(static_cast<gyre::Code>(r), gyreGetLastError(nullptr));
    // Every rank's set-up waits for the others: one thread each.
    std::vector<gyreResult_t> results(size_t(ndev), gyreSuccess);
    std::vector<std::string> messages(static_cast<size_t>(ndev));
    std::vector<std::thread> threads;
    try {
      for (int i = 0; i < ndev; ++i) {
        threads.emplace_back([&, i] {
          results[size_t(i)] = gyreCommInitRank(&comms[i], ndev, id, i);
          if (results[size_t(i)] != gyreSuccess) messages[size_t(i)] = gyreGetLastError(nullptr);
        });
      }
    } catch (...) {
      for (auto& t : threads) t.join();  // the others fail by their deadline without this rank
      destroyAll(comms, ndev);
      throw;
    }
    for (auto& t : threads) t.join();
    for (int i = 0; i < ndev; ++i) {
      if (results[size_t(i)] == gyreSuccess) continue;
      destroyAll(comms, ndev);
      gyre::fail(static_cast<gyre::Code>(results[size_t(i)]),
                 "gyreCommInitAll: " + messages[size_t(i)]);
    }
    for (int i = 0; i < ndev; ++i) comms[i]->cudaDevice = devlist ? devlist[i] : i;
  });
}

gyreResult_t gyreCommInitFromEnv(gyreComm_t* comm) {
  return guarded([&] {
    if (!comm) gyre::fail(gyre::Code::invalid_argument, "comm is null");
    *comm = nullptr;
    auto impl = gyre::Communicator::create(gyre::configFromEnv());
    *comm = new gyreComm{std::move(impl), gyre::currentCudaDevice()};
  });
}

gyreResult_t gyreCommDestroy(gyreComm_t comm) {
  return guarded([&] {
    if (!comm) gyre::fail(gyre::Code::invalid_argument, "comm is null");
    if (!comm->impl) gyre::fail(gyre::Code::invalid_usage, "comm was destroyed already");
    comm->impl.reset();
    std::lock_guard lock(tombstonesMutex);
    tombstones.emplace_back(comm);
  });
}

gyreResult_t gyreCommAbort(gyreComm_t comm) {
  return guarded([&] { commOf(comm).abort(); });
}

gyreResult_t gyreCommRevoke(gyreComm_t comm, int flags) {
  return guarded([&] {
    gyre::Communicator& c = commOf(comm);
    if (flags != GYRE_REVOKE_DEFAULT) {
      gyre::fail(gyre::Code::invalid_argument, "rank " + std::to_string(c.rank()) +
                                                   ": gyreCommRevoke: unknown flags " +
                                                   std::to_string(flags));
    }
    c.revoke();
  });
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

gyreResult_t gyreCommFinalize(gyreComm_t comm) {
  return guarded([&] {
    gyre::Communicator& c = commOf(comm);
    if (c.revoked()) {
      gyre::fail(gyre::Code::invalid_usage, "rank " + std::to_string(c.rank()) +
                                                ": gyreCommFinalize after gyreCommRevoke "
                                                "(a revoked communicator is only destroyed)");
    }
    // Queued behind every call issued so far: when it has run, they all have.
    const gyre::Status s =
        c.async([](gyre::Communicator&) {}, false)->wait(std::chrono::hours(24 * 365), false);
    if (!s.ok()) throw gyre::Failure(s);
    if (gyre::Status e = c.asyncError(); !e.ok()) throw gyre::Failure(e);
  });
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

gyreResult_t gyreCommCuDevice(const gyreComm_t comm, int* device) {
  return guarded([&] {
    if (!device) gyre::fail(gyre::Code::invalid_argument, "gyreCommCuDevice: device is null");
    const int rank = commOf(comm).rank();
    if (comm->cudaDevice < 0) {
      gyre::fail(gyre::Code::invalid_usage,
                 "rank " + std::to_string(rank) +
                     ": gyreCommCuDevice: the communicator has no CUDA device (the process had "
                     "not loaded the CUDA driver when it was made; call cudaSetDevice first)");
    }
    *device = comm->cudaDevice;
  });
}

gyreResult_t gyreMemAlloc(void** ptr, size_t size) {
  return guarded([&] {
    if (!ptr) gyre::fail(gyre::Code::invalid_argument, "gyreMemAlloc: ptr is null");
    *ptr = nullptr;
    if (size == 0) gyre::fail(gyre::Code::invalid_argument, "gyreMemAlloc: size is 0");
    *ptr = gyre::allocateDeviceMemory(size, "gyreMemAlloc");
  });
}

gyreResult_t gyreMemFree(void* ptr) {
  return guarded([&] { gyre::freeDeviceMemory(ptr, "gyreMemFree"); });
}

gyreResult_t gyreCommShrink(gyreComm_t comm, const int* excludeRanks, int excludeCount,
                            gyreComm_t* newcomm, const gyreConfig_t* config, int flags) {
  return guarded([&] {
    if (!newcomm) gyre::fail(gyre::Code::invalid_argument, "newcomm is null");
    *newcomm = nullptr;
    gyre::Communicator& c = commOf(comm);
    const std::string call = "rank " + std::to_string(c.rank()) + ": shrink";
    if (excludeCount < 0 || (excludeCount > 0 && !excludeRanks)) {
      gyre::fail(gyre::Code::invalid_argument, call + ": excludeRanks must list excludeCount (" +
                                                   std::to_string(excludeCount) + ") ranks");
    }
    if (flags != GYRE_SHRINK_DEFAULT && flags != GYRE_SHRINK_ABORT) {
      gyre::fail(gyre::Code::invalid_argument, call + ": unknown flags " + std::to_string(flags));
    }
    const gyre::CommConfig overrides = childOverrides(config);
    const std::vector<int> exclude(excludeRanks, excludeRanks + excludeCount);
    *newcomm =
        new gyreComm{c.shrink(exclude, flags == GYRE_SHRINK_ABORT, &overrides), comm->cudaDevice};
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
    const gyre::CommConfig overrides = childOverrides(config);
    auto child = commOf(comm).split(color, key, &overrides);
    if (child) *newcomm = new gyreComm{std::move(child), comm->cudaDevice};
  });
}

gyreResult_t gyreCommDup(gyreComm_t comm, gyreComm_t* newcomm) {
  return guarded([&] {
    if (!newcomm) gyre::fail(gyre::Code::invalid_argument, "newcomm is null");
    *newcomm = nullptr;
    *newcomm = new gyreComm{commOf(comm).dup(), comm->cudaDevice};
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
