// The device executor's protocol (algorithms/slot_prims.h, algorithms/device_call.h) run on
// the host: one thread per (rank, channel) plays a thread block, host memory laid out by
// DeviceLinkLayout plays the ranks' device regions, and the CPU kernels do the arithmetic.
// What a GPU adds (many threads per block, IPC mappings, the device clock) is checked by
// tests/cuda/ipc_test.cc on a machine with one; the slot protocol, slicing, positions that
// carry over between calls, header checks and deadlines are checked here, in every build.
#include <doctest/doctest.h>

#include <atomic>
#include <barrier>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "algorithms/device_call.h"
#include "kernels/cpu/reduce.h"
#include "runtime/cuda/device_failure.h"
#include "runtime/cuda/kernel_plan.h"
#include "tests/harness/reference.h"

using namespace gyre;

namespace {

// What the threads of one block share: its barrier, and the flags of syncAny (two, used in
// turn, so one can be reset while the other is in use).
struct Block {
  explicit Block(int threads) : barrier(threads) {}
  std::barrier<> barrier;
  std::atomic<bool> any[2] = {false, false};
};

// A thread block played by `threads` host threads (one: every barrier is trivially passed).
// The element kernels split each call among them, as the device's threads do.
struct HostEnv {
  DataType type;
  RedOp op;
  DeviceFailure* failure;
  const DeviceControl* control;
  Block* block = nullptr;
  int tid = 0;
  int threads = 1;
  unsigned turn = 0;

  bool leader() const { return tid == 0; }
  void sync() {
    if (block) block->barrier.arrive_and_wait();
  }
  bool syncAny(bool pred) {
    if (!block) return pred;
    const unsigned slot = turn++ & 1;
    if (pred) block->any[slot].store(true);
    block->barrier.arrive_and_wait();
    const bool any = block->any[slot].load();
    block->barrier.arrive_and_wait();  // all have read it: the leader may reset it
    if (tid == 0) block->any[slot].store(false);
    return any;
  }
  uint64_t load(const uint64_t* p) const {
    return std::atomic_ref<uint64_t>(*const_cast<uint64_t*>(p)).load(std::memory_order_acquire);
  }
  void store(uint64_t* p, uint64_t v) const {
    std::atomic_ref<uint64_t>(*p).store(v, std::memory_order_release);
  }
  void fence() const {}
  uint64_t nowNs() const {
    return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                        std::chrono::steady_clock::now().time_since_epoch())
                        .count());
  }
  bool abortRaised() const {
    return std::atomic_ref<uint32_t>(const_cast<DeviceControl*>(control)->abort).load() != 0;
  }
  void pause() const { std::this_thread::yield(); }
  size_t elemSize() const { return dataTypeSize(type); }
  // This thread's share [lo, hi) of n.
  size_t lo(size_t n) const { return n * size_t(tid) / size_t(threads); }
  size_t hi(size_t n) const { return n * size_t(tid + 1) / size_t(threads); }
  void reduce(void* dst, void* dst2, const void* a, const void* b, size_t n, int divisor) const {
    const size_t es = elemSize(), from = lo(n) * es, k = hi(n) - lo(n);
    auto at = [&](const void* p) { return p ? static_cast<const char*>(p) + from : nullptr; };
    cpu::reduce(type, op, const_cast<char*>(at(dst)), const_cast<char*>(at(dst2)), at(a), at(b), k,
                divisor);
  }
  void copy(void* dst, void* dst2, const void* src, size_t bytes) const {
    const size_t from = lo(bytes), k = hi(bytes) - lo(bytes);
    auto at = [&](const void* p) { return p ? static_cast<const char*>(p) + from : nullptr; };
    cpu::copy(const_cast<char*>(at(dst)), const_cast<char*>(at(dst2)), at(src), k);
  }
  void fail(const DeviceFailure& f) const {
    if (failure->code == 0) *failure = f;
  }
};

// The ranks' regions and link tables, as the communicator builds them from IPC mappings.
struct SlotNetwork {
  DeviceLinkLayout layout;
  std::vector<std::unique_ptr<uint64_t[]>> regions;  // 8-byte aligned, zeroed
  std::vector<std::vector<DeviceLink>> send, recv;
  DeviceControl control{};

