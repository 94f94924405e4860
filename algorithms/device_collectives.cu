#include "algorithms/device_collectives.h"
#include "algorithms/device_prims.cuh"

namespace gyre::cuda {

namespace {

template <class T, class Op>
__global__ void __launch_bounds__(kDeviceThreads) collectiveKernel(DeviceCall call) {
  BlockEnv<T, Op> env{&call.failures[blockIdx.x], call.failures, call.plan.channels, call.control};
  runDeviceChannel(env, call, int(blockIdx.x));
}

template <class T, class Op>
cudaError_t launchAs(const DeviceCall& call, cudaStream_t stream) {
  collectiveKernel<T, Op><<<unsigned(call.plan.channels), kDeviceThreads, 0, stream>>>(call);
  return cudaGetLastError();
}

template <class T, class Op>
cudaError_t loadAs() {
  cudaFuncAttributes attributes;
  return cudaFuncGetAttributes(&attributes, collectiveKernel<T, Op>);
}

template <class T>
cudaError_t launchFor(const DeviceCall& call, cudaStream_t stream) {
  // Collectives that only move data never reduce: they take the sum instantiation.
  if (!reduces(call.plan.coll)) return launchAs<T, Sum>(call, stream);
  switch (call.op) {
    case RedOp::sum:
    case RedOp::avg:  // a sum divided once, in the step that completes it
      return launchAs<T, Sum>(call, stream);
    case RedOp::prod:
      return launchAs<T, Prod>(call, stream);
    case RedOp::min:
      return launchAs<T, Min>(call, stream);
    case RedOp::max:
      return launchAs<T, Max>(call, stream);
  }
  return cudaErrorInvalidValue;
}

template <class T>
cudaError_t loadFor() {
  for (cudaError_t e : {loadAs<T, Sum>(), loadAs<T, Prod>(), loadAs<T, Min>(), loadAs<T, Max>()})
    if (e != cudaSuccess) return e;
  return cudaSuccess;
}

}  // namespace

cudaError_t launchDeviceCall(const DeviceCall& call, cudaStream_t stream) {
  if (call.plan.channels < 1) return cudaErrorInvalidValue;
  switch (call.dtype) {
    case DataType::i8:
      return launchFor<int8_t>(call, stream);
    case DataType::u8:
      return launchFor<uint8_t>(call, stream);
    case DataType::i32:
      return launchFor<int32_t>(call, stream);
    case DataType::u32:
      return launchFor<uint32_t>(call, stream);
    case DataType::i64:
      return launchFor<int64_t>(call, stream);
    case DataType::u64:
      return launchFor<uint64_t>(call, stream);
    case DataType::f16:
      return launchFor<F16>(call, stream);
    case DataType::bf16:
      return launchFor<BF16>(call, stream);
    case DataType::f32:
      return launchFor<float>(call, stream);
    case DataType::f64:
      return launchFor<double>(call, stream);
  }
  return cudaErrorInvalidValue;
}

cudaError_t loadDeviceCalls() {
  for (cudaError_t e : {loadFor<int8_t>(), loadFor<uint8_t>(), loadFor<int32_t>(),
                        loadFor<uint32_t>(), loadFor<int64_t>(), loadFor<uint64_t>(),
                        loadFor<F16>(), loadFor<BF16>(), loadFor<float>(), loadFor<double>()}) {
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

}  // namespace gyre::cuda
