#pragma once
// Checked CUDA calls (only inside exec/cuda/). PSW_CUDA_CHECK throws psw::Error naming the
// call, the error and the place; PSW_CUDA_CHECK_WARN only reports, for destructors.

#include <cuda_runtime.h>

#include <cstdio>

#include "psw/common/error.hpp"

#define PSW_CUDA_CHECK(expr)                                                                     \
  do {                                                                                           \
    const cudaError_t psw_cuda_status_ = (expr);                                                 \
    if (psw_cuda_status_ != cudaSuccess) {                                                       \
      throw ::psw::Error(::psw::detail::concat("CUDA error at ", __FILE__, ":", __LINE__, ": `", \
                                               #expr, "` returned ",                             \
                                               cudaGetErrorName(psw_cuda_status_), ": ",         \
                                               cudaGetErrorString(psw_cuda_status_)));           \
    }                                                                                            \
  } while (false)

#define PSW_CUDA_CHECK_WARN(expr)                                                               \
  do {                                                                                          \
    const cudaError_t psw_cuda_status_ = (expr);                                                \
    if (psw_cuda_status_ != cudaSuccess) {                                                      \
      std::fprintf(stderr, "psw: warning: CUDA error at %s:%d: `%s` returned %s\n", __FILE__,   \
                   __LINE__, #expr, cudaGetErrorName(psw_cuda_status_));                        \
    }                                                                                           \
  } while (false)
