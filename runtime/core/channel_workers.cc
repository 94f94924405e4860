#include "runtime/core/channel_workers.h"

namespace gyre {

namespace {
// Sleeps are cut into slices so a lost wake-up costs at most one of them.
constexpr auto kSlice = std::chrono::milliseconds(100);
}  // namespace

ChannelWorkers::~ChannelWorkers() {
  stopping_.store(true, std::memory_order_seq_cst);
  for (auto& w : workers_) {
    w->go.value.fetch_add(1, std::memory_order_seq_cst);
    notifyAll(w->go);
  }
  for (auto& w : workers_) w->thread.join();
}

void ChannelWorkers::serve(Worker& self, int channel) {
  uint32_t seen = 0;
  while (true) {
    uint32_t now = self.go.value.load(std::memory_order_acquire);
    while (now == seen) {
      sleepWhileEqual(self.go, seen, Clock::now() + kSlice);
      now = self.go.value.load(std::memory_order_acquire);
    }
    seen = now;
    if (stopping_.load(std::memory_order_acquire)) return;
    (*body_)(channel);
    finished_.value.fetch_add(1, std::memory_order_acq_rel);
    notifyAll(finished_);
  }
}

void ChannelWorkers::run(int n, const std::function<void(int)>& body) {
  if (n <= 1) {
    if (n == 1) body(0);
    return;
  }
  body_ = &body;
  while (int(workers_.size()) < n - 1) {
    auto w = std::make_unique<Worker>();
    Worker& ref = *w;
    const int channel = int(workers_.size()) + 1;
    w->thread = std::thread([this, &ref, channel] { serve(ref, channel); });
    workers_.push_back(std::move(w));
  }
  const uint32_t target = finished_.value.load(std::memory_order_relaxed) + uint32_t(n - 1);
  for (int c = 1; c < n; ++c) {
    Worker& w = *workers_[size_t(c - 1)];
    w.go.value.fetch_add(1, std::memory_order_release);
    notifyAll(w.go);
  }
  body(0);
  // Each helper's body ends by its deadline, so this wait does too.
  while (true) {
    const uint32_t done = finished_.value.load(std::memory_order_acquire);
    if (int32_t(done - target) >= 0) break;
    sleepWhileEqual(finished_, done, Clock::now() + kSlice);
  }
  body_ = nullptr;
}

}  // namespace gyre
