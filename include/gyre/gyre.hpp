// C++ API: an RAII communicator over the C API that throws gyre::Error on failure.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>

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

  // Typed forms; the raw forms take a gyreDataType_t (f16 and bf16 have no C++ type here).
  template <class T>
  void allReduce(const T* send, T* recv, size_t count, gyreRedOp_t op = gyreSum) {
    allReduce(send, recv, count, dataTypeOf<T>(), op);
  }
  void allReduce(const void* send, void* recv, size_t count, gyreDataType_t type, gyreRedOp_t op) {
    check(gyreAllReduce(send, recv, count, type, op, comm_, nullptr));
  }
  template <class T>
  void allGather(const T* send, T* recv, size_t sendCount) {
    allGather(send, recv, sendCount, dataTypeOf<T>());
  }
  void allGather(const void* send, void* recv, size_t sendCount, gyreDataType_t type) {
    check(gyreAllGather(send, recv, sendCount, type, comm_, nullptr));
  }
  template <class T>
  void reduceScatter(const T* send, T* recv, size_t recvCount, gyreRedOp_t op = gyreSum) {
    reduceScatter(send, recv, recvCount, dataTypeOf<T>(), op);
  }
  void reduceScatter(const void* send, void* recv, size_t recvCount, gyreDataType_t type,
                     gyreRedOp_t op) {
    check(gyreReduceScatter(send, recv, recvCount, type, op, comm_, nullptr));
  }
  template <class T>
  void broadcast(const T* send, T* recv, size_t count, int root) {
    broadcast(send, recv, count, dataTypeOf<T>(), root);
  }
  void broadcast(const void* send, void* recv, size_t count, gyreDataType_t type, int root) {
    check(gyreBroadcast(send, recv, count, type, root, comm_, nullptr));
  }

 private:
  explicit Comm(gyreComm_t comm) : comm_(comm) {}
  void reset() {
    if (comm_) gyreCommDestroy(comm_);
    comm_ = nullptr;
  }
  gyreComm_t comm_ = nullptr;
};

}  // namespace gyre
