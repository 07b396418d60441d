// vadd_demo.c: an application of the HAL (GIVEN): c = a + b on device 0 through hal.h only.
// argv: MODULE KERNEL N. Prints one JSON line; exits 0 when every element is right.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hal.h"

#define CHECK(call)                                                                         \
    do {                                                                                    \
        hal_status s_ = (call);                                                             \
        if (s_ != HAL_SUCCESS) {                                                            \
            printf("{\"failed\": \"%s\", \"status\": \"%s\", \"last_error\": \"%s\"}\n", #call, \
                   hal_error_name(s_), hal_last_error());                                    \
            return s_ == HAL_ERROR_TODO ? 99 : 2;                                           \
        }                                                                                   \
    } while (0)

int main(int argc, char** argv) {
    if (argc < 4) return 64;
    const char* module_path = argv[1];
    const char* kernel = argv[2];
    int n = atoi(argv[3]);
    CHECK(hal_init());
    int ndev = 0;
    CHECK(hal_device_count(&ndev));
    hal_device_props props;
    CHECK(hal_device_info(0, &props));
    float* a = malloc(n * sizeof(float));
    float* b = malloc(n * sizeof(float));
    float* c = malloc(n * sizeof(float));
    for (int i = 0; i < n; i++) {
        a[i] = (float)i * 0.5f;
        b[i] = (float)(n - i);
        c[i] = -1.0f;
    }
    hal_mem da, db, dc;
    CHECK(hal_mem_alloc(0, n * sizeof(float), &da));
    CHECK(hal_mem_alloc(0, n * sizeof(float), &db));
    CHECK(hal_mem_alloc(0, n * sizeof(float), &dc));
    CHECK(hal_memcpy_htod(da, 0, a, n * sizeof(float)));
    CHECK(hal_memcpy_htod(db, 0, b, n * sizeof(float)));
    hal_module mod;
    hal_function fn;
    CHECK(hal_module_load(0, module_path, &mod));
    CHECK(hal_module_function(mod, kernel, &fn));
    hal_arg args[4] = {
        {HAL_ARG_MEM, 8, da}, {HAL_ARG_MEM, 8, db}, {HAL_ARG_MEM, 8, dc},
        {HAL_ARG_VALUE, 4, (uint64_t)(uint32_t)n},
    };
    hal_dim3 grid = {(unsigned)((n + 127) / 128 > 8 ? 8 : (n + 127) / 128), 1, 1};
    hal_dim3 block = {128, 1, 1};
    hal_stream s;
    hal_event e;
    CHECK(hal_stream_create(0, &s));
    CHECK(hal_event_create(0, &e));
    CHECK(hal_launch(fn, grid, block, args, 4, s));
    CHECK(hal_event_record(e, s));
    CHECK(hal_event_synchronize(e));
    CHECK(hal_memcpy_dtoh(c, dc, 0, n * sizeof(float)));
    int wrong = 0;
    for (int i = 0; i < n; i++) wrong += c[i] != a[i] + b[i];
    CHECK(hal_event_destroy(e));
    CHECK(hal_stream_destroy(s));
    CHECK(hal_module_unload(mod));
    CHECK(hal_mem_free(da));
    CHECK(hal_mem_free(db));
    CHECK(hal_mem_free(dc));
    CHECK(hal_shutdown());
    free(a);
    free(b);
    free(c);
    printf("{\"devices\": %d, \"device\": \"%s\", \"backend\": \"%s\", \"wrong\": %d, \"n\": %d}\n",
           ndev, props.name, props.backend, wrong, n);
    return wrong ? 1 : 0;
}
