#include "tools/run/launcher.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "transport/transport.h"

namespace gyre::run {

std::string signalName(int sig);

namespace {

using Clock = std::chrono::steady_clock;
// How long a rank's failure by exit code waits for a rank killed by a signal (launcher loop).
constexpr auto kCauseWindow = std::chrono::milliseconds(200);
// How much longer it waits where that rank named another, still running, as its cause.
constexpr auto kNamedCauseWait = std::chrono::milliseconds(1000);

struct Child {
  int rank = 0;
  pid_t pid = -1;
  int out = -1;  // read ends of the child's stdout / stderr pipes
  int err = -1;
  std::string prefix;  // "[rank] " or empty
  std::string outPartial, errPartial;
  bool exited = false;
  int status = 0;
  bool endedBeforeFailure = false;  // exited 0 while no rank had failed yet
  int cause = -1;  // the rank it reported as the cause of its failure (GYRE_RUN_CAUSE_FD)
};

void writeAll(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += size_t(n);
  }
}

// Emits every complete line of `partial` (prefixed), keeps the incomplete rest.
void relayLines(std::string& partial, const std::string& prefix, int fd, bool flushAll) {
  std::string out;
  size_t start = 0;
  for (size_t nl; (nl = partial.find('\n', start)) != std::string::npos; start = nl + 1) {
    out += prefix + partial.substr(start, nl + 1 - start);
  }
  partial.erase(0, start);
  if (flushAll && !partial.empty()) {
    out += prefix + partial + "\n";
    partial.clear();
  }
  if (!out.empty()) writeAll(fd, out);
}

std::string describeStatus(int status) {
  if (WIFEXITED(status)) return "exit code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return "signal " + std::to_string(sig) + " (" + signalName(sig) + ")";
  }
  return "status " + std::to_string(status);
}

int exitCodeOf(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

pid_t spawn(const LaunchOptions& o, Child& child, sigset_t originalMask,
            const std::vector<int>& cpus, int causeFd) {
  cpu_set_t cpuSet;
  CPU_ZERO(&cpuSet);
  for (int c : cpus) CPU_SET(c, &cpuSet);
  int outPipe[2], errPipe[2];
  if (pipe2(outPipe, O_CLOEXEC) != 0 || pipe2(errPipe, O_CLOEXEC) != 0) {
    std::perror("gyre-run: pipe");
    return -1;
  }
  const int world = o.localRanks * o.nnodes;
  const int rank = child.rank;
  const int localRank = rank - o.nodeRank * o.localRanks;
  const pid_t pid = fork();
  if (pid < 0) {
    std::perror("gyre-run: fork");
    return -1;
  }
  if (pid == 0) {
    sigprocmask(SIG_SETMASK, &originalMask, nullptr);
    if (!cpus.empty() && sched_setaffinity(0, sizeof cpuSet, &cpuSet) != 0) {
      std::fprintf(stderr, "gyre-run: rank %d: cannot bind to its CPUs: %s\n", rank,
                   std::strerror(errno));
    }
    dup2(outPipe[1], STDOUT_FILENO);
    dup2(errPipe[1], STDERR_FILENO);
    auto put = [](const char* name, const std::string& value) { setenv(name, value.c_str(), 1); };
    put("GYRE_RANK", std::to_string(rank));
    put("GYRE_WORLD_SIZE", std::to_string(world));
    put("GYRE_LOCAL_RANK", std::to_string(localRank));
    put("GYRE_LOCAL_SIZE", std::to_string(o.localRanks));
    put("GYRE_RENDEZVOUS", o.rendezvous);
    put("GYRE_JOB_ID", o.jobId);
    put("GYRE_SECRET", o.secret);
    if (causeFd >= 0) put("GYRE_RUN_CAUSE_FD", std::to_string(causeFd));
    // torch.distributed's env:// names too, so torch programs run under gyre-run as under
    // torchrun. MASTER_ADDR/PORT: kept when set; on one machine a free port of gyre-run's.
    put("RANK", std::to_string(rank));
    put("WORLD_SIZE", std::to_string(world));
    put("LOCAL_RANK", std::to_string(localRank));
    put("LOCAL_WORLD_SIZE", std::to_string(o.localRanks));
    if (!o.masterAddr.empty() && !std::getenv("MASTER_ADDR")) put("MASTER_ADDR", o.masterAddr);
    if (o.masterPort != 0 && !std::getenv("MASTER_PORT")) {
      put("MASTER_PORT", std::to_string(o.masterPort));
    }
    std::vector<char*> argv;
    for (const auto& a : o.command) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execvp(argv[0], argv.data());
    std::fprintf(stderr, "gyre-run: cannot execute %s: %s\n", argv[0], std::strerror(errno));
    _exit(127);
  }
  close(outPipe[1]);
  close(errPipe[1]);
  child.pid = pid;
  child.out = outPipe[0];
  child.err = errPipe[0];
  return pid;
}

}  // namespace

