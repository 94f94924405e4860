// Element types and reduction ops shared by the runtime, the algorithms and the kernels.
// C++17-clean: nvcc compiles this header.
#pragma once

#include <cstddef>
#include <cstdint>

namespace gyre {

// Values match gyreDataType_t and gyreRedOp_t in gyre.h.
enum class DataType : uint8_t { i8, u8, i32, u32, i64, u64, f16, bf16, f32, f64 };
enum class RedOp : uint8_t { sum, prod, min, max, avg };
inline constexpr int kNumDataTypes = 10;
inline constexpr int kNumRedOps = 5;

enum class Collective : uint8_t {
  all_reduce,
  all_gather,
  reduce_scatter,
  broadcast,
  reduce,
  gather,
  scatter,
  all_to_all,
  barrier,
  send_recv,  // point-to-point: both ends carry this in their descriptors
  all_gather_v,
  all_to_all_v,
};
inline constexpr int kNumCollectives = 12;

constexpr bool reduces(Collective c) {
  return c == Collective::all_reduce || c == Collective::reduce_scatter || c == Collective::reduce;
}

constexpr bool hasRoot(Collective c) {
  return c == Collective::broadcast || c == Collective::reduce || c == Collective::gather ||
         c == Collective::scatter;
}

constexpr size_t dataTypeSize(DataType t) {
  switch (t) {
    case DataType::i8:
    case DataType::u8:
      return 1;
    case DataType::f16:
    case DataType::bf16:
      return 2;
    case DataType::i32:
    case DataType::u32:
    case DataType::f32:
      return 4;
    case DataType::i64:
    case DataType::u64:
    case DataType::f64:
      return 8;
  }
  return 0;
}

constexpr bool isFloating(DataType t) {
  return t == DataType::f16 || t == DataType::bf16 || t == DataType::f32 || t == DataType::f64;
}

constexpr const char* dataTypeName(DataType t) {
  constexpr const char* names[] = {"int8",   "uint8", "int32",    "uint32", "int64",
                                   "uint64", "half",  "bfloat16", "float",  "double"};
  return static_cast<int>(t) < kNumDataTypes ? names[static_cast<int>(t)] : "?";
}

constexpr const char* redOpName(RedOp op) {
  constexpr const char* names[] = {"sum", "prod", "min", "max", "avg"};
  return static_cast<int>(op) < kNumRedOps ? names[static_cast<int>(op)] : "?";
}

constexpr const char* collectiveName(Collective c) {
  constexpr const char* names[] = {"all_reduce", "all_gather", "reduce_scatter", "broadcast",
                                   "reduce",     "gather",     "scatter",        "all_to_all",
                                   "barrier",    "send_recv",  "all_gather_v",   "all_to_all_v"};
  return static_cast<int>(c) < kNumCollectives ? names[static_cast<int>(c)] : "?";
}

}  // namespace gyre
