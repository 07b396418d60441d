// kata_cuda.h: the CUDA device API on the CPU, for harness.cuda's cpu backend.
//
// The learner's .cu file is compiled as C++ after this header. Blocks run one after another, so a
// function-local `static` is one copy per block: that is what __shared__ becomes. The threads of
// a block are fibers of runtime.cpp; __syncthreads and the warp collectives switch between them.
#pragma once
#include <cassert>
#include <cfloat>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <tuple>
#include <type_traits>
#include <utility>

#include "kata_cuda_types.h"

#define KATA_CPU_BACKEND 1
#ifndef __CUDACC__
#define __CUDACC__ 1
#endif
#ifndef __CUDA_ARCH__
#define __CUDA_ARCH__ 700
#endif

#define __global__
#define __device__
#define __host__
// Static __shared__ arrays go to a section of their own, so that the runtime can fill them with
// garbage (0x7f bytes: 3.4e38, 2139062143) before each block, as a GPU keeps no promise about their contents.
#define __shared__ __attribute__((section("kata_shared"))) static
#define __constant__
#define __managed__
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
#define __align__(n) alignas(n)
#define __grid_constant__

static const int warpSize = 32;

// ---------------------------------------------------------------- vector types
#define KATA_VEC2(T, N, A)                                                           \
    struct alignas(A) N##2 { T x, y; };                                              \
    static inline N##2 make_##N##2(T x, T y) { return N##2{x, y}; }
#define KATA_VEC3(T, N)                                                              \
    struct N##3 { T x, y, z; };                                                      \
    static inline N##3 make_##N##3(T x, T y, T z) { return N##3{x, y, z}; }
#define KATA_VEC4(T, N, A)                                                           \
    struct alignas(A) N##4 { T x, y, z, w; };                                        \
    static inline N##4 make_##N##4(T x, T y, T z, T w) { return N##4{x, y, z, w}; }
KATA_VEC2(float, float, 8)
KATA_VEC3(float, float)
KATA_VEC4(float, float, 16)
KATA_VEC2(int, int, 8)
KATA_VEC3(int, int)
KATA_VEC4(int, int, 16)
KATA_VEC2(unsigned, uint, 8)
KATA_VEC4(unsigned, uint, 16)
KATA_VEC2(double, double, 16)
KATA_VEC4(double, double, 16)
KATA_VEC2(long long, longlong, 16)
KATA_VEC4(signed char, char, 4)
KATA_VEC4(unsigned char, uchar, 4)
KATA_VEC2(short, short, 4)
static inline uint3 make_uint3(unsigned x, unsigned y, unsigned z) { return uint3{x, y, z}; }

