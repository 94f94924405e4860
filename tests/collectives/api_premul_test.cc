// Premul sums through the C API (gyreRedOpCreatePreMulSum): every rank's input times a scalar,
// summed, against values computed here (exact: integers, and floats whose products and sums
// are exact), the inputs left as they were, in groups, and the ops' misuse refused. Ranks as
// threads over host buffers; the stream-ordered form runs on a GPU (docs/collectives.md).
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "gyre/gyre.h"
#include "tests/harness/c_api_ranks.h"

namespace {

using gyre::test::initComms;

uint16_t bf16Of(float f) {  // exact for the small integers used here
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return uint16_t(u >> 16);
}

}  // namespace

TEST_CASE("premul sums: all-reduce, reduce-scatter and reduce, 3 ranks") {
  const int n = 3;
  auto comms = initComms(n);
  gyre::test::onThreads(n, [&](int r) {
    gyreComm_t c = comms[r];
    // float, the scalar read once at creation: changing it afterwards changes nothing.
    float half = 0.5f;
    gyreRedOp_t byHalf;
    OK(gyreRedOpCreatePreMulSum(&byHalf, &half, gyreFloat32, gyreScalarHostImmediate, c));
    CHECK(int(byHalf) >= int(gyreNumOps));
    half = 100.0f;
    std::vector<float> in(1000), out(1000, -1.0f);
    for (size_t i = 0; i < in.size(); ++i) in[i] = float((r + 1) * int(i % 64));
    const std::vector<float> before = in;
    OK(gyreAllReduce(in.data(), out.data(), in.size(), gyreFloat32, byHalf, c, nullptr));
    for (size_t i = 0; i < in.size(); ++i) REQUIRE(out[i] == 0.5f * 6.0f * float(i % 64));
    CHECK(in == before);
    OK(gyreAllReduce(in.data(), in.data(), in.size(), gyreFloat32, byHalf, c, nullptr));
    CHECK(in == out);  // in place

    // int32, the scalar read as each call runs.
    int32_t factor = 3;
    gyreRedOp_t byFactor;
    OK(gyreRedOpCreatePreMulSum(&byFactor, &factor, gyreInt32, gyreScalarDevice, c));
    CHECK(byFactor != byHalf);
    std::vector<int32_t> ints(257), sums(257, -1);
    for (size_t i = 0; i < ints.size(); ++i) ints[i] = 100 * r + int32_t(i);
    OK(gyreAllReduce(ints.data(), sums.data(), ints.size(), gyreInt32, byFactor, c, nullptr));
    for (size_t i = 0; i < ints.size(); ++i) REQUIRE(sums[i] == 3 * (300 + 3 * int32_t(i)));
    factor = -5;
    OK(gyreAllReduce(ints.data(), sums.data(), ints.size(), gyreInt32, byFactor, c, nullptr));
    for (size_t i = 0; i < ints.size(); ++i) REQUIRE(sums[i] == -5 * (300 + 3 * int32_t(i)));

    // double reduce-scatter: block r of sum over ranks q of 0.25 * (q + 1) * (j + 1).
    double quarter = 0.25;
    gyreRedOp_t byQuarter;
    OK(gyreRedOpCreatePreMulSum(&byQuarter, &quarter, gyreFloat64, gyreScalarHostImmediate, c));
    const size_t block = 5;
    std::vector<double> whole(block * n), mine(block, -1.0);
    for (size_t j = 0; j < whole.size(); ++j) whole[j] = double((r + 1) * int(j + 1));
    OK(gyreReduceScatter(whole.data(), mine.data(), block, gyreFloat64, byQuarter, c, nullptr));
    for (size_t j = 0; j < block; ++j) CHECK(mine[j] == 0.25 * 6.0 * double(r * block + j + 1));

    // bfloat16 reduce to rank 1, scalar 2: the other ranks' output untouched.
    const float two = 2.0f;
    uint16_t twoBf16 = bf16Of(two);
    gyreRedOp_t byTwo;
    OK(gyreRedOpCreatePreMulSum(&byTwo, &twoBf16, gyreBfloat16, gyreScalarHostImmediate, c));
    std::vector<uint16_t> bin(40), bout(40, 0xFFFF);
    for (size_t i = 0; i < bin.size(); ++i) bin[i] = bf16Of(float(r + int(i)));
    OK(gyreReduce(bin.data(), bout.data(), bin.size(), gyreBfloat16, byTwo, 1, c, nullptr));
    for (size_t i = 0; i < bin.size(); ++i)
      CHECK(bout[i] == (r == 1 ? bf16Of(2.0f * float(3 + 3 * int(i))) : uint16_t(0xFFFF)));

    // In a group the calls run at gyreGroupEnd, and so does the read of a device scalar.
    std::vector<int32_t> a(64, r + 1), b(64, 2 * (r + 1)), plain(64, 1);
    factor = 7;
    OK(gyreGroupStart());
    OK(gyreAllReduce(a.data(), a.data(), a.size(), gyreInt32, byFactor, c, nullptr));
    OK(gyreAllReduce(plain.data(), plain.data(), plain.size(), gyreInt32, gyreSum, c, nullptr));
    OK(gyreAllReduce(b.data(), b.data(), b.size(), gyreInt32, byFactor, c, nullptr));
    factor = 10;
    OK(gyreGroupEnd());
    for (size_t i = 0; i < a.size(); ++i) {
      REQUIRE(a[i] == 10 * 6);
      REQUIRE(plain[i] == 3);
      REQUIRE(b[i] == 10 * 12);
    }

    for (gyreRedOp_t op : {byHalf, byFactor, byQuarter, byTwo}) OK(gyreRedOpDestroy(op, c));
  });
  for (auto c : comms) CHECK(gyreCommDestroy(c) == gyreSuccess);
}

