#include "algorithms/oneshot.h"

#include <algorithm>
#include <cstring>
#include <sstream>

#include "algorithms/oneshot_layout.h"
#include "base/copy_bytes.h"
#include "base/prefetch.h"
#include "kernels/cpu/reduce.h"

namespace gyre {

namespace {
// How many calls ahead a rank prefetches the lines it will read (a peer's post and small
// payload, where its post was there at the first look, so the peer runs ahead): the transfers
// of a few calls overlap instead of each stalling its own call.
constexpr int kPrefetchCalls = 4;
// Where blocks are streamed (far apart), so is a small payload from this size: n = 2, far, a
// broadcast of 2 KiB took 0.51 µs streamed against 1.09 cached, an all-gather of 2 KiB a rank
// 0.97 against 1.54; at 1 KiB streaming lost (a broadcast 0.47 against 0.31), at 1.25 KiB the
// two were level (docs/perf/small_calls.md).
constexpr uint32_t kStreamSmallFrom = 1536;
// A rank that goes on from its calls checks the posts it did not wait for at least this often,
// where they are there, not only when it reuses the post 64 calls on: its done word then
// follows the others closely and lets them reuse their posts without waiting on it. Each check
// reads a line the others write every call (their fold word): every 16 calls took a rooted call
// of 8 B far apart 0.12 µs, every 32 0.11, close by level (docs/perf/small_calls.md).
constexpr uint64_t kCheckEvery = 32;
// A rank waiting for another's done word checks its own calls left unchecked (whose posts have
// come) at every look where ranks share cores, else every this many looks: the other may wait
// for this rank's done word in turn, and without the checks both move only at their next calls.
constexpr uint32_t kCheckWhileWaiting = 32;
constexpr Clock::duration kFirstPeerCheck = std::chrono::seconds(1);
constexpr Clock::duration kLastPeerCheck = std::chrono::seconds(16);
// A stuck waiter looks at the process it waits for this often (a kill(0) and, for a zombie,
// a read of /proc): a killed rank is named within this, not at the deadline.
constexpr Clock::duration kLivenessCheck = std::chrono::milliseconds(20);

}  // namespace

std::string OneShot::who(const OpContext& ctx) {
  return "rank " + std::to_string(ctx.rank) + ": " + describeOp(ctx.desc);
}

OneShot::OneShot(MailboxWindow window, int rank)
    : window_(window),
      rank_(rank),
      knownDone_(size_t(window.nranks()), 0),
      posts_(size_t(window.nranks()), nullptr) {
  for (int r = 0; r < window_.nranks(); ++r) boxes_.push_back(window_.mailbox(r));
  agreedThrough_.assign(size_t(window_.nranks()), 0);
  self_ = boxes_[size_t(rank)];
}

bool OneShot::implements(Collective coll) {
  return coll == Collective::all_reduce || coll == Collective::broadcast ||
         coll == Collective::reduce || coll == Collective::all_gather ||
         coll == Collective::reduce_scatter || coll == Collective::gather ||
         coll == Collective::scatter || coll == Collective::all_to_all;
}

size_t OneShot::postBytes(Collective coll, size_t count, size_t elemSize, int nranks) {
  const bool whole = coll == Collective::reduce_scatter || coll == Collective::scatter ||
                     coll == Collective::all_to_all;
  return whole ? count * elemSize * size_t(nranks) : count * elemSize;
}

void OneShot::run(const OpContext& ctx, const void* send, void* recv) {
  const OpDesc& d = ctx.desc;
  const int n = window_.nranks();
  const size_t es = dataTypeSize(d.dtype);
  const auto bytes = uint32_t(postBytes(d.coll, d.count, es, n));
  auto* out = static_cast<std::byte*>(recv);
  post_ = int(calls_ % kMailPosts);
  block_ = int(calls_ % kMailData);
  foldCall(d, bytes, kWindowPost);
  // Checks the calls it went on from whose post (or data) this call overwrites: the others may
  // wait for this rank to have finished those.
  // Every kCheckEvery calls it also checks the later ones every rank they need has started.
  // Most calls have neither to do and skip checkUnchecked: its frame's stores count on a tiny
  // call's path (docs/perf/small_calls.md).
  if (!unchecked_.empty()) {
    const uint32_t mine = postLayout(d.coll, bytes, rank_, d.root, n).bytes;
    const uint64_t through = reuses(payloadKind(mine));
    const bool probe = calls_ % kCheckEvery == 0;
    if (probe || unchecked_.front().call.seq <= through) checkUnchecked(ctx, through, probe);
  }
  bool checked = true;  // whether this rank read every post that shows a disagreement
  // Reduces `count` elements at offset `at` of every rank's input, in rank order, into out,
  // from the posts (a reduce-scatter's without some posters' own blocks: reduceScatterPost).
  auto reduceAll = [&](size_t at, size_t count) {
    auto& posts = posts_;
    for (int r = 0; r < n; ++r) {
      const PostLayout p = postLayout(d.coll, bytes, r, d.root, n);
      // A rank whose post lacks its own block (rank 0 or 1) reads its part from its input.
      if (r == rank_ && p.bytes != bytes) continue;
      posts[size_t(r)] = awaitPost(ctx, r, p.bytes) + at - p.skipped * count * es;
    }
    // This rank's part from its own input (the same bytes as its post, where it posted them):
    // the post's line is the one the others are reading, where a read can wait on their
    // requests. In place the input is the output, which the first step overwrites: safe for
    // ranks 0 and 1 only, whose part that step reads (element by element, before writing it).
    const std::byte* mine = static_cast<const std::byte*>(send) + at;
    if (mine != out || rank_ <= 1) {
      posts[size_t(rank_)] = mine;
    } else if (d.coll == Collective::reduce) {
      // A reduce's root posted no payload: in place past rank 1 it keeps its part aside.
      scratch_.assign(mine, mine + count * es);
      posts[size_t(rank_)] = scratch_.data();
    }
    const bool avg = d.op == RedOp::avg;
    if (n == 1) return cpu::copy(out, nullptr, posts[0], count * es);
    for (int r = 1; r < n; ++r) {
      cpu::reduce(d.dtype, d.op, out, nullptr, r == 1 ? posts[0] : out, posts[size_t(r)], count,
                  avg && r == n - 1 ? n : 0);
    }
  };
  // Copies `len` bytes at offset `at` of every rank's post (this rank's own input for its
  // own) into block r of out, in rank order: a no-op for this rank's block in place.
  auto copyEachPost = [&](size_t at, size_t len) {
    for (int r = 0; r < n; ++r) {
      const std::byte* from =
          r == rank_ ? static_cast<const std::byte*>(send) : awaitPost(ctx, r, bytes);
      cpu::copy(out + size_t(r) * len, nullptr, from + at, len);
    }
  };
  switch (d.coll) {
    case Collective::all_reduce:
      post(ctx, send, bytes);
      reduceAll(0, d.count);
      break;
    case Collective::reduce:
      // The others post and go on, as they would after sending their slots: the root compares
      // every post with its call, and they check the root's post at one of their next calls.
      // Nobody reads the root's input from its post: it posts its arrival only.
      if (rank_ == d.root) {
        post(ctx, nullptr, 0);
        reduceAll(0, d.count);
      } else {
        post(ctx, send, bytes);
        defer(ctx, {d, post_, d.root, 0});
        checked = false;
      }
      break;
    case Collective::reduce_scatter: {
      const PostLayout mine = reduceScatterPost(bytes, rank_, n);
      post(ctx, static_cast<const std::byte*>(send) + mine.skipped * d.count * es, mine.bytes);
      reduceAll(size_t(rank_) * d.count * es, d.count);
      break;
    }
    case Collective::broadcast:
      // The root posts and goes on; the others post their arrival (no payload), which the
      // root checks at one of its next calls: ranks that disagree on the root fail there.
      if (rank_ == d.root) {
        post(ctx, send, bytes);
        if (n > 1) {
          defer(ctx, {d, post_, -1, 0});
          checked = false;
        }
        cpu::copy(out, nullptr, send, bytes);  // a no-op in place
      } else {
        post(ctx, nullptr, 0);
        cpu::copy(out, nullptr, awaitPost(ctx, d.root, bytes), bytes);
      }
      break;
    case Collective::all_gather:
      post(ctx, send, bytes);
      copyEachPost(0, bytes);
      break;
    case Collective::gather:
      // As a reduce: the others post their block and go on, the root posts its arrival and
      // copies every post (its own block from its input).
      if (rank_ == d.root) {
        post(ctx, nullptr, 0);
        copyEachPost(0, bytes);
      } else {
        post(ctx, send, bytes);
        defer(ctx, {d, post_, d.root, 0});
        checked = false;
      }
      break;
    case Collective::scatter: {
      // As a broadcast: the root posts the others' blocks and goes on, the others post their
      // arrival and copy their block of the root's post.
      const size_t block = bytes / size_t(n);
      const PostLayout posted = othersBlocks(bytes, d.root, n);
      if (rank_ == d.root) {
        post(ctx, static_cast<const std::byte*>(send) + posted.skipped * block, posted.bytes);
        if (n > 1) {
          defer(ctx, {d, post_, -1, 0});
          checked = false;
        }
        // A no-op in place (the root's block of its input is its output).
        cpu::copy(out, nullptr, static_cast<const std::byte*>(send) + size_t(rank_) * block, block);
      } else {
        post(ctx, nullptr, 0);
        const std::byte* from = awaitPost(ctx, d.root, posted.bytes);
        cpu::copy(out, nullptr, from + (size_t(rank_) - posted.skipped) * block, block);
      }
      break;
    }
    case Collective::all_to_all: {
      // Every rank posts the others' blocks of its input and copies its block of every post
      // (of its own input for its own: a no-op in place).
      const size_t block = bytes / size_t(n);
      const auto* in = static_cast<const std::byte*>(send);
      const PostLayout mine = othersBlocks(bytes, rank_, n);
      post(ctx, in + mine.skipped * block, mine.bytes);
      for (int r = 0; r < n; ++r) {
        const PostLayout theirs = othersBlocks(bytes, r, n);
        const std::byte* from =
            r == rank_ ? in + size_t(rank_) * block
                       : awaitPost(ctx, r, theirs.bytes) + (size_t(rank_) - theirs.skipped) * block;
        cpu::copy(out + size_t(r) * block, nullptr, from, block);
      }
      break;
    }
    default:
      fail(Code::internal, who(ctx) + ": not a one-shot collective");
  }
  // After this call's reads, which the prefetches' transfers would only delay.
  if (prefetchFar_) prefetchForNextCalls();
  lastSeq_ = d.seq;
  ++calls_;
  // A rank whose post of this call was read has posted its earlier ones: whatever those show
  // is found now, not left to chance. (A call that read nothing leaves them to a later one.)
  if (checked && !unchecked_.empty()) checkUnchecked(ctx, 0, /*probe=*/true);
  if (checked) publishDone();
}

void OneShot::defer(const OpContext& ctx, const Unchecked& u) {
  if (!unchecked_.push_back(u)) {
    fail(Code::internal, who(ctx) + ": more calls left unchecked than the window has posts");
  }
}

void OneShot::checkUnchecked(const OpContext& ctx, uint64_t through, bool probe) {
  if (checking_) return;
  checking_ = true;
  struct Reset {
    bool& flag;
    ~Reset() { flag = false; }
  } reset{checking_};
  bool progressed = false;
  while (!unchecked_.empty()) {
    const Unchecked& u = unchecked_.front();
    const int first = u.firstPeer(), last = u.lastPeer(window_.nranks());
    if (u.call.seq > through) {
      if (!probe) break;
      // Not needed yet: checked now only if every rank it needs has started it.
      bool there = true;
      for (int r = first; r <= last && there; ++r) {
        there = r == rank_ || foldsAgree(r, u.call.seq) ||
                boxes_[size_t(r)].posts[u.post].flag.load(std::memory_order_acquire) ==
                    uint32_t(u.call.seq);
      }
      if (!there) break;
    }
    // A rank whose fold matches this rank's at this call or a later one ran the same calls:
    // its post of this one needs no reading (a line it wrote per call). Else the post tells.
    for (int r = first; r <= last; ++r) {
      if (r != rank_ && !foldsAgree(r, u.call.seq)) {
        awaitPost(ctx, u.call, u.post, r, u.bytes, /*late=*/true);
      }
    }
    unchecked_.pop_front();
    progressed = true;
  }
  if (progressed) publishDone();
}

void OneShot::foldCall(const OpDesc& d, uint32_t bytes, uint32_t kind) {
  // A multiply and shift per word: ranks that ran different calls end with different folds,
  // but for one chance in 2^32 at each comparison (and the next comparison folds on).
  auto mix = [](uint64_t h, uint64_t v) {
    h = (h ^ v) * 0x9e3779b97f4a7c15ull;
    return h ^ (h >> 29);
  };
  uint64_t h = mix(fold_, d.seq);
  h = mix(h, d.count);
  h = mix(h, uint64_t(uint32_t(d.root)) << 32 | uint64_t(d.coll) << 16 | uint64_t(d.dtype) << 8 |
                 uint64_t(d.op));
  h = mix(h, uint64_t(bytes) << 32 | kind);
  fold_ = h;
  const uint64_t word = uint64_t(uint32_t(d.seq)) << 32 | uint32_t(h ^ (h >> 32));
  foldAt_[d.seq % kFoldsKept] = word;
  self_.state->calls.store(word, std::memory_order_release);
}

bool OneShot::foldsAgree(int peer, uint64_t seq) {
  uint64_t& agreed = agreedThrough_[size_t(peer)];
  if (agreed >= seq) return true;
  const uint64_t word = boxes_[size_t(peer)].state->calls.load(std::memory_order_acquire);
  // Its newest call, as far past `seq` as the low 32 bits say (calls are never 2^31 apart).
  const auto ahead = int32_t(uint32_t(word >> 32) - uint32_t(seq));
  if (ahead < 0) return false;
  // This rank's fold at that call: gone (kFoldsKept calls back), not yet made (the peer is
  // ahead) or different, the slot holds another word.
  if (foldAt_[(word >> 32) % kFoldsKept] != word) return false;
  agreed = seq + uint64_t(ahead);
  return true;
}

void OneShot::publishDone() {
  const uint64_t done = unchecked_.empty() ? lastSeq_ : unchecked_.front().call.seq - 1;
  if (done <= published_) return;
  published_ = done;
  self_.state->done.store(done, std::memory_order_release);
  // Only this rank writes it: no read-modify-write, which would stall on the line's readers.
  auto& finished = self_.state->finished;
  finished.store(finished.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  notifyAll(self_.state->finished, self_.state->sleepers, wakeOrder_);
}

OneShot::Payload OneShot::payloadKind(uint32_t bytes) const {
  if (bytes <= MailPost::kInlineBytes) return Payload::inlined;
  return bytes <= self_.smallBytes ? Payload::small : Payload::block;
}

uint64_t OneShot::reuses(Payload where) const {
  switch (where) {
    case Payload::inlined:
      return postUse_[post_];
    case Payload::small:
      return std::max(postUse_[post_], blockUse_[Mailbox::smallBlock(post_)]);
    case Payload::block:
      break;
  }
  return std::max(postUse_[post_], dataUse_[block_]);
}

std::byte* OneShot::payloadIn(const Mailbox& box, int slot, Payload where) const {
  switch (where) {
    case Payload::inlined:
      return box.posts[slot].inlined;
    case Payload::small:
      return box.small(slot);
    case Payload::block:
      break;
  }
  return box.data[block_] + box.posts[slot].meta.offset;
}

void OneShot::prefetchAhead(const Mailbox& box, int slot, Payload where, uint32_t bytes) const {
  const int ahead = (slot + kPrefetchCalls) % kMailPosts;
  prefetchForRead(&box.posts[ahead]);
  if (where != Payload::small) return;
  for (size_t at = 0; at < bytes; at += 64) prefetchForRead(box.small(ahead) + at);
}

void OneShot::prefetchForNextCalls() const {
  // Where the next call checks the calls this rank went on from, the fold words it reads there.
  if ((calls_ + 1) % kCheckEvery == 0 && !unchecked_.empty()) {
    const Unchecked& u = unchecked_.front();
    const int first = u.firstPeer(), last = u.lastPeer(window_.nranks());
    for (int r = first; r <= last; ++r) {
      if (r != rank_) prefetchForRead(&boxes_[size_t(r)].state->calls);
    }
  }
  const auto [where, bytes] = posted_;
  const int next = (post_ + 1) % kMailPosts;
  prefetchForWrite(&self_.posts[next]);
  // The next call's small payload, taken as this one's size: the same sizes come call after
  // call. Not a streamed one, whose stores take no line: far apart a data block's payload and a
  // small one from kStreamSmallFrom are streamed.
  if (where != Payload::small || (streamBlocks_ && bytes >= kStreamSmallFrom)) return;
  for (size_t at = 0; at < bytes; at += 64) prefetchForWrite(self_.small(next) + at);
}

void OneShot::post(const OpContext& ctx, const void* payload, uint32_t bytes, uint32_t kind) {
  // The post (and its data) is free once every rank has finished the call that used it last.
  // A rank's done word moves every call; it is read only when what is known falls short.
  const Payload where = payloadKind(bytes);
  const uint64_t need = reuses(where);
  for (int r = 0; r < window_.nranks(); ++r) {
    if (r == rank_ || knownDone_[size_t(r)] >= need) continue;
    MailState& state = *boxes_[size_t(r)].state;
    uint32_t looks = 0;
    waitUntil(
        ctx, r, "the end of a previous call at",
        [&] {
          if ((knownDone_[size_t(r)] = state.done.load(std::memory_order_acquire)) >= need) {
            return true;
          }
          if (!unchecked_.empty() && (ctx.busy.yield || ++looks % kCheckWhileWaiting == 0)) {
            checkUnchecked(ctx, 0, /*probe=*/true);
          }
          return false;
        },
        state.finished);
  }
  MailPost& p = self_.posts[post_];
  posted_ = {where, bytes};
  // Before the payload, which goes where the offset says (spreadOffset; read after the flag).
  p.meta.offset = where == Payload::block && ctx.spreadSlots
                      ? spreadOffset(calls_ / kMailData, bytes, self_.blockSpan)
                      : 0;
  // A payload that fills a data block, or a small one from kStreamSmallFrom, is streamed where
  // the slots are (streamBlocks): far apart its readers on the other CPU take it from memory
  // (n = 4 on 2 cores, a gather of 256 KiB: 20 µs streamed against 59 cached).
  const bool streamed = streamBlocks_ && (where == Payload::block ||
                                          (where == Payload::small && bytes >= kStreamSmallFrom));
  if (streamed) {
    cpu::copy(payloadIn(self_, post_, where), nullptr, payload, bytes, {/*dst=*/true, false});
  } else if (bytes > 0) {
    copyBytes(payloadIn(self_, post_, where), payload, bytes);
  }
  p.meta.setOp(ctx.desc);
  p.meta.bytes = bytes;
  p.kind = kind;
  p.flag.store(uint32_t(ctx.desc.seq), std::memory_order_release);
  notifyAll(p.flag, self_.state->sleepers, wakeOrder_);
  postUse_[post_] = ctx.desc.seq;
  switch (where) {
    case Payload::inlined:
      break;
    case Payload::small:
      dataUse_[Mailbox::smallBlock(post_)] = ctx.desc.seq;
      break;
    case Payload::block:
      dataUse_[block_] = blockUse_[block_] = ctx.desc.seq;
      break;
  }
}

const std::byte* OneShot::awaitPost(const OpContext& ctx, const OpDesc& call, int slot, int peer,
                                    uint32_t bytes, bool late, uint32_t kind) {
  Mailbox& box = boxes_[size_t(peer)];
  MailPost& p = box.posts[slot];
  const auto want = uint32_t(call.seq);
  const Payload where = payloadKind(bytes);
  if (peer != rank_) {
    if (!late && p.flag.load(std::memory_order_acquire) == want) {
      prefetchAhead(box, slot, where, bytes);
    }
    waitUntil(
        ctx, peer, "data from", [&] { return p.flag.load(std::memory_order_acquire) == want; },
        p.flag);
    if (!p.meta.sameOp(call) || p.meta.bytes != bytes || p.kind != kind ||
        (where == Payload::block && uint64_t(p.meta.offset) + bytes > box.blockSpan)) {
      failDisagreement(ctx, call, peer, p, bytes, late, kind);
    }
  }
  // A deferred check reads only the header: the payload may be gone.
  return payloadIn(box, slot, where);
}

void OneShot::failDisagreement(const OpContext& ctx, const OpDesc& call, int peer,
                               const MailPost& p, uint32_t bytes, bool late, uint32_t kind) const {
  std::string message = "rank " + std::to_string(ctx.rank) + ": ranks disagree: this rank " +
                        (late ? "was" : "is") + " in " + describeOp(call) + " but rank " +
                        std::to_string(peer) + " posted data for " + describeOp(p.meta);
  if (p.meta.sameOp(call) && p.kind != kind) {
    message += p.kind == kDirectReadPost
                   ? " by the direct read where the window's all-reduce was expected"
                   : " by the window's all-reduce where the direct read was expected";
    message += " (do all ranks use the same GYRE_ALGO?)";
  } else if (p.meta.sameOp(call) && p.meta.bytes != bytes) {
    message += " of " + std::to_string(p.meta.bytes) + " bytes where " + std::to_string(bytes) +
               " bytes were expected";
  } else if (p.meta.sameOp(call)) {
    message += " at " + std::to_string(p.meta.offset) + " bytes into a data block of " +
               std::to_string(boxes_[size_t(peer)].blockSpan) + " (a malformed post)";
  }
  if (late) message += " (found at this rank's later call, " + describeOp(ctx.desc) + ")";
  fail(Code::invalid_usage, message);
}

void OneShot::markLeft() {
  markFailed({Code::remote_error,
              "rank " + std::to_string(rank_) + " left: its communicator was destroyed", rank_});
}

void OneShot::markFailed(const Status& s) {
  MailFailure& f = *self_.failure;
  if (f.code.load(std::memory_order_acquire) != 0) return;
  const size_t k = std::min(s.message.size(), sizeof f.message - 1);
  std::memcpy(f.message, s.message.data(), k);
  f.message[k] = '\0';
  f.lostRank = s.lostRank;
  f.code.store(uint32_t(s.code == Code::success ? Code::internal : s.code),
               std::memory_order_release);
  // Wake every sleeper on our posts: they look at the failure records next.
  for (int b = 0; b < kMailPosts; ++b)
    notifyAll(self_.posts[b].flag, self_.state->sleepers, wakeOrder_);
}

void OneShot::waitAsleep(const OpContext& ctx, int peer, const char* what,
                         FunctionRef<bool()> ready, std::atomic<uint32_t>& word) {
  auto peerCheckInterval = kFirstPeerCheck;
  auto nextPeerCheck = Clock::now() + peerCheckInterval;
  auto nextLivenessCheck = Clock::now();
  while (true) {
    // Read before the condition: a change after it ends the sleep below at once.
    const uint32_t seen = word.load(std::memory_order_acquire);
    if (ready()) return;
    for (int r = 0; r < window_.nranks(); ++r) {
      const MailFailure& f = *boxes_[size_t(r)].failure;
      if (r == rank_ || f.code.load(std::memory_order_acquire) == 0) continue;
      // A rank that left (its record names itself) may have finished every call it had: it
      // matters only to a wait on it, not to the others still finishing theirs.
      if (f.lostRank == r && r != peer) continue;
      throw Failure(
          Status{Code(f.code.load()),
                 who(ctx) + " failed: rank " + std::to_string(r) + " failed: " + f.message,
                 f.lostRank >= 0 ? f.lostRank : r});
    }
    if (ctx.abort && ctx.abort->load(std::memory_order_relaxed)) {
      fail(Code::aborted, who(ctx) + " aborted by gyreCommAbort");
    }
    const auto now = Clock::now();
    if (now >= nextLivenessCheck) {
      if (window_.ownerExited(peer)) {
        throw Failure(Status{Code::remote_error,
                             who(ctx) + " failed: rank " + std::to_string(peer) +
                                 " exited (its process ended) while this rank waited for " + what +
                                 " it",
                             peer});
      }
      nextLivenessCheck = now + kLivenessCheck;
    }
    if (now >= ctx.deadline) {
      std::ostringstream secs;
      secs << std::chrono::duration<double>(ctx.timeout).count();
      fail(Code::timeout, who(ctx) + " timed out after " + secs.str() + " s waiting for " + what +
                              " rank " + std::to_string(peer) + " over the host window");
    }
    if (ctx.checkPeers && now >= nextPeerCheck) {
      if (Status s = ctx.checkPeers(); !s.ok()) {
        throw Failure(s.code, "rank " + std::to_string(ctx.rank) + ": " + s.message);
      }
      peerCheckInterval = std::min(2 * peerCheckInterval, kLastPeerCheck);
      nextPeerCheck = now + peerCheckInterval;
    }
    // A stuck rank checks what it can of the calls it went on from: a rank that needs it
    // to say it finished one of them (a disagreement on sizes) is not left waiting.
    if (!unchecked_.empty()) checkUnchecked(ctx, 0, /*probe=*/true);
    // Short slices: the failure records, the abort word and the peer's process get a look.
    const auto until =
        std::min({ctx.deadline, nextLivenessCheck, now + std::chrono::milliseconds(20)});
    sleepWhileEqual(word, boxes_[size_t(peer)].state->sleepers, seen, until, wakeOrder_);
  }
}

}  // namespace gyre
