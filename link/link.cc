#include "link/link.h"

namespace gyre {

namespace {
std::string describe(uint8_t coll, uint64_t seq, uint64_t count, uint8_t dtype, uint8_t op,
                     int32_t root) {
  const auto c = static_cast<Collective>(coll);
  std::string s = std::string(collectiveName(c)) + " #" + std::to_string(seq) + " (count " +
                  std::to_string(count) + ", " + dataTypeName(static_cast<DataType>(dtype));
  if (reduces(c)) s += std::string(", ") + redOpName(static_cast<RedOp>(op));
  if (hasRoot(c)) s += ", root " + std::to_string(root);
  if (c == Collective::send_recv) s += ", from rank " + std::to_string(root);
  return s + ")";
}
}  // namespace

std::string describeOp(const OpDesc& d) {
  return describe(uint8_t(d.coll), d.seq, d.count, uint8_t(d.dtype), uint8_t(d.op), d.root);
}

std::string describeOp(const SlotMeta& m) {
  return describe(m.coll, m.seq, m.count, m.dtype, m.op, m.root);
}

}  // namespace gyre
