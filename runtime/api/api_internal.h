// What the C API's files share: the handles behind gyreComm_t and gyreWork_t, the conversion
// of exceptions into result codes, and the checks that need no communicator.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "gyre/gyre.h"
#include "runtime/core/communicator.h"

struct gyreComm {
  std::unique_ptr<gyre::Communicator> impl;
};

struct gyreWork {
  std::vector<std::shared_ptr<gyre::Work>> parts;  // one per communicator of the group
  bool onEndSet = false;                           // gyreWorkOnEnd was called
};

namespace gyre::api {

// The message gyreGetLastError returns on this thread.
void setLastError(std::string message);

inline gyreResult_t toResult(Code code) {
  return static_cast<gyreResult_t>(code);
}

// Runs fn, turning what it throws into a result code and this thread's last error.
template <class Fn>
gyreResult_t guarded(Fn&& fn) {
  try {
    fn();
    return gyreSuccess;
  } catch (const Failure& f) {
    setLastError(f.status().message);
    return toResult(f.status().code);
  } catch (const std::bad_alloc&) {
    setLastError("out of memory");
    return gyreSystemError;
  } catch (const std::exception& e) {
    setLastError(std::string("internal error: ") + e.what());
    return gyreInternalError;
  }
}

Communicator& commOf(gyreComm_t comm);
DataType typeOf(gyreDataType_t t);
RedOp opOf(gyreRedOp_t op);

}  // namespace gyre::api
