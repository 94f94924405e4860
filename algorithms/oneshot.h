// One-shot collectives over a host window (link/mailbox.h), for small calls with every rank on
// one host: each rank posts its whole payload once into its own mailbox and reads what it
// needs straight from the others' (DeepSpeed's and vLLM's CPU all-reduce do the same). A call
// costs one post and n-1 reads instead of a chain of slots, and an 8-byte payload travels in
// the cache line of the flag that announces it.
//
// Every rank posts in every call (where nobody reads its input, its arrival: a broadcast's or a
// scatter's receivers, a reduce's or a gather's root) and compares the header of every post it
// reads with its own call: ranks that disagree fail. Ranks that need nothing back (a
// broadcast's or a scatter's root, a reduce's or a gather's non-roots) post and go on, as a
// slot's sender does, and may run up to kMailPosts calls ahead; they check the posts they did
// not wait for (the receivers' and the root's arrivals, the root's post) during their next
// calls on the window, as soon as those are there and for certain by the end of a call that
// read those ranks' later posts, so a disagreement only they could see fails one of their next
// calls. Every rank reduces the posts in rank order, so all get the same bits. A rank reuses a
// post (or a data block) only once every rank has said (MailState::done) that it finished every
// call up to the one that used it last, and a rank says so for a call it went on from only once
// it has checked it.
#pragma once

#include <cstdint>
#include <vector>

#include "algorithms/host_prims.h"
#include "base/function_ref.h"
#include "base/prefetch.h"
#include "link/mailbox.h"

namespace gyre {

class OneShot {
 public:
  OneShot(MailboxWindow window, int rank);

  // Collectives it runs: all_reduce, broadcast, reduce, all_gather, reduce_scatter, gather,
  // scatter, all_to_all.
  static bool implements(Collective coll);
  // The payload this rank posts for `coll` of `count` elements (per rank for all_gather,
  // reduce_scatter, gather, scatter and all_to_all, as the C API counts them) at `nranks`: the
  // whole input for reduce_scatter, scatter (the root's) and all_to_all; what must fit in a post.
  static size_t postBytes(Collective coll, size_t count, size_t elemSize, int nranks);
  size_t capacity() const { return window_.capacity(); }

  // Runs ctx.desc (seq included) on this rank: every rank of the window must run the same
  // calls in the same order. Throws Failure naming the rank that failed or disagreed.
  void run(const OpContext& ctx, const void* send, void* recv);

  // The direct-read collectives (algorithms/oneshot_read.cc): every rank posts where its input
  // and output lie, and the ranks read and write each other's buffers there through the kernel
  // (process_vm_readv, process_vm_writev), one copy with no slots, so no line of the data is
  // written by one CPU and read by another within the call: the pace does not depend on how far
  // apart the CPUs sit, where a copy through slots or posts slows down several times.
  // All-reduce: rank r reads share r of every other input in pieces that stay in its cache,
  // reduces it in rank order and writes it into every other output, so all get the same bits
  // and only rank r touches share r of any buffer (in place too); reduce: the same, written
  // into the root's output alone; reduce-scatter: block r of every input reduced into rank r's
  // output, nothing written into another rank's. All-gather: every rank reads
  // each other's block straight into its place; all-to-all: its own block of each other's
  // input (never in place). Broadcast: the root writes the first of n
  // shares into every other rank's buffer while they read the rest from its own. Gather and
  // scatter: every other rank writes its block into the root's output, or reads its block of
  // the root's input, while the root copies its own. A rank returns
  // once the others have read its input and written its output. Only after enableDirectRead()
  // (every rank may read and write every other's memory).
  void runDirectRead(const OpContext& ctx, const void* send, void* recv);
  void enableDirectRead() { directRead_ = true; }
  // Whether payloads that fill a data block (and small ones from 1.5 KiB) are written with
  // streaming stores, as the slots are where the placement probe finds the CPUs far apart
  // (OpContext::streamSlots).
  void streamBlocks(bool on) { streamBlocks_ = on; }
  // Whether a rank prefetches at the end of each call what its next calls touch that the
  // others' CPUs hold, as where the placement probe finds the CPUs far apart: its next post's
  // lines for writing, whose copies from the readers' reads a lap before take a crossing to
  // drop, which the store into the post would otherwise wait for with every store behind it
  // (a rooted call of 8 B 0.12 µs against 0.18; close by no faster, and a reduce of 8 B
  // slower), and before a check of deferred calls the fold words it reads
  // (docs/perf/small_calls.md).
  void prefetchFarApart(bool on) { prefetchFar_ = on && canPrefetchForWrite(); }
  bool prefetchesFarApart() const { return prefetchFar_; }
  // Wakes a rank asleep on this one's words without a fence in every post and every done
  // (base/wait.h: WakeOrder::sleeperBarrier): only once every rank of the window registered
  // for the sleepers' barriers, which every rank's waits then use.
  void useSleeperBarriers() { wakeOrder_ = WakeOrder::sleeperBarrier; }
  bool usesSleeperBarriers() const { return wakeOrder_ == WakeOrder::sleeperBarrier; }
  uint64_t directReads() const { return directReads_; }
  uint64_t calls() const { return calls_; }  // every call run, the direct reads included

