// Premul sums (gyreRedOpCreatePreMulSum): ops a communicator hands out from gyreNumOps up, and
// the scaled copy of a call's input that the collective then sums.
#include <cstring>

#include "kernels/cpu/reduce.h"
#include "runtime/api/api_internal.h"

namespace gyre::api {

std::optional<PreMulSum> preMulSumOf(gyreComm_t comm, gyreRedOp_t op, DataType type,
                                     const char* what) {
  if (int(op) < int(gyreNumOps)) return std::nullopt;  // a built-in op (or a bad one: opOf)
  Communicator& c = commOf(comm);
  std::lock_guard lock(comm->preMulLock);
  const size_t index = size_t(op) - size_t(gyreNumOps);
  const std::string call =
      "rank " + std::to_string(c.rank()) + ": " + what + ": op " + std::to_string(int(op));
  if (index >= comm->preMulSums.size() || !comm->preMulSums[index]) {
    fail(Code::invalid_argument,
         call +
             " is no op of this communicator (not made by gyreRedOpCreatePreMulSum on it, "
             "or destroyed)");
  }
  const PreMulSum& p = *comm->preMulSums[index];
  if (p.type != type) {
    fail(Code::invalid_argument,
         call + " is a premul sum of " + dataTypeName(p.type) + ", used on " + dataTypeName(type));
  }
  return p;
}

std::unique_ptr<std::byte[]> preMultiplied(const PreMulSum& p, const void* input, size_t count,
                                           const void* stagedScalar) {
  const size_t es = dataTypeSize(p.type);
  alignas(8) unsigned char factor[8];
  std::memcpy(factor, p.immediate ? p.value : (stagedScalar ? stagedScalar : p.scalar), es);
  std::unique_ptr<std::byte[]> scaled(new std::byte[std::max<size_t>(1, count * es)]);
  if (count) cpu::scale(p.type, scaled.get(), input, factor, count);
  return scaled;
}

}  // namespace gyre::api

using namespace gyre::api;

extern "C" {

gyreResult_t gyreRedOpCreatePreMulSum(gyreRedOp_t* op, void* scalar, gyreDataType_t datatype,
                                      gyreScalarResidence_t residence, gyreComm_t comm) {
  return guarded([&] {
    gyre::Communicator& c = commOf(comm);
    const std::string call = "rank " + std::to_string(c.rank()) + ": gyreRedOpCreatePreMulSum";
    if (!op) gyre::fail(gyre::Code::invalid_argument, call + ": op is null");
    if (!scalar) gyre::fail(gyre::Code::invalid_argument, call + ": scalar is null");
    if (residence != gyreScalarDevice && residence != gyreScalarHostImmediate) {
      gyre::fail(gyre::Code::invalid_argument,
                 call + ": unknown scalar residence " + std::to_string(int(residence)));
    }
    PreMulSum p;
    p.type = typeOf(datatype);
    p.immediate = residence == gyreScalarHostImmediate;
    p.scalar = scalar;
    if (p.immediate) std::memcpy(p.value, scalar, gyre::dataTypeSize(p.type));
    std::lock_guard lock(comm->preMulLock);
    auto& ops = comm->preMulSums;
    size_t index = 0;
    while (index < ops.size() && ops[index]) ++index;  // reuse a destroyed op's number
    if (index == ops.size()) {
      if (ops.size() >= size_t(gyreMaxRedOp - gyreNumOps))
        gyre::fail(gyre::Code::invalid_usage, call + ": no op numbers left");
      ops.emplace_back();
    }
    ops[index] = p;
    *op = static_cast<gyreRedOp_t>(size_t(gyreNumOps) + index);
  });
}

gyreResult_t gyreRedOpDestroy(gyreRedOp_t op, gyreComm_t comm) {
  return guarded([&] {
    gyre::Communicator& c = commOf(comm);
    const size_t index = size_t(unsigned(op)) - size_t(gyreNumOps);
    std::lock_guard lock(comm->preMulLock);
    if (int(op) < int(gyreNumOps) || index >= comm->preMulSums.size() || !comm->preMulSums[index]) {
      gyre::fail(gyre::Code::invalid_argument,
                 "rank " + std::to_string(c.rank()) + ": gyreRedOpDestroy: op " +
                     std::to_string(int(op)) + " is no premul sum of this communicator");
    }
    comm->preMulSums[index].reset();
  });
}

}  // extern "C"
