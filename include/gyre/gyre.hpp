// C++ API: an RAII communicator over the C API that throws gyre::Error on failure.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "gyre/gyre.h"

namespace gyre {

class Error : public std::runtime_error {
 public:
  Error(gyreResult_t code, const std::string& message) : std::runtime_error(message), code_(code) {}
  gyreResult_t code() const { return code_; }

 private:
  gyreResult_t code_;
};

inline void check(gyreResult_t result) {
  if (result != gyreSuccess) {
    const char* message = gyreGetLastError(nullptr);
    throw Error(result, std::string(gyreGetErrorString(result)) + ": " + message);
  }
}

template <class T>
constexpr gyreDataType_t dataTypeOf();
template <>
constexpr gyreDataType_t dataTypeOf<int8_t>() {
  return gyreInt8;
}
template <>
constexpr gyreDataType_t dataTypeOf<uint8_t>() {
  return gyreUint8;
}
template <>
constexpr gyreDataType_t dataTypeOf<int32_t>() {
  return gyreInt32;
}
template <>
constexpr gyreDataType_t dataTypeOf<uint32_t>() {
  return gyreUint32;
}
template <>
constexpr gyreDataType_t dataTypeOf<int64_t>() {
  return gyreInt64;
}
template <>
constexpr gyreDataType_t dataTypeOf<uint64_t>() {
  return gyreUint64;
}
template <>
constexpr gyreDataType_t dataTypeOf<float>() {
  return gyreFloat32;
}
template <>
constexpr gyreDataType_t dataTypeOf<double>() {
  return gyreFloat64;
}

// Asynchronous work from Group::endAsync(); waits for it when destroyed.
class Work {
 public:
  explicit Work(gyreWork_t work) : work_(work) {}
  Work(Work&& other) noexcept : work_(std::exchange(other.work_, nullptr)) {}
  Work& operator=(Work&& other) noexcept {
    if (this != &other) {
      if (work_) gyreWorkFree(work_);
      work_ = std::exchange(other.work_, nullptr);
    }
    return *this;
  }
  ~Work() {
    if (work_) gyreWorkFree(work_);
  }
  bool test() const {
    int done = 0;
    check(gyreWorkTest(work_, &done));
    return done != 0;
  }
  // Throws Error (gyreTimeout if still running after timeoutMs, or the work's own error).
  void wait(int timeoutMs) const { check(gyreWorkWait(work_, timeoutMs)); }

 private:
  gyreWork_t work_;
};

// Defers calls until end() (blocking) or endAsync(); ends (blocking) when destroyed unended.
class Group {
 public:
  Group() { check(gyreGroupStart()); }
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;
  ~Group() {
    if (open_) gyreGroupEnd();
  }
  void end() {
    open_ = false;
    check(gyreGroupEnd());
  }
  Work endAsync() {
    open_ = false;
    gyreWork_t w = nullptr;
    check(gyreGroupEndAsync(&w));
    return Work(w);
  }

 private:
  bool open_ = true;
};

class Comm {
 public:
  static Comm fromEnv() {
    gyreComm_t c = nullptr;
    check(gyreCommInitFromEnv(&c));
    return Comm(c);
  }
  static gyreUniqueId uniqueId() {
    gyreUniqueId id;
    check(gyreGetUniqueId(&id));
    return id;
  }
  static Comm initRank(int nranks, const gyreUniqueId& id, int rank) {
    gyreComm_t c = nullptr;
    check(gyreCommInitRank(&c, nranks, id, rank));
    return Comm(c);
  }
  // Every rank of a job in this process (gyreCommInitAll), for one thread that drives them
  // through a Group.
  static std::vector<Comm> initAll(int nranks) {
    std::vector<gyreComm_t> raw(size_t(nranks > 0 ? nranks : 0), nullptr);
    check(gyreCommInitAll(raw.data(), nranks, nullptr));
    std::vector<Comm> comms;
    for (gyreComm_t c : raw) comms.push_back(Comm(c));
    return comms;
  }

  Comm(Comm&& other) noexcept : comm_(std::exchange(other.comm_, nullptr)) {}
  Comm& operator=(Comm&& other) noexcept {
    if (this != &other) {
      reset();
      comm_ = std::exchange(other.comm_, nullptr);
    }
    return *this;
  }
  ~Comm() { reset(); }

  int rank() const {
    int r = 0;
    check(gyreCommUserRank(comm_, &r));
    return r;
  }
  int size() const {
    int n = 0;
    check(gyreCommCount(comm_, &n));
    return n;
  }
  gyreComm_t get() const { return comm_; }
  void abort() { check(gyreCommAbort(comm_)); }
  // gyreCommRegister / gyreCommDeregister: sends from a registered buffer skip a copy over rdma.
  void* registerBuffer(void* buff, size_t bytes) {
    void* handle = nullptr;
    check(gyreCommRegister(comm_, buff, bytes, &handle));
    return handle;
  }
  void deregisterBuffer(void* handle) { check(gyreCommDeregister(comm_, handle)); }

