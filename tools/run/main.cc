// gyre-run: launch the ranks of a job on this machine.
//   gyre-run -n 4 gyre-bench all_reduce
//   gyre-run -n 8 --nnodes 2 --node-rank 0 --rendezvous host:port -- ./train
#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>

#include "base/auth.h"
#include "base/status.h"
#include "runtime/store/server.h"
#include "tools/run/launcher.h"

int main(int argc, char** argv) {
  gyre::run::blockLauncherSignals();  // before the rendezvous thread starts
  CLI::App app{"gyre-run: start the ranks of a gyre job on this machine"};
  gyre::run::LaunchOptions o;
  int graceMs = int(o.grace.count());
  bool noPrefix = false;
  app.add_option("-n,--nproc", o.localRanks, "ranks to start on this machine")
      ->required()
      ->check(CLI::Range(1, 4096));
  app.add_option("--rendezvous", o.rendezvous,
                 "host:port of a running gyre-rendezvous (default: one inside gyre-run, "
                 "single machine only)");
  app.add_option("--nnodes", o.nnodes, "machines in the job")->check(CLI::Range(1, 1 << 20));
  app.add_option("--node-rank", o.nodeRank, "this machine's index in [0, nnodes)");
  app.add_option("--job", o.jobId,
                 "job id shared by all machines (default: random, or "
                 "GYRE_JOB_ID)");
  app.add_option("--secret", o.secret,
                 "job secret shared by every machine and the rendezvous (default: GYRE_SECRET, "
                 "else random for a single machine)");
  app.add_option("--grace-ms", graceMs, "after a rank fails: wait before SIGTERM, then SIGKILL")
      ->capture_default_str();
  app.add_flag("--no-prefix", noPrefix, "do not prefix output lines with [rank]");
  app.add_option("--bind", o.bind,
                 "auto: give each rank its own share of the CPUs when there are at least as "
                 "many CPUs as ranks here, else consecutive ranks one CPU in even blocks; none: "
                 "leave placement to the scheduler")
      ->check(CLI::IsMember({"auto", "none"}))
      ->capture_default_str();
  app.footer("After the options: the program to run and its arguments (use -- to separate).");
  app.prefix_command();  // everything from the first positional on belongs to the program
  CLI11_PARSE(app, argc, argv);
  o.command = app.remaining();
  if (!o.command.empty() && o.command.front() == "--") o.command.erase(o.command.begin());
  if (o.command.empty()) {
    std::fprintf(stderr, "gyre-run: no program given\n%s", app.help().c_str());
    return 2;
  }
  o.prefixOutput = !noPrefix;
  o.grace = std::chrono::milliseconds(graceMs);

  if (o.nodeRank < 0 || o.nodeRank >= o.nnodes) {
    std::fprintf(stderr, "gyre-run: --node-rank must be in [0, %d)\n", o.nnodes);
    return 2;
  }
  if (o.jobId.empty()) {
    const char* env = std::getenv("GYRE_JOB_ID");
    if (env && *env) {
      o.jobId = env;
    } else if (o.nnodes > 1) {
      o.jobId = "default";
    } else {
      o.jobId = "run-" + gyre::auth::randomHex(8);
    }
  }

  if (o.secret.empty()) {
    const char* env = std::getenv("GYRE_SECRET");
    if (env && *env) {
      o.secret = env;
    } else if (o.nnodes == 1 && o.rendezvous.empty()) {
      o.secret = gyre::auth::randomHex(16);
    } else {
      std::fprintf(stderr,
                   "gyre-run: warning: no --secret or GYRE_SECRET: connections of this "
                   "job are not authenticated\n");
    }
  }

  std::unique_ptr<gyre::StoreServer> server;
  if (o.rendezvous.empty()) {
    if (o.nnodes > 1) {
      std::fprintf(stderr,
                   "gyre-run: --nnodes > 1 needs --rendezvous host:port (start gyre-rendezvous "
                   "on a machine every node can reach)\n");
      return 2;
    }
    try {
      gyre::StoreServerOptions options;  // loopback only
      options.secret = o.secret;
      server = std::make_unique<gyre::StoreServer>(options);
      server->start();
    } catch (const gyre::Failure& f) {
      std::fprintf(stderr, "gyre-run: %s\n", f.what());
      return 1;
    }
    o.rendezvous = server->address();
    // For torch programs (env://): rank 0's TCPStore on a port free now on loopback.
    o.masterAddr = "127.0.0.1";
    o.masterPort = gyre::run::freeLoopbackPort();
  }
  return gyre::run::launch(o);
}
