// The rdma transport's own failure paths. Its collectives run in matrix_test.cc; both need a
// device and skip without one (CI runs them inside the Soft-RoCE guest: rdma_tests.sh).
#include <doctest/doctest.h>

#include "tests/harness/rdma.h"
#include "tests/harness/thread_ranks.h"

using namespace gyre;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

CommConfig overRdma(std::chrono::milliseconds timeout) {
  CommConfig c = test::tinySlots(timeout);
  c.transport = "rdma";
  return c;
}

}  // namespace

TEST_CASE("GYRE_TRANSPORT=rdma without a device fails at creation, saying why") {
  const std::string missing = test::rdmaMissing();
  if (missing.empty()) {
    MESSAGE("skipped: this machine has an rdma device");
    return;
  }
  const auto start = Clock::now();
  Status status;
  try {
    test::ThreadJob job(2, overRdma(20000ms), "rdma-missing");
  } catch (const Failure& f) {
    status = f.status();
  }
  CAPTURE(status.message);
  CHECK(status.code == Code::invalid_usage);
  CHECK(contains(status.message, "GYRE_TRANSPORT=rdma but rank"));
  CHECK(contains(status.message, missing));
  CHECK(Clock::now() - start < 10s);
}

TEST_CASE("over rdma: a peer that leaves mid-job fails every rank fast, naming who was lost") {
  if (const std::string missing = test::rdmaMissing(); !missing.empty()) {
    MESSAGE("skipped: no rdma device: " << missing);
    return;
  }
  test::ThreadJob job(3, overRdma(30000ms), "rdma-peer-leaves");
  job.destroy(2);
  const auto start = Clock::now();
  std::vector<Status> result(2);
  test::onThreads(2, [&](int r) {
    std::vector<float> a(4096, 1.0f), b(4096);
    try {
      job.comm(r).allReduce(a.data(), b.data(), 4096, DataType::f32, RedOp::sum);
    } catch (const Failure& f) {
      result[r] = f.status();
    }
  });
  CHECK(Clock::now() - start < 10s);
  for (int r = 0; r < 2; ++r) {
    CAPTURE(result[r].message);
    CHECK(result[r].code == Code::remote_error);
    CHECK(contains(result[r].message, "all_reduce #1"));
    CHECK(contains(result[r].message, "rank 2"));
  }
}

TEST_CASE("over rdma: ranks that disagree on a collective fail naming both sides") {
  if (const std::string missing = test::rdmaMissing(); !missing.empty()) {
    MESSAGE("skipped: no rdma device: " << missing);
    return;
  }
  test::ThreadJob job(2, overRdma(20000ms), "rdma-mismatch");
  std::vector<Status> result(2);
  job.run([&](Communicator& c, int r) {
    std::vector<float> a(64, 1.0f), b(64);
    try {
      c.allReduce(a.data(), b.data(), 10 + r, DataType::f32, RedOp::sum);
    } catch (const Failure& f) {
      result[r] = f.status();
    }
  });
  int invalidUsage = 0;
  for (int r = 0; r < 2; ++r) {
    CAPTURE(result[r].message);
    CHECK(result[r].code != Code::success);
    if (result[r].code == Code::invalid_usage) {
      ++invalidUsage;
      CHECK(contains(result[r].message, "ranks disagree"));
    }
  }
  CHECK(invalidUsage >= 1);
}
