// The plan of a stream-ordered call (runtime/cuda/staging_plan.h): which bytes are staged where,
// which are copied each way, and the pieces of large elementwise calls. Runs without a GPU;
// tests/cuda/buffers_test.cc checks the same calls' results on one.
#include <doctest/doctest.h>

#include <numeric>

#include "runtime/cuda/staging_plan.h"

using gyre::planStaging;
using gyre::StagedBuffer;
using gyre::StagingPlan;

namespace {

// Fake user addresses: never dereferenced.
const void* at(uintptr_t address) {
  return reinterpret_cast<const void*>(address);
}

}  // namespace

TEST_CASE("out of place: two regions, the input copied in only, the output out only") {
  const auto plan = planStaging({{at(0x10000), 4000, StagedBuffer::in, "sendbuff"},
                                 {at(0x90040), 4000, StagedBuffer::out, "recvbuff"}},
                                0, 0);
  REQUIRE(plan.regions.size() == 2);
  CHECK((plan.regions[0].copyIn && !plan.regions[0].copyOut));
  CHECK((!plan.regions[1].copyIn && plan.regions[1].copyOut));
  for (const auto& r : plan.regions) CHECK(r.offset % 256 == r.lo % 256);
  CHECK(plan.regions[1].offset >= plan.regions[0].offset + 4000);  // no overlap in staging
  CHECK(plan.bytes == plan.regions[1].offset + 4000);
  CHECK(plan.bufferOffsets == std::vector<size_t>{plan.regions[0].offset, plan.regions[1].offset});
  CHECK(plan.pieces == 1);
}

TEST_CASE("in place: one region copied both ways, both buffers at the same staged bytes") {
  const auto plan = planStaging({{at(0x10008), 4096, StagedBuffer::in, "sendbuff"},
                                 {at(0x10008), 4096, StagedBuffer::out, "recvbuff"}},
                                1024, 4);
  REQUIRE(plan.regions.size() == 1);
  CHECK((plan.regions[0].copyIn && plan.regions[0].copyOut));
  CHECK(plan.bufferOffsets[0] == plan.bufferOffsets[1]);
  CHECK(plan.bufferOffsets[0] % 256 == 8);
}

TEST_CASE("in-place all-gather: the input inside the output keeps its place in one region") {
  // Rank 2 of 4, 100 bytes each: sendbuff = recvbuff + 200.
  const auto plan = planStaging({{at(0x20200 + 200), 100, StagedBuffer::in, "sendbuff"},
                                 {at(0x20200), 400, StagedBuffer::out, "recvbuff"}},
                                0, 0);
  REQUIRE(plan.regions.size() == 1);
  CHECK((plan.regions[0].copyIn && plan.regions[0].copyOut));
  CHECK(plan.bufferOffsets[0] == plan.bufferOffsets[1] + 200);
  CHECK(plan.bytes == plan.bufferOffsets[1] + 400);
}

TEST_CASE("outputs written in part are copied in first; null and empty buffers are not staged") {
  const auto plan = planStaging({{nullptr, 0, StagedBuffer::in, "sendbuff"},
                                 {at(0x30000), 0, StagedBuffer::in, "sendbuff"},
                                 {at(0x40000), 640, StagedBuffer::inOut, "recvbuff"}},
                                0, 0);
  REQUIRE(plan.regions.size() == 1);
  CHECK((plan.regions[0].copyIn && plan.regions[0].copyOut));
  CHECK(plan.bufferOffsets[0] == StagingPlan::kNone);
  CHECK(plan.bufferOffsets[1] == StagingPlan::kNone);
  CHECK(plan.bufferOffsets[2] != StagingPlan::kNone);
}

TEST_CASE("an unstaged buffer (a GPUDirect send) keeps its own pointer and needs no staging") {
  const auto plan = planStaging({{at(0x10000), 4000, StagedBuffer::unstaged, "sendbuff"}}, 0, 0);
  CHECK(plan.regions.empty());
  CHECK(plan.bytes == 0);
  CHECK(plan.bufferOffsets == std::vector<size_t>{StagingPlan::kNone});
  // Beside a staged buffer it takes no room in the block.
  const auto two = planStaging({{at(0x10000), 4000, StagedBuffer::unstaged, "sendbuff"},
                                {at(0x90000), 4000, StagedBuffer::out, "recvbuff"}},
                               0, 0);
  REQUIRE(two.regions.size() == 1);
  CHECK(two.regions[0].lo == 0x90000);
  CHECK(two.bufferOffsets[0] == StagingPlan::kNone);
  CHECK(two.bufferOffsets[1] == two.regions[0].offset);
  CHECK(two.bytes == two.regions[0].offset + 4000);
}

TEST_CASE("pieces: from 8 MiB, at least 4 MiB each, at most 8, covering every byte once") {
  struct Case {
    size_t elems, elemBytes, pieces;
  };
  const size_t mib = size_t(1) << 20;
  for (const Case& c : {Case{2 * mib - 1, 4, 1}, Case{2 * mib, 4, 2}, Case{6 * mib + 13, 4, 6},
                        Case{64 * mib, 4, 8}, Case{3 * mib + 1, 8, 6}, Case{16 * mib + 7, 1, 4}}) {
    CAPTURE(c.elems);
    CAPTURE(c.elemBytes);
    const size_t bytes = c.elems * c.elemBytes;
    const auto plan = planStaging({{at(0x100000), bytes, StagedBuffer::in, "sendbuff"},
                                   {at(0x100000), bytes, StagedBuffer::out, "recvbuff"}},
                                  c.elems, c.elemBytes);
    CHECK(plan.pieces == c.pieces);
    size_t next = 0, elems = 0;
    for (size_t k = 0; k < plan.pieces; ++k) {
      const auto [lo, hi] = plan.pieceBytes(k, bytes);
      CHECK(lo == next);
      CHECK(hi > lo);
      CHECK(lo % c.elemBytes == 0);
      if (plan.pieces > 1 && k + 1 < plan.pieces) CHECK(hi - lo >= gyre::kMinPieceBytes);
      next = hi;
      elems += std::min(plan.pieceElems, c.elems - k * plan.pieceElems);
    }
    CHECK(next == bytes);
    CHECK(elems == c.elems);
  }
}

TEST_CASE(
    "partly overlapping buffers are not piecewise; calls that are not elementwise stay whole") {
  const std::vector<StagedBuffer> partial{{at(0x50000), 16 << 20, StagedBuffer::in, "sendbuff"},
                                          {at(0x50004), 16 << 20, StagedBuffer::out, "recvbuff"}};
  CHECK_FALSE(gyre::piecewise(partial));
  CHECK(planStaging(partial, size_t(4) << 20, 4).pieces == 1);
  const std::vector<StagedBuffer> disjoint{
      {at(0x1000000), 16 << 20, StagedBuffer::in, "sendbuff"},
      {at(0x8000000), 64 << 20, StagedBuffer::out, "recvbuff"}};
  CHECK(gyre::piecewise(disjoint));
  CHECK(planStaging(disjoint, 0, 0).pieces == 1);
}
