// The C API users call: the torch.distributed walkthrough of the six collectives, split,
// groups (fused all-reduces, batched sends and receives) and asynchronous work. Ranks as
// threads, each with its own communicator from one unique id.
#include <doctest/doctest.h>

#include <atomic>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "gyre/gyre.h"
#include "tests/harness/c_api_ranks.h"

using namespace std::chrono_literals;

namespace {

using gyre::test::initComms;

void destroy(std::vector<gyreComm_t>& comms) {
  for (auto c : comms)
    if (c) CHECK(gyreCommDestroy(c) == gyreSuccess);
  comms.clear();
}

// An all-reduce of rank 0 alone, queued on a new two-rank communicator with a 500 ms timeout:
// rank 1 never takes part, so it times out.
gyreWork_t lonelyAllReduce(std::vector<gyreComm_t>& comms, float& v) {
  gyreConfig_t config = GYRE_CONFIG_INITIALIZER;
  config.timeoutMs = 500;
  comms = initComms(2, &config);
  gyreWork_t w = nullptr;
  OK(gyreGroupStart());
  OK(gyreAllReduce(&v, &v, 1, gyreFloat32, gyreSum, comms[0], nullptr));
  OK(gyreGroupEndAsync(&w));
  return w;
}

}  // namespace

TEST_CASE("the torch.distributed walkthrough of the six collectives, 4 ranks") {
  const int n = 4;
  auto comms = initComms(n);
  gyre::test::onThreads(n, [&](int r) {
    gyreComm_t c = comms[r];
    // reduce of a one-element tensor of ones to rank 0 -> 4 there, untouched elsewhere.
    float one = 1, out = -7;
    OK(gyreReduce(&one, &out, 1, gyreFloat32, gyreSum, 0, c, nullptr));
    CHECK(out == (r == 0 ? 4.0f : -7.0f));
    // all_reduce of ones -> 4; of rank+1 with prod/max/min -> 24/4/1.
    OK(gyreAllReduce(&one, &out, 1, gyreFloat32, gyreSum, c, nullptr));
    CHECK(out == 4.0f);
    const float mine = float(r + 1);
    OK(gyreAllReduce(&mine, &out, 1, gyreFloat32, gyreProd, c, nullptr));
    CHECK(out == 24.0f);
    OK(gyreAllReduce(&mine, &out, 1, gyreFloat32, gyreMax, c, nullptr));
    CHECK(out == 4.0f);
    OK(gyreAllReduce(&mine, &out, 1, gyreFloat32, gyreMin, c, nullptr));
    CHECK(out == 1.0f);
    // scatter [1,2,3,4] from rank 0 -> rank i holds i+1.
    const float all[4] = {1, 2, 3, 4};
    OK(gyreScatter(r == 0 ? all : nullptr, &out, 1, gyreFloat32, 0, c, nullptr));
    CHECK(out == float(r + 1));
    // gather [rank] to rank 0 -> [0,1,2,3].
    const float rank = float(r);
    float gathered[4] = {-1, -1, -1, -1};
    OK(gyreGather(&rank, gathered, 1, gyreFloat32, 0, c, nullptr));
    for (int i = 0; i < n; ++i) CHECK(gathered[i] == (r == 0 ? float(i) : -1.0f));
    // all_gather [rank] -> [0,1,2,3] everywhere.
    float everyone[4] = {-1, -1, -1, -1};
    OK(gyreAllGather(&rank, everyone, 1, gyreFloat32, c, nullptr));
    for (int i = 0; i < n; ++i) CHECK(everyone[i] == float(i));
    // broadcast from rank 0 -> rank 0's value everywhere.
    float value = r == 0 ? 42.0f : -1.0f;
    OK(gyreBroadcast(&value, &value, 1, gyreFloat32, 0, c, nullptr));
    CHECK(value == 42.0f);
    OK(gyreBarrier(c));
  });
  destroy(comms);
}

