// The check the transports' tests share for a rank that leaves mid-job.
#pragma once

#include <doctest/doctest.h>

#include <chrono>
#include <vector>

#include "tests/harness/checks.h"
#include "tests/harness/thread_ranks.h"

namespace gyre::test {

// `job` has three ranks: rank 2 leaves, and the all-reduce the other two then start fails on
// both well inside the job's timeout, naming the call and the rank that left (rank 0 sees it
// directly, rank 1 through the recorded cause).
inline void checkPeerLeavesMidJob(ThreadJob& job) {
  using namespace std::chrono_literals;
  job.destroy(2);
  const auto start = std::chrono::steady_clock::now();
  std::vector<Status> result(2);
  onThreads(2, [&](int r) {
    std::vector<float> a(4096, 1.0f), b(4096);
    result[size_t(r)] = failureOf(
        [&] { job.comm(r).allReduce(a.data(), b.data(), 4096, DataType::f32, RedOp::sum); });
  });
  CHECK(std::chrono::steady_clock::now() - start < 10s);
  for (const Status& s : result) {
    CAPTURE(s.message);
    CHECK(s.code == Code::remote_error);
    CHECK(contains(s.message, "all_reduce #1"));
    CHECK(contains(s.message, "rank 2"));
  }
}

}  // namespace gyre::test