TEST_CASE("premul sums: misuse is refused, naming the rank, and poisons nothing") {
  const int n = 2;
  auto comms = initComms(n);
  gyre::test::onThreads(n, [&](int r) {
    gyreComm_t c = comms[r];
    const std::string rank = "rank " + std::to_string(r);
    float scalar = 2.0f, buf[4] = {1, 2, 3, 4};
    gyreRedOp_t op = gyreSum;
    refused(gyreRedOpCreatePreMulSum(nullptr, &scalar, gyreFloat32, gyreScalarDevice, c),
            gyreInvalidArgument, rank + ": gyreRedOpCreatePreMulSum: op is null");
    refused(gyreRedOpCreatePreMulSum(&op, nullptr, gyreFloat32, gyreScalarDevice, c),
            gyreInvalidArgument, "scalar is null");
    refused(gyreRedOpCreatePreMulSum(&op, &scalar, gyreFloat32, gyreScalarResidence_t(3), c),
            gyreInvalidArgument, "unknown scalar residence 3");
    refused(gyreRedOpCreatePreMulSum(&op, &scalar, gyreDataType_t(15), gyreScalarDevice, c),
            gyreInvalidArgument, "unknown data type 15");
    CHECK(op == gyreSum);

    OK(gyreRedOpCreatePreMulSum(&op, &scalar, gyreFloat32, gyreScalarHostImmediate, c));
    int32_t ints[4] = {};
    refused(gyreAllReduce(ints, ints, 4, gyreInt32, op, c, nullptr), gyreInvalidArgument,
            rank + ": all_reduce: op " + std::to_string(int(op)) +
                " is a premul sum of float, used on int32");
    refused(gyreAllReduce(nullptr, buf, 4, gyreFloat32, op, c, nullptr), gyreInvalidArgument,
            rank + ": all_reduce: sendbuff is null");
    refused(gyreReduceScatter(buf, nullptr, 2, gyreFloat32, op, c, nullptr), gyreInvalidArgument,
            rank + ": reduce_scatter: recvbuff is null");
    if (r == 0)  // the root alone: elsewhere this is a call the root would have to join
      refused(gyreReduce(buf, nullptr, 4, gyreFloat32, op, 0, c, nullptr), gyreInvalidArgument,
              rank + ": reduce: recvbuff is null");
    const size_t huge = (SIZE_MAX / 4) / 2 + 1;  // times 4 bytes fits, times 2 ranks does not
    refused(gyreReduceScatter(buf, buf, huge, gyreFloat32, op, c, nullptr), gyreInvalidArgument,
            rank + ": reduce_scatter: count " + std::to_string(huge) + " is too large");
    // Another communicator's op, even its duplicate's.
    gyreComm_t dup = nullptr;
    OK(gyreCommDup(c, &dup));
    refused(gyreAllReduce(buf, buf, 4, gyreFloat32, op, dup, nullptr), gyreInvalidArgument,
            "is no op of this communicator");
    OK(gyreCommDestroy(dup));
    refused(gyreRedOpDestroy(gyreSum, c), gyreInvalidArgument, "is no premul sum");
    OK(gyreRedOpDestroy(op, c));
    refused(gyreRedOpDestroy(op, c), gyreInvalidArgument, "is no premul sum");
    refused(gyreReduce(buf, buf, 4, gyreFloat32, op, 0, c, nullptr), gyreInvalidArgument,
            rank + ": reduce: op " + std::to_string(int(op)) + " is no op of this communicator");
    // A destroyed op's number is handed out again.
    gyreRedOp_t again;
    OK(gyreRedOpCreatePreMulSum(&again, &scalar, gyreFloat32, gyreScalarHostImmediate, c));
    CHECK(again == op);
    OK(gyreRedOpDestroy(again, c));

    // Nothing was poisoned.
    gyreResult_t async = gyreInternalError;
    OK(gyreCommGetAsyncError(c, &async));
    CHECK(async == gyreSuccess);
    OK(gyreAllReduce(buf, buf, 4, gyreFloat32, gyreSum, c, nullptr));
    CHECK(buf[3] == 8.0f);
  });
  for (auto c : comms) CHECK(gyreCommDestroy(c) == gyreSuccess);
}
