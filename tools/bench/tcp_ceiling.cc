// gyre-tcp-ceiling: what loopback tcp itself allows a ring collective on this machine, now.
//
// n ranks (processes, bound to a CPU each where there are enough, as gyre-run binds its ranks)
// each send M bytes to the next rank and receive M from the previous one, all at once, with
// non-blocking writes and reads of up to one slot (128 KiB) multiplexed on one thread, and
// nothing else: no framing, no reduction, no copies of our own. M is what each rank of a
// bandwidth-optimal algorithm must send for the collective: 2(n-1)/n of the buffer for
// all-reduce, (n-1)/n for all-gather, all of it for broadcast. busbw is defined so that it
// equals the rate each rank sends at, so M / time estimates the highest busbw a collective of
// that size can reach over this loopback (a collective does all of this work and more). At
// n = 2 both directions share one connection, as a gyre peer's does. Iterations run back to
// back, as a benchmark's calls do.
//   build/tools/gyre-tcp-ceiling -n 2 -c all_reduce -b 64K -e 256M
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kDeadlineMs = 30000;  // no single wait may take longer

[[noreturn]] void fail(const std::string& what) {
  throw std::runtime_error(what + ": " + std::strerror(errno));
}

size_t parseSize(const std::string& text) {
  size_t used = 0;
  double v = std::stod(text, &used);
  const std::string unit = text.substr(used);
  if (unit == "K" || unit == "k") v *= 1024.0;
  if (unit == "M" || unit == "m") v *= 1048576.0;
  if (unit == "G" || unit == "g") v *= 1073741824.0;
  if (!unit.empty() && unit.find_first_not_of("KkMmGg") != std::string::npos)
    throw std::invalid_argument("bad size " + text);
  return size_t(v);
}

// A connected loopback pair: {connecting end, accepted end}.
// `congestion` (if not empty) is set on both ends once connected, as gyre does, and with
// `unpaced` their pacing turned off (a maximum pacing rate of 0), as gyre's "auto" does for BBR.
std::pair<int, int> loopbackPair(const std::string& congestion, bool unpaced) {
  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  if (listener < 0) fail("socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (::bind(listener, reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
      ::listen(listener, 1) != 0 ||
      ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    fail("listen on 127.0.0.1");
  const int out = ::socket(AF_INET, SOCK_STREAM, 0);
  if (out < 0 || ::connect(out, reinterpret_cast<sockaddr*>(&addr), len) != 0) fail("connect");
  const int in = ::accept(listener, nullptr, nullptr);
  if (in < 0) fail("accept");
  ::close(listener);
  const int one = 1;
  for (int fd : {out, in}) {
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (!congestion.empty() && ::setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, congestion.data(),
                                            socklen_t(congestion.size())) != 0)
      fail("congestion control " + congestion);
    const unsigned long noPacing = 0;
    if (unpaced &&
        ::setsockopt(fd, SOL_SOCKET, SO_MAX_PACING_RATE, &noPacing, sizeof noPacing) != 0)
      fail("turning pacing off");
  }
  return {out, in};
}

struct Rank {
  int sendFd = -1;  // to the next rank
  int recvFd = -1;  // from the previous rank
  std::vector<char> sendBuf, recvBuf;
};

// Sends `bytes` on r.sendFd while receiving `bytes` on r.recvFd.
void exchange(Rank& r, size_t bytes, size_t chunk, int rank) {
  size_t sent = 0, received = 0;
  while (sent < bytes || received < bytes) {
    bool progress = false;
    if (sent < bytes) {
      const ssize_t n = ::send(r.sendFd, r.sendBuf.data() + sent, std::min(chunk, bytes - sent),
                               MSG_DONTWAIT | MSG_NOSIGNAL);
      if (n > 0) sent += size_t(n), progress = true;
      if (n < 0 && errno != EAGAIN && errno != EINTR)
        fail("rank " + std::to_string(rank) + " send");
    }
    if (received < bytes) {
      const ssize_t n = ::recv(r.recvFd, r.recvBuf.data() + received,
                               std::min(chunk, bytes - received), MSG_DONTWAIT);
      if (n == 0) throw std::runtime_error("rank " + std::to_string(rank) + ": peer closed");
      if (n > 0) received += size_t(n), progress = true;
      if (n < 0 && errno != EAGAIN && errno != EINTR)
        fail("rank " + std::to_string(rank) + " recv");
    }
    if (progress) continue;
    pollfd fds[2];
    nfds_t count = 0;
    if (sent < bytes) fds[count++] = {r.sendFd, POLLOUT, 0};
    if (received < bytes) fds[count++] = {r.recvFd, POLLIN, 0};
    if (::poll(fds, count, kDeadlineMs) == 0)
      throw std::runtime_error("rank " + std::to_string(rank) + ": no progress for 30 s");
  }
}

