// The collective matrix, ranks as threads over loopback tcp with tiny slots: collective x
// forced algorithm x n x awkward counts x every type x every op (or root) x in/out of place,
// sampled deterministically. Outputs are poisoned first and guarded on both sides; inputs
// must come back untouched; outputs a collective must not write (non-root) stay poisoned.
#include <doctest/doctest.h>

#include <cstring>
#include <sstream>

#include "tests/harness/rdma.h"
#include "tests/harness/reference.h"
#include "tests/harness/single_copy.h"
#include "tests/harness/thread_ranks.h"

using namespace gyre;
using gyre::test::Data;

namespace {

constexpr unsigned char kPoison = 0xA5;
constexpr size_t kGuard = 16;  // bytes checked on each side of every output

// Variable-size collectives: rank s sends vcount(base, s, d) elements to rank d.
size_t vcount(size_t base, int s, int d) {
  return base == 0 ? 0 : (base + size_t(s) * 3 + size_t(d) * 5) % (base + 4);
}

struct Case {
  Collective coll;
  size_t count;  // all_reduce/broadcast/reduce: elements; others: per rank block
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
  const bool isRoot = r == k.root;
  // Per-peer layouts of the variable collectives (element offsets).
  std::vector<size_t> sc(n), sd(n), rc(n), rd(n);
  size_t sendCount = k.count, recvCount = k.count;
  switch (k.coll) {
    case Collective::all_gather:
      recvCount = k.count * n;
      break;
    case Collective::reduce_scatter:
    case Collective::scatter:
      sendCount = k.count * n;
      break;
    case Collective::gather:
      recvCount = k.count * n;
      break;
    case Collective::all_to_all:
      sendCount = recvCount = k.count * n;
      break;
    case Collective::all_gather_v:
      recvCount = 0;
      for (int p = 0; p < n; ++p) {
        rc[p] = vcount(k.count, p, 0);
        rd[p] = recvCount + 1;  // a gap that must stay poisoned
        recvCount = rd[p] + rc[p];
      }
      sendCount = rc[r];
      break;
    case Collective::all_to_all_v:
      sendCount = recvCount = 0;
      for (int p = 0; p < n; ++p) {
        sc[p] = vcount(k.count, r, p);
        sd[p] = sendCount;
        sendCount += sc[p];
        rc[p] = vcount(k.count, p, r);
        rd[p] = recvCount;
        recvCount += rc[p];
      }
      break;
    default:
      break;
  }

  // One arena: [guard][recv (or the in-place buffer)][guard][send][guard]
  const size_t big = std::max(sendCount, recvCount) * es;
  std::vector<unsigned char> arena(kGuard * 3 + big * 2, kPoison);
  unsigned char* recvBase = arena.data() + kGuard;
  unsigned char* sendBase = recvBase + big + kGuard;

  unsigned char* send = sendBase;
  unsigned char* recv = recvBase;
  if (k.inPlace) {
    send = recvBase;
    if (k.coll == Collective::all_gather || k.coll == Collective::gather)
      send = recvBase + size_t(r) * k.count * es;
    if (k.coll == Collective::all_gather_v) send = recvBase + rd[r] * es;
    if (k.coll == Collective::reduce_scatter || k.coll == Collective::scatter)
      recv = recvBase + size_t(r) * k.count * es;
  }
  const bool hasInput =
      !((k.coll == Collective::broadcast || k.coll == Collective::scatter) && !isRoot);
  // Element i of a rank's input is the value with global index i (all_to_all_v: its
  // position in the rank's send buffer).
  for (size_t i = 0; hasInput && i < sendCount; ++i) data.input(send, i, r, i);
  std::vector<unsigned char> inputCopy(send, send + (hasInput ? sendCount * es : 0));

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
    case Collective::reduce:
      c.reduce(send, recv, k.count, k.type, k.op, k.root);
      break;
    case Collective::gather:
      c.gather(send, recv, k.count, k.type, k.root);
      break;
    case Collective::scatter:
      c.scatter(hasInput ? send : nullptr, recv, k.count, k.type, k.root);
      break;
    case Collective::all_to_all:
      c.allToAll(send, recv, k.count, k.type);
      break;
    case Collective::all_gather_v:
      c.allGatherV(send, sendCount, recv, rc.data(), rd.data(), k.type);
      break;
    case Collective::all_to_all_v:
      c.allToAllV(send, sc.data(), sd.data(), recv, rc.data(), rd.data(), k.type);
      break;
    case Collective::send_recv: {
      // A ring of exchanges: even ranks send first, odd ranks receive first.
      const int next = (r + 1) % n, prev = (r + n - 1) % n;
      if (n == 1) return "";
      std::vector<unsigned char> tmp(sendCount * es);
      if (r % 2 == 0) {
        c.send(send, k.count, k.type, next);
        c.recv(recv, k.count, k.type, prev);
      } else {
        c.recv(recv, k.count, k.type, prev);
        c.send(send, k.count, k.type, next);
      }
      break;
    }
    case Collective::barrier:
      c.barrier();
      return "";
  }

