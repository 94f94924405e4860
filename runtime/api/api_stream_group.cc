// The stream-ordered calls of a group, enqueued once the group ends (docs/cuda.md).
#include <algorithm>

#include "runtime/api/api_internal.h"

namespace gyre::api {

void runStreamGroup(std::vector<StreamOp> ops) {
  std::vector<gyreComm_t> order;
  for (const auto& op : ops)
    if (std::find(order.begin(), order.end(), op.comm) == order.end()) order.push_back(op.comm);
  for (gyreComm_t comm : order) {
    const bool callByCall = std::all_of(ops.begin(), ops.end(), [comm](const StreamOp& op) {
      return op.comm != comm || (op.kernel && gyre::onDevice(op.buffers));
    });
    std::vector<gyre::StagedBuffer> buffers;
    std::vector<std::pair<size_t, std::function<gyre::GroupOp(const Staged&)>>> parts;
    gyreStream_t stream = nullptr;
    bool first = true;
    for (auto& op : ops) {
      if (op.comm != comm) continue;
      if (!first && op.stream != stream) {
        gyre::fail(gyre::Code::invalid_usage, "rank " + std::to_string(commOf(comm).rank()) +
                                                  ": a group's stream-ordered calls on one "
                                                  "communicator must use one stream");
      }
      stream = op.stream;
      first = false;
      if (callByCall) continue;
      parts.emplace_back(op.buffers.size(), std::move(op.make));
      for (auto& b : op.buffers) buffers.push_back(b);
    }
    if (callByCall) {
      for (auto& op : ops) {
        if (op.comm != comm) continue;
        commOf(comm).enqueueOnStream(op.stream, op.what, std::move(op.buffers), std::move(op.body),
                                     op.elems, op.elemBytes, op.kernel);
      }
      continue;
    }
    commOf(comm).enqueueOnStream(
        stream, "group", std::move(buffers),
        [parts = std::move(parts)](gyre::Communicator& c, const Staged& staged, size_t) {
          std::vector<gyre::GroupOp> group;
          size_t at = 0;
          for (const auto& [n, make] : parts) {
            group.push_back(make(Staged(staged.begin() + long(at), staged.begin() + long(at + n))));
            at += n;
          }
          c.runGroup(group);
        });
  }
}

}  // namespace gyre::api
