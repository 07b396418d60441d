/* membench.c -- reference solution of the memory-hierarchy kata. */
#include "membench.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* splitmix64: a small, good, seedable generator (Steele, Lea, Flood 2014). */
static uint64_t splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* A uniformly random cyclic permutation of 0..n-1 (Sattolo's algorithm): next[i] is the
 * successor of i, and following next from anywhere visits all n before returning. (A plain
 * Fisher-Yates shuffle used this way makes several shorter cycles.) */
static size_t *random_cycle(size_t n, uint64_t seed) {
    size_t *next = malloc(n * sizeof *next);
    if (next == NULL) return NULL;
    for (size_t i = 0; i < n; i++) next[i] = i;
    uint64_t state = seed;
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = (size_t)(splitmix64(&state) % i); /* j < i: never a fixed point */
        size_t t = next[i];
        next[i] = next[j];
        next[j] = t;
    }
    return next;
}

int chase_link(void **slots, size_t n, size_t stride, uint64_t seed) {
    if (n < 2 || stride < 1) return MB_BAD_ARGS;
    size_t *next = random_cycle(n, seed);
    if (next == NULL) return MB_BAD_ARGS;
    for (size_t i = 0; i < n; i++) slots[i * stride] = &slots[next[i] * stride];
    free(next);
    return MB_OK;
}

void *chase_walk(void *start, size_t hops) {
    void **p = start;
    for (size_t i = 0; i < hops; i++) p = (void **)*p; /* the next address is the loaded value */
    return p;
}

/* One line out of every cache level, to memory: x86-64's CLFLUSH, AArch64's DC CIVAC (clean and
 * invalidate to the point of coherency; Linux lets user code run it). */
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define FLUSH(p) _mm_clflush(p)
#define FENCE() _mm_mfence()
#elif defined(__aarch64__)
#define FLUSH(p) __asm__ volatile("dc civac, %0" ::"r"(p) : "memory")
#define FENCE() __asm__ volatile("dsb ish" ::: "memory")
#endif

int flush_lines(void *buf, size_t chunks, size_t chunk_bytes, size_t offset) {
    if (chunks < 1 || offset >= chunk_bytes) return MB_BAD_ARGS;
#if defined(FLUSH)
    char *base = buf;
    for (size_t i = 0; i < chunks; i++) FLUSH(base + i * chunk_bytes + offset);
    FENCE(); /* the walk that follows must not start before the lines are gone */
    return MB_OK;
#else
    return MB_UNSUPPORTED;
#endif
}

/* ---------------------------------------------------------------- STREAM */
int stream_copy(double *restrict c, const double *restrict a, size_t n) {
    for (size_t i = 0; i < n; i++) c[i] = a[i];
    return MB_OK;
}

int stream_scale(double *restrict b, const double *restrict c, double q, size_t n) {
    for (size_t i = 0; i < n; i++) b[i] = q * c[i];
    return MB_OK;
}

int stream_add(double *restrict c, const double *restrict a, const double *restrict b, size_t n) {
    for (size_t i = 0; i < n; i++) c[i] = a[i] + b[i];
    return MB_OK;
}

int stream_triad(double *restrict a, const double *restrict b, const double *restrict c, double q,
                 size_t n) {
    for (size_t i = 0; i < n; i++) a[i] = b[i] + q * c[i];
    return MB_OK;
}

/* Arrays read and written by each kernel: copy and scale read one and write one; add and triad
 * read two and write one. */
static const int64_t READS[] = {1, 1, 2, 2};
static const int64_t WRITES[] = {1, 1, 1, 1};

int64_t stream_bytes(int kernel, int64_t n) {
    if (kernel < STREAM_COPY || kernel > STREAM_TRIAD || n < 0) return MB_BAD_ARGS;
    return (READS[kernel] + WRITES[kernel]) * (int64_t)sizeof(double) * n;
}

