// YOUR FILE. CUDA_CHECK: stop at the first failing CUDA runtime call, saying where and why.
#pragma once
#include <stdio.h>
#include <stdlib.h>

// CUDA_CHECK(call): evaluate `call` (a cudaError_t) exactly once; if it is not cudaSuccess,
// print to stderr one line with __FILE__:__LINE__, the error's name (cudaGetErrorName), its
// number and its description (cudaGetErrorString), then the text of the call (#call), and
// exit(EXIT_FAILURE). It must be usable as one statement: `if (x) CUDA_CHECK(f()); else ...`.
// README.md ("Checking errors") shows the expected output.
#define CUDA_CHECK(call) (void)(call) /* TODO: this ignores the error */

// CUDA_CHECK_LAUNCH(): after a kernel launch, check cudaGetLastError() (the launch itself)
// and then cudaDeviceSynchronize() (the kernel's execution), both with CUDA_CHECK.
#define CUDA_CHECK_LAUNCH() /* TODO */