// ---------------------------------------------------------------- integer and float intrinsics
// glibc declares some of CUDA's fast-math names (__expf ...) itself: those become macros.
static inline int min(int a, int b) { return a < b ? a : b; }
static inline int max(int a, int b) { return a > b ? a : b; }
static inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
static inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
static inline unsigned min(int a, unsigned b) { return min((unsigned)a, b); }
static inline unsigned min(unsigned a, int b) { return min(a, (unsigned)b); }
static inline unsigned max(int a, unsigned b) { return max((unsigned)a, b); }
static inline unsigned max(unsigned a, int b) { return max(a, (unsigned)b); }
static inline long long min(long long a, long long b) { return a < b ? a : b; }
static inline long long max(long long a, long long b) { return a > b ? a : b; }
static inline unsigned long long min(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
static inline unsigned long long max(unsigned long long a, unsigned long long b) { return a > b ? a : b; }
static inline float min(float a, float b) { return fminf(a, b); }
static inline float max(float a, float b) { return fmaxf(a, b); }
static inline double min(double a, double b) { return fmin(a, b); }
static inline double max(double a, double b) { return fmax(a, b); }

static inline int __popc(unsigned x) { return __builtin_popcount(x); }
static inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
static inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz((unsigned)x); }
static inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll((unsigned long long)x); }
static inline int __ffs(int x) { return __builtin_ffs(x); }
static inline int __ffsll(long long x) { return __builtin_ffsll(x); }
static inline unsigned __brev(unsigned x) {
    x = ((x >> 1) & 0x55555555u) | ((x & 0x55555555u) << 1);
    x = ((x >> 2) & 0x33333333u) | ((x & 0x33333333u) << 2);
    x = ((x >> 4) & 0x0F0F0F0Fu) | ((x & 0x0F0F0F0Fu) << 4);
    x = ((x >> 8) & 0x00FF00FFu) | ((x & 0x00FF00FFu) << 8);
    return (x >> 16) | (x << 16);
}
static inline int __mul24(int a, int b) { return a * b; }
static inline unsigned __umul24(unsigned a, unsigned b) { return a * b; }
static inline int __mulhi(int a, int b) { return (int)(((long long)a * b) >> 32); }
static inline unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)(((unsigned long long)a * b) >> 32); }
static inline float __int_as_float(int x) { float f; std::memcpy(&f, &x, 4); return f; }
static inline int __float_as_int(float f) { int x; std::memcpy(&x, &f, 4); return x; }
static inline float __uint_as_float(unsigned x) { float f; std::memcpy(&f, &x, 4); return f; }
static inline unsigned __float_as_uint(float f) { unsigned x; std::memcpy(&x, &f, 4); return x; }
static inline double __longlong_as_double(long long x) { double d; std::memcpy(&d, &x, 8); return d; }
static inline long long __double_as_longlong(double d) { long long x; std::memcpy(&x, &d, 8); return x; }
#define __expf(x) expf(x)
#define __logf(x) logf(x)
#define __log2f(x) log2f(x)
#define __sinf(x) sinf(x)
#define __cosf(x) cosf(x)
#define __tanf(x) tanf(x)
#define __powf(x, y) powf(x, y)
static inline float __fdividef(float x, float y) { return x / y; }
static inline float __fmul_rn(float x, float y) { return x * y; }
static inline float __fadd_rn(float x, float y) { return x + y; }
static inline float __fmaf_rn(float x, float y, float z) { return fmaf(x, y, z); }
static inline float __saturatef(float x) { return x < 0.f ? 0.f : (x > 1.f ? 1.f : x); }
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
static inline double rsqrt(double x) { return 1.0 / sqrt(x); }
static inline int __float2int_rn(float x) { return (int)nearbyintf(x); }
static inline int __float2int_rz(float x) { return (int)x; }
static inline float __int2float_rn(int x) { return (float)x; }
static inline void kata_sincosf(float x, float* s, float* c) { *s = sinf(x); *c = cosf(x); }
#define __sincosf kata_sincosf

template <typename T>
static inline T __ldg(const T* p) { return *p; }
static inline void __threadfence() {}
static inline void __threadfence_block() {}
static inline void __threadfence_system() {}
static inline void __nanosleep(unsigned) {}
static inline unsigned long long clock64() { return kata_clock64(); }
#define __trap() kata_trap(__LINE__)

// ---------------------------------------------------------------- atomics
// Fibers run on one OS thread and switch only at barriers, warp collectives and (in traced
// builds, the "preempt" schedule) at memory accesses, so a plain read-modify-write is atomic here
// as long as traced builds do not instrument it: no inlining, no coverage or tsan callbacks.
#if defined(KATA_TRACE_BUILD) && defined(__clang__)
#define KATA_ATOMIC static __attribute__((noinline, no_sanitize("coverage")))
#elif defined(KATA_TRACE_BUILD)
#define KATA_ATOMIC static __attribute__((noinline, no_sanitize_thread))
#else
#define KATA_ATOMIC static inline
#endif
// Traced builds note each atomic's address (and the kernel's instruction: the caller's address).
#ifdef KATA_TRACE_BUILD
extern "C" void kata_trace_atomic(void* pc, const void* p, unsigned size);
#define KATA_NOTE(p) kata_trace_atomic(__builtin_return_address(0), (p), sizeof(*(p)))
#else
#define KATA_NOTE(p) ((void)0)
#endif
template <typename T> KATA_ATOMIC T atomicAdd(T* p, T v) { KATA_NOTE(p); T o = *p; *p = o + v; return o; }
template <typename T> KATA_ATOMIC T atomicSub(T* p, T v) { KATA_NOTE(p); T o = *p; *p = o - v; return o; }
template <typename T> KATA_ATOMIC T atomicExch(T* p, T v) { KATA_NOTE(p); T o = *p; *p = v; return o; }
template <typename T> KATA_ATOMIC T atomicMin(T* p, T v) { KATA_NOTE(p); T o = *p; *p = v < o ? v : o; return o; }
template <typename T> KATA_ATOMIC T atomicMax(T* p, T v) { KATA_NOTE(p); T o = *p; *p = v > o ? v : o; return o; }
template <typename T> KATA_ATOMIC T atomicAnd(T* p, T v) { KATA_NOTE(p); T o = *p; *p = o & v; return o; }
template <typename T> KATA_ATOMIC T atomicOr(T* p, T v) { KATA_NOTE(p); T o = *p; *p = o | v; return o; }
template <typename T> KATA_ATOMIC T atomicXor(T* p, T v) { KATA_NOTE(p); T o = *p; *p = o ^ v; return o; }
template <typename T> KATA_ATOMIC T atomicCAS(T* p, T cmp, T v) { KATA_NOTE(p); T o = *p; if (o == cmp) *p = v; return o; }
KATA_ATOMIC unsigned atomicInc(unsigned* p, unsigned v) { KATA_NOTE(p); unsigned o = *p; *p = o >= v ? 0 : o + 1; return o; }
KATA_ATOMIC unsigned atomicDec(unsigned* p, unsigned v) { KATA_NOTE(p); unsigned o = *p; *p = (o == 0 || o > v) ? v : o - 1; return o; }
// Mixed argument types, as CUDA code writes them: atomicAdd(&count[i], 1) on unsigned counters.
static inline unsigned atomicAdd(unsigned* p, int v) { return atomicAdd<unsigned>(p, (unsigned)v); }
static inline unsigned long long atomicAdd(unsigned long long* p, int v) { return atomicAdd<unsigned long long>(p, (unsigned long long)v); }
static inline float atomicAdd(float* p, double v) { return atomicAdd<float>(p, (float)v); }
static inline unsigned atomicSub(unsigned* p, int v) { return atomicSub<unsigned>(p, (unsigned)v); }
#define atomicAdd_block atomicAdd
#define atomicAdd_system atomicAdd

