// CUDA_CHECK: stop at the first failing CUDA runtime call, saying where and why (reference).
#pragma once
#include <stdio.h>
#include <stdlib.h>

// Every runtime call returns a cudaError_t; ignoring it turns one bad launch into garbage
// results or a confusing failure much later. The macro evaluates the call once, and on an
// error prints the call, its place and the runtime's own name and description, then exits.
// do { } while (0) makes the macro one statement, safe after an unbraced if.
#define CUDA_CHECK(call)                                                              \
  do {                                                                                \
    cudaError_t cuda_check_err_ = (call);                                             \
    if (cuda_check_err_ != cudaSuccess) {                                             \
      fprintf(stderr, "%s:%d: CUDA error %s (%d): %s\n  in: %s\n", __FILE__, __LINE__, \
              cudaGetErrorName(cuda_check_err_), (int)cuda_check_err_,                \
              cudaGetErrorString(cuda_check_err_), #call);                            \
      exit(EXIT_FAILURE);                                                             \
    }                                                                                 \
  } while (0)

// Kernel launches return nothing: check the launch itself (bad configuration) with
// cudaGetLastError, and errors while the kernel ran with the next synchronising call.
#define CUDA_CHECK_LAUNCH()                    \
  do {                                         \
    CUDA_CHECK(cudaGetLastError());            \
    CUDA_CHECK(cudaDeviceSynchronize());       \
  } while (0)
