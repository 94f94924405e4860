// For the CUDA test programs: no CUDA device means the program exits 77, which ctest reports
// as skipped, after saying why.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>

namespace gyre::test {

inline void exitUnlessCudaDevice() {
  int devices = 0;
  const cudaError_t status = cudaGetDeviceCount(&devices);
  if (status != cudaSuccess || devices == 0) {
    std::printf("SKIP: no CUDA device (%s)\n",
                status != cudaSuccess ? cudaGetErrorString(status) : "none found");
    std::exit(77);
  }
}

}  // namespace gyre::test
