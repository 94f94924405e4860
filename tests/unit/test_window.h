// A host window in this process's memory, for tests that run its ranks as threads.
#pragma once

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>

#include "algorithms/oneshot.h"

namespace gyre {

struct TestWindow {
  explicit TestWindow(int n, size_t capacity = 4096) : nranks(n), capacity(capacity) {
    const size_t bytes = (MailboxWindow::bytesFor(n, capacity) + 63) / 64 * 64;
    memory = static_cast<std::byte*>(std::aligned_alloc(64, bytes));
    std::memset(memory, 0, bytes);
    MailboxWindow window(memory, n, capacity, /*format=*/true);
    // Waits look at the process they wait for: this one.
    for (int r = 0; r < n; ++r) window.mailbox(r).state->pid = int32_t(getpid());
  }
  ~TestWindow() { std::free(memory); }
  TestWindow(const TestWindow&) = delete;
  TestWindow& operator=(const TestWindow&) = delete;
  OneShot rank(int r) const { return OneShot(MailboxWindow(memory, nranks, capacity, false), r); }
  // Call `seq` at rank r: an all-reduce of one f32 unless the caller changes ctx.desc.
  OpContext call(int r, uint64_t seq, std::chrono::milliseconds timeout) const {
    OpContext ctx;
    ctx.desc = {seq, 1, -1, Collective::all_reduce, DataType::f32, RedOp::sum};
    ctx.rank = r;
    ctx.nranks = nranks;
    ctx.timeout = timeout;
    ctx.deadline = Clock::now() + timeout;
    ctx.busy.spin = std::chrono::microseconds(200);
    return ctx;
  }
  int nranks;
  size_t capacity;
  std::byte* memory = nullptr;
};

}  // namespace gyre
