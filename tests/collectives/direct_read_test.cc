// The direct read and the single copy exact on every call: ranks as threads over shared memory,
// each collective forced through the path, outputs poisoned, every element checked.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "algorithms/host_prims.h"
#include "tests/harness/single_copy.h"
#include "tests/harness/thread_ranks.h"

using namespace gyre;

// Forced, every all-reduce, reduce, reduce-scatter, all-gather, broadcast, gather, scatter and
// all-to-all goes through the direct read, shares of uneven size over many pieces included, in
// place (where a rank past the second reduces its own input after the ones before it) and out of
// place; every element exact, outputs poisoned.
namespace {
void exactDirectReads(int n) {
  CommConfig config = test::tinySlots();
  config.algorithm = "read";
  test::ThreadJob job(n, config, "direct-read-exact");
  // int64: 390 KiB, shares of 195 KiB at n = 2 (a piece of 128 KiB and part of another), of
  // 16673 and 16674 elements at n = 3 (a piece of 85 KiB and part of another).
  const size_t count = 50021;
  std::vector<std::string> wrong(static_cast<size_t>(n));
  std::vector<int> calls(static_cast<size_t>(n), 0);
  job.run([&](Communicator& c, int r) {
    auto value = [](int rank, size_t i) { return int64_t(rank + 1) * 1000003 + int64_t(i); };
    auto sum = [&](size_t i) {
      int64_t s = 0;
      for (int p = 0; p < n; ++p) s += value(p, i);
      return s;
    };
    auto expect = [&](bool ok, const std::string& what) {
      if (!ok && wrong[r].empty()) wrong[r] = "rank " + std::to_string(r) + ": " + what;
    };
    for (bool inPlace : {false, true}) {
      const std::string how = inPlace ? " in place" : "";
      std::vector<int64_t> in(count), out(count * n, -7);
      for (size_t i = 0; i < count; ++i) in[i] = value(r, i);
      // All-reduce, sum: the ranks' values added.
      if (inPlace) std::copy(in.begin(), in.end(), out.begin());
      c.allReduce(inPlace ? out.data() : in.data(), out.data(), count, DataType::i64, RedOp::sum);
      ++calls[r];
      for (size_t i = 0; i < count; ++i) {
        expect(out[i] == sum(i), "all_reduce" + how);
      }
      expect(out[count] == -7, "all_reduce wrote past its buffer");
      // Reduce to each root, sum: the root's share the larger; the root alone written.
      for (int root = 0; root < n; ++root) {
        std::fill(out.begin(), out.end(), -7);
        if (inPlace) std::copy(in.begin(), in.end(), out.begin());
        c.reduce(inPlace ? out.data() : in.data(), out.data(), count, DataType::i64, RedOp::sum,
                 root);
        ++calls[r];
        const std::string what = "reduce to " + std::to_string(root) + how;
        for (size_t i = 0; i < count; ++i) {
          const int64_t kept = inPlace ? value(r, i) : -7;  // a non-root's own buffer untouched
          expect(out[i] == (r == root ? sum(i) : kept), what);
        }
        expect(out[count] == -7, what + " wrote past its buffer");
      }
      // Reduce-scatter, sum: block r of the ranks' inputs added, in rank r's output; in place
      // that output is block r of its input (a rank past the second keeps its piece aside).
      {
        std::vector<int64_t> whole(count * n), got(count + 1, -7);
        for (size_t i = 0; i < whole.size(); ++i) whole[i] = value(r, i);
        int64_t* mine = inPlace ? whole.data() + size_t(r) * count : got.data();
        c.reduceScatter(whole.data(), mine, count, DataType::i64, RedOp::sum);
        ++calls[r];
        for (size_t i = 0; i < count; ++i) {
          const size_t at = size_t(r) * count + i;
          expect(mine[i] == sum(at), "reduce_scatter" + how);
        }
        expect(got[count] == -7, "reduce_scatter wrote past its block");
      }
      // All-gather: every rank's block in its place.
      std::fill(out.begin(), out.end(), -7);
      if (inPlace) std::copy(in.begin(), in.end(), out.begin() + std::ptrdiff_t(size_t(r) * count));
      c.allGather(inPlace ? out.data() + size_t(r) * count : in.data(), out.data(), count,
                  DataType::i64);
      ++calls[r];
      for (int p = 0; p < n; ++p) {
        for (size_t i = 0; i < count; ++i) {
          expect(out[size_t(p) * count + i] == value(p, i), "all_gather" + how);
        }
      }
      // Broadcast from each root: the root's values everywhere, nothing past the buffer.
      for (int root = 0; root < n; ++root) {
        std::fill(out.begin(), out.end(), -7);
        if (inPlace && r == root) std::copy(in.begin(), in.end(), out.begin());
        c.broadcast(inPlace ? out.data() : in.data(), out.data(), count, DataType::i64, root);
        ++calls[r];
        for (size_t i = 0; i < count; ++i) {
          expect(out[i] == value(root, i), "broadcast from " + std::to_string(root) + how);
        }
        expect(out[count] == -7, "broadcast wrote past its buffer");
      }
      // Gather to each root: every rank's block in its place on the root; nothing written
      // elsewhere, on the root past the blocks or anywhere on the others.
      std::vector<int64_t> whole(count * n + 1);
      for (int root = 0; root < n; ++root) {
        const bool here = inPlace && r == root;
        std::fill(whole.begin(), whole.end(), -7);
        if (here)
          std::copy(in.begin(), in.end(), whole.begin() + std::ptrdiff_t(size_t(r) * count));
        c.gather(here ? whole.data() + size_t(r) * count : in.data(), whole.data(), count,
                 DataType::i64, root);
        ++calls[r];
        const std::string what = "gather to " + std::to_string(root) + how;
        for (int p = 0; p < n; ++p) {
          for (size_t i = 0; i < count; ++i) {
            expect(whole[size_t(p) * count + i] == (r == root ? value(p, i) : -7), what);
          }
        }
        expect(whole[count * n] == -7, what + " wrote past its buffer");
      }
      // Scatter from each root: block r of the root's input (rank p's values at p * count + i).
      for (int k = 0; k < int(whole.size()); ++k) whole[size_t(k)] = value(r, size_t(k));
      for (int root = 0; root < n; ++root) {
        const bool here = inPlace && r == root;
        std::fill(out.begin(), out.end(), -7);
        int64_t* mine = here ? whole.data() + size_t(r) * count : out.data();
        c.scatter(whole.data(), mine, count, DataType::i64, root);
        ++calls[r];
        const std::string what = "scatter from " + std::to_string(root) + how;
        for (size_t i = 0; i < count; ++i) {
          expect(mine[i] == value(root, size_t(r) * count + i), what);
        }
        if (!here) expect(out[count] == -7, what + " wrote past its block");
        for (int k = 0; k < int(whole.size()); ++k) whole[size_t(k)] = value(r, size_t(k));
      }
    }
    // All-to-all (never in place): block p of the output is rank p's block r; one more element
    // past the blocks stays poisoned.
    const size_t block = count / 3 + 1;
    std::vector<int64_t> in(block * n), out(block * n + 1, -7);
    for (size_t i = 0; i < in.size(); ++i) in[i] = value(r, i);
    c.allToAll(in.data(), out.data(), block, DataType::i64);
    ++calls[r];
    for (int p = 0; p < n; ++p) {
      for (size_t i = 0; i < block; ++i) {
        expect(out[size_t(p) * block + i] == value(p, size_t(r) * block + i), "all_to_all");
      }
    }
    expect(out[block * n] == -7, "all_to_all wrote past its buffer");
  });
  for (int r = 0; r < n; ++r) {
    CHECK_MESSAGE(wrong[size_t(r)].empty(), wrong[size_t(r)]);
    CHECK(job.comm(r).directReads() == uint64_t(calls[size_t(r)]));
  }
}
}  // namespace

