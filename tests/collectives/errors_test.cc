// Failures end in clear errors, fast, naming ranks and operations; never a hang.
#include <dlfcn.h>
#include <doctest/doctest.h>

#include <atomic>
#include <thread>

#include "gyre/gyre.h"
#include "tests/harness/checks.h"
#include "tests/harness/peer_leaves.h"
#include "tests/harness/thread_ranks.h"

using namespace gyre;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

using test::contains;
using test::failureOf;

TEST_CASE("invalid arguments are refused before anything is sent, naming the rank") {
  test::ThreadJob job(2, test::tinySlots(5000ms), "badargs");
  job.run([&](Communicator& c, int r) {
    std::vector<float> a(16), b(16);
    auto s = failureOf([&] { c.allReduce(a.data(), nullptr, 4, DataType::f32, RedOp::sum); });
    CHECK(s.code == Code::invalid_argument);
    CHECK(contains(s.message, "rank " + std::to_string(r)));
    CHECK(contains(s.message, "recvbuff is null"));
    s = failureOf([&] { c.allReduce(a.data(), a.data() + 1, 4, DataType::f32, RedOp::sum); });
    CHECK(s.code == Code::invalid_argument);
    CHECK(contains(s.message, "overlap"));
    s = failureOf([&] { c.broadcast(a.data(), b.data(), 4, DataType::f32, 2); });
    CHECK(s.code == Code::invalid_argument);
    CHECK(contains(s.message, "root 2"));
    s = failureOf(
        [&] { c.allReduce(a.data(), b.data(), 4, static_cast<DataType>(77), RedOp::sum); });
    CHECK(s.code == Code::invalid_argument);
    s = failureOf(
        [&] { c.allReduce(a.data(), b.data(), 4, DataType::f32, static_cast<RedOp>(9)); });
    CHECK(s.code == Code::invalid_argument);
    s = failureOf([&] { c.allGather(a.data(), a.data() + 1, 4, DataType::f32); });
    CHECK(s.code == Code::invalid_argument);
    // Null buffers are fine with count 0, and the communicator still works afterwards.
    c.allReduce(nullptr, nullptr, 0, DataType::f32, RedOp::sum);
    a[0] = float(r + 1);
    c.allReduce(a.data(), b.data(), 1, DataType::f32, RedOp::sum);
    CHECK(b[0] == 3.0f);
  });
}

TEST_CASE("ranks that disagree on a collective fail with invalid usage naming both sides") {
  struct Mismatch {
    const char* name;
    std::function<void(Communicator&, int, float*, float*)> call;
  };
  const std::vector<Mismatch> mismatches{
      {"count", [](Communicator& c, int r, float* a,
                   float* b) { c.allReduce(a, b, 10 + r, DataType::f32, RedOp::sum); }},
      {"dtype",
       [](Communicator& c, int r, float* a, float* b) {
         c.allReduce(a, b, 10, r ? DataType::i32 : DataType::f32, RedOp::sum);
       }},
      {"op", [](Communicator& c, int r, float* a,
                float* b) { c.allReduce(a, b, 10, DataType::f32, r ? RedOp::max : RedOp::sum); }},
      // Each rank its own root: both wait to receive and no data reveals it; the stalled
      // waits find it in the other rank's published progress.
      {"reduce root", [](Communicator& c, int r, float* a,
                         float* b) { c.reduce(a, b, 10, DataType::f32, RedOp::sum, r); }},
      {"gather root",
       [](Communicator& c, int r, float* a, float* b) { c.gather(a, b, 10, DataType::f32, r); }},

      {"collective",
       [](Communicator& c, int r, float* a, float* b) {
         if (r == 0)
           c.allReduce(a, b, 10, DataType::f32, RedOp::sum);
         else
           c.broadcast(a, b, 10, DataType::f32, 0);
       }},
  };
  for (const auto& m : mismatches) {
    const std::string name = m.name;
    CAPTURE(name);
    test::ThreadJob job(2, test::tinySlots(20000ms), std::string("mismatch-") + m.name);
    std::vector<Status> result(2);
    const auto start = Clock::now();
    job.run([&](Communicator& c, int r) {
      std::vector<float> a(64, 1.0f), b(64);
      result[r] = failureOf([&] { m.call(c, r, a.data(), b.data()); });
    });
    const auto elapsed = Clock::now() - start;
    CHECK(elapsed < 10s);  // detected from the data, not by the 20 s timeout
    int invalidUsage = 0;
    for (int r = 0; r < 2; ++r) {
      CAPTURE(result[r].message);
      CHECK(result[r].code != Code::success);
      if (result[r].code == Code::invalid_usage) {
        ++invalidUsage;
        CHECK(contains(result[r].message, "ranks disagree"));
        CHECK(contains(result[r].message, "rank " + std::to_string(1 - r)));
      }
    }
    CHECK(invalidUsage >= 1);
    // Poisoned: the next call fails fast with the original cause.
    job.run([&](Communicator& c, int r) {
      float x = 1;
      auto s = failureOf([&] { c.allReduce(&x, &x, 1, DataType::f32, RedOp::sum); });
      CHECK(s.code == result[r].code);
      CHECK(contains(s.message, "failed earlier"));
    });
  }
}

