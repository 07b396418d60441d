// hal_cuda.c: a backend over the harness's CPU CUDA runtime (reference).
//
// The "vendor library" is the runtime at $KATA_CUDA_RUNTIME (harness/cuda/cpu/runtime.cpp
// built as a shared library; its interface is kata_launch.h). A module is a kernel library the
// harness's CUDA toolchain built from a .cu file: kata_invoke__<kernel> calls one thread's
// worth of the kernel with cuLaunchKernel-style params. Device memory comes from
// kata_dev_alloc (guard pages after every buffer: an out-of-bounds access is an error of the
// launch, which runs in a forked child of the runtime, never a crash of this process).
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hal_backend.h"
#include "kata_launch.h"

typedef int (*launch_fn)(const kata_launch_t*, kata_result_t*);
typedef void* (*alloc_fn)(size_t, size_t, uintptr_t*, size_t*, int*);
typedef void (*free_fn)(uintptr_t, size_t, int);

static void* g_rt;
static launch_fn g_launch;
static alloc_fn g_alloc;
static free_fn g_free;

typedef struct buffer {
    void* ptr;
    size_t size;
    uintptr_t map_lo;
    size_t map_size;
    int fd;
    struct buffer* next;
} buffer_t;
static buffer_t* g_buffers;

typedef struct {
    void (*invoke)(void**);
    char name[128];
} function_t;

static int cu_init(void) {
    const char* path = getenv("KATA_CUDA_RUNTIME");
    if (path == NULL || *path == 0) return HAL_ERROR_NOT_FOUND;  // no driver installed
    // The kernel libraries resolve threadIdx, __syncthreads & co. against the runtime: GLOBAL.
    g_rt = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
    if (g_rt == NULL) return HAL_ERROR_NOT_FOUND;
    g_launch = (launch_fn)dlsym(g_rt, "kata_launch");
    g_alloc = (alloc_fn)dlsym(g_rt, "kata_dev_alloc");
    g_free = (free_fn)dlsym(g_rt, "kata_dev_free");
    if (!g_launch || !g_alloc || !g_free) return HAL_ERROR_NOT_FOUND;
    return HAL_SUCCESS;
}

static void cu_shutdown(void) {
    while (g_buffers) {
        buffer_t* b = g_buffers;
        g_buffers = b->next;
        g_free(b->map_lo, b->map_size, b->fd);
        free(b);
    }
    if (g_rt) dlclose(g_rt);
    g_rt = NULL;
}

static int cu_device_count(void) { return 1; }

static int cu_device_info(int dev, hal_device_props* info) {
    (void)dev;
    snprintf(info->name, sizeof info->name, "harness cpu CUDA runtime");
    info->total_mem = 1ull << 32;
    return HAL_SUCCESS;
}

static int cu_mem_alloc(int dev, size_t bytes, void** ptr) {
    (void)dev;
    buffer_t* b = calloc(1, sizeof *b);
    if (b == NULL) return HAL_ERROR_OUT_OF_MEMORY;
    b->ptr = g_alloc(bytes, 256, &b->map_lo, &b->map_size, &b->fd);
    if (b->ptr == NULL) {
        free(b);
        return HAL_ERROR_OUT_OF_MEMORY;
    }
    b->size = bytes;
    b->next = g_buffers;
    g_buffers = b;
    *ptr = b->ptr;
    return HAL_SUCCESS;
}

static int cu_mem_free(int dev, void* ptr) {
    (void)dev;
    for (buffer_t** p = &g_buffers; *p; p = &(*p)->next) {
        if ((*p)->ptr == ptr) {
            buffer_t* b = *p;
            *p = b->next;
            g_free(b->map_lo, b->map_size, b->fd);
            free(b);
            return HAL_SUCCESS;
        }
    }
    return HAL_ERROR_INVALID_VALUE;
}

static int cu_memcpy(int dev, void* dst, const void* src, size_t bytes) {
    (void)dev;
    memcpy(dst, src, bytes);
    return HAL_SUCCESS;
}

static int cu_module_load(int dev, const char* path, void** module) {
    (void)dev;
    void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) return HAL_ERROR_NOT_FOUND;
    *module = h;
    return HAL_SUCCESS;
}

static int cu_module_unload(int dev, void* module) {
    (void)dev;
    dlclose(module);
    return HAL_SUCCESS;
}

static int cu_module_function(int dev, void* module, const char* name, void** function) {
    (void)dev;
    char sym[160];
    snprintf(sym, sizeof sym, "kata_invoke__%s", name);
    void* f = dlsym(module, sym);
    if (f == NULL) return HAL_ERROR_NOT_FOUND;
    function_t* fn = calloc(1, sizeof *fn);
    if (fn == NULL) return HAL_ERROR_OUT_OF_MEMORY;
    fn->invoke = (void (*)(void**))f;
    snprintf(fn->name, sizeof fn->name, "%s", name);
    *function = fn;
    return HAL_SUCCESS;
}

static int cu_launch(int dev, void* function, hal_dim3 grid, hal_dim3 block, void** params,
                     int nparams, void* stream) {
    (void)dev, (void)nparams, (void)stream;
    function_t* fn = function;
    int n = 0;
    for (buffer_t* b = g_buffers; b; b = b->next) n++;
    kata_buffer* bufs = calloc(n ? n : 1, sizeof *bufs);
    int i = 0;
    for (buffer_t* b = g_buffers; b; b = b->next, i++) {
        bufs[i].start = (uintptr_t)b->ptr;
        bufs[i].size = b->size;
        bufs[i].map_lo = b->map_lo;
        bufs[i].map_size = b->map_size;
        bufs[i].arg = -1;
    }
    kata_launch_t L;
    memset(&L, 0, sizeof L);
    L.call = fn->invoke;
    L.args = params;
    L.kernel = fn->name;
    L.grid[0] = grid.x, L.grid[1] = grid.y, L.grid[2] = grid.z;
    L.block[0] = block.x, L.block[1] = block.y, L.block[2] = block.z;
    L.schedule = KATA_SCHEDULE_FORWARD;
    L.fibers = 1;
    L.isolate = 1;
    L.timeout = 20.0;
    L.nbuffers = n;
    L.buffers = bufs;
    kata_result_t r;
    int st = g_launch(&L, &r);
    free(bufs);
    if (st != KATA_OK) {
        fprintf(stderr, "hal_cuda: %s: %s\n", fn->name, r.message);
        return HAL_ERROR_LAUNCH_FAILED;
    }
    return HAL_SUCCESS;
}

static const hal_backend_ops kOps = {
    .struct_size = sizeof(hal_backend_ops),
    .abi_major = HAL_ABI_MAJOR,
    .abi_minor = HAL_ABI_MINOR,
    .name = "cuda",
    .priority = 20,
    .caps = 0,
    .init = cu_init,
    .shutdown = cu_shutdown,
    .device_count = cu_device_count,
    .device_info = cu_device_info,
    .mem_alloc = cu_mem_alloc,
    .mem_free = cu_mem_free,
    .memcpy_htod = cu_memcpy,
    .memcpy_dtoh = cu_memcpy,
    .module_load = cu_module_load,
    .module_unload = cu_module_unload,
    .module_function = cu_module_function,
    .launch = cu_launch,
};

HAL_BACKEND_EXPORT const hal_backend_ops* hal_backend_entry(uint32_t core_major, uint32_t core_minor) {
    (void)core_minor;
    return core_major == HAL_ABI_MAJOR ? &kOps : NULL;
}