TEST_CASE("split: two colors run different collectives at once; the parent can go first") {
  const int n = 5;
  auto comms = initComms(n);
  std::vector<gyreComm_t> children(n, nullptr);
  gyre::test::onThreads(n, [&](int r) {
    // Even ranks and odd ranks; rank 4 opts out; keys reverse the order among evens.
    const int color = r == 4 ? GYRE_SPLIT_NOCOLOR : r % 2;
    OK(gyreCommSplit(comms[r], color, -r, &children[r], nullptr));
    if (r == 4) {
      CHECK(children[r] == nullptr);
      return;
    }
    int size = 0, rank = -1;
    OK(gyreCommCount(children[r], &size));
    OK(gyreCommUserRank(children[r], &rank));
    CHECK(size == 2);
    CHECK(rank == (r < 2 ? 1 : 0));  // key -r: the higher parent rank comes first
  });
  // The parent goes away; the children keep working, each color its own collective.
  destroy(comms);
  gyre::test::onThreads(4, [&](int r) {
    gyreComm_t c = children[r];
    for (int round = 0; round < 20; ++round) {
      if (r % 2 == 0) {
        int64_t v = r + round, sum = 0;
        OK(gyreAllReduce(&v, &sum, 1, gyreInt64, gyreSum, c, nullptr));
        CHECK(sum == 0 + 2 + 2 * round);
      } else {
        int32_t got[2] = {-1, -1};
        const int32_t mine = r * 100 + round;
        OK(gyreAllGather(&mine, got, 1, gyreInt32, c, nullptr));
        CHECK(got[0] == 300 + round);  // rank 3 is rank 0 of the odd child
        CHECK(got[1] == 100 + round);
      }
    }
    // A split may force an algorithm (what gyre-bench --algos does); a bad name is refused.
    gyreConfig_t tree = GYRE_CONFIG_INITIALIZER;
    tree.algorithm = "tree";
    gyreComm_t forced = nullptr;
    OK(gyreCommSplit(c, 0, 0, &forced, &tree));
    int64_t v = r, sum = 0;
    OK(gyreAllReduce(&v, &sum, 1, gyreInt64, gyreSum, forced, nullptr));
    CHECK(sum == (r % 2 ? 1 + 3 : 0 + 2));
    OK(gyreCommDestroy(forced));
    gyreConfig_t bogus = GYRE_CONFIG_INITIALIZER;
    bogus.algorithm = "fastest";
    CHECK(gyreCommSplit(c, 0, 0, &forced, &bogus) == gyreInvalidArgument);
    CHECK(forced == nullptr);
    gyreComm_t dup = nullptr;
    OK(gyreCommDup(c, &dup));
    int one = 1, total = 0;
    OK(gyreAllReduce(&one, &total, 1, gyreInt32, gyreSum, dup, nullptr));
    CHECK(total == 2);
    OK(gyreCommDestroy(dup));
  });
  children.resize(4);
  destroy(children);
}

