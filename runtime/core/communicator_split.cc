// Communicators made from another: split by color and key, shrunk past excluded ranks. Each
// child meets its members through the parent's rendezvous, under a namespace of its own.
#include <algorithm>
#include <cstdio>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "runtime/core/bootstrap.h"
#include "runtime/core/communicator.h"
#include "runtime/core/communicator_impl.h"
#include "runtime/core/failure_board.h"  // the child's members, which its constructor builds
#include "transport/event_loop.h"
#include "transport/registry.h"

namespace gyre {

std::unique_ptr<Communicator> Communicator::split(int color, int key, const CommConfig* overrides) {
  auto& d = *impl_;
  d.drainQueue();
  std::unique_ptr<Impl> child;
  {
    std::lock_guard lock(d.opMutex);
    // A revoked communicator still splits: the colors travel through the rendezvous.
    if (Status s = d.poisoned(); !s.ok() && !d.revoked.load()) {
      throw Failure(s.code,
                    d.who() + ": split refused: the communicator failed earlier: " + s.message);
    }
    const int index = d.splits++;
    const auto all = d.bootstrap->allGather(std::to_string(color) + " " + std::to_string(key));
    std::vector<std::pair<int, int>> members;  // (key, parent rank) of my color
    for (int r = 0; r < d.config.nranks; ++r) {
      int c = 0, k = 0;
      if (std::sscanf(all[r].c_str(), "%d %d", &c, &k) != 2) {
        fail(Code::internal, d.who() + ": split: malformed entry from rank " + std::to_string(r));
      }
      if (c == color) members.emplace_back(k, r);
    }
    if (color < 0) return nullptr;
    std::sort(members.begin(), members.end());
    const auto me = std::find(members.begin(), members.end(), std::make_pair(key, d.config.rank));
    child = d.child(int(me - members.begin()), int(members.size()), overrides);
    child->init(d.storeNamespace + "/split" + std::to_string(index) + "/color" +
                std::to_string(color));
  }
  return std::unique_ptr<Communicator>(new Communicator(std::move(child)));
}

std::unique_ptr<Communicator::Impl> Communicator::Impl::child(int rank, int nranks,
                                                              const CommConfig* overrides) const {
  auto c = std::make_unique<Impl>();
  c->config = config;
  c->config.rank = rank;
  c->config.nranks = nranks;
  if (overrides) {
    if (overrides->timeout.count()) c->config.timeout = overrides->timeout;
    if (overrides->nSlots) c->config.nSlots = overrides->nSlots;
    if (overrides->slotBytes) c->config.slotBytes = overrides->slotBytes;
    if (!overrides->algorithm.empty()) c->config.algorithm = overrides->algorithm;
    if (overrides->channels > 0) c->config.channels = overrides->channels;
  }
  c->rootStore = rootStore;
  c->hostedServer = hostedServer;
  return c;
}

std::unique_ptr<Communicator> Communicator::shrink(const std::vector<int>& exclude, bool abortFirst,
                                                   const CommConfig* overrides) {
  auto& d = *impl_;
  const int n = d.config.nranks, me = d.config.rank;
  std::vector<bool> gone(size_t(n), false);
  for (int r : exclude) {
    if (r < 0 || r >= n) {
      fail(Code::invalid_argument, d.who() + ": shrink: excluded rank " + std::to_string(r) +
                                       " is outside [0, " + std::to_string(n) + ")");
    }
    if (r == me) {
      fail(Code::invalid_argument,
           d.who() + ": shrink: excludes this rank (excluded ranks do not call it)");
    }
    if (gone[size_t(r)]) {
      fail(Code::invalid_argument,
           d.who() + ": shrink: rank " + std::to_string(r) + " is excluded twice");
    }
    gone[size_t(r)] = true;
  }
  if (abortFirst) abort();
  d.drainQueue();  // aborted, the queued calls end at once; else each by its deadline
  std::lock_guard lock(d.opMutex);
  const int index = d.shrinks++;
  const int newRank = int(std::count(gone.begin(), gone.begin() + me, false));
  auto child = d.child(newRank, n - int(exclude.size()), overrides);
  child->init(d.storeNamespace + "/shrink" + std::to_string(index));
  return std::unique_ptr<Communicator>(new Communicator(std::move(child)));
}

}  // namespace gyre
