// What the C API's files share: the handles behind gyreComm_t and gyreWork_t, the conversion
// of exceptions into result codes, the checks that need no communicator, the stream-ordered
// calls a group defers, and premul sums.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "gyre/gyre.h"
#include "runtime/core/communicator.h"

namespace gyre::api {
// An op of gyreRedOpCreatePreMulSum: the scalar's type, and the scalar itself (read at creation)
// or where to read it as each call runs.
struct PreMulSum {
  DataType type = DataType::f32;
  bool immediate = false;
  alignas(8) unsigned char value[8] = {};
  const void* scalar = nullptr;
};
}  // namespace gyre::api

struct gyreComm {
  gyreComm(std::unique_ptr<gyre::Communicator> c, int device)
      : impl(std::move(c)), cudaDevice(device) {}
  std::unique_ptr<gyre::Communicator> impl;
  // gyreCommCuDevice's answer: the device current where the communicator was made (a child's
  // parent's, gyreCommInitAll's from devlist), -1 for none.
  int cudaDevice;
  std::mutex preMulLock;
  std::vector<std::optional<gyre::api::PreMulSum>> preMulSums;  // op gyreNumOps + index
};

struct gyreWork {
  std::vector<std::shared_ptr<gyre::Work>> parts;  // one per communicator of the group
  bool onEndSet = false;                           // gyreWorkOnEnd was called
};

namespace gyre::api {

// The staged pointers a stream-ordered call's host part runs over, one per StagedBuffer.
using Staged = std::vector<void*>;
// A stream-ordered call deferred in a group: its buffers, how to make its GroupOp from their
// staged copies once the group runs, and the call as it would be enqueued alone (a group of
// collectives that all have a kernel form is enqueued call by call, runStreamGroup).
struct StreamOp {
  gyreComm_t comm;
  gyreStream_t stream;
  std::vector<gyre::StagedBuffer> buffers;
  std::function<gyre::GroupOp(const Staged&)> make;
  const char* what;
  gyre::StagedBody body;
  size_t elems;
  size_t elemBytes;
  std::optional<gyre::KernelCall> kernel;
};

// The stream-ordered calls of a group, per communicator in order of first use. Where each of a
// communicator's calls is a collective with a kernel form on device memory, they are enqueued
// one by one as outside a group (the cuda_ipc kernels: a framework that wraps every call in a
// group, as torch's backend does, keeps them); else one staged call, whose host part runs them
// as a group (fused all-reduces, sends and receives together).
void runStreamGroup(std::vector<StreamOp> ops);

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
// The premul sum `op` names on `comm`, checked (this communicator's, not destroyed, made for
// `type`); nullopt for a built-in op.
std::optional<PreMulSum> preMulSumOf(gyreComm_t comm, gyreRedOp_t op, DataType type,
                                     const char* what);
// `count` elements of `input` times the scalar (from `stagedScalar`, its copy in stream order,
// where given), in a new buffer.
std::unique_ptr<std::byte[]> preMultiplied(const PreMulSum& p, const void* input, size_t count,
                                           const void* stagedScalar = nullptr);

}  // namespace gyre::api