TEST_CASE("groups: fused all-reduces and sends and receives that would block one by one") {
  const int n = 4;
  gyreConfig_t config = GYRE_CONFIG_INITIALIZER;
  config.slotBytes = 256;  // many slices, and messages far beyond a link's capacity
  config.nSlots = 2;
  auto comms = initComms(n, &config);
  gyre::test::onThreads(n, [&](int r) {
    gyreComm_t c = comms[r];
    // 64 all-reduces of different sizes and one broadcast in the middle.
    std::vector<std::vector<int32_t>> in(64), out(64);
    for (int k = 0; k < 64; ++k) {
      in[k].assign(size_t(k * 3 + 1), r * 1000 + k);
      out[k].assign(in[k].size(), -1);
    }
    int32_t shared = r == 2 ? 77 : 0;
    OK(gyreGroupStart());
    for (int k = 0; k < 64; ++k) {
      OK(gyreAllReduce(in[k].data(), out[k].data(), in[k].size(), gyreInt32, gyreSum, c, nullptr));
      if (k == 31) OK(gyreBroadcast(&shared, &shared, 1, gyreInt32, 2, c, nullptr));
    }
    CHECK(out[0][0] == -1);  // deferred until the group ends
    OK(gyreGroupEnd());
    for (int k = 0; k < 64; ++k)
      for (int32_t v : out[k]) REQUIRE(v == 6000 + 4 * k);
    CHECK(shared == 77);
    // Everyone sends 40 KiB to both neighbours and receives from both, sends first: one by one
    // this deadlocks with links of 512 bytes; in a group they all move together.
    const int next = (r + 1) % n, prev = (r + n - 1) % n;
    std::vector<int32_t> toNext(10000), toPrev(10000), fromPrev(10000, -1), fromNext(10000, -1);
    std::iota(toNext.begin(), toNext.end(), r * 100000);
    std::iota(toPrev.begin(), toPrev.end(), r * 100000 + 50000);
    OK(gyreGroupStart());
    OK(gyreSend(toNext.data(), toNext.size(), gyreInt32, next, c, nullptr));
    OK(gyreSend(toPrev.data(), toPrev.size(), gyreInt32, prev, c, nullptr));
    OK(gyreRecv(fromPrev.data(), fromPrev.size(), gyreInt32, prev, c, nullptr));
    OK(gyreRecv(fromNext.data(), fromNext.size(), gyreInt32, next, c, nullptr));
    OK(gyreGroupEnd());
    for (int i = 0; i < 10000; ++i) {
      REQUIRE(fromPrev[i] == prev * 100000 + i);
      REQUIRE(fromNext[i] == next * 100000 + 50000 + i);
    }
  });
  CHECK(gyreGroupEnd() == gyreInvalidUsage);
  destroy(comms);
}

TEST_CASE("groups over several communicators: they progress together, in any order") {
  const int n = 2;
  gyreConfig_t config = GYRE_CONFIG_INITIALIZER;
  config.timeoutMs = 20000;  // one part run after the other would wait for this, then fail
  auto comms = initComms(n, &config);
  std::vector<gyreComm_t> dups(n);
  gyre::test::onThreads(n, [&](int r) { OK(gyreCommDup(comms[r], &dups[r])); });
  // The two ranks group the same two calls in opposite orders.
  gyre::test::onThreads(n, [&](int r) {
    std::vector<int32_t> a(5000, r + 1), b(3000, 10 * (r + 1));
    gyreComm_t first = r == 0 ? comms[r] : dups[r], second = r == 0 ? dups[r] : comms[r];
    int32_t* firstBuf = r == 0 ? a.data() : b.data();
    int32_t* secondBuf = r == 0 ? b.data() : a.data();
    const size_t firstCount = r == 0 ? a.size() : b.size();
    const size_t secondCount = r == 0 ? b.size() : a.size();
    OK(gyreGroupStart());
    OK(gyreAllReduce(firstBuf, firstBuf, firstCount, gyreInt32, gyreSum, first, nullptr));
    OK(gyreAllReduce(secondBuf, secondBuf, secondCount, gyreInt32, gyreSum, second, nullptr));
    OK(gyreGroupEnd());
    for (int32_t v : a) REQUIRE(v == 3);
    for (int32_t v : b) REQUIRE(v == 30);
    // A communicator destroyed between its call and gyreGroupEnd: the other part has run, all
    // of it, by the time the group ends with the error.
    gyreComm_t doomed = nullptr;
    OK(gyreCommDup(comms[r], &doomed));
    std::vector<int32_t> c(20000, r + 1), lost(10, 1);
    OK(gyreGroupStart());
    OK(gyreAllReduce(c.data(), c.data(), c.size(), gyreInt32, gyreSum, comms[r], nullptr));
    OK(gyreAllReduce(lost.data(), lost.data(), lost.size(), gyreInt32, gyreSum, doomed, nullptr));
    OK(gyreCommDestroy(doomed));
    refused(gyreGroupEnd(), gyreInvalidUsage, "comm was destroyed");
    for (int32_t v : c) REQUIRE(v == 3);
  });
  // One thread drives both ranks (NCCL's one process, several devices): a group with a call
  // on each rank's communicator, and a send and its receive.
  std::vector<std::vector<float>> data(n, std::vector<float>(1000));
  for (int r = 0; r < n; ++r) std::iota(data[r].begin(), data[r].end(), float(r * 1000));
  std::vector<float> sent(1000), received(1000, -1.0f);
  std::iota(sent.begin(), sent.end(), 0.5f);
  OK(gyreGroupStart());
  for (int r = 0; r < n; ++r)
    OK(gyreAllReduce(data[r].data(), data[r].data(), 1000, gyreFloat32, gyreSum, comms[r],
                     nullptr));
  OK(gyreSend(sent.data(), 1000, gyreFloat32, 1, dups[0], nullptr));
  OK(gyreRecv(received.data(), 1000, gyreFloat32, 0, dups[1], nullptr));
  OK(gyreGroupEnd());
  for (int i = 0; i < 1000; ++i) {
    REQUIRE(data[0][size_t(i)] == float(1000 + 2 * i));
    REQUIRE(data[1][size_t(i)] == float(1000 + 2 * i));
  }
  CHECK(received == sent);
  destroy(dups);
  destroy(comms);
}

