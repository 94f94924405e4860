// gyre-bench's "Huge pages per rank" line: how much of the buffers /proc/self/smaps puts on huge
// pages, counted once per byte whether the mapping is hugetlbfs or transparent.
#include <doctest/doctest.h>
#include <sys/mman.h>

#include <cstdint>
#include <cstring>
#include <sstream>

#include "tools/bench/huge_pages.h"

using gyre::bench::hugePageBytes;

namespace {
const void* at(uintptr_t address) {
  return reinterpret_cast<const void*>(address);
}
constexpr size_t kMiB = 1 << 20;
}  // namespace

TEST_CASE("huge pages: smaps mappings counted by page kind and overlap") {
  // A hugetlbfs mapping (every page huge), a transparent one with 4 of its 8 MiB huge, one on
  // small pages; fields as the kernel writes them, "VmFlags:" lines included.
  std::istringstream smaps(
      "10000000-10600000 rw-p 00000000 00:11 7920400    /anon_hugepage (deleted)\n"
      "Size:               6144 kB\n"
      "KernelPageSize:     2048 kB\n"
      "AnonHugePages:         0 kB\n"
      "VmFlags: rd wr mr mw me de ht sd\n"
      "20000000-20800000 rw-p 00000000 00:00 0 \n"
      "Size:               8192 kB\n"
      "KernelPageSize:        4 kB\n"
      "AnonHugePages:      4096 kB\n"
      "VmFlags: rd wr mr mw me ac sd hg\n"
      "30000000-30100000 rw-p 00000000 00:00 0 \n"
      "Size:               1024 kB\n"
      "KernelPageSize:        4 kB\n"
      "AnonHugePages:         0 kB\n");
  const std::string text = smaps.str();
  auto count = [&](gyre::bench::Ranges ranges) {
    std::istringstream in(text);
    return hugePageBytes(in, ranges);
  };
  CHECK(count({{at(0x10000010), 4 * kMiB}}) == 4 * kMiB);  // inside the hugetlbfs mapping
  CHECK(count({{at(0x10400000), 4 * kMiB}}) == 2 * kMiB);  // only its last 2 MiB overlap
  // Two buffers sharing the transparent mapping: its 4 MiB of huge pages once, not per buffer.
  CHECK(count({{at(0x20000000), 4 * kMiB}, {at(0x20400000), 4 * kMiB}}) == 4 * kMiB);
  CHECK(count({{at(0x20000000), 1 * kMiB}}) == 1 * kMiB);  // at most the overlap
  CHECK(count({{at(0x30000000), 1 * kMiB}}) == 0);         // small pages
  CHECK(count({{at(0x40000000), 1 * kMiB}}) == 0);         // no mapping
  CHECK(count({{at(0x10000000), 6 * kMiB}, {at(0x30000000), kMiB}}) == 6 * kMiB);
}

TEST_CASE("huge pages: this process's small-page buffer counts none") {
  const size_t bytes = 4 * kMiB;
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(p != MAP_FAILED);
  REQUIRE(madvise(p, bytes, MADV_NOHUGEPAGE) == 0);
  std::memset(p, 1, bytes);
  CHECK(hugePageBytes({{p, bytes}}) == 0);
  munmap(p, bytes);
}
