// The placement probe during calls (GYRE_PLACEMENT_PROBE_MS), ranks as threads over shared
// memory: with a probe before every call whose algorithm depends on where the CPUs sit, every
// rank probes at the same calls, holds the same verdict, and every element comes out exact
// while the tuner follows the CPUs from one algorithm to another.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "tests/harness/thread_ranks.h"

using namespace gyre;

TEST_CASE("placement probe: ranks probe at the same calls and stay exact") {
  const int n = 2;
  if (std::thread::hardware_concurrency() < unsigned(n)) {
    MESSAGE("skipped: the probe runs only where every rank has a core, and this machine has "
            << std::thread::hardware_concurrency());
    return;
  }
  CommConfig config;
  config.timeout = std::chrono::seconds(60);
  config.placementProbe = std::chrono::microseconds(1);  // before every call it matters to
  test::ThreadJob job(n, config, "placement-probe");
  // 64 KiB to 1 MiB: close, the slots' ring or the window; far apart, the direct read.
  const size_t counts[] = {16 << 10, 64 << 10, 256 << 10};
  const int rounds = 60;
  std::vector<std::string> wrong(n);
  job.run([&](Communicator& c, int r) {
    auto note = [&](bool ok, const std::string& what) {
      if (!ok && wrong[size_t(r)].empty())
        wrong[size_t(r)] = "rank " + std::to_string(r) + ": " + what;
    };
    for (int i = 0; i < rounds; ++i) {
      const size_t count = counts[size_t(i) % std::size(counts)];
      const auto value = [&](int rank, size_t k) { return int32_t(rank * 7919 + i) + int32_t(k); };
      std::vector<int32_t> in(count), out(count * n + 1);
      for (size_t k = 0; k < count; ++k) in[k] = value(r, k);
      std::fill(out.begin(), out.end(), -7);
      c.allReduce(in.data(), out.data(), count, DataType::i32, RedOp::sum);
      for (size_t k = 0; k < count; ++k) note(out[k] == value(0, k) + value(1, k), "all_reduce");
      note(out[count] == -7, "all_reduce wrote past its buffer");
      std::fill(out.begin(), out.end(), -7);
      c.allGather(in.data(), out.data(), count, DataType::i32);
      for (int p = 0; p < n; ++p) {
        for (size_t k = 0; k < count; ++k) {
          note(out[size_t(p) * count + k] == value(p, k), "all_gather");
        }
      }
      note(out[count * n] == -7, "all_gather wrote past its buffer");
      const int root = i % n;
      std::fill(out.begin(), out.end(), -7);
      c.broadcast(in.data(), out.data(), count, DataType::i32, root);
      for (size_t k = 0; k < count; ++k) note(out[k] == value(root, k), "broadcast");
      note(out[count] == -7, "broadcast wrote past its buffer");
    }
  });
  for (int r = 0; r < n; ++r) CHECK_MESSAGE(wrong[size_t(r)].empty(), wrong[size_t(r)]);
  const PlacementProbes zero = job.comm(0).placementProbes(), one = job.comm(1).placementProbes();
  MESSAGE(zero.probes << " probes, " << zero.changes << " changes, ending "
                      << std::string(zero.farApart ? "far apart" : "close"));
  CHECK(one.probes == zero.probes);
  CHECK(one.changes == zero.changes);
  CHECK(one.farApart == zero.farApart);
  if (!zero.probing) {
    MESSAGE("no probes during calls: the communicator found the ranks without a core each");
    CHECK(zero.probes == 0);
  } else {
    // Every all-reduce of these sizes chooses otherwise in the other placement.
    CHECK(zero.probes >= uint64_t(rounds));
  }
}

// A forced algorithm needs no pricing, but its slots' stores follow the placement all the same
// (GYRE_SLOT_STORES=auto): such a communicator probes during calls that go through slots, and
// one whose stores are pinned (cached) does not.
TEST_CASE("placement probe: a forced algorithm probes where its slots follow the placement") {
  const int n = 2;
  if (std::thread::hardware_concurrency() < unsigned(n)) {
    MESSAGE("skipped: the probe runs only where every rank has a core");
    return;
  }
  for (auto stores : {CommConfig::SlotStores::automatic, CommConfig::SlotStores::cached}) {
    CommConfig config;
    config.timeout = std::chrono::seconds(60);
    config.placementProbe = std::chrono::microseconds(1);
    config.algorithm = "ring";
    config.slotStores = stores;
    test::ThreadJob job(n, config, "placement-probe-forced");
    const int calls = 20;
    const size_t count = 64 << 10;
    std::vector<std::string> wrong(n);
    job.run([&](Communicator& c, int r) {
      std::vector<int32_t> in(count), out(count + 1, -7);
      for (int i = 0; i < calls; ++i) {
        for (size_t k = 0; k < count; ++k) in[k] = int32_t(r * 1000 + i) + int32_t(k);
        c.allReduce(in.data(), out.data(), count, DataType::i32, RedOp::sum);
        for (size_t k = 0; k < count && wrong[size_t(r)].empty(); ++k) {
          if (out[k] != int32_t(1000 + 2 * i) + 2 * int32_t(k)) {
            wrong[size_t(r)] = "rank " + std::to_string(r) + ": element " + std::to_string(k);
          }
        }
        if (out[count] != -7) wrong[size_t(r)] = "wrote past its buffer";
      }
    });
    for (int r = 0; r < n; ++r) CHECK_MESSAGE(wrong[size_t(r)].empty(), wrong[size_t(r)]);
    const PlacementProbes zero = job.comm(0).placementProbes();
    if (stores == CommConfig::SlotStores::cached) {
      CHECK(!zero.probing);
      CHECK(zero.probes == 0);
    } else if (zero.setUpNs == 0) {
      MESSAGE("no probes: the set-up probe measured nothing here");
      CHECK(!zero.probing);
    } else {
      CHECK(zero.probing);
      CHECK(zero.probes >= uint64_t(calls));
      CHECK(job.comm(1).placementProbes().probes == zero.probes);
    }
  }
}