TEST_CASE("gyreCommInitAll: one thread drives three ranks through groups") {
  const int n = 3;
  std::vector<gyreComm_t> comms(n, nullptr);
  const int devices[n] = {0, 0, 0};
  OK(gyreCommInitAll(comms.data(), n, devices));
  for (int r = 0; r < n; ++r) {
    int rank = -1, count = -1;
    OK(gyreCommUserRank(comms[r], &rank));
    OK(gyreCommCount(comms[r], &count));
    CHECK(rank == r);
    CHECK(count == n);
  }
  std::vector<std::vector<int64_t>> values(n, std::vector<int64_t>(777));
  for (int r = 0; r < n; ++r) std::iota(values[r].begin(), values[r].end(), int64_t(r) << 32);
  std::vector<std::vector<int64_t>> gathered(n, std::vector<int64_t>(777 * n, -1));
  OK(gyreGroupStart());
  for (int r = 0; r < n; ++r)
    OK(gyreAllReduce(values[r].data(), values[r].data(), 777, gyreInt64, gyreMax, comms[r],
                     nullptr));
  OK(gyreGroupEnd());
  OK(gyreGroupStart());
  for (int r = 0; r < n; ++r)
    OK(gyreAllGather(values[r].data(), gathered[r].data(), 777, gyreInt64, comms[r], nullptr));
  OK(gyreGroupEnd());
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < gathered[r].size(); ++i)
      REQUIRE(gathered[r][i] == (int64_t(2) << 32) + int64_t(i % 777));
  destroy(comms);

  gyreComm_t one = nullptr;
  CHECK(gyreCommInitAll(nullptr, 2, nullptr) == gyreInvalidArgument);
  CHECK(gyreCommInitAll(&one, 0, nullptr) == gyreInvalidArgument);
  CHECK(std::string(gyreGetLastError(nullptr)).find("ndev 0 is not positive") != std::string::npos);
  const int negative[2] = {0, -1};
  std::vector<gyreComm_t> two(2, nullptr);
  CHECK(gyreCommInitAll(two.data(), 2, negative) == gyreInvalidArgument);
  CHECK(std::string(gyreGetLastError(nullptr)).find("devlist[1] is -1") != std::string::npos);
  OK(gyreCommInitAll(&one, 1, nullptr));  // a job of one rank
  float x = 3;
  OK(gyreAllReduce(&x, &x, 1, gyreFloat32, gyreSum, one, nullptr));
  CHECK(x == 3.0f);
  CHECK(gyreCommDestroy(one) == gyreSuccess);
}

