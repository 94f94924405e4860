// One-shot collectives over a host window (link/mailbox.h), for small calls with every rank on
// one host: each rank posts its whole payload once into its own mailbox and reads what it
// needs straight from the others' (DeepSpeed's and vLLM's CPU all-reduce do the same). A call
// costs one post and n-1 reads instead of a chain of slots, and an 8-byte payload travels in
// the cache line of the flag that announces it.
//
// Every rank posts in every call (a broadcast's receivers post their arrival) and reads at
// least one other post, whose header it compares with its own call: ranks that disagree fail.
// Every rank reduces the posts in rank order, so all get the same bits. A rank posts its next
// call into the post it used two calls ago only once every rank has said (MailState::done)
// that it finished reading it; a rank that read this rank's newer post has said so implicitly.
#pragma once

#include <cstdint>
#include <vector>

#include "algorithms/host_prims.h"
#include "link/mailbox.h"

namespace gyre {

class OneShot {
 public:
  OneShot(MailboxWindow window, int rank);

  // Collectives it runs: all_reduce, broadcast, reduce, all_gather, reduce_scatter.
  static bool implements(Collective coll);
  // The payload this rank posts for `coll` of `count` elements (per rank for all_gather and
  // reduce_scatter, as the C API counts them) at `nranks`; what must fit in a post.
  static size_t postBytes(Collective coll, size_t count, size_t elemSize, int nranks);
  size_t capacity() const { return window_.capacity(); }

  // Runs ctx.desc (seq included) on this rank: every rank of the window must run the same
  // calls in the same order. Throws Failure naming the rank that failed or disagreed.
  void run(const OpContext& ctx, const void* send, void* recv);

  // Tells ranks waiting on this one that it failed with `s`: they stop now, naming it.
  void markFailed(const Status& s);
  // The same when this rank's communicator goes away (a no-op after a failure).
  void markLeft();

 private:
  const std::byte* awaitPost(const OpContext& ctx, int peer, uint32_t bytes);
  void post(const OpContext& ctx, const void* payload, uint32_t bytes);
  void finish(const OpContext& ctx);
  // Until `ready()`, or a failure, an abort or the deadline (each thrown as Failure); asleep
  // on `word` of `peer`'s mailbox, which changes whenever `ready()` may have.
  template <class Ready>
  void waitUntil(const OpContext& ctx, int peer, const char* what, Ready ready,
                 std::atomic<uint32_t>& word);

  MailboxWindow window_;
  int rank_;
  Mailbox self_;
  std::vector<Mailbox> boxes_;
  std::vector<uint64_t> knownDone_;      // per rank: the newest call it is known to have finished
  std::vector<const std::byte*> posts_;  // per rank: the payload a reduction reads
  uint64_t calls_ = 0;                   // calls so far: the post a call uses is calls_ % 2
  uint64_t lastUse_[2] = {0, 0};         // per post: the seq of the call that used it last
  uint64_t lastSeq_ = 0;                 // the seq of this rank's previous call
  int buffer_ = 0;                       // the post of the call running
};

}  // namespace gyre
