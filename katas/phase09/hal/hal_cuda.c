// hal_cuda.c: a backend over the harness's CPU CUDA runtime. YOU WRITE THIS.
//
// The "vendor library" is the shared library named by $KATA_CUDA_RUNTIME: the harness's cpu
// CUDA runtime (harness/cuda/cpu/runtime.cpp), whose C interface is kata_launch.h (on the
// include path). No KATA_CUDA_RUNTIME, or a library that does not load, means no driver on
// this machine: init answers an error and the core falls back to another backend.
//
// - init: dlopen the runtime with RTLD_NOW | RTLD_GLOBAL (kernel libraries resolve threadIdx,
//   __syncthreads & co. against it), dlsym kata_launch, kata_dev_alloc, kata_dev_free.
// - memory: kata_dev_alloc(bytes, 256, &map_lo, &map_size, &fd) (a guard page after every
//   buffer); keep each buffer's record: launches describe every buffer to the runtime.
// - a module is a kernel library built from a .cu file (dlopen RTLD_LOCAL); a kernel's entry
//   is kata_invoke__<name>, called with cuLaunchKernel-style params.
// - launch: fill a kata_launch_t (call, args, kernel name, grid, block, fibers = 1,
//   isolate = 1, a timeout, the buffers) and call kata_launch; anything but KATA_OK is
//   HAL_ERROR_LAUNCH_FAILED (print the kata_result_t's message to stderr).
// Name "cuda", priority 20 (preferred over "cpu"), caps 0 (the core emulates streams), ABI 1.2.
// Until then every entry answers HAL_ERROR_TODO.
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hal_backend.h"
#include "kata_launch.h"

static int todo(void) { return HAL_ERROR_TODO; }

static const hal_backend_ops kOps = {
    .struct_size = sizeof(hal_backend_ops),
    .abi_major = HAL_ABI_MAJOR,
    .abi_minor = HAL_ABI_MINOR,
    .name = "cuda",
    .priority = 20,
    .caps = 0,
    .init = todo,
    .device_count = todo,
};

HAL_BACKEND_EXPORT const hal_backend_ops* hal_backend_entry(uint32_t core_major, uint32_t core_minor) {
    (void)core_major, (void)core_minor;
    return &kOps;
}