// ---------------------------------------------------------------- barriers and warp collectives
#define __syncthreads() kata_syncthreads(__LINE__)
#define __syncthreads_count(p) kata_syncthreads_op(__LINE__, 0, (p) ? 1 : 0)
#define __syncthreads_and(p) kata_syncthreads_op(__LINE__, 1, (p) ? 1 : 0)
#define __syncthreads_or(p) kata_syncthreads_op(__LINE__, 2, (p) ? 1 : 0)

static inline void kata_syncwarp(int line, unsigned mask = 0xffffffffu) {
    kata_warp_op(line, KATA_WOP_SYNC, mask, 0, 0, 32);
}
#define __syncwarp(...) kata_syncwarp(__LINE__, ##__VA_ARGS__)

template <typename T>
static inline T kata_shfl(int line, int op, unsigned mask, T var, int arg, int width = 32) {
    static_assert(sizeof(T) <= 8, "warp shuffles move at most 8 bytes");
    uint64_t bits = 0;
    std::memcpy(&bits, &var, sizeof(T));
    bits = kata_warp_op(line, op, mask, bits, arg, width);
    T out;
    std::memcpy(&out, &bits, sizeof(T));
    return out;
}
#define __shfl_sync(mask, var, ...) kata_shfl(__LINE__, KATA_WOP_SHFL, (mask), (var), __VA_ARGS__)
#define __shfl_up_sync(mask, var, ...) kata_shfl(__LINE__, KATA_WOP_SHFL_UP, (mask), (var), __VA_ARGS__)
#define __shfl_down_sync(mask, var, ...) kata_shfl(__LINE__, KATA_WOP_SHFL_DOWN, (mask), (var), __VA_ARGS__)
#define __shfl_xor_sync(mask, var, ...) kata_shfl(__LINE__, KATA_WOP_SHFL_XOR, (mask), (var), __VA_ARGS__)
#define __ballot_sync(mask, p) ((unsigned)kata_warp_op(__LINE__, KATA_WOP_BALLOT, (mask), (p) ? 1 : 0, 0, 32))
#define __any_sync(mask, p) ((int)kata_warp_op(__LINE__, KATA_WOP_ANY, (mask), (p) ? 1 : 0, 0, 32))
#define __all_sync(mask, p) ((int)kata_warp_op(__LINE__, KATA_WOP_ALL, (mask), (p) ? 1 : 0, 0, 32))
#define __activemask() ((unsigned)kata_warp_op(__LINE__, KATA_WOP_ACTIVEMASK, 0, 0, 0, 32))
#define __reduce_add_sync(mask, v) ((unsigned)kata_warp_op(__LINE__, KATA_WOP_REDUCE_ADD, (mask), (uint64_t)(unsigned)(v), 0, 32))
#define __reduce_min_sync(mask, v) ((unsigned)kata_warp_op(__LINE__, KATA_WOP_REDUCE_MIN, (mask), (uint64_t)(unsigned)(v), 0, 32))
#define __reduce_max_sync(mask, v) ((unsigned)kata_warp_op(__LINE__, KATA_WOP_REDUCE_MAX, (mask), (uint64_t)(unsigned)(v), 0, 32))