  SlotNetwork(int n, int channels, uint32_t nSlots, uint32_t slotBytes)
      : layout{n, channels, nSlots, slotBytes} {
    for (int r = 0; r < n; ++r) {
      regions.emplace_back(new uint64_t[layout.regionBytes() / 8 + 1]());
    }
    send.assign(size_t(n), std::vector<DeviceLink>(size_t(n * channels), DeviceLink{}));
    recv = send;
    for (int me = 0; me < n; ++me) {
      for (int c = 0; c < channels; ++c) {
        for (int peer = 0; peer < n; ++peer) {
          const size_t at = size_t(c * n + peer);
          if (layout.linked(peer, me, c)) send[me][at] = layout.at(base(peer), peer, me, c);
          if (layout.linked(me, peer, c)) recv[me][at] = layout.at(base(me), me, peer, c);
        }
      }
    }
  }
  unsigned char* base(int r) { return reinterpret_cast<unsigned char*>(regions[size_t(r)].get()); }
  DeviceLinkTable table(int r) {
    return {layout.nranks, layout.channels, send[size_t(r)].data(), recv[size_t(r)].data()};
  }
};

// Runs `calls[r]` on every rank, a block of `threadsPerBlock` threads per (rank, channel);
// returns each rank's failures.
std::vector<std::vector<DeviceFailure>> runCalls(SlotNetwork& net, std::vector<DeviceCall> calls,
                                                 int threadsPerBlock = 1) {
  const int n = net.layout.nranks;
  std::vector<std::vector<DeviceFailure>> failures{size_t(n)};
  std::vector<std::unique_ptr<Block>> blocks;
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    failures[size_t(r)].assign(size_t(calls[size_t(r)].plan.channels), {});
  for (int r = 0; r < n; ++r) {
    for (int c = 0; c < calls[size_t(r)].plan.channels; ++c) {
      Block* block = nullptr;
      if (threadsPerBlock > 1) {
        blocks.push_back(std::make_unique<Block>(threadsPerBlock));
        block = blocks.back().get();
      }
      for (int t = 0; t < threadsPerBlock; ++t) {
        threads.emplace_back([&, r, c, t, block] {
          DeviceCall call = calls[size_t(r)];
          call.links = net.table(r);
          HostEnv env{call.dtype,     call.op, &failures[size_t(r)][size_t(c)],
                      &net.control,   block,   t,
                      threadsPerBlock};
          runDeviceChannel(env, call, c);
        });
      }
    }
  }
  for (auto& t : threads) t.join();
  return failures;
}

DeviceCall baseCall(Collective coll, DataType type, RedOp op, int rank, int n, size_t count,
                    int root, int channels, uint64_t seq, const SlotNetwork& net) {
  DeviceCall call{};
  call.seq = seq;
  call.timeoutNs = 10'000'000'000ull;
  call.rank = rank;
  call.nranks = n;
  call.dtype = type;
  call.op = op;
  call.plan.coll = coll;
  call.plan.count = count;
  call.plan.root = root;
  call.plan.chunkElems =
      std::max<size_t>(1, net.layout.nSlots / 2 * net.layout.slotBytes / dataTypeSize(type));
  call.plan.slotElems = std::max<size_t>(1, net.layout.slotBytes / dataTypeSize(type));
  call.plan.channels = splitsOverChannels(coll, Algorithm::ring) ? channels : 1;
  return call;
}

constexpr unsigned char kPoison = 0xA5;

struct Case {
  Collective coll;
  Algorithm algorithm;
};

// The collective's input and output sizes in elements, per rank.
size_t inElems(Collective coll, size_t count, int n) {
  return (coll == Collective::reduce_scatter || coll == Collective::scatter ||
          coll == Collective::all_to_all)
             ? count * size_t(n)
             : count;
}
size_t outElems(Collective coll, size_t count, int n) {
  return (coll == Collective::all_gather || coll == Collective::gather ||
          coll == Collective::all_to_all)
             ? count * size_t(n)
             : count;
}