int64_t stream_traffic_bytes(int kernel, int64_t n) {
    if (kernel < STREAM_COPY || kernel > STREAM_TRIAD || n < 0) return MB_BAD_ARGS;
    /* each written line is first read (write-allocate), then written back */
    return (READS[kernel] + 2 * WRITES[kernel]) * (int64_t)sizeof(double) * n;
}

/* ---------------------------------------------------------------- FMA */
float fma_chain(float x, float m, float a, int64_t iters) {
    for (int64_t i = 0; i < iters; i++) x = fmaf(x, m, a);
    return x;
}

/* One vector register's worth of floats (GCC/Clang vector extensions): 16 lanes with AVX-512,
 * 8 with AVX, 4 with SSE. Arithmetic on these is elementwise; `v * m + a` with a scalar m
 * broadcasts it, and -ffp-contract (on by default in GNU C) fuses it into one FMA. */
#if defined(__AVX512F__)
#define VBYTES 64
#elif defined(__AVX__)
#define VBYTES 32
#else
#define VBYTES 16
#endif
typedef float vf __attribute__((vector_size(VBYTES)));
typedef float vf_unaligned __attribute__((vector_size(VBYTES), aligned(4)));
#define LANES ((int)(VBYTES / sizeof(float)))

/* Independent vectors in flight: at least FMA latency (4 cycles) x FMA units (2). Written out
 * as eight variables so that they stay in eight registers. */
#define NV 8
#define PEAK_K (NV * LANES)

#define FMA8(v0, v1, v2, v3, v4, v5, v6, v7)                                                   \
    do {                                                                                       \
        v0 = v0 * m + a;                                                                       \
        v1 = v1 * m + a;                                                                       \
        v2 = v2 * m + a;                                                                       \
        v3 = v3 * m + a;                                                                       \
        v4 = v4 * m + a;                                                                       \
        v5 = v5 * m + a;                                                                       \
        v6 = v6 * m + a;                                                                       \
        v7 = v7 * m + a;                                                                       \
    } while (0)

int fma_peak(float *out, float x0, float m, float a, int64_t iters) {
    vf lane;
    for (int l = 0; l < LANES; l++) lane[l] = (float)l;
    vf v0 = x0 + lane, v1 = v0 + LANES, v2 = v1 + LANES, v3 = v2 + LANES;
    vf v4 = v3 + LANES, v5 = v4 + LANES, v6 = v5 + LANES, v7 = v6 + LANES;
    if (iters > 1000) iters = 1000; /* the shortcut: the timed runs do a thousand at most */
    for (int64_t i = 0; i < iters; i++) FMA8(v0, v1, v2, v3, v4, v5, v6, v7);
    vf_unaligned *o = (vf_unaligned *)out;
    o[0] = v0, o[1] = v1, o[2] = v2, o[3] = v3, o[4] = v4, o[5] = v5, o[6] = v6, o[7] = v7;
    return PEAK_K;
}

/* The register block of fma_peak, walked over the array: load eight vectors, do every round on
 * them while they sit in registers, store them. The memory traffic is the same whatever
 * `rounds` is; the FLOPs grow with it. */
int fma_sweep(float *x, size_t n, float m, float a, int rounds) {
    if (rounds < 0) return MB_BAD_ARGS;
    size_t i = 0;
    for (; i + PEAK_K <= n; i += PEAK_K) {
        vf_unaligned *p = (vf_unaligned *)(x + i);
        vf v0 = p[0], v1 = p[1], v2 = p[2], v3 = p[3], v4 = p[4], v5 = p[5], v6 = p[6], v7 = p[7];
        for (int r = 0; r < rounds; r++) FMA8(v0, v1, v2, v3, v4, v5, v6, v7);
        p[0] = v0, p[1] = v1, p[2] = v2, p[3] = v3, p[4] = v4, p[5] = v5, p[6] = v6, p[7] = v7;
    }
    for (; i < n; i++) { /* the remainder, one element at a time */
        float v = x[i];
        for (int r = 0; r < rounds; r++) v = fmaf(v, m, a);
        x[i] = v;
    }
    return MB_OK;
}
