// Torch tensors as gyre arguments: dtype and op mapping, checks, contiguous workspaces.
#pragma once

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/version.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <functional>
#include <vector>

#include "gyre/gyre.h"

namespace gyre_torch {

// gyre's type for a torch dtype; bool travels as uint8 (see reduceOpOf), and a complex number
// as its real and imaginary parts, two floats of its precision (gyreCount counts both), as
// ProcessGroupNCCL sends them.
inline gyreDataType_t typeOf(const at::Tensor& t, const char* what) {
  switch (t.scalar_type()) {
    case at::kFloat:
    case at::kComplexFloat:
      return gyreFloat32;
    case at::kDouble:
    case at::kComplexDouble:
      return gyreFloat64;
    case at::kHalf:
      return gyreFloat16;
    case at::kBFloat16:
      return gyreBfloat16;
    case at::kChar:
      return gyreInt8;
    case at::kByte:
      return gyreUint8;
    case at::kBool:
      return gyreUint8;
    case at::kInt:
      return gyreInt32;
    case at::kLong:
      return gyreInt64;
    default:
      TORCH_CHECK(false, "gyre ", what, ": dtype ", t.scalar_type(),
                  " is not supported (float32/64, float16, bfloat16, complex64/128, int8, uint8, "
                  "int32, int64, bool are)");
  }
}

// The elements of typeOf(t) that `t` holds: a complex number is two.
inline size_t gyreCount(const at::Tensor& t) {
  return size_t(t.numel()) * (t.is_complex() ? 2 : 1);
}

inline bool floatingOrComplex(const at::Tensor& t) {
  return at::isFloatingType(t.scalar_type()) || at::isComplexType(t.scalar_type());
}

// Bools reduce as uint8 0/1: sum and max are "any", product and min are "all". PREMUL_SUM
// sums what preMultiplied made of the inputs. Complex numbers only sum (part by part).
inline gyreRedOp_t reduceOpOf(const c10d::ReduceOp& op, const at::Tensor& t, const char* what) {
  const bool isBool = t.scalar_type() == at::kBool;
  TORCH_CHECK(!t.is_complex() || op.op_ == c10d::ReduceOp::SUM || op.op_ == c10d::ReduceOp::AVG ||
                  op.op_ == c10d::ReduceOp::PREMUL_SUM,
              "gyre ", what, ": complex tensors reduce only with SUM, AVG and PREMUL_SUM");
  switch (op.op_) {
    case c10d::ReduceOp::SUM:
      return isBool ? gyreMax : gyreSum;
    case c10d::ReduceOp::PRODUCT:
      return isBool ? gyreMin : gyreProd;
    case c10d::ReduceOp::MIN:
      return gyreMin;
    case c10d::ReduceOp::MAX:
      return gyreMax;
    case c10d::ReduceOp::AVG:
      TORCH_CHECK(floatingOrComplex(t), "gyre ", what,
                  ": ReduceOp.AVG needs a floating-point or complex tensor");
      return gyreAvg;
    case c10d::ReduceOp::PREMUL_SUM:
      return gyreSum;
    default:
      TORCH_CHECK(false, "gyre ", what,
                  ": this ReduceOp is not supported (SUM, PRODUCT, MIN, MAX, AVG, PREMUL_SUM are; "
                  "not BAND, BOR, BXOR)");
  }
}

// The input a rank contributes to a reduction with `op`: `input` itself, or for
// ReduceOp.PREMUL_SUM (torch.distributed._make_nccl_premul_sum; FSDP2's gradient divide
// factor) a new tensor of `input` times the op's factor (a number or a one-element tensor),
// which the ranks then sum, as NCCL's premul sum does. The caller's tensor stays as it was.
inline at::Tensor preMultiplied(const c10d::ReduceOp& op, const at::Tensor& input,
                                const char* what) {
  if (op.op_ != c10d::ReduceOp::PREMUL_SUM) return input;
  TORCH_CHECK(floatingOrComplex(input), "gyre ", what,
              ": ReduceOp.PREMUL_SUM needs a floating-point or complex tensor");
  const auto* factor = dynamic_cast<const c10d::NCCLPreMulSumSupplement*>(op.supplement_.get());
  TORCH_CHECK(factor, "gyre ", what, ": ReduceOp.PREMUL_SUM came without its factor");
#if TORCH_VERSION_MAJOR >= 2
  const at::Tensor tensorFactor = factor->tensor_factor;
#else  // one factor per device there
  const at::Tensor tensorFactor =
      factor->tensor_factors.empty() ? at::Tensor() : factor->tensor_factors[0];
#endif
  if (tensorFactor.defined()) {
    TORCH_CHECK(tensorFactor.numel() == 1, "gyre ", what,
                ": ReduceOp.PREMUL_SUM's factor must have one element");
    return input.mul(tensorFactor.to(input.device(), input.scalar_type()));
  }
  return input.mul(factor->double_factor);
}

// CPU tensors, and CUDA tensors where this module was built with torch's CUDA (stream-ordered
// on torch's current stream, like ProcessGroupNCCL).
inline void checkCpu(const at::Tensor& t, const char* what) {
#ifdef GYRE_TORCH_CUDA
  TORCH_CHECK(t.device().is_cpu() || t.device().is_cuda(), "gyre ", what,
              ": only CPU and CUDA tensors are supported (got one on ", t.device(), ")");
#else
  TORCH_CHECK(t.device().is_cpu(), "gyre ", what, ": only CPU tensors are supported by this build ",
              "(its torch has no CUDA; got a tensor on ", t.device(), ")");
#endif
}

inline void checkSingle(const std::vector<at::Tensor>& tensors, const char* what) {
  TORCH_CHECK(tensors.size() == 1, "gyre ", what, ": expects one tensor per process, got ",
              tensors.size());
  checkCpu(tensors[0], what);
}

// A contiguous view of `t` for gyre to work in; when `t` is not contiguous, a copy, and
// (for outputs) a finisher that copies the result back.
inline at::Tensor workspace(const at::Tensor& t, bool output,
                            std::vector<std::function<void()>>& fin) {
  if (t.is_contiguous()) return t;
  at::Tensor flat = t.contiguous();
  if (output) fin.push_back([t, flat]() mutable { t.copy_(flat); });
  return flat;
}

// Elements in each of `tensors`, which must all have `expected` elements and `t`'s dtype.
inline void checkSameShape(const std::vector<at::Tensor>& tensors, const at::Tensor& like, size_t n,
                           const char* what) {
  TORCH_CHECK(tensors.size() == n, "gyre ", what, ": expects ", n, " tensors, got ",
              tensors.size());
  for (const auto& t : tensors) {
    checkCpu(t, what);
    TORCH_CHECK(t.numel() == like.numel() && t.scalar_type() == like.scalar_type(), "gyre ", what,
                ": every tensor must have the input's dtype and element count");
  }
}

}  // namespace gyre_torch
