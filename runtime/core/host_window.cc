// The host window (link/mailbox.h) behind the one-shot collectives (algorithms/oneshot.h):
// one shared-memory segment that every rank of a communicator maps, where all of them share
// this host and reach each other over memory.
#include <unistd.h>

#include <sstream>

#include "base/log.h"
#include "runtime/core/bootstrap.h"
#include "runtime/core/communicator_impl.h"

namespace gyre {

void Communicator::Impl::offerHostWindow(PeerInfo& self) {
  if (config.rank != 0 || config.nranks < 2 || config.oneShotBytes == 0 || !self.part("shm") ||
      (config.transport != "auto" && config.transport != "shm")) {
    return;
  }
  try {
    windowSegment = ShmSegment::create(config.shmDir,
                                       MailboxWindow::bytesFor(config.nranks, config.oneShotBytes));
  } catch (const Failure& f) {
    GYRE_LOG(warn, who() + ": no host window for small collectives: " + f.what());
    return;
  }
  MailboxWindow(windowSegment.data(), config.nranks, config.oneShotBytes, /*format=*/true);
  const ShmHandle& h = windowSegment.handle();
  std::ostringstream offer;
  offer << h.pid << ':' << h.fd << ':' << h.inode << ':' << h.device << ':' << h.bytes;
  self.parts["window"] = offer.str();
}

void Communicator::Impl::joinHostWindow(bool allMemory) {
  const std::string* offer = peers[0].part("window");
  // Decided from what every rank knows alike, so that all of them join the agreement or none.
  if (!offer || !allMemory) {
    windowSegment = {};
    return;
  }
  std::string mine = "1";
  try {
    if (config.rank != 0) {
      ShmHandle h;
      char sep[4];
      std::istringstream in(*offer);
      in >> h.pid >> sep[0] >> h.fd >> sep[1] >> h.inode >> sep[2] >> h.device >> sep[3] >> h.bytes;
      if (!in) fail(Code::internal, "malformed host window offer '" + *offer + "'");
      windowSegment = ShmSegment::open(h);
    }
    MailboxWindow window(windowSegment.data(), config.nranks, config.oneShotBytes, false);
    window.mailbox(config.rank).state->pid = int32_t(getpid());
  } catch (const Failure& f) {
    mine = std::string("0") + f.what();
  }
  const auto all = bootstrap->allGather(mine);
  for (int r = 0; r < config.nranks; ++r) {
    if (all[size_t(r)] == "1") continue;
    if (config.rank == 0) {
      GYRE_LOG(info, who() + ": no host window: rank " + std::to_string(r) +
                         " could not map it: " + all[size_t(r)].substr(1));
    }
    windowSegment = {};
    return;
  }
  // Every rank has mapped it: the creator's descriptor is no longer needed.
  if (config.rank == 0) windowSegment.closeHandle();
  oneShot = std::make_unique<OneShot>(
      MailboxWindow(windowSegment.data(), config.nranks, config.oneShotBytes, false), config.rank);
  tuner->setOneShot(config.oneShotBytes);
}

void Communicator::Impl::runOneShot(const OpContext& ctx, const void* send, void* recv) {
  // A call the ranks disagreed on may have left data in a link (a scatter where each rank was
  // its own root only sends). Link calls find it in their next slot; a window call does not
  // read the links, so it looks: a slot of this call or an earlier one is such data. A peer
  // may already send for a later call, or point-to-point data for a recv to come.
  for (auto& [key, conn] : connections) {
    Link& link = conn->recvLink();
    const uint32_t head = link.counters->head.value.load(std::memory_order_relaxed);
    if (link.counters->tail.value.load(std::memory_order_acquire) == head) continue;
    const SlotMeta& meta = link.meta(head);
    if (meta.coll == uint8_t(Collective::send_recv) || meta.seq > ctx.desc.seq) continue;
    fail(Code::invalid_usage, who() + ": ranks disagree: this rank is in " + describeOp(ctx.desc) +
                                  " but rank " + std::to_string(conn->peer()) + " sent data for " +
                                  describeOp(meta));
  }
  oneShot->run(ctx, send, recv);
}

}  // namespace gyre