namespace {
sigset_t originalMask;
sigset_t handledSignals() {
  sigset_t handled;
  sigemptyset(&handled);
  sigaddset(&handled, SIGINT);
  sigaddset(&handled, SIGTERM);
  sigaddset(&handled, SIGCHLD);
  return handled;
}
}  // namespace

std::vector<std::vector<int>> rankCpus(const std::string& bind, int localRanks,
                                       const std::vector<int>& allowed) {
  if (bind != "auto" || localRanks < 2 || allowed.size() < 2) return {};
  std::vector<std::vector<int>> out(static_cast<size_t>(localRanks));
  if (size_t(localRanks) > allowed.size()) {
    // More ranks than CPUs: consecutive ranks share a CPU, in blocks as even as they go, so
    // most hand-overs of a chain or ring stay on one CPU and the scheduler cannot move ranks
    // onto each other's (docs/configuration.md: n = 4 and 8 on 2 CPUs).
    for (size_t r = 0; r < out.size(); ++r) out[r] = {allowed[r * allowed.size() / out.size()]};
    return out;
  }
  const size_t share = allowed.size() / size_t(localRanks);
  for (size_t r = 0; r < out.size(); ++r) {
    out[r].assign(allowed.begin() + long(r * share), allowed.begin() + long((r + 1) * share));
  }
  return out;
}

void blockLauncherSignals() {
  const sigset_t handled = handledSignals();
  pthread_sigmask(SIG_BLOCK, &handled, &originalMask);
}

