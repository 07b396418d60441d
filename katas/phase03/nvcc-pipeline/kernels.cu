// Sample kernels for the nvcc-pipeline kata.
#include <cstdint>

// A plain extern "C" kernel: its name is not mangled.
extern "C" __global__ void saxpy(int n, float a, const float *x, float *y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = a * x[i] + y[i];
    }
}

// A device function: -lineinfo records where it was inlined (`.loc ... inlined_at ...`).
__device__ float softsign(float v) {
    return v / (1.0f + fabsf(v));
}

extern "C" __global__ void squash(float *x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        x[i] = softsign(x[i]);
    }
}

// Shared memory and a barrier: a block-wide sum.
__global__ void block_sum(const float *in, float *out, int n) {
    __shared__ float tile[256];
    int t = threadIdx.x;
    int i = blockIdx.x * blockDim.x + t;
    tile[t] = i < n ? in[i] : 0.0f;
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride >>= 1) {
        if (t < stride) {
            tile[t] += tile[t + stride];
        }
        __syncthreads();
    }
    if (t == 0) {
        out[blockIdx.x] = tile[0];
    }
}

namespace stencil {
// A template: the mangled name carries its arguments.
template <int RADIUS, typename T>
__global__ void blur(const T *in, T *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= RADIUS && i < n - RADIUS) {
        T acc = 0;
#pragma unroll
        for (int k = -RADIUS; k <= RADIUS; ++k) {
            acc += in[i + k];
        }
        out[i] = acc / (2 * RADIUS + 1);
    }
}
template __global__ void blur<3, float>(const float *, float *, int);
template __global__ void blur<2, double>(const double *, double *, int);
}  // namespace stencil

// A local array indexed by a runtime value cannot live in registers: it goes to local memory
// (the "stack frame" of ptxas -v), which is not the same thing as a spill.
__global__ void
histogram_local(const uint32_t *in, uint32_t *out, int n, int shift) {
    uint32_t bins[64];
    for (int b = 0; b < 64; ++b) bins[b] = 0;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        bins[(in[i] >> shift) & 63] += 1;
    }
    for (int b = 0; b < 64; ++b) atomicAdd(&out[b], bins[b]);
}