void bindTo(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  ::sched_setaffinity(0, sizeof set, &set);
}

double sentFraction(const std::string& collective, int n) {
  if (collective == "all_reduce") return 2.0 * (n - 1) / n;
  if (collective == "all_gather" || collective == "reduce_scatter") return double(n - 1) / n;
  return 1.0;  // broadcast, reduce: a pipelined chain forwards the whole buffer
}

// One rank: a tenth as many untimed exchanges, then `count` timed back to back; returns their
// seconds, or throws. Every rank sends bytes of its own number + 1, so the last exchange must
// have brought all of the previous rank's.
double runRank(std::vector<Rank>& ranks, int r, size_t sent, size_t chunk, int count, bool bind) {
  const int n = int(ranks.size());
  if (bind) bindTo(r);
  for (int i = 0; i < std::max(3, count / 10); ++i) exchange(ranks[size_t(r)], sent, chunk, r);
  const auto t0 = Clock::now();
  for (int i = 0; i < count; ++i) exchange(ranks[size_t(r)], sent, chunk, r);
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  const char expected = char((r + n - 1) % n + 1);
  const auto& got = ranks[size_t(r)].recvBuf;
  if (std::count(got.begin(), got.begin() + std::ptrdiff_t(sent), expected) != std::ptrdiff_t(sent))
    throw std::runtime_error("rank " + std::to_string(r) + ": received wrong bytes");
  return seconds;
}

// A failed rank shuts its sockets down, so that its neighbours fail too instead of waiting.
double runRankOrStop(std::vector<Rank>& ranks, int r, size_t sent, size_t chunk, int count,
                     bool bind) {
  try {
    return runRank(ranks, r, sent, chunk, count, bind);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gyre-tcp-ceiling: %s\n", e.what());
    ::shutdown(ranks[size_t(r)].sendFd, SHUT_RDWR);
    ::shutdown(ranks[size_t(r)].recvFd, SHUT_RDWR);
    return -1;
  }
}