TEST_CASE("direct read: every call of its collectives, exact") {
  if (!test::singleCopyMissing().empty()) {
    MESSAGE("the direct read is off here: " << test::singleCopyMissing());
    return;
  }
  for (int n : {2, 3}) {
    CAPTURE(n);
    exactDirectReads(n);
  }
}

// An all-to-all sends from its input to more peers than one call keeps track of at once
// (HostPrims::kMaxPeers): the call makes room by waiting for the earliest readers, never for a
// slot it has not published yet.
TEST_CASE("single copy: an all-to-all read by more peers than are tracked at once") {
  const int n = HostPrims::kMaxPeers + 2;
  CommConfig config = test::tinySlots(std::chrono::seconds(20));
  config.shmSingleCopyBytes = 64;
  config.oneShotBytes = 0;        // through the slots, not the host window
  config.algorithm = "pairwise";  // sends from the input (Bruck's leave from the output)
  test::ThreadJob job(n, config, "a2a-many");
  const size_t count = 64;  // floats per peer: one 256-byte slot each
  std::vector<std::string> wrong(n);
  job.run([&](Communicator& c, int r) {
    std::vector<float> in(count * n), out(count * n, -1.0f);
    for (size_t i = 0; i < in.size(); ++i) in[i] = float(r * 100000 + int(i));
    c.allToAll(in.data(), out.data(), count, DataType::f32);
    for (int p = 0; p < n; ++p) {
      for (size_t i = 0; i < count; ++i) {
        const float expect = float(p * 100000 + int(size_t(r) * count + i));
        if (out[size_t(p) * count + i] != expect && wrong[r].empty()) {
          wrong[r] = "rank " + std::to_string(r) + ": block of rank " + std::to_string(p) +
                     " element " + std::to_string(i) + " wrong";
        }
      }
    }
  });
  for (int r = 0; r < n; ++r) CHECK_MESSAGE(wrong[r].empty(), wrong[r]);
  if (test::singleCopyMissing().empty()) CHECK(job.comm(0).directSends() > 0);
}
