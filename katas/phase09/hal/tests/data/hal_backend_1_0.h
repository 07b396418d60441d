// hal_backend_1_0.h: the plugin ABI as release 1.0 shipped it (GIVEN): the previous header.
// Backends built against it are in the field; a 1.2 core must still load them. Its table ends
// after `launch`: no streams (minor 1), no memset (minor 2).
#pragma once
#include <stddef.h>
#include <stdint.h>

#define HAL_ABI_MAJOR 1
#define HAL_ABI_MINOR 0

typedef enum { HAL_SUCCESS = 0, HAL_ERROR_INVALID_VALUE = 1, HAL_ERROR_OUT_OF_MEMORY = 4,
               HAL_ERROR_NOT_FOUND = 8 } hal_status;
typedef struct { uint32_t x, y, z; } hal_dim3;
typedef struct {
    char name[64];
    char backend[32];
    int32_t priority;
    uint32_t caps;
    uint64_t total_mem;
    int32_t backend_index;
    int32_t backend_device;
} hal_device_props;

typedef struct hal_backend_ops {
    uint32_t struct_size;
    uint16_t abi_major;
    uint16_t abi_minor;
    const char* name;
    int32_t priority;
    uint32_t caps;
    int (*init)(void);
    void (*shutdown)(void);
    int (*device_count)(void);
    int (*device_info)(int dev, hal_device_props* info);
    int (*mem_alloc)(int dev, size_t bytes, void** ptr);
    int (*mem_free)(int dev, void* ptr);
    int (*memcpy_htod)(int dev, void* dst, const void* src, size_t bytes);
    int (*memcpy_dtoh)(int dev, void* dst, const void* src, size_t bytes);
    int (*module_load)(int dev, const char* path, void** module);
    int (*module_unload)(int dev, void* module);
    int (*module_function)(int dev, void* module, const char* name, void** function);
    int (*launch)(int dev, void* function, hal_dim3 grid, hal_dim3 block, void** params,
                  int nparams, void* stream);
} hal_backend_ops;

typedef struct {
    hal_dim3 grid_dim, block_dim, block_idx, thread_idx;
} hal_cpu_thread;
typedef void (*hal_cpu_kernel)(const hal_cpu_thread* t, void** params);