// Two ranks that each scatter as root only send, so both return; the data each left in the
// other's link is what the next call finds, and it names the scatter.
TEST_CASE("a scatter where every rank is its own root is named by the next call") {
  test::ThreadJob job(2, test::tinySlots(20000ms), "mismatch-scatter-roots");
  std::vector<Status> result(2);
  job.run([&](Communicator& c, int r) {
    std::vector<float> a(64, 1.0f), b(64);
    result[r] = failureOf([&] {
      c.scatter(a.data(), b.data(), 10, DataType::f32, r);
      c.allReduce(a.data(), b.data(), 10, DataType::f32, RedOp::sum);
    });
  });
  for (int r = 0; r < 2; ++r) {
    CAPTURE(result[r].message);
    CHECK(result[r].code == Code::invalid_usage);
    CHECK(contains(result[r].message, "ranks disagree"));
  }
  const bool named = contains(result[0].message, "scatter #1 (count 10, float, root 1)") ||
                     contains(result[1].message, "scatter #1 (count 10, float, root 0)");
  CHECK_MESSAGE(named, result[0].message, " / ", result[1].message);
}

namespace {
// Runs `call` then an all-reduce on n ranks, over the host window (one-shot forced) and over
// the links: every rank must fail, fast, and one must name `named` as the disagreement.
void checkFailsByNextCall(int n, const std::string& job, const std::string& named,
                          const std::function<void(Communicator&, int, float*, float*)>& call) {
  for (size_t window : {size_t(64) << 10, size_t(0)}) {
    CAPTURE(window);
    CommConfig cfg = test::tinySlots(20000ms);
    cfg.oneShotBytes = window;
    if (window > 0) cfg.algorithm = "oneshot";  // the tuner keeps a reduce off it here
    test::ThreadJob threads(n, cfg, job);
    std::vector<Status> result(static_cast<size_t>(n));
    const auto start = Clock::now();
    threads.run([&](Communicator& c, int r) {
      std::vector<float> a(64, 1.0f), b(64);
      result[size_t(r)] = failureOf([&] {
        call(c, r, a.data(), b.data());
        c.allReduce(a.data(), b.data(), 10, DataType::f32, RedOp::sum);
      });
    });
    CHECK(Clock::now() - start < 10s);  // found from the data, not by the timeout
    int naming = 0;
    for (const Status& s : result) {
      CAPTURE(s.message);
      CHECK(s.code != Code::success);
      naming += contains(s.message, "ranks disagree") && contains(s.message, named);
    }
    CHECK(naming >= 1);
  }
}
}  // namespace

