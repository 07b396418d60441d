// A stand-in for cuda_runtime.h, for testing CUDA_CHECK on any machine: the same names and
// numbers as the real runtime (CUDA 13 driver_types.h), with calls whose results a test sets.
#pragma once

typedef enum cudaError {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorNoDevice = 100,
  cudaErrorIllegalAddress = 700,
} cudaError_t;

static inline const char* cudaGetErrorName(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorIllegalAddress: return "cudaErrorIllegalAddress";
  }
  return "cudaErrorUnknown";
}

static inline const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorIllegalAddress: return "an illegal memory access was encountered";
  }
  return "unknown error";
}

// What the next cudaGetLastError / cudaDeviceSynchronize return, and how often each ran.
static cudaError_t fake_last_error = cudaSuccess, fake_sync_error = cudaSuccess;
static int fake_calls = 0, fake_last_error_calls = 0, fake_sync_calls = 0;

static inline cudaError_t fake_call(cudaError_t result) {
  fake_calls++;
  return result;
}
static inline cudaError_t cudaGetLastError(void) {
  fake_last_error_calls++;
  cudaError_t e = fake_last_error;
  fake_last_error = cudaSuccess;
  return e;
}
static inline cudaError_t cudaDeviceSynchronize(void) {
  fake_sync_calls++;
  return fake_sync_error;
}
