// The host window's run-ahead (algorithms/oneshot.h): ranks that only post (a reduce's and a
// gather's non-roots, a broadcast's and a scatter's root) go on while the others lag, through
// payloads inlined in the post, in the post's small piece of the data blocks, and filling a
// data block, in every order; every element exact, outputs poisoned first.
#include <doctest/doctest.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "base/wait.h"
#include "tests/harness/checks.h"
#include "tests/harness/thread_ranks.h"

using namespace gyre;

namespace {
int64_t valueOf(int rank, int call, size_t i) {
  return int64_t(rank + 1) * 1000003 + int64_t(call) * 7919 + int64_t(i);
}
}  // namespace

TEST_CASE("window: posters run ahead through inlined, small and whole-block payloads, exact") {
  const int n = 3, calls = 400;
  // int64 counts: 8 and 24 bytes inlined, 32 and 800 bytes and 2 KiB (the default's largest
  // small payload) in the post's piece, 2056 and 40000 bytes filling a data block.
  const size_t counts[] = {1, 3, 4, 100, 256, 257, 5000};
  constexpr int64_t kPoison = -0x5a5a5a5a5a5a5a5;
  CommConfig config = test::tinySlots();
  config.algorithm = "oneshot";
  test::ThreadJob job(n, config, "window-run-ahead");
  std::vector<std::string> wrong(n);
  job.run([&](Communicator& c, int r) {
    auto expect = [&](bool ok, int call, const char* what) {
      if (!ok && wrong[size_t(r)].empty()) {
        wrong[size_t(r)] =
            "rank " + std::to_string(r) + ", call " + std::to_string(call) + ": " + what + " wrong";
      }
    };
    std::vector<int64_t> in, out;
    for (int k = 0; k < calls; ++k) {
      const size_t count = counts[size_t(k) % std::size(counts)];
      const int kind = (k / int(std::size(counts))) % 4;
      // A reader lags now and then, a slow peer (the reduce's and the gather's root, a receiver
      // of the broadcast and of the scatter: ranks 0, 1, 0, 1): the posters run ahead up to
      // the window's limit meanwhile. Nothing waits on the pause; the results hold without it.
      if (k % 53 == 0 && r == kind % 2) std::this_thread::sleep_for(std::chrono::milliseconds(2));
      switch (kind) {
        case 0: {  // reduce to rank 0: ranks 1 and 2 post and go on
          in.assign(count, 0);
          for (size_t i = 0; i < count; ++i) in[i] = valueOf(r, k, i);
          out.assign(count, kPoison);
          c.reduce(in.data(), out.data(), count, DataType::i64, RedOp::sum, 0);
          if (r != 0) break;
          for (size_t i = 0; i < count; ++i) {
            expect(out[i] == valueOf(0, k, i) + valueOf(1, k, i) + valueOf(2, k, i), k, "reduce");
          }
          break;
        }
        case 1: {  // gather to rank 1
          in.assign(count, 0);
          for (size_t i = 0; i < count; ++i) in[i] = valueOf(r, k, i);
          out.assign(count * n, kPoison);
          c.gather(in.data(), out.data(), count, DataType::i64, 1);
          if (r != 1) break;
          for (int from = 0; from < n; ++from) {
            for (size_t i = 0; i < count; ++i) {
              expect(out[size_t(from) * count + i] == valueOf(from, k, i), k, "gather");
            }
          }
          break;
        }
        case 2: {  // broadcast from rank 2: it posts and goes on
          in.assign(count, 0);
          for (size_t i = 0; i < count; ++i) in[i] = valueOf(2, k, i);
          out.assign(count, kPoison);
          c.broadcast(in.data(), out.data(), count, DataType::i64, 2);
          for (size_t i = 0; i < count; ++i) expect(out[i] == valueOf(2, k, i), k, "broadcast");
          break;
        }
        default: {  // scatter from rank 0
          in.assign(count * n, 0);
          for (size_t i = 0; i < count * n; ++i) in[i] = valueOf(0, k, i);
          out.assign(count, kPoison);
          c.scatter(in.data(), out.data(), count, DataType::i64, 0);
          for (size_t i = 0; i < count; ++i) {
            expect(out[i] == valueOf(0, k, size_t(r) * count + i), k, "scatter");
          }
          break;
        }
      }
    }
  });
  for (int r = 0; r < n; ++r) {
    CHECK_MESSAGE(wrong[size_t(r)].empty(), wrong[size_t(r)]);
    // The reduces and gathers at least ran in the window. Where ranks share cores, broadcasts
    // past an inlined payload go through the links (runtime/core/tuner.cc), and so do scatters
    // whose whole buffer passes the post's 64 KiB.
    CHECK(job.comm(r).windowCalls() >= uint64_t(calls / 2));
  }
}

