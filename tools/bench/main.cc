// gyre-bench: nccl-tests style benchmark of one collective over a range of sizes.
//   gyre-run -n 4 gyre-bench all_reduce -b 8 -e 256M -f 4
// Columns: size count type redop root time(us) algbw busbw #wrong (time: mean per iteration,
// the slowest rank's; busbw per nccl-tests' PERFORMANCE.md). With --cuda the buffers are CUDA
// device memory: the host vectors below hold what is uploaded and what is checked, and the
// calls go on a stream (synchronized once after each timed loop). --per-call also times every
// call on its own and prints, under each row, how the calls spread and how often the calling
// thread slept: a slow mode shows there as a tail, not only as a slower mean.
#include <sys/resource.h>

#include <unistd.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <sstream>
#include <vector>

#ifdef GYRE_BENCH_CUDA
#include <cuda_runtime_api.h>
#endif

#include "gyre/gyre.h"
#include "gyre/types.h"
#include "tools/bench/huge_pages.h"
#include "tools/bench/pattern.h"

#include "tools/bench/bench_run.h"

namespace {

using namespace gyre::bench;
using gyre::DataType;
using gyre::RedOp;

// --per-call: each call's time, and how often the calling thread slept meanwhile (voluntary
// context switches: a wait that outlasted its busy phase, or a yield to another thread).
class PerCall {
 public:
  explicit PerCall(int iters) : us_(size_t(iters)), sleepsBefore_(iters ? threadSleeps() : 0) {}
  template <class Call>
  void time(int i, Call&& call) {
    const auto t0 = std::chrono::steady_clock::now();
    call();
    us_[size_t(i)] =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  }
  void end() {
    if (!us_.empty()) sleeps_ = threadSleeps() - sleepsBefore_;
  }
  void report(Run& run) const {
    std::vector<double> sorted = us_;
    std::sort(sorted.begin(), sorted.end());
    const auto at = [&](double q) {
      return sorted[std::min(sorted.size() - 1, size_t(q * sorted.size()))];
    };
    const auto slow =
        double(std::count_if(us_.begin(), us_.end(), [](double us) { return us > 1000; }));
    const double mostSlow = run.maxOverRanks(slow);
    const uint64_t sleeps = run.sumOverRanks(sleeps_);
    if (run.rank != 0) return;
    std::printf(
        "#  per call, rank 0: p50 %.1f p99 %.1f p99.9 %.1f max %.1f us; calls over 1 ms: "
        "%.0f of %zu (the most of any rank); sleeps: %llu (all ranks)\n",
        at(0.5), at(0.99), at(0.999), sorted.back(), mostSlow, sorted.size(),
        (unsigned long long)sleeps);
    std::fflush(stdout);
  }

