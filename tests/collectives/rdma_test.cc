// The rdma transport's own failure paths. Its collectives run in matrix_test.cc; both need a
// device and skip without one (CI runs them inside the Soft-RoCE guest: rdma_tests.sh).
#include <doctest/doctest.h>
#include <sys/socket.h>

#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

#include "tests/harness/checks.h"
#include "tests/harness/peer_leaves.h"
#include "tests/harness/rdma.h"
#include "tests/harness/thread_ranks.h"
#ifdef GYRE_HAVE_IBVERBS
#include "transport/rdma/rdma_connection.h"
#endif

using namespace gyre;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

using test::contains;
using test::failureOf;

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
  status = failureOf([&] { test::ThreadJob job(2, overRdma(20000ms), "rdma-missing"); });
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
  test::checkPeerLeavesMidJob(job);
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
    result[r] =
        failureOf([&] { c.allReduce(a.data(), b.data(), 10 + r, DataType::f32, RedOp::sum); });
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

#ifdef GYRE_HAVE_IBVERBS
// Two connections in one process, wired to each other by hand, the second told a wrong memory
// key for the first: data flows one way, and the other way the adapter refuses the write. The
// failed work completion (not the socket, which stays open) fails the connection, naming the
// peer and the adapter's reason.
TEST_CASE("over rdma: a failed work completion fails the connection, naming the peer") {
  std::string why;
  auto device = openRdmaDevice("", -1, why);
  if (!device) {
    MESSAGE("skipped: no rdma device: " << why);
    return;
  }
  LinkConfig config;
  config.nranks = 2;
  config.nSlots = 4;
  config.slotBytes = 256;
  auto a = std::make_unique<RdmaEndpoint>(device, config.nSlots, config.slotBytes);
  auto b = std::make_unique<RdmaEndpoint>(device, config.nSlots, config.slotBytes);
  const RdmaAddress addressA = a->address(), addressB = b->address();
  a->connect(addressB);
  b->connect(addressA);
  RdmaAddress wrongA = addressA;
  wrongA.rkey ^= 0x5a5a00;
  int fds[2];
  REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, fds) == 0);
  RdmaConnection rank0(std::move(a), addressB, fds[0], 0, 1, 0, config);
  RdmaConnection rank1(std::move(b), wrongA, fds[1], 1, 0, 0, config);

  auto publish = [](Connection& c, uint8_t fill) {
    Link& link = c.sendLink();
    const uint32_t index = link.counters->tail.value.load();
    link.meta(index).bytes = 64;
    link.meta(index).seq = index + 1;
    std::memset(link.slot(index), fill, 64);
    link.counters->tail.value.store(index + 1);
    c.sendPublished();
  };
  publish(rank0, 0x5a);
  Link& in = rank1.recvLink();
  const auto deadline = Clock::now() + 10s;
  while (in.counters->tail.value.load() == 0 && Clock::now() < deadline) {
    rank1.awaitRecv(Clock::now() + 20ms);
  }
  REQUIRE(in.counters->tail.value.load() == 1);
  CHECK(in.meta(0).bytes == 64);
  CHECK(in.meta(0).seq == 1);
  CHECK(std::to_integer<int>(in.slot(0)[0]) == 0x5a);
  CHECK(std::to_integer<int>(in.slot(0)[63]) == 0x5a);
  CHECK(rank1.failure().ok());

  publish(rank1, 0x33);
  const auto start = Clock::now();
  Status status;
  while ((status = rank1.failure()).ok() && Clock::now() - start < 20s) {
    rank1.awaitSend(Clock::now() + 20ms);
  }
  CAPTURE(status.message);
  CHECK(status.code == Code::remote_error);
  CHECK(contains(status.message, "rank 1: rdma connection to rank 0 on " + device->name));
  CHECK(contains(status.message, "the RDMA write of a slot failed: remote access error"));
  CHECK(Clock::now() - start < 10s);
}
#endif