  // Typed forms; the raw forms take a gyreDataType_t (f16 and bf16 have no C++ type here).
  // `stream`: a cudaStream_t for stream-ordered calls on CUDA memory (docs/cuda.md); null with
  // host buffers means a blocking call.
  template <class T>
  void allReduce(const T* send, T* recv, size_t count, gyreRedOp_t op = gyreSum,
                 gyreStream_t stream = nullptr) {
    allReduce(send, recv, count, dataTypeOf<T>(), op, stream);
  }
  void allReduce(const void* send, void* recv, size_t count, gyreDataType_t type, gyreRedOp_t op,
                 gyreStream_t stream = nullptr) {
    check(gyreAllReduce(send, recv, count, type, op, comm_, stream));
  }
  template <class T>
  void allGather(const T* send, T* recv, size_t sendCount, gyreStream_t stream = nullptr) {
    allGather(send, recv, sendCount, dataTypeOf<T>(), stream);
  }
  void allGather(const void* send, void* recv, size_t sendCount, gyreDataType_t type,
                 gyreStream_t stream = nullptr) {
    check(gyreAllGather(send, recv, sendCount, type, comm_, stream));
  }
  template <class T>
  void reduceScatter(const T* send, T* recv, size_t recvCount, gyreRedOp_t op = gyreSum,
                     gyreStream_t stream = nullptr) {
    reduceScatter(send, recv, recvCount, dataTypeOf<T>(), op, stream);
  }
  void reduceScatter(const void* send, void* recv, size_t recvCount, gyreDataType_t type,
                     gyreRedOp_t op, gyreStream_t stream = nullptr) {
    check(gyreReduceScatter(send, recv, recvCount, type, op, comm_, stream));
  }
  template <class T>
  void broadcast(const T* send, T* recv, size_t count, int root, gyreStream_t stream = nullptr) {
    broadcast(send, recv, count, dataTypeOf<T>(), root, stream);
  }
  void broadcast(const void* send, void* recv, size_t count, gyreDataType_t type, int root,
                 gyreStream_t stream = nullptr) {
    check(gyreBroadcast(send, recv, count, type, root, comm_, stream));
  }
  template <class T>
  void reduce(const T* send, T* recv, size_t count, int root, gyreRedOp_t op = gyreSum,
              gyreStream_t stream = nullptr) {
    check(gyreReduce(send, recv, count, dataTypeOf<T>(), op, root, comm_, stream));
  }
  template <class T>
  void gather(const T* send, T* recv, size_t count, int root, gyreStream_t stream = nullptr) {
    check(gyreGather(send, recv, count, dataTypeOf<T>(), root, comm_, stream));
  }
  template <class T>
  void scatter(const T* send, T* recv, size_t count, int root, gyreStream_t stream = nullptr) {
    check(gyreScatter(send, recv, count, dataTypeOf<T>(), root, comm_, stream));
  }
  template <class T>
  void allToAll(const T* send, T* recv, size_t count, gyreStream_t stream = nullptr) {
    check(gyreAllToAll(send, recv, count, dataTypeOf<T>(), comm_, stream));
  }
  template <class T>
  void send(const T* buf, size_t count, int peer, gyreStream_t stream = nullptr) {
    check(gyreSend(buf, count, dataTypeOf<T>(), peer, comm_, stream));
  }
  template <class T>
  void recv(T* buf, size_t count, int peer, gyreStream_t stream = nullptr) {
    check(gyreRecv(buf, count, dataTypeOf<T>(), peer, comm_, stream));
  }
  void barrier() { check(gyreBarrier(comm_)); }

  // A communicator of the ranks passing the same color; an empty Comm for GYRE_SPLIT_NOCOLOR.
  Comm split(int color, int key) const {
    gyreComm_t c = nullptr;
    check(gyreCommSplit(comm_, color, key, &c, nullptr));
    return Comm(c);
  }
  Comm dup() const {
    gyreComm_t c = nullptr;
    check(gyreCommDup(comm_, &c));
    return Comm(c);
  }
  // The remaining ranks' communicator without `excluded` (gyreCommShrink): only they call it.
  Comm shrink(const std::vector<int>& excluded, int flags = GYRE_SHRINK_DEFAULT) const {
    gyreComm_t c = nullptr;
    check(gyreCommShrink(comm_, excluded.data(), int(excluded.size()), &c, nullptr, flags));
    return Comm(c);
  }
  explicit operator bool() const { return comm_ != nullptr; }

 private:
  explicit Comm(gyreComm_t comm) : comm_(comm) {}
  void reset() {
    if (comm_) gyreCommDestroy(comm_);
    comm_ = nullptr;
  }
  gyreComm_t comm_ = nullptr;
};

// A premul sum of one communicator (gyreRedOpCreatePreMulSum, the factor read now), destroyed
// with this object: pass op() where a gyreRedOp_t goes, on that communicator only.
class PreMulSum {
 public:
  template <class T>
  PreMulSum(const Comm& comm, T factor) : comm_(comm.get()) {
    check(gyreRedOpCreatePreMulSum(&op_, &factor, dataTypeOf<T>(), gyreScalarHostImmediate, comm_));
  }
  PreMulSum(const PreMulSum&) = delete;
  PreMulSum& operator=(const PreMulSum&) = delete;
  ~PreMulSum() { gyreRedOpDestroy(op_, comm_); }
  gyreRedOp_t op() const { return op_; }

 private:
  gyreComm_t comm_;
  gyreRedOp_t op_ = gyreSum;
};

}  // namespace gyre