 private:
  static uint64_t threadSleeps() {
    rusage usage{};
    getrusage(RUSAGE_THREAD, &usage);
    return uint64_t(usage.ru_nvcsw);
  }
  std::vector<double> us_;
  uint64_t sleepsBefore_;
  uint64_t sleeps_ = 0;
};

// Before the first timed row: connections open, and buffers and every link slot are touched
// (the largest size until 64 MiB have passed). Without it each row pays for pages first used
// at its size: on this VM the first touch of a slot's page costs about 30 us, so a 4 KiB
// broadcast of 10 iterations right after the 2 KiB row measured 16 us instead of 2.3.
void prewarm(Run& run) {
  const Options& o = run.o;
  const size_t maxBytes = std::max<size_t>(1, o.maxBytes);
  const int largeCalls = int(std::clamp<size_t>((size_t(64) << 20) / maxBytes, 2, 64));
  for (auto [bytes, calls] : {std::pair{maxBytes, largeCalls}, std::pair{size_t(o.minBytes), 64}}) {
    run.prepare(bytes, false);
    run.upload();
    for (int i = 0; i < calls; ++i) run.once();
    run.finish();
  }
  for (int i = 0; i < 64; ++i) run.barrier();  // the barrier may ride links of its own
}

// Untimed calls the tuned communicator makes at each size before its first round: past the
// measured choice's trials (up to 59 calls, docs/tuning_measured.md).
constexpr int kTrialCalls = 64;

// One communicator per algorithm (a split with the algorithm forced; "tuned" lets the tuner
// choose), measured in turn at each size inside this one process, so all candidates meet the
// same machine state; each time is the median of `reps` rounds.
int compareAlgorithms(gyreComm_t comm, Run& run, const std::vector<std::string>& names, int reps) {
  const Options& o = run.o;
  std::vector<gyreComm_t> comms;
  for (const auto& name : names) {
    gyreConfig_t config = GYRE_CONFIG_INITIALIZER;
    config.algorithm = name == "tuned" ? "auto" : name.c_str();
    gyreComm_t c = nullptr;
    CHECK(gyreCommSplit(comm, 0, run.rank, &c, &config));
    comms.push_back(c);
  }
  if (run.rank == 0) {
    std::printf(
        "# gyre-bench %s: %d ranks, time (us) per algorithm, median of %d rounds of %d "
        "iters, each algorithm in turn\n",
        kCollNames[int(o.coll)], run.n, reps, o.iters);
    std::printf("#%11s", "size");
    for (const auto& name : names) std::printf(" %10s", name.c_str());
    std::printf(" %10s %7s\n", "tuned/best", "#wrong");
  }
  for (auto c : comms) {
    run.comm = c;
    prewarm(run);
  }
  for (double b = double(o.minBytes); b <= double(o.maxBytes) * 1.0000001; b *= o.factor) {
    const size_t bytes = size_t(b);
    std::vector<std::vector<double>> times(names.size());
    uint64_t wrong = 0;
    for (int round = 0; round < reps; ++round) {
      for (size_t k = 0; k < names.size(); ++k) {
        const size_t a = (k + size_t(round)) % names.size();  // rotate who goes first
        run.comm = comms[a];
        run.prepare(bytes, round == 0);
        if (round == 0) {
          run.barrier();
          run.once();
          wrong += run.wrong(bytes);
        }
        const int warmup =
            round == 0 && names[a] == "tuned" ? std::max(o.warmup, kTrialCalls) : o.warmup;
        for (int i = 0; i < warmup; ++i) run.once();
        // Every candidate starts from the same barrier. Its own communicator's would let the
        // ranks go in the order of that one's all-reduce: a ring's lets them go one after the
        // other, the head start a ring broadcast wants (20 calls at n = 4 on 2 cores: a fifth
        // to two thirds faster than after the window's barrier, which lets all go at once).
        run.barrier(comm);
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < o.iters; ++i) run.once();
        const double us =
            std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0)
                .count() /
            o.iters;
        times[a].push_back(run.maxOverRanks(us));
      }
    }
    wrong = run.sumOverRanks(wrong);
    if (run.rank == 0) {
      std::printf("%12zu", std::max(run.sendCount(bytes), run.recvCount(bytes)) * run.es);
      double best = 1e300, tuned = -1;
      for (size_t a = 0; a < names.size(); ++a) {
        auto& t = times[a];
        std::sort(t.begin(), t.end());
        const double median = t[t.size() / 2];
        std::printf(" %10.2f", median);
        if (names[a] == "tuned") {
          tuned = median;
        } else {
          best = std::min(best, median);
        }
      }
      if (tuned >= 0 && best < 1e300) {
        std::printf(" %10.2f", tuned / best);
      } else {
        std::printf(" %10s", "-");
      }
      std::printf(" %7llu\n", (unsigned long long)wrong);
      std::fflush(stdout);
    }
  }
  run.comm = comm;
  for (auto c : comms) CHECK(gyreCommDestroy(c));
  return 0;
}

