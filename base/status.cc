#include "base/status.h"

#include <cstring>

namespace gyre {

const char* codeName(Code code) {
  switch (code) {
    case Code::success:
      return "success";
    case Code::invalid_argument:
      return "invalid argument";
    case Code::invalid_usage:
      return "invalid usage";
    case Code::system_error:
      return "system error";
    case Code::remote_error:
      return "remote error";
    case Code::timeout:
      return "timeout";
    case Code::aborted:
      return "aborted";
    case Code::internal:
      return "internal error";
  }
  return "unknown error";
}

std::string errnoText(int err) {
  char buf[256];
  // GNU strerror_r returns the message pointer, which may or may not be buf.
  const char* text = strerror_r(err, buf, sizeof(buf));
  return text;
}

}  // namespace gyre
