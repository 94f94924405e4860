// Shared-memory segments: creation without a name, opening through the creator's handle, the
// sweep of named leftovers of exited processes and the usability check behind the fallback.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "base/status.h"
#include "tests/harness/smaps.h"
#include "transport/shm/segment.h"

namespace gyre {
namespace {

struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/gyre-shm-test.XXXXXX";
    REQUIRE(mkdtemp(tmpl) != nullptr);
    path = tmpl;
  }
  ~TempDir() { std::system(("rm -rf '" + path + "'").c_str()); }
  bool has(const std::string& name) const {
    struct stat st {};
    return stat((path + "/" + name).c_str(), &st) == 0;
  }
};

// A pid that has certainly exited: a child we reaped.
pid_t exitedPid() {
  const pid_t child = fork();
  if (child == 0) _exit(0);
  int status = 0;
  waitpid(child, &status, 0);
  return child;
}

// The KiB of the mapping at `start` whose pages are mapped in this process, or -1 where no
// mapping starts there.
long mappedKiB(const void* start) {
  for (const test::Mapping& m : test::mappings())
    if (m.start == uintptr_t(start)) return m.rssKiB;
  return -1;
}

}  // namespace

TEST_CASE("a segment has every page mapped before the first touch, at both ends") {
  TempDir dir;
  constexpr size_t kBytes = 64 * 4096;
  ShmSegment made = ShmSegment::create(dir.path, kBytes);
  CHECK(mappedKiB(made.data()) == long(kBytes / 1024));
  ShmSegment opened = ShmSegment::open(made.handle());
  CHECK(mappedKiB(opened.data()) == long(kBytes / 1024));
}

TEST_CASE("a segment has no name, is shared through its handle and outlives it") {
  TempDir dir;
  ShmSegment made = ShmSegment::create(dir.path, 3 * 4096 + 100);
  CHECK(made.size() == 3 * 4096 + 100);
  CHECK(std::system(("test -z \"$(ls -A '" + dir.path + "')\"").c_str()) == 0);  // nothing named
  ShmSegment opened = ShmSegment::open(made.handle());
  std::memcpy(made.data(), "written by the creator", 23);
  CHECK(std::strcmp(static_cast<const char*>(opened.data()), "written by the creator") == 0);
  const ShmHandle handle = made.handle();
  made.closeHandle();
  static_cast<char*>(opened.data())[0] = 'W';  // both mappings outlive the descriptor
  CHECK(static_cast<const char*>(made.data())[0] == 'W');
  CHECK_THROWS_WITH_AS(ShmSegment::open(handle), doctest::Contains("cannot open /proc/"), Failure);
}

TEST_CASE("opening checks that the handle names the segment offered") {
  TempDir dir;
  ShmSegment made = ShmSegment::create(dir.path, 8192);
  ShmHandle h = made.handle();
  h.bytes = 4096;
  CHECK_THROWS_WITH_AS(ShmSegment::open(h), doctest::Contains("holds 8192 bytes, not 4096"),
                       Failure);
  h = made.handle();
  h.inode += 1;
  CHECK_THROWS_WITH_AS(ShmSegment::open(h), doctest::Contains("not the segment offered"), Failure);
  h = made.handle();
  h.fd = 0;  // stdin: some other file
  CHECK_THROWS_AS(ShmSegment::open(h), Failure);
  h.pid = -1;
  CHECK_THROWS_WITH_AS(ShmSegment::open(h), doctest::Contains("bad segment handle"), Failure);
  CHECK_THROWS_WITH_AS(ShmSegment::create(dir.path + "/missing", 4096),
                       doctest::Contains("cannot create"), Failure);
}

TEST_CASE("the sweep removes segments of exited processes only") {
  TempDir dir;
  const std::string dead = "gyre-" + std::to_string(exitedPid()) + "-0-deadbeef";
  const std::string alive = "gyre-" + std::to_string(getppid()) + "-0-cafef00d";
  const std::string foreign = "other-" + std::to_string(exitedPid()) + "-0-00000000";
  for (const auto& name : {dead, alive, foreign}) std::ofstream(dir.path + "/" + name) << "x";
  CHECK(sweepStaleSegments(dir.path) == 1);
  CHECK_FALSE(dir.has(dead));
  CHECK(dir.has(alive));
  CHECK(dir.has(foreign));
}

TEST_CASE("the usability check names what is wrong") {
  TempDir dir;
  CHECK(shmUnusableReason(dir.path, 4096).empty());
  CHECK(shmUnusableReason(dir.path + "/missing", 4096).find("No such file") != std::string::npos);
  std::ofstream(dir.path + "/file") << "x";
  CHECK(shmUnusableReason(dir.path + "/file", 4096).find("is not a directory") !=
        std::string::npos);
  const std::string full = shmUnusableReason(dir.path, size_t(1) << 62);
  CHECK(full.find("MiB free") != std::string::npos);
  CHECK(full.find("MiB are needed") != std::string::npos);
}

}  // namespace gyre
