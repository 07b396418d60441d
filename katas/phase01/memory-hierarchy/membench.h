/* membench.h -- the contract between your C kernels and the tests (given: do not edit).
 *
 * The tests allocate every buffer, call your kernels, and do the timing themselves (median of
 * repeats, interleaved with a same-run baseline). Your job is the kernels: what they touch, in
 * which order, and how many independent operations they keep in flight.
 *
 * An unimplemented function returns MB_NOT_IMPLEMENTED (or NULL / NAN where noted); the tests
 * show that as "not started".
 */
#ifndef MEMBENCH_H
#define MEMBENCH_H

#include <stddef.h>
#include <stdint.h>

#define MB_OK 0
#define MB_NOT_IMPLEMENTED -1
#define MB_BAD_ARGS -2
#define MB_UNSUPPORTED -3

/* ---------------------------------------------------------------- pointer chasing
 * Task capacities. Link n slots into ONE random cycle: slot i lives at slots + i * stride
 * (stride counted in pointers, so stride 8 = one slot per 64-byte line); each slot holds the
 * address of the next slot to visit. Every slot is visited once per lap, in a random order that
 * `seed` determines. Returns MB_OK, or MB_BAD_ARGS when n < 2 or stride < 1. */
int chase_link(void **slots, size_t n, size_t stride, uint64_t seed);

/* Tasks capacities and line-size. Follow `hops` pointers starting at `start` (p = *p, hops
 * times) and return where you end up (the tests check it). Each load depends on the one
 * before: that is what makes the time per hop a latency. Returns NULL while unimplemented. */
void *chase_walk(void *start, size_t hops);

/* Task line-size. `buf` holds `chunks` chunks of `chunk_bytes` bytes each. Evict from every
 * level of the cache hierarchy the line that holds byte `offset` of every chunk (x86-64:
 * _mm_clflush from <immintrin.h>; AArch64: the instruction "dc civac"), then wait until the
 * evictions are complete (_mm_mfence; "dsb ish") before returning. The memory's contents do not
 * change. The tests then walk a random pointer chase through the chunks' first words: every hop
 * misses while `offset` shares a line with the first word, and none does once it is past it.
 * Returns MB_OK; MB_BAD_ARGS unless chunks >= 1 and offset < chunk_bytes; MB_UNSUPPORTED on a
 * processor for which you have no user-mode cache flush (the tests then skip). */
int flush_lines(void *buf, size_t chunks, size_t chunk_bytes, size_t offset);

/* ---------------------------------------------------------------- STREAM (task bandwidth)
 * The four STREAM kernels (McCalpin), over n doubles. Each returns MB_OK. */
#define STREAM_COPY 0  /* c[i] = a[i]            */
#define STREAM_SCALE 1 /* b[i] = q * c[i]        */
#define STREAM_ADD 2   /* c[i] = a[i] + b[i]     */
#define STREAM_TRIAD 3 /* a[i] = b[i] + q * c[i] */

int stream_copy(double *c, const double *a, size_t n);
int stream_scale(double *b, const double *c, double q, size_t n);
int stream_add(double *c, const double *a, const double *b, size_t n);
int stream_triad(double *a, const double *b, const double *c, double q, size_t n);

/* Bytes that STREAM reports for one call of `kernel` over n elements: each array read or
 * written once, 8 bytes per element. Returns MB_BAD_ARGS for an unknown kernel or n < 0. */
int64_t stream_bytes(int kernel, int64_t n);

/* Bytes that actually cross the memory bus on a write-allocate cache: a store to a line that is
 * not in cache first reads it (a "read for ownership"), so each written array costs twice.
 * Returns MB_BAD_ARGS for an unknown kernel or n < 0. */
int64_t stream_traffic_bytes(int kernel, int64_t n);

/* ---------------------------------------------------------------- FMA (task peak-flops)
 * One dependent chain: x = x * m + a, `iters` times; returns x. Each step needs the one before,
 * so only one FMA is in flight: this runs at the FMA *latency*. Returns NAN while unimplemented. */
float fma_chain(float x, float m, float a, int64_t iters);

#define FMA_MAX_ACCUMULATORS 256

/* K independent chains (you choose K, 1 <= K <= FMA_MAX_ACCUMULATORS): chain k starts at
 * x0 + k and runs x = x * m + a, `iters` times; its final value goes to out[k]. Returns K.
 * Enough independent chains, each a vector lane, keep every FMA unit busy every cycle: this
 * runs at the FMA *throughput*, the core's peak. 2 FLOPs per FMA: 2 * K * iters FLOPs. */
int fma_peak(float *out, float x0, float m, float a, int64_t iters);

/* ---------------------------------------------------------------- task your-roofline
 * For every element, `rounds` FMAs x[i] = x[i] * m + a, in place: 2 * rounds FLOPs per element
 * against 8 bytes (one 4-byte load, one 4-byte store), so arithmetic intensity = rounds / 4
 * FLOP/byte. Few rounds: memory-bound; many: compute-bound. Returns MB_OK, or MB_BAD_ARGS for
 * rounds < 0. */
int fma_sweep(float *x, size_t n, float m, float a, int rounds);

#endif /* MEMBENCH_H */
