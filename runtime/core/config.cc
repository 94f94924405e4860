#include "runtime/core/config.h"

#include <algorithm>
#include <cstdlib>
#include <initializer_list>

#include "base/status.h"
#include "runtime/core/tuner.h"
#include "transport/registry.h"

namespace gyre {

namespace {

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return (v && *v) ? v : nullptr;
}

long long envInt(const char* name, long long fallback, long long lo, long long hi) {
  const char* v = env(name);
  if (!v) return fallback;
  char* end = nullptr;
  const long long value = std::strtoll(v, &end, 10);
  if (*end != '\0' || value < lo || value > hi) {
    fail(Code::invalid_argument, std::string(name) + "='" + v + "' is not an integer in [" +
                                     std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  return value;
}

// `value` becomes the one of `choices` that GYRE variable `name` names (`nameOf`); a name that is
// none of them fails, listing them. Unset: `value` stays.
template <class E>
void envChoice(const char* name, E& value, std::initializer_list<E> choices,
               const char* (*nameOf)(E)) {
  const char* v = env(name);
  if (!v) return;
  std::string names;
  for (E choice : choices) {
    if (std::string(v) == nameOf(choice)) {
      value = choice;
      return;
    }
    names += (names.empty() ? "" : ", ") + std::string(nameOf(choice));
  }
  fail(Code::invalid_argument, std::string(name) + "='" + v + "' is not one of " + names);
}

// Slurm's step, where srun started this process: rank, size, job and step, and the step's
// first node (rank 0 always runs there).
struct SlurmStep {
  int rank = 0, nranks = 1;
  long long job = 0, step = 0;
  std::string firstNode;
};

bool readSlurmStep(SlurmStep& s) {
  const char* tasks = env("SLURM_STEP_NUM_TASKS") ? "SLURM_STEP_NUM_TASKS" : "SLURM_NTASKS";
  if (!env("SLURM_PROCID") || !env(tasks)) return false;
  s.rank = int(envInt("SLURM_PROCID", 0, 0, 1 << 24));
  s.nranks = int(envInt(tasks, 1, 1, 1 << 24));
  s.job = envInt("SLURM_JOB_ID", 0, 0, 1LL << 40);
  s.step = envInt("SLURM_STEP_ID", 0, 0, 1LL << 40);
  const char* nodes = env("SLURM_STEP_NODELIST");
  if (!nodes) nodes = env("SLURM_JOB_NODELIST");
  if (!nodes) nodes = env("SLURM_NODELIST");
  if (nodes) s.firstNode = firstSlurmHost(nodes);
  return true;
}

}  // namespace

std::string firstSlurmHost(const std::string& list) {
  // "pre[01-04,07]mid[2-3]suf,other" -> "pre01mid2suf": the first value of each range.
  std::string host;
  size_t i = 0;
  while (i < list.size() && list[i] != ',') {
    if (list[i] != '[') {
      host += list[i++];
      continue;
    }
    const size_t close = list.find(']', i);
    if (close == std::string::npos) {
      fail(Code::invalid_argument, "Slurm node list '" + list + "' has an unclosed '['");
    }
    const size_t end = list.find_first_of(",-]", i + 1);
    host += list.substr(i + 1, end - i - 1);
    i = close + 1;
  }
  return host;
}

int slurmRendezvousPort(long long jobId, long long stepId) {
  // Below Linux's ephemeral range (32768 and up), so no outgoing connection holds it; the
  // job's last three digits and the step's last make concurrent jobs on a node unlikely to
  // meet.
  return int(20000 + (jobId % 1000) * 10 + stepId % 10);
}

const char* slotStoresName(CommConfig::SlotStores stores) {
  switch (stores) {
    case CommConfig::SlotStores::automatic:
      return "auto";
    case CommConfig::SlotStores::cached:
      return "cached";
    case CommConfig::SlotStores::streaming:
      return "streaming";
  }
  return "?";
}

const char* slotSpreadName(CommConfig::SlotSpread spread) {
  switch (spread) {
    case CommConfig::SlotSpread::automatic:
      return "auto";
    case CommConfig::SlotSpread::on:
      return "on";
    case CommConfig::SlotSpread::off:
      return "off";
  }
  return "?";
}

const char* tuneName(CommConfig::Tune tune) {
  return tune == CommConfig::Tune::measure ? "measure" : "model";
}

void applyTuningEnv(CommConfig& c) {
  if (const char* v = env("GYRE_TIMEOUT")) {
    char* end = nullptr;
    const double seconds = std::strtod(v, &end);
    if (*end != '\0' || !(seconds > 0) || seconds > 1e7) {
      fail(Code::invalid_argument,
           std::string("GYRE_TIMEOUT='") + v + "' is not a positive number of seconds");
    }
    // Deadlines count milliseconds: a shorter timeout would silently become none at all.
    if (seconds < 0.001) {
      fail(Code::invalid_argument,
           std::string("GYRE_TIMEOUT='") + v + "' is shorter than the 1 ms a timeout can express");
    }
    c.timeout = std::chrono::milliseconds(static_cast<long long>(seconds * 1000));
  }
  c.nSlots = uint32_t(envInt("GYRE_NSLOTS", c.nSlots, 2, 1024));
  c.slotBytes = size_t(envInt("GYRE_SLOT_BYTES", (long long)c.slotBytes, 64, 64 << 20));
  c.spin = std::chrono::microseconds(envInt("GYRE_SPIN_US", c.spin.count(), 0, 1000000));
  c.oneShotBytes =
      size_t(envInt("GYRE_ONESHOT_BYTES", (long long)c.oneShotBytes, 0, (long long)16 << 20));
  c.placementProbe = std::chrono::milliseconds(
      envInt("GYRE_PLACEMENT_PROBE_MS",
             std::chrono::duration_cast<std::chrono::milliseconds>(c.placementProbe).count(), 0,
             3600 * 1000));
  envChoice("GYRE_SLOT_STORES", c.slotStores,
            {CommConfig::SlotStores::automatic, CommConfig::SlotStores::cached,
             CommConfig::SlotStores::streaming},
            slotStoresName);
  envChoice(
      "GYRE_SLOT_SPREAD", c.slotSpread,
      {CommConfig::SlotSpread::automatic, CommConfig::SlotSpread::on, CommConfig::SlotSpread::off},
      slotSpreadName);
  envChoice("GYRE_TUNE", c.tune, {CommConfig::Tune::measure, CommConfig::Tune::model}, tuneName);
  c.shmSingleCopyBytes = size_t(
      envInt("GYRE_SHM_SINGLE_COPY_BYTES", (long long)c.shmSingleCopyBytes, 0, (long long)1 << 30));
  if (const char* v = env("GYRE_SOCKET_IFNAME")) c.socketIfname = v;
  if (const char* v = env("GYRE_TCP_CONGESTION")) c.tcpCongestion = v;
  c.tcpTimeout =
      std::chrono::seconds(envInt("GYRE_TCP_TIMEOUT", c.tcpTimeout.count() / 1000, 0, 24 * 3600));
  if (const char* v = env("GYRE_NET_GBITS")) {
    char* end = nullptr;
    const double g = std::strtod(v, &end);
    if (*end != '\0' || !(g >= 0.001) || g > 1e6) {
      fail(Code::invalid_argument,
           std::string("GYRE_NET_GBITS='") + v + "' is not a link rate in Gbit/s (0.001 to 1e6)");
    }
    c.netGbits = g;
  }
  if (const char* v = env("GYRE_ALGO")) c.algorithm = v;
  c.channels = int(envInt("GYRE_CHANNELS", c.channels, 0, 32));
  c.cudaIpc = envInt("GYRE_CUDA_IPC", c.cudaIpc ? 1 : 0, 0, 1) != 0;
  c.cudaChannels = int(envInt("GYRE_CUDA_CHANNELS", c.cudaChannels, 1, 32));
  c.cudaSlotBytes =
      size_t(envInt("GYRE_CUDA_SLOT_BYTES", (long long)c.cudaSlotBytes, 1024, 16 << 20));
  if (c.cudaSlotBytes % 256 != 0) {
    fail(Code::invalid_argument, "GYRE_CUDA_SLOT_BYTES must be a multiple of 256");
  }
  if (const char* v = env("GYRE_TRANSPORT")) c.transport = v;
  if (const char* v = env("GYRE_SHM_DIR")) c.shmDir = v;
  if (const char* v = env("GYRE_IB_HCA")) c.ibHca = v;
  c.ibGidIndex = int(envInt("GYRE_IB_GID_INDEX", c.ibGidIndex, -1, 65535));
}

CommConfig configFromEnv() {
  CommConfig c;
  const bool haveGyreRank = env("GYRE_RANK") != nullptr;
  SlurmStep slurm;
  // Slurm's variables count only where neither gyre's nor torch's rank is set.
  const bool underSlurm = !haveGyreRank && !env("RANK") && readSlurmStep(slurm);
  if (underSlurm) {
    c.rank = slurm.rank;
    c.nranks = slurm.nranks;
    c.jobId = "slurm-" + std::to_string(slurm.job) + "." + std::to_string(slurm.step);
  } else {
    c.rank = int(envInt(haveGyreRank ? "GYRE_RANK" : "RANK", 0, 0, 1 << 24));
    c.nranks =
        int(envInt(env("GYRE_WORLD_SIZE") ? "GYRE_WORLD_SIZE" : "WORLD_SIZE", 1, 1, 1 << 24));
  }
  if (const char* v = env("GYRE_JOB_ID")) c.jobId = v;
  if (const char* v = env("GYRE_SECRET")) c.secret = v;
  if (const char* v = env("GYRE_RENDEZVOUS")) {
    c.rendezvous = v;
  } else if (c.nranks > 1) {
    // torch-style: rank 0 hosts the store at MASTER_ADDR:MASTER_PORT; the defaults are
    // torch's, or under Slurm the step's first node and a port from the job and step.
    const char* addr = env("MASTER_ADDR");
    const char* port = env("MASTER_PORT");
    const std::string host = addr ? addr : underSlurm ? slurm.firstNode : "127.0.0.1";
    if (host.empty()) {
      fail(Code::invalid_argument,
           "under Slurm without SLURM_STEP_NODELIST: set GYRE_RENDEZVOUS or MASTER_ADDR");
    }
    const std::string portText = port ? port
                                 : underSlurm
                                     ? std::to_string(slurmRendezvousPort(slurm.job, slurm.step))
                                     : "29500";
    c.hostAddress =
        (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + portText;
  }
  applyTuningEnv(c);
  return c;
}

void validate(const CommConfig& c) {
  if (c.nranks < 1 || c.nranks > 65536) {
    fail(Code::invalid_argument, "world size must be between 1 and 65536");
  }
  if (c.rank < 0 || c.rank >= c.nranks) {
    fail(Code::invalid_argument,
         "rank " + std::to_string(c.rank) + " is outside [0, " + std::to_string(c.nranks) + ")");
  }
  if (c.jobId.empty() || c.jobId.size() > 32) {
    fail(Code::invalid_argument, "job id must have 1 to 32 bytes");
  }
  if (c.nSlots < 2) fail(Code::invalid_argument, "need at least 2 slots per link");
  forcedAlgorithm(c.algorithm);  // throws for a name that is not an algorithm's
  const auto& names = transportNames();
  if (c.transport != "auto" && std::find(names.begin(), names.end(), c.transport) == names.end()) {
    std::string known = "auto";
    for (const auto& n : names) known += ", " + n;
    fail(Code::invalid_argument,
         "transport '" + c.transport + "' (GYRE_TRANSPORT) is not one of " + known);
  }
  const auto& cc = c.tcpCongestion;
  if (cc.empty() || cc.size() > 15 ||
      cc.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_-") != std::string::npos) {
    fail(Code::invalid_argument,
         "tcp congestion control '" + cc +
             "' (GYRE_TCP_CONGESTION) is not auto, system or the name "
             "of one (as in /proc/sys/net/ipv4/tcp_allowed_congestion_control)");
  }
  if (c.slotBytes < 64 || c.slotBytes > (64u << 20)) {
    fail(Code::invalid_argument, "slot size must be between 64 B and 64 MiB");
  }
}

}  // namespace gyre
