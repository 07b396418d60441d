// hal.h: the HAL's public API, what applications call (GIVEN: do not edit).
//
// One C API over every backend: discover devices, allocate and copy memory, load a module,
// launch a kernel, order work on streams and events, say what went wrong. Every function
// returns a hal_status; handles are 64-bit ids that the core hands out (0 is never a valid
// handle), checked on every call, and never reused, so a freed or stale handle is
// HAL_ERROR_INVALID_HANDLE, never a crash. Every function is thread-safe.
//
// halpy.py hands the text between the CDEF markers to cffi's cdef: keep that part plain C.
#pragma once
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HAL_ABI_MAJOR 1 /* the plugin ABI this core speaks (hal_backend.h) */
#define HAL_ABI_MINOR 2

// BEGIN CDEF
typedef enum {
    HAL_SUCCESS = 0,
    HAL_ERROR_INVALID_VALUE = 1,     /* a bad argument: a NULL out pointer, a copy past the end,
                                        a hal_arg of another kind or size, a live buffer or
                                        stream of another device than the kernel's or event's */
    HAL_ERROR_NOT_INITIALIZED = 2,   /* called before hal_init (or after hal_shutdown) */
    HAL_ERROR_NO_BACKEND = 3,        /* hal_init found no backend that loads and initialises */
    HAL_ERROR_OUT_OF_MEMORY = 4,
    HAL_ERROR_INVALID_HANDLE = 5,    /* 0, freed, stale, or a handle of another kind (a live
                                        handle of the right kind on another device: INVALID_VALUE) */
    HAL_ERROR_INVALID_DEVICE = 6,    /* a device index out of range */
    HAL_ERROR_NOT_SUPPORTED = 7,     /* the device's backend lacks the entry point */
    HAL_ERROR_NOT_FOUND = 8,         /* a module file or a kernel name */
    HAL_ERROR_LAUNCH_FAILED = 9,
    HAL_ERROR_NOT_READY = 10,        /* hal_event_query: recorded work not finished yet */
    HAL_ERROR_BACKEND_LOAD = 11,     /* a backend: dlopen failed, or no hal_backend_entry symbol */
    HAL_ERROR_ABI_MISMATCH = 12,     /* a backend: hal_backend_entry returned NULL (it refuses this
                                        core's version), another ABI major, or its table is
                                        smaller than HAL_BACKEND_MIN_SIZE */
    HAL_ERROR_BACKEND_INIT = 13,     /* a backend: its init returned an error */
    HAL_ERROR_BACKEND_CRASHED = 14,  /* a backend: its init died of a signal, or did not return
                                        within $KATA_HAL_PROBE_TIMEOUT_S seconds (default 10) */
    HAL_ERROR_TODO = 99              /* the stubs' answer: not written yet */
} hal_status;

#define HAL_STATUS_COUNT 15

typedef uint64_t hal_mem;
typedef uint64_t hal_module;
typedef uint64_t hal_function;
typedef uint64_t hal_stream;  /* 0: the default stream (synchronous) */
typedef uint64_t hal_event;

typedef struct {
    uint32_t x, y, z;
} hal_dim3;

/* Capability bits: what a backend declares (hal_backend_ops.caps) and what a device offers
   after negotiation (hal_device_props.caps). */
enum {
    HAL_CAP_STREAMS = 1,           /* streams and events run by the backend itself */
    HAL_CAP_MEMSET = 2,            /* hal_memset */
    HAL_CAP_THREADSAFE = 4,        /* the backend may be entered by several threads at once */
    HAL_CAP_EMULATED_STREAMS = 8   /* devices only: the core runs streams and events itself */
};

typedef struct {
    char name[64];        /* the backend's name for the device ("" without device_info) */
    char backend[32];     /* the backend's name (hal_backend_ops.name) */
    int32_t priority;     /* the backend's priority */
    uint32_t caps;        /* negotiated: HAL_CAP_STREAMS or HAL_CAP_EMULATED_STREAMS, MEMSET, THREADSAFE */
    uint64_t total_mem;   /* bytes (0 without device_info) */
    int32_t backend_index;  /* index for hal_backend_info() */
    int32_t backend_device; /* the device's index inside its backend */
} hal_device_props;

