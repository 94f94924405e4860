// The C API's argument space on a one-rank communicator: counts (small, and ones whose bytes
// cannot exist), displacements, roots, types, ops, null and overlapping buffers, calls inside
// groups (nested, fused all-reduces). Every call must either succeed within the buffers it was
// given or be refused; the sanitizers catch any byte touched outside them.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "gyre/gyre.h"

namespace {

// Valid calls stay within 1024 elements of 8 bytes plus a 4 KiB offset: the arenas hold that.
constexpr size_t kArenaBytes = (1024 + 1024) * 8 + 4096;

// Counts and displacements: small ones, or ones whose bytes exceed any possible buffer (which
// must be refused, wrapped or not).
const size_t kHuge[] = {SIZE_MAX, SIZE_MAX - 7, size_t(1) << 63, (size_t(1) << 63) + 1,
                        (size_t(1) << 62) * 3};

class Input {
 public:
  Input(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool empty() const { return pos_ >= size_; }
  uint8_t byte() { return pos_ < size_ ? data_[pos_++] : 0; }
  size_t count() {
    const uint8_t b = byte();
    if (b < 16) return kHuge[b % (sizeof kHuge / sizeof kHuge[0])];
    if (b < 32) return 0;
    return ((size_t(b) << 8) | byte()) % 1025;  // up to 1024
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

gyreComm_t oneRank() {
  static gyreComm_t comm = [] {
    gyreUniqueId id;
    gyreComm_t c = nullptr;
    if (gyreGetUniqueId(&id) != gyreSuccess || gyreCommInitRank(&c, 1, id, 0) != gyreSuccess) {
      __builtin_trap();
    }
    return c;
  }();
  return comm;
}

void checkResult(gyreResult_t r) {
  // Argument errors only: a one-rank communicator has no peer to fail or time out.
  if (r != gyreSuccess && r != gyreInvalidArgument && r != gyreInvalidUsage) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  gyreComm_t comm = oneRank();
  Input in(data, size);
  // Exactly sized heap blocks: AddressSanitizer reports any byte outside them.
  std::vector<uint8_t> a(kArenaBytes, 0x5a), b(kArenaBytes, 0xa5);
  int groupDepth = 0;
  std::vector<gyreRedOp_t> made;  // premul sums, destroyed before the arenas go
  for (int call = 0; call < 12 && !in.empty(); ++call) {
    const uint8_t kind = in.byte() % 17;
    // Unknown values too, within what the enums can hold (0..15, 0..7, 0..3): a C caller's -1 is
    // beyond a C++ enum's range, which UBSan reports at the call itself.
    const auto type = static_cast<gyreDataType_t>(in.byte() % 16);
    const auto op = static_cast<gyreRedOp_t>(in.byte() % 8);
    const int root = int(int8_t(in.byte())) % 3;
    const size_t count = in.count();
    // Buffers: either arena, the same arena shifted (overlapping), or null.
    const auto buffer = [&](uint8_t choice) -> uint8_t* {
      switch (choice % 4) {
        case 0:
          return a.data();
        case 1:
          return b.data();
        case 2:
          return a.data() + (in.byte() % 64) * 64;
        default:
          return nullptr;
      }
    };
    uint8_t* send = buffer(in.byte());
    uint8_t* recv = buffer(in.byte());
    size_t counts[1] = {in.count()}, displs[1] = {in.count()};
    size_t counts2[1] = {in.count()}, displs2[1] = {in.count()};
    gyreResult_t r = gyreSuccess;
    switch (kind) {
      case 0:
        r = gyreAllReduce(send, recv, count, type, op, comm, nullptr);
        break;
      case 1:
        r = gyreAllGather(send, recv, count, type, comm, nullptr);
        break;
      case 2:
        r = gyreReduceScatter(send, recv, count, type, op, comm, nullptr);
        break;
      case 3:
        r = gyreBroadcast(send, recv, count, type, root, comm, nullptr);
        break;
      case 4:
        r = gyreReduce(send, recv, count, type, op, root, comm, nullptr);
        break;
      case 5:
        r = gyreGather(send, recv, count, type, root, comm, nullptr);
        break;
      case 6:
        r = gyreScatter(send, recv, count, type, root, comm, nullptr);
        break;
      case 7:
        r = gyreAllToAll(send, recv, count, type, comm, nullptr);
        break;
      case 8:
        r = gyreAllGatherV(send, count, recv, counts, displs, type, comm, nullptr);
        break;
      case 9:
        r = gyreAllToAllV(send, counts, displs, recv, counts2, displs2, type, comm, nullptr);
        break;
      case 10:
        r = gyreBarrier(comm);
        break;
      case 11:
      case 12:
        if (groupDepth < 3) {
          r = gyreGroupStart();
          groupDepth += r == gyreSuccess;
        }
        break;
      case 13:
      case 14:
        if (groupDepth > 0) {
          --groupDepth;
          r = gyreGroupEnd();
        }
        break;
      case 15: {
        // Premul sums take the op numbers from gyreNumOps up, which `op` reaches; the scalar is
        // read from the arena, which outlives every call of this input.
        gyreRedOp_t premul = gyreSum;
        const auto residence = static_cast<gyreScalarResidence_t>(in.byte() % 4);
        r = gyreRedOpCreatePreMulSum(&premul, send, type, residence, comm);
        if (r == gyreSuccess) made.push_back(premul);
        break;
      }
      default:
        r = gyreAllReduce(nullptr, nullptr, count, type, op, nullptr, nullptr);
        break;
    }
    checkResult(r);
  }
  while (groupDepth-- > 0) checkResult(gyreGroupEnd());
  for (gyreRedOp_t op : made) checkResult(gyreRedOpDestroy(op, comm));
  return 0;
}
