// The shm connection's single copy: a stable payload offered from the sender's memory is read
// by the receiver straight into its target, the sender's call waits until it has, and a
// sender that gives up withdraws what was not read, so the receiver fails instead of reading
// memory its owner has taken back. Both ends live in this process: the kernel lets a process
// read itself, as it lets ranks of one user read each other.
#include <doctest/doctest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "tests/harness/single_copy.h"
#include "transport/shm/segment.h"
#include "transport/shm/shm_connection.h"

namespace gyre {
namespace {

constexpr uint32_t kSlotBytes = 64 * 1024;

struct Pair {
  std::shared_ptr<ShmConnection> sender, receiver;

  // `senderBytes`/`receiverBytes`: each side's singleCopyBytes.
  Pair(size_t senderBytes, size_t receiverBytes) {
    LinkConfig config;
    config.nSlots = 4;
    config.slotBytes = kSlotBytes;
    const size_t bytes = ShmLayout::of(config.nSlots, config.slotBytes).total;
    ShmSegment created = ShmSegment::create("/dev/shm", bytes);
    ShmSegment opened = ShmSegment::open(created.handle());
    created.closeHandle();
    int fds[2];
    REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, fds) == 0);
    config.singleCopyBytes = senderBytes;
    sender = std::make_shared<ShmConnection>(std::move(created), fds[0], 0, 1, 0, config);
    config.singleCopyBytes = receiverBytes;
    receiver = std::make_shared<ShmConnection>(std::move(opened), fds[1], 1, 0, 0, config);
    // The sender was set up first, so it learns only now whether it may read the receiver;
    // the receiver found out as it was built.
    sender->offerTarget({});
  }
  ~Pair() {
    sender->close();
    receiver->close();
  }

  // What HostPrims does around a send into a free slot: offer `src`, publish the slot.
  // `offset`: where in the slot a payload it fills goes (a spread payload).
  Taken publish(const std::byte* src, uint32_t bytes, bool stable = true,
                bool receiverInCall = true, bool senderIdle = false, uint32_t offset = 0,
                bool receiverCopies = true) {
    Link& link = sender->sendLink();
    const uint32_t tail = link.counters->tail.value.load();
    REQUIRE(tail - link.counters->head.value.load() < link.nSlots);
    const Taken taken =
        sender->offerSource({src, bytes, stable, true, receiverInCall, senderIdle, receiverCopies});
    if (taken == Taken::no) {
      if (uint64_t(offset) + bytes <= kSlotBytes) std::memcpy(link.slot(tail) + offset, src, bytes);
      link.meta(tail).offset = offset;
    }
    link.meta(tail).bytes = bytes;
    link.counters->tail.value.store(tail + 1);
    return taken;
  }
  // The receiver's side: the payload of its next slot into `target` (null: the slot).
  const std::byte* receive(std::byte* target) {
    Link& link = receiver->recvLink();
    const uint32_t head = link.counters->head.value.load();
    REQUIRE(link.counters->tail.value.load() != head);
    return receiver->recvPayload(head, target);
  }
  void release() {
    Link& link = receiver->recvLink();
    link.counters->head.value.store(link.counters->head.value.load() + 1);
    notifyAll(link.counters->head);
  }
};

std::vector<std::byte> pattern(size_t bytes, int seed) {
  std::vector<std::byte> v(bytes);
  for (size_t i = 0; i < bytes; ++i) v[i] = std::byte((i * 131 + size_t(seed)) & 0xff);
  return v;
}

Clock::time_point soon() {
  return Clock::now() + std::chrono::seconds(5);
}

}  // namespace

