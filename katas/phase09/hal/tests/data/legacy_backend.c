// legacy_backend.c: a backend built against the previous header, hal_backend_1_0.h (GIVEN).
// Its table is the 1.0 table: it ends after launch, so the bytes after it are NOT part of it
// (here: pointers to a function that aborts, as garbage would crash a real core).
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hal_backend_1_0.h"

static int l_init(void) { return HAL_SUCCESS; }
static int l_count(void) { return 1; }
static int l_info(int dev, hal_device_props* info) {
    snprintf(info->name, sizeof info->name, "legacy device %d", dev);
    info->total_mem = 1 << 20;
    return HAL_SUCCESS;
}
static int l_alloc(int dev, size_t n, void** p) { (void)dev; *p = calloc(1, n); return *p ? HAL_SUCCESS : HAL_ERROR_OUT_OF_MEMORY; }
static int l_free(int dev, void* p) { (void)dev; free(p); return HAL_SUCCESS; }
static int l_copy(int dev, void* d, const void* s, size_t n) { (void)dev; memcpy(d, s, n); return HAL_SUCCESS; }
static int l_load(int dev, const char* path, void** m) {
    (void)dev;
    *m = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    return *m ? HAL_SUCCESS : HAL_ERROR_NOT_FOUND;
}
static int l_unload(int dev, void* m) { (void)dev; dlclose(m); return HAL_SUCCESS; }
static int l_function(int dev, void* m, const char* name, void** f) {
    (void)dev;
    *f = dlsym(m, name);
    return *f ? HAL_SUCCESS : HAL_ERROR_NOT_FOUND;
}
static int l_launch(int dev, void* fn, hal_dim3 g, hal_dim3 b, void** params, int np, void* s) {
    (void)dev, (void)np, (void)s;
    hal_cpu_thread t = {g, b, {0, 0, 0}, {0, 0, 0}};
    for (t.block_idx.x = 0; t.block_idx.x < g.x; t.block_idx.x++)
        for (t.thread_idx.x = 0; t.thread_idx.x < b.x; t.thread_idx.x++)
            ((hal_cpu_kernel)fn)(&t, params);
    return HAL_SUCCESS;
}
static void not_in_my_table(void) {
    fprintf(stderr, "legacy backend: the core called past the end of a 1.0 table\n");
    abort();
}

static struct {
    hal_backend_ops ops;
    void (*after[16])(void);
} kTable = {
    .ops = {
        .struct_size = sizeof(hal_backend_ops),
        .abi_major = HAL_ABI_MAJOR,
        .abi_minor = HAL_ABI_MINOR,
        .name = "legacy",
        .priority = 5,
        .caps = 1 | 2, /* claims streams and memset, as a careless 1.0 backend might */
        .init = l_init,
        .device_count = l_count,
        .device_info = l_info,
        .mem_alloc = l_alloc,
        .mem_free = l_free,
        .memcpy_htod = l_copy,
        .memcpy_dtoh = l_copy,
        .module_load = l_load,
        .module_unload = l_unload,
        .module_function = l_function,
        .launch = l_launch,
    },
    .after = {not_in_my_table, not_in_my_table, not_in_my_table, not_in_my_table,
              not_in_my_table, not_in_my_table, not_in_my_table, not_in_my_table,
              not_in_my_table, not_in_my_table, not_in_my_table, not_in_my_table,
              not_in_my_table, not_in_my_table, not_in_my_table, not_in_my_table},
};

__attribute__((visibility("default"))) const hal_backend_ops* hal_backend_entry(uint32_t major, uint32_t minor) {
    (void)major, (void)minor;
    return &kTable.ops;
}
