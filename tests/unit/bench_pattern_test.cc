// gyre-bench's #wrong is only as good as its expected values: the periodic fill must equal
// computing every element.
#include <doctest/doctest.h>

#include <cstring>
#include <vector>

#include "tools/bench/pattern.h"

using namespace gyre;
using namespace gyre::bench;

TEST_CASE("bench patterns: periodic fill equals element-by-element values") {
  for (int t = 0; t < kNumDataTypes; ++t) {
    const auto type = static_cast<DataType>(t);
    const size_t es = dataTypeSize(type);
    for (int o = 0; o < kNumRedOps; ++o) {
      const auto op = static_cast<RedOp>(o);
      for (int n : {1, 2, 3, 8, 16}) {
        for (size_t count : {size_t(1), size_t(100), size_t(4097), size_t(100003)}) {
          CAPTURE(t);
          CAPTURE(o);
          CAPTURE(n);
          CAPTURE(count);
          std::vector<unsigned char> fast(count * es), slow(count * es);
          fillPeriodic(type, fast.data(), count, patternPeriod(op, n),
                       [&](size_t i) { return reducedValue(op, n, i); });
          for (size_t i = 0; i < count; ++i)
            storeValue(type, slow.data(), i, reducedValue(op, n, i));
          REQUIRE(std::memcmp(fast.data(), slow.data(), fast.size()) == 0);
          REQUIRE(countMismatches(type, fast.data(), slow.data(), count) == 0);
        }
      }
    }
  }
  // And a mismatch is counted.
  std::vector<float> a{1, 2, 3}, b{1, 5, 3};
  CHECK(countMismatches(DataType::f32, a.data(), b.data(), 3) == 1);
}
