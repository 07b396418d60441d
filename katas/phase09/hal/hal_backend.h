// hal_backend.h: the plugin ABI between the HAL core and a backend (GIVEN: do not edit).
//
// A backend is a shared library that exports ONE symbol, hal_backend_entry. The core calls it
// with the ABI version it speaks and gets back a table of function pointers that starts with
// the table's own size and ABI version. The rules (the README explains why each exists):
//
// - major: a backend whose abi_major differs from the core's HAL_ABI_MAJOR is refused
//   (HAL_ERROR_ABI_MISMATCH), with a message naming both majors.
// - minor: entries are only ever ADDED, at the end of the table, one minor at a time. An entry
//   of minor m exists for the core when ALL hold: the backend's abi_minor >= m, the entry lies
//   wholly inside struct_size (offsetof + sizeof <= struct_size), and the pointer is not NULL.
//   Anything else is "absent": the core never reads it, never calls it, and answers
//   HAL_ERROR_NOT_SUPPORTED (or emulates it, for streams). A backend built against a newer
//   minor (a larger table) works too: the core reads only the entries it knows.
// - struct_size below HAL_BACKEND_MIN_SIZE (the minor 0 table) is refused (ABI_MISMATCH).
// - capabilities: a feature is used only when its caps bit is set AND all its entries exist:
//   HAL_CAP_STREAMS needs the seven stream/event entries of minor 1 (else the core emulates
//   streams and events), HAL_CAP_MEMSET needs memset (minor 2; else hal_memset answers
//   HAL_ERROR_NOT_SUPPORTED).
// - threads: a backend without HAL_CAP_THREADSAFE is never entered by two threads at once
//   (the core holds a lock of that backend around every call into it).
// - device pointers: mem_alloc returns the backend's own pointer; the core passes it back to
//   memcpy, memset and free, and, for a HAL_ARG_MEM argument, to the kernel (params[i] points
//   at a void* holding it, as cuLaunchKernel's kernelParams do). The core checks every handle,
//   offset and size first: a backend never sees a copy out of its allocation's bounds.
#pragma once
#include "hal.h"

#ifdef __cplusplus
extern "C" {
#endif

#define HAL_BACKEND_ENTRY "hal_backend_entry"

// BEGIN CDEF
typedef struct hal_backend_ops {
    /* ---- header, every version ---- */
    uint32_t struct_size;   /* sizeof the table as the backend was built */
    uint16_t abi_major;
    uint16_t abi_minor;
    const char* name;       /* a short name: "cpu", "cuda" */
    int32_t priority;       /* higher is preferred: its devices come first */
    uint32_t caps;          /* HAL_CAP_* bits it claims */

    /* ---- minor 0 ---- */
    int (*init)(void);                 /* HAL_SUCCESS, or why the backend cannot run here */
    void (*shutdown)(void);
    int (*device_count)(void);
    int (*device_info)(int dev, hal_device_props* info);  /* name, total_mem */
    int (*mem_alloc)(int dev, size_t bytes, void** ptr);
    int (*mem_free)(int dev, void* ptr);
    int (*memcpy_htod)(int dev, void* dst, const void* src, size_t bytes);
    int (*memcpy_dtoh)(int dev, void* dst, const void* src, size_t bytes);
    int (*module_load)(int dev, const char* path, void** module);
    int (*module_unload)(int dev, void* module);
    int (*module_function)(int dev, void* module, const char* name, void** function);
    int (*launch)(int dev, void* function, hal_dim3 grid, hal_dim3 block, void** params,
                  int nparams, void* stream);  /* stream NULL: synchronous */

    /* ---- minor 1: streams and events (HAL_CAP_STREAMS) ---- */
    int (*stream_create)(int dev, void** stream);
    int (*stream_destroy)(int dev, void* stream);
    int (*stream_synchronize)(int dev, void* stream);
    int (*event_create)(int dev, void** event);
    int (*event_destroy)(int dev, void* event);
    int (*event_record)(int dev, void* event, void* stream);   /* stream NULL: the default */
    int (*event_query)(int dev, void* event);   /* HAL_SUCCESS or HAL_ERROR_NOT_READY */

    /* ---- minor 2: memset (HAL_CAP_MEMSET) ---- */
    int (*memset)(int dev, void* dst, int value, size_t bytes);
} hal_backend_ops;

typedef const hal_backend_ops* (*hal_backend_entry_fn)(uint32_t core_major, uint32_t core_minor);

/* The kernel ABI of the cpu backend's modules (a shared library of such functions): called once
   per thread of the grid, params as in hal_backend_ops.launch. */
typedef struct {
    hal_dim3 grid_dim, block_dim, block_idx, thread_idx;
} hal_cpu_thread;
typedef void (*hal_cpu_kernel)(const hal_cpu_thread* t, void** params);
// END CDEF

/* The table's size at each minor: what a backend built against that header has. */
#define HAL_BACKEND_SIZE_MINOR0 (offsetof(hal_backend_ops, launch) + sizeof(void*))
#define HAL_BACKEND_SIZE_MINOR1 (offsetof(hal_backend_ops, event_query) + sizeof(void*))
#define HAL_BACKEND_SIZE_MINOR2 (offsetof(hal_backend_ops, memset) + sizeof(void*))
#define HAL_BACKEND_MIN_SIZE HAL_BACKEND_SIZE_MINOR0

/* What a backend exports (visibility default even under -fvisibility=hidden). */
#define HAL_BACKEND_EXPORT __attribute__((visibility("default")))

#ifdef __cplusplus
}
#endif