int launch(const LaunchOptions& o) {
  const sigset_t handled = handledSignals();
  const sigset_t original = originalMask;
  const int sigfd = signalfd(-1, &handled, SFD_CLOEXEC | SFD_NONBLOCK);
  if (sigfd < 0) {
    std::perror("gyre-run: signalfd");
    return 1;
  }

  // Ranks write "RANK CAUSE" lines here when they fail because another rank did
  // (runtime/core/failure_board.cc): two ranks that end before this loop looks are otherwise
  // told apart by nothing. Only the write end reaches the ranks; both ends never block.
  int causePipe[2] = {-1, -1};
  if (pipe2(causePipe, O_CLOEXEC | O_NONBLOCK) != 0 || fcntl(causePipe[1], F_SETFD, 0) != 0) {
    std::perror("gyre-run: pipe");
    return 1;
  }
  const auto bound = rankCpus(o.bind, o.localRanks, allowedCpus());
  std::vector<Child> children(o.localRanks);
  for (int i = 0; i < o.localRanks; ++i) {
    children[i].rank = o.nodeRank * o.localRanks + i;
    if (o.prefixOutput) {
      children[i].prefix = '[';  // appended piecewise: GCC 12 warns falsely on chained +
      children[i].prefix += std::to_string(children[i].rank);
      children[i].prefix += "] ";
    }
    if (spawn(o, children[i], original, bound.empty() ? std::vector<int>{} : bound[i],
              causePipe[1]) < 0) {
      return 1;
    }
  }
  close(causePipe[1]);
  std::string causeLines;
  auto readCauses = [&] {
    char buf[512];
    for (ssize_t n; (n = read(causePipe[0], buf, sizeof buf)) > 0;)
      causeLines.append(buf, size_t(n));
    for (size_t nl; (nl = causeLines.find('\n')) != std::string::npos;
         causeLines.erase(0, nl + 1)) {
      int rank = -1, cause = -1;
      if (std::sscanf(causeLines.c_str(), "%d %d", &rank, &cause) != 2) continue;
      const int index = rank - o.nodeRank * o.localRanks;
      if (index >= 0 && index < o.localRanks && children[index].cause < 0) {
        children[index].cause = cause;  // the first failure a rank reports is its cause
      }
    }
  };

  int firstFailure = -1;  // index into children
  // A rank that exited with an error, waiting up to kCauseWindow for a rank killed by a signal
  // to show: a survivor can see its peer gone (a failed read of its memory) before the killed
  // process can be reaped.
  int pendingFailure = -1;
  bool waitedForCause = false;  // the wait for a cause it named, once (kNamedCauseWait)
  Clock::time_point pendingUntil = Clock::time_point::max();
  int result = 0;
  Clock::time_point termAt = Clock::time_point::max(), killAt = Clock::time_point::max();
  int interrupts = 0;
  auto running = [&] {
    for (auto& c : children)
      if (!c.exited || c.out >= 0 || c.err >= 0) return true;
    return false;
  };
  auto signalAll = [&](int sig) {
    for (auto& c : children)
      if (!c.exited) kill(c.pid, sig);
  };

  auto decide = [&](int index) {
    // A rank that reported another as the cause of its failure defers to it, where that rank
    // failed too (a rank that ended with 0 is named as having ended early, below).
    readCauses();
    for (size_t hops = 0; hops < children.size(); ++hops) {
      const int cause = children[index].cause - o.nodeRank * o.localRanks;
      if (cause < 0 || cause >= o.localRanks || cause == index) break;
      const Child& c = children[cause];
      if (!c.exited || (WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0)) break;
      index = cause;
    }
    pendingUntil = Clock::time_point::max();
    firstFailure = index;
    const Child& c = children[index];
    if (interrupts == 0) result = exitCodeOf(c.status);
    std::fprintf(stderr, "gyre-run: rank %d failed (%s); stopping the other ranks in %lld ms\n",
                 c.rank, describeStatus(c.status).c_str(), (long long)o.grace.count());
    termAt = Clock::now() + o.grace;
  };

  while (running()) {
    std::vector<pollfd> fds{{sigfd, POLLIN, 0}};
    for (auto& c : children) {
      if (c.out >= 0) fds.push_back({c.out, POLLIN, 0});
      if (c.err >= 0) fds.push_back({c.err, POLLIN, 0});
    }
    const auto now = Clock::now();
    // Children are also reaped on a timer, should a SIGCHLD ever be missed.
    int timeoutMs = 200;
    for (auto at : {termAt, killAt, pendingUntil}) {
      if (at != Clock::time_point::max()) {
        const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(at - now).count();
        timeoutMs = std::min<int>(timeoutMs, int(std::max<long>(0, ms)));
      }
    }
    if (poll(fds.data(), fds.size(), timeoutMs) < 0 && errno != EINTR) {
      std::perror("gyre-run: poll");
      signalAll(SIGKILL);
      return 1;
    }
    if (Clock::now() >= termAt) {
      signalAll(SIGTERM);
      termAt = Clock::time_point::max();
      killAt = Clock::now() + o.grace;
    } else if (Clock::now() >= killAt) {
      signalAll(SIGKILL);
      killAt = Clock::time_point::max();
    }

    for (size_t i = 1; i < fds.size(); ++i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      for (auto& c : children) {
        const bool isOut = fds[i].fd == c.out, isErr = fds[i].fd == c.err;
        if (!isOut && !isErr) continue;
        char buf[65536];
        const ssize_t n = read(fds[i].fd, buf, sizeof buf);
        std::string& partial = isOut ? c.outPartial : c.errPartial;
        const std::string& prefix = c.prefix;
        const int target = isOut ? STDOUT_FILENO : STDERR_FILENO;
        if (n > 0) {
          partial.append(buf, size_t(n));
          relayLines(partial, prefix, target, false);
        } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
          relayLines(partial, prefix, target, true);
          close(fds[i].fd);
          (isOut ? c.out : c.err) = -1;
        }
      }
    }

    signalfd_siginfo info;
    while (read(sigfd, &info, sizeof info) == ssize_t(sizeof info)) {
      if (info.ssi_signo == SIGINT || info.ssi_signo == SIGTERM) {
        ++interrupts;
        std::fprintf(stderr, "gyre-run: forwarding signal %u to the ranks%s\n", info.ssi_signo,
                     interrupts > 1 ? " (again: killing them)" : "");
        signalAll(interrupts > 1 ? SIGKILL : int(info.ssi_signo));
        if (result == 0) result = 128 + int(info.ssi_signo);
        if (killAt == Clock::time_point::max()) killAt = Clock::now() + o.grace * 2;
      }
    }
    // Ranks that fail because another died exit within milliseconds of it, often before
    // this loop looks: among those found in one pass, a rank killed by a signal is the cause
    // rather than the ranks that reported losing it.
    int failedNow = -1;
    for (auto& c : children) {
      if (c.exited) continue;
      int status = 0;
      if (waitpid(c.pid, &status, WNOHANG) != c.pid) continue;
      c.exited = true;
      c.status = status;
      if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        if (firstFailure < 0) c.endedBeforeFailure = true;
        continue;
      }
      const int index = int(&c - children.data());
      if (failedNow < 0 || (WIFSIGNALED(status) && !WIFSIGNALED(children[failedNow].status))) {
        failedNow = index;
      }
    }
    if (failedNow >= 0 && firstFailure < 0 && !WIFSIGNALED(children[failedNow].status) &&
        Clock::now() < pendingUntil) {
      if (pendingFailure < 0) {
        pendingFailure = failedNow;
        pendingUntil = Clock::now() + kCauseWindow;
      }
      failedNow = -1;
    }
    if (failedNow < 0 && pendingFailure >= 0 && firstFailure < 0 && Clock::now() >= pendingUntil) {
      // The window ended: a cause the pending rank named that still runs gets one longer wait.
      readCauses();
      const int cause = children[pendingFailure].cause - o.nodeRank * o.localRanks;
      if (!waitedForCause && cause >= 0 && cause < o.localRanks && !children[cause].exited) {
        pendingUntil = Clock::now() + kNamedCauseWait;
      } else {
        failedNow = pendingFailure;
      }
      waitedForCause = true;
    }
    if (failedNow >= 0 && firstFailure < 0) decide(failedNow);
  }
  if (firstFailure < 0 && pendingFailure >= 0) decide(pendingFailure);  // every rank ended
  close(sigfd);
  close(causePipe[0]);
  if (firstFailure >= 0) {
    // A rank that leaves while the others still need it fails them without failing: it
    // comes first.
    std::string early;
    for (const auto& c : children) {
      if (c.endedBeforeFailure) early += (early.empty() ? "" : ", ") + std::to_string(c.rank);
    }
    std::string summary = "gyre-run: job failed; ";
    if (!early.empty()) {
      summary += "rank" + std::string(early.find(',') == std::string::npos ? " " : "s ") + early +
                 " ended (exit code 0) while the others still ran, then ";
    }
    summary += "rank " + std::to_string(children[firstFailure].rank) + " failed first (" +
               describeStatus(children[firstFailure].status) + ")";
    for (auto& c : children) {
      if (&c - children.data() == firstFailure) continue;
      if (!(WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0)) {
        summary += "; rank " + std::to_string(c.rank) + ": " + describeStatus(c.status);
      }
    }
    std::fprintf(stderr, "%s\n", summary.c_str());
  }
  return result;
}

uint16_t freeLoopbackPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof addr;
  uint16_t port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &length) == 0) {
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  return port;
}

std::string signalName(int sig) {
  const char* name = sigabbrev_np(sig);
  std::string text = "SIG";  // built by append: GCC 12 warns falsely on "SIG" + name
  text.append(name ? name : "?");
  return text;
}

}  // namespace gyre::run
