// The failure board: the first failure recorded is the one every later rank names, in a call
// or while it still sets the communicator up.
#include <doctest/doctest.h>

#include <string>

#include "runtime/core/failure_board.h"
#include "runtime/store/store.h"

using namespace gyre;

namespace {
bool startsWith(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}
}  // namespace

TEST_CASE("a rank still setting up names the peer lost first, not the socket that closed") {
  auto store = makeMemoryStore();
  FailureBoard rank0(store, 0, 4), rank2(store, 2, 4);
  OpDesc call;
  call.seq = 1;
  call.count = 4194304;
  // Rank 2 noticed rank 1 leave in its first call and records that first.
  const Status lost{Code::remote_error, "rank 2: rank 1 failed over rdma: its end closed", 1};
  const Status first = rank2.report(lost, call);
  CHECK(first.lostRank == 1);
  CHECK(startsWith(first.message,
                   "rank 1 is gone (it exited, was killed or became unreachable; "
                   "noticed by rank 2): rank 2: rank 1 failed"));
  // Rank 0, still connecting, sees a neighbour that failed after it close its socket.
  const Status closed{Code::remote_error,
                      "rank 0: setting up rdma with rank 3 (channel 0): the peer closed the "
                      "connection"};
  const Status named = rank0.report(closed, "setting up the communicator");
  CHECK(named.lostRank == 1);
  CHECK(named.code == Code::remote_error);
  INFO(named.message);
  CHECK(startsWith(named.message,
                   "rank 1 is gone (it exited, was killed or became unreachable; "
                   "noticed by rank 2): rank 0: setting up the communicator "
                   "stopped: rank 2: rank 1 failed over rdma"));
  CHECK(named.message.find("the peer closed") == std::string::npos);
}

TEST_CASE("a rank that fails first while setting up is what the others name") {
  auto store = makeMemoryStore();
  FailureBoard rank0(store, 0, 3), rank1(store, 1, 3);
  CHECK(rank1.recorded().ok());
  const Status own{Code::system_error, "rank 0: setting up rdma with rank 1: no usable device"};
  const Status mine = rank0.report(own, "setting up the communicator");
  CHECK(mine.message == own.message);  // first: its own words, nothing prefixed
  const Status seen = rank1.recorded();
  CHECK(seen.code == Code::system_error);
  CHECK(seen.message == "rank 0 failed: " + own.message);
  // A later failure on rank 1 names rank 0's.
  const Status later = rank1.report({Code::remote_error, "rank 1: the peer closed"}, OpDesc{});
  CHECK(startsWith(later.message, "rank 1: "));
  CHECK(later.message.find("failed because rank 0 failed first: " + own.message) !=
        std::string::npos);
}