TEST_CASE("shm single copy: the receiver reads the sender's buffer into its own") {
  if (const std::string missing = test::singleCopyMissing(); !missing.empty()) {
    MESSAGE("skipped: " << missing);
    return;
  }
  Pair pair(4096, 4096);
  const auto source = pattern(kSlotBytes, 1);
  std::vector<std::byte> target(kSlotBytes, std::byte{0xee});
  CHECK(pair.publish(source.data(), kSlotBytes) == Taken::untilReleased);
  CHECK(pair.sender->directCounts().sentFromUser == 1);
  CHECK(pair.receive(target.data()) == target.data());
  CHECK(target == source);
  pair.release();
  CHECK(pair.sender->releaseSources(soon()).ok());

  // Without a target the payload lands in the slot, exact.
  const auto second = pattern(kSlotBytes, 2);
  CHECK(pair.publish(second.data(), kSlotBytes) == Taken::untilReleased);
  const std::byte* slot = pair.receive(nullptr);
  REQUIRE(slot != nullptr);
  CHECK(std::memcmp(slot, second.data(), kSlotBytes) == 0);
  pair.release();
  CHECK(pair.sender->releaseSources(soon()).ok());

  // Copied as usual: a payload that may change before the call returns, one under the
  // threshold, a lone send's (its receiver may come later, so it must not wait for it), and
  // one of a call the tuner sends through the slots (a large gather where ranks share cores).
  // The receiver then finds it in the slot.
  struct Copied {
    uint32_t bytes;
    bool stable, receiverInCall, receiverCopies;
  };
  for (const Copied& c :
       {Copied{kSlotBytes, false, true, true}, Copied{4095u, true, true, true},
        Copied{kSlotBytes, true, false, true}, Copied{kSlotBytes, true, true, false}}) {
    const auto data = pattern(c.bytes, 3);
    CHECK(pair.publish(data.data(), c.bytes, c.stable, c.receiverInCall, false, 0,
                       c.receiverCopies) == Taken::no);
    const uint32_t bytes = c.bytes;
    const std::byte* payload = pair.receive(target.data());
    CHECK(payload ==
          pair.receiver->recvLink().slot(pair.receiver->recvLink().counters->head.value.load()));
    CHECK(std::memcmp(payload, data.data(), bytes) == 0);
    pair.release();
  }
  CHECK(pair.sender->directCounts().sentFromUser == 2);
}

TEST_CASE("shm single copy: off where either side says 0") {
  if (const std::string missing = test::singleCopyMissing(); !missing.empty()) {
    MESSAGE("skipped: " << missing);
    return;
  }
  const auto source = pattern(kSlotBytes, 4);
  for (const auto& [senderBytes, receiverBytes] :
       {std::pair{size_t(0), size_t(4096)}, std::pair{size_t(4096), size_t(0)}}) {
    Pair pair(senderBytes, receiverBytes);
    CHECK(pair.publish(source.data(), kSlotBytes) == Taken::no);
    CHECK(std::memcmp(pair.receive(nullptr), source.data(), kSlotBytes) == 0);
    pair.release();
  }
}

TEST_CASE("shm single copy: an idle sender fills the slots while filling runs fast") {
  if (const std::string missing = test::singleCopyMissing(); !missing.empty()) {
    MESSAGE("skipped: " << missing);
    return;
  }
  Pair pair(4096, 4096);
  const auto source = pattern(kSlotBytes, 8);
  // One round trip of a slot, offered as an idle sender's and received exact either way; a
  // slot the sender filled itself is noted as taking `fill` (HostPrims times it).
  auto roundTrip = [&](Clock::duration fill) {
    const Taken taken = pair.publish(source.data(), kSlotBytes, true, true, /*senderIdle=*/true);
    if (taken == Taken::no) pair.sender->noteFill(kSlotBytes, fill);
    std::vector<std::byte> target(kSlotBytes, std::byte{0xee});
    const std::byte* got = pair.receive(target.data());
    REQUIRE(got != nullptr);
    CHECK(std::memcmp(got, source.data(), kSlotBytes) == 0);
    pair.release();
    if (taken == Taken::untilReleased) CHECK(pair.sender->releaseSources(soon()).ok());
    return taken;
  };
  const Clock::duration fast = std::chrono::microseconds(1);  // 64 KiB in 1 µs: above 8 GB/s
  const Clock::duration slow = std::chrono::milliseconds(1);  // 64 KiB in 1 ms: far below
  CHECK(roundTrip(fast) == Taken::no);
  // Slow fills broken by a fast one change nothing.
  CHECK(roundTrip(slow) == Taken::no);
  CHECK(roundTrip(fast) == Taken::no);
  for (int i = 0; i < 3; ++i) CHECK(roundTrip(slow) == Taken::no);
  CHECK(roundTrip(fast) == Taken::no);
  // Fills under the single-copy threshold do not count.
  for (int i = 0; i < 8; ++i) pair.sender->noteFill(4095, slow);
  for (int i = 0; i < 4; ++i) CHECK(roundTrip(slow) == Taken::no);
  // That was the fourth slow fill in a row: the next 256 offers go by single copy, then
  // filling is tried again.
  const uint64_t before = pair.sender->directCounts().sentFromUser;
  for (int i = 0; i < 256; ++i) REQUIRE(roundTrip(fast) == Taken::untilReleased);
  CHECK(pair.sender->directCounts().sentFromUser == before + 256);
  CHECK(roundTrip(fast) == Taken::no);
}

