// The collective matrix, ranks as threads over loopback tcp with tiny slots:
// collective x n x awkward counts x every type x every op (or root) x in/out of place.
// Outputs are poisoned first and guarded on both sides; inputs must come back untouched.
#include <doctest/doctest.h>

#include <cstring>
#include <sstream>

#include "tests/harness/reference.h"
#include "tests/harness/thread_ranks.h"

using namespace gyre;
using gyre::test::Data;

namespace {

constexpr unsigned char kPoison = 0xA5;
constexpr size_t kGuard = 16;  // bytes checked on each side of every output

struct Case {
  Collective coll;
  size_t count;  // all_reduce/broadcast: elements; all_gather: per rank send; reduce_scatter: per
                 // rank recv
  DataType type;
  RedOp op;
  int root;
  bool inPlace;

  std::string describe(int n) const {
    std::ostringstream s;
    s << collectiveName(coll) << " n=" << n << " count=" << count << " " << dataTypeName(type)
      << " " << redOpName(op) << " root=" << root << (inPlace ? " in-place" : " out-of-place");
    return s.str();
  }
};

// Runs one case on rank r; returns a description of every wrong element (empty if right).
std::string runCase(Communicator& c, int r, int n, const Case& k, uint64_t seed) {
  const size_t es = dataTypeSize(k.type);
  const Data data{k.type, k.op, n, seed};
  size_t sendCount = k.count, recvCount = k.count;
  if (k.coll == Collective::all_gather) recvCount = k.count * n;
  if (k.coll == Collective::reduce_scatter) sendCount = k.count * n;

  // One arena: [guard][recv (or the in-place buffer)][guard][send][guard]
  const size_t big = std::max(sendCount, recvCount) * es;
  std::vector<unsigned char> arena(kGuard * 3 + big * 2, kPoison);
  unsigned char* recvBase = arena.data() + kGuard;
  unsigned char* sendBase = recvBase + big + kGuard;

  unsigned char* send = sendBase;
  unsigned char* recv = recvBase;
  if (k.inPlace) {
    send = recvBase;
    if (k.coll == Collective::all_gather) send = recvBase + size_t(r) * k.count * es;
    if (k.coll == Collective::reduce_scatter) recv = recvBase + size_t(r) * k.count * es;
  }
  const bool hasInput = k.coll != Collective::broadcast || r == k.root;
  for (size_t i = 0; hasInput && i < sendCount; ++i) data.input(send, i, r, i);
  std::vector<unsigned char> inputCopy(send, send + sendCount * es);

  switch (k.coll) {
    case Collective::all_reduce:
      c.allReduce(send, recv, k.count, k.type, k.op);
      break;
    case Collective::all_gather:
      c.allGather(send, recv, k.count, k.type);
      break;
    case Collective::reduce_scatter:
      c.reduceScatter(send, recv, k.count, k.type, k.op);
      break;
    case Collective::broadcast:
      c.broadcast(hasInput ? send : nullptr, recv, k.count, k.type, k.root);
      break;
  }

  std::vector<unsigned char> want(recvCount * es + 1);
  for (size_t i = 0; i < recvCount; ++i) {
    switch (k.coll) {
      case Collective::all_reduce:
        data.expected(want.data(), i, i);
        break;
      case Collective::all_gather:
        data.expected(want.data(), i, i % k.count, int(i / k.count));
        break;
      case Collective::reduce_scatter:
        data.expected(want.data(), i, size_t(r) * k.count + i);
        break;
      case Collective::broadcast:
        data.expected(want.data(), i, i, k.root);
        break;
    }
  }
  std::string wrong;
  size_t bad = 0;
  for (size_t i = 0; i < recvCount; ++i) {
    if (std::memcmp(recv + i * es, want.data() + i * es, es) != 0 && bad++ < 3) {
      wrong += " element ";  // appended piecewise: GCC 12 warns falsely on chained +
      wrong += std::to_string(i);
      wrong += " wrong;";
    }
  }
  if (bad) {
    wrong += ' ';
    wrong += std::to_string(bad);
    wrong += " wrong elements;";
  }
  // Guards and the untouched parts of the arena.
  const unsigned char* recvEnd = recv + recvCount * es;
  for (const unsigned char* p = arena.data(); p < recvBase + big + kGuard; ++p) {
    const bool inRecv = p >= recv && p < recvEnd;
    const bool inSend = k.inPlace && p >= send && p < send + sendCount * es;
    if (!inRecv && !inSend && *p != kPoison) {
      wrong += " wrote outside the output at byte " + std::to_string(p - recvBase) + ";";
      break;
    }
  }
  if (!k.inPlace && !inputCopy.empty() &&
      std::memcmp(send, inputCopy.data(), inputCopy.size()) != 0) {
    wrong += " modified its input;";
  }
  for (const unsigned char* p = sendBase + big; p < arena.data() + arena.size(); ++p) {
    if (*p != kPoison) {
      wrong += " wrote past the input;";
      break;
    }
  }
  return wrong;
}

std::vector<Case> casesFor(int n) {
  std::vector<size_t> counts{0, 1, size_t(n - 1), size_t(n), size_t(n + 1)};
  std::sort(counts.begin(), counts.end());
  counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
  std::vector<Case> cases;
  int sample = 0;
  for (int c = 0; c < kNumCollectives; ++c) {
    const auto coll = static_cast<Collective>(c);
    const bool reduces = coll == Collective::all_reduce || coll == Collective::reduce_scatter;
    for (int t = 0; t < kNumDataTypes; ++t) {
      const auto type = static_cast<DataType>(t);
      const int variants = reduces ? kNumRedOps : (coll == Collective::broadcast ? n : 1);
      for (int v = 0; v < variants; ++v) {
        const RedOp op = reduces ? static_cast<RedOp>(v) : RedOp::sum;
        const int root = coll == Collective::broadcast ? v : -1;
        for (bool inPlace : {false, true}) {
          for (size_t count : counts) cases.push_back({coll, count, type, op, root, inPlace});
          // Larger counts, sampled: a prime that spans many slots and rounds.
          if (sample++ % 7 == 0) cases.push_back({coll, 1031, type, op, root, inPlace});
        }
      }
    }
    // Every collective also runs once over many rounds of the ring.
    cases.push_back({coll, 50021, DataType::f32, RedOp::sum,
                     coll == Collective::broadcast ? n - 1 : -1, false});
  }
  return cases;
}

void runMatrix(int n) {
  test::ThreadJob job(n, test::tinySlots(), "matrix-" + std::to_string(n));
  const auto cases = casesFor(n);
  std::vector<std::string> failures(n);
  job.run([&](Communicator& c, int r) {
    uint64_t seed = 1234;
    for (const Case& k : cases) {
      const std::string wrong = runCase(c, r, n, k, ++seed);
      if (!wrong.empty() && failures[r].size() < 2000) {
        failures[r] += "rank " + std::to_string(r) + ": " + k.describe(n) + ":" + wrong + "\n";
      }
    }
  });
  MESSAGE(n << " ranks: " << cases.size() << " collectives checked");
  for (int r = 0; r < n; ++r) CHECK_MESSAGE(failures[r].empty(), failures[r]);
}

}  // namespace

TEST_CASE("matrix n=1") {
  runMatrix(1);
}
TEST_CASE("matrix n=2") {
  runMatrix(2);
}
TEST_CASE("matrix n=3") {
  runMatrix(3);
}
TEST_CASE("matrix n=4") {
  runMatrix(4);
}
TEST_CASE("matrix n=5") {
  runMatrix(5);
}
TEST_CASE("matrix n=8") {
  runMatrix(8);
}