TEST_CASE("async: several calls in flight complete in issue order; wait, test and errors") {
  const int n = 3;
  auto comms = initComms(n);
  gyre::test::onThreads(n, [&](int r) {
    gyreComm_t c = comms[r];
    std::vector<std::vector<float>> bufs(6, std::vector<float>(100000));
    std::vector<gyreWork_t> works;
    for (int k = 0; k < 6; ++k) {
      std::fill(bufs[k].begin(), bufs[k].end(), float(r + k));
      OK(gyreGroupStart());
      OK(gyreAllReduce(bufs[k].data(), bufs[k].data(), bufs[k].size(), gyreFloat32, gyreSum, c,
                       nullptr));
      gyreWork_t w = nullptr;
      OK(gyreGroupEndAsync(&w));
      works.push_back(w);
    }
    // A blocking call issued now runs after all six.
    float x = 1, y = 0;
    OK(gyreAllReduce(&x, &y, 1, gyreFloat32, gyreSum, c, nullptr));
    CHECK(y == 3.0f);
    for (int k = 0; k < 6; ++k) {
      int done = 0;
      OK(gyreWorkTest(works[k], &done));
      CHECK(done == 1);
      OK(gyreWorkWait(works[k], 1000));
      CHECK(bufs[k][99999] == float(3 * k + 3));
      OK(gyreWorkFree(works[k]));
    }
  });
  // A failure reaches the handle: rank 2 never takes part, and a short timeout expires.
  destroy(comms);
  float v = 1;
  gyreWork_t w = lonelyAllReduce(comms, v);
  CHECK(gyreWorkWait(w, 0) == gyreTimeout);
  CHECK(gyreWorkWait(w, 5000) == gyreTimeout);
  CHECK(std::string(gyreGetLastError(nullptr)).find("timed out after 0.5 s") != std::string::npos);
  OK(gyreWorkFree(w));
  destroy(comms);
}

TEST_CASE("finalize waits for every call issued; an in-place bcast") {
  const int n = 2;
  auto comms = initComms(n);
  gyre::test::onThreads(n, [&](int r) {
    gyreComm_t c = comms[r];
    std::vector<std::vector<float>> bufs(3, std::vector<float>(200000, float(r + 1)));
    std::vector<gyreWork_t> works(3);
    for (int k = 0; k < 3; ++k) {
      OK(gyreGroupStart());
      OK(gyreAllReduce(bufs[k].data(), bufs[k].data(), bufs[k].size(), gyreFloat32, gyreSum, c,
                       nullptr));
      OK(gyreGroupEndAsync(&works[size_t(k)]));
    }
    OK(gyreCommFinalize(c));
    for (int k = 0; k < 3; ++k) {
      int done = 0;
      OK(gyreWorkTest(works[size_t(k)], &done));
      CHECK(done == 1);
      CHECK(bufs[k][199999] == 3.0f);
      OK(gyreWorkFree(works[size_t(k)]));
    }
    int64_t value[2] = {r == 1 ? 11 : 0, r == 1 ? 22 : 0};
    OK(gyreBcast(value, 2, gyreInt64, 1, c, nullptr));
    CHECK(value[0] == 11);
    CHECK(value[1] == 22);
  });
  destroy(comms);
  // A call that failed (rank 1 never takes part, a short timeout) is what finalize returns.
  float v = 1;
  gyreWork_t w = lonelyAllReduce(comms, v);
  CHECK(gyreCommFinalize(comms[0]) == gyreTimeout);
  CHECK(std::string(gyreGetLastError(nullptr)).find("timed out after 0.5 s") != std::string::npos);
  OK(gyreWorkFree(w));
  CHECK(gyreCommFinalize(nullptr) == gyreInvalidArgument);
  destroy(comms);
}