// Runs one collective on fresh buffers and checks every rank's output exactly (and that a
// collective leaves alone what it must not write).
void checkCollective(SlotNetwork& net, const Case& k, DataType type, RedOp op, size_t count,
                     int root, int channels, uint64_t seq, uint64_t seed, int threadsPerBlock = 1) {
  const int n = net.layout.nranks;
  const size_t es = dataTypeSize(type);
  test::Data data{type, op, n, seed};
  std::vector<std::vector<unsigned char>> in{size_t(n)}, out{size_t(n)};
  std::vector<DeviceCall> calls;
  for (int r = 0; r < n; ++r) {
    in[size_t(r)].resize(inElems(k.coll, count, n) * es);
    out[size_t(r)].assign(outElems(k.coll, count, n) * es, kPoison);
    for (size_t i = 0; i < inElems(k.coll, count, n); ++i) {
      data.input(in[size_t(r)].data(), i, r, i);
    }
    DeviceCall call = baseCall(k.coll, type, op, r, n, count, root, channels, seq, net);
    call.plan.algorithm = k.algorithm;
    if (k.algorithm == Algorithm::tree) call.plan.channels = 1;
    call.send = in[size_t(r)].data();
    call.recv = out[size_t(r)].data();
    calls.push_back(call);
  }
  const auto failures = runCalls(net, calls, threadsPerBlock);
  for (int r = 0; r < n; ++r)
    for (const auto& f : failures[size_t(r)]) REQUIRE(f.code == 0);

  std::vector<unsigned char> want(std::max<size_t>(1, outElems(k.coll, count, n) * es));
  for (int r = 0; r < n; ++r) {
    CAPTURE(r);
    bool written = true;
    for (size_t i = 0; i < outElems(k.coll, count, n); ++i) {
      switch (k.coll) {
        case Collective::all_reduce:
          data.expected(want.data(), i, i);
          break;
        case Collective::reduce:
          written = r == root;
          data.expected(want.data(), i, i);
          break;
        case Collective::reduce_scatter:
          data.expected(want.data(), i, size_t(r) * count + i);
          break;
        case Collective::broadcast:
          data.input(want.data(), i, root, i);
          break;
        case Collective::all_gather:
          data.input(want.data(), i, int(i / count), i % count);
          break;
        case Collective::gather:
          written = r == root;
          data.input(want.data(), i, int(i / count), i % count);
          break;
        case Collective::scatter:
          data.input(want.data(), i, root, size_t(r) * count + i);
          break;
        case Collective::all_to_all:  // block b comes from rank b's block r
          data.input(want.data(), i, int(i / count), size_t(r) * count + i % count);
          break;
        default:
          FAIL("unexpected collective");
      }
    }
    const size_t bytes = outElems(k.coll, count, n) * es;
    if (written) {
      REQUIRE((bytes == 0 || std::memcmp(out[size_t(r)].data(), want.data(), bytes) == 0));
    } else {
      for (size_t b = 0; b < bytes; ++b) REQUIRE(out[size_t(r)][b] == kPoison);
    }
  }
}

const Case kCases[] = {
    {Collective::all_reduce, Algorithm::ring}, {Collective::all_reduce, Algorithm::tree},
    {Collective::all_gather, Algorithm::ring}, {Collective::reduce_scatter, Algorithm::ring},
    {Collective::broadcast, Algorithm::ring},  {Collective::broadcast, Algorithm::tree},
    {Collective::reduce, Algorithm::ring},     {Collective::reduce, Algorithm::tree},
    {Collective::gather, Algorithm::ring},     {Collective::scatter, Algorithm::ring},
    {Collective::all_to_all, Algorithm::ring},
};

}  // namespace

TEST_CASE("device link layout: every ring inside its region, none overlapping, both ends agree") {
  for (int n = 1; n <= 9; ++n) {
    for (int channels = 1; channels <= 4; ++channels) {
      CAPTURE(n);
      CAPTURE(channels);
      const DeviceLinkLayout layout{n, channels, 4, 1000};
      CHECK(layout.ringBytes() % 256 == 0);
      for (int receiver = 0; receiver < n; ++receiver) {
        std::vector<size_t> offsets;
        for (int c = 0; c < channels; ++c) {
          for (int sender = 0; sender < n; ++sender) {
            if (!layout.linked(receiver, sender, c)) continue;
            const size_t at = layout.offset(receiver, sender, c);
            REQUIRE(at + layout.ringBytes() <= layout.regionBytes());
            offsets.push_back(at);
          }
        }
        std::sort(offsets.begin(), offsets.end());
        REQUIRE(std::adjacent_find(offsets.begin(), offsets.end()) == offsets.end());
        CHECK(offsets.size() == size_t(layout.ringsPerRank()));
        CHECK_FALSE(layout.linked(receiver, receiver, 0));
      }
    }
  }
}

