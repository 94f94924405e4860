// The measured choice (GYRE_TUNE=measure, runtime/core/measured_choice.h), ranks as threads over
// shared memory: calls of several collectives and sizes, interleaved, try their algorithms,
// every rank settles each class on the same one, and every element comes out exact throughout.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "runtime/core/measured_choice.h"
#include "tests/harness/thread_ranks.h"

using namespace gyre;

namespace {

constexpr size_t kCounts[] = {16 << 10, 128 << 10};  // int32: 64 KiB and 512 KiB
constexpr Collective kColls[] = {Collective::all_reduce, Collective::all_gather,
                                 Collective::broadcast};

// `rounds` times, each size's all-reduce, all-gather and broadcast in turn, outputs poisoned
// first and checked exactly; the first wrong element per rank in `wrong`.
void callAll(test::ThreadJob& job, int rounds, std::vector<std::string>& wrong) {
  const int n = job.size();
  job.run([&](Communicator& c, int r) {
    auto note = [&](bool ok, const std::string& what) {
      if (!ok && wrong[size_t(r)].empty()) {
        wrong[size_t(r)] = "rank " + std::to_string(r) + ": " + what;
      }
    };
    for (int i = 0; i < rounds; ++i) {
      for (size_t count : kCounts) {
        const auto value = [&](int rank, size_t k) {
          return int32_t(rank * 7919 + i) + int32_t(k % 100003);
        };
        std::vector<int32_t> in(count), out(count * size_t(n) + 1);
        for (size_t k = 0; k < count; ++k) in[k] = value(r, k);
        std::fill(out.begin(), out.end(), -7);
        c.allReduce(in.data(), out.data(), count, DataType::i32, RedOp::sum);
        for (size_t k = 0; k < count; ++k) {
          int32_t sum = 0;
          for (int p = 0; p < n; ++p) sum += value(p, k);
          note(out[k] == sum, "all_reduce element " + std::to_string(k));
        }
        note(out[count] == -7, "all_reduce wrote past its buffer");
        std::fill(out.begin(), out.end(), -7);
        c.allGather(in.data(), out.data(), count, DataType::i32);
        for (int p = 0; p < n; ++p) {
          for (size_t k = 0; k < count; ++k) {
            note(out[size_t(p) * count + k] == value(p, k), "all_gather from " + std::to_string(p));
          }
        }
        note(out[count * size_t(n)] == -7, "all_gather wrote past its buffer");
        const int root = i % n;
        std::fill(out.begin(), out.end(), -7);
        if (r == root) std::copy(in.begin(), in.end(), out.begin());
        c.broadcast(out.data(), out.data(), count, DataType::i32, root);
        for (size_t k = 0; k < count; ++k) note(out[k] == value(root, k), "broadcast");
        note(out[count] == -7, "broadcast wrote past its buffer");
      }
    }
  });
}

}  // namespace

TEST_CASE("measured choice: every rank settles each size on the same algorithm, exact") {
  const int n = 2;
  if (std::thread::hardware_concurrency() < unsigned(n)) {
    MESSAGE(
        "skipped: the measured choice runs only where every rank has a core, and this "
        "machine has "
        << std::thread::hardware_concurrency());
    return;
  }
  CommConfig config;
  config.timeout = std::chrono::seconds(60);
  test::ThreadJob job(n, config, "measured-choice");
  // Every class runs its settling calls, tries its algorithms in turn, then decides at its
  // next call.
  const int rounds = MeasuredChoice::kSettlingCalls +
                     MeasuredChoice::kMostAlgorithms * MeasuredChoice::kTrialsEach + 2;
  std::vector<std::string> wrong(n);
  callAll(job, rounds, wrong);
  for (int r = 0; r < n; ++r) CHECK_MESSAGE(wrong[size_t(r)].empty(), wrong[size_t(r)]);
  const MeasuredChoices zero = job.comm(0).measuredChoices();
  const MeasuredChoices one = job.comm(1).measuredChoices();
  if (!zero.measuring) {
    MESSAGE("skipped: no measured choice here (the ranks share cores)");
    CHECK(zero.trialCalls == 0);
    return;
  }
  CHECK(one.measuring);
  MESSAGE(zero.trialCalls << " trial calls, " << zero.decisions << " decisions, " << zero.changes
                          << " away from the model's pick");
  CHECK(zero.trialCalls > 0);
  CHECK(one.trialCalls == zero.trialCalls);
  CHECK(one.decisions == zero.decisions);
  CHECK(one.changes == zero.changes);
  for (Collective coll : kColls) {
    for (size_t count : kCounts) {
      const size_t bytes = count * 4 * (coll == Collective::all_gather ? size_t(n) : 1);
      CAPTURE(int(coll));
      CAPTURE(bytes);
      const std::string settled = job.comm(0).measuredAlgorithm(coll, bytes);
      CHECK_FALSE(settled.empty());
      CHECK(job.comm(1).measuredAlgorithm(coll, bytes) == settled);
    }
  }
}