// Each rank broadcasting as its own root only posts or sends, so both return; the next call
// checks what the root did not wait for (the arrivals, or the links' data) and names it.
TEST_CASE("a broadcast where every rank is its own root fails by the next call, naming it") {
  checkFailsByNextCall(
      2, "mismatch-broadcast-roots", "broadcast #1 (count 10, float, root",
      [](Communicator& c, int r, float* a, float* b) { c.broadcast(a, b, 10, DataType::f32, r); });
}

// Ranks 1 and 2 reduce to rank 0 while rank 0 reduces to rank 1: every rank thinks it is a
// non-root, so all post and go on; each finds the disagreement by its next call.
TEST_CASE("a reduce in which no rank is the root fails by the next call, naming it") {
  checkFailsByNextCall(3, "mismatch-reduce-roots", "reduce #1 (count 10, float, sum, root",
                       [](Communicator& c, int r, float* a, float* b) {
                         c.reduce(a, b, 10, DataType::f32, RedOp::sum, r == 0 ? 1 : 0);
                       });
}

// The same for a gather (its non-roots post and go on) and a scatter (its root does).
TEST_CASE("a gather in which no rank is the root fails by the next call, naming it") {
  checkFailsByNextCall(3, "mismatch-gather-roots", "gather #1 (count 10, float, root",
                       [](Communicator& c, int r, float* a, float* b) {
                         c.gather(a, b, 10, DataType::f32, r == 0 ? 1 : 0);
                       });
}
// The same after a run of gathers they agree on, which ranks that go on from calls verify by
// comparing folds of the calls run (not each post): the one they disagree on is still named.
TEST_CASE("a gather with no root after 40 agreed gathers fails by the next call, naming it") {
  checkFailsByNextCall(3, "mismatch-gather-roots-late", "gather #41 (count 10, float, root",
                       [](Communicator& c, int r, float* a, float* b) {
                         std::vector<float> all(3 * 10);
                         for (int k = 0; k < 40; ++k) c.gather(a, all.data(), 10, DataType::f32, 2);
                         c.gather(a, b, 10, DataType::f32, r == 0 ? 1 : 0);
                       });
}
TEST_CASE("a scatter where every rank is its own root fails by the next call, naming it") {
  checkFailsByNextCall(
      2, "mismatch-scatter-roots", "scatter #1 (count 10, float, root",
      [](Communicator& c, int r, float* a, float* b) { c.scatter(a, b, 10, DataType::f32, r); });
}

// A rank with count 0 sends nothing and returns; the other waits for data that never comes
// and finds the disagreement in the published progress instead of sitting out the timeout.
TEST_CASE("a rank that calls with count 0 while the other sends data: the waiter names it") {
  test::ThreadJob job(2, test::tinySlots(20000ms), "mismatch-count-0");
  std::vector<Status> result(2);
  const auto start = Clock::now();
  job.run([&](Communicator& c, int r) {
    std::vector<float> a(64, 1.0f), b(64);
    result[r] =
        failureOf([&] { c.allReduce(a.data(), b.data(), r ? 10 : 0, DataType::f32, RedOp::sum); });
  });
  CHECK(Clock::now() - start < 10s);  // not the 20 s timeout
  CHECK(result[0].ok());
  CAPTURE(result[1].message);
  CHECK(result[1].code == Code::invalid_usage);
  CHECK(contains(result[1].message, "ranks disagree"));
  CHECK(contains(result[1].message, "rank 0 called all_reduce #1 (count 0"));
}