TEST_CASE("async: a passive wait leaves the calls to the worker; waits refuse bad arguments") {
  const int n = 2;
  auto comms = initComms(n);
  gyre::test::onThreads(n, [&](int r) {
    std::vector<float> a(4096, float(r + 1)), b(8, float(r));
    gyreWork_t first = nullptr, second = nullptr;
    OK(gyreGroupStart());
    OK(gyreAllReduce(a.data(), a.data(), a.size(), gyreFloat32, gyreSum, comms[r], nullptr));
    OK(gyreGroupEndAsync(&first));
    OK(gyreGroupStart());
    OK(gyreAllReduce(b.data(), b.data(), b.size(), gyreFloat32, gyreSum, comms[r], nullptr));
    OK(gyreGroupEndAsync(&second));
    OK(gyreWorkWaitPassive(second, 30000));  // the worker ran both, in order
    int done = 0;
    OK(gyreWorkTest(first, &done));
    CHECK(done == 1);
    CHECK(a[4095] == 3.0f);
    CHECK(b[7] == 1.0f);
    CHECK(gyreWorkWait(first, -1) == gyreInvalidArgument);
    CHECK(gyreWorkWaitPassive(second, -1) == gyreInvalidArgument);
    OK(gyreWorkFree(first));
    OK(gyreWorkFree(second));
  });
  CHECK(gyreWorkWaitPassive(nullptr, 1) == gyreInvalidArgument);
  destroy(comms);
}

namespace {
// What an end callback saw: how often it ran, on which thread, and the all-reduce's results.
struct EndSeen {
  std::atomic<int> calls{0};
  std::thread::id thread;
  // Set around gyreWorkOnEnd: a work that ended before it calls back at once, on that thread.
  std::atomic<bool> registering{false};
  bool ranDuringRegistration = false;
  const std::vector<float>* a = nullptr;
  const std::vector<float>* b = nullptr;
  float aLast = 0, bLast = 0;
};
void recordEnd(void* arg) {
  auto& seen = *static_cast<EndSeen*>(arg);
  seen.thread = std::this_thread::get_id();
  seen.ranDuringRegistration = seen.registering.load();
  if (seen.a) seen.aLast = seen.a->back();
  if (seen.b) seen.bLast = seen.b->back();
  seen.calls.fetch_add(1);
}
}  // namespace

TEST_CASE("async: an end callback runs once, after every part ran, before the wait returns") {
  const int n = 2;
  auto comms = initComms(n);
  std::vector<gyreComm_t> children(n, nullptr);
  gyre::test::onThreads(n,
                        [&](int r) { OK(gyreCommSplit(comms[r], 0, r, &children[r], nullptr)); });
  gyre::test::onThreads(n, [&](int r) {
    // A group on two communicators (two parts), waited for passively: the worker threads run
    // it, and the part that ends last calls back, once, with both results written.
    std::vector<float> a(4096, float(r + 1)), b(8, float(r));
    EndSeen seen;
    seen.a = &a;
    seen.b = &b;
    gyreWork_t work = nullptr;
    OK(gyreGroupStart());
    OK(gyreAllReduce(a.data(), a.data(), a.size(), gyreFloat32, gyreSum, comms[r], nullptr));
    OK(gyreAllReduce(b.data(), b.data(), b.size(), gyreFloat32, gyreSum, children[r], nullptr));
    OK(gyreGroupEndAsync(&work));
    seen.registering = true;
    OK(gyreWorkOnEnd(work, recordEnd, &seen));
    seen.registering = false;
    OK(gyreWorkWaitPassive(work, 30000));
    CHECK(seen.calls.load() == 1);
    // A slow machine (a sanitizer's build) may finish the group before the callback is set.
    CHECK((seen.thread != std::this_thread::get_id() || seen.ranDuringRegistration));
    CHECK(seen.aLast == 3.0f);
    CHECK(seen.bLast == 1.0f);
    // One callback per work; null arguments are refused.
    CHECK(gyreWorkOnEnd(work, recordEnd, &seen) == gyreInvalidUsage);
    CHECK(gyreWorkOnEnd(work, nullptr, &seen) == gyreInvalidArgument);
    CHECK(seen.calls.load() == 1);
    OK(gyreWorkFree(work));
    // On a work that has run, the callback runs at once, on this thread.
    EndSeen late;
    OK(gyreGroupStart());
    OK(gyreAllReduce(b.data(), b.data(), b.size(), gyreFloat32, gyreSum, comms[r], nullptr));
    OK(gyreGroupEndAsync(&work));
    OK(gyreWorkWait(work, 30000));
    OK(gyreWorkOnEnd(work, recordEnd, &late));
    CHECK(late.calls.load() == 1);
    CHECK(late.thread == std::this_thread::get_id());
    CHECK(b[7] == 2.0f);
    OK(gyreWorkFree(work));
  });
  CHECK(gyreWorkOnEnd(nullptr, recordEnd, nullptr) == gyreInvalidArgument);
  destroy(children);
  destroy(comms);
}

