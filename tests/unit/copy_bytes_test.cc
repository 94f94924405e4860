// copyBytes and the peer-memory moves at every distance between source and destination that
// matters to `rep movsb` (0-130 bytes and just below 4 KiB, either way), at lengths either side
// of where memcpy turns to it and across the peer moves' 64 KiB bounce pieces: every byte
// exact, nothing written past either end, on both paths whatever this CPU's stall verdicts.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "base/copy_bytes.h"
#include "link/mailbox.h"

namespace gyre {
namespace {

constexpr size_t kPage = 4096;

std::vector<int> distances() {
  std::vector<int> d;
  for (int k = 0; k <= 130; ++k) d.push_back(k);
  for (int k = 4096 - 70; k < 4096; k += 3) d.push_back(k);
  return d;
}

// A page-aligned arena, poisoned, with a source pattern at `srcAt` and the destination at
// `dstAt` in a second arena.
struct Arenas {
  explicit Arenas(size_t bytes) : src(bytes + 3 * kPage), dst(bytes + 3 * kPage) {}
  std::byte* page(std::vector<std::byte>& v) {
    return reinterpret_cast<std::byte*>((reinterpret_cast<uintptr_t>(v.data()) + kPage - 1) &
                                        ~uintptr_t(kPage - 1));
  }
  void fill(size_t bytes, size_t srcAt) {
    std::memset(dst.data(), 0xA5, dst.size());
    for (size_t i = 0; i < bytes; ++i) page(src)[srcAt + i] = std::byte((i * 131 + 7) % 251);
  }
  // Counts the bytes that differ from the pattern or the poison around it.
  size_t wrong(size_t bytes, size_t dstAt) {
    const std::byte* d = page(dst) + dstAt;
    size_t bad = 0;
    for (size_t i = 0; i < bytes; ++i) bad += d[i] != std::byte((i * 131 + 7) % 251);
    for (const std::byte* p = dst.data(); p < d; ++p) bad += *p != std::byte(0xA5);
    for (const std::byte* p = d + bytes; p < dst.data() + dst.size(); ++p)
      bad += *p != std::byte(0xA5);
    return bad;
  }
  std::vector<std::byte> src, dst;
};

TEST_CASE("shortCopyDistance: a destination 1-63 bytes past the source, modulo 4 KiB") {
  alignas(4096) static std::byte a[3 * kPage];
  CHECK_FALSE(shortCopyDistance(a, a));
  CHECK_FALSE(shortCopyDistance(a + kPage, a));
  CHECK(shortCopyDistance(a + 1, a));
  CHECK(shortCopyDistance(a + 63, a));
  CHECK(shortCopyDistance(a + kPage + 16, a));
  CHECK_FALSE(shortCopyDistance(a + 64, a));
  CHECK_FALSE(shortCopyDistance(a, a + 16));  // the destination behind: not the slow case
}

// Puts this CPU's measured verdicts back when a test that overrides them ends.
struct MeasuredVerdictsAfter {
  ~MeasuredVerdictsAfter() {
    overrideStringCopyStall(std::nullopt);
    overrideKernelCopyStall(std::nullopt);
  }
};

TEST_CASE("the short-distance stall probe: a copy much slower near the page is a stall") {
  std::vector<std::byte> aside(size_t(32) << 10);
  // The same copy wherever the destination lies: no stall.
  CHECK_FALSE(measureShortDistanceStall([&](void*, const void* src, size_t bytes) {
    std::memcpy(aside.data(), src, bytes);
    asm volatile("" ::: "memory");
    return true;
  }));
  // Eight copies where the destination is off the page's start: a stall.
  CHECK(measureShortDistanceStall([&](void* dst, const void* src, size_t bytes) {
    const int times = (reinterpret_cast<uintptr_t>(dst) & (kPage - 1)) != 0 ? 8 : 1;
    for (int i = 0; i < times; ++i) std::memcpy(aside.data(), src, bytes);
    asm volatile("" ::: "memory");
    return true;
  }));
  // A copy that fails: the guarded path, taken as a stall.
  CHECK(measureShortDistanceStall([](void*, const void*, size_t) { return false; }));
  // The verdicts this CPU measured are what an override leaves once lifted.
  const bool user = stringCopyStallsNearby(), kernel = kernelCopyStallsNearby();
  {
    MeasuredVerdictsAfter restore;
    overrideStringCopyStall(!user);
    overrideKernelCopyStall(!kernel);
    CHECK(stringCopyStallsNearby() == !user);
    CHECK(kernelCopyStallsNearby() == !kernel);
  }
  const auto verdict = [](bool stalls) {
    return std::string(stalls ? "stalls" : "does not stall");
  };
  const std::string found = "this CPU: memcpy " + verdict(stringCopyStallsNearby()) +
                            ", process_vm_readv " + verdict(kernelCopyStallsNearby()) +
                            " at a short distance";
  MESSAGE(found);
}

TEST_CASE(
    "copyBytes, both vector loops and streamBytes: every distance, lengths around the thresholds") {
  const std::vector<size_t> lengths{0, 1, 63, 64, 127, 128, 129, 2047, 2048, 2049, 5000, 70001};
  Arenas arenas(70001 + kPage);
  MeasuredVerdictsAfter restore;
  for (size_t bytes : lengths) {
    for (int distance : distances()) {
      const size_t srcAt = 40, dstAt = (srcAt + size_t(distance)) % kPage;
      for (int how = 0; how < 5; ++how) {
        arenas.fill(bytes, srcAt);
        std::byte* d = arenas.page(arenas.dst) + dstAt;
        const std::byte* s = arenas.page(arenas.src) + srcAt;
        // copyBytes where memcpy stalls at a short distance (vector loops there), and where not.
        overrideStringCopyStall(how == 0);
        if (how == 0 || how == 4) copyBytes(d, s, bytes);
        if (how == 1) copyVectors(d, s, bytes, true);
        if (how == 2) copyVectors(d, s, bytes, false);
        if (how == 3) {
          streamBytes(d, s, bytes);
          storeFence();
        }
        INFO("bytes ", bytes, ", distance ", distance, ", ",
             how == 0   ? "copyBytes, memcpy taken to stall"
             : how == 4 ? "copyBytes, memcpy taken not to stall"
             : how == 1 ? "avx2"
             : how == 2 ? "sse2"
                        : "streaming");
        REQUIRE(arenas.wrong(bytes, dstAt) == 0);
      }
    }
  }
}

TEST_CASE("peer-memory reads and writes: every distance, direct and through the bounce buffer") {
  const std::vector<size_t> lengths{8, 2047, 2048, 65536 + 4001, 3 * 65536 + 17};
  Arenas arenas(3 * 65536 + 17 + kPage);
  const int self = int(getpid());
  MeasuredVerdictsAfter restore;
  for (size_t bytes : lengths) {
    for (int distance : {0, 1, 8, 16, 31, 48, 63, 64, 100, 4095}) {
      // Through the bounce buffer where the kernel's copy is taken to stall, else directly.
      const bool bounce = distance % 2 == 1 || distance == 16;
      overrideKernelCopyStall(bounce);
      const size_t srcAt = 16, dstAt = (srcAt + size_t(distance)) % kPage;
      for (bool read : {true, false}) {
        arenas.fill(bytes, srcAt);
        std::byte* d = arenas.page(arenas.dst) + dstAt;
        const std::byte* s = arenas.page(arenas.src) + srcAt;
        const std::string error =
            read ? readPeerMemory(self, d, reinterpret_cast<uint64_t>(s), bytes)
                 : writePeerMemory(self, reinterpret_cast<uint64_t>(d), s, bytes);
        if (error.find("Operation not permitted") != std::string::npos) {
          MESSAGE("skipped: this process may not read its own memory by pid (" << error << ")");
          return;
        }
        INFO("bytes ", bytes, ", distance ", distance, read ? ", read" : ", write",
             bounce ? ", bounce if near" : ", direct");
        REQUIRE(error.empty());
        REQUIRE(arenas.wrong(bytes, dstAt) == 0);
      }
    }
  }
}

TEST_CASE("peer-memory moves name the failing system call, direct and through the bounce") {
  Arenas arenas(8192);
  MeasuredVerdictsAfter restore;
  overrideKernelCopyStall(true);
  // Address 64 is never mapped. A local page offset of 64 moves directly either way; a read
  // into 80 and a write from 48 go through the bounce buffer.
  for (size_t at : {size_t(64), size_t(80), size_t(48)}) {
    std::byte* local = arenas.page(arenas.dst) + at;
    CHECK(readPeerMemory(int(getpid()), local, 64, 4096).find("process_vm_readv") == 0);
    CHECK(writePeerMemory(int(getpid()), 64, local, 4096).find("process_vm_writev") == 0);
  }
}

}  // namespace
}  // namespace gyre