// Every case of kCases for each n, channel count, count and (type, op), on links of
// `slotBytes`-byte slots (4 per link) reused across the calls, blocks of `threads` threads.
void checkMatrix(std::initializer_list<int> ns, std::initializer_list<int> channelCounts,
                 uint32_t slotBytes, const std::function<std::vector<size_t>(int n)>& countsFor,
                 const std::vector<std::pair<DataType, RedOp>>& typeOps, int threads) {
  const uint64_t seed = uint64_t(std::chrono::steady_clock::now().time_since_epoch().count());
  CAPTURE(seed);
  uint64_t seq = 0;
  for (int n : ns) {
    for (int channels : channelCounts) {
      SlotNetwork net(n, channels, 4, slotBytes);
      for (const Case& k : kCases) {
        for (size_t count : countsFor(n)) {
          for (const auto& typeOp : typeOps) {
            // Named variables, not a structured binding: CAPTURE's lambda refers to them.
            const DataType type = typeOp.first;
            const RedOp op = typeOp.second;
            if (!reduces(k.coll) && op != RedOp::sum) continue;
            CAPTURE(n);
            CAPTURE(channels);
            CAPTURE(int(k.coll));
            CAPTURE(int(k.algorithm));
            CAPTURE(count);
            CAPTURE(int(type));
            CAPTURE(int(op));
            const int root = int((count + seq) % uint64_t(n));
            ++seq;
            checkCollective(net, k, type, op, count, root, channels, seq, seed + seq, threads);
          }
        }
      }
    }
  }
}

TEST_CASE("device executor: every collective, exact, over links of few small slots") {
  std::vector<std::pair<DataType, RedOp>> typeOps;
  for (DataType type :
       {DataType::f32, DataType::bf16, DataType::i32, DataType::u8, DataType::f64}) {
    for (RedOp op : {RedOp::sum, RedOp::prod, RedOp::min, RedOp::max, RedOp::avg})
      typeOps.emplace_back(type, op);
  }
  // 48-byte slots, 4 per link: many slices, rounds and wrap-arounds; counts 0, 1, n+1, 97.
  checkMatrix(
      {1, 2, 3, 4, 5}, {1, 3}, 48,
      [](int n) {
        return std::vector<size_t>{0, 1, size_t(n + 1), 97};
      },
      typeOps, 1);
}

// The device's blocks: the leader alone waits and publishes, every thread computes its share,
// barriers between. Fewer cases, each with three threads per block.
TEST_CASE("device executor: blocks of several threads, every collective, exact") {
  checkMatrix(
      {2, 3, 4}, {1, 2}, 64,
      [](int) {
        return std::vector<size_t>{1, 61, 300};
      },
      {{DataType::f32, RedOp::avg}, {DataType::i64, RedOp::prod}, {DataType::bf16, RedOp::sum}}, 3);
}