// ---------------------------------------------------------------- launch glue (used by the
// trampolines harness.cuda appends after the learner's source)
namespace kata {
enum { K_INT = 0, K_UINT = 1, K_FLOAT = 2, K_POINTER = 3, K_OTHER = 4, K_BOOL = 5 };
template <typename T>
constexpr int kind_of() {
    using U = std::remove_cv_t<std::remove_reference_t<T>>;
    return std::is_pointer<U>::value ? K_POINTER
           : std::is_same<U, bool>::value ? K_BOOL
           : std::is_floating_point<U>::value ? K_FLOAT
           : std::is_integral<U>::value ? (std::is_signed<U>::value ? K_INT : K_UINT)
                                        : K_OTHER;
}
template <typename... A>
int describe(void (*)(A...), int* sizes, int* kinds, int cap) {
    const int s[] = {0, (int)sizeof(std::remove_reference_t<A>)...};
    const int k[] = {0, kind_of<A>()...};
    const int n = (int)sizeof...(A);
    for (int i = 0; i < n && i < cap; ++i) {
        sizes[i] = s[i + 1];
        kinds[i] = k[i + 1];
    }
    return n;
}
template <typename... A, std::size_t... I>
void invoke_impl(void (*f)(A...), void** args, std::index_sequence<I...>) {
    f(*static_cast<std::remove_cv_t<std::remove_reference_t<A>>*>(args[I])...);
}
template <typename... A>
void invoke(void (*f)(A...), void** args) {
    invoke_impl(f, args, std::index_sequence_for<A...>{});
}
// All threads of a block without fibers (kernels with no barrier or warp collective): the
// arguments are unpacked once and the kernel is called in a loop the compiler can inline it
// into, instead of one call through the launch glue per thread. `order` NULL: forward.
template <typename T>
struct arg_cell {
    using type = std::remove_cv_t<std::remove_reference_t<T>>;
};
template <typename... A, std::size_t... I>
void run_threads_impl(void (*f)(A...), void** args, const unsigned* order, unsigned n,
                      std::index_sequence<I...>) {
    (void)args;
    const auto cells = std::make_tuple(*static_cast<typename arg_cell<A>::type*>(args[I])...);
    const unsigned bx = blockDim.x, by = blockDim.y;
    const bool flat = by == 1 && blockDim.z == 1;
    for (unsigned i = 0; i < n; ++i) {
        const unsigned t = order ? order[i] : i;
        if (flat) {
            threadIdx.x = t;
            threadIdx.y = 0;
            threadIdx.z = 0;
        } else {
            threadIdx.x = t % bx;
            threadIdx.y = (t / bx) % by;
            threadIdx.z = t / (bx * by);
        }
        f(std::get<I>(cells)...);
    }
}
template <typename... A>
void run_threads(void (*f)(A...), void** args, const unsigned* order, unsigned n) {
    run_threads_impl(f, args, order, n, std::index_sequence_for<A...>{});
}
}  // namespace kata

// Where this library's static __shared__ arrays lie (kata_shared; both 0 when it has none): the
// runtime fills them with garbage before each block (runtime.cpp, fill_shared_garbage). Returned
// in registers and never traced: the runtime calls it outside any thread.
struct kata_range {
    uintptr_t lo, hi;
};
extern "C" char __start_kata_shared[] __attribute__((weak, visibility("hidden")));
extern "C" char __stop_kata_shared[] __attribute__((weak, visibility("hidden")));
#if defined(KATA_TRACE_BUILD) && defined(__clang__)
#define KATA_UNTRACED __attribute__((visibility("default"), no_sanitize("coverage")))
#elif defined(KATA_TRACE_BUILD)
#define KATA_UNTRACED __attribute__((visibility("default"), no_sanitize_thread))
#else
#define KATA_UNTRACED __attribute__((visibility("default")))
#endif
extern "C" KATA_UNTRACED kata_range kata_shared_statics(void) {
    return kata_range{reinterpret_cast<uintptr_t>(__start_kata_shared),
                      reinterpret_cast<uintptr_t>(__stop_kata_shared)};
}