// Runs every rank in a process of its own, as gyre-run does (or as threads of this one);
// returns the slowest rank's seconds.
double timeRanks(std::vector<Rank>& ranks, size_t sent, size_t chunk, int count, bool bind,
                 bool threads) {
  const int n = int(ranks.size());
  std::vector<double> seconds(ranks.size(), -1);
  if (threads) {
    std::vector<std::thread> running;
    for (int r = 0; r < n; ++r)
      running.emplace_back(
          [&, r] { seconds[size_t(r)] = runRankOrStop(ranks, r, sent, chunk, count, bind); });
    for (auto& t : running) t.join();
  } else {
    int results[2];
    if (::pipe(results) != 0) fail("pipe");
    std::vector<pid_t> children;
    for (int r = 0; r < n; ++r) {
      const pid_t pid = ::fork();
      if (pid < 0) fail("fork");
      if (pid > 0) {
        children.push_back(pid);
        continue;
      }
      const double mine = runRankOrStop(ranks, r, sent, chunk, count, bind);
      const bool written = ::write(results[1], &mine, sizeof mine) == sizeof mine;
      ::_exit(mine >= 0 && written ? 0 : 1);
    }
    ::close(results[1]);
    for (auto& s : seconds)
      if (::read(results[0], &s, sizeof s) != sizeof s) s = -1;
    ::close(results[0]);
    for (pid_t pid : children) {
      int status = 0;
      ::waitpid(pid, &status, 0);
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) seconds[0] = -1;
    }
  }
  if (*std::min_element(seconds.begin(), seconds.end()) < 0)
    throw std::runtime_error("a rank failed (see above)");
  return *std::max_element(seconds.begin(), seconds.end());
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"gyre-tcp-ceiling: the busbw loopback tcp allows a ring collective, raw"};
  int n = 2, iters = 0;
  std::string collective = "all_reduce", minText = "64K", maxText = "256M";
  size_t chunk = 128 << 10;
  double factor = 4;
  bool threads = false, unpaced = false;
  std::string congestion;
  app.add_option("-n,--ranks", n, "ranks (processes)")->check(CLI::Range(2, 64));
  app.add_option("-c,--collective", collective,
                 "all_reduce | all_gather | reduce_scatter | broadcast | reduce")
      ->check(CLI::IsMember({"all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce"}));
  app.add_option("-b,--minbytes", minText, "smallest buffer (K, M, G suffixes)");
  app.add_option("-e,--maxbytes", maxText, "largest buffer");
  app.add_option("-f,--stepfactor", factor, "size multiplier between rows")
      ->check(CLI::Range(1.01, 1e6));
  app.add_option("-i,--iters", iters,
                 "iterations per size (default: about 200 MB of traffic, 5..2000)");
  app.add_flag("--threads", threads,
               "ranks as threads of one process instead (the way ../shared/peers' tcp_bench runs)");
  app.add_option("--congestion", congestion,
                 "tcp congestion control for the connections (default: the system's)");
  app.add_flag("--unpaced", unpaced, "turn the connections' pacing off (gyre does for BBR)");
  app.add_option("--chunk", chunk, "largest single write or read (gyre's slot size)")
      ->check(CLI::Range(1, 1 << 30));
  CLI11_PARSE(app, argc, argv);

  try {
    const size_t minBytes = parseSize(minText), maxBytes = parseSize(maxText);
    if (minBytes == 0 || maxBytes < minBytes)
      throw std::invalid_argument("need 0 < minbytes <= maxbytes");
    const size_t maxSent = size_t(double(maxBytes) * sentFraction(collective, n)) + 1;
    std::vector<Rank> ranks(static_cast<size_t>(n));
    if (n == 2) {
      auto [a, b] = loopbackPair(congestion, unpaced);
      ranks[0].sendFd = ranks[0].recvFd = a;
      ranks[1].sendFd = ranks[1].recvFd = b;
    } else {
      for (int r = 0; r < n; ++r) {
        auto [out, in] = loopbackPair(congestion, unpaced);
        ranks[size_t(r)].sendFd = out;
        ranks[size_t((r + 1) % n)].recvFd = in;
      }
    }
    for (int r = 0; r < n; ++r) {
      ranks[size_t(r)].sendBuf.assign(maxSent, char(r + 1));
      ranks[size_t(r)].recvBuf.assign(maxSent, 0);
    }
    const long cpus = ::sysconf(_SC_NPROCESSORS_ONLN);
    const bool bind = cpus >= n;
    std::printf(
        "# gyre-tcp-ceiling %s: %d ranks (%s%s), each sends %.3g x the buffer to the "
        "next rank while receiving as much, %zu-byte writes and reads\n",
        collective.c_str(), n, threads ? "threads" : "processes",
        bind ? ", one CPU each" : ", unbound", sentFraction(collective, n), chunk);
    std::printf("# %12s %12s %12s %14s\n", "size", "sent/rank", "time(us)", "busbw(GB/s)");
    std::fflush(stdout);
    for (size_t bytes = minBytes; bytes <= maxBytes;
         bytes = std::max(bytes + 1, size_t(double(bytes) * factor))) {
      const size_t sent = size_t(double(bytes) * sentFraction(collective, n));
      const int count =
          iters > 0 ? iters
                    : int(std::clamp<size_t>(size_t(200e6) / std::max<size_t>(sent, 1), 5, 2000));
      const double perCall = timeRanks(ranks, sent, chunk, count, bind, threads) / count;
      std::printf("  %12zu %12zu %12.2f %14.3f\n", bytes, sent, perCall * 1e6,
                  double(sent) / perCall / 1e9);
      std::fflush(stdout);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gyre-tcp-ceiling: %s\n", e.what());
    return 1;
  }
  return 0;
}