// gyreSend from a registered buffer: over rdma its slots leave straight from the buffer (the
// count of such slots grows), results stay exact, and after deregistering it copies again.
// Without a device the registration is accepted and changes nothing.
TEST_CASE("registered buffers: sends go straight from them over rdma, results exact") {
  const bool haveRdma = test::rdmaMissing().empty();
  CommConfig config = overRdma(30000ms);
  if (!haveRdma) config.transport = "tcp";
  test::ThreadJob job(2, config, "registered");
  const size_t count = 10007;  // 256-byte slots: 157 of them
  std::vector<std::vector<float>> bufs(2, std::vector<float>(count));
  std::vector<void*> handles(2);
  job.run(
      [&](Communicator& c, int r) { handles[r] = c.registerBuffer(bufs[r].data(), count * 4); });
  auto roundTrip = [&](float seed) {
    job.run([&](Communicator& c, int r) {
      if (r == 0) {
        for (size_t i = 0; i < count; ++i) bufs[0][i] = seed + float(i);
        c.send(bufs[0].data(), count, DataType::f32, 1);
      } else {
        std::fill(bufs[1].begin(), bufs[1].end(), -1.0f);
        c.recv(bufs[1].data(), count, DataType::f32, 0);
        for (size_t i = 0; i < count; ++i) REQUIRE(bufs[1][i] == seed + float(i));
      }
    });
  };
  const unsigned slots = haveRdma ? 157 : 0;
  auto directDelta = [&](float seed) {
    const uint64_t before = job.comm(0).directSends();
    roundTrip(seed);
    return job.comm(0).directSends() - before;
  };
  CHECK(directDelta(1.0f) == slots);
  CHECK(job.comm(1).directSends() == 0);  // it only received

  // A group exchange: both sends leave straight from their buffers. Then an exchange in
  // place (each receive writes the buffer its send reads): those sends copy, and the swap is
  // exact.
  std::vector<std::vector<float>> into(2, std::vector<float>(count));
  auto exchange = [&](bool inPlace) {
    job.run([&](Communicator& c, int r) {
      for (size_t i = 0; i < count; ++i) bufs[r][i] = float(r * 100000) + float(i);
      std::fill(into[r].begin(), into[r].end(), -1.0f);
      float* target = inPlace ? bufs[r].data() : into[r].data();
      GroupOp send, recv;
      send.coll = recv.coll = Collective::send_recv;
      send.type = recv.type = DataType::f32;
      send.count = recv.count = count;
      send.peer = recv.peer = 1 - r;
      send.send = bufs[r].data();
      send.isSend = true;
      recv.recv = target;
      c.runGroup({send, recv});
      for (size_t i = 0; i < count; ++i) REQUIRE(target[i] == float((1 - r) * 100000) + float(i));
    });
  };
  const uint64_t before0 = job.comm(0).directSends(), before1 = job.comm(1).directSends();
  exchange(false);
  CHECK(job.comm(0).directSends() - before0 == slots);
  CHECK(job.comm(1).directSends() - before1 == slots);
  exchange(true);
  CHECK(job.comm(0).directSends() - before0 == slots);
  CHECK(job.comm(1).directSends() - before1 == slots);

  // The same buffer registered twice shares one region: it stays until both handles go.
  void* again = job.comm(0).registerBuffer(bufs[0].data(), count * 4);
  job.comm(0).deregisterBuffer(handles[0]);
  CHECK(directDelta(2.0f) == slots);
  // Registered again at half the size (a buffer reused at another size): the region now
  // covers only the first half, so slots beyond it are copied; the results stay exact.
  void* half = job.comm(0).registerBuffer(bufs[0].data(), count * 2);
  const uint64_t halfDirect = directDelta(3.0f);
  if (haveRdma) {
    CHECK(halfDirect > 0);
    CHECK(halfDirect < slots / 2 + 1);
  }
  job.comm(0).deregisterBuffer(again);
  CHECK(directDelta(4.0f) == halfDirect);  // `half` still holds the region
  job.comm(0).deregisterBuffer(half);
  job.comm(1).deregisterBuffer(handles[1]);
  CHECK(directDelta(5.0f) == 0);  // nothing registered: copied

  Status status;
  status = failureOf([&] { job.comm(0).deregisterBuffer(handles[0]); });  // twice
  CHECK(status.code == Code::invalid_argument);
  CHECK(contains(status.message, "not a handle gyreCommRegister gave this communicator"));
  if (!haveRdma) MESSAGE("no rdma device: checked that registration changes nothing");
}

