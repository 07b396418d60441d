// Drives CUDA_CHECK through fake_runtime.h: `check_demo <scenario>`; see test_vector_add.py.
#include <stdio.h>
#include <string.h>

#include "fake_runtime.h"
#include "cuda_check.h"

int main(int argc, char** argv) {
  const char* s = argc > 1 ? argv[1] : "";
  if (!strcmp(s, "ok")) {
    CUDA_CHECK(fake_call(cudaSuccess));
    if (argc > 99) CUDA_CHECK(fake_call(cudaSuccess)); else printf("else ");  // one statement
    printf("calls=%d\n", fake_calls);
    return 0;
  }
  if (!strcmp(s, "fail")) {
    CUDA_CHECK(fake_call(cudaErrorMemoryAllocation));  // LINE:fail
    printf("kept going after an error\n");
    return 0;
  }
  if (!strcmp(s, "launch")) {
    fake_last_error = cudaErrorInvalidConfiguration;
    CUDA_CHECK_LAUNCH();  // LINE:launch
    printf("kept going after a launch error\n");
    return 0;
  }
  if (!strcmp(s, "async")) {
    fake_sync_error = cudaErrorIllegalAddress;
    CUDA_CHECK_LAUNCH();  // LINE:async
    printf("kept going after an error in the kernel (sync calls: %d)\n", fake_sync_calls);
    return 0;
  }
  if (!strcmp(s, "launch-ok")) {
    CUDA_CHECK_LAUNCH();
    printf("last=%d sync=%d\n", fake_last_error_calls, fake_sync_calls);
    return 0;
  }
  return 2;
}
