// A shared-memory segment: a file in a tmpfs directory (/dev/shm unless GYRE_SHM_DIR says
// otherwise) mapped by two processes, its size reserved up front so that a full /dev/shm is
// an error at set-up rather than a SIGBUS in the middle of a collective.
//
// The file never has a name (O_TMPFILE; where the file system lacks it, the name is removed
// right after creation), so no rank, however it dies, leaves anything behind in /dev/shm: the
// kernel frees the memory when the last mapping goes. The peer opens it through the
// creator's /proc/<pid>/fd/<fd> while the creator holds it open, and checks that it found
// the same inode. That needs both processes in one pid namespace under one user, the case of
// ranks started on one host; elsewhere the open fails and the transport falls back to tcp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace gyre {

// What the creator tells its peer so that the peer can open the segment.
struct ShmHandle {
  int32_t pid = 0;
  int32_t fd = -1;
  uint64_t inode = 0;
  uint64_t device = 0;
  uint64_t bytes = 0;
};

class ShmSegment {
 public:
  // Both throw Failure(system_error) with the path and the cause. Both map every page at once
  // (MAP_POPULATE), so that first touches during calls take no page faults: the host window's
  // posts, which a tiny call may be the first to touch, and the links' slots, which the first
  // calls of a size reach page after page.
  static ShmSegment create(const std::string& dir, size_t bytes);
  static ShmSegment open(const ShmHandle& handle);

  ShmSegment() = default;
  ShmSegment(ShmSegment&& other) noexcept;
  ShmSegment& operator=(ShmSegment&& other) noexcept;
  ShmSegment(const ShmSegment&) = delete;
  ShmSegment& operator=(const ShmSegment&) = delete;
  ~ShmSegment();  // unmaps

  void* data() const { return data_; }
  size_t size() const { return size_; }
  // The creator's handle; valid until closeHandle().
  const ShmHandle& handle() const { return handle_; }
  // The creator closes its descriptor once the peer has mapped the segment (or never will).
  void closeHandle();

 private:
  void release();

  ShmHandle handle_;
  void* data_ = nullptr;
  size_t size_ = 0;
};

// Removes this user's "gyre-<pid>-..." files in `dir` whose creating process no longer
// exists: left by a rank killed in the instant between creating and unlinking a named file
// (only where O_TMPFILE is unsupported). Returns how many it removed.
int sweepStaleSegments(const std::string& dir);

// Empty when `dir` is a directory this process can create segments in with `bytes` free;
// otherwise why not, for a warning.
std::string shmUnusableReason(const std::string& dir, size_t bytes);

}  // namespace gyre
