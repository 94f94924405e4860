// Function qualifiers for code compiled both by the host compiler and by nvcc (algorithm
// headers, the link contract). C++17.
#pragma once

#if defined(__CUDACC__)
#define GYRE_HD __host__ __device__
#else
#define GYRE_HD
#endif
// Kept out of line on the device: executors' per-slot work, called from many places of every
// algorithm, would otherwise be inlined at each and blow up compile time and code size.
#if defined(__CUDA_ARCH__)
#define GYRE_OUTLINE __noinline__
#else
#define GYRE_OUTLINE
#endif
