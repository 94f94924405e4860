// gyre-rendezvous: the standalone rendezvous server for jobs spanning several machines.
#include <CLI/CLI.hpp>
#include <asio/ip/address.hpp>
#include <csignal>
#include <cstdio>
#include <iostream>

#include "base/status.h"
#include "runtime/store/server.h"

int main(int argc, char** argv) {
  CLI::App app{"gyre rendezvous server: ranks of one or more jobs meet here"};
  gyre::StoreServerOptions options;
  app.add_option("--host", options.host, "address to listen on (required; 0.0.0.0 for all)")
      ->required();
  app.add_option("--port", options.port, "port to listen on; 0 picks a free one")->required();
  app.add_option("--max-clients", options.maxClients, "connections served at once")
      ->capture_default_str();
  app.add_option("--max-keys", options.maxKeysPerJob, "keys per job")->capture_default_str();
  app.add_option(
      "--secret", options.secret,
      "job secret clients must prove (default: GYRE_SECRET; every job served shares it)");
  CLI11_PARSE(app, argc, argv);
  if (options.secret.empty()) {
    const char* env = std::getenv("GYRE_SECRET");
    if (env) options.secret = env;
  }

  // Block the stop signals before any thread starts so only sigwait sees them.
  sigset_t stopSignals;
  sigemptyset(&stopSignals);
  sigaddset(&stopSignals, SIGINT);
  sigaddset(&stopSignals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stopSignals, nullptr);
  try {
    gyre::StoreServer server(options);
    server.start();
    const auto address = asio::ip::make_address(server.host());
    if (options.secret.empty() && !address.is_loopback()) {
      std::fprintf(stderr,
                   "gyre-rendezvous: warning: listening on %s without a secret: anyone "
                   "who can reach it can read and write every job's keys (use --secret)\n",
                   server.address().c_str());
    }
    std::printf("gyre-rendezvous listening on %s\n", server.address().c_str());
    std::fflush(stdout);
    int signal = 0;
    sigwait(&stopSignals, &signal);
    std::fprintf(stderr, "gyre-rendezvous: stopping on signal %d\n", signal);
    server.stop();
  } catch (const gyre::Failure& f) {
    std::fprintf(stderr, "gyre-rendezvous: %s\n", f.what());
    return 1;
  }
  return 0;
}