// A rank that left before the probe fails the probe's wait at once, naming it, not at the
// deadline.
TEST_CASE("placement probe: a peer that left fails the probe fast, naming it") {
  CommConfig config;
  config.timeout = std::chrono::seconds(60);
  config.placementProbe = std::chrono::microseconds(1);
  test::ThreadJob job(2, config, "placement-probe-left");
  if (!job.comm(0).placementProbes().probing) {
    MESSAGE("skipped: no probes during calls here (the ranks share cores)");
    return;
  }
  job.destroy(1);
  std::vector<int32_t> in(64 << 10, 1), out(64 << 10);
  const auto start = std::chrono::steady_clock::now();
  try {
    job.comm(0).allReduce(in.data(), out.data(), in.size(), DataType::i32, RedOp::sum);
    FAIL("the all-reduce returned without rank 1");
  } catch (const Failure& f) {
    CAPTURE(f.what());
    CHECK(f.status().code == Code::remote_error);
    CHECK(std::string(f.what()).find("rank 1") != std::string::npos);
    CHECK(std::string(f.what()).find("all_reduce #1") != std::string::npos);
  }
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));
  CHECK(job.comm(0).placementProbes().probes == 0);  // the probe itself failed
}

namespace {

// Every collective through slots (or the window), and a send and a recv round the ring, exact on
// every rank for each count, `rounds` times over: every byte of every element varies, so a byte a
// store missed shows, and the words past each result stay poisoned.
void everyCollectiveExact(const CommConfig& config, int n, const std::string& name,
                          std::initializer_list<size_t> counts, int rounds) {
  test::ThreadJob job(n, config, name);
  std::vector<std::string> wrong(static_cast<size_t>(n));
  job.run([&](Communicator& c, int r) {
    auto note = [&](bool ok, const char* what, size_t count) {
      if (!ok && wrong[size_t(r)].empty()) {
        wrong[size_t(r)] = "rank " + std::to_string(r) + ": " + what + " of " +
                           std::to_string(count) + " elements";
      }
    };
    const auto value = [&](int rank, size_t k) {
      return uint32_t(0x9E3779B9u * uint32_t(rank + 1) + uint32_t(k) * 2654435761u);
    };
    const auto sum = [&](size_t k) {
      uint32_t total = 0;
      for (int p = 0; p < n; ++p) total += value(p, k);
      return total;
    };
    for (int round = 0; round < rounds; ++round) {
      for (size_t count : counts) {
        std::vector<uint32_t> in(count * size_t(n)), out(count * size_t(n) + 1);
        for (size_t k = 0; k < in.size(); ++k) in[k] = value(r, k);
        std::fill(out.begin(), out.end(), 0xA5A5A5A5u);
        c.allReduce(in.data(), out.data(), count, DataType::u32, RedOp::sum);
        bool ok = out[count] == 0xA5A5A5A5u;
        for (size_t k = 0; k < count; ++k) ok &= out[k] == sum(k);
        note(ok, "all_reduce", count);
        std::fill(out.begin(), out.end(), 0xA5A5A5A5u);
        c.reduceScatter(in.data(), out.data(), count, DataType::u32, RedOp::sum);
        ok = out[count] == 0xA5A5A5A5u;
        for (size_t k = 0; k < count; ++k) ok &= out[k] == sum(size_t(r) * count + k);
        note(ok, "reduce_scatter", count);
        std::fill(out.begin(), out.end(), 0xA5A5A5A5u);
        c.allGather(in.data(), out.data(), count, DataType::u32);
        ok = out[count * size_t(n)] == 0xA5A5A5A5u;
        for (int p = 0; p < n; ++p)
          for (size_t k = 0; k < count; ++k) ok &= out[size_t(p) * count + k] == value(p, k);
        note(ok, "all_gather", count);
        // Every rank's input of n blocks: the first and the last rank post the others' alone.
        std::fill(out.begin(), out.end(), 0xA5A5A5A5u);
        c.allToAll(in.data(), out.data(), count, DataType::u32);
        ok = out[count * size_t(n)] == 0xA5A5A5A5u;
        for (int p = 0; p < n; ++p)
          for (size_t k = 0; k < count; ++k)
            ok &= out[size_t(p) * count + k] == value(p, size_t(r) * count + k);
        note(ok, "all_to_all", count);
        // Point to point round the ring: each send fits the link, so it returns before the recv.
        const int next = (r + 1) % n, prev = (r + n - 1) % n;
        std::fill(out.begin(), out.end(), 0xA5A5A5A5u);
        c.send(in.data(), count, DataType::u32, next);
        c.recv(out.data(), count, DataType::u32, prev);
        ok = out[count] == 0xA5A5A5A5u;
        for (size_t k = 0; k < count; ++k) ok &= out[k] == value(prev, k);
        note(ok, "send and recv", count);
        for (int root = 0; root < n; ++root) {
          std::fill(out.begin(), out.end(), 0xA5A5A5A5u);
          c.broadcast(in.data(), out.data(), count, DataType::u32, root);
          ok = out[count] == 0xA5A5A5A5u;
          for (size_t k = 0; k < count; ++k) ok &= out[k] == value(root, k);
          note(ok, "broadcast", count);
          std::fill(out.begin(), out.end(), 0xA5A5A5A5u);
          c.reduce(in.data(), out.data(), count, DataType::u32, RedOp::sum, root);
          ok = true;
          for (size_t k = 0; k < count && r == root; ++k) ok &= out[k] == sum(k);
          note(ok, "reduce", count);
          // The root's input of n blocks: a scatter's root posts the others' blocks alone where
          // it is the first or the last rank.
          std::fill(out.begin(), out.end(), 0xA5A5A5A5u);
          c.scatter(in.data(), out.data(), count, DataType::u32, root);
          ok = out[count] == 0xA5A5A5A5u;
          for (size_t k = 0; k < count; ++k) ok &= out[k] == value(root, size_t(r) * count + k);
          note(ok, "scatter", count);
          std::fill(out.begin(), out.end(), 0xA5A5A5A5u);
          c.gather(in.data(), out.data(), count, DataType::u32, root);
          ok = out[count * size_t(n)] == 0xA5A5A5A5u || r != root;
          for (int p = 0; p < n && r == root; ++p)
            for (size_t k = 0; k < count; ++k) ok &= out[size_t(p) * count + k] == value(p, k);
          note(ok, "gather", count);
        }
      }
    }
  });
  for (int r = 0; r < n; ++r) CHECK_MESSAGE(wrong[size_t(r)].empty(), wrong[size_t(r)]);
}

}  // namespace

