// Rendezvous wire format (docs/protocol.md): a frame is a little-endian u32 body length and
// the body. Requests start with an opcode, replies with a status. Strings are u32 length +
// bytes. Reader never reads past the body: a short or malformed body throws ProtocolError.
#pragma once

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace gyre::store {

inline constexpr uint16_t kVersion = 2;
inline constexpr size_t kMaxKeyBytes = 4096;
inline constexpr size_t kMaxValueBytes = 1 << 20;
inline constexpr size_t kMaxWaitKeys = 1024;
inline constexpr size_t kMaxFrameBytes = kMaxValueBytes * 2 + kMaxKeyBytes + 64;
// Before a client proved the secret only hello and auth may come: small frames, so a stranger
// cannot make the server allocate a large body.
inline constexpr size_t kMaxPreAuthFrameBytes = 512;

enum class Op : uint8_t {
  hello = 1,  // u16 version, str job, str client nonce (16)  -> ok str server nonce, str server mac
  auth = 8,   // str client mac (32)                          -> ok (else the server closes)
  set = 2,    // str key, str value                           -> ok
  get = 3,    // str key, u32 timeout_ms                      -> ok str value | timeout
  add = 4,    // str key, i64 delta                           -> ok i64 value
  wait = 5,   // u32 n, str key * n, u32 timeout_ms           -> ok | timeout
  compare_set = 6,  // str key, str expected, str desired     -> ok str value
  remove = 7,       // str key                                -> ok u8 existed
};

enum class Reply : uint8_t { ok = 0, timeout = 1, error = 2 };

struct ProtocolError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Writer {
 public:
  Writer() { out_.resize(4); }  // room for the length
  Writer& u8(uint8_t v) { return raw(&v, 1); }
  Writer& u16(uint16_t v) { return raw(&v, 2); }
  Writer& u32(uint32_t v) { return raw(&v, 4); }
  Writer& i64(int64_t v) { return raw(&v, 8); }
  Writer& str(std::string_view s) {
    u32(uint32_t(s.size()));
    out_.append(s.data(), s.size());
    return *this;
  }
  // The finished frame: length prefix + body.
  std::string frame() {
    const uint32_t n = uint32_t(out_.size() - 4);
    std::memcpy(out_.data(), &n, 4);
    return std::move(out_);
  }

 private:
  Writer& raw(const void* p, size_t n) {
    out_.append(static_cast<const char*>(p), n);
    return *this;
  }
  std::string out_;
};

class Reader {
 public:
  explicit Reader(std::string_view body) : in_(body) {}
  uint8_t u8() { return scalar<uint8_t>(); }
  uint16_t u16() { return scalar<uint16_t>(); }
  uint32_t u32() { return scalar<uint32_t>(); }
  int64_t i64() { return scalar<int64_t>(); }
  std::string str(size_t limit) {
    const uint32_t n = u32();
    if (n > limit) throw ProtocolError("string of " + std::to_string(n) + " bytes over the limit");
    need(n);
    std::string s(in_.substr(pos_, n));
    pos_ += n;
    return s;
  }
  void end() const {
    if (pos_ != in_.size()) throw ProtocolError("trailing bytes in frame");
  }

 private:
  template <class T>
  T scalar() {
    need(sizeof(T));
    T v;
    std::memcpy(&v, in_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  void need(size_t n) const {
    if (in_.size() - pos_ < n) throw ProtocolError("truncated frame");
  }
  std::string_view in_;
  size_t pos_ = 0;
};

// One parsed request. Fields not used by its opcode stay empty.
struct Request {
  Op op{};
  uint16_t version = 0;
  std::string job, nonce, mac;    // hello, auth
  std::string key, value;         // set, get, add, compare_set (value = expected), remove
  std::string desired;            // compare_set
  std::vector<std::string> keys;  // wait
  uint32_t timeoutMs = 0;         // get, wait
  int64_t delta = 0;              // add
};

// Parses a request body; throws ProtocolError on anything malformed, over a limit, unknown
// or with trailing bytes.
Request parseRequest(std::string_view body);

}  // namespace gyre::store
