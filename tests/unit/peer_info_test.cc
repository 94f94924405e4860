// What a rank publishes through the bootstrap survives the round trip, and garbage is refused.
#include <doctest/doctest.h>

#include "base/status.h"
#include "transport/tcp/tcp_transport.h"
#include "transport/transport.h"

using namespace gyre;

TEST_CASE("peer info: every field survives encode and decode") {
  PeerInfo info;
  info.rank = 5;
  info.hostId = "node7:1b2c";
  info.parts.emplace("tcp", "10.0.0.7 40001");
  info.parts.emplace("shm", "1");
  info.cpus = {0, 1, 2, 3, 8, 10, 11};
  const PeerInfo back = PeerInfo::decode(info.encode());
  CHECK(back.rank == 5);
  CHECK(back.hostId == "node7:1b2c");
  CHECK(back.parts == info.parts);
  REQUIRE(back.part("tcp"));
  CHECK(*back.part("tcp") == "10.0.0.7 40001");
  CHECK(!back.part("rdma"));
  CHECK(back.cpus == info.cpus);
  CHECK(back.cores() == 7);
}

TEST_CASE("cpu lists: ranges both ways") {
  CHECK(formatCpuList({}) == "");
  CHECK(formatCpuList({4}) == "4");
  CHECK(formatCpuList({0, 1, 2, 3, 8, 10, 11}) == "0-3,8,10-11");
  CHECK(parseCpuList("0-3,8,10-11") == std::vector<int>{0, 1, 2, 3, 8, 10, 11});
  CHECK(parseCpuList("5,1,1-2") == std::vector<int>{1, 2, 5});  // sorted, no repeats
  CHECK(parseCpuList("").empty());
  CHECK(!allowedCpus().empty());  // this process runs somewhere
  for (const char* bad : {"x", "1-", "-1", "3-1", "1x", "2-3y", "99999999"}) {
    CAPTURE(bad);
    CHECK_THROWS(parseCpuList(bad));
  }
}

TEST_CASE("peer info: without a cpu list a rank counts as one core") {
  CHECK(PeerInfo::decode("rank=1\nhost=h\n").cores() == 1);
}

TEST_CASE("peer info: malformed entries fail clearly") {
  CHECK_THROWS_AS(PeerInfo::decode("host=h\n"), Failure);
  CHECK_THROWS_AS(PeerInfo::decode("rank=x\n"), Failure);
  CHECK_THROWS_AS(PeerInfo::decode("rank=1\ncpus=lots\n"), Failure);
  CHECK_THROWS_AS(PeerInfo::decode("rank=1\ncpus=4-2\n"), Failure);
}

TEST_CASE("tcp transport: reads its own part, refuses a malformed one") {
  PeerInfo peer;
  std::string host;
  uint16_t port = 0;
  CHECK(!TcpTransport::addressOf(peer, host, port));
  for (const char* bad : {"10.0.0.7", "10.0.0.7 ", "10.0.0.7 0", "10.0.0.7 70000", "h x"}) {
    CAPTURE(bad);
    peer.parts["tcp"] = bad;
    CHECK(!TcpTransport::addressOf(peer, host, port));
  }
  peer.parts["tcp"] = "::1 40001";
  REQUIRE(TcpTransport::addressOf(peer, host, port));
  CHECK(host == "::1");
  CHECK(port == 40001);
}