TEST_CASE("measured choice: none under GYRE_TUNE=model or a forced algorithm") {
  const int n = 2;
  for (const bool forced : {false, true}) {
    CAPTURE(forced);
    CommConfig config;
    config.timeout = std::chrono::seconds(60);
    if (forced) {
      config.algorithm = "ring";
    } else {
      config.tune = CommConfig::Tune::model;
    }
    test::ThreadJob job(n, config, forced ? "measured-choice-forced" : "measured-choice-model");
    std::vector<std::string> wrong(n);
    callAll(job, 3, wrong);
    for (int r = 0; r < n; ++r) CHECK_MESSAGE(wrong[size_t(r)].empty(), wrong[size_t(r)]);
    for (int r = 0; r < n; ++r) {
      const MeasuredChoices m = job.comm(r).measuredChoices();
      CHECK_FALSE(m.measuring);
      CHECK(m.trialCalls == 0);
      CHECK(job.comm(r).measuredAlgorithm(Collective::all_reduce, 64 << 10).empty());
    }
  }
}

// A rank that left before a class's deciding call: the exchange of trial times fails at once,
// naming it, not at the deadline.
TEST_CASE("measured choice: a peer that left fails the decision fast, naming it") {
  CommConfig config;
  config.timeout = std::chrono::seconds(60);
  test::ThreadJob job(2, config, "measured-choice-left");
  if (!job.comm(0).measuredChoices().measuring) {
    MESSAGE("skipped: no measured choice here (the ranks share cores)");
    return;
  }
  const size_t count = 16 << 10;  // int32: 64 KiB
  std::vector<std::vector<int32_t>> in(2, std::vector<int32_t>(count, 1)), out = in;
  const int most = MeasuredChoice::kSettlingCalls +
                   MeasuredChoice::kMostAlgorithms * MeasuredChoice::kTrialsEach;
  // One call at a time on both ranks, until the all-reduce's trials have all run.
  for (int i = 0; i < most && job.comm(0).measuredChoices().awaiting == 0; ++i) {
    job.run([&](Communicator& c, int r) {
      c.allReduce(in[size_t(r)].data(), out[size_t(r)].data(), count, DataType::i32, RedOp::sum);
    });
  }
  REQUIRE(job.comm(0).measuredChoices().awaiting == 1);
  CHECK(job.comm(1).measuredChoices().awaiting == 1);
  CHECK(job.comm(0).measuredChoices().decisions == 0);
  job.destroy(1);
  const auto start = std::chrono::steady_clock::now();
  try {
    job.comm(0).allReduce(in[0].data(), out[0].data(), count, DataType::i32, RedOp::sum);
    FAIL("the all-reduce returned without rank 1");
  } catch (const Failure& f) {
    const std::string what = f.what();
    CAPTURE(what);
    CHECK(f.status().code == Code::remote_error);
    CHECK(what.find("rank 1") != std::string::npos);
    CHECK(what.find("all_reduce") != std::string::npos);
  }
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));
  // The deciding call's exchange comes before its algorithm: it failed there.
  CHECK(job.comm(0).measuredChoices().decisions == 0);
}
