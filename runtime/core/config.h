// Everything a communicator is configured by, and where it comes from (docs/configuration.md).
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "runtime/store/store.h"

namespace gyre {

struct CommConfig {
  int rank = 0;
  int nranks = 1;
  // host:port of a rendezvous server to join. Empty: `store` is used if set, else the
  // rank-0-hosted server at `hostAddress`.
  std::string rendezvous;
  // When set (host:port), rank 0 starts a server there and everyone else joins it.
  std::string hostAddress;
  std::string jobId = "default";
  std::string secret;            // GYRE_SECRET: authenticates store and data connections
  std::shared_ptr<Store> store;  // an existing store (tests, in-process)

  std::chrono::milliseconds timeout{std::chrono::minutes(5)};  // GYRE_TIMEOUT (seconds)
  uint32_t nSlots = 8;                                         // GYRE_NSLOTS
  size_t slotBytes = 128 * 1024;                               // GYRE_SLOT_BYTES
  // GYRE_SPIN_US: how long a waiter polls before it sleeps; -1 (auto): where every rank on
  // this host can have a core of its own up to 2 ms, learned (SpinBudget, base/wait.h), else
  // 200 µs of polls with sched_yield between.
  std::chrono::microseconds spin{-1};
  // GYRE_ONESHOT_BYTES: the largest post of a one-shot collective through the host window
  // (every rank on one host over shared memory); 0: no window.
  size_t oneShotBytes = 64 * 1024;
  // GYRE_PLACEMENT_PROBE_MS: where every rank has a core, ranks 0 and 1 measure again how far
  // apart their CPUs sit after this much of the tuner's predicted time of calls whose choice
  // depends on it (where ranks share cores pinned in blocks: rank 0 and the first rank of
  // another block, ten times less often); rank 0's setting holds for all; 0: only at set-up.
  std::chrono::microseconds placementProbe{std::chrono::milliseconds(10)};
  // GYRE_SLOT_STORES: how a rank fills the shared-memory slots a peer reads: auto (streaming
  // stores while the placement probe finds the CPUs of ranks 0 and 1 far apart, else cached),
  // cached or streaming (docs/perf/run_to_run.md).
  enum class SlotStores { automatic, cached, streaming } slotStores = SlotStores::automatic;
  // GYRE_SLOT_SPREAD: whether a payload of 8 KiB or more that a peer reads in place (a shared-
  // memory slot, the window's data blocks) moves to a new place of its slot or block each time
  // round (spreadOffset): auto (where every rank has a core, the CPUs of ranks 0 and 1 sit close
  // but do not share a core's caches, and the slots are not streamed), on or off
  // (docs/tuning_shm.md).
  enum class SlotSpread { automatic, on, off } slotSpread = SlotSpread::automatic;
  // GYRE_TUNE: measure (where every rank has a core on one host, the calls of each collective
  // and size class from 16 KiB to 64 MiB try the algorithms the model rates closest, a few
  // calls each, and keep the fastest: runtime/core/measured_choice.h) or model (the tuner's
  // prices alone); rank 0's setting holds for all.
  enum class Tune { measure, model } tune = Tune::measure;
  std::string socketIfname;  // GYRE_SOCKET_IFNAME
  // GYRE_TCP_CONGESTION: auto (BBR with pacing off, else cubic, else reno, for data
  // connections to peers on this host; the system's default for the others), system (never
  // set), or a name for every one.
  std::string tcpCongestion = "auto";
  // GYRE_TCP_TIMEOUT (seconds): a tcp peer (or the rendezvous) whose kernel answers nothing
  // this long is gone, even while nothing is sent; 0 leaves the system's (minutes).
  std::chrono::milliseconds tcpTimeout{std::chrono::seconds(6)};
  // GYRE_NET_GBITS: the network link of each host, Gbit/s, as the tuner prices it.
  double netGbits = 10;
  std::string algorithm;  // GYRE_ALGO: ring, tree or rd forces it where a collective has it
  int channels = 0;       // GYRE_CHANNELS: rings per ring collective; 0 = the tuner's choice
  // GYRE_TRANSPORT: auto (shared memory for peers on this host, rdma for peers on other hosts
  // where both have a device, else tcp), tcp, shm or rdma (every peer over that transport, an
  // error where that cannot be).
  std::string transport = "auto";
  std::string shmDir = "/dev/shm";  // GYRE_SHM_DIR: where shared-memory segments live
  // GYRE_SHM_SINGLE_COPY_BYTES: the smallest shm slot payload a receiver reads straight from
  // the sender's buffer (where the kernel lets it); 0: never.
  size_t shmSingleCopyBytes = 32 * 1024;
  std::string ibHca;    // GYRE_IB_HCA: rdma device ("mlx5_0" or "mlx5_0:1"); "" = first
  int ibGidIndex = -1;  // GYRE_IB_GID_INDEX; -1 = the first RoCE v2 IPv4 GID
  // Stream-ordered collectives on device memory between GPUs of one host (docs/cuda.md):
  bool cudaIpc = true;               // GYRE_CUDA_IPC=0: always staged through host memory
  int cudaChannels = 32;             // GYRE_CUDA_CHANNELS: thread blocks of a ring kernel
  size_t cudaSlotBytes = 256 << 10;  // GYRE_CUDA_SLOT_BYTES: slot size of device links
};

// "auto", "cached" or "streaming".
const char* slotStoresName(CommConfig::SlotStores stores);
// "auto", "on" or "off".
const char* slotSpreadName(CommConfig::SlotSpread spread);
// "measure" or "model".
const char* tuneName(CommConfig::Tune tune);

// Applies GYRE_TIMEOUT, GYRE_NSLOTS, GYRE_SLOT_BYTES, GYRE_SPIN_US, GYRE_ONESHOT_BYTES,
// GYRE_PLACEMENT_PROBE_MS, GYRE_SLOT_STORES, GYRE_SLOT_SPREAD, GYRE_TUNE,
// GYRE_SHM_SINGLE_COPY_BYTES, GYRE_SOCKET_IFNAME, GYRE_TCP_CONGESTION, GYRE_TCP_TIMEOUT,
// GYRE_NET_GBITS, GYRE_ALGO, GYRE_CHANNELS, GYRE_TRANSPORT, GYRE_SHM_DIR, GYRE_IB_HCA,
// GYRE_IB_GID_INDEX and the GYRE_CUDA_* variables.
void applyTuningEnv(CommConfig& config);

// Reads rank, size and rendezvous from GYRE_* (or torch's RANK, WORLD_SIZE, MASTER_ADDR,
// MASTER_PORT; or, where neither rank is set, Slurm's SLURM_PROCID, SLURM_STEP_NUM_TASKS,
// SLURM_JOB_ID, SLURM_STEP_ID and SLURM_STEP_NODELIST) and applies the tuning variables.
CommConfig configFromEnv();

// The first host of a Slurm node list: "node[01-04,07],gpu5" -> "node01".
std::string firstSlurmHost(const std::string& nodeList);
// The port rank 0 hosts the rendezvous on under Slurm without MASTER_PORT: 20000-29999.
int slurmRendezvousPort(long long jobId, long long stepId);

// Throws Failure(invalid_argument) on values no communicator can run with.
void validate(const CommConfig& config);

}  // namespace gyre
