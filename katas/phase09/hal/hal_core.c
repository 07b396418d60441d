// hal_core.c: the HAL core. YOU WRITE THIS.
//
// hal.h is the API applications call; hal_backend.h is the ABI backends export. The README's
// tasks say what each part must do, in order: the loader (discovery on KATA_HAL_PATH, dlopen
// with RTLD_LOCAL, the entry symbol, the ABI checks, a crash-proof init), then memory, modules
// and launches through the handles, then capability negotiation (stream emulation, the
// previous minor's tables), priority and fallback, then the locks.
//
// Every function below answers HAL_ERROR_TODO until you write it ("not started" in the tests).
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hal_backend.h"

const char* hal_error_name(hal_status status) {
    (void)status;
    return "TODO: hal_error_name";
}

const char* hal_error_string(hal_status status) {
    (void)status;
    return "TODO: hal_error_string";
}

const char* hal_last_error(void) {
    return "TODO: hal_last_error";
}

hal_status hal_init(void) {
    return HAL_ERROR_TODO;
}

hal_status hal_shutdown(void) {
    return HAL_ERROR_TODO;
}

hal_status hal_backend_count(int* count) {
    (void)count;
    return HAL_ERROR_TODO;
}

hal_status hal_backend_info(int index, hal_backend_props* info) {
    (void)index;
    (void)info;
    return HAL_ERROR_TODO;
}

hal_status hal_device_count(int* count) {
    (void)count;
    return HAL_ERROR_TODO;
}

hal_status hal_device_info(int device, hal_device_props* info) {
    (void)device;
    (void)info;
    return HAL_ERROR_TODO;
}

hal_status hal_mem_alloc(int device, size_t bytes, hal_mem* mem) {
    (void)device;
    (void)bytes;
    (void)mem;
    return HAL_ERROR_TODO;
}

hal_status hal_mem_free(hal_mem mem) {
    (void)mem;
    return HAL_ERROR_TODO;
}

hal_status hal_mem_size(hal_mem mem, size_t* bytes) {
    (void)mem;
    (void)bytes;
    return HAL_ERROR_TODO;
}

hal_status hal_memcpy_htod(hal_mem dst, size_t offset, const void* src, size_t bytes) {
    (void)dst;
    (void)offset;
    (void)src;
    (void)bytes;
    return HAL_ERROR_TODO;
}

hal_status hal_memcpy_dtoh(void* dst, hal_mem src, size_t offset, size_t bytes) {
    (void)dst;
    (void)src;
    (void)offset;
    (void)bytes;
    return HAL_ERROR_TODO;
}

hal_status hal_memset(hal_mem dst, size_t offset, int value, size_t bytes) {
    (void)dst;
    (void)offset;
    (void)value;
    (void)bytes;
    return HAL_ERROR_TODO;
}

hal_status hal_module_load(int device, const char* path, hal_module* module) {
    (void)device;
    (void)path;
    (void)module;
    return HAL_ERROR_TODO;
}

hal_status hal_module_unload(hal_module module) {
    (void)module;
    return HAL_ERROR_TODO;
}

hal_status hal_module_function(hal_module module, const char* name, hal_function* function) {
    (void)module;
    (void)name;
    (void)function;
    return HAL_ERROR_TODO;
}

hal_status hal_launch(hal_function function, hal_dim3 grid, hal_dim3 block, const hal_arg* args, int nargs, hal_stream stream) {
    (void)function;
    (void)grid;
    (void)block;
    (void)args;
    (void)nargs;
    (void)stream;
    return HAL_ERROR_TODO;
}

hal_status hal_stream_create(int device, hal_stream* stream) {
    (void)device;
    (void)stream;
    return HAL_ERROR_TODO;
}

hal_status hal_stream_destroy(hal_stream stream) {
    (void)stream;
    return HAL_ERROR_TODO;
}

hal_status hal_stream_synchronize(hal_stream stream) {
    (void)stream;
    return HAL_ERROR_TODO;
}

hal_status hal_event_create(int device, hal_event* event) {
    (void)device;
    (void)event;
    return HAL_ERROR_TODO;
}

hal_status hal_event_destroy(hal_event event) {
    (void)event;
    return HAL_ERROR_TODO;
}

hal_status hal_event_record(hal_event event, hal_stream stream) {
    (void)event;
    (void)stream;
    return HAL_ERROR_TODO;
}

hal_status hal_event_query(hal_event event) {
    (void)event;
    return HAL_ERROR_TODO;
}

hal_status hal_event_synchronize(hal_event event) {
    (void)event;
    return HAL_ERROR_TODO;
}