// Slots written with streaming stores (GYRE_SLOT_STORES=streaming forces what auto does far
// apart): every collective through slots stays exact. Small slots and no single copy, so every
// byte crosses a slot, many slots per call, with the kernels' second destinations and the
// further copies of a tree's inner ranks all written that way. Forced through the host window,
// the payloads of 1000 and 5003 elements fill its data blocks, streamed too, and those of 400
// (1600 B) and a scatter's root's 224 a rank left out (1792 B) are small ones streamed.
TEST_CASE("streamed slots: every collective through them exact") {
  for (const char* algorithm : {"ring", "tree", "oneshot"}) {
    CAPTURE(std::string(algorithm));
    CommConfig config;
    config.timeout = std::chrono::seconds(60);
    config.slotStores = CommConfig::SlotStores::streaming;
    config.slotBytes = 4096;
    config.shmSingleCopyBytes = 0;
    const bool window = std::string(algorithm) == "oneshot";
    config.oneShotBytes = window ? 64 << 10 : 0;  // else no window: slots alone
    config.algorithm = algorithm;
    everyCollectiveExact(config, 3, std::string("streamed-slots-") + algorithm,
                         {1, 224, 400, 1000, 5003}, 1);
  }
}

// Payloads spread in their slots and window blocks (GYRE_SLOT_SPREAD=on forces what auto does
// where the ranks have cores close by): every collective stays exact while the payloads move
// from place to place. Slots of 64 KiB, the window's posts up to 64 KiB (blocks of 512 KiB at
// n = 3), no single copy: payloads of 8 KiB (2048 elements, a ring's share 2730 B is not
// spread), 20 KiB and 40 KiB change places every round of the links and the window, and 80
// KiB fills whole slots. Enough rounds for every place to come round.
TEST_CASE("spread payloads: every collective through slots and window exact") {
  for (const char* algorithm : {"ring", "tree", "rd", "oneshot"}) {
    CAPTURE(std::string(algorithm));
    CommConfig config;
    config.timeout = std::chrono::seconds(60);
    config.slotSpread = CommConfig::SlotSpread::on;
    config.slotBytes = 64 << 10;
    config.shmSingleCopyBytes = 0;
    const bool window = std::string(algorithm) == "oneshot";
    config.oneShotBytes = window ? 128 << 10 : 0;
    config.algorithm = algorithm;
    everyCollectiveExact(config, 3, std::string("spread-") + algorithm,
                         {1, 2048, 5000, 10000, 20000}, 6);
  }
}
