#include "runtime/store/protocol.h"

namespace gyre::store {

Request parseRequest(std::string_view body) {
  Reader in(body);
  Request r;
  r.op = static_cast<Op>(in.u8());
  switch (r.op) {
    case Op::hello:
      r.version = in.u16();
      r.job = in.str(kMaxKeyBytes);
      r.nonce = in.str(64);
      break;
    case Op::auth:
      r.mac = in.str(64);
      break;
    case Op::set:
      r.key = in.str(kMaxKeyBytes);
      r.value = in.str(kMaxValueBytes);
      break;
    case Op::get:
      r.key = in.str(kMaxKeyBytes);
      r.timeoutMs = in.u32();
      break;
    case Op::add:
      r.key = in.str(kMaxKeyBytes);
      r.delta = in.i64();
      break;
    case Op::wait: {
      const uint32_t n = in.u32();
      if (n == 0 || n > kMaxWaitKeys) throw ProtocolError("bad key count for wait");
      for (uint32_t i = 0; i < n; ++i) r.keys.push_back(in.str(kMaxKeyBytes));
      r.timeoutMs = in.u32();
      break;
    }
    case Op::compare_set:
      r.key = in.str(kMaxKeyBytes);
      r.value = in.str(kMaxValueBytes);
      r.desired = in.str(kMaxValueBytes);
      break;
    case Op::remove:
      r.key = in.str(kMaxKeyBytes);
      break;
    default:
      throw ProtocolError("unknown opcode " + std::to_string(int(r.op)));
  }
  in.end();
  return r;
}

}  // namespace gyre::store