TEST_CASE("device executor: a rank in another collective is named, the rest time out") {
  SlotNetwork net(3, 1, 4, 64);
  std::vector<float> in(5 * 40, 1.0f), out(5 * 40, 0.0f);  // rank 1 reads 3 blocks
  std::vector<DeviceCall> calls;
  for (int r = 0; r < 3; ++r) {
    DeviceCall call =
        baseCall(Collective::all_reduce, DataType::f32, RedOp::sum, r, 3, 40, -1, 1, 7, net);
    call.timeoutNs = 300'000'000;  // 0.3 s
    call.send = &in[size_t(r) * 40];
    call.recv = &out[size_t(r) * 40];
    calls.push_back(call);
  }
  calls[1].plan.coll = Collective::reduce_scatter;  // rank 1 is in another collective
  const auto failures = runCalls(net, calls);
  // Rank 2 receives from rank 1 first: it sees rank 1's header and names it.
  const DeviceFailure& seen = failures[2][0];
  CHECK(seen.code == uint32_t(DeviceFailureCode::mismatch));
  CHECK(seen.peer == 1);
  CHECK(seen.seen.coll == uint8_t(Collective::reduce_scatter));
  CHECK(seen.wantedBytes > 0);
  // Everyone else stops within the deadline, saying whom it waited for.
  for (int r : {0, 1}) {
    const DeviceFailure& f = failures[size_t(r)][0];
    CAPTURE(r);
    CHECK((f.code == uint32_t(DeviceFailureCode::timeout) ||
           f.code == uint32_t(DeviceFailureCode::mismatch)));
    CHECK(f.peer >= 0);
  }
}

TEST_CASE("device executor: a missing peer times out; the host's abort word ends the wait") {
  for (bool abort : {false, true}) {
    CAPTURE(abort);
    SlotNetwork net(2, 1, 4, 64);
    std::vector<float> in(16, 1.0f), out(16, 0.0f);
    DeviceCall call =
        baseCall(Collective::broadcast, DataType::f32, RedOp::sum, 1, 2, 16, 0, 1, 1, net);
    call.timeoutNs = abort ? 60'000'000'000ull : 200'000'000ull;
    call.send = in.data();
    call.recv = out.data();
    call.links = net.table(1);
    DeviceFailure failure{};
    HostEnv env{call.dtype, call.op, &failure, &net.control};
    std::thread raiser;
    if (abort) {
      raiser = std::thread([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        std::atomic_ref<uint32_t>(net.control.abort).store(1);
      });
    }
    const auto start = std::chrono::steady_clock::now();
    CHECK_FALSE(runDeviceChannel(env, call, 0));  // rank 0 never comes
    if (raiser.joinable()) raiser.join();
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(30));
    CHECK(failure.code ==
          uint32_t(abort ? DeviceFailureCode::aborted : DeviceFailureCode::timeout));
    CHECK(failure.peer == 0);
    CHECK(failure.waitKind == uint32_t(DeviceWaitKind::data_from));
    for (float v : out) CHECK(v == 0.0f);  // nothing arrived, nothing written
  }
}

TEST_CASE("device failures become statuses naming the rank, the call and the peer") {
  DeviceFailure f{};
  f.peer = 3;
  f.channel = 2;
  f.call.coll = uint8_t(Collective::all_reduce);
  f.call.dtype = uint8_t(DataType::f32);
  f.call.op = uint8_t(RedOp::sum);
  f.call.seq = 7;
  f.call.count = 4096;
  f.call.root = -1;
  CHECK(deviceFailureStatus(f, "rank 1", std::chrono::milliseconds(1500)).ok());

  f.code = uint32_t(DeviceFailureCode::timeout);
  f.waitKind = uint32_t(DeviceWaitKind::data_from);
  Status s = deviceFailureStatus(f, "rank 1", std::chrono::milliseconds(1500));
  CHECK(s.code == Code::timeout);
  CHECK_MESSAGE(s.message.find("rank 1: all_reduce #7") == 0, s.message);
  CHECK_MESSAGE(s.message.find("1.5 s") != std::string::npos, s.message);
  CHECK_MESSAGE(
      s.message.find("waiting for data from rank 3 over cuda_ipc (channel 2)") != std::string::npos,
      s.message);
  f.waitKind = uint32_t(DeviceWaitKind::space_at);
  s = deviceFailureStatus(f, "rank 1", std::chrono::milliseconds(1500));
  CHECK_MESSAGE(s.message.find("buffer space at rank 3") != std::string::npos, s.message);

  f.code = uint32_t(DeviceFailureCode::mismatch);
  f.seen = f.call;
  f.seen.coll = uint8_t(Collective::broadcast);
  f.seen.root = 0;
  f.seen.bytes = 64;
  f.wantedBytes = 128;
  s = deviceFailureStatus(f, "rank 1", std::chrono::milliseconds(1500));
  CHECK(s.code == Code::invalid_usage);
  CHECK_MESSAGE(s.message.find("ranks disagree") != std::string::npos, s.message);
  CHECK_MESSAGE(s.message.find("rank 3 sent data for broadcast #7") != std::string::npos,
                s.message);
  CHECK_MESSAGE(s.message.find("64 bytes where 128") != std::string::npos, s.message);

  f.code = uint32_t(DeviceFailureCode::aborted);
  CHECK(deviceFailureStatus(f, "rank 1", std::chrono::milliseconds(1)).code == Code::aborted);
  f.code = uint32_t(DeviceFailureCode::no_link);
  CHECK(deviceFailureStatus(f, "rank 1", std::chrono::milliseconds(1)).code == Code::internal);
}

