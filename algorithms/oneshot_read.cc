// The direct-read collectives of the host window (algorithms/oneshot.h): every rank posts where
// its input and output lie, and the ranks read and write each other's buffers there through
// the kernel (process_vm_readv, process_vm_writev), one copy between the ranks' buffers.
#include <algorithm>
#include <cstring>
#include <sstream>

#include "algorithms/oneshot.h"
#include "kernels/cpu/reduce.h"

namespace gyre {

namespace {
// Pieces of a peer's input read at once: small enough that a piece of every input stays in
// this core's cache while it is reduced, large enough that the system calls are a small part.
// The pieces of all inputs together take 256 KiB, each at least 64 KiB: at n = 2 pieces of 128
// KiB took 0.88-0.98 of 64 KiB's time from 256 KiB to 16 MiB (one row level), at n = 8 64 KiB
// stayed ahead, and 16 KiB took 1.2-1.6 times as long (docs/tuning_reduce.md).
constexpr size_t kReadPiecesBytes = 256 << 10;
constexpr size_t kReadPieceMinBytes = 64 << 10;
}  // namespace

void OneShot::runDirectRead(const OpContext& ctx, const void* send, void* recv) {
  const OpDesc& d = ctx.desc;
  if (!directRead_) fail(Code::internal, who(ctx) + ": the direct read was not enabled");
  const auto* in = static_cast<const std::byte*>(send);
  auto* out = static_cast<std::byte*>(recv);
  const size_t bytes = d.count * dataTypeSize(d.dtype);
  foldCall(d, 0, kDirectReadPost);
  switch (d.coll) {
    case Collective::all_reduce:
      readReduce(ctx, in, out, -1);
      break;
    case Collective::reduce:
      readReduce(ctx, in, out, d.root);
      break;
    case Collective::reduce_scatter:
      readReduceScatter(ctx, in, out);
      break;
    case Collective::all_gather:
    case Collective::all_to_all: {
      // Each rank's block lands straight in its place: the all-gather's whole input, the
      // all-to-all's block `rank` of it (one copy per byte where the pairwise exchange's slots
      // make two). The reads start at the next rank, so the ranks do not all read rank 0 first.
      // The own block is copied in two halves, one while the others' posts come, the other
      // after this rank's reads are told, while the others' reads end: each half overlaps a
      // crossing between the cores instead of adding to it.
      const int n = window_.nranks();
      const size_t from = d.coll == Collective::all_to_all ? size_t(rank_) * bytes : 0;
      const size_t half = bytes / 2 / 64 * 64;
      postBuffers(ctx, in, out);
      cpu::copy(out + size_t(rank_) * bytes, nullptr, in + from, half);  // in place: a no-op
      awaitBuffers(ctx, -1);
      for (int k = 1; k < n; ++k) {
        const int r = (rank_ + k) % n;
        readPeer(ctx, r, out + size_t(r) * bytes, peerInputs_[size_t(r)] + from, bytes);
      }
      publishReads(d.seq);
      cpu::copy(out + size_t(rank_) * bytes + half, nullptr, in + from + half, bytes - half);
      awaitPeerReads(ctx, -1);
      break;
    }
    case Collective::broadcast: {
      // Both ends copy: the root writes the first of n shares into every other rank's buffer
      // while each of those reads the rest from the root's, so the copy runs on every core at
      // once instead of on the receivers' alone. Each waits for the other end before it
      // returns: the root until every receiver has read, a receiver until the root has written.
      const int n = window_.nranks();
      const size_t es = dataTypeSize(d.dtype);
      const size_t pushed = d.count / size_t(n) * es;
      if (rank_ == d.root) {
        exchangeBuffers(ctx, in, out, -1);
        for (int k = 1; k < n; ++k) {
          const int r = (rank_ + k) % n;
          writePeer(ctx, r, peerOutputs_[size_t(r)], in, pushed);
        }
        publishReads(d.seq);                 // the receivers need not wait for the root's own copy
        cpu::copy(out, nullptr, in, bytes);  // a no-op in place
        awaitPeerReads(ctx, -1);
      } else {
        exchangeBuffers(ctx, out, out, d.root);
        readPeer(ctx, d.root, out + pushed, peerInputs_[size_t(d.root)] + pushed, bytes - pushed);
        finishReads(ctx, d.root);
      }
      break;
    }
    case Collective::gather:
    case Collective::scatter: {
      // Every other rank moves its own block through the kernel, all at once: a gather's writes
      // its input into its place in the root's output, a scatter's reads its block of the
      // root's input, while the root copies its own block (in halves, as the all-gather's). The
      // root moving every block itself would leave the others' cores idle.
      const size_t rootAt = size_t(d.root);
      const bool gather = d.coll == Collective::gather;
      if (rank_ == d.root) {
        std::byte* mine = out + (gather ? size_t(rank_) * bytes : 0);
        const std::byte* from = in + (gather ? 0 : size_t(rank_) * bytes);
        const size_t half = bytes / 2 / 64 * 64;
        postBuffers(ctx, in, out);
        cpu::copy(mine, nullptr, from, half);  // in place: a no-op
        awaitBuffers(ctx, -1);
        publishReads(d.seq);
        cpu::copy(mine + half, nullptr, from + half, bytes - half);
        awaitPeerReads(ctx, -1);
      } else {
        exchangeBuffers(ctx, in, out, d.root);
        const uint64_t at = uint64_t(size_t(rank_) * bytes);
        if (gather) {
          writePeer(ctx, d.root, peerOutputs_[rootAt] + at, in, bytes);
        } else {
          readPeer(ctx, d.root, out, peerInputs_[rootAt] + at, bytes);
        }
        finishReads(ctx, d.root);
      }
      break;
    }
    default:
      fail(Code::internal, who(ctx) + ": not a direct-read collective");
  }
  lastSeq_ = d.seq;
  ++calls_;
  ++directReads_;
  if (!unchecked_.empty()) checkUnchecked(ctx, 0, /*probe=*/true);
  publishDone();
}

void OneShot::exchangeBuffers(const OpContext& ctx, const void* input, const void* output,
                              int peer) {
  postBuffers(ctx, input, output);
  awaitBuffers(ctx, peer);
}

void OneShot::postBuffers(const OpContext& ctx, const void* input, const void* output) {
  const int n = window_.nranks();
  post_ = int(calls_ % kMailPosts);
  block_ = int(calls_ % kMailData);
  if (!unchecked_.empty()) checkUnchecked(ctx, postUse_[size_t(post_)], /*probe=*/false);
  const uint64_t where[2] = {reinterpret_cast<uintptr_t>(input),
                             reinterpret_cast<uintptr_t>(output)};
  static_assert(sizeof where == kBufferPostBytes);
  post(ctx, where, kBufferPostBytes, kDirectReadPost);
  peerInputs_.assign(size_t(n), where[0]);
  peerOutputs_.assign(size_t(n), where[1]);
}

void OneShot::awaitBuffers(const OpContext& ctx, int peer) {
  for (int r = 0; r < window_.nranks(); ++r) {
    if (r == rank_ || (peer >= 0 && r != peer)) continue;
    const std::byte* theirs =
        awaitPost(ctx, ctx.desc, post_, r, kBufferPostBytes, false, kDirectReadPost);
    std::memcpy(&peerInputs_[size_t(r)], theirs, sizeof(uint64_t));
    std::memcpy(&peerOutputs_[size_t(r)], theirs + sizeof(uint64_t), sizeof(uint64_t));
  }
}

void OneShot::finishReads(const OpContext& ctx, int peer) {
  // Returning lets the caller write its input (and read its output): only once the others
  // have read the one (and written the other).
  publishReads(ctx.desc.seq);
  awaitPeerReads(ctx, peer);
}

void OneShot::awaitPeerReads(const OpContext& ctx, int peer) {
  for (int r = 0; r < window_.nranks(); ++r) {
    if (r != rank_ && (peer < 0 || r == peer)) awaitReads(ctx, r, ctx.desc.seq);
  }
}

void OneShot::readReduce(const OpContext& ctx, const std::byte* in, std::byte* out, int root) {
  // Rank r owns the r-th of n shares of the buffer: it reads that share of every other input,
  // reduces it in rank order and writes the result into every other output (the reduce's, into
  // the root's alone). Only rank r ever touches share r of any buffer, and it reads a piece
  // before it writes it, so in place needs nothing more. An all-reduce's rank moves
  // 2 (n - 1) / n of the buffer through the kernel. A reduce's rank reads n - 1 times its share
  // and writes it once, the root only reads: its share is the larger, by the write's part of a
  // rank's work with a byte of reduction priced at two of the kernel's copy (shares 3 (n - 1)
  // to the root's 3 n - 2; at n = 2, 4 to 3: against even halves 7-13 % faster at 256 KiB-1 MiB,
  // level or up to 4 % faster at 4-16 MiB; docs/tuning_reduce.md).
  const OpDesc& d = ctx.desc;
  const int n = window_.nranks();
  const size_t es = dataTypeSize(d.dtype);
  exchangeBuffers(ctx, in, out, -1);
  const auto shareStart = [&](int r) -> size_t {  // in elements
    if (root < 0) return d.count * size_t(r) / size_t(n);
    const size_t other = 3 * size_t(n - 1), mine = 3 * size_t(n) - 2;
    const size_t total = size_t(n - 1) * other + mine;
    const size_t weight = size_t(r) * other + (root < r ? mine - other : 0);
    return d.count / total * weight + d.count % total * weight / total;
  };
  const size_t first = shareStart(rank_) * es;
  const size_t last = shareStart(rank_ + 1) * es;
  // A reduce's other ranks sum their share into the piece past the inputs' (their outputs
  // need not exist).
  const bool keeps = root < 0 || rank_ == root;
  const size_t piece = preparePieces(es, keeps ? 0 : 1);
  for (size_t at = first; at < last; at += piece) {
    const size_t k = std::min(piece, last - at);
    std::byte* sum = keeps ? out + at : scratch_.data() + size_t(n) * piece;
    reducePiece(ctx, piece, at, in + at, sum, k, in == out && keeps);
    for (int j = 1; j < n; ++j) {
      const int r = (rank_ + j) % n;
      if (root < 0 || r == root) writePeer(ctx, r, peerOutputs_[size_t(r)] + at, sum, k);
    }
  }
  finishReads(ctx, -1);
}

void OneShot::readReduceScatter(const OpContext& ctx, const std::byte* in, std::byte* out) {
  // Rank r reads block r of every other input and reduces it in rank order into its output: it
  // moves (n - 1) / n of the buffer through the kernel and writes nothing into another rank's
  // memory, so a rank waits for the others only to have read its input before it returns. In
  // place the output is block r of the input.
  const size_t bytes = ctx.desc.count * dataTypeSize(ctx.desc.dtype);
  const size_t block = size_t(rank_) * bytes;
  exchangeBuffers(ctx, in, out, -1);
  const size_t piece = preparePieces(dataTypeSize(ctx.desc.dtype), 0);
  for (size_t at = 0; at < bytes; at += piece) {
    const size_t k = std::min(piece, bytes - at);
    reducePiece(ctx, piece, block + at, in + block + at, out + at, k, in + block == out);
  }
  finishReads(ctx, -1);
}

size_t OneShot::preparePieces(size_t es, int extra) {
  const size_t n = size_t(window_.nranks());
  const size_t piece = std::max(es, std::max(kReadPieceMinBytes, kReadPiecesBytes / n) / es * es);
  scratch_.resize((n + size_t(extra)) * piece);
  return piece;
}

void OneShot::reducePiece(const OpContext& ctx, size_t piece, size_t offset, const std::byte* own,
                          std::byte* sum, size_t k, bool inPlace) {
  const OpDesc& d = ctx.desc;
  const int n = window_.nranks();
  const size_t es = dataTypeSize(d.dtype);
  for (int j = 1; j < n; ++j) {
    const int r = (rank_ + j) % n;
    readPeer(ctx, r, scratch_.data() + size_t(r) * piece, peerInputs_[size_t(r)] + offset, k);
  }
  auto& src = posts_;  // each rank's part of the piece being reduced
  for (int r = 0; r < n; ++r) src[size_t(r)] = scratch_.data() + size_t(r) * piece;
  src[size_t(rank_)] = own;
  // In place, the ranks before this one are reduced into its output first: its own piece
  // must be read before then.
  if (inPlace && rank_ >= 2) {
    std::byte* kept = scratch_.data() + size_t(rank_) * piece;
    cpu::copy(kept, nullptr, own, k);
    src[size_t(rank_)] = kept;
  }
  // This piece of every input is here: reduce it while it is in the cache.
  if (n == 1) cpu::copy(sum, nullptr, own, k);  // in place: a no-op
  const bool avg = d.op == RedOp::avg;
  for (int r = 1; r < n; ++r) {
    cpu::reduce(d.dtype, d.op, sum, nullptr, r == 1 ? src[0] : sum, src[size_t(r)], k / es,
                avg && r == n - 1 ? n : 0);
  }
}

void OneShot::accessPeer(const OpContext& ctx, int peer, std::byte* local, uint64_t address,
                         size_t bytes, bool read) {
  const int pid = boxes_[size_t(peer)].state->pid;
  const std::string error = read ? readPeerMemory(pid, local, address, bytes)
                                 : writePeerMemory(pid, address, local, bytes);
  if (error.empty()) return;
  // A rank that ended is the cause; else its buffer is shorter than the call.
  const bool gone = window_.ownerExited(peer);
  std::ostringstream at;
  at << std::hex << "0x" << address;
  throw Failure(Status{gone ? Code::remote_error : Code::invalid_usage,
                       who(ctx) + " failed: could not " +
                           (read ? "read the input of rank " : "write the output of rank ") +
                           std::to_string(peer) + " (" + std::to_string(bytes) + " bytes at " +
                           at.str() + "): " + error +
                           (gone ? " (its process ended)" : " (is its buffer that large?)"),
                       peer});
}

void OneShot::publishReads(uint64_t seq) {
  self_.state->readsDone.store(seq, std::memory_order_release);
  self_.state->readsMoved.fetch_add(1, std::memory_order_release);
  notifyAll(self_.state->readsMoved, self_.state->sleepers, wakeOrder_);
}

void OneShot::awaitReads(const OpContext& ctx, int peer, uint64_t seq) {
  MailState& state = *boxes_[size_t(peer)].state;
  waitUntil(
      ctx, peer, "the direct reads and writes of this call by",
      [&] { return state.readsDone.load(std::memory_order_acquire) >= seq; }, state.readsMoved);
}

}  // namespace gyre