TEST_CASE("over tcp, data for another operation never lands in the receiver's buffer") {
  // The receiver offers its output for payloads to land in directly; a frame from a rank in
  // another operation must go to the slot, be refused there, and leave the output as it was.
  CommConfig config;
  config.transport = "tcp";
  config.timeout = 20000ms;
  for (const bool sameCount : {true, false}) {
    CAPTURE(sameCount);
    test::ThreadJob job(2, config, sameCount ? "direct-match" : "direct-mismatch");
    const size_t count = 100000;  // several full 128 KiB slots
    const float poison = -7.0f;
    std::vector<float> received(count + 1, poison);
    std::vector<Status> result(2);
    job.run([&](Communicator& c, int r) {
      std::vector<float> data(count + 1);
      for (size_t i = 0; i < data.size(); ++i) data[i] = float(i % 1000);
      result[r] = failureOf([&] {
        if (r == 0) {
          c.broadcast(data.data(), data.data(), count, DataType::f32, 0);
        } else {
          c.broadcast(received.data(), received.data(), sameCount ? count : count + 1,
                      DataType::f32, 0);
        }
      });
    });
    if (sameCount) {
      CHECK(result[0].ok());
      CHECK(result[1].ok());
      bool right = true;
      for (size_t i = 0; i < count; ++i) right = right && received[i] == float(i % 1000);
      CHECK(right);
      CHECK(received[count] == poison);
    } else {
      CAPTURE(result[1].message);
      CHECK(result[1].code == Code::invalid_usage);
      CHECK(contains(result[1].message, "ranks disagree"));
      size_t touched = 0;
      for (float v : received) touched += v != poison;
      CHECK(touched == 0);
    }
  }
}

TEST_CASE("a rank that never arrives: timeout naming the operation and the peer") {
  test::ThreadJob job(2, test::tinySlots(1000ms), "timeout");
  float x = 1, y = 0;
  const auto start = Clock::now();
  auto s = failureOf([&] { job.comm(0).allReduce(&x, &y, 1, DataType::f32, RedOp::sum); });
  const auto elapsed = Clock::now() - start;
  CAPTURE(s.message);
  CHECK(s.code == Code::timeout);
  CHECK(contains(s.message, "rank 0: all_reduce #1"));
  CHECK(contains(s.message, "rank 1 never entered all_reduce #1 (its last completed: none)"));
  CHECK(elapsed >= 900ms);
  CHECK(elapsed < 5s);
}

TEST_CASE("a timeout names the rank that never entered and what it last completed") {
  test::ThreadJob job(3, test::tinySlots(1500ms), "attribution");
  job.run([&](Communicator& c, int) {
    float x = 1, y = 0;
    c.broadcast(&x, &y, 1, DataType::f32, 0);  // #1, everyone
  });
  std::vector<Status> result(2);
  test::onThreads(2, [&](int r) {  // rank 2 never calls #2
    float x = 1, y = 0;
    result[r] = failureOf([&] { job.comm(r).allReduce(&x, &y, 1, DataType::f32, RedOp::sum); });
  });
  for (int r = 0; r < 2; ++r) {
    CAPTURE(result[r].message);
    CHECK(result[r].code == Code::timeout);
    CHECK(contains(result[r].message,
                   "rank 2 never entered all_reduce #2 (its last completed: broadcast #1"));
  }
}

TEST_CASE("a peer that leaves mid-job fails every rank fast, naming who was lost") {
  test::ThreadJob job(3, test::tinySlots(30000ms), "peer-leaves");
  test::checkPeerLeavesMidJob(job);
}

// Rank 1 has no connection to rank 3 (not a ring neighbour at n = 4): it dials one, and a
// refusal says nothing listens there any more.
TEST_CASE("a send to a rank that left, not yet connected to, fails fast naming it") {
  test::ThreadJob job(4, test::tinySlots(30000ms), "send-to-gone");
  job.destroy(3);
  const auto start = Clock::now();
  std::vector<float> a(16, 1.0f);
  const Status s = failureOf([&] { job.comm(1).send(a.data(), 16, DataType::f32, 3); });
  CHECK(Clock::now() - start < 10s);
  CAPTURE(s.message);
  CHECK(s.code == Code::remote_error);
  CHECK(s.lostRank == 3);
  CHECK(contains(s.message, "rank 3 is gone"));
  CHECK(contains(s.message, "nothing listens there"));
}

