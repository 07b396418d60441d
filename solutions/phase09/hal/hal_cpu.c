// hal_cpu.c: the CPU backend (reference). Device memory is host memory; a module is a shared
// library of hal_cpu_kernel functions; a launch calls the kernel once per thread of the grid.
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hal_backend.h"

static int cpu_init(void) { return HAL_SUCCESS; }

static void cpu_shutdown(void) {}

static int cpu_device_count(void) { return 1; }

static int cpu_device_info(int dev, hal_device_props* info) {
    if (dev != 0 || info == NULL) return HAL_ERROR_INVALID_VALUE;
    snprintf(info->name, sizeof info->name, "host cpu (%ld cores)", sysconf(_SC_NPROCESSORS_ONLN));
    info->total_mem = (uint64_t)sysconf(_SC_PHYS_PAGES) * (uint64_t)sysconf(_SC_PAGESIZE);
    return HAL_SUCCESS;
}

static int cpu_mem_alloc(int dev, size_t bytes, void** ptr) {
    (void)dev;
    void* p = NULL;
    if (posix_memalign(&p, 256, bytes) != 0) return HAL_ERROR_OUT_OF_MEMORY;
    *ptr = p;
    return HAL_SUCCESS;
}

static int cpu_mem_free(int dev, void* ptr) {
    (void)dev;
    free(ptr);
    return HAL_SUCCESS;
}

static int cpu_memcpy(int dev, void* dst, const void* src, size_t bytes) {
    (void)dev;
    memcpy(dst, src, bytes);
    return HAL_SUCCESS;
}

static int cpu_memset(int dev, void* dst, int value, size_t bytes) {
    (void)dev;
    memset(dst, value, bytes);
    return HAL_SUCCESS;
}

static int cpu_module_load(int dev, const char* path, void** module) {
    (void)dev;
    void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) return HAL_ERROR_NOT_FOUND;
    *module = h;
    return HAL_SUCCESS;
}

static int cpu_module_unload(int dev, void* module) {
    (void)dev;
    dlclose(module);
    return HAL_SUCCESS;
}

static int cpu_module_function(int dev, void* module, const char* name, void** function) {
    (void)dev;
    void* f = dlsym(module, name);
    if (f == NULL) return HAL_ERROR_NOT_FOUND;
    *function = f;
    return HAL_SUCCESS;
}

static int cpu_launch(int dev, void* function, hal_dim3 grid, hal_dim3 block, void** params,
                      int nparams, void* stream) {
    (void)dev, (void)nparams, (void)stream;
    hal_cpu_kernel k = (hal_cpu_kernel)function;
    hal_cpu_thread t;
    t.grid_dim = grid;
    t.block_dim = block;
    for (t.block_idx.z = 0; t.block_idx.z < grid.z; t.block_idx.z++)
        for (t.block_idx.y = 0; t.block_idx.y < grid.y; t.block_idx.y++)
            for (t.block_idx.x = 0; t.block_idx.x < grid.x; t.block_idx.x++)
                for (t.thread_idx.z = 0; t.thread_idx.z < block.z; t.thread_idx.z++)
                    for (t.thread_idx.y = 0; t.thread_idx.y < block.y; t.thread_idx.y++)
                        for (t.thread_idx.x = 0; t.thread_idx.x < block.x; t.thread_idx.x++)
                            k(&t, params);
    return HAL_SUCCESS;
}

static const hal_backend_ops kOps = {
    .struct_size = sizeof(hal_backend_ops),
    .abi_major = HAL_ABI_MAJOR,
    .abi_minor = HAL_ABI_MINOR,
    .name = "cpu",
    .priority = 10,
    .caps = HAL_CAP_MEMSET,
    .init = cpu_init,
    .shutdown = cpu_shutdown,
    .device_count = cpu_device_count,
    .device_info = cpu_device_info,
    .mem_alloc = cpu_mem_alloc,
    .mem_free = cpu_mem_free,
    .memcpy_htod = cpu_memcpy,
    .memcpy_dtoh = cpu_memcpy,
    .module_load = cpu_module_load,
    .module_unload = cpu_module_unload,
    .module_function = cpu_module_function,
    .launch = cpu_launch,
    .memset = cpu_memset,
};

HAL_BACKEND_EXPORT const hal_backend_ops* hal_backend_entry(uint32_t core_major, uint32_t core_minor) {
    (void)core_minor;
    return core_major == HAL_ABI_MAJOR ? &kOps : NULL;
}
