// hal_cpu.c: the CPU backend. YOU WRITE THIS.
//
// Device memory is host memory; a module is a shared library of hal_cpu_kernel functions
// (tests/data/kernels_cpu.c is one); a launch calls the kernel once per thread of the grid
// (hal_cpu_thread says which). Fill the table below and export it through
// hal_backend_entry: name "cpu", priority 10, caps HAL_CAP_MEMSET, one device, ABI 1.2.
// Until then every entry answers HAL_ERROR_TODO (the tests read that as "not started").
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hal_backend.h"

static int todo(void) { return HAL_ERROR_TODO; }

static const hal_backend_ops kOps = {
    .struct_size = sizeof(hal_backend_ops),
    .abi_major = HAL_ABI_MAJOR,
    .abi_minor = HAL_ABI_MINOR,
    .name = "cpu",
    .priority = 10,
    .caps = HAL_CAP_MEMSET,
    .init = todo,
    .device_count = todo,
};

HAL_BACKEND_EXPORT const hal_backend_ops* hal_backend_entry(uint32_t core_major, uint32_t core_minor) {
    (void)core_major, (void)core_minor;
    return &kOps;
}
