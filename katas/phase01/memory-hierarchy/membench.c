/* membench.c -- YOUR FILE: the microbenchmark kernels of the memory-hierarchy kata.
 *
 * membench.h (given) says what each function must do; README.md says why. The tests build this
 * file with `gcc -O2 -march=native`, call your functions through cffi, and time them. Replace
 * each `return MB_NOT_IMPLEMENTED;` (or NULL / NAN) with an implementation; the tests of a task
 * show "not started" until its functions return something else.
 */
#include "membench.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- pointer chasing
 * Task capacities: chase_link, chase_walk. Task line-size: flush_lines (and chase_walk). */

int chase_link(void **slots, size_t n, size_t stride, uint64_t seed) {
    (void)slots, (void)n, (void)stride, (void)seed;
    return MB_NOT_IMPLEMENTED; /* one random cycle through all n slots: see README, "Sattolo" */
}

void *chase_walk(void *start, size_t hops) {
    (void)start, (void)hops;
    return NULL; /* p = *p, hops times */
}

int flush_lines(void *buf, size_t chunks, size_t chunk_bytes, size_t offset) {
    (void)buf, (void)chunks, (void)chunk_bytes, (void)offset;
    return MB_NOT_IMPLEMENTED; /* evict the line of byte `offset` of every chunk, then a fence */
}

/* ---------------------------------------------------------------- STREAM (task bandwidth) */

int stream_copy(double *c, const double *a, size_t n) {
    (void)c, (void)a, (void)n;
    return MB_NOT_IMPLEMENTED;
}

int stream_scale(double *b, const double *c, double q, size_t n) {
    (void)b, (void)c, (void)q, (void)n;
    return MB_NOT_IMPLEMENTED;
}

int stream_add(double *c, const double *a, const double *b, size_t n) {
    (void)c, (void)a, (void)b, (void)n;
    return MB_NOT_IMPLEMENTED;
}

int stream_triad(double *a, const double *b, const double *c, double q, size_t n) {
    (void)a, (void)b, (void)c, (void)q, (void)n;
    return MB_NOT_IMPLEMENTED;
}

int64_t stream_bytes(int kernel, int64_t n) {
    (void)kernel, (void)n;
    return MB_NOT_IMPLEMENTED;
}

int64_t stream_traffic_bytes(int kernel, int64_t n) {
    (void)kernel, (void)n;
    return MB_NOT_IMPLEMENTED;
}

/* ---------------------------------------------------------------- FMA (task peak-flops) */

float fma_chain(float x, float m, float a, int64_t iters) {
    (void)x, (void)m, (void)a, (void)iters;
    return NAN;
}

int fma_peak(float *out, float x0, float m, float a, int64_t iters) {
    (void)out, (void)x0, (void)m, (void)a, (void)iters;
    return MB_NOT_IMPLEMENTED;
}

/* ---------------------------------------------------------------- task your-roofline */

int fma_sweep(float *x, size_t n, float m, float a, int rounds) {
    (void)x, (void)n, (void)m, (void)a, (void)rounds;
    return MB_NOT_IMPLEMENTED;
}
