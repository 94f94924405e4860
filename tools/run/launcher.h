// gyre-run's engine: starts the local ranks, relays their output line by line with a rank
// prefix, forwards SIGINT/SIGTERM, and stops the job when a rank fails.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace gyre::run {

struct LaunchOptions {
  int localRanks = 1;
  int nnodes = 1;
  int nodeRank = 0;
  std::string rendezvous;  // host:port; the launcher passes it to every rank
  std::string jobId;
  std::string secret;  // passed to every rank as GYRE_SECRET
  // torch's env:// rendezvous (MASTER_ADDR/MASTER_PORT), unless the environment sets them.
  std::string masterAddr;
  uint16_t masterPort = 0;
  std::chrono::milliseconds grace{3000};  // after a failure, before SIGTERM, then SIGKILL
  bool prefixOutput = true;
  // "auto": where this machine's ranks do not outnumber the CPUs gyre-run may use, each rank
  // gets its own equal share of them (sched_setaffinity), so the scheduler cannot stack two
  // ranks on one core while another idles; where they do, consecutive ranks share one CPU in
  // even blocks; "none": ranks inherit gyre-run's CPUs.
  std::string bind = "auto";
  std::vector<std::string> command;
};

// A loopback port nothing listens on now (0 if none could be found).
uint16_t freeLoopbackPort();

// Blocks SIGINT, SIGTERM and SIGCHLD for the calling thread and the threads it starts
// later; call first in main, before any thread exists, so the launcher sees every one.
void blockLauncherSignals();

// The CPUs each local rank is bound to under `bind` (empty: no binding), from `allowed`.
std::vector<std::vector<int>> rankCpus(const std::string& bind, int localRanks,
                                       const std::vector<int>& allowed);

// Runs the job; returns the exit status for gyre-run: 0 when every rank exited 0, else the
// first failing rank's exit code (128 + signal for a signal).
int launch(const LaunchOptions& options);

}  // namespace gyre::run
