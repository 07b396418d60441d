// stress.c: threads hammering the HAL (GIVEN), for ThreadSanitizer. argv: MODULE THREADS ROUNDS.
// Several threads call hal_init at once, then each allocates, copies, launches "inc" on a stream
// of its own, records and queries events and frees, while one thread keeps listing devices.
// Exits 0 when every thread saw only its own data.
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hal.h"

static const char* g_module;
static int g_rounds;
static int g_failed;
static pthread_barrier_t g_start, g_round;

static void* worker(void* arg) {
    int t = (int)(long)arg;
    pthread_barrier_wait(&g_start);
    hal_module m;
    hal_function f;
    if (hal_init() != HAL_SUCCESS || hal_module_load(0, g_module, &m) ||
        hal_module_function(m, "inc", &f)) {
        __sync_fetch_and_add(&g_failed, 1);
        for (int r = 0; r < g_rounds; r++) pthread_barrier_wait(&g_round);  // keep the others going
        return NULL;
    }
    hal_stream s;
    hal_event e;
    hal_stream_create(0, &s);
    hal_event_create(0, &e);
    int host[64];
    for (int r = 0; r < g_rounds; r++) {
        hal_mem x;
        if (hal_mem_alloc(0, sizeof host, &x) != HAL_SUCCESS) {
            __sync_fetch_and_add(&g_failed, 1);
            break;
        }
        for (int i = 0; i < 64; i++) host[i] = t * 1000 + r;
        hal_memcpy_htod(x, 0, host, sizeof host);
        hal_arg args[2] = {{HAL_ARG_MEM, 8, x}, {HAL_ARG_VALUE, 4, 64}};
        hal_dim3 g = {2, 1, 1}, b = {32, 1, 1};
        hal_launch(f, g, b, args, 2, r % 2 ? s : 0);
        hal_event_record(e, s);
        hal_event_query(e);
        hal_event_synchronize(e);
        memset(host, 0, sizeof host);
        hal_memcpy_dtoh(host, x, 0, sizeof host);
        for (int i = 0; i < 64; i++)
            if (host[i] != t * 1000 + r + 1) {
                __sync_fetch_and_add(&g_failed, 1);
                break;
            }
        hal_mem_free(x);
        int n;
        hal_device_count(&n);
        (void)hal_last_error();
    }
    // Churn: half the threads read (copies, sizes) while the others allocate and free, so that
    // every reader runs while the handle table grows under it.
    hal_mem mine;
    hal_mem_alloc(0, 64, &mine);
    for (int r = 0; r < g_rounds; r++) {
        // Every thread starts its call of this round together: readers and writers are then
        // unordered (ThreadSanitizer sees a race whatever the machine's load decides).
        pthread_barrier_wait(&g_round);
        if (t % 2) {
            size_t n;
            hal_memcpy_dtoh(host, mine, 0, 16);
            hal_memcpy_htod(mine, 0, host, 16);
            hal_mem_size(mine, &n);
        } else {
            hal_mem x;
            if (hal_mem_alloc(0, 8, &x) == HAL_SUCCESS) hal_mem_free(x);
        }
    }
    hal_mem_free(mine);
    hal_event_destroy(e);
    hal_stream_destroy(s);
    hal_module_unload(m);
    return NULL;
}

int main(int argc, char** argv) {
    if (argc < 4) return 64;
    if (hal_init() == HAL_ERROR_TODO) return 99;  // a stub: not started
    hal_shutdown();
    g_module = argv[1];
    int n = atoi(argv[2]);
    g_rounds = atoi(argv[3]);
    pthread_t th[64];
    pthread_barrier_init(&g_start, NULL, n);
    pthread_barrier_init(&g_round, NULL, n);
    for (int i = 0; i < n; i++) pthread_create(&th[i], NULL, worker, (void*)(long)i);
    for (int i = 0; i < n; i++) pthread_join(th[i], NULL);
    hal_shutdown();
    printf("{\"failed\": %d}\n", g_failed);
    return g_failed ? 1 : 0;
}
