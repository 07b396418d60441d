// Types shared by kata_cuda.h (compiled with the learner's kernels) and runtime.cpp.
#pragma once
#include <cstddef>
#include <cstdint>

struct uint3 {
    unsigned x, y, z;
};

struct dim3 {
    unsigned x, y, z;
    constexpr dim3(unsigned vx = 1, unsigned vy = 1, unsigned vz = 1) : x(vx), y(vy), z(vz) {}
    constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
    constexpr operator uint3() const { return uint3{x, y, z}; }
};

// Warp collectives, one entry point in the runtime (kata_warp_op).
enum {
    KATA_WOP_SHFL = 1,
    KATA_WOP_SHFL_UP = 2,
    KATA_WOP_SHFL_DOWN = 3,
    KATA_WOP_SHFL_XOR = 4,
    KATA_WOP_BALLOT = 5,
    KATA_WOP_ANY = 6,
    KATA_WOP_ALL = 7,
    KATA_WOP_SYNC = 8,
    KATA_WOP_ACTIVEMASK = 9,
    KATA_WOP_REDUCE_ADD = 10,
    KATA_WOP_REDUCE_MIN = 11,
    KATA_WOP_REDUCE_MAX = 12,
};

extern "C" {
extern uint3 threadIdx;
extern uint3 blockIdx;
extern dim3 blockDim;
extern dim3 gridDim;
void kata_syncthreads(int line);
int kata_syncthreads_op(int line, int op, int pred);  // op 0 count, 1 and, 2 or
uint64_t kata_warp_op(int line, int op, unsigned mask, uint64_t value, int arg, int width);
void* kata_dynamic_shared(void);
void kata_trap(int line);
unsigned long long kata_clock64(void);
}
