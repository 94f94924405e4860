#include "transport/shm/segment.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <random>

#include "base/status.h"

namespace gyre {

namespace {

constexpr const char* kPrefix = "gyre-";

// An unnamed file in `dir`: O_TMPFILE, else a unique name removed at once.
int createUnnamed(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd >= 0 || (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL)) return fd;
  static std::atomic<unsigned> counter{0};
  std::random_device random;
  char name[64];
  std::snprintf(name, sizeof name, "%s%d-%u-%08x", kPrefix, int(getpid()), counter.fetch_add(1),
                unsigned(random()));
  const std::string path = dir + "/" + name;
  const int named = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (named >= 0) ::unlink(path.c_str());
  return named;
}

constexpr int kMapFlags = MAP_SHARED | MAP_POPULATE;

}  // namespace

ShmSegment ShmSegment::create(const std::string& dir, size_t bytes) {
  const int fd = createUnnamed(dir);
  if (fd < 0) fail(Code::system_error, "cannot create a file in " + dir + ": " + errnoText(errno));
  ShmSegment s;
  s.handle_.fd = fd;  // from here on the destructor closes it on every error path
  s.handle_.pid = int32_t(getpid());
  s.handle_.bytes = bytes;
  struct stat st {};
  // Reserving the pages now turns "no space" into an error here, not a SIGBUS on first touch.
  int err = ftruncate(fd, off_t(bytes)) == 0 ? posix_fallocate(fd, 0, off_t(bytes)) : errno;
  if (err == 0 && fstat(fd, &st) != 0) err = errno;
  if (err == 0) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, kMapFlags, fd, 0);
    if (p == MAP_FAILED)
      err = errno;
    else
      s.data_ = p;
  }
  if (err != 0) {
    fail(Code::system_error, "cannot reserve " + std::to_string(bytes >> 10) + " KiB in " + dir +
                                 ": " + errnoText(err));
  }
  s.handle_.inode = st.st_ino;
  s.handle_.device = st.st_dev;
  s.size_ = bytes;
  return s;
}

ShmSegment ShmSegment::open(const ShmHandle& h) {
  const std::string path = "/proc/" + std::to_string(h.pid) + "/fd/" + std::to_string(h.fd);
  if (h.pid <= 0 || h.fd < 0 || h.bytes == 0) fail(Code::system_error, "a bad segment handle");
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) fail(Code::system_error, "cannot open " + path + ": " + errnoText(errno));
  struct stat st {};
  std::string why;
  void* p = MAP_FAILED;
  if (fstat(fd, &st) != 0) {
    why = errnoText(errno);
  } else if (st.st_ino != h.inode || st.st_dev != h.device || !S_ISREG(st.st_mode)) {
    why = "it is not the segment offered";
  } else if (uint64_t(st.st_size) != h.bytes) {
    why = "it holds " + std::to_string(st.st_size) + " bytes, not " + std::to_string(h.bytes);
  } else if ((p = mmap(nullptr, h.bytes, PROT_READ | PROT_WRITE, kMapFlags, fd, 0)) == MAP_FAILED) {
    why = errnoText(errno);
  }
  ::close(fd);
  if (!why.empty()) fail(Code::system_error, "cannot map " + path + ": " + why);
  ShmSegment s;
  s.data_ = p;
  s.size_ = h.bytes;
  return s;
}

ShmSegment::ShmSegment(ShmSegment&& other) noexcept {
  *this = std::move(other);
}

ShmSegment& ShmSegment::operator=(ShmSegment&& other) noexcept {
  if (this != &other) {
    release();
    handle_ = other.handle_;
    data_ = other.data_;
    size_ = other.size_;
    other.handle_.fd = -1;
    other.data_ = nullptr;
    other.size_ = 0;
  }
  return *this;
}

ShmSegment::~ShmSegment() {
  release();
}

void ShmSegment::release() {
  if (data_) munmap(data_, size_);
  data_ = nullptr;
  size_ = 0;
  closeHandle();
}

void ShmSegment::closeHandle() {
  if (handle_.fd >= 0) ::close(handle_.fd);
  handle_.fd = -1;
}

int sweepStaleSegments(const std::string& dir) {
  DIR* d = opendir(dir.c_str());
  if (!d) return 0;
  int removed = 0;
  const std::string prefix = kPrefix;
  while (dirent* entry = readdir(d)) {
    const std::string name = entry->d_name;
    if (name.rfind(prefix, 0) != 0) continue;
    const long pid = std::strtol(name.c_str() + prefix.size(), nullptr, 10);
    if (pid <= 0 || pid == getpid()) continue;
    struct stat st {};
    const std::string path = dir + "/" + name;
    if (lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid()) continue;
    if (kill(pid_t(pid), 0) == 0 || errno != ESRCH) continue;  // still running (or not ours)
    if (::unlink(path.c_str()) == 0) ++removed;
  }
  closedir(d);
  return removed;
}

std::string shmUnusableReason(const std::string& dir, size_t bytes) {
  struct stat st {};
  if (stat(dir.c_str(), &st) != 0) return dir + ": " + errnoText(errno);
  if (!S_ISDIR(st.st_mode)) return dir + " is not a directory";
  if (access(dir.c_str(), W_OK | X_OK) != 0) return dir + " is not writable: " + errnoText(errno);
  struct statvfs vfs {};
  if (statvfs(dir.c_str(), &vfs) != 0) return dir + ": " + errnoText(errno);
  const unsigned long long avail = (unsigned long long)vfs.f_bavail * vfs.f_frsize;
  if (avail < bytes) {
    return dir + " has " + std::to_string(avail >> 20) + " MiB free, " +
           std::to_string((bytes + (1 << 20) - 1) >> 20) + " MiB are needed";
  }
  return {};
}

}  // namespace gyre
