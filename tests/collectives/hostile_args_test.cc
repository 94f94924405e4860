// Arguments a careless or hostile caller passes through the C API: each is refused with
// gyreInvalidArgument and a message that says what was wrong, before anything is written.
#include <doctest/doctest.h>

#include <dirent.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "gyre/gyre.h"

namespace {

gyreComm_t oneRank() {
  gyreUniqueId id;
  REQUIRE(gyreGetUniqueId(&id) == gyreSuccess);
  gyreComm_t comm = nullptr;
  REQUIRE(gyreCommInitRank(&comm, 1, id, 0) == gyreSuccess);
  return comm;
}

// Entries of a /proc/self folder: the process's threads (task) or descriptors (fd).
int entries(const char* folder) {
  DIR* d = ::opendir(folder);
  if (!d) return -1;
  int n = 0;
  while (const dirent* e = ::readdir(d)) n += e->d_name[0] != '.';
  ::closedir(d);
  return n;
}

std::string lastError() {
  const char* message = gyreGetLastError(nullptr);
  return message ? message : "";
}

}  // namespace

TEST_CASE("groups: fused all-reduce counts whose bytes wrap are refused, nothing copied") {
  gyreComm_t comm = oneRank();
  std::vector<float> in(1000, 1.f), out(1000, -7.f);
  REQUIRE(gyreGroupStart() == gyreSuccess);
  REQUIRE(gyreAllReduce(in.data(), out.data(), 1000, gyreFloat32, gyreSum, comm, nullptr) ==
          gyreSuccess);
  // 1000 + 2^62 - 500 floats: 2^64 + 2000 bytes, which wraps to 2000.
  REQUIRE(gyreAllReduce(in.data(), out.data(), (size_t(1) << 62) - 500, gyreFloat32, gyreSum, comm,
                        nullptr) == gyreSuccess);
  CHECK(gyreGroupEnd() == gyreInvalidArgument);
  CHECK_MESSAGE(lastError().find("too large") != std::string::npos, lastError());
  for (float v : out) REQUIRE(v == -7.f);
  CHECK(gyreCommDestroy(comm) == gyreSuccess);
}

TEST_CASE("variable counts: a displacement whose block ends past SIZE_MAX is refused") {
  gyreComm_t comm = oneRank();
  // Bytes, so that no element size makes the displacement itself too large. recvbuff is
  // buffer[8..]: the wrap would write 8 bytes before it.
  std::vector<uint8_t> buffer(32, 0xee);
  std::vector<uint8_t> send(16, 5);
  const size_t counts[1] = {16}, wrapping[1] = {SIZE_MAX - 7}, zero[1] = {0};
  CHECK(gyreAllGatherV(send.data(), 16, buffer.data() + 8, counts, wrapping, gyreUint8, comm,
                       nullptr) == gyreInvalidArgument);
  // Refused either as a displacement past the largest buffer or as a block that wraps.
  CHECK_MESSAGE((lastError().find("ends past SIZE_MAX") != std::string::npos ||
                 lastError().find("too large") != std::string::npos),
                lastError());
  CHECK(gyreAllToAllV(send.data(), counts, wrapping, buffer.data() + 8, counts, zero, gyreUint8,
                      comm, nullptr) == gyreInvalidArgument);
  CHECK(gyreAllToAllV(send.data(), counts, zero, buffer.data() + 8, counts, wrapping, gyreUint8,
                      comm, nullptr) == gyreInvalidArgument);
  for (uint8_t v : buffer) REQUIRE(v == 0xee);
  CHECK(gyreCommDestroy(comm) == gyreSuccess);
}

TEST_CASE("a destroyed communicator is refused as gyreInvalidUsage, every call and twice") {
  gyreComm_t comm = oneRank();
  int32_t v = 3, out = 0;
  REQUIRE(gyreAllReduce(&v, &out, 1, gyreInt32, gyreSum, comm, nullptr) == gyreSuccess);
  CHECK(out == 3);
  REQUIRE(gyreCommDestroy(comm) == gyreSuccess);
  out = -1;
  CHECK(gyreAllReduce(&v, &out, 1, gyreInt32, gyreSum, comm, nullptr) == gyreInvalidUsage);
  CHECK_MESSAGE(lastError().find("destroyed") != std::string::npos, lastError());
  CHECK(out == -1);
  int size = 0;
  CHECK(gyreCommCount(comm, &size) == gyreInvalidUsage);
  CHECK(gyreCommAbort(comm) == gyreInvalidUsage);
  CHECK(gyreCommDestroy(comm) == gyreInvalidUsage);
  // A new communicator never reuses a destroyed handle.
  gyreComm_t next = oneRank();
  CHECK(next != comm);
  CHECK(gyreCommDestroy(next) == gyreSuccess);
}

TEST_CASE("a unique id's rendezvous server ends with its job: threads and descriptors return") {
  // Warm up what stays for the process's life (the CPU kernels, libcrypto's state), and wait
  // (bounded) until the warm-up's own server has stopped: its thread ends.
  const int threadsBefore = entries("/proc/self/task");
  gyreComm_t warm = oneRank();
  REQUIRE(gyreCommDestroy(warm) == gyreSuccess);
  const auto warmDeadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (entries("/proc/self/task") > threadsBefore &&
         std::chrono::steady_clock::now() < warmDeadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  REQUIRE(entries("/proc/self/task") <= threadsBefore);
  const int threads = entries("/proc/self/task"), fds = entries("/proc/self/fd");
  for (int job = 0; job < 3; ++job) {
    gyreComm_t comm = oneRank();
    int32_t v = 1, out = 0;
    REQUIRE(gyreAllReduce(&v, &out, 1, gyreInt32, gyreSum, comm, nullptr) == gyreSuccess);
    REQUIRE(gyreCommDestroy(comm) == gyreSuccess);
  }
  // Each server stops 1 s after its last client left, and its thread ends.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (entries("/proc/self/task") > threads && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  CHECK(entries("/proc/self/task") <= threads);
  // The next id frees what the stopped servers still held; only its own server remains.
  gyreUniqueId id;
  REQUIRE(gyreGetUniqueId(&id) == gyreSuccess);
  CHECK(entries("/proc/self/task") <= threads + 1);
  CHECK(entries("/proc/self/fd") <= fds + 4);
}

TEST_CASE("groups: variable-count calls take their counts when called, not at the group's end") {
  gyreComm_t comm = oneRank();
  std::vector<int32_t> in(5, 9), out(8, -1);
  size_t counts[1] = {5}, displs[1] = {3};
  REQUIRE(gyreGroupStart() == gyreSuccess);
  REQUIRE(gyreAllGatherV(in.data(), 5, out.data(), counts, displs, gyreInt32, comm, nullptr) ==
          gyreSuccess);
  counts[0] = SIZE_MAX;  // the caller reuses its arrays before the group ends
  displs[0] = SIZE_MAX;
  CHECK_MESSAGE(gyreGroupEnd() == gyreSuccess, lastError());
  CHECK(out == std::vector<int32_t>{-1, -1, -1, 9, 9, 9, 9, 9});
  CHECK(gyreCommDestroy(comm) == gyreSuccess);
}