// A command-line name to its enum value (as the number CLI11 then reads); the error lists the
// names. CLI11's own CheckedTransformer prints uint8_t enum values as characters.
template <class Enum>
CLI::Validator oneOf(const std::map<std::string, Enum>& names) {
  const auto check = [&names](std::string& text) {
    const auto it = names.find(text);
    if (it == names.end()) {
      std::string known;
      for (const auto& [name, value] : names) known += (known.empty() ? "" : " | ") + name;
      return "unknown value '" + text + "': one of " + known;
    }
    text = std::to_string(int(it->second));
    return std::string();
  };
  return CLI::Validator(check, "");
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"gyre-bench: nccl-tests style collective benchmark (run under gyre-run)"};
  std::map<std::string, Coll> colls;
  for (int c = 0; c < int(std::size(kCollNames)); ++c) colls[kCollNames[c]] = Coll(c);
  std::map<std::string, DataType> types{{"int8", DataType::i8},   {"uint8", DataType::u8},
                                        {"int32", DataType::i32}, {"uint32", DataType::u32},
                                        {"int64", DataType::i64}, {"uint64", DataType::u64},
                                        {"half", DataType::f16},  {"bfloat16", DataType::bf16},
                                        {"float", DataType::f32}, {"double", DataType::f64}};
  std::map<std::string, RedOp> ops{{"sum", RedOp::sum},
                                   {"prod", RedOp::prod},
                                   {"min", RedOp::min},
                                   {"max", RedOp::max},
                                   {"avg", RedOp::avg}};
  std::string minText = "8", maxText = "256M";
  app.add_option("collective", o.coll,
                 "all_reduce | all_gather | reduce_scatter | broadcast | reduce | gather | "
                 "scatter | all_to_all | sendrecv")
      ->transform(oneOf(colls));
  app.add_option("-b,--minbytes", minText, "smallest size (K, M, G suffixes)")
      ->capture_default_str();
  app.add_option("-e,--maxbytes", maxText, "largest size")->capture_default_str();
  app.add_option("-f,--stepfactor", o.factor, "size multiplier between rows")
      ->capture_default_str();
  app.add_option("-n,--iters", o.iters, "timed iterations per size")->capture_default_str();
  double seconds = 0;
  app.add_option("-t,--seconds", seconds,
                 "instead of -n: time each size for about this long (iterations from a "
                 "calibration after the warm-up, the slowest rank's pace; at least 5), as the "
                 "peer benchmarks' --target-s");
  bool peerIters = false;
  app.add_flag("--peer-iters", peerIters,
               "with --seconds: as many iterations as the peer benchmarks would take at the "
               "row's pace (20 to 1000, fewer past 10 s), for a same-run comparison with them");
  PeerRule peerRule;
  auto* peerMin = app.add_option("--peer-min-iters", peerRule.minIters,
                                 "with --peer-iters: the peers' --min-iters")
                      ->capture_default_str()
                      ->check(CLI::Range(1, 1 << 20));
  auto* peerMax = app.add_option("--peer-max-iters", peerRule.maxIters,
                                 "with --peer-iters: the peers' --max-iters")
                      ->capture_default_str()
                      ->check(CLI::Range(1, 1 << 20));
  auto* peerMaxS = app.add_option("--peer-max-s", peerRule.maxSeconds,
                                  "with --peer-iters: the peers' --max-s (at least 3 calls)")
                       ->capture_default_str()
                       ->check(CLI::PositiveNumber);
  app.add_option("-w,--warmup_iters", o.warmup,
                 "untimed iterations per size (after one warm-up of every link at the largest and "
                 "the smallest size)")
      ->capture_default_str();
  app.add_option("-c,--check", o.check, "verify results (0/1)")->capture_default_str();
  app.add_option("-d,--datatype", o.type,
                 "data type: int8 | uint8 | int32 | uint32 | int64 | uint64 | half | bfloat16 | "
                 "float | double (default float)")
      ->transform(oneOf(types));
  app.add_option("-o,--op", o.op, "reduction op: sum | prod | min | max | avg (default sum)")
      ->transform(oneOf(ops));
  app.add_option("-r,--root", o.root, "root rank for broadcast")->capture_default_str();
  app.add_flag("--inplace", o.inPlace, "in-place operation");
  app.add_option("--batch", o.batch, "all_reduce: calls per iteration (time is for all of them)")
      ->capture_default_str();
  app.add_flag("--group", o.group, "all_reduce: issue each iteration's calls as one group");
  app.add_flag("--async", o.async,
               "issue each call in a group ended by gyreGroupEndAsync and wait for its work at "
               "once (host buffers)");
  app.add_flag("--rewrite", o.rewrite,
               "before each call, store to every cache line of the input, as an application "
               "that produces fresh data does (host buffers; the time includes the stores)");
  app.add_flag("--cuda", o.cuda,
               "buffers in CUDA device memory, calls on a CUDA stream (one kernel over cuda_ipc "
               "links between GPUs of one host, else staged through pinned host memory; see "
               "docs/cuda.md)");
  app.add_flag("--register", o.registered,
               "register the buffers (gyreCommRegister): sends leave straight from them over rdma");
  std::string algorithms;
  int rounds = 5;
  app.add_option("--algos", algorithms,
                 "instead: compare algorithms (comma list of GYRE_ALGO names: ring, tree, rd, "
                 "pairwise, hier, oneshot, read, tuned) in one process, "
                 "in turn at each size (tuned: at least 64 untimed calls a size first, past "
                 "the measured choice's trials)");
  app.add_option("--rounds", rounds, "--algos: rounds per size (the median is shown)")
      ->capture_default_str();
  double soakSeconds = 0;
  uint64_t seed = 1;
  app.add_option("--soak", soakSeconds,
                 "instead: random collectives, sizes (up to -e), types, ops and roots for this "
                 "many seconds, each verified; reports errors and RSS");
  app.add_option("--seed", seed, "random seed for --soak")->capture_default_str();
  bool perCall = false;
  app.add_flag("--per-call", perCall,
               "also time each call: percentiles of rank 0, calls over 1 ms and sleeps of the "
               "calling threads (host buffers)");
  double gapUs = 0;
  app.add_option("--gap-us", gapUs,
                 "sleep this long on every rank after each timed call, as calls that come now and "
                 "then (waiters go past their busy phase); the time shown is the calls' alone "
                 "(host buffers, -n calls)");
  CLI11_PARSE(app, argc, argv);
  try {
    o.minBytes = parseSize(minText);
    o.maxBytes = parseSize(maxText);
  } catch (const CLI::ValidationError& e) {
    std::fprintf(stderr, "gyre-bench: %s\n", e.what());
    return 2;
  }
  if (gapUs > 0 && (o.cuda || o.batch > 1 || perCall || seconds > 0)) {
    std::fprintf(stderr,
                 "gyre-bench: --gap-us times -n host calls (no --cuda, --batch, "
                 "--per-call, --seconds)\n");
    return 2;
  }
  if (perCall && (o.cuda || o.batch > 1)) {
    std::fprintf(stderr,
                 "gyre-bench: --per-call times host calls one by one (no --cuda, --batch)\n");
    return 2;
  }
  if (o.inPlace && o.coll == Coll::all_to_all) {
    std::fprintf(stderr, "gyre-bench: all_to_all has no in-place form (no --inplace)\n");
    return 2;
  }
  if (o.factor <= 1 || o.minBytes == 0 || o.maxBytes < o.minBytes || o.iters < 1 || seconds < 0) {
    std::fprintf(stderr,
                 "gyre-bench: need 0 < minbytes <= maxbytes, stepfactor > 1, iters >= 1, "
                 "seconds >= 0\n");
    return 2;
  }

  gyreComm_t comm = nullptr;
  CHECK(gyreCommInitFromEnv(&comm));
  Run run{o, comm, 0, 1, gyre::dataTypeSize(o.type), {}, {}, {}};
  CHECK(gyreCommUserRank(comm, &run.rank));
  CHECK(gyreCommCount(comm, &run.n));
  if (o.root < 0 || o.root >= run.n) {
    std::fprintf(stderr, "gyre-bench: root %d outside [0, %d)\n", o.root, run.n);
    return 2;
  }
  if (o.coll == Coll::sendrecv && run.n < 2) {
    std::fprintf(stderr, "gyre-bench: sendrecv needs at least 2 ranks\n");
    return 2;
  }
  if (o.batch < 1 || (o.batch > 1 && o.coll != Coll::all_reduce)) {
    std::fprintf(stderr, "gyre-bench: --batch needs all_reduce and a value >= 1\n");
    return 2;
  }
  if (o.cuda && (o.coll == Coll::sendrecv || o.group || o.async || !algorithms.empty() ||
                 soakSeconds > 0 || o.registered || o.rewrite)) {
    std::fprintf(stderr,
                 "gyre-bench: --cuda takes no sendrecv, --group, --async, --algos, --soak, "
                 "--register or --rewrite\n");
    return 2;
  }