  // What each output element must be; `written` false where it must stay poisoned.
  std::vector<unsigned char> want(recvCount * es + 1);
  std::vector<bool> written(recvCount, true);
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
      case Collective::reduce:
        written[i] = isRoot || k.inPlace;  // in place, a non-root's buffer is its input
        data.expected(want.data(), i, i, isRoot ? -1 : r);
        break;
      case Collective::gather:
        written[i] = isRoot || (k.inPlace && i / k.count == size_t(r));
        if (written[i]) data.expected(want.data(), i, i % k.count, int(i / k.count));
        break;
      case Collective::scatter:
        data.expected(want.data(), i, size_t(r) * k.count + i, k.root);
        break;
      case Collective::all_to_all:
        data.expected(want.data(), i, size_t(r) * k.count + i % k.count, int(i / k.count));
        break;
      case Collective::send_recv:
        data.expected(want.data(), i, i, (r + n - 1) % n);
        break;
      case Collective::all_gather_v: {
        written[i] = false;
        for (int p = 0; p < n; ++p) {
          if (i >= rd[p] && i < rd[p] + rc[p]) {
            written[i] = true;
            data.expected(want.data(), i, i - rd[p], p);
          }
        }
        break;
      }
      case Collective::all_to_all_v: {
        int p = 0;
        while (p + 1 < n && i >= rd[p + 1]) ++p;
        // Rank p's send buffer holds its block for r at its own displacement for r.
        size_t theirOffset = 0;
        for (int q = 0; q < r; ++q) theirOffset += vcount(k.count, p, q);
        data.expected(want.data(), i, theirOffset + (i - rd[p]), p);
        break;
      }
      default:
        break;
    }
  }
  std::string wrong;
  size_t bad = 0;
  std::vector<unsigned char> poison(es, kPoison);
  for (size_t i = 0; i < recvCount; ++i) {
    const void* expect = written[i] ? want.data() + i * es : poison.data();
    if (std::memcmp(recv + i * es, expect, es) != 0 && bad++ < 3) {
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

// Which collectives each forced algorithm implements (the tuner's pick otherwise).
bool implements(const std::string& algorithm, Collective c) {
  if (algorithm == "tree") {
    return c == Collective::all_reduce || c == Collective::broadcast || c == Collective::reduce ||
           c == Collective::gather || c == Collective::scatter;
  }
  if (algorithm == "rd") {
    return c == Collective::all_reduce || c == Collective::all_gather ||
           c == Collective::reduce_scatter || c == Collective::all_to_all;
  }
  if (algorithm == "read") {
    return c == Collective::all_reduce || c == Collective::reduce ||
           c == Collective::reduce_scatter || c == Collective::all_gather ||
           c == Collective::broadcast || c == Collective::all_to_all || c == Collective::gather ||
           c == Collective::scatter;
  }
  return true;
}

std::vector<Case> casesFor(int n, const std::string& algorithm) {
  std::vector<size_t> counts{0, 1, size_t(n - 1), size_t(n), size_t(n + 1)};
  std::sort(counts.begin(), counts.end());
  counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
  std::vector<Case> cases;
  int sample = 0;
  for (int c = 0; c < kNumCollectives; ++c) {
    const auto coll = static_cast<Collective>(c);
    if (!implements(algorithm, coll)) continue;
    const bool rooted = hasRoot(coll);
    const bool inPlaceForm = coll != Collective::all_to_all && coll != Collective::all_to_all_v &&
                             coll != Collective::send_recv && coll != Collective::barrier;
    for (int t = 0; t < kNumDataTypes; ++t) {
      const auto type = static_cast<DataType>(t);
      const int variants = reduces(coll) ? kNumRedOps : (rooted ? n : 1);
      for (int v = 0; v < variants; ++v) {
        const RedOp op = reduces(coll) ? static_cast<RedOp>(v) : RedOp::sum;
        // reduce: each op at one root, the roots taking turns.
        const int root = !rooted ? -1 : reduces(coll) ? (v + t) % n : v;
        for (bool inPlace : {false, true}) {
          if (inPlace && !inPlaceForm) continue;
          for (size_t count : counts) {
            // Everything but the ring samples its counts: each still meets 0 and odd sizes.
            if (algorithm != "ring" && sample++ % 3 != 0) continue;
            cases.push_back({coll, count, type, op, root, inPlace});
          }
          // Larger counts, sampled: a prime that spans many slots and rounds.
          if (sample++ % 7 == 0) cases.push_back({coll, 1031, type, op, root, inPlace});
        }
      }
    }
    // Every collective also runs once over many rounds.
    cases.push_back({coll, 50021, DataType::f32, RedOp::sum, rooted ? n - 1 : -1, false});
  }
  return cases;
}

// Ranks as threads share a host, so `auto` means shared memory. `singleCopyBytes`: shm slots
// from this size are read from the sender's memory (0: none), with no host window, whose set-up
// turns the single copy off where the kernel's copy is slow. Returns the slots that were.
uint64_t runMatrix(int n, const std::string& algorithm, int channels = 0,
                   const std::string& transport = "auto", uint32_t nSlots = 4,
                   size_t singleCopyBytes = 0, uint64_t* directReads = nullptr) {
  CommConfig config = test::tinySlots();
  config.nSlots = nSlots;
  config.shmSingleCopyBytes = singleCopyBytes;
  if (singleCopyBytes > 0) config.oneShotBytes = 0;
  config.algorithm = algorithm;
  config.channels = channels;
  config.transport = transport;
  test::ThreadJob job(n, config,
                      "matrix-" + algorithm + std::to_string(channels) + "-" + std::to_string(n) +
                          transport + std::to_string(nSlots));
  const auto cases = casesFor(n, algorithm);
  std::vector<std::string> failures(n);
  job.run([&](Communicator& c, int r) {
    uint64_t seed = 1234;
    for (const Case& k : cases) {
      const std::string wrong = runCase(c, r, n, k, ++seed);
      if (!wrong.empty() && failures[r].size() < 2000) {
        failures[r] += "rank " + std::to_string(r) + ": " + algorithm + " " + k.describe(n) + ":" +
                       wrong + "\n";
      }
    }
  });
  MESSAGE(n << " ranks, " << algorithm << ", channels " << channels << ", " << transport << ": "
            << cases.size() << " calls checked");
  uint64_t direct = 0;
  for (int r = 0; r < n; ++r) {
    CHECK_MESSAGE(failures[r].empty(), failures[r]);
    direct += job.comm(r).directSends();
    if (directReads) *directReads += job.comm(r).directReads();
  }
  return direct;
}

const int kSizes[] = {1, 2, 3, 4, 5, 7, 8};

}  // namespace

TEST_CASE("matrix: ring (and the only algorithm of the others)") {
  for (int n : kSizes) runMatrix(n, "ring");
}
TEST_CASE("matrix: ring collectives on three channels each") {
  for (int n : {1, 2, 3, 5}) runMatrix(n, "ring", 3);
}
TEST_CASE("matrix: trees") {
  for (int n : kSizes) runMatrix(n, "tree");
}
TEST_CASE("matrix: recursive doubling") {
  for (int n : kSizes) runMatrix(n, "rd");
}
// The fewest slots a link may have (GYRE_NSLOTS=2): no algorithm may need more in flight.
TEST_CASE("matrix: every algorithm on links of two slots") {
  for (int n : {5, 7}) {
    for (const char* algorithm : {"ring", "tree", "rd"}) runMatrix(n, algorithm, 0, "auto", 2);
  }
  runMatrix(8, "rd", 0, "auto", 2);  // the reduce-scatter's recursive halving
}
// Every collective the host window runs goes through it where its post fits (64 KiB); the
// larger calls, and the collectives it lacks, interleave through the links.
TEST_CASE("matrix: one-shot through the host window") {
  for (int n : kSizes) runMatrix(n, "oneshot");
}
// The all-reduces, reduces, reduce-scatters, all-gathers, broadcasts, gathers, scatters and
// all-to-alls through the direct read, every other call as with "auto" (in place and out of place,
// every type, op and root the matrix has).
TEST_CASE("matrix: direct-read collectives") {
  uint64_t reads = 0;
  for (int n : kSizes) runMatrix(n, "read", 0, "auto", 4, 0, &reads);
  if (test::singleCopyMissing().empty()) {
    CHECK(reads > 0);
  } else {
    MESSAGE("the direct read is off here: " << test::singleCopyMissing());
    CHECK(reads == 0);
  }
}

// Slots of 64 bytes and more leave from the sender's buffer wherever it stays unwritten (the
// collectives that do not reduce); the others are copied, in the same calls.
TEST_CASE("matrix: single copy over shared memory") {
  uint64_t direct = 0;
  for (int n : {2, 3, 4}) {
    for (const char* algorithm : {"ring", "tree", "rd"}) {
      direct += runMatrix(n, algorithm, 0, "auto", 4, 64);
    }
  }
  runMatrix(3, "ring", 2, "auto", 4, 64);
  if (test::singleCopyMissing().empty()) {
    CHECK(direct > 0);
  } else {
    MESSAGE("this process may not read memory through the kernel (" << test::singleCopyMissing()
                                                                    << "): every slot copied");
  }
}
TEST_CASE("matrix: the tuner's own choices") {
  for (int n : {3, 4}) runMatrix(n, "");
}
// Needs a device: CI runs it inside the Soft-RoCE guest (rdma_tests.sh), where every call
// crosses an emulated adapter, so it samples fewer sizes than the tcp case.
TEST_CASE("matrix: every algorithm over rdma") {
  if (const std::string missing = test::rdmaMissing(); !missing.empty()) {
    MESSAGE("skipped: no rdma device: " << missing);
    return;
  }
  for (int n : {2, 3, 4}) {
    for (const char* algorithm : {"ring", "tree", "rd"}) runMatrix(n, algorithm, 0, "rdma");
  }
  runMatrix(3, "ring", 2, "rdma");
}

TEST_CASE("matrix: every algorithm over tcp") {
  for (int n : {2, 3, 5, 8}) {
    for (const char* algorithm : {"ring", "tree", "rd"}) runMatrix(n, algorithm, 0, "tcp");
  }
  runMatrix(3, "ring", 2, "tcp");
}
