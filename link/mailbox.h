// A host window: memory that every rank of a communicator on one host maps, holding one
// mailbox per rank. A rank posts a small collective's whole payload once into its own mailbox;
// the others read it from there (algorithms/oneshot.h). kMailPosts posts per mailbox, used in
// turn, so a rank that needs nothing back (a broadcast's root) may run that many calls ahead of
// the slowest reader. Payloads too big to inline but small enough (Mailbox::smallBytes, 2 KiB
// at the default 64 KiB) go to the post's own piece of the data blocks, reused with the post;
// larger ones go to one of kMailData data blocks, used in turn (at a new place of it each time
// round where the call spreads its payloads: spreadOffset).
//
// A post's flag (the low 32 bits of the call's sequence number, written last), the call's
// header and payloads of up to kInlineBytes share one cache line: a tiny payload crosses from
// one core to another in the same transfer as the flag that announces it. Flags need no reset:
// each call has a sequence number of its own.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "base/wait.h"
#include "link/slot.h"

namespace gyre {

constexpr int kMailPosts = 64;
constexpr int kMailData = 2;

struct alignas(64) MailPost {
  static constexpr size_t kInlineBytes = 24;
  std::atomic<uint32_t> flag{0};  // the call this post holds (low 32 bits of its seq)
  uint32_t kind = 0;  // what the payload is: the call's data (0), or where a buffer lies (1)
  SlotMeta meta;      // the call and its payload's bytes, compared by every reader
  std::byte inlined[kInlineBytes];
};
static_assert(sizeof(MailPost) == 64, "a post's head is one cache line");

// What a rank tells the others about itself, each on a line of its own.
struct alignas(64) MailState {
  std::atomic<uint64_t> done{0};      // every call up to this seq is finished (and checked)
  std::atomic<uint32_t> sleepers{0};  // ranks asleep on this rank's words (futex)
  int32_t pid = 0;                    // the owner, for liveness checks
  std::atomic<uint32_t> finished{0};  // calls finished: a futex word that moves with `done`
  std::atomic<uint32_t> probe{0};     // the round-trip probe's ball (below)
  // The direct-read collectives (algorithms/oneshot.h): the seq of the last one whose reads
  // of other ranks' inputs and writes into their outputs this rank finished, and a futex word
  // that moves with it.
  std::atomic<uint64_t> readsDone{0};
  std::atomic<uint32_t> readsMoved{0};
  // The probes during calls (OneShot::remeasurePlacement): rank 0's latest round trip in ns (0:
  // not measured), and the last probe round whose figure this rank has read.
  std::atomic<uint32_t> probeNs{0};
  uint64_t pidAddress = 0;  // where `pid` lies in the owner's memory: a peer reads it at set-up
  std::atomic<uint32_t> probeSeen{0};
  // The window calls this rank has started, folded (OneShot::foldCall): the low 32 bits of the
  // newest one's seq (high half) and the fold of every one up to it (low half). A rank that
  // went on from calls compares it with its own fold at that seq instead of reading each of
  // the other's posts of those calls.
  std::atomic<uint64_t> calls{0};
};
static_assert(sizeof(MailState) == 64, "a rank's state is one cache line");

// The measured choice's trial times (runtime/core/measured_choice.h, OneShot::shareTrials):
// each rank writes its own, then the round; it writes the next round's only once every other
// rank has said (`seen`) it read these.
struct alignas(64) MailTrials {
  static constexpr size_t kTimes = 100;
  std::atomic<uint32_t> round{0};  // the last round whose times `ns` holds
  std::atomic<uint32_t> seen{0};   // the last round whose times this rank read from every other
  uint32_t count = 0;              // how many of `ns` that round wrote
  uint64_t ns[kTimes] = {};
};

// Reads `bytes` at `address` of process `pid` into `into` through the kernel
// (process_vm_readv); "" or why not.
std::string readPeerMemory(int pid, void* into, uint64_t address, size_t bytes);
// Writes `bytes` from `from` to `address` of process `pid` (process_vm_writev: the kernel asks
// for the same permission as for reading); "" or why not.
std::string writePeerMemory(int pid, uint64_t address, const void* from, size_t bytes);
// The kernel's verdict (base/copy_bytes.h: StallVerdict): whether process_vm_readv of this
// process's own memory stalls at a short distance; where the kernel refuses, yes (the safe
// path). readPeerMemory and writePeerMemory bounce near moves only where it stalls.
bool kernelCopyStallsNearby();
void overrideKernelCopyStall(std::optional<bool> stalls);
// A copy through the kernel (process_vm_readv, what the shm single copy and the direct reads
// use) on this core: 1 MiB of this process's own memory, the fastest of a few (about a
// millisecond in all), in microseconds and as a multiple of a memcpy's time; zeros where the
// kernel refuses.
struct KernelCopy {
  double ratio = 0;
  double microseconds = 0;
};
KernelCopy measureKernelCopy();
// Whether this process may read and write `peer`'s memory: its `pid`, read where its owner
// says it lies, is the one the window shows, and writes back. "" or why not.
std::string checkReadsPeer(const MailState& peer);
struct alignas(64) MailFailure {
  std::atomic<uint32_t> code{0};  // non-zero (a gyre Code): this rank failed; message is set
  int32_t lostRank = -1;
  char message[248] = {};
};

// How far apart two ranks' CPUs sit: a cache line's round trip between them, bounced through
// their probe words at set-up, before any call (the probes during calls:
// OneShot::remeasurePlacement). `measureRoundTrip` (one side) returns the fastest batch's mean
// round trip in ns, or 0 where the partner did not answer within `wait` (it may have failed to
// map the window); `answerRoundTrips` (the other) echoes until the measuring side is done or
// `wait` has passed.
double measureRoundTrip(MailState& self, const MailState& partner, Clock::duration wait);
void answerRoundTrips(MailState& self, const MailState& partner, Clock::duration wait);

// One rank's mailbox, as a view into the window.
struct Mailbox {
  MailPost* posts = nullptr;  // [kMailPosts]
  MailState* state = nullptr;
  MailFailure* failure = nullptr;
  MailTrials* trials = nullptr;
  // Each `blockSpan` bytes (a whole post or more), for payloads too big to inline; a post that
  // fills it starts at 0, a smaller one where its header's offset says (spreadOffset).
  std::byte* data[kMailData] = {};
  size_t blockSpan = 0;
  // The data blocks also hold one small payload per post: kSmallPerBlock pieces of smallBytes
  // (capacity * kMailData / kMailPosts, down to a cache line; 0 where that is not more than
  // a post inlines), so a poster of small payloads runs as far ahead as of inlined ones.
  static constexpr int kSmallPerBlock = kMailPosts / kMailData;
  static_assert(kMailPosts % kMailData == 0, "every data block holds as many small payloads");
  size_t smallBytes = 0;
  // Where post `post`'s small payload lies, and the data block that holds it.
  static int smallBlock(int post) { return post / kSmallPerBlock; }
  std::byte* small(int post) const {
    return data[smallBlock(post)] + size_t(post % kSmallPerBlock) * smallBytes;
  }
};

// A view of a mapped window: a header line, then each rank's mailbox.
class MailboxWindow {
 public:
  // The bytes a window of `nranks` mailboxes, each post holding up to `capacity` bytes, takes.
  static size_t bytesFor(int nranks, size_t capacity);
  // The largest payload a post keeps in its own piece of the data blocks (Mailbox::smallBytes).
  static size_t smallBytesFor(size_t capacity);

  MailboxWindow() = default;
  // Over mapped memory of bytesFor(nranks, capacity): `format` writes the header (the creator,
  // on zeroed memory); otherwise the header must match, else Failure(invalid_usage).
  MailboxWindow(void* base, int nranks, size_t capacity, bool format);

  int nranks() const { return nranks_; }
  size_t capacity() const { return capacity_; }
  Mailbox mailbox(int rank) const;

  // Whether `rank`'s process has exited (or was never recorded): checked by stuck waiters.
  bool ownerExited(int rank) const;

 private:
  std::byte* base_ = nullptr;
  int nranks_ = 0;
  size_t capacity_ = 0;
  size_t perRank_ = 0;
  size_t blockSpan_ = 0;
};

}  // namespace gyre
