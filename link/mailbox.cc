#include "link/mailbox.h"

#include <signal.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "base/copy_bytes.h"
#include "base/status.h"

namespace gyre {

namespace {

constexpr size_t align64(size_t n) {
  return (n + 63) / 64 * 64;
}

struct alignas(64) WindowHeader {
  char magic[8];
  uint32_t nranks;
  uint32_t reserved;
  uint64_t capacity;
};
// The last character is the layout's version, moved on with every change to it (9: each
// mailbox's MailTrials), so a rank of another build fails to map the window instead of
// reading its mailboxes at the wrong places.
constexpr char kMagic[8] = {'G', 'Y', 'R', 'E', 'M', 'B', 'X', '9'};

// A data block holds a whole post and, for spreading (spreadOffset), room to move smaller
// ones about: 512 KiB a block where that is no more than 2 MiB a block over all ranks (up to 4
// ranks at the default 64 KiB; 256 KiB at 8, one post from 32 ranks), so the window's data
// stays within 4 MiB.
size_t blockSpanFor(int nranks, size_t capacity) {
  const size_t post = align64(capacity);
  const size_t room = std::min<size_t>(512 << 10, (size_t(2) << 20) / size_t(std::max(nranks, 1)));
  return std::max<size_t>(1, room / post) * post;
}

size_t perRankBytes(int nranks, size_t capacity) {
  return kMailPosts * sizeof(MailPost) + sizeof(MailState) + sizeof(MailFailure) +
         sizeof(MailTrials) + kMailData * blockSpanFor(nranks, capacity);
}

constexpr uint32_t kProbeDone = 0xffffffff;
// 8 batches of 250 round trips: about 0.2 ms where the CPUs are close, 1 ms far apart. The
// fastest batch is kept: the first also waits for the partner to arrive, and any batch may
// lose the CPU for a while.
constexpr int kProbeBatches = 8;
constexpr uint32_t kProbeTrips = 250;
// Spins between looks at the clock, which would otherwise add its own cost to every trip. (Not
// pollFor: its pause between looks would add to the round trip measured.)
constexpr uint32_t kSpinsPerClockLook = 1024;

// Until `word` holds `value` (or kProbeDone): what it holds, or 0 (never a ball) once `until`
// has passed.
uint32_t awaitBall(const std::atomic<uint32_t>& word, uint32_t value, Clock::time_point until) {
  for (uint32_t spins = 1;; ++spins) {
    const uint32_t v = word.load(std::memory_order_acquire);
    if (v == value || v == kProbeDone) return v;
    if (spins % kSpinsPerClockLook == 0 && Clock::now() >= until) return 0;
  }
}

}  // namespace

namespace {
// process_vm_readv (reading `remote` into `local`) or process_vm_writev, until every byte moved.
std::string moveDirect(int pid, std::byte* local, uint64_t remote, size_t bytes, bool read) {
  size_t done = 0;
  while (done < bytes) {
    iovec mine{local + done, bytes - done};
    iovec theirs{reinterpret_cast<void*>(remote + done), bytes - done};
    const ssize_t n = read ? process_vm_readv(pid, &mine, 1, &theirs, 1, 0)
                           : process_vm_writev(pid, &mine, 1, &theirs, 1, 0);
    const char* call = read ? "process_vm_readv" : "process_vm_writev";
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::string(call) + ": " + std::strerror(errno);
    if (n == 0) return std::string(call) + " moved nothing";
    done += size_t(n);
  }
  return {};
}

// The kernel copies with `rep movsb`, slow on some CPUs where the destination lies just past the
// source modulo 4 KiB (base/copy_bytes.h). There such moves go through this thread's bounce
// buffer at the remote side's offset within a page, and a vector copy does the local part. The
// bounce costs a user-space copy, about a fifth of the kernel's at its pace, so it is kept to the
// distances measured slow (AMD Zen 3, 32 KiB at 8-24 bytes: 14-22 us against 4 through the
// bounce) and to CPUs where the kernel's copy stalls (kernelCopyStallsNearby).
constexpr size_t kBouncePiece = size_t(64) << 10;
constexpr size_t kBounceFrom = 2048;
constexpr uintptr_t kKernelStallWithin = 32;

StallVerdict kernelCopy([](void* dst, const void* src, size_t bytes) {
  return moveDirect(int(getpid()), static_cast<std::byte*>(dst), reinterpret_cast<uint64_t>(src),
                    bytes, true)
      .empty();
});

std::string movePeerMemory(int pid, std::byte* local, uint64_t remote, size_t bytes, bool read) {
  const auto* remotePtr = reinterpret_cast<const void*>(remote);
  const bool slow = read ? shortCopyDistance(local, remotePtr, kKernelStallWithin)
                         : shortCopyDistance(remotePtr, local, kKernelStallWithin);
  if (bytes < kBounceFrom || !slow || !kernelCopyStallsNearby())
    return moveDirect(pid, local, remote, bytes, read);
  thread_local std::unique_ptr<std::byte[]> bounce;
  if (!bounce) bounce.reset(new std::byte[kBouncePiece + 2 * 4096]);
  auto* base = reinterpret_cast<std::byte*>((reinterpret_cast<uintptr_t>(bounce.get()) + 4095) &
                                            ~uintptr_t(4095));
  for (size_t done = 0; done < bytes; done += kBouncePiece) {
    const size_t k = std::min(kBouncePiece, bytes - done);
    std::byte* at = base + ((remote + done) & 4095);
    if (read) {
      if (std::string error = moveDirect(pid, at, remote + done, k, true); !error.empty())
        return error;
      copyBytes(local + done, at, k);
    } else {
      copyBytes(at, local + done, k);
      if (std::string error = moveDirect(pid, at, remote + done, k, false); !error.empty())
        return error;
    }
  }
  return {};
}
}  // namespace

bool kernelCopyStallsNearby() {
  return kernelCopy.stalls();
}

void overrideKernelCopyStall(std::optional<bool> stalls) {
  kernelCopy.override(stalls);
}

std::string readPeerMemory(int pid, void* into, uint64_t address, size_t bytes) {
  return movePeerMemory(pid, static_cast<std::byte*>(into), address, bytes, true);
}

std::string writePeerMemory(int pid, uint64_t address, const void* from, size_t bytes) {
  // process_vm_writev only reads the local side.
  auto* local = const_cast<std::byte*>(static_cast<const std::byte*>(from));
  return movePeerMemory(pid, local, address, bytes, false);
}

KernelCopy measureKernelCopy() {
  constexpr size_t kBytes = size_t(1) << 20;
  constexpr int kTries = 6;
  // Page-aligned and apart, so neither copy meets the short-distance stall (base/copy_bytes.h).
  std::vector<std::byte> buffer(2 * kBytes + 8192);
  auto* from = reinterpret_cast<std::byte*>((reinterpret_cast<uintptr_t>(buffer.data()) + 4095) &
                                            ~uintptr_t(4095));
  std::byte* to = from + kBytes + 4096;
  std::memset(from, 1, kBytes);
  std::memset(to, 2, kBytes);
  auto best = Clock::duration::max(), bestKernel = Clock::duration::max();
  for (int i = 0; i < kTries; ++i) {
    const auto t0 = Clock::now();
    copyBytes(to, from, kBytes);
    const auto t1 = Clock::now();
    if (!moveDirect(int(getpid()), to, reinterpret_cast<uint64_t>(from), kBytes, true).empty())
      return {};
    const auto t2 = Clock::now();
    best = std::min(best, t1 - t0);
    bestKernel = std::min(bestKernel, t2 - t1);
  }
  if (best.count() <= 0) return {};
  return {double(bestKernel.count()) / double(best.count()),
          std::chrono::duration<double, std::micro>(bestKernel).count()};
}

std::string checkReadsPeer(const MailState& peer) {
  int32_t pid = 0;
  std::string error = readPeerMemory(peer.pid, &pid, peer.pidAddress, sizeof pid);
  if (error.empty() && pid != peer.pid) error = "read " + std::to_string(pid) + ", not its pid";
  // Writing it back unchanged: the direct reads write into the others' outputs too.
  if (error.empty()) error = writePeerMemory(peer.pid, peer.pidAddress, &pid, sizeof pid);
  return error;
}

double measureRoundTrip(MailState& self, const MailState& partner, Clock::duration wait) {
  const auto until = Clock::now() + wait;
  uint32_t ball = 0;
  double fastest = 0;
  for (int b = 0; b < kProbeBatches; ++b) {
    const auto start = Clock::now();
    for (uint32_t i = 0; i < kProbeTrips; ++i) {
      self.probe.store(++ball, std::memory_order_release);
      if (awaitBall(partner.probe, ball, until) == 0) {
        self.probe.store(kProbeDone, std::memory_order_release);
        return 0;
      }
    }
    const double ns = std::chrono::duration<double, std::nano>(Clock::now() - start).count() /
                      double(kProbeTrips);
    if (b == 0 || ns < fastest) fastest = ns;
  }
  self.probe.store(kProbeDone, std::memory_order_release);
  return fastest;
}

void answerRoundTrips(MailState& self, const MailState& partner, Clock::duration wait) {
  // One deadline for all: a look at the clock per ball would lengthen every trip measured.
  const auto until = Clock::now() + wait;
  uint32_t ball = 0;
  while (true) {
    const uint32_t v = awaitBall(partner.probe, ball + 1, until);
    if (v == 0 || v == kProbeDone) return;
    ball = v;
    self.probe.store(ball, std::memory_order_release);
  }
}

size_t MailboxWindow::bytesFor(int nranks, size_t capacity) {
  return sizeof(WindowHeader) + size_t(nranks) * perRankBytes(nranks, capacity);
}

size_t MailboxWindow::smallBytesFor(size_t capacity) {
  const size_t small = align64(capacity) / Mailbox::kSmallPerBlock / 64 * 64;
  return small > MailPost::kInlineBytes ? small : 0;
}

MailboxWindow::MailboxWindow(void* base, int nranks, size_t capacity, bool format)
    : base_(static_cast<std::byte*>(base)),
      nranks_(nranks),
      capacity_(capacity),
      perRank_(perRankBytes(nranks, capacity)),
      blockSpan_(blockSpanFor(nranks, capacity)) {
  auto* header = std::launder(reinterpret_cast<WindowHeader*>(base_));
  if (format) {
    std::memcpy(header->magic, kMagic, sizeof kMagic);
    header->nranks = uint32_t(nranks);
    header->capacity = capacity;
    return;
  }
  if (std::memcmp(header->magic, kMagic, sizeof kMagic) != 0 ||
      header->nranks != uint32_t(nranks) || header->capacity != capacity) {
    fail(Code::invalid_usage, "the host window's header does not match this communicator (" +
                                  std::to_string(header->nranks) + " ranks, " +
                                  std::to_string(header->capacity) + " bytes per post)");
  }
}

Mailbox MailboxWindow::mailbox(int rank) const {
  std::byte* at = base_ + sizeof(WindowHeader) + size_t(rank) * perRank_;
  // The file starts zeroed, and zero is every field's initial value: a view, no constructor.
  Mailbox m;
  m.posts = std::launder(reinterpret_cast<MailPost*>(at));
  at += kMailPosts * sizeof(MailPost);
  m.state = std::launder(reinterpret_cast<MailState*>(at));
  at += sizeof(MailState);
  m.failure = std::launder(reinterpret_cast<MailFailure*>(at));
  at += sizeof(MailFailure);
  m.trials = std::launder(reinterpret_cast<MailTrials*>(at));
  at += sizeof(MailTrials);
  for (int b = 0; b < kMailData; ++b) m.data[b] = at + size_t(b) * blockSpan_;
  m.blockSpan = blockSpan_;
  m.smallBytes = smallBytesFor(capacity_);
  return m;
}

bool MailboxWindow::ownerExited(int rank) const {
  const int pid = mailbox(rank).state->pid;
  if (pid <= 0) return false;  // not recorded yet: the agreement round waits for that
  if (kill(pid, 0) != 0 && errno == ESRCH) return true;
  // A killed process stays a zombie until its parent reaps it; it will never post again.
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  const auto close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() &&
         (line[close + 2] == 'Z' || line[close + 2] == 'X');
}

}  // namespace gyre