  // Measures again (algorithms/oneshot_probe.cc) how far apart the CPUs of rank 0 and `partner`
  // sit, within the call ctx names; every rank of the window calls it at the same calls. The
  // partner echoes balls rank 0 sets in its probe word (link/mailbox.h), rank 0 times them (the
  // fastest of a few batches' mean round trip) and posts the figure, and every rank returns rank
  // 0's figure in ns: 0 where the trips did not come back at a cache line's pace (a rank taken
  // off its CPU), so nothing was measured. Rank 0 starts a round once every rank has read the
  // one before.
  uint32_t remeasurePlacement(const OpContext& ctx, int partner);

  // Every rank's trial times of the measured choice (runtime/core/measured_choice.h): rank r's
  // `mine` at r * mine.size() of the result, within the call ctx names. Every rank of the
  // window calls it at the same calls; a rank whose count differs fails the call, naming it.
  // algorithms/oneshot_trials.cc.
  std::vector<uint64_t> shareTrials(const OpContext& ctx, const std::vector<uint64_t>& mine);

  // Tells ranks waiting on this one that it failed with `s`: they stop now, naming it.
  void markFailed(const Status& s);
  // The same when this rank's communicator goes away (a no-op after a failure).
  void markLeft();

 private:
  // A call this rank went on from without reading the posts that would show a disagreement.
  struct Unchecked {
    OpDesc call;
    int post = 0;
    int peer = -1;       // the one post to check (a reduce's root), or -1: every other rank's
    uint32_t bytes = 0;  // the payload that post must announce
    // The ranks whose posts it needs: the root's, or every rank's (this one's is skipped).
    int firstPeer() const { return peer >= 0 ? peer : 0; }
    int lastPeer(int nranks) const { return peer >= 0 ? peer : nranks - 1; }
  };