TEST_CASE("abort from another thread unblocks a waiting collective promptly") {
  test::ThreadJob job(2, test::tinySlots(60000ms), "abort");
  float x = 1, y = 0;
  Clock::time_point abortedAt;
  std::thread aborter([&] {
    std::this_thread::sleep_for(200ms);  // let the collective start waiting
    abortedAt = Clock::now();
    job.comm(0).abort();
  });
  auto s = failureOf([&] { job.comm(0).allReduce(&x, &y, 1, DataType::f32, RedOp::sum); });
  const auto returned = Clock::now();
  aborter.join();
  CHECK(s.code == Code::aborted);
  CHECK(returned - abortedAt < 100ms);
  CHECK(job.comm(0).asyncError().code == Code::aborted);
}

namespace {

// The rank and size a C API communicator reports.
void checkRankAndCount(gyreComm_t comm, int r, int n) {
  int rank = -1, count = -1;
  CHECK(gyreCommUserRank(comm, &rank) == gyreSuccess);
  CHECK(gyreCommCount(comm, &count) == gyreSuccess);
  CHECK(rank == r);
  CHECK(count == n);
}

// Whether this machine has a CUDA driver to load. Where it has, a made-up stream handle would
// reach it (cudaStreamIsCapturing dereferences it, and crashed this program on a GPU machine);
// where it has not, a stream is refused before anything touches it.
bool cudaDriverInstalled() {
  void* driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (driver) dlclose(driver);
  return driver != nullptr;
}

}  // namespace

TEST_CASE("C API: unique id init on threads, results and error codes") {
  gyreUniqueId id;
  REQUIRE(gyreGetUniqueId(&id) == gyreSuccess);
  const int n = 3;
  std::vector<gyreComm_t> comms(n);
  test::onThreads(n, [&](int r) { REQUIRE(gyreCommInitRank(&comms[r], n, id, r) == gyreSuccess); });
  const bool noDriver = !cudaDriverInstalled();
  if (!noDriver) MESSAGE("a CUDA driver is installed: a stream without CUDA is not refused here");
  test::onThreads(n, [&](int r) {
    checkRankAndCount(comms[r], r, n);
    double v = r + 1, out = 0;
    CHECK(gyreAllReduce(&v, &out, 1, gyreFloat64, gyreProd, comms[r], nullptr) == gyreSuccess);
    CHECK(out == 6.0);
    if (noDriver) {
      CHECK(gyreAllReduce(&v, &out, 1, gyreFloat64, gyreSum, comms[r], &v) == gyreInvalidArgument);
      CHECK(contains(gyreGetLastError(comms[r]), "stream"));
    }
    CHECK(gyreAllReduce(&v, &out, 1, gyreNumTypes, gyreSum, comms[r], nullptr) ==
          gyreInvalidArgument);
    gyreResult_t async = gyreInternalError;
    CHECK(gyreCommGetAsyncError(comms[r], &async) == gyreSuccess);
    CHECK(async == gyreSuccess);
  });
  for (auto c : comms) CHECK(gyreCommDestroy(c) == gyreSuccess);
  CHECK(gyreAllReduce(nullptr, nullptr, 0, gyreFloat32, gyreSum, nullptr, nullptr) ==
        gyreInvalidArgument);
  gyreUniqueId bogus{};
  gyreComm_t c = nullptr;
  CHECK(gyreCommInitRank(&c, 2, bogus, 0) == gyreInvalidArgument);
  CHECK(gyreCommInitRank(&c, 2, id, 5) == gyreInvalidArgument);
  CHECK(c == nullptr);
  CHECK(std::string(gyreGetErrorString(gyreTimeout)) == "timeout");
}

TEST_CASE("C API: the timeout in the init config bounds a wait") {
  gyreUniqueId id;
  REQUIRE(gyreGetUniqueId(&id) == gyreSuccess);
  gyreConfig_t config = GYRE_CONFIG_INITIALIZER;
  config.timeoutMs = 700;
  std::vector<gyreComm_t> comms(2);
  test::onThreads(2, [&](int r) {
    REQUIRE(gyreCommInitRankConfig(&comms[r], 2, id, r, &config) == gyreSuccess);
  });
  float x = 1, y = 0;
  const auto start = Clock::now();
  CHECK(gyreAllReduce(&x, &y, 1, gyreFloat32, gyreSum, comms[0], nullptr) == gyreTimeout);
  const auto elapsed = Clock::now() - start;
  CHECK(elapsed >= 600ms);
  CHECK(elapsed < 3s);
  CHECK(contains(gyreGetLastError(nullptr), "timed out after 0.7 s"));
  gyreConfig_t bad = config;
  bad.size = 3;
  gyreComm_t c = nullptr;
  CHECK(gyreCommInitRankConfig(&c, 2, id, 0, &bad) == gyreInvalidArgument);
  for (auto comm : comms) gyreCommDestroy(comm);
}