// GPUDirect RDMA's send path, with host memory standing in for device memory (the CPU must
// not read it): every slot leaves straight from the registration, exact; a buffer no
// registration covers (or a peer not over rdma) is refused before anything moves, and the
// communicator goes on.
TEST_CASE(
    "unstaged sends over rdma (GPUDirect's path): straight from registrations, else refused") {
  const bool haveRdma = test::rdmaMissing().empty();
  CommConfig config = overRdma(30000ms);
  if (!haveRdma) config.transport = "tcp";
  test::ThreadJob job(2, config, "unstaged");
  const size_t count = 10007;  // 256-byte slots: 157 of them
  std::vector<float> source(count), received(count), unregistered(count);
  for (size_t i = 0; i < count; ++i) source[i] = 0.5f + float(i);
  void* handle = job.comm(0).registerBuffer(source.data(), count * 4);
  CHECK(job.comm(0).sendsUnstaged(1, source.data(), count * 4) == haveRdma);
  CHECK_FALSE(job.comm(0).sendsUnstaged(1, source.data(), count * 4 + 4));  // past its end
  CHECK_FALSE(job.comm(0).sendsUnstaged(0, source.data(), 4));              // to itself
  CHECK_FALSE(job.comm(1).sendsUnstaged(0, source.data(), 4));  // rank 1 registered nothing
  if (haveRdma) {
    const uint64_t before = job.comm(0).directSends();
    job.run([&](Communicator& c, int r) {
      if (r == 0) {
        c.sendUnstaged(source.data(), count, DataType::f32, 1);
      } else {
        std::fill(received.begin(), received.end(), -1.0f);
        c.recv(received.data(), count, DataType::f32, 0);
      }
    });
    CHECK(job.comm(0).directSends() - before == 157);
    for (size_t i = 0; i < count; ++i) REQUIRE(received[i] == source[i]);
  }

  const Status status =
      failureOf([&] { job.comm(0).sendUnstaged(unregistered.data(), count, DataType::f32, 1); });
  CHECK(status.code == Code::invalid_usage);
  CHECK(contains(status.message, "rank 0: send: no registration with the rdma adapter covers"));
  // Nothing was sent: the next send and receive pair up as usual.
  job.run([&](Communicator& c, int r) {
    if (r == 0) {
      for (size_t i = 0; i < count; ++i) unregistered[i] = 3.0f * float(i);
      c.send(unregistered.data(), count, DataType::f32, 1);
    } else {
      std::fill(received.begin(), received.end(), -1.0f);
      c.recv(received.data(), count, DataType::f32, 0);
      for (size_t i = 0; i < count; ++i) REQUIRE(received[i] == 3.0f * float(i));
    }
  });
  // Registered again at half the size, the region covers half: only that half qualifies.
  void* half = job.comm(0).registerBuffer(source.data(), count * 2);
  CHECK_FALSE(job.comm(0).sendsUnstaged(1, source.data(), count * 4));
  CHECK(job.comm(0).sendsUnstaged(1, source.data(), count * 2) == haveRdma);
  job.comm(0).deregisterBuffer(half);
  job.comm(0).deregisterBuffer(handle);
  CHECK_FALSE(job.comm(0).sendsUnstaged(1, source.data(), 4));
  if (!haveRdma) MESSAGE("no rdma device: checked the refusals over tcp");
}

// A peer that sends its last data and leaves at once: the data is in place before its
// connection closes, so the receiver must use it even when it notices the closing first (over
// rdma the data waits in the completion queue until someone polls it; no busy phase here, so
// the first look is at the closed socket). Over tcp where there is no device.
TEST_CASE(
    "over rdma (tcp without a device): data sent right before the sender leaves is received") {
  CommConfig config = overRdma(20000ms);
  if (!test::rdmaMissing().empty()) config.transport = "tcp";
  config.spin = std::chrono::microseconds(0);
  const size_t count = 150;  // three of the four 256-byte slots: sent without waiting for credit
  for (int round = 0; round < 3; ++round) {
    test::ThreadJob job(2, config, "send-then-leave-" + std::to_string(round));
    std::vector<float> received(count, -1.0f);
    std::mutex mutex;
    std::condition_variable changed;
    bool left = false;
    Status sent, status;
    job.run([&](Communicator& c, int r) {
      if (r == 0) {
        std::vector<float> data(count);
        for (size_t i = 0; i < count; ++i) data[i] = float(i) + 0.5f;
        sent = failureOf([&] { c.send(data.data(), count, DataType::f32, 1); });
        job.destroy(0);  // flushes, then closes
        std::lock_guard lock(mutex);
        left = true;
        changed.notify_all();
      } else {
        {
          std::unique_lock lock(mutex);
          changed.wait_for(lock, 30s, [&] { return left; });
        }
        // A receiver that comes late: the socket's end-of-stream arrives before it looks.
        std::this_thread::sleep_for(50ms);
        status = failureOf([&] { c.recv(received.data(), count, DataType::f32, 0); });
      }
    });
    CAPTURE(sent.message);
    CAPTURE(status.message);
    CHECK(sent.ok());
    CHECK(status.ok());
    size_t wrong = 0;
    for (size_t i = 0; i < count; ++i) wrong += received[i] != float(i) + 0.5f;
    CHECK(wrong == 0);
  }
}