/* A backend hal_init found on KATA_HAL_PATH, loaded or refused. */
typedef struct {
    char path[512];       /* the file, as found on the path */
    char name[32];        /* hal_backend_ops.name; "" when refused before the table was read */
    uint32_t abi_major, abi_minor, struct_size;   /* from its table (0 when not read) */
    int32_t priority;
    int32_t status;       /* HAL_SUCCESS when loaded, else why not (a HAL_ERROR_BACKEND_* or ABI_MISMATCH) */
    int32_t ndevices;     /* devices it contributes (0 when refused) */
    char message[256];    /* why it was refused: a sentence naming the file and the reason */
} hal_backend_props;

/* A kernel argument: a device buffer (kind HAL_ARG_MEM, mem = the handle, passed to the kernel
   as the buffer's device pointer) or a value of `size` bytes (1, 2, 4 or 8) stored in `value`. */
enum { HAL_ARG_MEM = 0, HAL_ARG_VALUE = 1 };
typedef struct {
    uint32_t kind;
    uint32_t size;
    uint64_t value;   /* HAL_ARG_MEM: the hal_mem; HAL_ARG_VALUE: the bytes, little end first */
} hal_arg;

/* ------------------------------------------------------------------ status and errors */
const char* hal_error_name(hal_status status);    /* "HAL_ERROR_INVALID_VALUE"; never NULL */
const char* hal_error_string(hal_status status);  /* a sentence; never NULL, even for unknown codes */
const char* hal_last_error(void);  /* this thread's last failure, in words ("" when none) */

/* ------------------------------------------------------------------ lifetime and discovery */
hal_status hal_init(void);       /* load the backends on $KATA_HAL_PATH; again: no-op */
hal_status hal_shutdown(void);   /* free everything, shut the backends down, dlclose them */
hal_status hal_backend_count(int* count);
hal_status hal_backend_info(int index, hal_backend_props* info);
hal_status hal_device_count(int* count);
hal_status hal_device_info(int device, hal_device_props* info);

/* ------------------------------------------------------------------ memory */
hal_status hal_mem_alloc(int device, size_t bytes, hal_mem* mem);  /* bytes > 0 */
hal_status hal_mem_free(hal_mem mem);
hal_status hal_mem_size(hal_mem mem, size_t* bytes);
hal_status hal_memcpy_htod(hal_mem dst, size_t offset, const void* src, size_t bytes);
hal_status hal_memcpy_dtoh(void* dst, hal_mem src, size_t offset, size_t bytes);
hal_status hal_memset(hal_mem dst, size_t offset, int value, size_t bytes);

/* ------------------------------------------------------------------ modules and kernels */
hal_status hal_module_load(int device, const char* path, hal_module* module);
hal_status hal_module_unload(hal_module module);   /* its functions become invalid */
hal_status hal_module_function(hal_module module, const char* name, hal_function* function);
hal_status hal_launch(hal_function function, hal_dim3 grid, hal_dim3 block,
                      const hal_arg* args, int nargs, hal_stream stream);

/* ------------------------------------------------------------------ streams and events */
hal_status hal_stream_create(int device, hal_stream* stream);
hal_status hal_stream_destroy(hal_stream stream);      /* waits for its work first */
hal_status hal_stream_synchronize(hal_stream stream);  /* 0: the device work of every stream */
hal_status hal_event_create(int device, hal_event* event);
hal_status hal_event_destroy(hal_event event);
hal_status hal_event_record(hal_event event, hal_stream stream);
hal_status hal_event_query(hal_event event);        /* HAL_SUCCESS or HAL_ERROR_NOT_READY */
hal_status hal_event_synchronize(hal_event event);
// END CDEF

#ifdef __cplusplus
}
#endif
