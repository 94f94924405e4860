// The set-up socket: its peer's end closing is a failure naming the peer; a peer that failed
// first says why on it, and that cause (with the rank it lost) becomes this side's failure.
#include <doctest/doctest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "transport/setup_socket.h"

using namespace gyre;

namespace {

// Waits (2 s at most) until the peer's end closed or spoke, then asks at once.
Status awaitFailure(const SetupSocket& s) {
  pollfd ready{s.fd(), POLLIN, 0};
  REQUIRE(::poll(&ready, 1, 2000) == 1);
  s.lookNow();
  return s.failure();
}

}  // namespace

TEST_CASE("set-up socket: a plain close names the peer") {
  int fds[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) == 0);
  SetupSocket near(fds[0], "rank 0: rank 1 failed over shm: ", 1);
  SetupSocket far(fds[1], "rank 1: rank 0 failed over shm: ", 0);
  CHECK(near.failure().ok());
  CHECK(far.shutdown());
  CHECK_FALSE(far.shutdown());  // once
  const Status s = awaitFailure(near);
  CHECK(s.code == Code::remote_error);
  CHECK(s.lostRank == 1);
  CHECK(s.message ==
        "rank 0: rank 1 failed over shm: its end of the connection closed (it "
        "exited or failed)");
}

TEST_CASE("set-up socket: a peer that failed first passes on its cause and the rank it lost") {
  int fds[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) == 0);
  SetupSocket near(fds[0], "rank 3: rank 2 failed over shm: ", 2);
  SetupSocket far(fds[1], "rank 2: rank 3 failed over shm: ", 3);
  const Status cause{Code::remote_error, "rank 1 is gone (noticed by rank 2): receive timed out",
                     1};
  CHECK(far.shutdown(&cause));
  const Status s = awaitFailure(near);
  CHECK(s.code == Code::remote_error);
  CHECK(s.lostRank == 1);
  CHECK(s.message ==
        "rank 3: rank 2 failed over shm: it failed: rank 1 is gone (noticed by rank "
        "2): receive timed out");
}

TEST_CASE("set-up socket: bytes that are no cause are reported as such") {
  int fds[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) == 0);
  SetupSocket near(fds[0], "rank 0: rank 1 failed over shm: ", 1);
  REQUIRE(::send(fds[1], "GYREFAIL 99 1\nx", 15, 0) == 15);  // a code that does not exist
  const Status s = awaitFailure(near);
  CHECK(s.lostRank == 1);
  CHECK(s.message == "rank 0: rank 1 failed over shm: it sent unexpected bytes");
  ::close(fds[1]);
}