  // Waits for `peer`'s post of `call` in post `slot` and checks its header, `late` when `call`
  // is an earlier one than ctx's (a deferred check); returns where its payload is.
  // `kind`: what the post must be (kWindowPost, or kDirectReadPost: where buffers lie).
  const std::byte* awaitPost(const OpContext& ctx, const OpDesc& call, int slot, int peer,
                             uint32_t bytes, bool late = false, uint32_t kind = kWindowPost);
  const std::byte* awaitPost(const OpContext& ctx, int peer, uint32_t bytes) {
    return awaitPost(ctx, ctx.desc, post_, peer, bytes);
  }
  void post(const OpContext& ctx, const void* payload, uint32_t bytes, uint32_t kind = kWindowPost);
  // Where a payload of `bytes` lies (link/mailbox.h): inlined in the post, in the post's small
  // piece of the data blocks, or filling the call's data block; the seq of the last call whose
  // post or data this call's overwrites; where in `box` the payload of post `slot` lies (the
  // data block: this call's); prefetches `box`'s post (and small payload) kPrefetchCalls after
  // `slot` for reading; prefetches for this rank's next calls (prefetchFarApart): its next post
  // (and its small piece, as much as this call's post filled) for writing.
  enum class Payload { inlined, small, block };
  Payload payloadKind(uint32_t bytes) const;
  uint64_t reuses(Payload where) const;
  std::byte* payloadIn(const Mailbox& box, int slot, Payload where) const;
  void prefetchAhead(const Mailbox& box, int slot, Payload where, uint32_t bytes) const;
  void prefetchForNextCalls() const;
  // The direct read's parts: posts where this rank's input and output lie and learns where
  // `peer`'s lie (-1: every other rank's) into peerInputs_ and peerOutputs_; the all-reduce
  // (root -1) and the reduce; the reduce-scatter;
  // reads `bytes` at `address` of `peer`'s memory (or writes them there), naming it on
  // failure; says this rank finished its reads and writes of call `seq`; waits until `peer`
  // has; says so for this call and waits until `peer` (-1: every other rank) has too.
  void exchangeBuffers(const OpContext& ctx, const void* input, const void* output, int peer);
  // exchangeBuffers' halves: this rank's post, then the others' (or `peer`'s alone).
  void postBuffers(const OpContext& ctx, const void* input, const void* output);
  void awaitBuffers(const OpContext& ctx, int peer);
  void readReduce(const OpContext& ctx, const std::byte* in, std::byte* out, int root);
  void readReduceScatter(const OpContext& ctx, const std::byte* in, std::byte* out);
  // The reductions' pieces: sizes scratch_ for n inputs' pieces and `extra` more, returns a
  // piece's bytes; reads `k` bytes at `offset` of every other rank's input into scratch_ and
  // reduces them with `own` in rank order into `sum` (`inPlace`: `sum` is where `own` lies).
  size_t preparePieces(size_t es, int extra);
  void reducePiece(const OpContext& ctx, size_t piece, size_t offset, const std::byte* own,
                   std::byte* sum, size_t k, bool inPlace);
  void readPeer(const OpContext& ctx, int peer, std::byte* into, uint64_t address, size_t bytes) {
    accessPeer(ctx, peer, into, address, bytes, /*read=*/true);
  }
  void writePeer(const OpContext& ctx, int peer, uint64_t address, const std::byte* from,
                 size_t bytes) {
    accessPeer(ctx, peer, const_cast<std::byte*>(from), address, bytes, /*read=*/false);
  }
  void accessPeer(const OpContext& ctx, int peer, std::byte* local, uint64_t address, size_t bytes,
                  bool read);
  void publishReads(uint64_t seq);
  void awaitReads(const OpContext& ctx, int peer, uint64_t seq);
  void finishReads(const OpContext& ctx, int peer);
  // Waits until the others (or `peer` alone, when not negative) have published this call's.
  void awaitPeerReads(const OpContext& ctx, int peer);
  // Checks the calls this rank went on from, oldest first: waits for those up to seq `through`,
  // and, with `probe`, checks later ones every rank they need has started. A rank's part passes
  // on its fold of the calls run (foldsAgree), else on its post.
  void checkUnchecked(const OpContext& ctx, uint64_t through, bool probe);
  // Folds the call into this rank's fold of its window calls and publishes it (MailState::calls):
  // what every rank must agree on, the same whatever its role (`bytes`: the call's, not the
  // post's).
  void foldCall(const OpDesc& d, uint32_t bytes, uint32_t kind);
  // Whether `peer`'s published fold shows it started every call up to `seq` as this rank ran
  // them (so that call's post needs no reading); false where it does not tell (the peer is
  // behind or ahead of this rank's folds kept, or the folds differ: the posts then tell).
  bool foldsAgree(int peer, uint64_t seq);
  void defer(const OpContext& ctx, const Unchecked& u);
  // Says this rank finished every call before the oldest unchecked one (or all it ran).
  void publishDone();
  // Until `ready()`, or a failure, an abort or the deadline (each thrown as Failure); asleep
  // on `word` of `peer`'s mailbox, which changes whenever `ready()` may have. The busy phase
  // inline, the rest out of line: a tiny call's waits end within a few polls.
  template <class Ready>
  void waitUntil(const OpContext& ctx, int peer, const char* what, Ready ready,
                 std::atomic<uint32_t>& word) {
    if (!pollFor(ctx.busy, ready)) waitAsleep(ctx, peer, what, ready, word);
  }
  void waitAsleep(const OpContext& ctx, int peer, const char* what, FunctionRef<bool()> ready,
                  std::atomic<uint32_t>& word);
  // Fails the call: `peer`'s post `p` does not match `call` (awaitPost's arguments).
  [[noreturn]] void failDisagreement(const OpContext& ctx, const OpDesc& call, int peer,
                                     const MailPost& p, uint32_t bytes, bool late,
                                     uint32_t kind) const;