TEST_CASE("window: ranks asleep for a late one wake at its post, exact") {
  const int n = 3, calls = 60;
  constexpr int64_t kPoison = -0x5a5a5a5a5a5a5a5;
  CommConfig config = test::tinySlots();
  config.algorithm = "oneshot";
  config.spin = std::chrono::microseconds(20);  // a wait of a millisecond sleeps
  test::ThreadJob job(n, config, "window-asleep");
  std::vector<std::string> wrong(n);
  job.run([&](Communicator& c, int r) {
    for (int k = 0; k < calls && wrong[size_t(r)].empty(); ++k) {
      // Each call one rank comes a millisecond late, a slow peer: the others wait for its post
      // asleep, and its post (or done) must wake them. Nothing waits on the pause itself.
      if (r == k % n) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      const size_t count = k % 2 == 0 ? 2 : 40;  // inlined, and in the post's piece
      std::vector<int64_t> in(count), out(count, kPoison);
      for (size_t i = 0; i < count; ++i) in[i] = valueOf(r, k, i);
      if (k % 3 == 2) {
        c.broadcast(in.data(), out.data(), count, DataType::i64, (k / 3) % n);
        for (size_t i = 0; i < count && wrong[size_t(r)].empty(); ++i) {
          if (out[i] != valueOf((k / 3) % n, k, i)) wrong[size_t(r)] = "broadcast";
        }
      } else {
        c.allReduce(in.data(), out.data(), count, DataType::i64, RedOp::sum);
        for (size_t i = 0; i < count && wrong[size_t(r)].empty(); ++i) {
          if (out[i] != valueOf(0, k, i) + valueOf(1, k, i) + valueOf(2, k, i)) {
            wrong[size_t(r)] = "all-reduce";
          }
        }
      }
      if (!wrong[size_t(r)].empty()) wrong[size_t(r)] += " wrong at call " + std::to_string(k);
    }
  });
  for (int r = 0; r < n; ++r) {
    CHECK_MESSAGE(wrong[size_t(r)].empty(), "rank " << r << ": " << wrong[size_t(r)]);
    CHECK(job.comm(r).windowCalls() == uint64_t(calls));
    // Their wakes go without the notifiers' fences wherever the kernel gives every rank the
    // sleepers' barriers (base/wait.h).
    CHECK(job.comm(r).windowSleeperBarriers() == registerSleeperBarriers());
  }
}

// A collective the tuner sent to the window at this size goes there straight (runInWindow):
// the results, the published progress a timeout names, and the failure every later call
// meets are those of the general path.
TEST_CASE("window: repeated calls go there straight, exact; a timeout there names who is late") {
  using namespace std::chrono_literals;
  const int n = 3, calls = 30;
  constexpr int64_t kPoison = -0x5a5a5a5a5a5a5a5;
  CommConfig config = test::tinySlots(1500ms);
  config.algorithm = "oneshot";
  test::ThreadJob job(n, config, "window-straight");
  std::vector<std::string> wrong(n);
  job.run([&](Communicator& c, int r) {
    for (int k = 0; k < calls && wrong[size_t(r)].empty(); ++k) {
      const size_t count = k < calls / 2 ? 3 : 40;  // inlined, then in the post's piece
      std::vector<int64_t> in(count), out(count, kPoison), all(count * n, kPoison);
      for (size_t i = 0; i < count; ++i) in[i] = valueOf(r, k, i);
      c.allReduce(in.data(), out.data(), count, DataType::i64, RedOp::sum);
      c.gather(in.data(), all.data(), count, DataType::i64, k % n);
      for (size_t i = 0; i < count; ++i) {
        if (out[i] != valueOf(0, k, i) + valueOf(1, k, i) + valueOf(2, k, i)) {
          wrong[size_t(r)] = "all-reduce wrong at call " + std::to_string(k);
        }
        for (int from = 0; from < n && r == k % n; ++from) {
          if (all[size_t(from) * count + i] != valueOf(from, k, i)) {
            wrong[size_t(r)] = "gather wrong at call " + std::to_string(k);
          }
        }
      }
    }
  });
  for (int r = 0; r < n; ++r) {
    CHECK_MESSAGE(wrong[size_t(r)].empty(), "rank " << r << ": " << wrong[size_t(r)]);
    CHECK(job.comm(r).windowCalls() == uint64_t(2 * calls));
    // All but the first all-reduce and gather of each size, at most (a placement probe due
    // takes the general path).
    CHECK(job.comm(r).straightWindowCalls() <= uint64_t(2 * calls - 4));
    CHECK(job.comm(r).straightWindowCalls() >= uint64_t(calls));
  }
  // Ranks 0 and 1 call once more, rank 2 never: the straight call times out naming rank 2 and
  // the last call it completed, and the communicator refuses the next call.
  std::vector<Status> result(2);
  const uint64_t straight[2] = {job.comm(0).straightWindowCalls(),
                                job.comm(1).straightWindowCalls()};
  test::onThreads(2, [&](int r) {
    std::vector<int64_t> in(40, 1), out(40, kPoison);
    result[size_t(r)] = test::failureOf(
        [&] { job.comm(r).allReduce(in.data(), out.data(), 40, DataType::i64, RedOp::sum); });
  });
  for (int r = 0; r < 2; ++r) {
    CAPTURE(result[size_t(r)].message);
    CHECK(result[size_t(r)].code == Code::timeout);
    CHECK(test::contains(result[size_t(r)].message,
                         "rank 2 never entered all_reduce #" + std::to_string(2 * calls + 1) +
                             " (its last completed: gather #" + std::to_string(2 * calls)));
    CHECK(job.comm(r).straightWindowCalls() == straight[r] + 1);  // it went straight
    int64_t x = 1;
    const Status next =
        test::failureOf([&] { job.comm(r).allReduce(&x, &x, 1, DataType::i64, RedOp::sum); });
    CHECK(next.code == Code::timeout);
    CHECK(test::contains(next.message, "failed earlier"));
  }
}