TEST_CASE("kernel plans: in-place forms run as kernels, other overlaps stay staged; channels") {
  std::vector<float> a(4096), b(4096);
  const size_t slot = 256;  // bytes: 64 floats
  auto plan = [&](Collective coll, const void* send, size_t sendElems, const void* recv,
                  size_t recvElems, size_t count, int rank = 1) {
    KernelCall k{coll, DataType::f32, RedOp::sum, count, 0};
    std::vector<StagedBuffer> buffers{{send, sendElems * 4, StagedBuffer::in, "sendbuff"},
                                      {recv, recvElems * 4, StagedBuffer::out, "recvbuff"}};
    return planKernelCall(k, buffers, rank, PlanShape{4, slot, 8});
  };
  // Out of place and the in-place forms run; the call's fields are carried.
  auto p = plan(Collective::all_reduce, a.data(), 100, b.data(), 100, 100);
  REQUIRE(p);
  CHECK(p->send == a.data());
  CHECK(p->recv == b.data());
  CHECK(p->plan.count == 100);
  CHECK(p->plan.chunkElems == 128);  // half of the 4 slots of 64 floats
  CHECK(p->plan.algorithm == Algorithm::ring);
  CHECK(plan(Collective::all_reduce, a.data(), 100, a.data(), 100, 100));
  CHECK(plan(Collective::all_gather, a.data() + 100, 100, a.data(), 400, 100));
  CHECK(plan(Collective::reduce_scatter, a.data(), 400, a.data() + 100, 100, 100));
  CHECK(plan(Collective::gather, a.data() + 100, 100, a.data(), 400, 100));
  CHECK(plan(Collective::scatter, a.data(), 400, a.data() + 100, 100, 100));
  // Overlaps that are not the in-place form, and all-to-all in place, are staged.
  CHECK_FALSE(plan(Collective::all_reduce, a.data(), 100, a.data() + 1, 100, 100));
  CHECK_FALSE(plan(Collective::all_gather, a.data(), 100, a.data(), 400, 100));
  CHECK_FALSE(plan(Collective::reduce_scatter, a.data(), 400, a.data(), 100, 100));
  CHECK_FALSE(plan(Collective::all_to_all, a.data(), 400, a.data(), 400, 100));
  // Calls the kernel does not run are staged.
  CHECK_FALSE(plan(Collective::all_gather_v, a.data(), 100, b.data(), 400, 100));
  CHECK_FALSE(plan(Collective::send_recv, a.data(), 100, nullptr, 0, 100));
  // Ring collectives take a channel per slot of the per-rank count, at most 8; others one.
  CHECK(plan(Collective::all_reduce, a.data(), 10, b.data(), 10, 10)->plan.channels == 1);
  CHECK(plan(Collective::all_reduce, a.data(), 200, b.data(), 200, 200)->plan.channels == 3);
  CHECK(plan(Collective::all_reduce, a.data(), 4096, b.data(), 4096, 4096)->plan.channels == 8);
  CHECK(plan(Collective::all_gather, a.data(), 200, b.data(), 800, 200)->plan.channels == 3);
  CHECK(plan(Collective::reduce, a.data(), 4096, b.data(), 4096, 4096)->plan.channels == 1);
  CHECK(plan(Collective::all_to_all, a.data(), 800, b.data(), 800, 200)->plan.channels == 1);
  // Null buffers (a non-root's broadcast sendbuff) are fine.
  CHECK(plan(Collective::broadcast, nullptr, 0, b.data(), 100, 100));
}