TEST_CASE("C API: scalable init joins through the first of several ids, the lists compared") {
  const int n = 4;
  gyreUniqueId ids[2];
  REQUIRE(gyreGetUniqueId(&ids[0]) == gyreSuccess);
  REQUIRE(gyreGetUniqueId(&ids[1]) == gyreSuccess);
  std::vector<gyreComm_t> comms(n);
  test::onThreads(n, [&](int r) {
    REQUIRE(gyreCommInitRankScalable(&comms[r], n, r, 2, ids, nullptr) == gyreSuccess);
  });
  test::onThreads(n, [&](int r) {
    checkRankAndCount(comms[r], r, n);
    int64_t v = int64_t(1) << (8 * r), out = -1;
    CHECK(gyreAllReduce(&v, &out, 1, gyreInt64, gyreSum, comms[r], nullptr) == gyreSuccess);
    CHECK(out == 0x01010101);
  });
  for (auto c : comms) CHECK(gyreCommDestroy(c) == gyreSuccess);

  // Rank 2 was given the second id twice: every rank fails, naming a pair that differs.
  gyreUniqueId fresh[2], other[2];
  REQUIRE(gyreGetUniqueId(&fresh[0]) == gyreSuccess);
  REQUIRE(gyreGetUniqueId(&fresh[1]) == gyreSuccess);
  other[0] = fresh[0];
  other[1] = fresh[0];
  std::vector<gyreComm_t> failed(n, reinterpret_cast<gyreComm_t>(&comms));  // poisoned
  std::vector<std::string> messages(n);
  test::onThreads(n, [&](int r) {
    CHECK(gyreCommInitRankScalable(&failed[r], n, r, 2, r == 2 ? other : fresh, nullptr) ==
          gyreInvalidArgument);
    messages[r] = gyreGetLastError(nullptr);
  });
  for (int r = 0; r < n; ++r) {
    CHECK(failed[r] == nullptr);
    CHECK(contains(messages[r], "rank " + std::to_string(r) + ": gyreCommInitRankScalable"));
    CHECK(contains(messages[r], "passed different unique ids"));
    CHECK(
        contains(messages[r], r == 2 ? "ranks 2 and 0" : "ranks " + std::to_string(r) + " and 2"));
  }

  gyreComm_t c = reinterpret_cast<gyreComm_t>(&comms);
  CHECK(gyreCommInitRankScalable(&c, 2, 0, 0, ids, nullptr) == gyreInvalidArgument);
  CHECK(c == nullptr);
  CHECK(contains(gyreGetLastError(nullptr), "nId 0 must be 1 to nranks (2)"));
  CHECK(gyreCommInitRankScalable(&c, 2, 0, 3, ids, nullptr) == gyreInvalidArgument);
  CHECK(gyreCommInitRankScalable(&c, 2, 0, 1, nullptr, nullptr) == gyreInvalidArgument);
  CHECK(contains(gyreGetLastError(nullptr), "commIds is null"));
  gyreUniqueId bogus[2] = {ids[0], {}};
  CHECK(gyreCommInitRankScalable(&c, 2, 0, 2, bogus, nullptr) == gyreInvalidArgument);
  CHECK(contains(gyreGetLastError(nullptr), "not a gyreUniqueId"));
  CHECK(gyreCommInitRankScalable(nullptr, 2, 0, 1, ids, nullptr) == gyreInvalidArgument);
}