  static std::string who(const OpContext& ctx);  // "rank R: <the call>", for messages
  static constexpr uint32_t kWindowPost = 0, kDirectReadPost = 1;
  // A direct-read post: the addresses of the poster's input and output.
  static constexpr uint32_t kBufferPostBytes = 2 * sizeof(uint64_t);

  MailboxWindow window_;
  int rank_;
  bool directRead_ = false;
  bool streamBlocks_ = false;
  WakeOrder wakeOrder_ = WakeOrder::notifierFence;
  uint64_t directReads_ = 0;           // calls run by runDirectRead
  uint32_t probeRound_ = 0;            // remeasurePlacement calls so far
  uint32_t trialRound_ = 0;            // shareTrials calls so far
  std::vector<uint64_t> peerInputs_;   // the direct read: where each rank's input lies
  std::vector<uint64_t> peerOutputs_;  // and its output
  std::vector<std::byte> scratch_;     // readReduce: the pieces read, its sum
  Mailbox self_;
  std::vector<Mailbox> boxes_;
  std::vector<uint64_t> knownDone_;      // per rank: the newest call it is known to have finished
  std::vector<const std::byte*> posts_;  // per rank: the payload a reduction reads
  uint64_t calls_ = 0;                   // calls so far: a call uses post calls_ % kMailPosts
  uint64_t postUse_[kMailPosts] = {};    // per post: the seq of the call that used it last
  uint64_t dataUse_[kMailData] = {};     // per data block: the seq of the call that wrote it last
  uint64_t blockUse_[kMailData] = {};    // and of the last that filled it (not a small payload)
  uint64_t lastSeq_ = 0;                 // the seq of this rank's previous call
  // foldCall: the fold so far, and as published after each of the last kFoldsKept calls.
  static constexpr int kFoldsKept = 2 * kMailPosts;
  uint64_t fold_ = 0;
  uint64_t foldAt_[kFoldsKept] = {};
  std::vector<uint64_t> agreedThrough_;  // per rank: the newest call its fold matched at
  uint64_t published_ = 0;               // the done this rank published last
  int post_ = 0;                         // the post of the call running
  int block_ = 0;                        // its data block
  // The calls this rank went on from, oldest first: at most kMailPosts (a call first checks
  // every older one whose post it reuses), and one slot to spare.
  struct UncheckedRing {
    Unchecked items[kMailPosts + 1];
    int head = 0, size = 0;
    bool empty() const { return size == 0; }
    const Unchecked& front() const { return items[head]; }
    void pop_front() { head = (head + 1) % (kMailPosts + 1), --size; }
    bool push_back(const Unchecked& u) {
      if (size == kMailPosts + 1) return false;
      items[(head + size++) % (kMailPosts + 1)] = u;
      return true;
    }
  } unchecked_;
  bool checking_ = false;  // inside checkUnchecked (its waits call it no further)
  bool prefetchFar_ = false;
  // What this call's post held, which its next post is taken to hold too.
  struct Posted {
    Payload where = Payload::inlined;
    uint32_t bytes = 0;
  } posted_;
};

}  // namespace gyre