TEST_CASE("shm single copy: a sender that gives up withdraws what was not read") {
  if (const std::string missing = test::singleCopyMissing(); !missing.empty()) {
    MESSAGE("skipped: " << missing);
    return;
  }
  // Its call failed: the payload is withdrawn at once, and the receiver fails naming it
  // instead of reading a buffer its owner may be writing again.
  {
    Pair pair(4096, 4096);
    const auto source = pattern(kSlotBytes, 5);
    std::vector<std::byte> target(kSlotBytes, std::byte{0xee});
    CHECK(pair.publish(source.data(), kSlotBytes) == Taken::untilReleased);
    const auto before = Clock::now();
    pair.sender->abandonSources(soon());
    CHECK(Clock::now() - before < std::chrono::seconds(1));
    CHECK(pair.receive(target.data()) == nullptr);
    const Status s = pair.receiver->failure();
    CHECK(s.code == Code::remote_error);
    CHECK(s.lostRank == 0);
    CHECK(s.message.find("reading the data of rank 0 over shm failed: it withdrew its data") !=
          std::string::npos);
    CHECK(target == std::vector<std::byte>(kSlotBytes, std::byte{0xee}));  // untouched
  }
  // A receiver that never reads: the sender's wait ends at its deadline, naming it, and
  // withdraws the payload.
  {
    Pair pair(4096, 4096);
    const auto source = pattern(kSlotBytes, 6);
    CHECK(pair.publish(source.data(), kSlotBytes) == Taken::untilReleased);
    const Status s = pair.sender->releaseSources(Clock::now() + std::chrono::milliseconds(50));
    CHECK(s.code == Code::timeout);
    CHECK(s.message.find("rank 1 did not read the data sent to it over shm in time") !=
          std::string::npos);
    CHECK(pair.receive(nullptr) == nullptr);
  }
  // A receiver that went away: the sender's wait ends with the connection's failure.
  {
    Pair pair(4096, 4096);
    const auto source = pattern(kSlotBytes, 7);
    CHECK(pair.publish(source.data(), kSlotBytes) == Taken::untilReleased);
    pair.receiver->close();
    const Status s = pair.sender->releaseSources(soon());
    CHECK_FALSE(s.ok());
    CHECK(s.code != Code::timeout);
  }
}

TEST_CASE("shm: a spread payload is read where its header puts it; one past its slot fails") {
  Pair pair(0, 0);  // every payload in the slots
  Link& link = pair.receiver->recvLink();
  // Each round of the link puts a payload of 20000 bytes at the next of three 20 KiB places.
  for (uint32_t round = 0; round < 4; ++round) {
    for (uint32_t s = 0; s < link.nSlots; ++s) {
      const uint32_t index = round * link.nSlots + s;
      const uint32_t offset = spreadOffset(round, 20000, kSlotBytes);
      CHECK(offset == round % 3 * 20480);
      const auto data = pattern(20000, int(index));
      CHECK(pair.publish(data.data(), 20000, true, true, false, offset) == Taken::no);
      const std::byte* payload = pair.receive(nullptr);
      CHECK(payload == link.slot(index) + offset);
      REQUIRE(payload != nullptr);
      CHECK(std::memcmp(payload, data.data(), 20000) == 0);
      pair.release();
    }
  }
  // A header that puts the payload past the end of its slot: the receiver reads nothing and the
  // connection fails, naming the sender.
  const auto data = pattern(4096, 9);
  CHECK(pair.publish(data.data(), 4096, true, true, false, kSlotBytes - 4000) == Taken::no);
  CHECK(pair.receive(nullptr) == nullptr);
  const Status failed = pair.receiver->failure();
  CAPTURE(failed.message);
  CHECK(failed.code == Code::remote_error);
  CHECK(failed.lostRank == 0);
  CHECK(failed.message.find("rank 0 sent a payload of 4096 bytes at 61536 in a slot of 65536") !=
        std::string::npos);
}

TEST_CASE("spreadOffset: page-aligned places in turn, none for small payloads or whole slots") {
  const uint64_t slot = 128 << 10;
  CHECK(spreadOffset(5, kSpreadFromBytes - 1, slot) == 0);  // small: a line's round trip
  for (uint64_t round = 0; round < 20; ++round) {
    CHECK(spreadOffset(round, 8192, slot) == round % 16 * 8192);
    CHECK(spreadOffset(round, 40000, slot) == round % 3 * 40960);  // 3 places of 40 KiB
    CHECK(spreadOffset(round, 65536, slot) == round % 2 * 65536);
    CHECK(spreadOffset(round, 65537, slot) == 0);  // one place only
    CHECK(spreadOffset(round, 131072, slot) == 0);
  }
  // Every place lies wholly inside the region, up to the round counter's wrap.
  for (uint32_t bytes : {8192u, 9000u, 20000u, 50000u, 65536u}) {
    for (uint64_t round : {uint64_t(0), uint64_t(1), uint64_t(7), ~uint64_t(0), uint64_t(1) << 40})
      CHECK(spreadOffset(round, bytes, slot) + bytes <= slot);
  }
}

}  // namespace gyre
