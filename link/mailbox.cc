#include "link/mailbox.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <new>
#include <string>

#include "base/status.h"

namespace gyre {

namespace {

constexpr size_t align64(size_t n) {
  return (n + 63) / 64 * 64;
}

struct alignas(64) WindowHeader {
  char magic[8];
  uint32_t nranks;
  uint32_t reserved;
  uint64_t capacity;
};
constexpr char kMagic[8] = {'G', 'Y', 'R', 'E', 'M', 'B', 'X', '3'};

size_t perRankBytes(size_t capacity) {
  return kMailPosts * sizeof(MailPost) + sizeof(MailState) + sizeof(MailFailure) +
         kMailData * align64(capacity);
}

}  // namespace

size_t MailboxWindow::bytesFor(int nranks, size_t capacity) {
  return sizeof(WindowHeader) + size_t(nranks) * perRankBytes(capacity);
}

MailboxWindow::MailboxWindow(void* base, int nranks, size_t capacity, bool format)
    : base_(static_cast<std::byte*>(base)),
      nranks_(nranks),
      capacity_(capacity),
      perRank_(perRankBytes(capacity)) {
  auto* header = std::launder(reinterpret_cast<WindowHeader*>(base_));
  if (format) {
    std::memcpy(header->magic, kMagic, sizeof kMagic);
    header->nranks = uint32_t(nranks);
    header->capacity = capacity;
    return;
  }
  if (std::memcmp(header->magic, kMagic, sizeof kMagic) != 0 ||
      header->nranks != uint32_t(nranks) || header->capacity != capacity) {
    fail(Code::invalid_usage, "the host window's header does not match this communicator (" +
                                  std::to_string(header->nranks) + " ranks, " +
                                  std::to_string(header->capacity) + " bytes per post)");
  }
}

Mailbox MailboxWindow::mailbox(int rank) const {
  std::byte* at = base_ + sizeof(WindowHeader) + size_t(rank) * perRank_;
  // The file starts zeroed, and zero is every field's initial value: a view, no constructor.
  Mailbox m;
  m.posts = std::launder(reinterpret_cast<MailPost*>(at));
  at += kMailPosts * sizeof(MailPost);
  m.state = std::launder(reinterpret_cast<MailState*>(at));
  at += sizeof(MailState);
  m.failure = std::launder(reinterpret_cast<MailFailure*>(at));
  at += sizeof(MailFailure);
  for (int b = 0; b < kMailData; ++b) m.data[b] = at + size_t(b) * align64(capacity_);
  return m;
}

bool MailboxWindow::ownerExited(int rank) const {
  const int pid = mailbox(rank).state->pid;
  if (pid <= 0) return false;  // not recorded yet: the agreement round waits for that
  if (kill(pid, 0) != 0 && errno == ESRCH) return true;
  // A killed process stays a zombie until its parent reaps it; it will never post again.
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  const auto close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() &&
         (line[close + 2] == 'Z' || line[close + 2] == 'X');
}

}  // namespace gyre