#ifndef GYRE_BENCH_CUDA
  if (o.cuda) {
    std::fprintf(stderr, "gyre-bench: --cuda needs a build with CUDA (GYRE_WITH_CUDA)\n");
    return 2;
  }
#endif
  if (peerIters && seconds <= 0) {
    std::fprintf(stderr, "gyre-bench: --peer-iters needs --seconds\n");
    return 2;
  }
  if (!peerIters && (peerMin->count() || peerMax->count() || peerMaxS->count())) {
    std::fprintf(
        stderr,
        "gyre-bench: --peer-min-iters, --peer-max-iters and --peer-max-s need --peer-iters\n");
    return 2;
  }
  if (peerRule.minIters > peerRule.maxIters) {
    std::fprintf(stderr, "gyre-bench: --peer-min-iters is above --peer-max-iters\n");
    return 2;
  }
  if (!algorithms.empty() && seconds > 0) {
    std::fprintf(stderr, "gyre-bench: --algos takes -n, not --seconds\n");
    return 2;
  }
  if (!algorithms.empty()) {
    std::vector<std::string> names;
    std::stringstream list(algorithms);
    for (std::string name; std::getline(list, name, ',');) names.push_back(name);
    const size_t maxElems = std::max(run.sendCount(o.maxBytes), run.recvCount(o.maxBytes));
    run.send.resize(std::max<size_t>(1, run.sendCount(o.maxBytes)) * run.es);
    run.recv.resize(maxElems * run.es);
    run.expected.resize(run.recvCount(o.maxBytes) * run.es);
    const int rc = compareAlgorithms(comm, run, names, std::max(1, rounds));
    CHECK(gyreCommDestroy(comm));
    return rc;
  }
  if (soakSeconds > 0) {
    const int rc = soak(comm, o, soakSeconds, seed);
    CHECK(gyreCommDestroy(comm));
    return rc;
  }
  const bool reduces =
      o.coll == Coll::all_reduce || o.coll == Coll::reduce_scatter || o.coll == Coll::reduce;
  const size_t maxElems = std::max(run.sendCount(o.maxBytes), run.recvCount(o.maxBytes));
  run.send.resize(std::max<size_t>(1, run.sendCount(o.maxBytes)) * run.es);
  run.recv.resize(std::max(maxElems, run.sendCount(o.maxBytes)) * run.es * size_t(o.batch));
  run.expected.resize(run.recvCount(o.maxBytes) * run.es);