// Stream-ordered calls (docs/cuda.md) check their arguments before any CUDA work, so these run
// everywhere: the stream handle below is never handed to CUDA.
TEST_CASE("stream-ordered calls: argument errors are returned at once and poison nothing") {
  const int n = 2;
  auto comms = initComms(n);
  const auto stream = reinterpret_cast<gyreStream_t>(uintptr_t(0x10));
  const auto other = reinterpret_cast<gyreStream_t>(uintptr_t(0x20));
  gyre::test::onThreads(n, [&](int r) {
    gyreComm_t c = comms[r];
    float buf[8] = {};
    const std::string rank = "rank " + std::to_string(r);
    refused(gyreBroadcast(buf, buf, 4, gyreFloat32, 5, c, stream), gyreInvalidArgument,
            rank + ": broadcast: root 5 is outside [0, 2)");
    refused(gyreSend(buf, 4, gyreFloat32, -1, c, stream), gyreInvalidArgument,
            rank + ": send: peer -1 is outside [0, 2)");
    refused(gyreAllReduce(nullptr, buf, 4, gyreFloat32, gyreSum, c, stream), gyreInvalidArgument,
            rank + ": all_reduce: sendbuff is null");
    refused(gyreAllReduce(buf, buf + 1, 4, gyreFloat32, gyreSum, c, stream), gyreInvalidArgument,
            "overlap without being in place");
    refused(gyreAllGatherV(buf, 1, buf, nullptr, nullptr, gyreFloat32, c, stream),
            gyreInvalidArgument, rank + ": all_gather_v: recvcounts is null");
    // Groups: one stream per communicator, no mixing with host calls, no gyreGroupEndAsync.
    OK(gyreGroupStart());
    OK(gyreAllReduce(buf, buf, 4, gyreFloat32, gyreSum, c, stream));
    OK(gyreAllReduce(buf, buf, 4, gyreFloat32, gyreSum, c, other));
    refused(gyreGroupEnd(), gyreInvalidUsage, "must use one stream");
    OK(gyreGroupStart());
    OK(gyreAllReduce(buf, buf, 4, gyreFloat32, gyreSum, c, nullptr));
    OK(gyreAllReduce(buf, buf, 4, gyreFloat32, gyreSum, c, stream));
    refused(gyreGroupEnd(), gyreInvalidUsage, "mixes stream-ordered calls");
    OK(gyreGroupStart());
    OK(gyreAllReduce(buf, buf, 4, gyreFloat32, gyreSum, c, stream));
    gyreWork_t work = nullptr;
    refused(gyreGroupEndAsync(&work), gyreInvalidUsage, "use gyreGroupEnd");
    CHECK(work == nullptr);
#ifndef GYRE_HAVE_CUDA
    refused(gyreAllReduce(buf, buf, 4, gyreFloat32, gyreSum, c, stream), gyreInvalidArgument,
            "no CUDA support");
#endif
    // Nothing was poisoned, nothing was left deferred: host calls go on.
    gyreResult_t async = gyreInternalError;
    OK(gyreCommGetAsyncError(c, &async));
    CHECK(async == gyreSuccess);
    float one = 1;
    OK(gyreAllReduce(&one, &one, 1, gyreFloat32, gyreSum, c, nullptr));
    CHECK(one == float(n));
  });
  destroy(comms);
}