#ifdef GYRE_BENCH_CUDA
  if (o.cuda) {
    cudaCheck(cudaMalloc(reinterpret_cast<void**>(&run.deviceSend), run.send.size()));
    cudaCheck(cudaMalloc(reinterpret_cast<void**>(&run.deviceRecv), run.recv.size()));
    cudaStream_t stream = nullptr;
    cudaCheck(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    run.stream = stream;
  }
#endif
  void* handles[2] = {nullptr, nullptr};
  if (o.registered) {
    CHECK(gyreCommRegister(comm, run.send.data(), run.send.size(), &handles[0]));
    CHECK(gyreCommRegister(comm, run.recv.data(), run.recv.size(), &handles[1]));
  }

  if (run.rank == 0) {
    const char* algo = std::getenv("GYRE_ALGO");
    char iters[160];
    if (seconds > 0 && peerIters) {
      std::snprintf(iters, sizeof iters,
                    "iters for about %g s (%d-%d, at most %g s, as the peer "
                    "benchmarks)",
                    seconds, peerRule.minIters, peerRule.maxIters, peerRule.maxSeconds);
    } else if (seconds > 0) {
      std::snprintf(iters, sizeof iters, "iters for about %g s", seconds);
    } else {
      std::snprintf(iters, sizeof iters, "%d iters", o.iters);
    }
    std::printf("# gyre-bench %s: %d ranks, %s, %s, %s (%d warm-up), check %s, algorithm %s",
                kCollNames[int(o.coll)], run.n,
                o.cuda ? "CUDA device buffers on a stream" : "host buffers",
                o.inPlace ? "in place" : "out of place", iters, o.warmup, o.check ? "on" : "off",
                algo && *algo ? algo : "tuned");
    if (o.batch > 1) std::printf(", %d calls per row%s", o.batch, o.group ? " in one group" : "");
    if (o.registered) std::printf(", registered buffers");
    if (o.async) std::printf(", each call a work waited for");
    std::printf("\n");
    std::printf("#%11s %12s %9s %6s %5s %11s %11s %11s %7s\n", "size", "count", "type", "redop",
                "root", "time(us)", "algbw(GB/s)", "busbw(GB/s)", "#wrong");
  }
  double busSum = 0;
  int rows = 0;
  prewarm(run);
  for (double b = double(o.minBytes); b <= double(o.maxBytes) * 1.0000001; b *= o.factor) {
    const size_t bytes = size_t(b);
    run.prepare(bytes, false);
    run.upload();
    for (int i = 0; i < o.warmup; ++i) run.once();
    run.finish();
    const int iters =
        seconds > 0 ? itersFor(run, seconds, peerIters ? &peerRule : nullptr) : o.iters;
    run.barrier();
    PerCall calls(perCall ? iters : 0);
    const auto t0 = std::chrono::steady_clock::now();
    double gapsUs = 0;  // --gap-us: the sleeps, left out of the time
    if (perCall) {
      for (int i = 0; i < iters; ++i) calls.time(i, [&] { run.once(); });
    } else {
      for (int i = 0; i < iters; ++i) {
        run.once();
        if (gapUs <= 0) continue;
        const auto slept = std::chrono::steady_clock::now();
        usleep(useconds_t(gapUs));
        gapsUs +=
            std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - slept)
                .count();
      }
    }
    run.finish();
    const double us =
        (std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() -
         gapsUs) /
        iters;
    calls.end();
    const double time = run.maxOverRanks(us);
    uint64_t wrong = 0;
    if (o.check) {
      run.prepare(bytes, true);
      run.upload();
      run.barrier();
      run.once();
      wrong = run.sumOverRanks(run.wrong(bytes));
    }
    const size_t shownCount = std::max(run.sendCount(bytes), run.recvCount(bytes));
    const size_t shownBytes = shownCount * run.es;
    const double algbw = double(shownBytes) / time / 1e3;
    const double busbw = algbw * busFactor(o.coll, run.n);
    busSum += busbw;
    ++rows;
    if (run.rank == 0) {
      std::printf("%12zu %12zu %9s %6s %5d %11.2f %11.3f %11.3f %7s\n", shownBytes, shownCount,
                  gyre::dataTypeName(o.type), reduces ? gyre::redOpName(o.op) : "none",
                  (o.coll == Coll::broadcast || o.coll == Coll::reduce || o.coll == Coll::gather ||
                   o.coll == Coll::scatter)
                      ? o.root
                      : -1,
                  time, algbw, busbw, o.check ? std::to_string(wrong).c_str() : "N/A");
      std::fflush(stdout);
    }
    if (perCall) calls.report(run);
  }
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  const double rssMiB = run.maxOverRanks(double(usage.ru_maxrss) / 1024.0);
  // The host buffers on huge pages, the fewest of any rank (the most left on small pages).
  const double bufferMiB = double(run.send.size() + run.recv.size()) / 1048576.0;
  const double smallMiB = run.maxOverRanks(
      bufferMiB - double(gyre::bench::hugePageBytes(
                      {{run.send.data(), run.send.size()}, {run.recv.data(), run.recv.size()}})) /
                      1048576.0);
  if (run.rank == 0) {
    std::printf("# Avg bus bandwidth    : %.3f GB/s\n", rows ? busSum / rows : 0.0);
    std::printf("# Peak RSS per rank    : %.1f MiB (largest rank)\n", rssMiB);
    if (!o.cuda) {
      std::printf(
          "# Huge pages per rank  : %.1f of %.1f MiB of the host buffers (fewest of any rank)\n",
          bufferMiB - smallMiB, bufferMiB);
    }
  }
  for (void* handle : handles)
    if (handle) CHECK(gyreCommDeregister(comm, handle));
  CHECK(gyreCommDestroy(comm));
#ifdef GYRE_BENCH_CUDA
  if (o.cuda) {
    cudaStreamDestroy(static_cast<cudaStream_t>(run.stream));
    cudaFree(run.deviceSend);
    cudaFree(run.deviceRecv);
  }
#endif
  return 0;
}
